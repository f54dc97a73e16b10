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

from .pipeline import AnalysisResult
from .stats import ALPHA, holm, percentile_ci, sign_flip_pvalues, withhold_small_cis

__all__ = ["compare_metrics", "pairwise_comparisons", "rank_cells", "rank_metrics"]


def _cell_arrays(result: AnalysisResult, protocol: str | None):
    pr = result.get(protocol)
    return pr, pr.seg_values


def _pair_columns(result: AnalysisResult, pairs: Sequence[tuple[str, str]], meta_metric: str | None,
                  subset: str | None, protocol: str | None):
    """The tests of :func:`pairwise_comparisons`: ``(pr, tests, (columns, terms))``, one ``(a, b, k, g)``
    per test; its per-SEG differences are ``columns[ta] - columns[tb]`` for its ``(ta, tb)`` in
    ``terms`` (NaN where a SEG lacks a value), ``columns`` holding each cell's metric columns once."""
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
    n_m = len(result.metrics)
    columns = [sv.values[i, k, groups[g][1]] for k, g in cells for i in range(n_m)]
    tests, terms = [], []
    for a, b in pairs:
        for c, (k, g) in enumerate(cells):
            terms.append((c * n_m + mi[a], c * n_m + mi[b]))
            tests.append((a, b, k, g))
    return pr, tests, (columns, terms)


def _pvalues(col_sets: Sequence[tuple[Sequence[np.ndarray], Sequence[tuple[int, int]]]], n_permutations: int,
             seed: int) -> list[np.ndarray]:
    """Sign-flip p-values of each set of tests ``(columns, terms)`` (:func:`_pair_columns`), each
    set as its own :func:`sign_flip_pvalues` call with ``default_rng(seed)`` would give them.

    A set's columns are padded (NaN) to its longest; that length fixes the sign vectors (the
    same seed draws the same signs for the same length), so the sets of one length share one
    call: the signs are drawn once, and every test's p-value is that of its own set's call.
    """
    widths = [max((len(c) for c in cols), default=0) for cols, _ in col_sets]
    out: list[np.ndarray] = [np.zeros(0) for _ in col_sets]
    for width in dict.fromkeys(w for w, (_, terms) in zip(widths, col_sets, strict=True) if terms):
        members = [i for i, w in enumerate(widths) if w == width and col_sets[i][1]]
        flat, ia, ib = [], [], []
        for i in members:
            cols, terms = col_sets[i]
            ia.extend(len(flat) + ta for ta, _ in terms)
            ib.extend(len(flat) + tb for _, tb in terms)
            flat.extend(cols)
        mat = np.full((width, len(flat)), np.nan)
        for j, c in enumerate(flat):
            mat[:len(c), j] = c
        p = sign_flip_pvalues(mat, n_permutations, np.random.default_rng(seed), pairs=(np.array(ia), np.array(ib)))
        at = 0
        for i in members:
            out[i] = p[at:at + len(col_sets[i][1])]
            at += len(col_sets[i][1])
    return out


def _comparison_frame(result: AnalysisResult, pr, tests: Sequence[tuple[str, str, int, int]],
                      col_set: tuple[Sequence[np.ndarray], Sequence[tuple[int, int]]], pvals: np.ndarray) -> pd.DataFrame:
    """The :func:`pairwise_comparisons` frame of ``tests`` (from :func:`_pair_columns`)."""
    mi = {m: i for i, m in enumerate(result.metrics)}
    ia = np.array([mi[a] for a, _, _, _ in tests], dtype=int)
    ib = np.array([mi[b] for _, b, _, _ in tests], dtype=int)
    kk = np.array([k for _, _, k, _ in tests], dtype=int)
    gg = np.array([g for _, _, _, g in tests], dtype=int)
    va, vb = pr.estimates[ia, kk, gg], pr.estimates[ib, kk, gg]
    cols, terms = col_set
    n_pair = np.array([int((~np.isnan(cols[ta]) & ~np.isnan(cols[tb])).sum()) for ta, tb in terms], dtype=int)
    if pr.replicates is not None and len(tests):
        # One interval per column of (n_boot, n_tests): the same quantiles as test by test.
        diff_reps = pr.replicates[:, ia, kk, gg] - pr.replicates[:, ib, kk, gg]
        ci = percentile_ci(diff_reps, result.confidence)
        lo, hi, _ = withhold_small_cis(ci.low, ci.high, n_pair, result.min_segs_ci)
    else:
        lo = hi = np.full(len(tests), np.nan)
    out = [(pr.protocol.name, result.meta_metrics[k], pr.group_names[g], a, b, va[j], vb[j], va[j] - vb[j],
            float(lo[j]), float(hi[j]), pvals[j], int(n_pair[j])) for j, (a, b, k, g) in enumerate(tests)]
    return pd.DataFrame(out, columns=["protocol", "meta_metric", "subset", "metric_a", "metric_b", "value_a", "value_b",
                                      "diff", "ci_low", "ci_high", "p_value", "n_segs"])


def pairwise_comparisons(result: AnalysisResult, pairs: Sequence[tuple[str, str]], meta_metric: str | None = None,
                         subset: str | None = None, protocol: str | None = None, n_permutations: int = 9999,
                         seed: int = 0) -> pd.DataFrame:
    """Paired comparisons of metric pairs for every (meta-metric, subset) cell (or one).

    Columns: ``protocol, meta_metric, subset, metric_a, metric_b, value_a, value_b, diff,
    ci_low, ci_high, p_value, n_segs``; ``diff = value_a - value_b``; CIs from the shared
    bootstrap replicates (NaN without bootstrap, and for fewer than ``min_segs_ci`` paired SEGs); p-values from :func:`sign_flip_pvalues` on the
    per-SEG values (delta: normalised, signed).
    """
    pr, tests, col_set = _pair_columns(result, pairs, meta_metric, subset, protocol)
    pvals = _pvalues([col_set], n_permutations, seed)[0]
    return _comparison_frame(result, pr, tests, col_set, pvals)


def compare_metrics(result: AnalysisResult, a: str, b: str, protocol: str | None = None, n_permutations: int = 9999,
                    seed: int = 0) -> pd.DataFrame:
    """Metric ``a`` against metric ``b`` in every (meta-metric, subset) cell."""
    if a == b:
        raise ValueError(f"expected two different metrics to compare, got {a!r} twice")
    return pairwise_comparisons(result, [(a, b)], protocol=protocol, n_permutations=n_permutations, seed=seed)


def rank_metrics(result: AnalysisResult, meta_metric: str = "rank", subset: str = "Avg", protocol: str | None = None,
                 alpha: float = ALPHA, n_permutations: int = 9999, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
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
    return rank_cells(result, [(meta_metric, subset, protocol)], alpha, n_permutations, seed)[0]


def rank_cells(result: AnalysisResult, cells: Sequence[tuple[str, str, str | None]], alpha: float = ALPHA,
               n_permutations: int = 9999, seed: int = 0) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """:func:`rank_metrics` of several ``(meta_metric, subset, protocol)`` cells, in order.

    Each cell's result equals its own :func:`rank_metrics` call; the cells' permutation tests
    share their sign draws where their SEG counts agree (:func:`_pvalues`), which is most of the
    cost of a ranking on many SEGs.
    """
    prepared = []
    for meta_metric, subset, protocol in cells:
        pr = result.get(protocol)
        k = result.index_of(result.meta_metrics, meta_metric, "meta-metric")
        g = result.index_of(pr.group_names, subset, "subset")
        est = pr.estimates[:, k, g]
        order = [result.metrics[i] for i in np.argsort(-np.nan_to_num(est, nan=-np.inf), kind="stable")]
        _, tests, col_set = _pair_columns(result, list(itertools.combinations(order, 2)), meta_metric, subset, protocol)
        prepared.append((meta_metric, subset, pr, k, g, est, order, tests, col_set))
    pvals = _pvalues([p[-1] for p in prepared], n_permutations, seed)
    return [_ranking(result, *p, pv, alpha) for p, pv in zip(prepared, pvals, strict=True)]


def _ranking(result: AnalysisResult, meta_metric: str, subset: str, pr, k: int, g: int, est: np.ndarray,
             order: list[str], pair_tests, col_set, pvals: np.ndarray, alpha: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One cell of :func:`rank_cells`: the ranking and its Holm-corrected pairwise tests."""
    tests = _comparison_frame(result, pr, pair_tests, col_set, pvals)
    tests["p_holm"] = holm(tests["p_value"].to_numpy())
    tests["significant"] = tests["p_holm"] < alpha
    same: dict[str, set[str]] = {m: set() for m in order}
    for a, b, sig in zip(tests["metric_a"], tests["metric_b"], tests["significant"], strict=True):
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
