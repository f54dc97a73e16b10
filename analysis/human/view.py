"""The human view as one library call: statistics, intervals, tables and paired tests of a file.

:func:`run_human_view` is what ``ts2 analyze human=FILE`` runs (the CLI handler only reads the
config and the file); it writes into ``output_dir``:

``human_metametrics.csv``
    ``metric, statistic, grouping, subset, value, ci_low, ci_high, n, cluster``: for every metric,
    each statistic that applies to the set's kind (:data:`KIND_STATISTICS`: Likert ratings pooled
    over images (``global``) and within prompts (``prompt``); binary labels by ROC AUC; ranked
    images within prompts), with cluster-bootstrap (by prompt) percentile intervals, on all items
    (``subset`` ``all``) and on each category of the set (``skill=counting``, ...);
    ``pairwise_acc_epsilon`` rows give the calibrated tie threshold; rows of metric ``human``
    give Krippendorff's alpha (interval, ordinal) between raters; rows of metric
    ``rater_ceiling`` the leave-one-rater-out agreement with the same statistics
    (:mod:`.ceiling`); ``cluster`` is the significance cluster (1 = top) of the metric among all
    metrics for that statistic and grouping (:func:`significance_table`). Rewritten after each
    metric, so an interrupted run keeps the metrics it finished.
``human_table.md`` / ``human_table.csv``
    The TIFA-Table-2-like tables (x100; the markdown cells carry their intervals).
``human_metric_correlations.csv``
    Spearman correlation between every two metrics and the human mean over images.
``human_paired_tests.csv``
    For each pair of metrics: Williams' test (Pearson and Spearman, global, Likert sets) and the
    paired test of every clustered statistic and grouping (:func:`analysis.human.paired_test`),
    with its Holm-adjusted p-value over the pairs of that statistic and grouping.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ..stats import holm, significance_clusters
from ._common import _groups_codes
from .bootstrap import bootstrap_human_statistic, bootstrap_krippendorff_alpha, bootstrap_replicates, draw_clusters
from .ceiling import rater_ceiling
from .correlation import grouped_correlation
from .paired import paired_test, williams_test_metrics
from .pairwise import grouped_pairwise_accuracy, tie_calibrated_pairwise_accuracy
from .tables import metric_correlation_matrix, write_human_table

__all__ = ["RESULT_COLUMNS", "TEST_COLUMNS", "TABLE_STATISTICS", "KIND_STATISTICS", "CLUSTER_STATISTICS",
           "CEILING", "HUMAN_ROWS", "ALL", "HumanViewOutputs", "run_human_view", "significance_table"]

log = logging.getLogger(__name__)

RESULT_COLUMNS = ["metric", "statistic", "grouping", "subset", "value", "ci_low", "ci_high", "n", "cluster"]
TEST_COLUMNS = ["metric_a", "metric_b", "test", "statistic", "grouping", "value_a", "value_b", "diff",
                "test_statistic", "p_value", "p_holm", "n", "n_resamples"]
TABLE_STATISTICS = ("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc")

#: The statistics and groupings that apply to each kind of set (seg_data.human.KINDS): Likert
#: means are compared pooled and within prompts; a 0/1 label is separated (ROC AUC, pooled: an
#: AUC within one text's few images says little); ranks exist only within a prompt.
KIND_STATISTICS = {
    "likert": (("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc"), ("global", "prompt")),
    "binary": (("roc_auc",), ("global",)),
    "ranked": (("spearman", "kendall_b", "pairwise_acc"), ("prompt",)),
}

#: Statistics whose metrics are grouped into significance clusters by default (the rest only on
#: request: their pooled permutation tests recompute the statistic per permutation).
CLUSTER_STATISTICS = ("pearson", "kendall_b", "pairwise_acc", "roc_auc")

#: The pseudo-metric of the rater-ceiling rows, and every pseudo-metric (not a metric) of the file.
CEILING = "rater_ceiling"
HUMAN_ROWS = ("human", CEILING)
#: The ``subset`` of rows over all items.
ALL = "all"


@dataclass(frozen=True)
class HumanViewOutputs:
    """What :func:`run_human_view` computed and where it wrote it."""

    results: pd.DataFrame
    tests: pd.DataFrame
    results_path: Path
    table_md: Path
    table_csv: Path
    correlations_path: Path
    tests_path: Path


def _write_results(rows: list[dict], path: Path) -> None:
    # Rewritten after each metric so an interrupted run keeps the metrics it finished.
    from seg_data.result_sets import atomic_write_text

    atomic_write_text(path, pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(index=False))


def _single_threaded_blas(fn):
    """Run ``fn`` with BLAS on one thread: the view's matrix products are small (160 prompts)
    and many, so waking BLAS threads costs more than the work (4x slower on 2 busy cores)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # results are the same, only slower
            return fn(*args, **kwargs)
        with threadpool_limits(1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper


@_single_threaded_blas
def run_human_view(hj, output_dir: str | Path, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                   n_perm: int = 1000, progress: bool = True, source: str = "", alpha: float = 0.05,
                   cluster_statistics: tuple[str, ...] | None = None) -> HumanViewOutputs:
    """Human-view meta-evaluation of every metric of a loaded human-judgment set.

    Parameters
    ----------
    hj : seg_data.human.HumanJudgments
        The set as loaded by :func:`seg_data.human.load_human_set` (metrics already selected).
    output_dir : path
        Created if missing; the files listed in the module docstring are written there.
    n_boot : int
        Prompt-bootstrap replicates (0: no intervals).
    seed : int
        Seeds every bootstrap (the same prompts for every metric and the ceiling) and permutation test.
    confidence : float
        Interval level.
    n_perm : int
        Permutations of the paired tests (0: no tests, no clusters).
    progress : bool
        tqdm bars.
    source : str
        Shown in log lines.
    alpha : float
        Family-wise error rate of the Holm-corrected tests behind the clusters.
    cluster_statistics : tuple of str, optional
        Statistics whose metrics are clustered (default :data:`CLUSTER_STATISTICS`), among those
        that apply to the set's kind.

    Returns
    -------
    HumanViewOutputs
    """
    from seg_data.progress import tqdm

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    statistics, groupings = KIND_STATISTICS[hj.kind]
    result_path = out / "human_metametrics.csv"
    rows: list[dict] = []
    ctx = _Context(hj, statistics, groupings, n_boot, seed, confidence)

    # Inter-annotator agreement first: it bounds what any metric can reach.
    rows.extend(_agreement_rows(hj, n_boot, seed, confidence, source))
    rows.extend(_ceiling_rows(ctx))
    for m in tqdm(hj.metrics, desc="metrics", disable=not progress):
        metric_rows = _metric_rows(ctx, m)
        if metric_rows is None:
            continue
        rows.extend(metric_rows)
        _write_results(rows, result_path)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)

    wanted = CLUSTER_STATISTICS if cluster_statistics is None else tuple(cluster_statistics)
    cells = [(st, g) for st in statistics if st in wanted for g in groupings]
    tests_frame = _paired_tests(hj, cells, n_perm, seed, progress)
    results = significance_table(results, tests_frame, alpha)
    _write_results(results.to_dict(orient="records"), result_path)

    labels = {**dict(hj.metric_labels), CEILING: "Rater ceiling (leave one out)"}
    whole = results[results["subset"] == ALL]
    done = [m for m in (CEILING, *hj.metrics) if m in set(whole["metric"])]
    table_stats = tuple(st for st in TABLE_STATISTICS if st in statistics) or statistics
    table_md, table_csv = (write_human_table(whole, out / f"human_table.{suffix}", statistics=table_stats,
                                             groupings=groupings, labels=labels, metrics=done,
                                             confidence=confidence if n_boot else None)
                           for suffix in ("md", "csv"))

    table = hj.score_table().assign(human=hj.human)
    corr_path = out / "human_metric_correlations.csv"
    metric_correlation_matrix(table, "spearman").to_csv(corr_path)
    tests_path = out / "human_paired_tests.csv"
    tests_frame.to_csv(tests_path, index=False)
    return HumanViewOutputs(results, tests_frame, result_path, table_md, table_csv, corr_path, tests_path)


@dataclass(frozen=True)
class _Context:
    """What every row of one set's view is computed with."""

    hj: object
    statistics: tuple[str, ...]
    groupings: tuple[str, ...]
    n_boot: int
    seed: int
    confidence: float


def _agreement_rows(hj, n_boot: int, seed: int, confidence: float, source: str) -> list[dict]:
    """Krippendorff's alpha rows (interval, ordinal) between raters; none, with a warning, for one rater."""
    rows: list[dict] = []
    if len(hj.raters) < 2:
        log.info("Krippendorff's alpha skipped: %s has a single rater", source or hj.name)
        return rows
    for level in ("interval", "ordinal"):
        try:
            ci = bootstrap_krippendorff_alpha(hj.reliability_data(), hj.groups, level, n_boot, seed, confidence)
        except ValueError as e:
            log.warning("Krippendorff's alpha (%s) skipped: %s", level, e)
            continue
        rows.append(_row("human", f"krippendorff_alpha_{level}", "global", ALL, ci.value, ci.low, ci.high,
                         hj.n_items))
    return rows


def _row(metric, statistic, grouping, subset, value, low, high, n, cluster=math.nan) -> dict:
    return {"metric": metric, "statistic": statistic, "grouping": grouping, "subset": subset, "value": value,
            "ci_low": low, "ci_high": high, "n": n, "cluster": cluster}


def _ceiling_rows(ctx: _Context) -> list[dict]:
    """The rater ceiling of every statistic and grouping (none for a set with one rater)."""
    hj = ctx.hj
    if len(hj.raters) < 2:
        return []
    rows = []
    for grouping in ctx.groupings:
        for st in ctx.statistics:
            c = rater_ceiling(hj.ratings.to_numpy(dtype=float), hj.groups, st, grouping, ctx.n_boot, ctx.seed,
                              ctx.confidence, rater_names=hj.raters)
            if c is not None:
                rows.append(_row(CEILING, st, grouping, ALL, c.ci.value, c.ci.low, c.ci.high, c.n_raters))
    if not rows:
        log.info("rater ceiling skipped: no two raters of %s share 2 items", hj.name)
    return rows


def _subsets(hj, ok: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """``(name, mask)`` of all items and of each category, restricted to ``ok`` (scored) items."""
    out = [(ALL, ok)]
    for name, mask in hj.subsets().items():
        sub = ok & mask
        if sub.sum() >= 2:
            out.append((name, sub))
    return out


def _metric_rows(ctx: _Context, m: str) -> list[dict] | None:
    """One metric's result rows (every statistic, grouping and subset, plus the tie thresholds) on its
    scored items; None, with a warning, when fewer than 2 items are scored (the metric is skipped)."""
    hj = ctx.hj
    x = hj.scores(m)
    ok = np.isfinite(x)
    if not ok.all():
        log.warning("metric %s: %d of %d items of %s have no score; they are left out of its statistics",
                    m, int((~ok).sum()), len(x), hj.name)
    if ok.sum() < 2:
        log.warning("metric %s: fewer than 2 scored items in %s, skipped", m, hj.name)
        return None
    rows: list[dict] = []
    for subset, mask in _subsets(hj, ok):
        xs, hs, gs = x[mask], hj.human[mask], hj.groups[mask]
        for grouping in ctx.groupings:
            for st in ctx.statistics:
                rows.append(_statistic_row(ctx, m, st, grouping, subset, xs, hs, gs))
            if "pairwise_acc" in ctx.statistics:
                rows.append(_epsilon_row(m, grouping, subset, xs, hs, gs))
    return rows


def _statistic_row(ctx: _Context, m, st, grouping, subset, xs, hs, gs) -> dict:
    if st == "roc_auc" and len(np.unique(hs)) < 2:
        return _row(m, st, grouping, subset, math.nan, math.nan, math.nan, len(xs))  # one class only
    ci = bootstrap_human_statistic(xs, hs, gs, st, grouping, ctx.n_boot, ctx.seed, ctx.confidence)
    if grouping == "global":
        n = len(xs)
    elif st == "pairwise_acc":
        n = int(grouped_pairwise_accuracy(xs, hs, gs).n_pairs)
    else:
        n = grouped_correlation(xs, hs, gs, st).n_used
    return _row(m, st, grouping, subset, ci.value, ci.low, ci.high, n)


def _epsilon_row(m, grouping, subset, xs, hs, gs) -> dict:
    if grouping == "global":
        pa, n = tie_calibrated_pairwise_accuracy(xs, hs), len(xs)
    else:
        pa = grouped_pairwise_accuracy(xs, hs, gs)
        n = int(pa.n_pairs)  # prompts used
    return _row(m, "pairwise_acc_epsilon", grouping, subset, pa.epsilon, math.nan, math.nan, n)


def _paired_tests(hj, cells: list[tuple[str, str]], n_perm: int, seed: int, progress: bool) -> pd.DataFrame:
    """Williams' tests (Likert sets) and the paired test of every (statistic, grouping) cell for every
    pair of metrics, with Holm-adjusted p-values over the pairs of each test, statistic and grouping."""
    from tqdm.auto import tqdm

    found = []
    pairs = list(combinations(hj.metrics, 2))
    reps = _ReplicateCache(hj, n_perm, seed)
    for a, b in tqdm(pairs, desc="paired tests", disable=not progress or not pairs):
        xa, xb, human = hj.scores(a), hj.scores(b), hj.human
        if hj.kind == "likert":
            for method in ("pearson", "spearman"):
                try:
                    found.append((a, b, williams_test_metrics(xa, xb, human, method, nan_policy="omit")))
                except ValueError as e:
                    log.warning("Williams' test %s vs %s (%s) skipped: %s", a, b, method, e)
        if n_perm > 0:
            for st, grouping in cells:
                found.append((a, b, paired_test(xa, xb, human, hj.groups, st, grouping, n_perm, seed,
                                                replicates=reps.pair(a, b, st, grouping))))
    frame = pd.DataFrame([{"metric_a": a, "metric_b": b, "test": t.test, "statistic": t.statistic,
                           "grouping": t.grouping, "value_a": t.value_a, "value_b": t.value_b, "diff": t.diff,
                           "test_statistic": t.test_statistic, "p_value": t.p_value, "p_holm": math.nan, "n": t.n,
                           "n_resamples": t.n_resamples} for a, b, t in found], columns=TEST_COLUMNS)
    for _, idx in frame.groupby(["test", "statistic", "grouping"]).groups.items():
        frame.loc[idx, "p_holm"] = holm(frame.loc[idx, "p_value"].to_numpy())
    return frame


class _ReplicateCache:
    """Each fully scored metric's bootstrap replicates of a statistic, drawn once and shared by all its
    pairs (the bootstrap test of :func:`analysis.human.paired_test`; same draws for every metric)."""

    def __init__(self, hj, n_boot: int, seed: int):
        self.hj, self.n_boot, self.seed, self.store = hj, n_boot, seed, {}
        self.codes, uniq = _groups_codes(hj.groups, hj.n_items)
        self.n_groups = len(uniq)
        self.draws = None

    def _full(self, m: str) -> bool:
        return bool(np.isfinite(self.hj.scores(m)).all() and np.isfinite(self.hj.human).all())

    def pair(self, a: str, b: str, statistic: str, grouping: str):
        """Both metrics' replicates, or None (another test, or a metric with unscored items)."""
        if statistic != "pairwise_acc" or self.n_boot < 1 or not (self._full(a) and self._full(b)):
            return None
        if self.draws is None:
            self.draws = draw_clusters(self.n_groups, self.n_boot, self.seed)
        out = []
        for m in (a, b):
            key = (m, statistic, grouping)
            if key not in self.store:
                self.store[key] = bootstrap_replicates(self.hj.scores(m), self.hj.human, self.codes, self.n_groups,
                                                       self.draws, statistic, grouping)
            out.append(self.store[key])
        return out


def significance_table(results: pd.DataFrame, tests: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """``results`` with ``cluster`` filled for the metrics of every tested (statistic, grouping), subset ``all``.

    Metrics are ordered by value (best first; NaN last, no cluster) and split into clusters by
    :func:`analysis.stats.significance_clusters` on the Holm-adjusted p-values of the cell's
    paired tests (every pair of metrics): metrics of one cluster are not significantly different
    at family-wise ``alpha``. The Williams tests are not used (one test per cell: the permutation
    ones).
    """
    res = results.copy()
    used = tests[tests["test"] != "williams"]
    for (st, grouping), cell in used.groupby(["statistic", "grouping"]):
        sel = ((res["statistic"] == st) & (res["grouping"] == grouping) & (res["subset"] == ALL)
               & ~res["metric"].isin(HUMAN_ROWS) & res["value"].notna())
        vals = res.loc[sel].sort_values("value", ascending=False, kind="stable")
        order = list(vals["metric"])
        pos = {m: i for i, m in enumerate(order)}
        pm = np.full((len(order), len(order)), np.nan)
        for a, b, ph in zip(cell["metric_a"], cell["metric_b"], cell["p_holm"], strict=True):
            if a in pos and b in pos:
                i, j = sorted((pos[a], pos[b]))
                pm[i, j] = ph
        ranks = significance_clusters(pm, alpha)
        res.loc[vals.index, "cluster"] = ranks
    res["cluster"] = res["cluster"].astype("Int64")  # a rank: written as an integer, empty where none
    return res
