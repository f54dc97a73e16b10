"""A small, careful client for OpenAI-compatible ``/chat/completions`` endpoints.

Every API-backed model in ts2 (VLM and LLM judges, vision VQA, question generation) goes
through :class:`ChatClient`, so that all of them share one policy:

- **timeouts**: a connect and a read timeout on every request;
- **retries**: on HTTP 429, 5xx, timeouts, connection errors and malformed (non-JSON, no
  ``choices``) bodies, with exponential backoff ``min(backoff_max, backoff_base * 2**k)`` and
  jitter (the wait is drawn uniformly from its upper half, so concurrent workers do not retry
  in lock step); a ``Retry-After`` header in seconds is honoured, capped at ``backoff_max``.
  Other 4xx answers (bad request, unauthorised, unknown model) fail at once: retrying them
  only burns quota;
- **concurrency**: at most ``max_concurrency`` requests in flight per client (a semaphore, so
  the limit holds across threads), and :meth:`ChatClient.chat_many` runs a batch on a thread
  pool of that size, answers in input order;
- **accounting**: :class:`UsageMeter` adds up requests, retries, failures, prompt and
  completion tokens (from the server's ``usage`` field) and an estimated cost from the
  configured prices per 1k tokens; metrics put :meth:`UsageMeter.to_dict` into ``run.json``;
- **secrets** (:mod:`.secrets`): the API key is read from the environment variable named by
  ``api_key_env`` when the client is built and validated there (no control characters); it is
  sent only in the ``Authorization`` header and is never part of :meth:`ChatClient.settings`,
  ``repr``, log records or exception messages. Server bodies quoted in errors are scrubbed in
  full before they are cut to 300 characters (and pieces of the key at the cut are masked);
  errors raised by ``requests`` (which can quote headers) are re-raised as :class:`APIError`
  with scrubbed text and no chained exception; replies are scrubbed before anyone stores them;
  a ``base_url`` with credentials (``http://user:KEY@host``) is refused.

Examples
--------
>>> client = ChatClient("http://127.0.0.1:8000/v1", model="llava", api_key_env=None)  # doctest: +SKIP
>>> client.chat([user_message("Is there a cat?", images=[img])], max_tokens=8).text  # doctest: +SKIP
'yes'
"""

from __future__ import annotations

import base64
import io
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .secrets import (
    InvalidAPIKeyError,
    MissingAPIKeyError,
    check_base_url,
    quote,
    read_api_key,
    registered_secrets,
    scrub,
)

__all__ = ["ChatClient", "ChatResponse", "APIError", "MissingAPIKeyError", "InvalidAPIKeyError", "UsageMeter",
           "image_data_url", "user_message", "RETRY_STATUS"]

log = logging.getLogger(__name__)

# Statuses worth retrying: rate limits and server-side trouble. Everything else 4xx is final.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_BODY_QUOTE = 300  # characters of a server body quoted in an error message


class APIError(RuntimeError):
    """A chat request that failed for good (after retries, or at once for a final 4xx).

    Attributes
    ----------
    status : int or None
        The last HTTP status, ``None`` for timeouts, connection errors and malformed bodies.
    attempts : int
        Requests made for this call.
    retryable : bool
        Whether the last failure was of a kind that is retried (so more retries might help).
    """

    def __init__(self, message: str, status: int | None = None, attempts: int = 1, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


@dataclass(frozen=True)
class ChatResponse:
    """One successful chat completion.

    ``text`` is the first choice's message content (parts joined when a server sends a list);
    token counts are the server's (0 when it sends no ``usage``); ``attempts`` counts requests.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    attempts: int = 1
    model: str | None = None


@dataclass
class UsageMeter:
    """Thread-safe totals of one client's traffic and its estimated cost.

    Cost is ``prompt_tokens / 1000 * price_per_1k_prompt + completion_tokens / 1000 *
    price_per_1k_completion`` (prices in the configured currency, USD by convention).
    """

    price_per_1k_prompt: float = 0.0
    price_per_1k_completion: float = 0.0
    requests: int = 0          # HTTP requests sent (including retries)
    calls: int = 0             # chat() calls
    succeeded: int = 0
    failed: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    no_usage: int = 0          # successes whose body had no usage field (tokens unknown)
    errors: dict[str, int] = field(default_factory=dict)  # "429", "500", "timeout", "malformed", ...
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def _error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def estimated_cost(self) -> float:
        return (self.prompt_tokens / 1000.0 * float(self.price_per_1k_prompt)
                + self.completion_tokens / 1000.0 * float(self.price_per_1k_completion))

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for ``run.json``."""
        with self._lock:
            return {
                "calls": self.calls, "requests": self.requests, "succeeded": self.succeeded,
                "failed": self.failed, "retries": self.retries,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "responses_without_usage": self.no_usage, "errors": dict(sorted(self.errors.items())),
                "price_per_1k_prompt": float(self.price_per_1k_prompt),
                "price_per_1k_completion": float(self.price_per_1k_completion),
                "estimated_cost": round(self.estimated_cost, 6),
            }


@dataclass(frozen=True)
class _Attempt:
    """The end of one HTTP request: the ``response``, or the ``error`` text, whether a retry may
    help, the HTTP ``status`` (``None``: no reply) and the server's ``Retry-After``."""

    response: ChatResponse | None = None
    error: str = ""
    retryable: bool = False
    status: int | None = None
    retry_after: str | None = None


def image_data_url(image: Any, fmt: str = "PNG") -> str:
    """``data:image/...;base64,...`` URL of a PIL image (how OpenAI-style APIs take images).

    PNG by default: lossless, so the model sees the pixels that were scored.
    """
    buf = io.BytesIO()
    img = image if getattr(image, "mode", "RGB") in ("RGB", "L") else image.convert("RGB")
    img.save(buf, format=fmt)
    return f"data:image/{fmt.lower()};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def user_message(text: str, images: Sequence[Any] = (), image_format: str = "PNG") -> dict[str, Any]:
    """A user chat message: plain text, or text then images as ``image_url`` parts."""
    if not images:
        return {"role": "user", "content": str(text)}
    parts: list[dict[str, Any]] = [{"type": "text", "text": str(text)}]
    parts += [{"type": "image_url", "image_url": {"url": image_data_url(im, image_format)}} for im in images]
    return {"role": "user", "content": parts}


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
        return "".join(texts) if texts else None
    return None


class ChatClient:
    """Client of one model behind an OpenAI-compatible chat endpoint.

    Parameters
    ----------
    base_url : str
        Endpoint root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``;
        requests go to ``<base_url>/chat/completions``.
    model : str
        Model name sent in each request.
    api_key_env : str or None
        Name of the environment variable holding the API key (``OPENAI_API_KEY``); ``None`` for
        servers without authentication (a local vLLM or llama.cpp server).
    timeout, connect_timeout : float
        Read and connect timeouts per request, seconds.
    max_retries : int
        Retries after the first request (so at most ``max_retries + 1`` requests per call).
    backoff_base, backoff_max : float
        Backoff before retry ``k`` (0-based) is drawn from ``[d/2, d]``, ``d = min(backoff_max,
        backoff_base * 2**k)``.
    max_concurrency : int
        Requests in flight at once (>= 1).
    price_per_1k_prompt, price_per_1k_completion : float
        Prices for the cost estimate.
    default_params : dict, optional
        Sent with every request unless a call overrides them (``temperature``, ``max_tokens``,
        ``seed``, ...).
    headers : dict, optional
        Extra HTTP headers (never put the key here: use ``api_key_env``).

    Raises
    ------
    MissingAPIKeyError
        ``api_key_env`` names an unset or empty variable.
    InvalidAPIKeyError
        The key holds a newline, a space or another character no HTTP header may carry.
    ValueError
        Bad numbers (negative retries, concurrency < 1, ...); a ``base_url`` that is not
        ``http(s)://host...`` or that carries credentials.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 60.0, connect_timeout: float = 10.0, max_retries: int = 4,
                 backoff_base: float = 1.0, backoff_max: float = 60.0, max_concurrency: int = 4,
                 price_per_1k_prompt: float = 0.0, price_per_1k_completion: float = 0.0,
                 default_params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> None:
        base_url = check_base_url(base_url)
        if int(max_retries) < 0 or int(max_concurrency) < 1:
            raise ValueError(f"expected max_retries >= 0 and max_concurrency >= 1, got {max_retries} and {max_concurrency}")
        if float(timeout) <= 0 or float(connect_timeout) <= 0 or float(backoff_base) < 0 or float(backoff_max) < 0:
            raise ValueError(f"expected positive timeouts and non-negative backoff, got timeout={timeout}, "
                             f"connect_timeout={connect_timeout}, backoff_base={backoff_base}, backoff_max={backoff_max}")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.api_key_env = api_key_env or None
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_concurrency = int(max_concurrency)
        self.default_params = dict(default_params or {})
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        if any(k.lower() == "authorization" for k in self._headers):
            raise ValueError("put the API key in an environment variable named by api_key_env, not in headers")
        self._key = read_api_key(self.api_key_env)
        self.usage = UsageMeter(float(price_per_1k_prompt), float(price_per_1k_completion))
        self._sem = threading.BoundedSemaphore(self.max_concurrency)
        self._local = threading.local()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()

    # -- identity ------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """What identifies the model's answers (for fingerprints): endpoint, model, default params.

        Never contains the key (nor the name of its variable: changing where the key lives must
        not invalidate cached scores).
        """
        return {"base_url": self.base_url, "model": self.model,
                "params": {k: self.default_params[k] for k in sorted(self.default_params)}}

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.base_url!r}, model={self.model!r}, auth={'env' if self._key else 'none'})"

    # -- plumbing ------------------------------------------------------------------------------
    def _session(self):
        import requests

        s = getattr(self._local, "session", None)
        if s is None:  # requests.Session is not documented as thread-safe: one per thread
            s = requests.Session()
            self._local.session = s
        return s

    def _secrets(self) -> list[str]:
        return [self._key, *registered_secrets()] if self._key else list(registered_secrets())

    def _quote(self, text: str) -> str:
        """A server body for an error message: scrubbed in full, then cut, then scrubbed again."""
        return quote(text, _BODY_QUOTE, self._secrets())

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.backoff_max, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        d = min(self.backoff_max, self.backoff_base * (2.0 ** attempt))
        with self._rng_lock:
            return d / 2.0 + self._rng.uniform(0.0, d / 2.0)

    def _request_once(self, payload: dict[str, Any]) -> _Attempt:
        """One HTTP request: its reply, or why not and whether a retry may help."""
        import requests

        headers = {"Content-Type": "application/json", **self._headers}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        url = f"{self.base_url}/chat/completions"
        self.usage._add(requests=1)
        failure = None
        # Bytes, not str: http.client sends a bytes body in the same packet as the headers; a str
        # body goes out as a second small packet, and Nagle + delayed ACK add ~40 ms per request.
        try:
            with self._sem:
                r = self._session().post(url, data=json.dumps(payload).encode("utf-8"), headers=headers,
                                         timeout=(self.connect_timeout, self.timeout))
        except requests.Timeout:
            self.usage._error("timeout")
            return _Attempt(error=f"timed out after {self.timeout:g} s", retryable=True)
        except requests.ConnectionError as e:
            self.usage._error("connection")
            return _Attempt(error=f"connection failed: {type(e).__name__}", retryable=True)
        except Exception as e:  # requests' own errors can quote a header (the key): keep only scrubbed text
            # Every header value is masked, not only the key: an invalid-header error quotes the value.
            hidden = [*self._secrets(), *(v for v in headers.values() if v)]
            failure = f"{type(e).__name__}: {quote(str(e), _BODY_QUOTE, hidden)}"
        if failure is not None:
            # Final (retrying cannot fix a bad header or URL); returned, not raised from the except
            # block, so no chained exception carrying the raw text travels on.
            self.usage._error("request")
            return _Attempt(error=f"could not be sent: {failure}")
        return self._read_reply(r)

    def _read_reply(self, r: Any) -> _Attempt:
        """What an HTTP reply says: an error status, a malformed body, or the first choice (with
        any echo of a secret masked, and its token counts)."""
        status = r.status_code
        if status != 200:
            self.usage._error(str(status))
            body = self._quote(r.text)
            return _Attempt(None, f"HTTP {status}: {body!r}", status in RETRY_STATUS or status >= 500, status,
                            r.headers.get("Retry-After"))
        try:
            data = r.json()
            choice = data["choices"][0]
            text = _content_text(choice["message"]["content"])
            if text is None:
                raise TypeError("message content is neither a string nor text parts")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            self.usage._error("malformed")
            body = self._quote(r.text)
            return _Attempt(None, f"malformed body ({type(e).__name__}: {self._quote(str(e))}): {body!r}", True,
                            status)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        pt = int(usage.get("prompt_tokens") or 0) if usage else 0
        ct = int(usage.get("completion_tokens") or 0) if usage else 0
        clean = scrub(text, self._secrets())
        if clean != text:
            self.usage._error("reply_echoed_key")
            log.warning("a reply from %s (model %s) contained (part of) the API key; it was masked before use",
                        self.base_url, self.model)
        model = data.get("model")
        resp = ChatResponse(text=clean, prompt_tokens=pt, completion_tokens=ct,
                            finish_reason=choice.get("finish_reason"),
                            model=scrub(str(model), self._secrets()) if model is not None else None)
        if usage is None:
            self.usage._add(no_usage=1)
        return _Attempt(resp, "", False, status)

    # -- public --------------------------------------------------------------------------------
    def chat(self, messages: Sequence[dict[str, Any]], **params: Any) -> ChatResponse:
        """Send one chat request (retrying as configured) and return the first choice.

        Parameters
        ----------
        messages : list of dict
            OpenAI-style messages (see :func:`user_message`).
        **params
            Request fields (``max_tokens``, ``temperature``, ...) over ``default_params``.

        Raises
        ------
        APIError
            After the last retry, or at once for a non-retryable status. The message names the
            endpoint, the model, the attempts and the last error (secrets redacted).
        """
        payload = {**self.default_params, **params, "model": self.model, "messages": list(messages)}
        self.usage._add(calls=1)
        last, status, retryable = "", None, False
        for attempt in range(self.max_retries + 1):
            tried = self._request_once(payload)
            resp, last, retryable, status = tried.response, tried.error, tried.retryable, tried.status
            if resp is not None:
                self.usage._add(succeeded=1, prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens)
                return ChatResponse(**{**resp.__dict__, "attempts": attempt + 1})
            if not retryable or attempt == self.max_retries:
                break
            wait = self._delay(attempt, tried.retry_after)
            self.usage._add(retries=1)
            log.warning("chat request to %s (model %s) failed: %s; retry %d/%d in %.2f s", self.base_url,
                        self.model, last, attempt + 1, self.max_retries, wait)
            self._sleep(wait)
        self.usage._add(failed=1)
        n = attempt + 1
        raise APIError(f"chat request to {self.base_url} (model {self.model!r}) failed after {n} "
                       f"attempt{'s' if n > 1 else ''}: {last}", status=status, attempts=n, retryable=retryable)

    def chat_many(self, conversations: Sequence[Sequence[dict[str, Any]]], **params: Any) -> list[ChatResponse | APIError]:
        """:meth:`chat` for many conversations at once, ``max_concurrency`` at a time.

        Returns one entry per conversation, in input order: the response, or the
        :class:`APIError` that ended it (one failure never loses the others' answers).
        """
        def one(msgs):
            try:
                return self.chat(msgs, **params)
            except APIError as e:
                return e

        if len(conversations) <= 1 or self.max_concurrency == 1:
            return [one(c) for c in conversations]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(conversations)),
                                thread_name_prefix="ts2-api") as pool:
            return list(pool.map(one, conversations))
