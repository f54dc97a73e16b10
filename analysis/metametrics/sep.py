"""sep_m: two-sample Kolmogorov-Smirnov statistic between the score populations of a walk's levels.

Samples are pooled by level (a duplicated root adds its images twice to the level-0 pool).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .nodestats import NodeStats
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["sep_walks", "sep_nodes", "sep_control", "ks_null_mean", "walk_sep", "level_pairs"]

#: Largest ``m * n`` whose exact null KS expectation :func:`ks_null_mean` works out (its cost grows
#: as ``(m n)^2``); pool pairs beyond it get no control variate.
KS_NULL_MAX_CELLS = 2500


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


@lru_cache(maxsize=None)
def ks_null_mean(m: int, n: int) -> float:
    """Exact expectation of the two-sample KS statistic of untied samples of sizes ``m`` and ``n``
    when every arrangement of their ranks is equally likely (the permutation null).

    ``mn D`` is an integer, so ``E[D] = sum_{c >= 1} P(mn D >= c) / (mn)``. ``P(mn D < c)`` is the
    probability that the random lattice path from (0, 0) to (m, n) (a step per sorted sample,
    right for the first sample, up for the second) keeps ``|i n - j m| < c`` at every point; it is
    propagated for all thresholds at once, as probabilities (no overflowing path counts).

    Raises
    ------
    ValueError
        ``m`` or ``n`` below 1.

    Examples
    --------
    >>> ks_null_mean(1, 1)  # the two samples always differ: D = 1
    1.0
    >>> round(ks_null_mean(2, 2), 4)  # 6 arrangements: D = 1 twice, 1/2 four times
    0.6667
    """
    if m < 1 or n < 1:
        raise ValueError(f"expected sample sizes of at least 1, got {m} and {n}")
    thresholds = np.arange(1, m * n + 1, dtype=np.int64)[:, None]
    j = np.arange(n + 1)
    row = np.zeros((len(thresholds), n + 1))
    for i in range(m + 1):
        ok = np.abs(i * n - j * m)[None, :] < thresholds  # (T, n + 1)
        new = np.zeros_like(row)
        for jj in range(n + 1):
            left = m + n - i - jj + 1  # samples left before the last step
            if i == 0 and jj == 0:
                v = np.ones(len(thresholds))
            else:
                v = np.zeros(len(thresholds))
                if i > 0:  # a step right from (i - 1, jj): the first sample's (m - i + 1) of `left`
                    v = v + row[:, jj] * (m - i + 1) / left
                if jj > 0:
                    v = v + new[:, jj - 1] * (n - jj + 1) / left
            new[:, jj] = v * ok[:, jj]
        row = new
    return float((1.0 - row[:, n]).sum() / (m * n))


def sep_control(stats: NodeStats, rng: np.random.Generator, pairs: str = "all",
                degenerate: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    """A control variate for sep_m's chance level: sep_m of the same permuted scores with their
    ties broken at random, and its exact expectation (``(S, B, W)`` each).

    Broken ties follow the untied null, whose pool-pair KS expectation is :func:`ks_null_mean`;
    ``sep - control + E[control]`` has sep's expectation and, for scores with few ties, a small
    part of its variance (none without ties). NaN expectations where a pool pair exceeds
    :data:`KS_NULL_MAX_CELLS` (no control there).
    """
    fill = degenerate_fill(degenerate)
    values = sep_nodes(stats.tie_broken(rng), pairs, degenerate)
    n = stats.pool_n.astype(np.int64)  # (S, B, Q)
    a, b = np.minimum(n[..., :, None], n[..., None, :]), np.maximum(n[..., :, None], n[..., None, :])
    top = int(n.max(initial=0)) + 1
    # One expectation per distinct pair of pool sizes (a lookup, not a top x top table: a node of
    # many thousand images must not cost a dense square). NaN: no control (too large); 0: a pool
    # without valid scores, which no walk compares.
    keys, inverse = np.unique(a * top + b, return_inverse=True)
    e0 = np.zeros(len(keys))
    for k, key in enumerate(keys.tolist()):
        x, y = divmod(key, top)
        if x > 0:
            e0[k] = ks_null_mean(x, y) if x * y <= KS_NULL_MAX_CELLS else np.nan
    e0 = e0[inverse.reshape(a.shape)]  # (S, B, Q, Q)
    with np.errstate(invalid="ignore"):
        expect = stats.pool_pair_mean(e0, pairs)
    expect[stats.n_slots <= 1] = fill
    expect[stats.n < 1] = np.nan
    return values, expect


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
