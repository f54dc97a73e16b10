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

from omegaconf import DictConfig, ListConfig, OmegaConf

from ts2.common import output_dir

log = logging.getLogger(__name__)


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, ListConfig)):
        return [str(v) for v in value]
    return [str(value)]


def _plain(value):
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def report_from_config(cfg: DictConfig, results: Sequence[str | Path], out: Path, dataset=None):
    """:func:`analysis.report.result_dirs.build_report` with its settings read from a config (``ts2 report``
    and ``ts2 run``).

    Both compose ``conf/analysis/default.yaml`` (the :class:`analysis.settings.AnalysisSettings`
    of the meta-metrics computed here) and ``conf/report/default.yaml``, where every setting and
    its default lives; none is restated here.
    """
    from analysis.report.result_dirs import build_report
    from analysis.settings import AnalysisSettings

    return build_report(
        results, out, AnalysisSettings.from_config(cfg), title=str(cfg.title), dataset=dataset,
        figure_protocol=cfg.figure_protocol, flops=_plain(cfg.flops) or {}, labels=_plain(cfg.labels) or {},
        scatter=_as_list(cfg.scatter) or None, heatmaps=int(cfg.heatmaps),
        figures=None if cfg.figures is None else _as_list(cfg.figures),
        pareto=None if cfg.pareto is None else _as_list(cfg.pareto), human=cfg.human,
        human_statistic=str(cfg.human_statistic), human_grouping=str(cfg.human_grouping),
        seg_meta_metric=str(cfg.seg_meta_metric), explorer=bool(cfg.explorer))


def main(cfg: DictConfig) -> int:
    results = _as_list(cfg.get("results"))
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
