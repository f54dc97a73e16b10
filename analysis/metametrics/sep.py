"""sep_m: two-sample Kolmogorov-Smirnov statistic between the score populations of a walk's levels.

Samples are pooled by level (a duplicated root adds its images twice to the level-0 pool).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .nodestats import NodeStats, size_class
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["sep_walks", "sep_nodes", "sep_null_means", "ks_null_mean", "ks_null_means", "walk_sep", "level_pairs"]

#: Largest ``m * n`` whose exact null KS expectation without ties :func:`ks_null_mean` works out
#: (its cost grows as ``(m n)^2``); pool pairs beyond it are estimated by permutation.
KS_NULL_MAX_CELLS = 2500
#: Largest ``N lcm(m, n) (m + 1) (n + 1)`` (``N`` scores in the SEG, ``lcm(m, n)`` bounding the
#: KS values) whose exact null KS expectation with ties :func:`ks_null_means` works out; pool
#: pairs beyond it (a few large pools, e.g. two pooled roots) are estimated by permutation.
KS_NULL_MAX_WORK = 1_000_000


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
            cross[:, p] = np.abs(le[i] * n[:, j, None] - le[j] * n[:, i, None]).max(axis=1, initial=0)
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


def _ks_tied_batch(cases: list[tuple[tuple[int, ...], int, int]]) -> np.ndarray:
    """:func:`ks_null_means` of several ``(groups, m, n)`` with one ``m`` and one ``n``, at once."""
    m, n = cases[0][1], cases[0][2]
    order = sorted(range(len(cases)), key=lambda k: -sum(cases[k][0]))  # the SEGs still dealing: a prefix
    K = len(cases)
    total = np.array([sum(cases[k][0]) for k in order], dtype=np.int64)
    steps = int(total[0])
    ends = np.zeros((K, steps), dtype=bool)  # the last item of a tie group: where the ECDFs are compared
    for r, k in enumerate(order):
        ends[r, np.cumsum(cases[k][0]) - 1] = True
    gap = np.abs(np.arange(m + 1)[:, None] * n - np.arange(n + 1)[None, :] * m)  # m n |F_A - F_B| at (i, j)
    thresholds = np.unique(gap)
    thresholds = thresholds[thresholds > 0]
    # Channel c < T counts the deals whose tie groups all end strictly inside band c; channel T
    # (no band) counts all deals, the denominator.
    inside = np.concatenate([gap[None] < thresholds[:, None, None], np.ones((1, m + 1, n + 1), dtype=bool)])
    inside = inside.astype(float)
    # count[k, c, i, j]: deals of the first t sorted scores to A, B or neither with i in A and j in
    # B (beyond m or n the array ends: those deals never complete). A SEG shorter than the batch
    # stops dealing. Rescaled now and then (the ratio of channels is what counts).
    count = np.zeros((K, len(thresholds) + 1, m + 1, n + 1))
    count[:, :, 0, 0] = 1.0
    for t in range(steps):
        # SEGs with more than t scores; after t scores at most t + 1 of them in either sample
        a, b = min(t + 1, m), min(t + 1, n)
        cur = count[:int(np.searchsorted(-total, -t, side="left")), :, :a + 1, :b + 1]
        left = cur[:, :, :, :-1].copy()
        cur[:, :, 1:, :] += cur[:, :, :-1, :]
        cur[:, :, :, 1:] += left
        end = ends[:len(cur), t]
        if end.all():
            cur *= inside[:, :a + 1, :b + 1]
        elif end.any():
            cur[end] *= inside[:, :a + 1, :b + 1]
        if t % 16 == 15:
            cur /= cur.max(axis=(1, 2, 3), keepdims=True)
    stay = count[:, :-1, m, n] / count[:, -1:, m, n]  # P(m n D < threshold c)
    out = np.empty(K)
    out[order] = (np.diff(thresholds, prepend=0) * (1.0 - stay)).sum(axis=1) / (m * n)
    return out


def _untied(m: int, n: int) -> float:
    """:func:`ks_null_mean`, NaN beyond :data:`KS_NULL_MAX_CELLS` (estimated by permutation)."""
    return ks_null_mean(m, n) if m * n <= KS_NULL_MAX_CELLS else np.nan


_KS_TIED: dict[tuple[tuple[int, ...], int, int], float] = {}


def ks_null_means(groups: list[tuple[int, ...]], m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Exact expected two-sample KS statistic of two disjoint samples drawn uniformly without
    replacement from a SEG's valid scores, ties included (the within-SEG permutation null of
    sep_m's pool pairs).

    Parameters
    ----------
    groups : list of int tuples
        Per case, the sizes of the SEG's groups of equal scores in ascending order of score
        (all 1: no ties).
    m, n : int arrays, shape (len(groups),)
        The two sample sizes, ``1 <= m``, ``1 <= n``, ``m + n <= sum(groups[k])``.

    Returns
    -------
    ndarray
        ``E[D]``; NaN where working it out would cost more than :data:`KS_NULL_MAX_WORK`
        (or, untied, ``m n`` over :data:`KS_NULL_MAX_CELLS`).

    Notes
    -----
    The samples' ECDFs can differ only at the end of a tie group, so ``m n D`` is the largest
    ``|i n - j m|`` over the lattice points ``(i, j)`` (items of the first and second sample
    among the scores up to that group) at group ends. Dealing the sorted scores one at a time
    to the first sample, the second or neither, with the conditional probabilities of a uniform
    draw, gives ``P(m n D < c)`` for every attainable ``c`` at once; ``E[D] = sum_c P(m n D >= c)
    (c - c_prev) / (m n)``. Cost ``O(N T m n)`` for ``N`` scores and ``T <= m n`` thresholds.
    Without ties this is :func:`ks_null_mean`. The distribution does not change when both
    samples swap or the order of the scores reverses, which the results are cached under.

    Examples
    --------
    >>> ks_null_means([(1, 1, 1, 1), (2, 2)], np.array([2, 2]), np.array([2, 2])).round(4).tolist()
    [0.6667, 0.3333]

    Untied, as :func:`ks_null_mean`. Tied, ``{0, 0, 1, 1}`` dealt into two pairs: 2 of the 6
    deals split the values (``D = 1``), the other 4 give equal samples (``D = 0``).
    """
    m = np.asarray(m, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    out = np.full(len(groups), np.nan)
    todo: dict[tuple[tuple[int, ...], int, int], list[int]] = {}
    seen: dict[tuple[int, ...], tuple[int, bool, tuple[int, ...]]] = {}  # size, tied, canonical order
    for k, (g, a, b) in enumerate(zip(groups, m.tolist(), n.tolist(), strict=True)):
        info = seen.get(g)
        if info is None:
            info = seen[g] = (sum(g), max(g, default=0) > 1, min(tuple(g), tuple(g[::-1])))
        a, b = min(a, b), max(a, b)
        if a < 1 or a + b > info[0]:
            raise ValueError(f"expected two samples of at least 1 score within the {info[0]} scores, got {a} and {b}")
        if not info[1]:
            out[k] = _untied(a, b)
            continue
        key = (info[2], a, b)
        hit = _KS_TIED.get(key)
        if hit is not None:
            out[k] = hit
        elif sum(g) * (a * b // math.gcd(a, b)) * (a + 1) * (b + 1) <= KS_NULL_MAX_WORK:
            todo.setdefault(key, []).append(k)
    # One batch per pair of sizes (their thresholds differ) and class of SEG sizes (the steps).
    buckets: dict[tuple[int, int, int], list[tuple[tuple[int, ...], int, int]]] = {}
    for key in todo:
        buckets.setdefault((key[1], key[2], size_class(sum(key[0]))), []).append(key)
    for (a, b, _), keys in buckets.items():
        size = (a * b + 1) * (a + 1) * (b + 1)
        chunk = max(1, 4_000_000 // size)  # memory of one batch
        for lo in range(0, len(keys), chunk):
            part = keys[lo:lo + chunk]
            for key, v in zip(part, _ks_tied_batch(part).tolist(), strict=True):
                if len(_KS_TIED) > 1_000_000:
                    _KS_TIED.clear()
                _KS_TIED[key] = v
                out[todo[key]] = v
    return out


def _ks_cases(stats: NodeStats) -> tuple[tuple[np.ndarray, ...], np.ndarray, list[tuple[int, ...]]]:
    """The pool pairs of a batch that some walk compares (two pools with valid scores on different
    levels, so disjoint): their ``(SEG, column, pool, pool)`` indices and sizes, whether their
    SEG's scores tie, and the tie-group sizes of the SEGs that do (one per tied case)."""
    total = stats.counts.sum(axis=2).astype(np.int64)  # (S, B, V): the SEG's scores per distinct value
    n = stats.pool_n.astype(np.int64)  # (S, B, Q)
    qi, qj = stats.compared_pairs
    lv = stats.pool_level
    apart = (lv[:, qi] != lv[:, qj]) & (lv[:, qi] >= 0) & (lv[:, qj] >= 0)
    s_idx, b_idx, p_idx = np.nonzero((n[:, :, qi] > 0) & (n[:, :, qj] > 0) & apart[:, None, :])
    a, c = qi[p_idx], qj[p_idx]
    tied = (total.max(axis=-1, initial=0) > 1)[s_idx, b_idx]
    seg_groups: dict[tuple[int, int], tuple[int, ...]] = {}
    groups = []
    for s, b in zip(s_idx[tied].tolist(), b_idx[tied].tolist(), strict=True):
        g = seg_groups.get((s, b))
        if g is None:
            t = total[s, b]
            g = seg_groups[(s, b)] = tuple(t[t > 0].tolist())
        groups.append(g)
    return (s_idx, b_idx, a, c, n[s_idx, b_idx, a], n[s_idx, b_idx, c]), tied, groups


def sep_null_means(batches: Sequence[NodeStats], pairs: str = "all", degenerate: str = "zero") -> list[np.ndarray]:
    """Exact expected sep_m of every walk under the within-SEG permutation null, ``(S, B, W)`` per
    batch.

    A walk's sep_m is a fixed mean of KS statistics between its level pools (which pools, and
    which walks have a value, depend only on where the missing cells are, which a permutation
    keeps), and the scores of two pools are two disjoint uniform draws from the SEG's valid
    scores: so its expectation is the same mean of :func:`ks_null_means`, ties included (the
    cases of all batches in one call: one dynamic program per size class), or of
    :func:`ks_null_mean` where the SEG's scores do not tie. NaN where a pool pair is beyond the
    exact computation's cost bound.
    """
    fill = degenerate_fill(degenerate)
    cases = [_ks_cases(st) for st in batches]
    m = np.concatenate([c[0][4] for c in cases]) if cases else np.zeros(0, np.int64)
    n = np.concatenate([c[0][5] for c in cases]) if cases else np.zeros(0, np.int64)
    tied = np.concatenate([c[1] for c in cases]) if cases else np.zeros(0, bool)
    flat = np.full(len(m), np.nan)
    if tied.any():
        flat[tied] = ks_null_means([g for c in cases for g in c[2]], m[tied], n[tied])
    if (~tied).any():  # untied: the expectation depends on the two sizes only
        lo, hi = np.minimum(m[~tied], n[~tied]), np.maximum(m[~tied], n[~tied])
        pairs_, inverse = np.unique(np.stack([lo, hi]), axis=1, return_inverse=True)
        e = np.array([_untied(x, y) for x, y in pairs_.T.tolist()])
        flat[~tied] = e[inverse.ravel()]
    bounds = np.cumsum([0] + [len(c[1]) for c in cases])
    out = []
    for k, st in enumerate(batches):
        s_idx, b_idx, a, c = cases[k][0][:4]
        S, B, Q = st.pool_n.shape
        e0 = np.zeros((S, B, Q, Q))
        v = flat[bounds[k]:bounds[k + 1]]
        e0[s_idx, b_idx, a, c] = v
        e0[s_idx, b_idx, c, a] = v
        with np.errstate(invalid="ignore"):
            e = st.pool_pair_mean(e0, pairs)
        e[st.n_slots <= 1] = fill
        e[st.n < 1] = np.nan
        out.append(e)
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
