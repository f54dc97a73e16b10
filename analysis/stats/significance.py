"""Significance tests shared by both views: sign-flip permutation p-values, Williams' test, Holm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as ss

#: The family-wise error rate of every Holm-corrected test in ts2 unless a setting says otherwise
#: (ranking.alpha, human_clusters.alpha): the one default.
ALPHA = 0.05

__all__ = ["ALPHA", "holm", "sign_flip_pvalues", "SIGN_CHUNK_ELEMENTS", "WilliamsResult", "williams_test",
           "significance_clusters"]


@dataclass(frozen=True)
class WilliamsResult:
    """Williams' t statistic, its two-sided p-value and degrees of freedom."""

    t: float
    p: float
    df: int


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (NaN entries stay NaN, not counted).

    ``p_adj(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` over the sorted p-values.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03]).round(4).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def significance_clusters(pvalues: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Cluster ranks of items sorted best first, from their pairwise p-values (mt-metrics-eval's rule).

    ``pvalues[i, j]`` (``i < j``, upper triangle used) tests whether item ``i`` (better) and item
    ``j`` differ. Walking down the order, item ``i`` opens a new cluster when it is significantly
    worse (``p < alpha``) than some item of the current cluster; otherwise it joins it. So a
    cluster holds items none of which is significantly better than another of the same cluster,
    and each is significantly worse than something in a cluster above
    (``AssignRanks`` of google-research/mt-metrics-eval, ``data.py``, with the project's
    ``p < alpha``). Pass Holm-adjusted p-values (:func:`holm`) for a family-wise ``alpha``. A NaN
    p-value (an undefined test) is not significant.

    Returns
    -------
    ndarray of int, shape (n,)
        1 for the top cluster, 2 for the next, ...

    Examples
    --------
    >>> p = np.array([[0, .5, .01, .001], [0, 0, .2, .01], [0, 0, 0, .3], [0, 0, 0, 0]])
    >>> significance_clusters(p).tolist()
    [1, 1, 2, 2]
    """
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"expected a square matrix of p-values, got shape {p.shape}")
    n = p.shape[0]
    ranks = np.zeros(n, dtype=int)
    rank, start = 1, 0
    for i in range(n):
        col = p[start:i, i]
        if np.any(col[np.isfinite(col)] < alpha):
            rank += 1
            start = i
        ranks[i] = rank
    return ranks


#: Sign-matrix (and statistic) elements held at a time: 64 MiB of float64 signs, half as much of
#: int32 draws, so memory stays bounded however many SEGs, tests and permutations there are.
SIGN_CHUNK_ELEMENTS = 1 << 23


def sign_flip_pvalues(diffs: np.ndarray, n_permutations: int = 9999, rng: np.random.Generator | None = None,
                      chunk_elements: int = SIGN_CHUNK_ELEMENTS,
                      pairs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Two-sided paired permutation p-values of mean(diff) = 0, one per column.

    Parameters
    ----------
    diffs : ndarray, shape (n_segs, n_tests), or (n_segs, n_columns) with ``pairs``
        Per-SEG differences; NaN where a SEG has no value for a test (left out of that test).
    n_permutations : int
        Random sign vectors (shared by all columns). When ``2**n_segs <= n_permutations`` every
        sign vector is enumerated instead (exact test, as :func:`scipy.stats.permutation_test`).
    rng : numpy Generator, optional
        Source of the random signs (default ``default_rng(0)``). Row ``r`` of the sign matrix is
        ``rng.choice([-1.0, 1.0], size=(n_permutations, n_segs))[r]``; the rows are drawn a block
        at a time (the same stream: ``choice`` draws ``integers(0, 2)`` in C order), so neither
        the block size nor the number of columns changes a p-value.
    chunk_elements : int
        Elements of a block of sign rows, and of its statistics, held at once (at least one row):
        memory, not results.
    pairs : (ndarray of int, ndarray of int), optional
        ``(a, b)``, one entry per test: ``diffs`` then holds value columns and test ``j`` is that
        of ``diffs[:, a[j]] - diffs[:, b[j]]``, the same p-values as passing those differences.
        Many pairs of few columns (every pair of metrics) cost the products of the columns with
        the signs, not of every difference (see below).

    Returns
    -------
    ndarray, shape (n_tests,)
        Exact: share of sign vectors with ``|mean| >= |observed|``. Random: ``(1 + hits) /
        (1 + n_permutations)``. NaN for a column without any value.

    Notes
    -----
    With ``pairs``, a test whose two columns lack the same SEGs has its permuted sums taken as
    ``signs @ a - signs @ b`` (the products shared by every test of a column). That sum differs
    from ``signs @ (a - b)`` by rounding only, at most ``(n_segs + 2) 2**-51 (|a| + |b|)`` summed
    over SEGs (twice the dot-product bound, which covers both ways of summing), so wherever it is
    that close to the threshold, the block's sums of that test are taken as ``signs @ (a - b)``:
    each count is the one the differences give.
    """
    d = np.asarray(diffs, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    if chunk_elements < 1:
        raise ValueError(f"expected chunk_elements >= 1, got {chunk_elements}")
    cols = None
    if pairs is not None:
        d, cols, ia, ib, shared = _pair_differences(d, pairs)
    ok = ~np.isnan(d)
    n = ok.sum(axis=0)
    if cols is None:
        d0 = np.where(ok, d, 0.0)  # a zero difference is unchanged by any sign flip
    else:  # the differences are this call's own array: zeroed in place
        d[~ok] = 0.0
        d0 = d
    del d, ok
    n_s = d0.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.abs(d0.sum(axis=0)) / n
        if cols is not None:
            abs_sum = np.abs(cols).sum(axis=0)
            margin = (n_s + 2) * 2.0 ** -51 * (abs_sum[ia] + abs_sum[ib]) / n
    # Relative tolerance: sums of the same numbers in another order must count as equal.
    threshold = observed * (1 - 1e-12) - 1e-15
    if cols is not None:
        near_lo, near_hi = threshold - margin, threshold + margin
    exact, n_rows, rng = _sign_vectors(n_s, n_permutations, rng)
    # Rows per block: its signs (rows x n_segs) and its statistics (rows x n_tests; with pairs,
    # twice: the products' second terms are gathered beside them) fit.
    step = max(1, min(n_rows, chunk_elements // max(n_s, d0.shape[1] * (1 if cols is None else 2), 1)))
    buf = np.empty((step, n_s))
    hits = np.zeros(d0.shape[1])
    for lo in range(0, n_rows, step):
        rows = min(step, n_rows - lo)
        signs = buf[:rows]
        _fill_signs(signs, lo, exact, rng)
        if cols is None:
            stat = signs @ d0
        else:
            proj = signs @ cols
            stat = proj[:, ia]
            stat -= proj[:, ib]
        np.abs(stat, out=stat)
        with np.errstate(invalid="ignore", divide="ignore"):
            stat /= n
            if cols is not None:
                near = (stat >= near_lo) & (stat <= near_hi)  # within the rounding bound of the threshold
                redo = np.flatnonzero(~shared | near.any(axis=0))
                if redo.size:
                    stat[:, redo] = np.abs(signs @ d0[:, redo]) / n[redo]
        hits += (stat >= threshold).sum(axis=0)
    p = hits / n_rows if exact else (hits + 1) / (n_rows + 1)
    p[n == 0] = np.nan
    return p


def _pair_differences(d: np.ndarray, pairs) -> tuple:
    """For :func:`sign_flip_pvalues` with ``pairs=(a, b)``: each test's differences
    ``d[:, a] - d[:, b]`` (NaN where either is), the value columns with NaN as 0, the indices ``a``
    and ``b``, and per test whether both columns lack the same SEGs (only then is the zero-filled
    difference ``a - b``)."""
    ia, ib = (np.asarray(x, dtype=np.intp) for x in pairs)
    gaps = np.isnan(d)
    cols = np.where(gaps, 0.0, d)
    shared = ~(gaps[:, ia] != gaps[:, ib]).any(axis=0)
    diff = d[:, ia]
    diff -= d[:, ib]  # in place: one (n_segs, n_tests) array less at a time
    return diff, cols, ia, ib, shared


def _sign_vectors(n_s: int, n_permutations: int, rng: np.random.Generator | None):
    """Which sign vectors :func:`sign_flip_pvalues` uses over ``n_s`` SEGs: ``(exact, n_rows, rng)``,
    every one of the ``2**n_s`` (exact, no generator) when there are at most ``n_permutations`` of
    them, else ``n_permutations`` random ones from ``rng`` (default ``default_rng(0)``)."""
    if n_s <= 20 and 2 ** n_s <= n_permutations:
        return True, 2 ** n_s, None
    return False, int(n_permutations), rng if rng is not None else np.random.default_rng(0)


def _fill_signs(signs: np.ndarray, lo: int, exact: bool, rng: np.random.Generator | None) -> None:
    """Rows ``lo, lo + 1, ...`` of the sign matrix into ``signs`` (rows x n_segs): the binary digits of
    the row number when ``exact``, else the next draws of ``rng``."""
    rows, n_s = signs.shape
    if exact:
        signs[:] = 1.0 - 2.0 * (((lo + np.arange(rows))[:, None] >> np.arange(n_s)[None, :]) & 1)
        return
    # choice([-1, 1]) indexes [-1, 1] with integers(0, 2, dtype=int64), and an int32 draw
    # below 2**32 takes the same 32-bit stream: 2 * draw - 1 is choice's sign, without
    # choice's int64 index array and copy.
    np.multiply(rng.integers(0, 2, size=(rows, n_s), dtype=np.int32), 2.0, out=signs)
    signs -= 1.0


def williams_test(r12: float, r13: float, r23: float, n: int) -> WilliamsResult:
    """Williams' test for two dependent correlations sharing variable 1 (Steiger 1980, eq. 7).

    With 1 = human, 2 and 3 = two metrics on the same ``n`` items::

        |R| = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23
        t   = (r12 - r13) sqrt((n - 1)(1 + r23))
              / sqrt(2 |R| (n - 1)/(n - 3) + ((r12 + r13)/2)^2 (1 - r23)^3)

    t follows Student's t with ``n - 3`` degrees of freedom (the test used for metric
    comparisons by Graham & Baldwin, 2014, in WMT).

    Returns
    -------
    WilliamsResult
        ``t``, two-sided ``p``, ``df = n - 3``; t and p NaN when the denominator vanishes
        (e.g. all correlations 1).

    Raises
    ------
    ValueError
        ``n <= 3`` or a correlation outside [-1, 1] / NaN.

    Examples
    --------
    >>> r = williams_test(0.4, 0.5, 0.1, 103)   # psych::r.test(103, .4, .5, .1): t = -0.89, p = 0.37
    >>> round(r.t, 3), round(r.p, 2)
    (-0.891, 0.37)
    """
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        if not (math.isfinite(r) and -1 <= r <= 1):
            raise ValueError(f"expected {name} in [-1, 1], got {r}")
    if n <= 3:
        raise ValueError(f"expected n > 3 items for Williams' test, got {n}")
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    den = 2 * det * (n - 1) / (n - 3) + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3
    if den <= 0:
        return WilliamsResult(math.nan, math.nan, n - 3)
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(den)
    p = float(2 * ss.t.sf(abs(t), n - 3))
    return WilliamsResult(float(t), p, n - 3)
