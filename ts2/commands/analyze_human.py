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
import sys
from pathlib import Path

from analysis.human.view import RESULT_COLUMNS  # noqa: F401  (the file's schema, for callers and tests)
from seg_data.results import published_path, result_set

log = logging.getLogger(__name__)


def _get(cfg, key, default):
    v = cfg.get(key, default) if hasattr(cfg, "get") else default
    return default if v is None else v


def human_main(cfg) -> int:
    """Run the human-judgment meta-evaluation described in the module docstring.

    Returns
    -------
    int
        0 on success, 2 on bad input (missing/malformed file, unknown metric), logged.
    """
    from seg_data.human import load_human

    path = cfg.get("human")
    if not path:
        log.error("expected human=FILE (a TIFA v1.0 .json or ts2 human .csv), got none")
        return 2
    out = Path(str(_get(cfg, "output_dir", ".")))
    try:
        res = human_view(load_human(path), cfg, out, source=str(path))
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    sys.stdout.write(res.table_md.read_text(encoding="utf-8"))
    sys.stdout.write(f"wrote {res.results_path}\n")
    return 0


def human_view(hj, cfg, out: str | Path, source: str = ""):
    """The human view of loaded judgments ``hj`` with the settings of ``cfg`` (keys of
    ``conf/analyze.yaml``), written into ``out`` as one result set (``ts2 analyze human=``,
    ``ts2.human``). Returns :class:`analysis.human.view.HumanViewOutputs` with published paths.

    Raises
    ------
    ValueError
        ``metrics`` names a metric the file lacks, or the file has no metric column.
    """
    from dataclasses import replace

    from analysis import human as H

    metrics = cfg.get("metrics")
    if metrics:
        metrics = [str(m) for m in metrics]
        unknown = [m for m in metrics if m not in hj.metrics]
        if unknown:
            raise ValueError(f"{source}: unknown metric(s) {unknown}; expected names from {list(hj.metrics)}")
        hj = hj.select(metrics)
    if not hj.metrics:
        raise ValueError(f"{source}: expected at least one metric score column, found none")
    n_boot = int(_get(cfg, "bootstrap", 1000))
    # Not the SEG analysis' `permutations` (9999 sign flips are cheap there): pooled permutation
    # tests here recompute Kendall's tau on all images for every permutation and metric pair.
    n_perm = int(_get(cfg, "human_permutations", 1000))
    log.info("human view: %s (%d images, %d prompts, %d raters, %d metrics), bootstrap=%d",
             source, hj.n_items, hj.n_prompts, len(hj.raters), len(hj.metrics), n_boot)
    with result_set(out, "ts2 analyze human") as stage:  # swapped in whole: a killed run leaves the old set
        res = H.run_human_view(hj, stage, n_boot=n_boot, seed=int(_get(cfg, "seed", 0)),
                               confidence=float(_get(cfg, "confidence", 0.95)), n_perm=n_perm,
                               progress=bool(_get(cfg, "progress", True)), source=source)
        # Inside the set: published_path knows the staging folder only while it is being written.
        return replace(res, results_path=published_path(res.results_path), table_md=published_path(res.table_md),
                       table_csv=published_path(res.table_csv),
                       correlations_path=published_path(res.correlations_path),
                       tests_path=published_path(res.tests_path))
