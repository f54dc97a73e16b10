"""Visual question answering backends: one interface, image + question [+ choices] -> free-form answer.

Backends (all batched, all loading lazily in :meth:`VQABackend.load`):

- :class:`BlipVQA`: transformers ``BlipForQuestionAnswering`` (``Salesforce/blip-vqa-base``, the
  paper's BLIP1);
- :class:`InstructBlipVQA`: ``InstructBlipForConditionalGeneration``
  (``Salesforce/instructblip-flan-t5-xl``);
- :class:`ChatVQA`: LLaVA-style ``AutoModelForImageTextToText`` with the processor's chat
  template (``llava-hf/llava-1.5-7b-hf``; a ``system_prompt`` gives the paper's "alt" variant);
- :class:`OpenAIVQA`: any OpenAI-compatible vision chat endpoint (image sent as base64), through
  the shared :class:`metrics_adapters.api.ChatClient` (timeouts, retries, key from an env var);
- :class:`ReplayVQA`: answers read from a recorded file (``id, image, question_id, raw_answer``,
  headerless, as the released ``*_raw_answers.csv``), so matching and accumulation can be re-run
  without any model and without image files.

A backend's :meth:`~VQABackend.fingerprint` holds everything that changes an answer (model id,
revision, prompt template, decoding); it keys the shared answer cache (:mod:`.cache`).
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..hub import HubModel
from ..model_part import ModelPart

__all__ = ["check_choice", "VQARequest", "VQAError", "VQABackend", "BlipVQA", "InstructBlipVQA", "ChatVQA", "OpenAIVQA",
           "ReplayVQA", "format_prompt", "normalize_image_name"]

log = logging.getLogger(__name__)


class VQAError(RuntimeError):
    """One question could not be answered (no recorded answer, API failure, ...)."""


@dataclass(frozen=True)
class VQARequest:
    """One question about one image.

    ``image`` is a decoded RGB ``PIL.Image.Image`` (``None`` for backends that do not look at
    pixels); ``seg_id``, ``image_id`` and ``question_id`` identify the request for replay.
    """

    question: str
    choices: tuple[str, ...] | None = None
    image: Any = None
    image_id: str | None = None
    seg_id: str | None = None
    question_id: str | None = None


def check_choice(owner: str, key: str, value: str, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``, else a ValueError naming ``owner`` and ``key``."""
    if value not in allowed:
        raise ValueError(f"{owner}: expected {key} in {list(allowed)}, got {value!r}")
    return value


def format_prompt(template: str, question: str, choices: Sequence[str] | None) -> str:
    """Fill ``{question}`` and ``{choices}`` (comma-joined) in a prompt template."""
    return template.format(question=question, choices=", ".join(choices or ()))


class VQABackend(ModelPart, ABC):
    """Base class of VQA backends.

    Class attributes
    ----------------
    needs_images : bool
        False only for backends that never look at pixels (replay).
    cacheable : bool
        Whether answers go to the shared answer cache (replay: no, it is a cache already).
    """

    needs_images: bool = True
    cacheable: bool = True
    fingerprint_key = "backend"

    def __init__(self, template: str = "{question}", batch_size: int = 16) -> None:
        self.template = str(template)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"expected batch_size >= 1, got {batch_size}")
        self.n_model_calls = 0  # questions actually sent to a model (not cache hits)
        self.device = "cpu"

    @property
    def uses_choices(self) -> bool:
        """Whether the choices are part of the model's input (then they key the cache)."""
        return "{choices}" in self.template

    def settings(self) -> dict[str, Any]:
        """Everything that changes an answer (subclasses extend)."""
        return {"template": self.template}

    def _check_images(self, requests: list[VQARequest]) -> None:
        for r in requests:
            if r.image is None:
                raise VQAError(f"{type(self).__name__}: expected an image for question {r.question!r} "
                               f"(image {r.image_id}), got none")

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.device = device

    def answer(self, requests: Sequence[VQARequest]) -> list[str | VQAError]:
        """Answers in request order; a request that fails gets a :class:`VQAError` (the others go on)."""
        out: list[str | VQAError] = []
        for i in range(0, len(requests), self.batch_size):
            chunk = list(requests[i:i + self.batch_size])
            out.extend(self._answer_batch(chunk))
            self.n_model_calls += len(chunk)
        return out

    @abstractmethod
    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        """Answer one batch (at most ``batch_size`` requests)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings()})"


class _HFBackend(VQABackend):
    """Shared plumbing of the transformers backends."""

    def __init__(self, model: str, revision: str | None = None, max_new_tokens: int = 20, num_beams: int = 1,
                 template: str = "{question}", batch_size: int = 16) -> None:
        super().__init__(template=template, batch_size=batch_size)
        if not model:
            raise ValueError(f"{type(self).__name__}: expected a model (hub id or local folder), got {model!r}")
        self.model = str(model)
        self.revision = revision
        self.max_new_tokens = int(max_new_tokens)
        self.num_beams = int(num_beams)
        self._net = None
        self._proc = None

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "model": self.model, "revision": self.revision,
                "max_new_tokens": self.max_new_tokens, "num_beams": self.num_beams, "decoding": "greedy"
                if self.num_beams == 1 else "beam"}

    def model_ids(self) -> dict[str, Any]:
        return {"vqa_model": self.model, "vqa_revision": self.revision}

    def hub_models(self) -> tuple[HubModel, ...]:
        return (HubModel(self.model, "model", self.revision),)

    def n_params(self) -> float | None:
        from ..chat import count_params

        return count_params(self._net)

    def _load_pair(self, proc_cls, model_cls, device: str, dtype: str | None, **kw: Any) -> None:
        from ..hub import load_pretrained

        self._net, self._proc = load_pretrained(model_cls, proc_cls, self.model, revision=self.revision, device=device,
                                                dtype=dtype, owner=type(self).__name__, option="metric.vqa.model", **kw)
        self.device = device

    def unload(self) -> None:
        self._net = None
        self._proc = None

    def _generate(self, inputs, **decoding: Any) -> Any:
        """``generate`` with this backend's length and beams; greedy unless ``decoding`` says otherwise."""
        import torch

        kw = {"max_new_tokens": self.max_new_tokens, "num_beams": self.num_beams, "do_sample": False, **decoding}
        with torch.inference_mode():
            return self._net.generate(**inputs, **kw)

    def _texts(self, questions: Sequence[str], template: str | None, system: str | None) -> list[str]:
        """``questions`` in ``template`` (default the backend's own); backends without a chat
        template take no system message."""
        if system is not None:
            raise ValueError(f"{type(self).__name__}: expected no system message (the model has no chat template), "
                             f"got {system!r}")
        return [format_prompt(self.template if template is None else template, q, None) for q in questions]

    def _encode_distinct(self, images: Sequence[Any], texts: list[str]) -> tuple[Any, list[int]]:
        """Processor inputs with each distinct image of the batch once (BLIP-style towers see each
        image once, :mod:`.image_reuse`) and the index that repeats its features per question."""
        from .image_reuse import distinct_images

        uniq, index = distinct_images(images)
        inputs = self._proc(images=uniq, text=texts, return_tensors="pt", padding=True).to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self._net.dtype)
        return inputs, index


class BlipVQA(_HFBackend):
    """BLIP VQA (``BlipForQuestionAnswering``): the question encoder + answer decoder of BLIP.

    Parameters
    ----------
    model : str
        Hub id (default ``Salesforce/blip-vqa-base``) or a local folder with processor files.
    revision : str, optional
        Hub revision (commit/tag), part of the fingerprint.
    max_new_tokens, num_beams : int
        Decoding of the answer (greedy by default).
    template : str
        Text given as the question; ``{question}`` (and optionally ``{choices}``).
    batch_size : int
        Questions per forward pass.
    """

    def __init__(self, model: str = "Salesforce/blip-vqa-base", **kw: Any) -> None:
        super().__init__(model, **kw)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from transformers import BlipForQuestionAnswering, BlipProcessor

        if self._net is None:
            self._load_pair(BlipProcessor, BlipForQuestionAnswering, device, dtype)
            self._proc.tokenizer.padding_side = "right"  # blip_question_states trims each row's padding

    def settings(self) -> dict[str, Any]:
        # Batches are split by question length (see _question_states): answers as asked alone.
        return {**super().settings(), "batching": "by_question_length"}

    def _question_states(self, images: Sequence[Any], texts: list[str]):
        """``(rows, question states)`` per group of equal-length questions (:func:`.image_reuse.blip_question_states`)."""
        from .image_reuse import blip_question_states

        inp, index = self._encode_distinct(images, texts)
        return blip_question_states(self._net, inp, index)

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        import torch

        self._check_images(requests)
        net = self._net
        texts = [format_prompt(self.template, r.question, r.choices) for r in requests]
        out: list[str | VQAError] = [""] * len(requests)
        with torch.inference_mode():
            for rows, q in self._question_states([r.image for r in requests], texts):
                start = torch.full((len(rows), 1), net.decoder_start_token_id, dtype=torch.long, device=q.device)
                ids = net.text_decoder.generate(
                    input_ids=start, eos_token_id=net.config.text_config.sep_token_id,
                    pad_token_id=net.config.text_config.pad_token_id, encoder_hidden_states=q,
                    encoder_attention_mask=torch.ones(q.shape[:-1], dtype=torch.long, device=q.device),
                    max_new_tokens=self.max_new_tokens, num_beams=self.num_beams, do_sample=False)
                for r, text in zip(rows, self._proc.batch_decode(ids, skip_special_tokens=True), strict=True):
                    out[r] = text.strip()
        return out

    def answer_logprobs(self, images: Sequence[Any], questions: Sequence[str],
                        candidates: Sequence[str] = ("yes", "no")) -> np.ndarray:
        """Log-probability of each candidate's first token as the answer decoder's first token, shape
        ``(len(questions), len(candidates))`` (see :mod:`.logprobs`); the steps of
        :meth:`_answer_batch`: image -> question encoder -> answer decoder from its start token."""
        from .logprobs import answer_logprobs

        return answer_logprobs(self, images, questions, candidates, self._next_logits)

    def _next_logits(self, images: list[Any], questions: list[str]):
        return self.answer_logits(images, questions)[:, 0]

    def answer_logits(self, images: Sequence[Any], questions: Sequence[str], prefix: Sequence[int] = (), *,
                      template: str | None = None, system: str | None = None):
        """Teacher-forced logits ``(n, len(prefix) + 1, vocab)`` of one batch (:mod:`.logprobs`): the
        answer decoder fed ``[start, *prefix]``."""
        import torch

        net = self._net
        out = None
        for rows, q in self._question_states(list(images), self._texts(questions, template, system)):
            ids = torch.tensor([[net.decoder_start_token_id, *prefix]] * len(rows), dtype=torch.long, device=q.device)
            logits = net.text_decoder(input_ids=ids, encoder_hidden_states=q).logits
            if out is None:
                out = logits.new_empty((len(questions), *logits.shape[1:]))
            out[torch.as_tensor(rows, device=logits.device)] = logits
        return out


class InstructBlipVQA(_HFBackend):
    """InstructBLIP (``InstructBlipForConditionalGeneration``; default the paper's flan-t5-xl).

    The question is wrapped in ``template`` (default ``"Question: {question} Short answer:"``,
    the short-answer VQA prompt of the InstructBLIP paper).
    """

    def __init__(self, model: str = "Salesforce/instructblip-flan-t5-xl",
                 template: str = "Question: {question} Short answer:", **kw: Any) -> None:
        super().__init__(model, template=template, **kw)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from transformers import (
            InstructBlipForConditionalGeneration,
            InstructBlipProcessor,
        )

        if self._net is None:
            self._load_pair(InstructBlipProcessor, InstructBlipForConditionalGeneration, device, dtype)
            if self._net.config.use_decoder_only_language_model:
                self._proc.tokenizer.padding_side = "left"  # the next token is read at the last position

    def answer_logprobs(self, images: Sequence[Any], questions: Sequence[str],
                        candidates: Sequence[str] = ("Yes", "No")) -> np.ndarray:
        """Log-probability of each candidate's first token as the first answer token, shape
        ``(len(questions), len(candidates))`` (see :mod:`.logprobs`): for a T5 language model the
        first decoder step, for a decoder-only one the position after the prompt."""
        from .logprobs import answer_logprobs

        return answer_logprobs(self, images, questions, candidates, self._next_logits)

    def _next_logits(self, images: list[Any], questions: list[str]):
        return self.answer_logits(images, questions)[:, 0]

    def answer_logits(self, images: Sequence[Any], questions: Sequence[str], prefix: Sequence[int] = (), *,
                      template: str | None = None, system: str | None = None):
        """Teacher-forced logits ``(n, len(prefix) + 1, vocab)`` of one batch (:mod:`.logprobs`): a T5
        language model's decoder fed ``[start, *prefix]`` (t2v_metrics passes the answer as ``labels``,
        which T5 shifts right the same way); a decoder-only one with ``prefix`` after the prompt."""
        import torch

        from .image_reuse import repeat_vision_outputs
        from .logprobs import append_tokens

        texts = self._texts(questions, template, system)
        inputs, index = self._encode_distinct(images, texts)
        with repeat_vision_outputs(self._net.vision_model, index):
            if self._net.config.use_decoder_only_language_model:
                return self._net(**append_tokens(inputs, prefix)).logits[:, -(len(prefix) + 1):, :]
            start = self._net.config.text_config.decoder_start_token_id
            dec = torch.tensor([[start, *prefix]] * len(texts), dtype=torch.long, device=self.device)
            return self._net(**inputs, decoder_input_ids=dec).logits

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        from .image_reuse import repeat_vision_outputs

        self._check_images(requests)
        texts = [format_prompt(self.template, r.question, r.choices) for r in requests]
        inputs, index = self._encode_distinct([r.image for r in requests], texts)
        with repeat_vision_outputs(self._net.vision_model, index):
            out = self._generate(inputs)
        # Decoder-only language models echo the prompt; encoder-decoder (T5) ones do not.
        if not self._net.config.use_decoder_only_language_model:
            return [s.strip() for s in self._proc.batch_decode(out, skip_special_tokens=True)]
        n_in = inputs["input_ids"].shape[1]
        return [s.strip() for s in self._proc.batch_decode(out[:, n_in:], skip_special_tokens=True)]


class ChatVQA(_HFBackend):
    """LLaVA-style chat VLM: a :class:`~metrics_adapters.chat.TransformersChatModel` (``kind=vlm``,
    ``AutoModelForImageTextToText`` + the processor's chat template) asked one question per image.

    Parameters
    ----------
    model : str
        Hub id (default ``llava-hf/llava-1.5-7b-hf``) or local folder.
    template : str
        User text after the image, with ``{question}`` (and optionally ``{choices}``).
    system_prompt : str, optional
        A system message, e.g. "Answer with a single word or phrase." (the paper's
        "LLaVA 1.5 (alt)" asks for concise answers this way).
    prefix_cache : {"auto", "on", "off"}
        The questions of one image in a batch share one forward over the system + image prefix
        (:mod:`metrics_adapters.chat.prefix_cache`); ``auto`` does so for LLaVA.
    """

    def __init__(self, model: str = "llava-hf/llava-1.5-7b-hf", template: str = "{question}",
                 system_prompt: str | None = None, trust_remote_code: bool = False, prefix_cache: str = "auto",
                 **kw: Any) -> None:
        super().__init__(model, template=template, **kw)
        from ..chat import TransformersChatModel

        self.system_prompt = system_prompt
        self.chat = TransformersChatModel(self.model, kind="vlm", revision=self.revision,
                                          max_new_tokens=self.max_new_tokens, num_beams=self.num_beams,
                                          system_prompt=system_prompt, trust_remote_code=trust_remote_code,
                                          batch_size=self.batch_size, prefix_cache=prefix_cache)
        self.chat.option = "metric.vqa.model"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "system_prompt": self.system_prompt, "prefix_cache": self.chat.prefix_cache}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.chat.load(device, dtype)
        self._net, self._proc, self.device = self.chat.model, self.chat.processor, device

    def unload(self) -> None:
        self.chat.unload()
        super().unload()

    def request(self, r: VQARequest):
        from ..chat import ChatRequest

        return ChatRequest(format_prompt(self.template, r.question, r.choices), images=(r.image,))

    def conversation(self, request: VQARequest) -> list[dict[str, Any]]:
        return self.chat.conversation(self.request(request))

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        self._check_images(requests)
        if self.chat.model is None:
            self.load(self.device)
        res = self.chat.generate([self.request(r) for r in requests])
        return [r.text if r.ok else VQAError(f"{q.image_id}: {r.error}") for q, r in zip(requests, res, strict=True)]

    def answer_logprobs(self, images: Sequence[Any], questions: Sequence[str],
                        candidates: Sequence[str] = ("Yes", "No")) -> np.ndarray:
        """Log-probability of each candidate's first token as the first answer token, shape
        ``(len(questions), len(candidates))`` (see :mod:`.logprobs`)."""
        from .logprobs import answer_logprobs

        return answer_logprobs(self, images, questions, candidates, self._next_logits)

    def _next_logits(self, images: list[Any], questions: list[str]):
        return self.answer_logits(images, questions)[:, 0]

    def answer_logits(self, images: Sequence[Any], questions: Sequence[str], prefix: Sequence[int] = (), *,
                      template: str | None = None, system: str | None = None):
        """Teacher-forced logits ``(n, len(prefix) + 1, vocab)`` of one batch (:mod:`.logprobs`):
        ``prefix`` appended after the chat template's generation prompt (left padding: the answer
        starts at the same column in every row). ``system`` replaces the backend's system prompt."""
        from ..chat import ChatRequest
        from .logprobs import append_tokens

        if len(images) != len(questions):
            raise ValueError(f"expected one image per question, got {len(images)} and {len(questions)}")
        t = self.template if template is None else template
        reqs = [ChatRequest(format_prompt(t, q, None), images=(im,), system=system) for im, q in zip(images, questions, strict=True)]
        enc = append_tokens(self.chat.encode(reqs), prefix)
        return self.chat.model(**enc).logits[:, -(len(prefix) + 1):, :]


class OpenAIVQA(VQABackend):
    """A vision model behind an OpenAI-compatible ``/chat/completions`` endpoint
    (a :class:`~metrics_adapters.chat.HTTPChatModel`).

    Parameters
    ----------
    base_url, model : str
        Endpoint root (``https://api.openai.com/v1``, a local vLLM server, ...) and model name.
    api_key_env : str or None
        Environment variable holding the key (never put a key in a config).
    template : str
        User text, with ``{question}`` (and optionally ``{choices}``).
    system_prompt : str, optional
    max_new_tokens, temperature : decoding (part of the fingerprint); ``max_tokens`` is the old
        name of ``max_new_tokens``.
    timeout, max_retries : request policy (not in the fingerprint).
    max_concurrency : int
        Requests in flight at once; each call to :meth:`answer` is sent in chunks of
        ``max(batch_size, max_concurrency)`` so the pool stays full.
    n_params : float, optional
        Assumed parameter count, for the FLOPs estimate only.
    image_format : str
        How images are encoded in the request (PNG: lossless).
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 template: str = "{question} Answer with a single word or phrase.", system_prompt: str | None = None,
                 max_new_tokens: int | None = None, temperature: float = 0.0, timeout: float = 60.0,
                 max_retries: int = 4, max_concurrency: int = 4, n_params: float | None = None,
                 image_format: str = "PNG", batch_size: int = 16, max_tokens: int | None = None) -> None:
        from ..chat import HTTPChatModel, renamed_options

        super().__init__(template=template, batch_size=batch_size)
        mnt = renamed_options("OpenAIVQA", {"max_tokens": max_tokens}, {"max_tokens": "max_new_tokens"},
                              max_new_tokens=max_new_tokens)["max_new_tokens"]
        self.chat = HTTPChatModel(base_url, model, api_key_env=api_key_env, max_new_tokens=20 if mnt is None else mnt,
                                  temperature=temperature, system_prompt=system_prompt, timeout=timeout,
                                  max_retries=max_retries, max_concurrency=max_concurrency, n_params=n_params,
                                  image_format=image_format)
        # Keep the thread pool full: a chunk smaller than the pool would leave workers idle.
        self.batch_size = max(self.batch_size, self.chat.max_concurrency)

    def settings(self) -> dict[str, Any]:
        c = self.chat
        return {**super().settings(), "base_url": c.base_url, "model": c.model, "system_prompt": c.system_prompt,
                "max_new_tokens": c.max_new_tokens, "temperature": c.temperature, "image_format": c.image_format}

    def model_ids(self) -> dict[str, Any]:
        return {"vqa_model": self.chat.model, "vqa_endpoint": self.chat.base_url}

    def n_params(self) -> float | None:
        return self.chat.n_params()

    def usage(self) -> dict[str, Any]:
        return self.chat.usage()

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.chat.load()
        self.device = device

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        from ..chat import ChatRequest

        self._check_images(requests)
        res = self.chat.generate([ChatRequest(format_prompt(self.template, r.question, r.choices), images=(r.image,))
                                  for r in requests])
        return [x.text.strip() if x.ok else VQAError(f"{r.image_id}: {x.error}") for r, x in zip(requests, res, strict=True)]


def normalize_image_name(name: str) -> str:
    """Image id without a leading ``./`` or ``images/`` (the released DSG answers lack the prefix).

    Examples
    --------
    >>> normalize_image_name("images/000-01.jpg"), normalize_image_name("000-01.jpg")
    ('000-01.jpg', '000-01.jpg')
    """
    s = str(name).strip().replace("\\", "/")
    while s.startswith("./"):
        s = s[2:]
    if s.startswith("images/"):
        s = s[len("images/"):]
    return s


class ReplayVQA(VQABackend):
    """Answers read from a recorded file instead of a model.

    Parameters
    ----------
    answers : path
        CSV with rows ``id, image, question_id, raw_answer`` (SEG id, image name with or without
        the ``images/`` prefix, question id within the SEG's set, free-form answer); headerless
        as released, or with exactly that header.

    Notes
    -----
    Answers are looked up by (SEG id, image name, question id), so the question file must be the
    one the answers were recorded for; the file's content hash is in the fingerprint. Cells are
    read as text: an answer "none" or "NA" stays that string. A missing answer fails its image
    with a :class:`VQAError` naming the file, SEG, image and question.

    Raises
    ------
    FileNotFoundError, ValueError
        From :meth:`load`: no file, wrong number of columns, or two different answers recorded
        for one (SEG, image, question).
    """

    needs_images = False
    cacheable = False
    COLUMNS = ("id", "image", "question_id", "raw_answer")

    def __init__(self, answers: str, model_name: str | None = None, n_params: float | None = None) -> None:
        super().__init__(template="{question}", batch_size=1 << 30)
        if not answers:
            raise ValueError("ReplayVQA: expected answers=FILE (a recorded *_raw_answers.csv), got none")
        self.answers = str(answers)
        self.model_name = model_name  # which model recorded the answers, for run.json only
        self._n_params = n_params
        self._table: dict[tuple[str, str, str], str] | None = None
        self._sha: str | None = None

    def _file_sha(self) -> str:
        if self._sha is None:
            p = Path(self.answers).expanduser()
            if not p.is_file():
                raise FileNotFoundError(f"ReplayVQA: expected a recorded answers file at {p}, found none")
            self._sha = hashlib.sha256(p.read_bytes()).hexdigest()
        return self._sha

    def settings(self) -> dict[str, Any]:
        return {"answers_sha256": self._file_sha()}

    def model_ids(self) -> dict[str, Any]:
        return {"vqa_model": self.model_name or "replay", "vqa_answers": self.answers}

    def n_params(self) -> float | None:
        return None if self._n_params is None else float(self._n_params)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self._table is None:
            self._table = self.read(self.answers)
        self.device = device

    @classmethod
    def read(cls, path: str | Path) -> dict[tuple[str, str, str], str]:
        """``(SEG id, normalised image name, question id) -> answer`` from a recorded file."""
        import pandas as pd

        p = Path(path).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"ReplayVQA: expected a recorded answers file at {p}, found none")
        try:
            df = pd.read_csv(p, header=None, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
            raise ValueError(f"{p}: could not parse as CSV: {e}") from e
        if df.shape[1] != 4:
            raise ValueError(f"{p}: expected 4 columns {list(cls.COLUMNS)}, got {df.shape[1]}")
        if [c.strip().lower() for c in df.iloc[0]] == list(cls.COLUMNS):
            df = df.iloc[1:]
        table: dict[tuple[str, str, str], str] = {}
        for line, (seg, img, qid, ans) in enumerate(df.itertuples(index=False), start=1):
            qid = qid.strip()
            if qid.lstrip("-").isdigit():
                qid = str(int(qid))
            key = (seg.strip(), normalize_image_name(img), qid)
            if key in table and table[key] != ans:
                raise ValueError(f"{p}, line {line}: expected one answer per (SEG, image, question), got "
                                 f"{table[key]!r} and {ans!r} for SEG {key[0]}, image {img}, question {qid}")
            table[key] = ans
        return table

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        if self._table is None:
            self.load()
        out: list[str | VQAError] = []
        for r in requests:
            key = (str(r.seg_id), normalize_image_name(r.image_id or ""), str(r.question_id))
            ans = self._table.get(key)
            if ans is None:
                out.append(VQAError(f"{self.answers}: expected a recorded answer for SEG {key[0]}, image {r.image_id}, "
                                    f"question {key[2]}, found none"))
            else:
                out.append(ans)
        return out

    def answer(self, requests: Sequence[VQARequest]) -> list[str | VQAError]:
        # Replay makes no model calls: do not count them.
        return self._answer_batch(list(requests))
