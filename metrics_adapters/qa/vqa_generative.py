"""The paper's two remaining VQA backends: Fuyu-8b and mPLUG-Owl (LLaMA-7b).

- :class:`FuyuVQA`: ``adept/fuyu-8b`` through transformers (``FuyuForCausalLM`` +
  ``FuyuProcessor``): the image's patches go straight into the decoder, the prompt is the
  question and a newline (the processor appends the begin-of-answer token), greedy decoding.
- :class:`MplugOwlVQA`: ``MAGAer13/mplug-owl-llama-7b`` (the mPLUG-Owl 7b checkpoint of the TS2
  paper's appendix A.2). transformers has no mPLUG-Owl class and the checkpoint ships no remote
  code, so it loads through mPLUG-Owl's own package (``mplug_owl``, installed from
  github.com/X-PLUG/mPLUG-Owl; it is not on PyPI) with the prompt format of its README.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .vqa import VQAError, VQARequest, _HFBackend, format_prompt

__all__ = ["FuyuVQA", "MplugOwlVQA", "MPLUG_PROMPT"]


class FuyuVQA(_HFBackend):
    """Fuyu (``FuyuForCausalLM``; default ``adept/fuyu-8b``, the paper's Fuyu).

    Parameters
    ----------
    model : str
        Hub id or local folder.
    template : str
        Text after the image; Fuyu's VQA prompt is the question followed by a newline.
    max_new_tokens, num_beams, batch_size, revision : as for the other transformers backends.
    """

    def __init__(self, model: str = "adept/fuyu-8b", template: str = "{question}\n", **kw: Any) -> None:
        super().__init__(model, template=template, **kw)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from transformers import FuyuForCausalLM, FuyuProcessor

        if self._net is None:
            self._load_pair(FuyuProcessor, FuyuForCausalLM, device, dtype)

    def _inputs(self, images: Sequence[Any], texts: Sequence[str]):
        import inspect

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
        return [s.strip() for s in self._proc.batch_decode(out[:, n_in:], skip_special_tokens=True)]

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


# The conversation format of mPLUG-Owl's README (one image, one question).
MPLUG_PROMPT = ("The following is a conversation between a curious human and AI assistant. The assistant gives "
                "helpful, detailed, and polite answers to the user's questions.\nHuman: <image>\nHuman: {text}\nAI: ")


class MplugOwlVQA(_HFBackend):
    """mPLUG-Owl (``MplugOwlForConditionalGeneration`` of the ``mplug_owl`` package; default
    ``MAGAer13/mplug-owl-llama-7b``, the paper's mPLUG-Owl 7b).

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
            raise ImportError("MplugOwlVQA needs mPLUG-Owl's own package (not on PyPI): pip install "
                              "'git+https://github.com/X-PLUG/mPLUG-Owl.git#subdirectory=mPLUG-Owl'") from e
        from ..chat import load_pretrained

        self._net, tok = load_pretrained(MplugOwlForConditionalGeneration, MplugOwlTokenizer, self.model,
                                         revision=self.revision, device=device, dtype=dtype, owner="MplugOwlVQA",
                                         option="metric.vqa.model")
        tok.padding_side = "left"
        kw = {"revision": self.revision} if self.revision else {}
        self._proc = MplugOwlProcessor(MplugOwlImageProcessor.from_pretrained(self.model, **kw), tok)
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
