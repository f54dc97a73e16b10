"""Per-walk sufficient statistics shared by all meta-metrics (one sort per walk).

Input: a batch of walks as two ``(n_walks, width)`` matrices: ``scores`` (NaN for padding and
for missing scores) and ``levels`` (error counts, any value where the score is NaN). Each row is
one walk; the order of samples inside a row does not matter.

Everything below is computed in *sorted* score order per row: tie groups of equal scores,
the dense "slot" of each sample's level among the levels present on the walk (after NaN
samples are dropped), per-slot counts and sums, and cumulative per-slot counts, from which
Spearman, Kendall, KS, delta and pairwise accuracy all follow with array operations.

Per-slot arrays over positions (``onehot``, ``cum``, ``less``, ``less_equal``) are slot-major,
``(slots, n_walks, width)``, so that each slot's row is one contiguous block.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

__all__ = ["WalkStats", "as_batch", "DEGENERATE_VALUES", "degenerate_fill"]

DEGENERATE_VALUES = ("zero", "skip")


def degenerate_fill(degenerate: str) -> float:
    """Value of a walk whose valid samples sit on one level: 0 (``"zero"``) or NaN (``"skip"``).

    The one check of the ``degenerate`` option of every kernel.

    Raises
    ------
    ValueError
        Any other value (the message lists the valid ones).

    Examples
    --------
    >>> degenerate_fill("zero"), degenerate_fill("skip")
    (0.0, nan)
    """
    if degenerate == "zero":
        return 0.0
    if degenerate == "skip":
        return float("nan")
    raise ValueError(f"expected degenerate to be one of {list(DEGENERATE_VALUES)}, got {degenerate!r}")


def as_batch(levels, scores) -> tuple[np.ndarray, np.ndarray]:
    """One walk (1-D ``levels``, ``scores``) as a batch of one row; checks shapes.

    Raises
    ------
    ValueError
        Different lengths, non-finite levels, or infinite scores.
    """
    lv = np.asarray(levels, dtype=float).ravel()
    sc = np.asarray(scores, dtype=float).ravel()
    if lv.shape != sc.shape:
        raise ValueError(f"expected levels and scores of equal length, got {lv.size} and {sc.size}")
    if not np.all(np.isfinite(lv)):
        raise ValueError("expected finite error levels, got NaN or inf")
    if np.any(np.isinf(sc)):
        raise ValueError("expected finite scores (NaN marks a missing score), got inf")
    return lv[None, :], sc[None, :]


class WalkStats:
    """Sorted statistics of a batch of walks; every attribute is computed on first use.

    Parameters
    ----------
    levels : array, shape (n, width)
        Error level of each sample (ints or floats; ignored where ``scores`` is NaN).
    scores : array, shape (n, width)
        Metric score of each sample, NaN where missing or padded.
    levels_sorted : bool
        Promise that every row's levels are non-decreasing over its valid samples (true for
        :class:`~analysis.walks.WalkTable` buckets); skips a sort.

    Notes
    -----
    Counts are held as float32 (exact for integers below 2**24; products of two counts stay
    exact while walks are at most 4096 samples long, float64 beyond) to halve memory traffic;
    every ratio and correlation is formed in float64.
    """

    def __init__(self, levels: np.ndarray, scores: np.ndarray, levels_sorted: bool = False) -> None:
        scores = np.asarray(scores, dtype=float)
        levels = np.asarray(levels)
        if scores.ndim != 2 or scores.shape != levels.shape:
            raise ValueError(f"expected 2-D levels and scores of one shape, got {levels.shape} and {scores.shape}")
        self.shape = scores.shape
        self._scores = scores
        self._levels = levels
        self._levels_sorted = bool(levels_sorted)
        self.count_dtype = np.float32 if self.shape[1] <= 4096 else np.float64

    # -- validity and sorting ------------------------------------------------------------------
    @cached_property
    def valid(self) -> np.ndarray:
        return ~np.isnan(self._scores)

    @cached_property
    def n(self) -> np.ndarray:
        """Valid samples per walk (repeats of a duplicated node count)."""
        return self.valid.sum(axis=1)

    @cached_property
    def order(self) -> np.ndarray:
        # NaNs sort last, so the first n[r] sorted positions of row r are its valid samples.
        return np.argsort(self._scores, axis=1, kind="stable")

    @cached_property
    def sorted_scores(self) -> np.ndarray:
        return np.take_along_axis(self._scores, self.order, axis=1)

    @cached_property
    def sorted_valid(self) -> np.ndarray:
        return np.arange(self.shape[1])[None, :] < self.n[:, None]

    @cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tie groups in sorted order: (group id, first position, last position) per position."""
        s = self.sorted_scores
        width = s.shape[1]
        pos = np.broadcast_to(np.arange(width), s.shape)
        new = np.ones(s.shape, dtype=bool)
        new[:, 1:] = s[:, 1:] != s[:, :-1]  # NaN != NaN: padding never joins a real group
        gid = np.cumsum(new, axis=1) - 1
        start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
        end_mark = np.ones(s.shape, dtype=bool)
        end_mark[:, :-1] = new[:, 1:]
        end = np.minimum.accumulate(np.where(end_mark, pos, width)[:, ::-1], axis=1)[:, ::-1]
        return gid, start, end

    @property
    def group_id(self) -> np.ndarray:
        return self._groups[0]

    @property
    def group_start(self) -> np.ndarray:
        return self._groups[1]

    @property
    def group_end(self) -> np.ndarray:
        return self._groups[2]

    @cached_property
    def n_score_values(self) -> np.ndarray:
        """Distinct valid scores per walk."""
        return np.where(self.sorted_valid, self.group_start == np.arange(self.shape[1])[None, :], False).sum(axis=1)

    # -- level slots -----------------------------------------------------------------------------
    @cached_property
    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        """(slot of each sample in original order, -1 if invalid; number of slots per walk)."""
        valid = self.valid
        if self._levels_sorted:
            # Dense rank of the level among valid samples: a new slot wherever the level differs
            # from the last valid level before it (levels only grow along the row).
            lv = np.where(valid, self._levels, np.iinfo(np.int64).min).astype(np.int64)
            last = np.maximum.accumulate(lv, axis=1)
            prev = np.empty_like(last)
            prev[:, 0] = np.iinfo(np.int64).min
            prev[:, 1:] = last[:, :-1]
            new = valid & (lv != prev)
            slot = np.where(valid, np.cumsum(new, axis=1) - 1, -1)
        else:
            lv = np.where(valid, np.asarray(self._levels, dtype=float), np.inf)
            o = np.argsort(lv, axis=1, kind="stable")
            ls = np.take_along_axis(lv, o, axis=1)
            new = np.ones(ls.shape, dtype=bool)
            new[:, 1:] = ls[:, 1:] != ls[:, :-1]
            dense = np.cumsum(new, axis=1) - 1
            slot = np.empty_like(dense)
            np.put_along_axis(slot, o, dense, axis=1)
            slot = np.where(valid, slot, -1)
        n_slots = slot.max(axis=1, initial=-1) + 1
        return slot, n_slots

    @property
    def slot(self) -> np.ndarray:
        return self._slots[0]

    @property
    def n_slots(self) -> np.ndarray:
        """Distinct levels with at least one valid sample, per walk."""
        return self._slots[1]

    @cached_property
    def n_slot_cols(self) -> int:
        return max(int(self.n_slots.max(initial=0)), 1)

    @cached_property
    def sorted_slot(self) -> np.ndarray:
        return np.take_along_axis(self.slot, self.order, axis=1)

    @cached_property
    def onehot(self) -> np.ndarray:
        """Slot-major ``(slots, n, width)`` counts: 1 where a sorted valid sample is on that slot."""
        return (self.sorted_slot[None, :, :] == np.arange(self.n_slot_cols)[:, None, None]).astype(self.count_dtype)

    def _per_slot(self, weights: np.ndarray | None) -> np.ndarray:
        k = self.n_slot_cols
        ok = self.slot >= 0
        idx = (np.arange(self.shape[0])[:, None] * k + self.slot)[ok]
        w = None if weights is None else weights[ok]
        return np.bincount(idx, weights=w, minlength=self.shape[0] * k).reshape(self.shape[0], k).astype(float)

    @cached_property
    def count(self) -> np.ndarray:
        """Valid samples per level slot, ``(n, slots)``."""
        if "cum" in self.__dict__:  # already paid for: its last column holds the counts
            return self.cum[:, :, -1].T.astype(float)
        return self._per_slot(None)

    @cached_property
    def total(self) -> np.ndarray:
        """Sum of scores per level slot, ``(n, slots)``."""
        return self._per_slot(self._scores)

    @cached_property
    def cum(self) -> np.ndarray:
        """Slot-major cumulative counts with a leading zero column, ``(slots, n, width + 1)``.

        ``cum[b, r, k]`` counts samples of slot b among the first k sorted samples of walk r.
        """
        c = np.zeros((self.n_slot_cols, self.shape[0], self.shape[1] + 1), dtype=self.count_dtype)
        np.cumsum(self.onehot, axis=2, out=c[:, :, 1:])
        return c

    def _cum_at(self, pos: np.ndarray) -> np.ndarray:
        # One flat gather per slot row (much faster than take_along_axis on a 3-D array).
        n, width = self.shape
        flat = (np.arange(n)[:, None] * (width + 1) + pos).ravel()
        return np.take(self.cum.reshape(self.n_slot_cols, -1), flat, axis=1).reshape(self.n_slot_cols, n, width)

    @cached_property
    def less(self) -> np.ndarray:
        """Slot-major ``less[b, r, i]``: samples of slot b scoring strictly below sorted sample i."""
        return self._cum_at(self.group_start)

    @cached_property
    def less_equal(self) -> np.ndarray:
        """Slot-major ``less_equal[b, r, i]``: samples of slot b scoring at most sorted sample i."""
        return self._cum_at(self.group_end + 1)

    def _pair_counts(self, per_sample: np.ndarray) -> np.ndarray:
        """``out[r, a, b] = sum over samples i on slot a of per_sample[b, r, i]``."""
        oh = self.onehot.transpose(1, 0, 2)  # (n, slots, width)
        return np.matmul(oh, per_sample.transpose(1, 2, 0)).astype(float)

    @cached_property
    def greater_pairs(self) -> np.ndarray:
        """``G[r, a, b]`` = #{i on slot a, j on slot b: score_i > score_j}."""
        return self._pair_counts(self.less)

    @cached_property
    def tied_pairs(self) -> np.ndarray:
        """``T[r, a, b]`` = #{i on slot a, j on slot b: score_i == score_j} (self-pairs for a == b)."""
        return self._pair_counts(self.less_equal - self.less)

    @cached_property
    def upper(self) -> np.ndarray:
        """``(n, slots, slots)`` mask of slot pairs a < b that are both present on the walk."""
        k = self.n_slot_cols
        a, b = np.triu_indices(k, 1)
        m = np.zeros((self.shape[0], k, k), dtype=bool)
        m[:, a, b] = b[None, :] < self.n_slots[:, None]
        return m

    # -- ranks -----------------------------------------------------------------------------------
    def score_ranks(self, method: str) -> np.ndarray:
        """Ranks (1-based) of the sorted valid scores within each walk, ties by ``method``."""
        gid, start, end = self._groups
        if method == "average":
            return (start + end) / 2.0 + 1.0
        if method == "min":
            return start + 1.0
        if method == "max":
            return end + 1.0
        if method == "dense":
            return gid + 1.0
        raise ValueError(f"expected tie method 'average', 'min', 'max' or 'dense', got {method!r}")

    def level_ranks(self, method: str) -> np.ndarray:
        """Ranks (1-based) of the levels of the sorted valid samples, ties by ``method``."""
        cnt = self.count
        before = np.cumsum(cnt, axis=1) - cnt
        if method == "average":
            per_slot = before + (cnt + 1.0) / 2.0
        elif method == "min":
            per_slot = before + 1.0
        elif method == "max":
            per_slot = before + cnt
        elif method == "dense":
            per_slot = np.broadcast_to(np.arange(1.0, cnt.shape[1] + 1.0), cnt.shape)
        else:
            raise ValueError(f"expected tie method 'average', 'min', 'max' or 'dense', got {method!r}")
        return np.take_along_axis(per_slot, np.clip(self.sorted_slot, 0, None), axis=1)
