"""sep_m: two-sample Kolmogorov-Smirnov statistic between the score populations of a walk's levels.

Samples are pooled by level (a duplicated root adds its images twice to the level-0 pool).
"""

from __future__ import annotations

import numpy as np

from .nodestats import NodeStats
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["sep_walks", "sep_nodes", "walk_sep", "level_pairs"]


def level_pairs(n_slots: int, pairs: str) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (a, b), a < b, of level slots: ``all`` pairs or ``adjacent`` ones."""
    if pairs == "all":
        return np.triu_indices(n_slots, 1)
    if pairs == "adjacent":
        return np.arange(n_slots - 1), np.arange(1, n_slots)
    raise ValueError(f"expected KS pairs 'all' or 'adjacent', got {pairs!r}")


def sep_walks(stats: WalkStats, pairs: str = "all", degenerate: str = "zero") -> np.ndarray:
    """sep_m of every walk: mean KS statistic ``sup_x |F_a(x) - F_b(x)|`` over level pairs.

    ``pairs="all"`` averages over every pair of levels present on the walk (the paper's code),
    ``"adjacent"`` over consecutive present levels (eq. 4). The ECDFs are evaluated at every
    distinct score of the walk (after all its ties), where the supremum of two step functions
    is reached; this equals :func:`scipy.stats.ks_2samp` ``.statistic``.

    NaN policy: NaN scores are dropped first; levels left without a valid sample disappear.
    No valid sample: NaN. One level only: 0 (``degenerate="zero"``, the paper's code) or NaN.
    """
    fill = degenerate_fill(degenerate)
    k = stats.n_slot_cols
    a, b = level_pairs(k, pairs)
    out = np.full(stats.shape[0], np.nan)
    if len(a):
        # ECDFs of each level at the end of every sample's tie group (constant within a group,
        # 1 for every level on padded positions, so no masking is needed). |F_a - F_b| is formed
        # as |le_a n_b - le_b n_a| / (n_a n_b): exact integers until the division.
        le = stats.less_equal  # slot-major (slots, n, width)
        n = stats.count.astype(stats.count_dtype)
        cross = np.empty((stats.shape[0], len(a)), dtype=stats.count_dtype)
        for p, (i, j) in enumerate(zip(a, b, strict=True)):
            cross[:, p] = np.abs(le[i] * n[:, j, None] - le[j] * n[:, i, None]).max(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = cross.astype(float) / (stats.count[:, a] * stats.count[:, b])
        ok = b[None, :] < stats.n_slots[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(ok, d, 0.0).sum(axis=1) / ok.sum(axis=1)
    out[stats.n_slots <= 1] = fill
    out[stats.n < 1] = np.nan
    return out


def sep_nodes(stats: NodeStats, pairs: str = "all", degenerate: str = "zero") -> np.ndarray:
    """:func:`sep_walks` from the KS statistics of level pools (:mod:`.nodestats`), ``(S, B, W)``."""
    fill = degenerate_fill(degenerate)
    out = stats.ks_mean(pairs)
    out[stats.n_slots <= 1] = fill
    out[stats.n < 1] = np.nan
    return out


def walk_sep(levels, scores, pairs: str = "all", degenerate: str = "zero") -> float:
    """sep_m of one walk.

    Examples
    --------
    >>> walk_sep([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1])  # fully separated
    1.0
    >>> walk_sep([0, 1, 2], [0.9, 0.5, 0.7], pairs="adjacent")
    1.0
    """
    lv, sc = as_batch(levels, scores)
    return float(sep_walks(WalkStats(lv, sc), pairs, degenerate)[0])
