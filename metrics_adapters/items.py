"""What a metric scores and how it fails: the types the scoring engine shares with :mod:`.base`.

They live apart from :class:`~metrics_adapters.base.Metric` because the base class imports the
engine (``Metric.__call__`` runs it): the engine's modules take these and the
:class:`~metrics_adapters.scorer.Scorer` protocol, never the Metric class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MetricError", "ScoreItem"]


class MetricError(RuntimeError):
    """A metric could not score an item (model error, unparseable reply, ...)."""

    @classmethod
    def for_items(cls, failures: Sequence[tuple[str, str]]) -> MetricError:
        """One error for a batch's failed items, ``(file name, reason)`` each: the first three
        as ``file: reason``, then how many more, so that many failures stay one readable line."""
        more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
        return cls("; ".join(f"{f}: {e}" for f, e in failures[:3]) + more)


@dataclass(frozen=True)
class ScoreItem:
    """One (prompt, image) pair to score, with where it sits in its SEG."""

    seg_id: str
    node: str
    file_name: str  # the stable image id
    prompt: str
    image_path: str | None = None
