"""Chat backends of the judges: a prompt (plus images) in, a reply and token counts out.

Two implementations behind one small interface (:class:`ChatBackend`):

- :class:`HTTPChatBackend`: any OpenAI-compatible endpoint through the shared
  :class:`metrics_adapters.api.ChatClient` (retries, concurrency, tokens and cost);
- :class:`TransformersChatBackend`: a local or hub model through transformers, either an
  image-text-to-text chat model (LLaVA-style, ``AutoModelForImageTextToText`` + processor chat
  template) or a text-only causal LM (``AutoModelForCausalLM`` + tokenizer chat template).
  Greedy decoding by default, batched with left padding.

A backend never raises for one bad request: :meth:`ChatBackend.generate` returns a
:class:`ChatResult` with ``error`` set, so the judge can record the failure for that image and
keep the others.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hub import require_model

__all__ = ["ChatRequest", "ChatResult", "ChatBackend", "HTTPChatBackend", "TransformersChatBackend", "DEFAULT_VLM",
           "DEFAULT_LLM", "DEFAULT_API_URL"]

log = logging.getLogger(__name__)

# Defaults of the judge metrics (kept equal to conf/judge_backend/*.yaml).
DEFAULT_VLM = "llava-hf/llava-1.5-7b-hf"
DEFAULT_LLM = "gpt-4o-mini"
DEFAULT_API_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ChatRequest:
    """One single-turn request: ``prompt`` text, optional images (PIL) and system message."""

    prompt: str
    images: tuple[Any, ...] = ()
    system: str | None = None


@dataclass(frozen=True)
class ChatResult:
    """A reply (``text``) or a failure (``error``), with the tokens it used."""

    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


class ChatBackend(ABC):
    """A chat model. Subclasses set ``vision`` (whether requests may carry images)."""

    vision: bool = False

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Everything that changes a reply (model, revision, decoding); no secrets."""

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:  # noqa: B027 - optional
        """Build clients / load weights; called by the judge's ``load``."""

    def unload(self) -> None:  # noqa: B027 - optional
        """Free the weights."""

    @abstractmethod
    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order; failures as ``ChatResult(error=...)``."""

    def usage(self) -> dict[str, Any]:
        """Token (and cost) totals so far, for ``run.json``."""
        return {}

    def model_ids(self) -> dict[str, Any]:
        return {}

    def params(self) -> float | None:
        """Parameter count (for the FLOPs estimate), when known."""
        return None


class HTTPChatBackend(ChatBackend):
    """An OpenAI-compatible chat endpoint (see :class:`metrics_adapters.api.ChatClient`).

    Parameters
    ----------
    base_url, model, api_key_env
        Endpoint, model name, and the environment variable holding the key (``None``: no auth).
    max_tokens, temperature, seed
        Decoding; ``temperature=0`` for reproducible judging. ``seed`` is sent when not ``None``.
    timeout, connect_timeout, max_retries, backoff_base, backoff_max, max_concurrency
        Client policy (see :class:`~metrics_adapters.api.ChatClient`).
    price_per_1k_prompt, price_per_1k_completion : float
        For the cost estimate in ``run.json``.
    params_billion : float, optional
        The model's (published or estimated) parameter count in billions, for FLOPs.
    vision : bool
        Whether the model takes images (a text-only LLM judge backend sets ``False``).
    image_format : str
        How images are encoded in requests (``PNG``: lossless).
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 max_tokens: int = 256, temperature: float = 0.0, seed: int | None = None,
                 timeout: float = 60.0, connect_timeout: float = 10.0, max_retries: int = 4,
                 backoff_base: float = 1.0, backoff_max: float = 60.0, max_concurrency: int = 4,
                 price_per_1k_prompt: float = 0.0, price_per_1k_completion: float = 0.0,
                 params_billion: float | None = None, vision: bool = True, image_format: str = "PNG") -> None:
        self.base_url = str(base_url)
        self.model = str(model)
        self.api_key_env = api_key_env
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.seed = None if seed is None else int(seed)
        self.client_kw = dict(timeout=timeout, connect_timeout=connect_timeout, max_retries=max_retries,
                              backoff_base=backoff_base, backoff_max=backoff_max, max_concurrency=max_concurrency,
                              price_per_1k_prompt=price_per_1k_prompt, price_per_1k_completion=price_per_1k_completion)
        self.params_billion = None if params_billion is None else float(params_billion)
        self.vision = bool(vision)
        self.image_format = str(image_format)
        self.client = None

    def settings(self) -> dict[str, Any]:
        return {"backend": "http", "base_url": self.base_url.rstrip("/"), "model": self.model,
                "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
                "image_format": self.image_format}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from ..api import ChatClient

        if self.client is None:
            self.client = ChatClient(self.base_url, self.model, api_key_env=self.api_key_env, **self.client_kw)

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.seed is not None:
            p["seed"] = self.seed
        return p

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        from ..api import APIError, user_message

        if self.client is None:
            self.load()
        convs = []
        for r in requests:
            if r.images and not self.vision:
                raise ValueError(f"backend {self.model!r} is configured text-only (vision: false) but got an image request")
            msgs = [{"role": "system", "content": r.system}] if r.system else []
            msgs.append(user_message(r.prompt, r.images, self.image_format))
            convs.append(msgs)
        out = []
        for resp in self.client.chat_many(convs, **self._params()):
            if isinstance(resp, APIError):
                out.append(ChatResult(None, error=str(resp)))
            else:
                out.append(ChatResult(resp.text, None, resp.prompt_tokens, resp.completion_tokens))
        return out

    def usage(self) -> dict[str, Any]:
        return {} if self.client is None else self.client.usage.to_dict()

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url.rstrip("/")}

    def params(self) -> float | None:
        return None if self.params_billion is None else self.params_billion * 1e9


@dataclass
class _Counts:
    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class TransformersChatBackend(ChatBackend):
    """A local or hub chat model through transformers.

    Parameters
    ----------
    model : str
        Hub id (``llava-hf/llava-1.5-7b-hf``, ``Qwen/Qwen2.5-1.5B-Instruct``) or local folder.
    kind : {"vlm", "lm"}
        ``vlm``: ``AutoModelForImageTextToText`` with ``AutoProcessor`` (images allowed);
        ``lm``: ``AutoModelForCausalLM`` with ``AutoTokenizer`` (text only).
    revision : str, optional
        Hub revision (part of the fingerprint).
    max_new_tokens : int
        Reply length cap.
    do_sample, temperature
        Decoding; greedy by default (reproducible judging).
    chat_template : str, optional
        A Jinja chat template for models that ship none.
    trust_remote_code : bool
        Passed to ``from_pretrained``.
    """

    def __init__(self, model: str, kind: str = "vlm", revision: str | None = None, max_new_tokens: int = 256,
                 do_sample: bool = False, temperature: float | None = None, chat_template: str | None = None,
                 trust_remote_code: bool = False) -> None:
        if kind not in ("vlm", "lm"):
            raise ValueError(f"expected kind 'vlm' or 'lm', got {kind!r}")
        self.model_name = str(model)
        self.kind = kind
        self.vision = kind == "vlm"
        self.revision = revision
        self.max_new_tokens = int(max_new_tokens)
        self.do_sample = bool(do_sample)
        self.temperature = None if temperature is None else float(temperature)
        self.chat_template = chat_template
        self.trust_remote_code = bool(trust_remote_code)
        self.model = None
        self.processor = None
        self.device = "cpu"
        self._n_params: float | None = None
        self.counts = _Counts()

    def settings(self) -> dict[str, Any]:
        return {"backend": "transformers", "model": self.model_name, "kind": self.kind, "revision": self.revision,
                "max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample,
                "temperature": self.temperature, "chat_template": self.chat_template}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self.model is not None:
            return
        import torch
        import transformers as tf

        torch_dtype = {"fp16": torch.float16, "float16": torch.float16, "bf16": torch.bfloat16,
                       "bfloat16": torch.bfloat16, None: None, "fp32": torch.float32, "float32": torch.float32}[dtype]
        kw: dict[str, Any] = {"revision": self.revision, "trust_remote_code": self.trust_remote_code}
        if torch_dtype is not None and device != "cpu":
            kw["dtype"] = torch_dtype
        try:
            require_model(self.model_name, self.revision, option="the backend's model")
            if self.kind == "vlm":
                self.processor = tf.AutoProcessor.from_pretrained(self.model_name, revision=self.revision,
                                                                  trust_remote_code=self.trust_remote_code)
                self.model = tf.AutoModelForImageTextToText.from_pretrained(self.model_name, **kw)
            else:
                self.processor = tf.AutoTokenizer.from_pretrained(self.model_name, revision=self.revision,
                                                                  trust_remote_code=self.trust_remote_code)
                self.model = tf.AutoModelForCausalLM.from_pretrained(self.model_name, **kw)
        except OSError as e:
            raise OSError(f"could not load the {self.kind} judge model {self.model_name!r} "
                          f"(a hub id needs network; a local folder needs config + weights + processor): {e}") from e
        tok = getattr(self.processor, "tokenizer", self.processor)
        if self.chat_template is not None:
            self.processor.chat_template = self.chat_template
            if tok is not self.processor:
                tok.chat_template = self.chat_template
        tok.padding_side = "left"  # decoder-only batched generation continues from the right end
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        self.model.to(device).eval()
        self.device = device
        self._n_params = float(sum(p.numel() for p in self.model.parameters()))

    def unload(self) -> None:
        self.model = None
        self.processor = None

    def _messages(self, r: ChatRequest) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = []
        if r.system:
            msgs.append({"role": "system", "content": [{"type": "text", "text": r.system}] if self.vision else r.system})
        if self.vision:
            content = [{"type": "image", "image": im} for im in r.images] + [{"type": "text", "text": r.prompt}]
            msgs.append({"role": "user", "content": content})
        else:
            if r.images:
                raise ValueError(f"model {self.model_name!r} is a text-only LM (kind: lm) but got an image request")
            msgs.append({"role": "user", "content": r.prompt})
        return msgs

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        import torch

        if self.model is None:
            self.load()
        if not requests:
            return []
        convs = [self._messages(r) for r in requests]
        try:
            enc = self.processor.apply_chat_template(convs, add_generation_prompt=True, tokenize=True,
                                                     return_dict=True, return_tensors="pt", padding=True)
            enc = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in enc.items()}
            tok = getattr(self.processor, "tokenizer", self.processor)
            gen_kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample,
                                      "pad_token_id": tok.pad_token_id}
            if self.do_sample and self.temperature is not None:
                gen_kw["temperature"] = self.temperature
            with torch.inference_mode():
                out = self.model.generate(**enc, **gen_kw)
        except Exception as e:  # one failing batch is recorded per request, never raised past the judge
            self.counts.calls += len(requests)
            self.counts.failed += len(requests)
            kind = type(e).__name__
            self.counts.errors[kind] = self.counts.errors.get(kind, 0) + len(requests)
            log.warning("judge model %s failed on a batch of %d: %s", self.model_name, len(requests), e)
            return [ChatResult(None, error=f"{kind}: {e}") for _ in requests]
        n_in = enc["input_ids"].shape[1]
        new = out[:, n_in:]
        texts = tok.batch_decode(new, skip_special_tokens=True)
        mask = enc.get("attention_mask")
        results = []
        for i, t in enumerate(texts):
            pt = int(mask[i].sum()) if mask is not None else int(n_in)
            ct = int((new[i] != tok.pad_token_id).sum()) if tok.pad_token_id is not None else int(new.shape[1])
            results.append(ChatResult(t.strip(), None, pt, ct))
            self.counts.calls += 1
            self.counts.prompt_tokens += pt
            self.counts.completion_tokens += ct
        return results

    def usage(self) -> dict[str, Any]:
        c = self.counts
        return {"calls": c.calls, "failed": c.failed, "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens, "total_tokens": c.prompt_tokens + c.completion_tokens,
                "errors": dict(c.errors), "estimated_cost": 0.0}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model_name, "revision": self.revision}

    def params(self) -> float | None:
        return self._n_params
