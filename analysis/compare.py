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
from .stats import holm, percentile_ci, sign_flip_pvalues, withhold_small_cis

__all__ = ["compare_metrics", "pairwise_comparisons", "rank_metrics"]


def _cell_arrays(result: AnalysisResult, protocol: str | None):
    pr = result.get(protocol)
    return pr, pr.seg_values


def pairwise_comparisons(result: AnalysisResult, pairs: Sequence[tuple[str, str]], meta_metric: str | None = None,
                         subset: str | None = None, protocol: str | None = None, n_permutations: int = 9999,
                         seed: int = 0) -> pd.DataFrame:
    """Paired comparisons of metric pairs for every (meta-metric, subset) cell (or one).

    Columns: ``protocol, meta_metric, subset, metric_a, metric_b, value_a, value_b, diff,
    ci_low, ci_high, p_value, n_segs``; ``diff = value_a - value_b``; CIs from the shared
    bootstrap replicates (NaN without bootstrap, and for fewer than ``min_segs_ci`` paired SEGs); p-values from :func:`sign_flip_pvalues` on the
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
        n_pair = int((~np.isnan(cols[j])).sum())
        if pr.replicates is not None:
            diff_reps = pr.replicates[:, mi[a], k, g] - pr.replicates[:, mi[b], k, g]
            ci = percentile_ci(diff_reps, result.confidence)
            lo, hi, _ = withhold_small_cis(ci.low, ci.high, np.array(n_pair), result.min_segs_ci)
        else:
            lo = hi = np.nan
        out.append((pr.protocol.name, result.meta_metrics[k], pr.group_names[g], a, b, va, vb, va - vb, float(lo),
                    float(hi), pvals[j], n_pair))
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
