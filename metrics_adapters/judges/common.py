"""What the judge metrics share: ask-parse-retry, memoised outcomes, side outputs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .backends import ChatBackend, ChatRequest
from .parsing import ParseError

__all__ = ["Outcome", "ask_and_parse"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """The end of asking one request: ``value`` (parsed) or ``error``; last ``reply``; attempts."""

    value: Any = None
    reply: str | None = None
    error: str | None = None
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


def ask_and_parse(backend: ChatBackend, requests: Sequence[ChatRequest], parse: Callable[[str | None], Any],
                  reminder: str, max_attempts: int) -> list[Outcome]:
    """Send ``requests``; re-send the ones whose reply fails ``parse`` (with ``reminder``
    appended to the prompt) or whose call failed, up to ``max_attempts`` sends each.

    Returns one :class:`Outcome` per request: parsed value, or the last error (a model-call
    error or the :class:`ParseError` message). Never raises for a bad reply.
    """
    out: list[Outcome] = [Outcome() for _ in requests]
    todo = list(range(len(requests)))
    for attempt in range(max_attempts):
        if not todo:
            break
        batch = [requests[i] if attempt == 0 or out[i].reply is None
                 else replace(requests[i], prompt=requests[i].prompt + reminder) for i in todo]
        results = backend.generate(batch)
        if len(results) != len(batch):
            raise RuntimeError(f"backend returned {len(results)} results for {len(batch)} requests")
        still = []
        for i, r in zip(todo, results, strict=True):
            if not r.ok:
                out[i] = Outcome(None, out[i].reply, f"model call failed: {r.error}", attempt + 1)
                still.append(i)
                continue
            try:
                out[i] = Outcome(parse(r.text), r.text, None, attempt + 1)
            except ParseError as e:
                out[i] = Outcome(None, r.text, f"unreadable reply: {e}", attempt + 1)
                still.append(i)
        todo = still
    for i in todo:
        log.warning("judge gave up after %d attempt(s): %s", out[i].attempts, out[i].error)
    return out
