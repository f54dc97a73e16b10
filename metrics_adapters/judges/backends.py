"""Chat backends of the judges: the shared chat-model layer (:mod:`metrics_adapters.chat`) under
the judges' names.

- :class:`HTTPChatBackend`: any OpenAI-compatible endpoint (:class:`~metrics_adapters.chat.HTTPChatModel`);
- :class:`TransformersChatBackend`: a local or hub model through transformers, ``kind=vlm``
  (LLaVA-style image-text-to-text) or ``kind=lm`` (a text-only causal LM)
  (:class:`~metrics_adapters.chat.TransformersChatModel`).

A backend never raises for one bad request: :meth:`ChatBackend.generate` returns a
:class:`ChatResult` with ``error`` set, so the judge can record the failure for that image and
keep the others.

Old option names still work with a warning: ``max_tokens`` (now ``max_new_tokens``) and
``params_billion`` (now ``n_params``, a count: ``params_billion: 7`` is ``n_params: 7.0e9``).
"""

from __future__ import annotations

import logging
from typing import Any

from ..chat import (
    ChatModel,
    ChatRequest,
    ChatResult,
    HTTPChatModel,
    TransformersChatModel,
    renamed_options,
)

__all__ = ["ChatRequest", "ChatResult", "ChatBackend", "HTTPChatBackend", "TransformersChatBackend", "DEFAULT_VLM",
           "DEFAULT_LLM", "DEFAULT_API_URL"]

log = logging.getLogger(__name__)

# Defaults of the judge metrics (kept equal to conf/judge_backend/*.yaml).
DEFAULT_VLM = "llava-hf/llava-1.5-7b-hf"
DEFAULT_LLM = "gpt-4o-mini"
DEFAULT_API_URL = "https://api.openai.com/v1"

ChatBackend = ChatModel


class HTTPChatBackend(HTTPChatModel):
    """:class:`~metrics_adapters.chat.HTTPChatModel` with the judges' defaults (256 new tokens)."""

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 max_new_tokens: int | None = None, n_params: float | None = None, **kw: Any) -> None:
        old = {k: kw.pop(k) for k in ("max_tokens", "params_billion") if k in kw}
        if old.get("params_billion") is not None:
            old["params_billion"] = float(old["params_billion"]) * 1e9
        new = renamed_options("HTTPChatBackend", old, {"max_tokens": "max_new_tokens", "params_billion": "n_params"},
                              max_new_tokens=max_new_tokens, n_params=n_params)
        super().__init__(base_url, model, api_key_env=api_key_env,
                         max_new_tokens=256 if new["max_new_tokens"] is None else new["max_new_tokens"],
                         n_params=new["n_params"], **kw)


class TransformersChatBackend(TransformersChatModel):
    """:class:`~metrics_adapters.chat.TransformersChatModel` with the judges' defaults."""
