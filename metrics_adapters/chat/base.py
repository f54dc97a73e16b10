"""The chat-model protocol every text-generating model of ts2 implements.

A :class:`ChatModel` takes single-turn :class:`ChatRequest` s (a prompt, optional images, an
optional system message) and returns one :class:`ChatResult` per request, in order, never
raising for one bad request. Two implementations: :class:`~.local.TransformersChatModel` (a
local or hub model through transformers) and :class:`~.http.HTTPChatModel` (any
OpenAI-compatible endpoint). The judges, the VQA chat backends and question generation wrap
them.

One naming across all of them: ``max_new_tokens`` (reply length cap), ``temperature``,
``n_params()`` (parameter count, not billions), ``usage()`` (always a dict), ``settings()``
(everything that changes a reply, no secrets), ``model_ids()`` (ids for ``run.json``).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model_part import ModelPart

__all__ = ["ChatRequest", "ChatResult", "ChatModel", "renamed_options"]

log = logging.getLogger(__name__)


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


class ChatModel(ModelPart, ABC):
    """A chat model. ``vision`` says whether requests may carry images.

    Decoding can be overridden per call (``max_new_tokens``, ``temperature``, ``seed``): question
    generation re-asks at a retry temperature with a seed derived from the attempt.
    """

    vision: bool = False
    fingerprint_key = "chat"

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Everything that changes a reply (model, revision, decoding); no secrets."""

    @abstractmethod
    def generate(self, requests: Sequence[ChatRequest], *, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None) -> list[ChatResult]:
        """One result per request, in order; failures as ``ChatResult(error=...)``."""

    def params(self) -> float | None:
        """Old name of :meth:`n_params` (kept for scripts)."""
        return self.n_params()

    def _check_vision(self, requests: Sequence[ChatRequest], name: str) -> None:
        if not self.vision and any(r.images for r in requests):
            raise ValueError(f"model {name!r} is configured text-only (vision: false / kind: lm) but got an "
                             "image request")


def renamed_options(owner: str, given: dict[str, Any], renames: dict[str, str], **current: Any) -> dict[str, Any]:
    """Map old option names onto new ones, with a warning naming both (old config files keep working).

    ``renames`` maps old -> new; ``current`` holds the new options' values as passed. A value
    under an old name fills the new one; both given (and different) is an error.

    Raises
    ------
    ValueError
        An old and a new name given with different values, or an unknown option.

    Examples
    --------
    >>> renamed_options("X", {"max_tokens": 5}, {"max_tokens": "max_new_tokens"}, max_new_tokens=None)
    {'max_new_tokens': 5}
    """
    out = dict(current)
    for old, value in given.items():
        if old not in renames:
            raise ValueError(f"{owner}: unknown option {old!r}; expected one of {sorted([*current, *renames])}")
        new = renames[old]
        if out.get(new) is not None and value is not None and out[new] != value:
            raise ValueError(f"{owner}: got both {old}={value!r} and {new}={out[new]!r}; {old} is the old name "
                             f"of {new}, give only {new}")
        if value is not None:
            log.warning("%s: option %r is now called %r; please rename it in your config", owner, old, new)
            out[new] = value
    return out
