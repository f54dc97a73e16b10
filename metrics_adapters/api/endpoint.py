"""What every QA backend behind an OpenAI-compatible endpoint shares: its settings, its ids for
``run.json``, its assumed size, and one :class:`ChatClient` made on first use."""

from __future__ import annotations

from typing import Any

__all__ = ["EndpointBackend"]


class EndpointBackend:
    """Mixin: call :meth:`_init_endpoint` from ``__init__``; ``id_prefix`` names the role in ids."""

    id_prefix = "endpoint"

    def _init_endpoint(self, base_url: str, model: str, api_key_env: str | None, system_prompt: str | None,
                       timeout: float, max_retries: int, max_concurrency: int, n_params: float | None) -> None:
        from .secrets import check_base_url

        # Checked here, not only in the client: the URL enters fingerprints before any request.
        self.base_url, self.model, self.api_key_env = check_base_url(base_url), str(model), api_key_env
        self.system_prompt = system_prompt
        # Request policy: not in the fingerprint (it never changes an answer).
        self.timeout, self.max_retries, self.max_concurrency = float(timeout), int(max_retries), int(max_concurrency)
        self._n_params = n_params
        self._client = None

    def _endpoint_settings(self) -> dict[str, Any]:
        return {"base_url": str(self.base_url).rstrip("/"), "model": self.model, "system_prompt": self.system_prompt}

    def model_ids(self) -> dict[str, Any]:
        return {f"{self.id_prefix}_model": self.model, f"{self.id_prefix}_endpoint": str(self.base_url).rstrip("/")}

    def n_params(self) -> float | None:
        return None if self._n_params is None else float(self._n_params)

    def _ensure_client(self):
        if self._client is None:
            from .client import ChatClient

            self._client = ChatClient(self.base_url, self.model, api_key_env=self.api_key_env, timeout=self.timeout,
                                      max_retries=self.max_retries, max_concurrency=self.max_concurrency)
        return self._client

    def usage(self) -> dict[str, Any] | None:
        return None if self._client is None else self._client.usage.to_dict()
