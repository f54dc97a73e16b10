"""Paired comparison of metrics on the same SEGs, Holm correction, significance-grouped ranking.

Two metrics scored on the same images are compared SEG by SEG: the difference of their
dataset values gets a CI from the same cluster-bootstrap replicates (paired: each replicate
draws the same SEGs for both metrics), and a p-value from a sign-flip permutation test on the
per-SEG differences (under H0 the two metrics' SEG values are exchangeable).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .bootstrap import percentile_ci
from .pipeline import AnalysisResult

__all__ = ["holm", "sign_flip_pvalues", "compare_metrics", "pairwise_comparisons", "rank_metrics"]


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


def sign_flip_pvalues(diffs: np.ndarray, n_permutations: int = 9999, rng: np.random.Generator | None = None) -> np.ndarray:
    """Two-sided paired permutation p-values of mean(diff) = 0, one per column.

    Parameters
    ----------
    diffs : ndarray, shape (n_segs, n_tests)
        Per-SEG differences; NaN where a SEG has no value for a test (left out of that test).
    n_permutations : int
        Random sign vectors (shared by all columns). When ``2**n_segs <= n_permutations`` every
        sign vector is enumerated instead (exact test, as :func:`scipy.stats.permutation_test`).

    Returns
    -------
    ndarray, shape (n_tests,)
        Exact: share of sign vectors with ``|mean| >= |observed|``. Random: ``(1 + hits) /
        (1 + n_permutations)``. NaN for a column without any value.
    """
    d = np.asarray(diffs, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    ok = ~np.isnan(d)
    n = ok.sum(axis=0)
    d0 = np.where(ok, d, 0.0)  # a zero difference is unchanged by any sign flip
    n_s = d.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.abs(d0.sum(axis=0)) / n
    exact = n_s <= 20 and 2 ** n_s <= n_permutations
    if exact:
        signs = 1.0 - 2.0 * ((np.arange(2 ** n_s)[:, None] >> np.arange(n_s)[None, :]) & 1)
    else:
        rng = rng if rng is not None else np.random.default_rng(0)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(int(n_permutations), n_s))
    hits = np.zeros(d.shape[1])
    for lo in range(0, len(signs), 4096):  # bounded memory: (chunk x n_tests)
        with np.errstate(invalid="ignore", divide="ignore"):
            stat = np.abs(signs[lo:lo + 4096] @ d0) / n
        # Relative tolerance: sums of the same numbers in another order must count as equal.
        hits += (stat >= observed * (1 - 1e-12) - 1e-15).sum(axis=0)
    p = hits / len(signs) if exact else (hits + 1) / (len(signs) + 1)
    p[n == 0] = np.nan
    return p


def _cell_arrays(result: AnalysisResult, protocol: str | None):
    pr = result.get(protocol)
    return pr, pr.seg_values


def pairwise_comparisons(result: AnalysisResult, pairs: Sequence[tuple[str, str]], meta_metric: str | None = None,
                         subset: str | None = None, protocol: str | None = None, n_permutations: int = 9999,
                         seed: int = 0) -> pd.DataFrame:
    """Paired comparisons of metric pairs for every (meta-metric, subset) cell (or one).

    Columns: ``protocol, meta_metric, subset, metric_a, metric_b, value_a, value_b, diff,
    ci_low, ci_high, p_value, n_segs``; ``diff = value_a - value_b``; CIs from the shared
    bootstrap replicates (NaN without bootstrap); p-values from :func:`sign_flip_pvalues` on the
    per-SEG values (delta: normalised, signed).
    """
    pr, sv = _cell_arrays(result, protocol)
    mi = {m: i for i, m in enumerate(result.metrics)}
    for a, b in pairs:
        for m in (a, b):
            if m not in mi:
                raise ValueError(f"expected metrics among {list(result.metrics)}, got {m!r}")
    if meta_metric is None:
        kk = list(range(len(result.meta_metrics)))
    else:
        kk = [result.index_of(result.meta_metrics, meta_metric, "meta-metric")]
    groups = sv.groups()
    gg = range(len(groups)) if subset is None else [result.index_of(pr.group_names, subset, "subset")]
    cells = [(k, g) for k in kk for g in gg]
    rows, cols = [], []
    for a, b in pairs:
        for k, g in cells:
            idx = groups[g][1]
            cols.append(sv.values[mi[a], k, idx] - sv.values[mi[b], k, idx])
            rows.append((a, b, k, g))
    # One test per (pair, cell); SEG sets differ by subset, so pad columns to a common length.
    width = max((len(c) for c in cols), default=0)
    mat = np.full((width, len(cols)), np.nan)
    for j, c in enumerate(cols):
        mat[:len(c), j] = c
    pvals = sign_flip_pvalues(mat, n_permutations, np.random.default_rng(seed)) if cols else np.zeros(0)
    out = []
    for j, (a, b, k, g) in enumerate(rows):
        va, vb = pr.estimates[mi[a], k, g], pr.estimates[mi[b], k, g]
        if pr.replicates is not None:
            diff_reps = pr.replicates[:, mi[a], k, g] - pr.replicates[:, mi[b], k, g]
            lo, hi = percentile_ci(diff_reps, result.confidence)
        else:
            lo = hi = np.nan
        out.append((pr.protocol.name, result.meta_metrics[k], pr.group_names[g], a, b, va, vb, va - vb, float(lo),
                    float(hi), pvals[j], int((~np.isnan(cols[j])).sum())))
    return pd.DataFrame(out, columns=["protocol", "meta_metric", "subset", "metric_a", "metric_b", "value_a", "value_b",
                                      "diff", "ci_low", "ci_high", "p_value", "n_segs"])


def compare_metrics(result: AnalysisResult, a: str, b: str, protocol: str | None = None, n_permutations: int = 9999,
                    seed: int = 0) -> pd.DataFrame:
    """Metric ``a`` against metric ``b`` in every (meta-metric, subset) cell."""
    if a == b:
        raise ValueError(f"expected two different metrics to compare, got {a!r} twice")
    return pairwise_comparisons(result, [(a, b)], protocol=protocol, n_permutations=n_permutations, seed=seed)


def rank_metrics(result: AnalysisResult, meta_metric: str = "rank", subset: str = "Avg", protocol: str | None = None,
                 alpha: float = 0.05, n_permutations: int = 9999, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metrics ranked by one cell, grouped by significance.

    Every pair is tested (:func:`pairwise_comparisons`), p-values Holm-corrected over the
    pairs. Groups: the best metric and every metric not significantly different from it form
    group 1; the best metric left and the remaining ones not significantly different from it
    form group 2; and so on. ``tied_with`` lists every metric not significantly different.

    Returns
    -------
    ranking : DataFrame
        ``protocol, meta_metric, subset, position, metric, value, ci_low, ci_high, group, tied_with``
    pairs : DataFrame
        The pairwise tests with ``p_holm`` and ``significant``.
    """
    pr = result.get(protocol)
    k = result.index_of(result.meta_metrics, meta_metric, "meta-metric")
    g = result.index_of(pr.group_names, subset, "subset")
    est = pr.estimates[:, k, g]
    order = [result.metrics[i] for i in np.argsort(-np.nan_to_num(est, nan=-np.inf), kind="stable")]
    pairs = list(itertools.combinations(order, 2))
    tests = pairwise_comparisons(result, pairs, meta_metric, subset, protocol, n_permutations, seed)
    tests["p_holm"] = holm(tests["p_value"].to_numpy())
    tests["significant"] = tests["p_holm"] < alpha
    same: dict[str, set[str]] = {m: set() for m in order}
    for a, b, sig in zip(tests["metric_a"], tests["metric_b"], tests["significant"]):
        if not sig:
            same[a].add(b)
            same[b].add(a)
    group: dict[str, int] = {}
    g_no = 0
    for m in order:
        if m in group:
            continue
        g_no += 1
        group[m] = g_no
        for other in order:
            if other not in group and other in same[m]:
                group[other] = g_no
    mi = {m: i for i, m in enumerate(result.metrics)}
    rows = [(pr.protocol.name, meta_metric, subset, pos + 1, m, est[mi[m]], pr.ci_low[mi[m], k, g], pr.ci_high[mi[m], k, g],
             group[m], ";".join(x for x in order if x in same[m])) for pos, m in enumerate(order)]
    ranking = pd.DataFrame(rows, columns=["protocol", "meta_metric", "subset", "position", "metric", "value", "ci_low",
                                          "ci_high", "group", "tied_with"])
    return ranking, tests
