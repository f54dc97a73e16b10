"""A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, SGLang,
llama.cpp server, ...), through the shared :class:`metrics_adapters.api.ChatClient`.

The client (timeouts, retries, the concurrency pool, token and cost accounting, the key and its
scrubbing) is built on first use, so a run whose answers are all cached needs no key.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..api.secrets import check_base_url
from .base import ChatModel, ChatRequest, ChatResult

__all__ = ["HTTPChatModel"]

log = logging.getLogger(__name__)


class HTTPChatModel(ChatModel):
    """An OpenAI-compatible chat endpoint.

    Parameters
    ----------
    base_url, model : str
        Endpoint root (no credentials in it) and model name.
    api_key_env : str or None
        Environment variable holding the key (``None``: a server without authentication).
    max_new_tokens, temperature, seed
        Decoding (sent as ``max_tokens``, ``temperature``, ``seed``); in :meth:`settings`.
    system_prompt : str, optional
        Default system message for requests that carry none.
    timeout, connect_timeout, max_retries, backoff_base, backoff_max : request policy.
    max_concurrency : int
        Requests in flight at once (a thread pool); raise it to keep a serving engine busy.
    price_per_1k_prompt, price_per_1k_completion : float
        For the cost estimate in ``run.json``.
    n_params : float, optional
        The model's assumed parameter count, for FLOPs only.
    vision : bool
        Whether the model takes images.
    image_format : str
        How images are encoded (``PNG``: lossless).
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 max_new_tokens: int = 256, temperature: float = 0.0, seed: int | None = None,
                 system_prompt: str | None = None, timeout: float = 60.0, connect_timeout: float = 10.0,
                 max_retries: int = 4, backoff_base: float = 1.0, backoff_max: float = 60.0, max_concurrency: int = 4,
                 price_per_1k_prompt: float = 0.0, price_per_1k_completion: float = 0.0,
                 n_params: float | None = None, vision: bool = True, image_format: str = "PNG") -> None:
        # Checked here, not only in the client: the URL enters fingerprints before any request.
        self.base_url = check_base_url(base_url)
        self.model = str(model)
        self.api_key_env = api_key_env or None
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.seed = None if seed is None else int(seed)
        self.system_prompt = system_prompt
        self.max_concurrency = int(max_concurrency)
        if self.max_concurrency < 1:
            raise ValueError(f"expected max_concurrency >= 1, got {max_concurrency}")
        self.client_kw = dict(timeout=timeout, connect_timeout=connect_timeout, max_retries=max_retries,
                              backoff_base=backoff_base, backoff_max=backoff_max, max_concurrency=self.max_concurrency,
                              price_per_1k_prompt=price_per_1k_prompt, price_per_1k_completion=price_per_1k_completion)
        self._n_params = None if n_params is None else float(n_params)
        self.vision = bool(vision)
        self.image_format = str(image_format)
        self.client = None

    def settings(self) -> dict[str, Any]:
        return {"backend": "http", "base_url": self.base_url, "model": self.model,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "seed": self.seed,
                "system_prompt": self.system_prompt, "image_format": self.image_format}

    def model_ids(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url}

    def n_params(self) -> float | None:
        return self._n_params

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        from ..api import ChatClient

        if self.client is None:
            self.client = ChatClient(self.base_url, self.model, api_key_env=self.api_key_env, **self.client_kw)

    def messages(self, r: ChatRequest) -> list[dict[str, Any]]:
        from ..api import user_message

        system = r.system if r.system is not None else self.system_prompt
        return ([{"role": "system", "content": system}] if system else []) + [
            user_message(r.prompt, r.images, self.image_format)]

    def generate(self, requests: Sequence[ChatRequest], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None) -> list[ChatResult]:
        from ..api import APIError

        self._check_vision(requests, self.model)
        if self.client is None:
            self.load()
        params: dict[str, Any] = {"max_tokens": self.max_new_tokens if max_new_tokens is None else int(max_new_tokens),
                                  "temperature": self.temperature if temperature is None else float(temperature)}
        s = self.seed if seed is None else seed
        if s is not None:
            params["seed"] = int(s)
        out = []
        for resp in self.client.chat_many([self.messages(r) for r in requests], **params):
            if isinstance(resp, APIError):
                out.append(ChatResult(None, error=str(resp)))
            else:
                out.append(ChatResult(resp.text, None, resp.prompt_tokens, resp.completion_tokens))
        return out

    def usage(self) -> dict[str, Any]:
        return {} if self.client is None else self.client.usage.to_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"
