"""Per-walk sufficient statistics from histograms, for the meta-metric kernels without a sort.

:class:`~analysis.metametrics.walkstats.WalkStats` sorts the scores of each walk. When many
versions of one walk differ only in which of a SEG's values sit on which image (the within-SEG
permutations of :mod:`analysis.chance`), each version is described just as well by a histogram:
``hist[w, a, r]`` counts the valid samples of level slot ``a`` whose score is the SEG's ``r``-th
smallest distinct value. Every statistic the kernels read follows from these counts (cumulative
counts over ``r`` are the ECDFs, products of counts the pair counts), so the kernels of
:mod:`analysis.metametrics` run unchanged on :class:`HistStats`.

Slot convention: slot ``a`` is the ``a``-th lowest level with a valid sample on the walk; slots
past ``n_slots`` hold zeros. Values ``r`` no sample takes may be present (zero counts): they
change no statistic, so histograms of different SEGs can share one padded width.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .walkstats import WalkStats

__all__ = ["HistStats"]


class HistStats:
    """Sorted-order statistics of a batch of walks given as per-slot histograms of score ranks.

    Parameters
    ----------
    hist : array, shape (n, slots, n_values)
        Valid samples per (walk, level slot, distinct score value), values in increasing order.
    values : array, shape (n, n_values), optional
        The score of each value index per walk (needed only by ``total``, i.e. delta).

    Notes
    -----
    The "positions" of :class:`~analysis.metametrics.walkstats.WalkStats` become distinct values
    (for ``less_equal``: ECDFs at every value) or (slot, value) cells weighted by their count
    (for ranks: ``sorted_valid``, ``weights``, ``level_ranks``, ``score_ranks``).

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.metametrics.rank import rank_walks
    >>> from analysis.metametrics.walkstats import WalkStats
    >>> h = np.array([[[1.0, 0, 1], [1, 1, 0]]])  # slot 0 holds values 0 and 2, slot 1 values 0 and 1
    >>> ws = WalkStats(np.array([[0, 0, 1, 1]]), np.array([[0.1, 0.9, 0.1, 0.5]]))
    >>> bool(np.isclose(rank_walks(HistStats(h))[0], rank_walks(ws)[0]))
    True
    """

    def __init__(self, hist: np.ndarray, values: np.ndarray | None = None) -> None:
        hist = np.asarray(hist, dtype=float)
        if hist.ndim != 3:
            raise ValueError(f"expected histograms of shape (walks, slots, values), got {hist.shape}")
        self.hist = hist
        self.values = None if values is None else np.asarray(values, dtype=float)
        self.shape = (hist.shape[0], hist.shape[2])
        self.count_dtype = np.float64

    def with_values(self, values: np.ndarray) -> "HistStats":
        """The same histograms with other value vectors (``total`` differs, every cached count is shared)."""
        other = HistStats.__new__(HistStats)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k != "total"})
        other.values = np.asarray(values, dtype=float)
        return other

    # -- counts ------------------------------------------------------------------------------------
    @cached_property
    def count(self) -> np.ndarray:
        """Valid samples per level slot, ``(n, slots)``."""
        return self.hist.sum(axis=2)

    @cached_property
    def n(self) -> np.ndarray:
        return self.count.sum(axis=1).astype(np.int64)

    @cached_property
    def n_slots(self) -> np.ndarray:
        return (self.count > 0).sum(axis=1)

    @cached_property
    def n_slot_cols(self) -> int:
        return max(int(self.hist.shape[1]), 1)

    @cached_property
    def value_count(self) -> np.ndarray:
        """Valid samples per distinct value, all slots together, ``(n, n_values)``."""
        return self.hist.sum(axis=1)

    @cached_property
    def n_score_values(self) -> np.ndarray:
        return (self.value_count > 0).sum(axis=1)

    @cached_property
    def tied_score_pairs(self) -> np.ndarray:
        h = self.value_count
        return (h * (h - 1)).sum(axis=1) / 2

    @cached_property
    def total(self) -> np.ndarray:
        """Sum of scores per level slot, ``(n, slots)``."""
        if self.values is None:
            raise ValueError("HistStats.total needs the score of each value index (values=...)")
        return np.einsum("nar,nr->na", self.hist, self.values)

    # -- cumulative counts -------------------------------------------------------------------------
    @cached_property
    def less_equal(self) -> np.ndarray:
        """Slot-major ``(slots, n, n_values)``: samples of a slot scoring at most each value."""
        return np.cumsum(self.hist, axis=2).transpose(1, 0, 2)

    @cached_property
    def less(self) -> np.ndarray:
        """Slot-major ``(slots, n, n_values)``: samples of a slot scoring below each value."""
        return self.less_equal - self.hist.transpose(1, 0, 2)

    @cached_property
    def greater_pairs(self) -> np.ndarray:
        """``G[r, a, b]`` = #{i on slot a, j on slot b: score_i > score_j}."""
        return np.einsum("nar,bnr->nab", self.hist, self.less)

    @cached_property
    def tied_pairs(self) -> np.ndarray:
        """``T[r, a, b]`` = #{i on slot a, j on slot b: score_i == score_j} (self-pairs for a == b)."""
        return np.einsum("nar,nbr->nab", self.hist, self.hist)

    @cached_property
    def upper(self) -> np.ndarray:
        k = self.n_slot_cols
        a, b = np.triu_indices(k, 1)
        m = np.zeros((self.shape[0], k, k), dtype=bool)
        m[:, a, b] = b[None, :] < self.n_slots[:, None]
        return m

    @property
    def constant_scores(self) -> np.ndarray:
        return self.n_score_values <= 1

    ks_between = WalkStats.ks_between  # the same ECDF reading, at every distinct value

    def rank_comoments(self, tie_method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(S_xy, S_xx, S_yy)`` of (level rank, score rank), each (slot, value) cell weighted by its count."""
        h = self.value_count
        cnt = self.count
        n = self.n.astype(float)
        rx = rank_of_counts(cnt, tie_method)
        ry = rank_of_counts(h, tie_method)
        with np.errstate(invalid="ignore", divide="ignore"):
            dx = rx - ((cnt * rx).sum(axis=1) / n)[:, None]
            dy = ry - ((h * ry).sum(axis=1) / n)[:, None]
        return (np.einsum("nar,na,nr->n", self.hist, dx, dy), (cnt * dx * dx).sum(axis=1),
                (h * dy * dy).sum(axis=1))


def rank_of_counts(cnt: np.ndarray, method: str) -> np.ndarray:
    """1-based rank of each class of ``cnt[n, c]`` samples (classes in increasing order), ties by ``method``.

    Examples
    --------
    >>> rank_of_counts(np.array([[2.0, 1.0, 3.0]]), "average").tolist()
    [[1.5, 3.0, 5.0]]
    """
    before = np.cumsum(cnt, axis=1) - cnt
    if method == "average":
        return before + (cnt + 1.0) / 2.0
    if method == "min":
        return before + 1.0
    if method == "max":
        return before + cnt
    if method == "dense":
        return np.cumsum(cnt > 0, axis=1).astype(float)
    raise ValueError(f"expected tie method 'average', 'min', 'max' or 'dense', got {method!r}")
