"""The paper's two remaining VQA backends, Fuyu-8b and mPLUG-Owl2 (LLaMA-2-7b), and mPLUG-Owl v1.

- :class:`FuyuVQA`: ``adept/fuyu-8b`` through transformers (``FuyuForCausalLM`` +
  ``FuyuProcessor``): the image's patches go straight into the decoder. By default the paper's
  prompt (the bare question), 512x512 resize and 30 new tokens; ``cleaning="paper"`` adds the
  authors' answer post-processing (config ``fuyu_paper``).
- :class:`MplugOwl2VQA`: ``MAGAer13/mplug-owl2-llama2-7b``, the model the T2IScoreScore authors
  ran as "mPLUG" (their ``src/_old/vqa_scores/mplug.py``), through the port in :mod:`.mplug_owl2`;
  their conversation template, square resize and answer length; greedy by default, their sampling
  (temperature 0.7, seeded) with ``decoding="sample"`` (config ``mplug_owl2_paper``).
- :class:`MplugOwl1VQA`: ``MAGAer13/mplug-owl-llama-7b`` (mPLUG-Owl v1, the checkpoint named in the
  TS2 paper's appendix A.2, which the authors' code does not run). transformers has no mPLUG-Owl
  class and the checkpoint ships no remote code, so it loads through mPLUG-Owl's own package
  (``mplug_owl``, installed from github.com/X-PLUG/mPLUG-Owl; it is not on PyPI) with the prompt
  format of its README. Config ``mplug_owl1``; the old name ``mplug`` is refused with the choice.

The authors' code quoted below: github.com/michaelsaxon/T2IScoreScore at 93ebf89 and
github.com/X-PLUG/mPLUG-Owl at 0f3068f (``mPLUG-Owl2/mplug_owl2``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .vqa import VQAError, VQARequest, _HFBackend, check_choice, format_prompt

__all__ = ["FuyuVQA", "MplugOwl1VQA", "MplugOwl2VQA", "MPLUG_PROMPT", "MPLUG_OWL2_PROMPT", "fuyu_paper_answer",
           "mplug_owl2_paper_answer", "renamed_backend"]

CLEANINGS = ("none", "paper")


def renamed_backend(old: str, new: list[str], note: str) -> None:
    """Target of a config whose name was retired: always raises, naming what to pick instead.

    Raises
    ------
    ValueError
        Always: ``metric.vqa=OLD was renamed ...`` with the new names and why.
    """
    raise ValueError(f"metric.vqa={old} was renamed: use {' or '.join(f'metric.vqa={n}' for n in new)} ({note})")


def fuyu_paper_answer(text: str) -> str:
    """The T2IScoreScore authors' Fuyu answer cleaning, on the decoded last ``max_new_tokens`` tokens.

    ``vqa_scores/fuyu_gen_raw_all.py:20`` (commit 398fa40, the script that wrote the released
    ``fuyu_*`` answers; the same line is ``src/_old/vqa_scores/fuyu.py:22``): keep what follows the
    last ``<s>``, newlines to spaces, keep what follows the last ``?`` (the decoded window can reach
    back into the question), strip ``\x04`` (Fuyu's begin-of-answer byte); then the CSV writer's comma
    removal (``fuyu_gen_raw_all.py:66``).

    Examples
    --------
    >>> fuyu_paper_answer("is the dog red?\x04 yes, it is")
    'yes it is'
    """
    out = str(text.strip().split("<s>")[-1].strip().replace("\n", " ").split("?")[-1]).strip("\x04").strip()
    return out.replace(",", "").strip()


def mplug_owl2_paper_answer(text: str) -> str:
    """The authors' mPLUG-Owl2 answer text: decoded with special tokens kept, so it ends in ``</s>``
    (``src/_old/vqa_scores/mplug.py:63``; every answer of the released ``mplug_*.csv`` does), then the
    CSV writer's comma removal (``src/_old/vqa_scores/run_vqascore.py:53``).

    Examples
    --------
    >>> mplug_owl2_paper_answer(" Yes, there is a dog.</s>")
    'Yes there is a dog.</s>'
    """
    return text.strip().replace(",", "").strip()


class FuyuVQA(_HFBackend):
    """Fuyu (``FuyuForCausalLM``; default ``adept/fuyu-8b``, the paper's Fuyu).

    Defaults are the T2IScoreScore authors' (``vqa_scores/fuyu_gen_raw_all.py:11-21``): the bare
    question as the prompt (the processor appends the begin-of-answer token), the image resized to
    512x512 and 30 new tokens, greedy.

    Parameters
    ----------
    model : str
        Hub id or local folder.
    template : str
        Text after the image (default the bare question; Adept's model card ends prompts with a newline).
    image_size : (int, int) or None
        ``(width, height)`` every image is resized to first (PIL's default filter, as the authors'
        ``Image.resize``); ``None``: native size (Fuyu takes any size).
    cleaning : {"none", "paper"}
        ``none``: decode the new tokens and strip. ``paper``: the authors' way, decode the last
        ``max_new_tokens`` tokens of prompt + answer and clean with :func:`fuyu_paper_answer`.
    max_new_tokens, num_beams, batch_size, revision : as for the other transformers backends.
    """

    def __init__(self, model: str = "adept/fuyu-8b", template: str = "{question}",
                 image_size: Sequence[int] | None = (512, 512), cleaning: str = "none", max_new_tokens: int = 30,
                 **kw: Any) -> None:
        super().__init__(model, template=template, max_new_tokens=max_new_tokens, **kw)
        if image_size is not None and (len(image_size) != 2 or min(int(v) for v in image_size) < 1):
            raise ValueError(f"FuyuVQA: expected image_size [width, height] of positive ints or null, got {image_size}")
        self.image_size = None if image_size is None else (int(image_size[0]), int(image_size[1]))
        self.cleaning = check_choice("FuyuVQA", "cleaning", cleaning, CLEANINGS)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "image_size": self.image_size, "cleaning": self.cleaning}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from transformers import FuyuForCausalLM, FuyuProcessor

        if self._net is None:
            self._load_pair(FuyuProcessor, FuyuForCausalLM, device, dtype)

    def _inputs(self, images: Sequence[Any], texts: Sequence[str]):
        import inspect

        if self.image_size is not None:
            images = [im.resize(self.image_size) for im in images]  # fuyu_gen_raw_all.py:13
        # The processor pads on the left itself (generation continues right after each prompt).
        # Newer processors return pixel_values (same logits) instead of the deprecated image_patches.
        kw = ({"return_legacy_image_output": False}
              if "return_legacy_image_output" in inspect.signature(self._proc.__call__).parameters else {})
        inputs = self._proc(images=list(images), text=list(texts), return_tensors="pt", **kw)
        inputs = inputs.to(self.device)
        for k in ("image_patches", "pixel_values"):
            if k in inputs:
                v = inputs[k]
                inputs[k] = [t.to(self._net.dtype) for t in v] if isinstance(v, list) else v.to(self._net.dtype)
        return inputs

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        self._check_images(requests)
        if self._net is None:
            self.load(self.device)
        inputs = self._inputs([r.image for r in requests],
                              [format_prompt(self.template, r.question, r.choices) for r in requests])
        out = self._generate(inputs)
        n_in = inputs["input_ids"].shape[1]
        tok = self._proc.tokenizer
        if self.cleaning == "none":
            return [s.strip() for s in self._proc.batch_decode(out[:, n_in:], skip_special_tokens=True)]
        # The authors ran one unpadded prompt at a time and decoded generation_output[:, -30:]: per row,
        # the prompt without its left padding, the answer up to its end token, then the last tokens.
        mask = inputs["attention_mask"]
        windows = []
        for i in range(len(requests)):
            seq = [*out[i, n_in - int(mask[i].sum()):n_in].tolist(), *_until_eos(out[i, n_in:].tolist(), tok.eos_token_id)]
            windows.append(seq[-self.max_new_tokens:])
        return [fuyu_paper_answer(s) for s in self._proc.batch_decode(windows, skip_special_tokens=True)]

    def answer_logprobs(self, images: Sequence[Any], questions: Sequence[str],
                        candidates: Sequence[str] = ("Yes", "No")) -> np.ndarray:
        """Log-probability of each candidate's first token as the first answer token, shape
        ``(len(questions), len(candidates))`` (see :mod:`.logprobs`)."""
        from .logprobs import answer_logprobs

        return answer_logprobs(self, images, questions, candidates, self._next_logits)

    def _next_logits(self, images: list[Any], questions: list[str]):
        texts = [format_prompt(self.template, q, None) for q in questions]
        return self._net(**self._inputs(images, texts)).logits[:, -1, :]  # the processor pads on the left

    def answer_logits(self, images: Sequence[Any], questions: Sequence[str], prefix: Sequence[int] = (), *,
                      template: str | None = None, system: str | None = None):
        """Teacher-forced logits ``(n, len(prefix) + 1, vocab)`` of one batch (:mod:`.logprobs`):
        ``prefix`` appended after the prompt (and the processor's begin-of-answer token)."""
        from .logprobs import append_tokens

        inputs = append_tokens(self._inputs(images, self._texts(questions, template, system)), prefix)
        return self._net(**inputs).logits[:, -(len(prefix) + 1):, :]


def _until_eos(ids: list[int], eos: int | None) -> list[int]:
    """Generated ids up to and including the first end token (what an unbatched run returns)."""
    if eos is not None and eos in ids:
        return ids[:ids.index(eos) + 1]
    return ids


# The conversation format of mPLUG-Owl's README (one image, one question).
MPLUG_PROMPT = ("The following is a conversation between a curious human and AI assistant. The assistant gives "
                "helpful, detailed, and polite answers to the user's questions.\nHuman: <image>\nHuman: {text}\nAI: ")


class MplugOwl1VQA(_HFBackend):
    """mPLUG-Owl v1 (``MplugOwlForConditionalGeneration`` of the ``mplug_owl`` package; default
    ``MAGAer13/mplug-owl-llama-7b``, the checkpoint named in the TS2 paper's appendix A.2; the
    authors' code runs mPLUG-Owl2, :class:`MplugOwl2VQA`).

    Parameters
    ----------
    model : str
        Hub id or local folder of an mPLUG-Owl (v1) checkpoint.
    template : str
        The question text put into :data:`MPLUG_PROMPT` (``{text}``).
    max_new_tokens, num_beams, batch_size, revision : as for the other transformers backends
        (greedy decoding, where the README samples: scores must be reproducible).

    Raises
    ------
    ImportError
        From :meth:`load`, when the ``mplug_owl`` package is missing (with how to install it).
    """

    def __init__(self, model: str = "MAGAer13/mplug-owl-llama-7b",
                 template: str = "{question} Answer with a single word or phrase.", **kw: Any) -> None:
        super().__init__(model, template=template, **kw)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "conversation": MPLUG_PROMPT}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._net is not None:
            return
        try:
            from mplug_owl.modeling_mplug_owl import MplugOwlForConditionalGeneration
            from mplug_owl.processing_mplug_owl import (
                MplugOwlImageProcessor,
                MplugOwlProcessor,
            )
            from mplug_owl.tokenization_mplug_owl import MplugOwlTokenizer
        except ImportError as e:
            raise ImportError("MplugOwl1VQA needs mPLUG-Owl's own package (not on PyPI): pip install "
                              "'git+https://github.com/X-PLUG/mPLUG-Owl.git#subdirectory=mPLUG-Owl'") from e
        from ..hub import load_pretrained, load_processor

        self._net, tok = load_pretrained(MplugOwlForConditionalGeneration, MplugOwlTokenizer, self.model,
                                         revision=self.revision, device=device, dtype=dtype, owner="MplugOwl1VQA",
                                         option="metric.vqa.model")
        tok.padding_side = "left"
        image_proc = load_processor(MplugOwlImageProcessor, self.model, revision=self.revision, owner="MplugOwl1VQA",
                                    option="metric.vqa.model")
        self._proc = MplugOwlProcessor(image_proc, tok)
        self.device = device

    def prompt(self, r: VQARequest) -> str:
        return MPLUG_PROMPT.format(text=format_prompt(self.template, r.question, r.choices))

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        self._check_images(requests)
        if self._net is None:
            self.load(self.device)
        inputs = self._proc(text=[self.prompt(r) for r in requests], images=[r.image for r in requests],
                            return_tensors="pt")
        inputs = {k: (v.to(self._net.dtype) if v.is_floating_point() else v).to(self.device) for k, v in inputs.items()}
        out = self._generate(inputs)
        # mPLUG-Owl generates from input embeddings: the output holds only the new tokens.
        return [s.strip() for s in self._proc.tokenizer.batch_decode(out, skip_special_tokens=True)]


# The authors' conversation for mPLUG-Owl2 with one image and one question: conv_templates["mplug_owl2"]
# (mplug_owl2/conversation.py:277-287: roles USER/ASSISTANT, sep " ", style TWO_NO_SYS, whose
# get_prompt is conversation.py:64-73) filled as in src/_old/vqa_scores/mplug.py:30-42 with
# DEFAULT_IMAGE_TOKEN + question (constants.py:9). {text} is the backend's template filled in.
MPLUG_OWL2_PROMPT = "USER: <|image|>{text} ASSISTANT:"
MPLUG_OWL2_IMAGE_TOKEN = "<|image|>"  # mplug_owl2/constants.py:9


class MplugOwl2VQA(_HFBackend):
    """mPLUG-Owl2 (default ``MAGAer13/mplug-owl2-llama2-7b``, the paper's "mPLUG" as its authors ran
    it, ``src/_old/vqa_scores/mplug.py``) through :class:`.mplug_owl2.MplugOwl2ForCausalLM`.

    Each image is converted to RGB, stretched to a square of its longest side and given to the
    checkpoint's ``CLIPImageProcessor`` (``mplug.py:32-36`` and ``mm_utils.py:40-44``); the prompt is
    :data:`MPLUG_OWL2_PROMPT`, tokenised as ``tokenizer_image_token`` does (``mm_utils.py:53-72``:
    each side of the image tag tokenised alone, one BOS); generation stops at ``</s>``.

    Parameters
    ----------
    model : str
        Hub id or local folder (``config.json``, weights, tokenizer and ``preprocessor_config.json``).
    template : str
        The user text after the image tag (default the bare question, as the authors).
    max_new_tokens : int
        Answer length limit (the authors' 50, ``mplug.py:50``).
    decoding : {"greedy", "sample"}
        ``greedy`` (default): reproducible answers that need no seed. ``sample``: the authors'
        ``do_sample=True, temperature=0.7`` (``mplug.py:49-58``) with ``top_k`` (50, what transformers
        4.31, their version, used when unset) and a seed; each question is sampled alone with a seed
        drawn from ``seed``, the image and the prompt, so an answer does not depend on batch or order.
    temperature, top_k, seed : sampling settings (in the fingerprint only when sampling).
    cleaning : {"none", "paper"}
        ``none``: decode without special tokens and strip. ``paper``: :func:`mplug_owl2_paper_answer`
        (the authors' text, ending in ``</s>``, commas removed).
    num_beams, batch_size, revision : as for the other transformers backends.

    Notes
    -----
    The authors loaded the model in 4-bit NF4 with fp16 compute (``mplug.py:17-24``,
    ``load_4bit=True``); this backend runs the dtype it is given (``dtype``/``device`` of the run).
    """

    def __init__(self, model: str = "MAGAer13/mplug-owl2-llama2-7b", template: str = "{question}",
                 max_new_tokens: int = 50, decoding: str = "greedy", temperature: float = 0.7, top_k: int = 50,
                 seed: int = 0, cleaning: str = "none", **kw: Any) -> None:
        super().__init__(model, template=template, max_new_tokens=max_new_tokens, **kw)
        self.decoding = check_choice("MplugOwl2VQA", "decoding", decoding, ("greedy", "sample"))
        self.cleaning = check_choice("MplugOwl2VQA", "cleaning", cleaning, CLEANINGS)
        if self.decoding == "sample" and (float(temperature) <= 0 or int(top_k) < 0 or self.num_beams != 1):
            raise ValueError(f"MplugOwl2VQA: sampling expects temperature > 0, top_k >= 0 and num_beams 1, got "
                             f"{temperature}, {top_k}, {self.num_beams}")
        self.temperature, self.top_k, self.seed = float(temperature), int(top_k), int(seed)
        self._image_processor = None

    def settings(self) -> dict[str, Any]:
        out = {**super().settings(), "conversation": MPLUG_OWL2_PROMPT, "resize": "square_longest_side",
               "cleaning": self.cleaning}
        if self.decoding == "sample":
            out.update(decoding="sample", temperature=self.temperature, top_k=self.top_k, seed=self.seed)
        return out

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._net is not None:
            return
        from transformers import AutoTokenizer, CLIPImageProcessor

        from ..hub import load_pretrained, load_processor
        from .mplug_owl2 import MplugOwl2ForCausalLM

        self._net, self._proc = load_pretrained(MplugOwl2ForCausalLM, AutoTokenizer, self.model, revision=self.revision,
                                                device=device, dtype=dtype, owner="MplugOwl2VQA",
                                                option="metric.vqa.model")
        # preprocessor_config.json (builder.py:122)
        self._image_processor = load_processor(CLIPImageProcessor, self.model, revision=self.revision,
                                               owner="MplugOwl2VQA", option="metric.vqa.model")
        self.device = device

    def unload(self) -> None:
        super().unload()
        self._image_processor = None

    def prompt(self, r: VQARequest) -> str:
        """The authors' prompt string for one request."""
        return MPLUG_OWL2_PROMPT.format(text=format_prompt(self.template, r.question, r.choices))

    def token_ids(self, prompt: str) -> list[int]:
        """``tokenizer_image_token(prompt, tokenizer, IMAGE_TOKEN_INDEX)`` (mm_utils.py:53-72): the text
        around each image tag tokenised alone, the first chunk's BOS kept once, one
        ``IMAGE_TOKEN_INDEX`` per tag."""
        from .mplug_owl2 import IMAGE_TOKEN_INDEX

        tok = self._proc
        chunks = [tok(c).input_ids if len(c) > 0 else [] for c in prompt.split(MPLUG_OWL2_IMAGE_TOKEN)]
        offset = 1 if chunks and chunks[0] and chunks[0][0] == tok.bos_token_id else 0
        ids = [chunks[0][0]] if offset else []
        sep = [IMAGE_TOKEN_INDEX] * (offset + 1)
        for x in [part for c in chunks for part in (c, sep)][:-1]:  # insert_separator, mm_utils.py:56-57
            ids.extend(x[offset:])
        return ids

    def pixel_values(self, image: Any):
        """``(3, H, W)`` float tensor: RGB, stretched to a square of the longest side (PIL's default
        filter, as ``image.resize((max_edge, max_edge))``), then the CLIP processor."""
        im = image.convert("RGB")
        side = max(im.size)
        im = im.resize((side, side))
        return self._image_processor.preprocess(im, return_tensors="pt")["pixel_values"][0]

    def _encode(self, requests: list[VQARequest]) -> dict[str, Any]:
        import torch

        from .mplug_owl2 import expand_image_tokens

        n_img = self._net.config.n_image_tokens
        rows = [expand_image_tokens(self.token_ids(self.prompt(r)), n_img) for r in requests]
        width = max(len(x) for x in rows)
        pad = self._proc.pad_token_id if self._proc.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (width - len(x)) + x for x in rows], device=self.device)  # left padding
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in rows], device=self.device)
        images = torch.stack([self.pixel_values(r.image) for r in requests]).to(self.device, self._net.dtype)
        return {"input_ids": ids, "attention_mask": mask, "images": images}

    def _request_seed(self, r: VQARequest) -> int:
        h = hashlib.sha256(f"{self.seed}\0{self.prompt(r)}\0{r.image.size}\0".encode())
        h.update(r.image.convert("RGB").tobytes())
        return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)

    def _decode(self, new_ids: list[int]) -> str:
        ids = _until_eos(new_ids, self._proc.eos_token_id)
        if self.cleaning == "paper":
            return mplug_owl2_paper_answer(self._proc.decode(ids, skip_special_tokens=False))
        return self._proc.decode(ids, skip_special_tokens=True).strip()

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        import torch

        self._check_images(requests)
        if self._net is None:
            self.load(self.device)
        if self.decoding == "greedy":
            inputs = self._encode(requests)
            out = self._generate(inputs)
            n_in = inputs["input_ids"].shape[1]
            return [self._decode(row[n_in:].tolist()) for row in out]
        answers: list[str | VQAError] = []
        for r in requests:  # one at a time, as the authors, each with its own seed
            inputs = self._encode([r])
            dev = torch.device(self.device)
            with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
                torch.manual_seed(self._request_seed(r))
                out = self._generate(inputs, do_sample=True, temperature=self.temperature, top_k=self.top_k,
                                     top_p=1.0)
            answers.append(self._decode(out[0, inputs["input_ids"].shape[1]:].tolist()))
        return answers
