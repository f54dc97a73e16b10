"""What the judge metrics share: ask-parse-retry, memoised outcomes, side outputs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .backends import ChatBackend, ChatRequest
from .parsing import ParseError

__all__ = ["Outcome", "PairBatch", "ask_and_parse"]

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

    def logged(self, field: str) -> Any:
        """``value.<field>`` for the answers log, or ``""`` when the request failed (no value)."""
        return getattr(self.value, field) if self.ok else ""


@dataclass(frozen=True)
class PairBatch:
    """The (image file, prompt) pairs of one batch: a judge asks about each distinct pair once.

    ``keys`` follows the batch order (one per item); ``first`` maps each pair to the index of
    its first item, whose image and SEG/node the judge uses for the request and the log row.
    """

    keys: tuple[tuple[str, str], ...]
    first: dict[tuple[str, str], int]

    @classmethod
    def of(cls, items: Sequence[Any]) -> PairBatch:
        keys = tuple((it.file_name, it.prompt) for it in items)
        return cls(keys, {k: i for i, k in reversed(list(enumerate(keys)))})

    def distinct(self) -> list[tuple[str, str]]:
        """Each pair once, in first-seen order."""
        return list(dict.fromkeys(self.keys))

    def unanswered(self, memo: Mapping[tuple[str, str], Any]) -> list[tuple[str, str]]:
        """The distinct pairs that ``memo`` has no outcome for yet."""
        return [k for k in self.distinct() if k not in memo]

    def log_row(self, items: Sequence[Any], key: tuple[str, str], **fields: Any) -> dict[str, Any]:
        """One answers-log row: the pair's first item's identity, then ``fields``."""
        it = items[self.first[key]]
        return {"seg_id": it.seg_id, "node": it.node, "file_name": it.file_name, "prompt": it.prompt, **fields}


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
