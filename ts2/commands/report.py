"""``ts2 report results=[DIR1,DIR2,...] output_dir=DIR``: merge results into one report.

Collects score and analysis outputs (``ts2 score`` / ``ts2 analyze`` / ``ts2 run`` folders, Hydra
sweep folders, shards of one run), computes the meta-metrics that are missing, and writes
``report.html`` (figures embedded), ``table.md/.tex/.csv``, ``figures/*.png`` and the merged
``scores.csv``, ``metametrics.csv`` and ``per_seg.csv`` (see :mod:`analysis.report.page`).
Exit code 0, or 2 for bad input (missing folder, unreadable file, clashing shards).

Never imports torch.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from ts2.common import as_list, output_dir

log = logging.getLogger(__name__)


def report_from_config(cfg: DictConfig, results: Sequence[str | Path], out: Path, dataset=None):
    """:func:`ts2.result_views.write_report` with the settings of a composed ``ts2 report``/``ts2 run`` config:
    :class:`analysis.settings.AnalysisSettings` (``conf/analysis/default.yaml``) and
    :class:`analysis.report.settings.ReportSettings` (``conf/report/default.yaml``)."""
    from analysis.report.settings import ReportSettings
    from analysis.settings import AnalysisSettings
    from ts2.result_views import write_report

    return write_report(results, out, AnalysisSettings.from_config(cfg), ReportSettings.from_mapping(cfg), dataset)


def main(cfg: DictConfig) -> int:
    results = as_list(cfg.get("results"))
    if not results:
        log.error("expected results=DIR or results=[DIR1,DIR2] (ts2 score/analyze/run output folders), got none")
        return 2
    dataset = None
    if cfg.get("path") or cfg.get("dataset") is not None:
        from ts2.common import load_dataset

        dataset = load_dataset(cfg)
    out = output_dir(cfg)
    try:
        res = report_from_config(cfg, results, out, dataset)
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    for note in res.notes:
        log.warning("%s", note)
    sys.stdout.write(f"report: {res.html}\n")
    for p in res.tables:
        sys.stdout.write(f"table: {p}\n")
    sys.stdout.write(f"figures: {len(res.figures)} in {out / 'figures'}\n")
    return 0
