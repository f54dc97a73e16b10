"""``random``: seeded uniform scores, the floor every real metric must clear."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..base import Metric, ScoreItem

__all__ = ["RandomScore", "item_uniform"]


def item_uniform(seed: int, key: str) -> float:
    """A uniform number in [0, 1) fixed by ``(seed, key)``: the first 53 bits of
    ``sha256(f"{seed}\\0{key}")`` over ``2**53``.

    Deterministic per item, so scores do not depend on batch size, batch order or resuming.

    Examples
    --------
    >>> item_uniform(0, "a.png") == item_uniform(0, "a.png") != item_uniform(1, "a.png")
    True
    """
    h = hashlib.sha256(f"{int(seed)}\0{key}".encode()).digest()
    return (int.from_bytes(h[:8], "big") >> 11) / float(1 << 53)


class RandomScore(Metric):
    """Uniform scores on ``[low, high)``, one per image, from ``(seed, file_name)``.

    A construct-validity control ("What makes a good metric?"): a sound meta-evaluation gives it
    rank_m and sep_m near chance. It reads neither pixels nor prompts.

    Parameters
    ----------
    name : str
    seed : int
    low, high : float
        The range (``low < high``).
    """

    higher_is_better = True
    needs_images = False
    role = "control"

    def __init__(self, name: str = "random", seed: int = 0, low: float = 0.0, high: float = 1.0) -> None:
        super().__init__(name)
        self.seed = int(seed)
        self.low, self.high = float(low), float(high)
        if not self.low < self.high:
            raise ValueError(f"{name}: expected low < high, got low={low}, high={high}")
        self.score_range = (self.low, self.high)

    def settings(self) -> dict[str, Any]:
        return {"seed": self.seed, "low": self.low, "high": self.high, "version": 1}

    def flops_per_image(self) -> float | None:
        return 0.0

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any] | None) -> list[float]:
        span = self.high - self.low
        return [self.low + span * item_uniform(self.seed, it.file_name) for it in items]
