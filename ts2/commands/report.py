"""``ts2 report results=[DIR1,DIR2,...] output_dir=DIR``: merge results into one report.

Collects score and analysis outputs (``ts2 score`` / ``ts2 analyze`` / ``ts2 run`` folders, Hydra
sweep folders, shards of one run), computes the meta-metrics that are missing, and writes
``report.html`` (figures embedded), ``table.md/.tex/.csv``, ``figures/*.png`` and the merged
``scores.csv``, ``metametrics.csv`` and ``per_seg.csv`` (see :mod:`analysis.report`).
Exit code 0, or 2 for bad input (missing folder, unreadable file, clashing shards).

Never imports torch.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
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


def build_report(results: Sequence[str | Path], output_dir: str | Path, *, title: str = "TS2 report",
                 protocols: Sequence[str] = ("paper", "graph"), bootstrap: int = 1000, seed: int = 0,
                 dataset=None, subsets: str = "auto", figure_protocol: str | None = None,
                 flops: Mapping[str, float] | None = None, lower_is_better: Sequence[str] = (),
                 labels: Mapping[str, str] | None = None, groups: Mapping[str, str] | None = None,
                 scatter: Sequence[str] | None = None, heatmaps: int = 2,
                 figures: Sequence[str] | None = None, pareto: Sequence[str] | None = None,
                 extra_sections: Sequence[tuple[str, str]] = (), human: str | Path | None = None,
                 human_statistic: str = "kendall_b", human_grouping: str = "prompt",
                 seg_meta_metric: str = "rank", confidence: float = 0.95, chance: int = 0,
                 min_segs_ci: int | None = None, verdict: bool = True, explorer: bool = True):
    """Merge ``results`` and write the report into ``output_dir`` (the Python API of ``ts2 report``).

    ``ts2 run`` calls this after scoring. With ``human`` (a ``human_metametrics.csv`` of
    ``ts2 analyze human=...``, or its folder), the report also shows the SEG view and the human
    view of the same metrics side by side (both rank orders, Kendall's tau between them) and
    writes ``views.csv``. With ``verdict`` (default), the report opens with the verdict of every
    metric under evaluation against the references and controls (:mod:`analysis.verdict`) and
    writes ``verdict.csv``, ``ranking.csv`` and ``pairs.csv``. With ``explorer``, ``explorer.html``
    (:mod:`analysis.explorer`) is written beside ``report.html`` and linked from it. Returns
    :class:`analysis.report.ReportOutputs`.

    Raises
    ------
    FileNotFoundError
        A result folder that does not exist or holds no result files.
    ValueError
        Unreadable result files, shards that disagree, a bad ``scatter`` pair.
    """
    from analysis import report as rp
    from ts2 import results as rs

    merged = merged_results(results, flops=flops, lower_is_better=lower_is_better, protocols=protocols,
                            bootstrap=bootstrap, seed=seed, dataset=dataset, subsets=subsets, confidence=confidence,
                            chance=chance, min_segs_ci=min_segs_ci)
    extra_files = {}
    if human is not None:
        protocol = figure_protocol or ("paper" if "paper" in set(merged.metametrics["protocol"]) else
                                       str(merged.metametrics["protocol"].iloc[0]))
        cmp = rp.views_frame(merged.metametrics, rp.read_human_results(human), protocol, seg_meta_metric,
                             human_statistic, human_grouping)
        extra_files["views"] = cmp.table
        extra_sections = [*extra_sections, ("SEG view and human view",
                                            rp.views_html(cmp, protocol, seg_meta_metric, human_statistic,
                                                          human_grouping))]
    prompts = None
    if dataset is not None:
        prompts = {s.seg_id: s.prompt for s in dataset}
    vd = rs.merged_verdict(merged, protocols=protocols, bootstrap=bootstrap, seed=seed, dataset=dataset,
                           subsets=subsets, confidence=confidence, min_segs_ci=min_segs_ci) if verdict else None
    return rp.write_report(merged, output_dir, title=title, protocol=figure_protocol, labels=labels, groups=groups,
                           scatter=scatter, n_heatmaps=heatmaps, extra_sections=extra_sections, prompts=prompts,
                           figures=rp.FIGURE_KINDS if figures is None else tuple(figures), pareto=pareto,
                           extra_files=extra_files, verdict=vd,
                           dataset_note=rp.synthetic_dataset_note(getattr(dataset, "metadata", None)),
                           dataset=dataset, explorer=explorer)


def merged_results(results: Sequence[str | Path], *, flops: Mapping[str, float] | None = None,
                   lower_is_better: Sequence[str] = (), protocols: Sequence[str] = ("paper", "graph"),
                   bootstrap: int = 1000, seed: int = 0, dataset=None, subsets: str = "auto",
                   confidence: float = 0.95, chance: int = 0, min_segs_ci: int | None = None):
    """Read the result folders ``results`` (sweeps expanded), merge them and compute the
    meta-metrics still missing (:func:`ts2.results.complete_analysis`): what ``ts2 report`` and
    ``ts2 explore`` draw from. Returns :class:`analysis.report.MergedResults`.

    Raises
    ------
    FileNotFoundError
        A result folder that does not exist or holds no result files.
    ValueError
        Unreadable result files, shards that disagree.
    """
    from seg_data.results import published_path
    from ts2 import results as rs

    paths = rs.expand_result_paths(results)
    shown = [published_path(p) for p in paths]  # ts2 run reports on its own set while writing it
    dirs = [rs.load_result_dir(p, name=_display_name(q, shown)) for p, q in zip(paths, shown)]
    merged, todo = rs.merge_results(dirs, flops=flops, lower_is_better=lower_is_better)
    if todo:
        log.info("computing meta-metrics of %d metric(s) (%s protocol(s), %d bootstrap resamples): %s",
                 len(todo), ",".join(protocols), bootstrap, ", ".join(todo))
    return rs.complete_analysis(merged, todo, protocols=protocols, bootstrap=bootstrap, seed=seed,
                                dataset=dataset, subsets=subsets, confidence=confidence,
                                chance=chance, min_segs_ci=min_segs_ci)


def _display_name(p: Path, all_paths: Sequence[Path]) -> str:
    # Sweep jobs are folders "0", "1", ...: prefix the sweep's name so runs stay recognisable.
    if p.name.isdigit() and p.parent.name:
        return f"{p.parent.name}/{p.name}"
    names = [q.name for q in all_paths]
    if names.count(p.name) > 1:
        return f"{p.parent.name}/{p.name}"
    return p.name


def report_from_config(cfg: DictConfig, results: Sequence[str | Path], out: Path, dataset=None):
    """:func:`build_report` with its settings read from a config (``ts2 report`` and ``ts2 run``).

    Both compose ``conf/analysis/default.yaml`` and ``conf/report/default.yaml``, where every
    setting and its default lives; none is restated here.
    """
    return build_report(
        results, out, title=str(cfg.title), protocols=_as_list(cfg.protocols), bootstrap=int(cfg.bootstrap),
        seed=int(cfg.seed), dataset=dataset, subsets=str(cfg.subsets), figure_protocol=cfg.figure_protocol,
        flops=_plain(cfg.flops) or {}, lower_is_better=_as_list(cfg.lower_is_better),
        labels=_plain(cfg.labels) or {}, scatter=_as_list(cfg.scatter) or None, heatmaps=int(cfg.heatmaps),
        figures=None if cfg.figures is None else _as_list(cfg.figures),
        pareto=None if cfg.pareto is None else _as_list(cfg.pareto), human=cfg.human,
        human_statistic=str(cfg.human_statistic), human_grouping=str(cfg.human_grouping),
        seg_meta_metric=str(cfg.seg_meta_metric), confidence=float(cfg.confidence),
        chance=int(cfg.chance or 0), min_segs_ci=cfg.get("min_segs_ci"), explorer=bool(cfg.explorer))


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
