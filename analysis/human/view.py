"""The human view as one library call: statistics, intervals, tables and paired tests of a file.

:func:`run_human_view` is what ``ts2 analyze human=FILE`` runs (the CLI handler only reads the
config and the file); it writes into ``output_dir``:

``human_metametrics.csv``
    ``metric, statistic, grouping, value, ci_low, ci_high, n``: for every metric, each statistic
    of :data:`analysis.human.STATISTICS` pooled over images (``global``) and within prompts
    (``prompt``), with cluster-bootstrap (by prompt) percentile intervals;
    ``pairwise_acc_epsilon`` rows give the calibrated tie threshold; rows of metric ``human``
    give Krippendorff's alpha (interval, ordinal) between raters. Rewritten after each metric,
    so an interrupted run keeps the metrics it finished.
``human_table.md`` / ``human_table.csv``
    The TIFA-Table-2-like tables (x100; the markdown cells carry their intervals).
``human_metric_correlations.csv``
    Spearman correlation between every two metrics and the human mean over images.
``human_paired_tests.csv``
    For each pair of metrics: Williams' test (Pearson and Spearman, global) and paired
    permutation tests swapping prompts (Kendall tau-b, global and within prompts).
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

from .bootstrap import bootstrap_human_statistic, bootstrap_krippendorff_alpha
from .correlation import GROUPINGS, STATISTICS, grouped_correlation
from .paired import permutation_test, williams_test_metrics
from .pairwise import grouped_pairwise_accuracy, tie_calibrated_pairwise_accuracy
from .tables import metric_correlation_matrix, write_human_table

__all__ = ["RESULT_COLUMNS", "TEST_COLUMNS", "TABLE_STATISTICS", "HumanViewOutputs", "run_human_view"]

log = logging.getLogger(__name__)

RESULT_COLUMNS = ["metric", "statistic", "grouping", "value", "ci_low", "ci_high", "n"]
TEST_COLUMNS = ["metric_a", "metric_b", "test", "statistic", "grouping", "value_a", "value_b", "diff",
                "test_statistic", "p_value", "n", "n_resamples"]
TABLE_STATISTICS = ("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc")


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
    from seg_data.results import atomic_write_text

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
                   n_perm: int = 1000, progress: bool = True, source: str = "") -> HumanViewOutputs:
    """Human-view meta-evaluation of every metric of a loaded human-judgment file.

    Parameters
    ----------
    hj : seg_data.human.HumanJudgments
        The file as loaded by :func:`seg_data.human.load_human` (metrics already selected).
    output_dir : path
        Created if missing; the files listed in the module docstring are written there.
    n_boot : int
        Prompt-bootstrap replicates (0: no intervals).
    seed : int
        Seeds every bootstrap (the same prompts for every metric) and permutation test.
    confidence : float
        Interval level.
    n_perm : int
        Permutations of the paired permutation tests (0: none).
    progress : bool
        tqdm bars.
    source : str
        Shown in log lines.

    Returns
    -------
    HumanViewOutputs
    """
    from seg_data.progress import tqdm

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    human = hj.human
    result_path = out / "human_metametrics.csv"
    rows: list[dict] = []

    # Inter-annotator agreement first: it bounds what any metric can reach.
    rows.extend(_agreement_rows(hj, n_boot, seed, confidence, source))
    for m in tqdm(hj.metrics, desc="metrics", disable=not progress):
        metric_rows = _metric_rows(hj, m, n_boot, seed, confidence)
        if metric_rows is None:
            continue
        rows.extend(metric_rows)
        _write_results(rows, result_path)
    _write_results(rows, result_path)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)

    labels = dict(hj.metric_labels)
    done = [m for m in hj.metrics if m in set(results["metric"])]
    table_md, table_csv = (write_human_table(results, out / f"human_table.{suffix}", statistics=TABLE_STATISTICS,
                                             labels=labels, metrics=done, confidence=confidence if n_boot else None)
                           for suffix in ("md", "csv"))

    table = hj.score_table().assign(human=human)
    corr_path = out / "human_metric_correlations.csv"
    metric_correlation_matrix(table, "spearman").to_csv(corr_path)

    tests = []
    pairs = list(combinations(hj.metrics, 2))
    for a, b in tqdm(pairs, desc="paired tests", disable=not progress or not pairs):
        tests.extend(_paired_test_rows(hj, a, b, n_perm, seed))
    tests_frame = pd.DataFrame(tests, columns=TEST_COLUMNS)
    tests_path = out / "human_paired_tests.csv"
    tests_frame.to_csv(tests_path, index=False)
    return HumanViewOutputs(results, tests_frame, result_path, table_md, table_csv, corr_path, tests_path)


def _agreement_rows(hj, n_boot: int, seed: int, confidence: float, source: str) -> list[dict]:
    """Krippendorff's alpha rows (interval, ordinal) between raters; none, with a warning, for one rater."""
    rows: list[dict] = []
    if len(hj.raters) < 2:
        log.warning("Krippendorff's alpha skipped: %s has a single rater", source)
        return rows
    for level in ("interval", "ordinal"):
        try:
            ci = bootstrap_krippendorff_alpha(hj.reliability_data(), hj.groups, level, n_boot, seed, confidence)
        except ValueError as e:
            log.warning("Krippendorff's alpha (%s) skipped: %s", level, e)
            continue
        rows.append({"metric": "human", "statistic": f"krippendorff_alpha_{level}", "grouping": "global",
                     "value": ci.value, "ci_low": ci.low, "ci_high": ci.high, "n": hj.n_items})
    return rows


def _metric_rows(hj, m: str, n_boot: int, seed: int, confidence: float) -> list[dict] | None:
    """One metric's result rows (every statistic and grouping, plus the tie thresholds) on its scored
    images; None, with a warning, when fewer than 2 images are scored (the metric is skipped)."""
    x = hj.scores(m)
    ok = np.isfinite(x)
    if not ok.all():
        log.warning("metric %s: %d of %d images have no score; they are left out of its statistics",
                    m, int((~ok).sum()), len(x))
    if ok.sum() < 2:
        log.warning("metric %s: fewer than 2 scored images, skipped", m)
        return None
    xs, hs, gs = x[ok], hj.human[ok], hj.groups[ok]
    rows: list[dict] = []
    for grouping in GROUPINGS:
        for st in STATISTICS:
            ci = bootstrap_human_statistic(xs, hs, gs, st, grouping, n_boot, seed, confidence)
            if grouping == "global":
                n = int(ok.sum())
            elif st == "pairwise_acc":
                n = int(grouped_pairwise_accuracy(xs, hs, gs).n_pairs)
            else:
                n = grouped_correlation(xs, hs, gs, st).n_used
            rows.append({"metric": m, "statistic": st, "grouping": grouping, "value": ci.value,
                         "ci_low": ci.low, "ci_high": ci.high, "n": n})
        if grouping == "global":
            pa, n = tie_calibrated_pairwise_accuracy(xs, hs), int(ok.sum())
        else:
            pa = grouped_pairwise_accuracy(xs, hs, gs)
            n = int(pa.n_pairs)  # prompts used
        rows.append({"metric": m, "statistic": "pairwise_acc_epsilon", "grouping": grouping,
                     "value": pa.epsilon, "ci_low": math.nan, "ci_high": math.nan, "n": n})
    return rows


def _paired_test_rows(hj, a: str, b: str, n_perm: int, seed: int) -> list[dict]:
    """The paired-test rows of metrics ``a`` and ``b``: Williams' tests (a failing one is skipped with a
    warning) and, when ``n_perm > 0``, the prompt-swapping permutation tests per grouping."""
    xa, xb, human = hj.scores(a), hj.scores(b), hj.human
    found = []
    for method in ("pearson", "spearman"):
        try:
            found.append(williams_test_metrics(xa, xb, human, method, nan_policy="omit"))
        except ValueError as e:
            log.warning("Williams' test %s vs %s (%s) skipped: %s", a, b, method, e)
    if n_perm > 0:
        for grouping in GROUPINGS:
            found.append(permutation_test(xa, xb, human, hj.groups, "kendall_b", grouping, n_perm, seed,
                                          nan_policy="omit"))
    return [{"metric_a": a, "metric_b": b, "test": t.test, "statistic": t.statistic,
             "grouping": t.grouping, "value_a": t.value_a, "value_b": t.value_b, "diff": t.diff,
             "test_statistic": t.test_statistic, "p_value": t.p_value, "n": t.n,
             "n_resamples": t.n_resamples} for t in found]
