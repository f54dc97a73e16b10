"""``ts2 analyze human=FILE``: the human-judgment view of metrics (correlation with people).

Called by the ``ts2 analyze`` handler when ``cfg.human`` is set. Reads a human-judgment file
(TIFA v1.0 JSON or our CSV, see :mod:`seg_data.human`) and writes into ``output_dir``:

``human_metametrics.csv``
    ``metric, statistic, grouping, value, ci_low, ci_high, n``: for every metric, each statistic
    of :data:`analysis.human.STATISTICS` pooled over images (``global``, TIFA's Table 2) and
    within prompts (``prompt``), with cluster-bootstrap (by prompt) percentile intervals;
    ``pairwise_acc_epsilon`` rows give the calibrated tie threshold; rows of metric ``human``
    give Krippendorff's alpha (interval, ordinal) between raters. ``n`` = items used (global)
    or prompts with a defined value (prompt).
``human_table.md`` / ``human_table.csv``
    The TIFA-Table-2-like tables (x100).
``human_metric_correlations.csv``
    Spearman correlation between every two metrics and the human mean over images.
``human_paired_tests.csv``
    For each pair of metrics: Williams' test (Pearson and Spearman, global) and paired
    permutation tests swapping prompts (Kendall tau-b, global and within prompts).

Config keys read (all optional but ``human``): ``human``, ``output_dir`` (default ``.``),
``metrics`` (list, null = all), ``bootstrap`` (replicates, 1000; 0 = no intervals), ``seed``
(0), ``confidence`` (0.95), ``human_permutations`` (1000; 0 = no permutation tests; the SEG
analysis' ``permutations`` is not used), ``progress`` (true); all of them are keys of
``conf/analyze.yaml``.
"""

from __future__ import annotations

import logging
import math
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

RESULT_COLUMNS = ["metric", "statistic", "grouping", "value", "ci_low", "ci_high", "n"]
TABLE_STATISTICS = ("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc")


def _get(cfg, key, default):
    v = cfg.get(key, default) if hasattr(cfg, "get") else default
    return default if v is None else v


def _write_results(rows: list[dict], path: Path) -> None:
    # Rewritten after each metric so an interrupted run keeps the metrics it finished.
    from seg_data.results import atomic_write_text

    atomic_write_text(path, pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(index=False))


def human_main(cfg) -> int:
    """Run the human-judgment meta-evaluation described in the module docstring.

    Returns
    -------
    int
        0 on success, 2 on bad input (missing/malformed file, unknown metric), logged.
    """
    from analysis import human as H
    from seg_data.human import load_human

    path = cfg.get("human")
    if not path:
        log.error("expected human=FILE (a TIFA v1.0 .json or ts2 human .csv), got none")
        return 2
    try:
        hj = load_human(path)
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    metrics = cfg.get("metrics")
    if metrics:
        metrics = [str(m) for m in metrics]
        unknown = [m for m in metrics if m not in hj.metrics]
        if unknown:
            log.error("%s: unknown metric(s) %s; expected names from %s", path, unknown, list(hj.metrics))
            return 2
        hj = hj.select(metrics)
    if not hj.metrics:
        log.error("%s: expected at least one metric score column, found none", path)
        return 2

    out = Path(str(_get(cfg, "output_dir", ".")))
    out.mkdir(parents=True, exist_ok=True)
    n_boot = int(_get(cfg, "bootstrap", 1000))
    seed = int(_get(cfg, "seed", 0))
    confidence = float(_get(cfg, "confidence", 0.95))
    # Not the SEG analysis' `permutations` (9999 sign flips are cheap there): pooled permutation
    # tests here recompute Kendall's tau on all images for every permutation and metric pair.
    n_perm = int(_get(cfg, "human_permutations", 1000))
    progress = bool(_get(cfg, "progress", True))
    log.info("human view: %s (%d images, %d prompts, %d raters, %d metrics), bootstrap=%d",
             path, hj.n_items, hj.n_prompts, len(hj.raters), len(hj.metrics), n_boot)

    human, groups = hj.human, hj.groups
    result_path = out / "human_metametrics.csv"
    rows: list[dict] = []

    # Inter-annotator agreement first: it bounds what any metric can reach.
    if len(hj.raters) >= 2:
        for level in ("interval", "ordinal"):
            try:
                ci = H.bootstrap_krippendorff_alpha(hj.reliability_data(), groups, level, n_boot, seed, confidence)
            except ValueError as e:
                log.warning("Krippendorff's alpha (%s) skipped: %s", level, e)
                continue
            rows.append({"metric": "human", "statistic": f"krippendorff_alpha_{level}", "grouping": "global",
                         "value": ci.value, "ci_low": ci.low, "ci_high": ci.high, "n": hj.n_items})
    else:
        log.warning("Krippendorff's alpha skipped: %s has a single rater", path)

    from tqdm.auto import tqdm

    for m in tqdm(hj.metrics, desc="metrics", disable=not progress):
        x = hj.scores(m)
        ok = np.isfinite(x)
        if not ok.all():
            log.warning("metric %s: %d of %d images have no score; they are left out of its statistics",
                        m, int((~ok).sum()), len(x))
        if ok.sum() < 2:
            log.warning("metric %s: fewer than 2 scored images, skipped", m)
            continue
        xs, hs, gs = x[ok], human[ok], groups[ok]
        for grouping in H.GROUPINGS:
            for st in H.STATISTICS:
                ci = H.bootstrap_human_statistic(xs, hs, gs, st, grouping, n_boot, seed, confidence)
                if grouping == "global":
                    n = int(ok.sum())
                elif st == "pairwise_acc":
                    n = int(H.grouped_pairwise_accuracy(xs, hs, gs).n_pairs)
                else:
                    n = H.grouped_correlation(xs, hs, gs, st).n_used
                rows.append({"metric": m, "statistic": st, "grouping": grouping, "value": ci.value,
                             "ci_low": ci.low, "ci_high": ci.high, "n": n})
            if grouping == "global":
                pa, n = H.tie_calibrated_pairwise_accuracy(xs, hs), int(ok.sum())
            else:
                pa = H.grouped_pairwise_accuracy(xs, hs, gs)
                n = int(pa.n_pairs)  # prompts used
            rows.append({"metric": m, "statistic": "pairwise_acc_epsilon", "grouping": grouping,
                         "value": pa.epsilon, "ci_low": math.nan, "ci_high": math.nan, "n": n})
        _write_results(rows, result_path)
    _write_results(rows, result_path)
    results = pd.DataFrame(rows, columns=RESULT_COLUMNS)

    labels = dict(hj.metric_labels)
    for suffix in ("md", "csv"):
        H.write_human_table(results, out / f"human_table.{suffix}", statistics=TABLE_STATISTICS,
                            labels=labels, metrics=[m for m in hj.metrics if m in set(results["metric"])])

    table = hj.score_table().assign(human=human)
    H.metric_correlation_matrix(table, "spearman").to_csv(out / "human_metric_correlations.csv")

    tests = []
    pairs = list(combinations(hj.metrics, 2))
    for a, b in tqdm(pairs, desc="paired tests", disable=not progress or not pairs):
        xa, xb = hj.scores(a), hj.scores(b)
        found = []
        for method in ("pearson", "spearman"):
            try:
                found.append(H.williams_test_metrics(xa, xb, human, method, nan_policy="omit"))
            except ValueError as e:
                log.warning("Williams' test %s vs %s (%s) skipped: %s", a, b, method, e)
        if n_perm > 0:
            for grouping in H.GROUPINGS:
                found.append(H.permutation_test(xa, xb, human, groups, "kendall_b", grouping, n_perm, seed,
                                                nan_policy="omit"))
        for t in found:
            tests.append({"metric_a": a, "metric_b": b, "test": t.test, "statistic": t.statistic,
                          "grouping": t.grouping, "value_a": t.value_a, "value_b": t.value_b, "diff": t.diff,
                          "test_statistic": t.test_statistic, "p_value": t.p_value, "n": t.n,
                          "n_resamples": t.n_resamples})
    pd.DataFrame(tests, columns=["metric_a", "metric_b", "test", "statistic", "grouping", "value_a", "value_b",
                                 "diff", "test_statistic", "p_value", "n", "n_resamples"]
                 ).to_csv(out / "human_paired_tests.csv", index=False)

    sys.stdout.write((out / "human_table.md").read_text(encoding="utf-8"))
    sys.stdout.write(f"wrote {result_path}\n")
    return 0
