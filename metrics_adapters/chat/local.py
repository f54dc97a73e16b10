"""A local or hub chat model through transformers: LLaVA-style vision chat models and text LMs.

- ``kind="vlm"``: ``AutoModelForImageTextToText`` + ``AutoProcessor``; the processor's chat
  template renders each conversation (an image placeholder per image, then the text), the
  processor encodes text and images together;
- ``kind="lm"``: ``AutoModelForCausalLM`` + ``AutoTokenizer``; with ``use_chat_template`` the
  tokenizer's chat template wraps the prompt, without it the prompt is completed as plain text
  (base models continuing a few-shot template); ``gguf_file`` loads a GGUF checkpoint.

Batches are padded on the left (decoder-only generation continues right after each prompt);
greedy decoding by default; a batch that fails is recorded per request, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hub import HubModel, load_pretrained
from .base import ChatModel, ChatRequest, ChatResult
from .loading import count_params

__all__ = ["TransformersChatModel"]

log = logging.getLogger(__name__)


@dataclass
class _Counts:
    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class TransformersChatModel(ChatModel):
    """A transformers chat model (see the module docstring).

    Parameters
    ----------
    model : str
        Hub id or local folder (for GGUF: the folder or repo holding ``gguf_file``).
    kind : {"vlm", "lm"}
    revision : str, optional
        Hub revision (in the fingerprint).
    max_new_tokens, num_beams, do_sample, temperature, seed
        Decoding; greedy by default. ``temperature > 0`` samples (seeded by ``seed``).
    system_prompt : str, optional
        Default system message for requests that carry none.
    use_chat_template : bool
        Render prompts with the chat template (``True``) or complete them as plain text (``lm`` only).
    chat_template : str, optional
        A Jinja chat template for models that ship none.
    gguf_file : str, optional
        A GGUF file inside ``model`` (``lm`` only; needs the ``gguf`` package).
    trust_remote_code : bool
    batch_size : int
        Requests per ``generate`` call.
    prefix_cache : {"auto", "on", "off"}
        Requests of a batch that show the same image share one forward over their common
        prefix (system text + image; :mod:`.prefix_cache`), so the vision tower and the image's
        prefill run once per image, not once per question. ``auto``: for the architectures in
        ``PREFIX_CACHE_MODEL_TYPES`` (LLaVA) with greedy/sampled decoding (not beam search);
        ``on``: for any vision model whose processor gives only ids, mask and ``pixel_values``
        (others, e.g. Qwen2-VL's ``image_grid_thw``, fall back to plain ``generate`` per batch with
        a debug log; check a new architecture's answers against ``off``); ``off``: never.
    """

    def __init__(self, model: str, kind: str = "vlm", revision: str | None = None, max_new_tokens: int = 256,
                 num_beams: int = 1, do_sample: bool = False, temperature: float | None = None, seed: int = 0,
                 system_prompt: str | None = None, use_chat_template: bool = True, chat_template: str | None = None,
                 gguf_file: str | None = None, trust_remote_code: bool = False, batch_size: int = 8,
                 prefix_cache: str = "auto") -> None:
        if kind not in ("vlm", "lm"):
            raise ValueError(f"expected kind 'vlm' or 'lm', got {kind!r}")
        if not model:
            raise ValueError(f"expected a model (hub id or local folder), got {model!r}")
        if kind == "vlm" and not use_chat_template:
            raise ValueError("kind 'vlm' renders requests with the processor's chat template; use_chat_template: false "
                             "is for text LMs (kind: lm)")
        self.model_name = str(model)
        self.kind = kind
        self.vision = kind == "vlm"
        self.revision = revision
        self.max_new_tokens = int(max_new_tokens)
        self.num_beams = int(num_beams)
        self.do_sample = bool(do_sample)
        self.temperature = None if temperature is None else float(temperature)
        self.seed = int(seed)
        self.system_prompt = system_prompt
        self.use_chat_template = bool(use_chat_template)
        self.chat_template = chat_template
        self.gguf_file = gguf_file
        self.trust_remote_code = bool(trust_remote_code)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"expected batch_size >= 1, got {batch_size}")
        if prefix_cache not in ("auto", "on", "off"):
            raise ValueError(f"expected prefix_cache 'auto', 'on' or 'off', got {prefix_cache!r}")
        self.prefix_cache = prefix_cache
        self.model = None
        self.processor = None
        self.device = "cpu"
        self.counts = _Counts()
        self.option = "the backend's model"  # the config key naming the model, for messages (wrappers set it)

    def settings(self) -> dict[str, Any]:
        return {"backend": "transformers", "model": self.model_name, "kind": self.kind, "revision": self.revision,
                "max_new_tokens": self.max_new_tokens, "num_beams": self.num_beams, "do_sample": self.do_sample,
                "temperature": self.temperature, "system_prompt": self.system_prompt,
                "use_chat_template": self.use_chat_template, "chat_template": self.chat_template,
                "gguf_file": self.gguf_file, "prefix_cache": self.prefix_cache}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model_name, "revision": self.revision, "gguf_file": self.gguf_file}

    def hub_models(self) -> tuple[HubModel, ...]:
        return (HubModel(self.model_name, "model", self.revision, files=(self.gguf_file,) if self.gguf_file else ()),)

    def n_params(self) -> float | None:
        return count_params(self.model)

    @property
    def tokenizer(self):
        return getattr(self.processor, "tokenizer", self.processor)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self.model is not None:
            return
        import transformers as tf

        model_cls, proc_cls = ((tf.AutoModelForImageTextToText, tf.AutoProcessor) if self.kind == "vlm"
                               else (tf.AutoModelForCausalLM, tf.AutoTokenizer))
        extra = {"gguf_file": self.gguf_file} if self.gguf_file else {}
        self.model, self.processor = load_pretrained(
            model_cls, proc_cls, self.model_name, revision=self.revision, device=device, dtype=dtype,
            trust_remote_code=self.trust_remote_code, owner=f"{self.kind} chat model", option=self.option, **extra)
        if self.gguf_file:
            # Dequantised GGUF tensors can be views into one buffer; contiguous copies run ~6x faster.
            for p in self.model.parameters():
                p.data = p.data.clone()
        tok = self.tokenizer
        if self.chat_template is not None:
            self.processor.chat_template = self.chat_template
            if tok is not self.processor:
                tok.chat_template = self.chat_template
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        self.device = device

    def unload(self) -> None:
        self.model = None
        self.processor = None

    def conversation(self, r: ChatRequest) -> list[dict[str, Any]]:
        """The request as chat messages (images as placeholders; pixels go to the processor)."""
        system = r.system if r.system is not None else self.system_prompt
        msgs: list[dict[str, Any]] = []
        if self.vision:
            if system:
                msgs.append({"role": "system", "content": [{"type": "text", "text": system}]})
            msgs.append({"role": "user", "content": [{"type": "image"} for _ in r.images]
                         + [{"type": "text", "text": r.prompt}]})
        else:
            if system:
                msgs.append({"role": "system", "content": system})
            msgs.append({"role": "user", "content": r.prompt})
        return msgs

    def render(self, r: ChatRequest) -> str:
        """The exact text the model reads for ``r`` (before tokenisation)."""
        if not self.use_chat_template:
            return r.prompt
        return self.processor.apply_chat_template(self.conversation(r), add_generation_prompt=True, tokenize=False)

    def encode(self, requests: Sequence[ChatRequest]) -> dict[str, Any]:
        """Model inputs of one batch (left-padded), on the model's device."""
        texts = [self.render(r) for r in requests]
        if self.vision:
            images = [im for r in requests for im in r.images]
            enc = self.processor(images=images or None, text=texts, return_tensors="pt", padding=True)
        else:
            # A chat template already holds the special tokens; plain completion gets BOS as usual.
            enc = self.processor(texts, return_tensors="pt", padding=True, add_special_tokens=not self.use_chat_template)
            enc = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        out = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in dict(enc).items()}
        if "pixel_values" in out and self.model is not None:
            out["pixel_values"] = out["pixel_values"].to(self.model.dtype)
        return out

    def generate(self, requests: Sequence[ChatRequest], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None) -> list[ChatResult]:
        self._check_vision(requests, self.model_name)
        if self.model is None:
            self.load(self.device)
        out: list[ChatResult] = []
        for i in range(0, len(requests), self.batch_size):
            out.extend(self._generate_batch(list(requests[i:i + self.batch_size]), max_new_tokens, temperature, seed))
        return out

    def _generate_batch(self, requests: list[ChatRequest], max_new_tokens, temperature, seed) -> list[ChatResult]:
        import torch

        gen_kw = self._decoding(max_new_tokens, temperature)
        try:
            enc = self.encode(requests)
            if gen_kw["do_sample"]:
                torch.manual_seed(self.seed if seed is None else int(seed))
            ids, n_in = self._run_generate(requests, enc, gen_kw)
        except Exception as e:  # one failing batch is recorded per request (OOM, a model error)
            return self._batch_failed(requests, e)
        return self._replies(enc, ids, n_in)

    def _decoding(self, max_new_tokens: int | None, temperature: float | None) -> dict[str, Any]:
        """``generate()`` keywords of one call: greedy (or beams) unless the backend samples or
        the call asks for a positive temperature."""
        temp = self.temperature if temperature is None else float(temperature)
        sample = self.do_sample or (temperature is not None and temp is not None and temp > 0)
        gen_kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens if max_new_tokens is None else int(max_new_tokens),
                                  "num_beams": self.num_beams, "do_sample": sample,
                                  "pad_token_id": self.tokenizer.pad_token_id}
        if sample and temp is not None:
            gen_kw["temperature"] = temp
        return gen_kw

    def _batch_failed(self, requests: list[ChatRequest], e: Exception) -> list[ChatResult]:
        """A failed batch as one failed result per request, counted by the error's kind."""
        kind = type(e).__name__
        self.counts.calls += len(requests)
        self.counts.failed += len(requests)
        self.counts.errors[kind] = self.counts.errors.get(kind, 0) + len(requests)
        log.warning("chat model %s failed on a batch of %d: %s", self.model_name, len(requests), e)
        return [ChatResult(None, error=f"{kind}: {e}") for _ in requests]

    def _replies(self, enc: dict[str, Any], ids: Any, n_in: int) -> list[ChatResult]:
        """Each request's reply text and token counts (prompt: its unpadded length; completion:
        its non-pad new tokens)."""
        tok = self.tokenizer
        # Encoder-decoder models return only new tokens; decoder-only ones echo the prompt.
        new = ids if getattr(self.model.config, "is_encoder_decoder", False) else ids[:, n_in:]
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

    def _shares_prefix(self, keys: list[tuple[int, ...]]) -> bool:
        """Whether a batch whose requests show the images ``keys`` (object ids) goes through
        :func:`.prefix_cache.shared_prefix_generate`."""
        from .prefix_cache import PREFIX_CACHE_MODEL_TYPES

        if self.prefix_cache == "off" or not self.vision or self.num_beams != 1:
            return False
        if self.prefix_cache == "auto" and getattr(self.model.config, "model_type", None) not in PREFIX_CACHE_MODEL_TYPES:
            return False
        # one image count for the whole batch, and at least two requests sharing images (else nothing to share)
        return len({len(k) for k in keys}) == 1 and len(keys[0]) > 0 and len(set(keys)) < len(keys)

    def _run_generate(self, requests: list[ChatRequest], enc: dict[str, Any], gen_kw: dict[str, Any]):
        """``(sequences, prompt width)`` of one batch, through the shared prefix where it applies."""
        import torch

        keys = [tuple(map(id, r.images)) for r in requests]
        if self._shares_prefix(keys):
            from .prefix_cache import PrefixUnsupported, shared_prefix_generate

            try:
                return shared_prefix_generate(self.model, enc, keys, **gen_kw)
            except PrefixUnsupported as e:
                log.debug("chat model %s: plain generate for this batch (%s)", self.model_name, e)
        with torch.inference_mode():
            return self.model.generate(**enc, **gen_kw), enc["input_ids"].shape[1]

    def usage(self) -> dict[str, Any]:
        c = self.counts
        return {"calls": c.calls, "failed": c.failed, "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens, "total_tokens": c.prompt_tokens + c.completion_tokens,
                "errors": dict(c.errors), "estimated_cost": 0.0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, kind={self.kind!r})"
