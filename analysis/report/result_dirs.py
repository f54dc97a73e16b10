"""Find, read and merge result folders for ``ts2 report`` (the file side of the report).

A *result directory* is what ``ts2 score`` / ``ts2 analyze`` / ``ts2 run`` write, any subset of

``scores.csv``
    one row per image: ``seg_id, node, file_name, image_path, prompt`` + one column per metric;
``run.json``
    the scoring run's record (:mod:`seg_data.results`): per column direction and role, FLOPs
    per image, the run's wall time, per-metric wall time and images/s, failures;
``metametrics.csv`` / ``per_seg.csv`` / ``analysis.json``
    the analysis outputs (long tables, see :mod:`analysis.pipeline`; roles, directions,
    confidence level and dataset in ``analysis.json``);
``.hydra/overrides.yaml``
    the command-line overrides of the job (Hydra writes it for every run and sweep job).

A folder written as a set (:func:`seg_data.result_sets.result_set`) whose writer was killed is
refused with :class:`seg_data.result_sets.IncompleteResultError`, never read as complete.

A Hydra sweep folder (``multirun/DATE/TIME`` with one numbered folder per job) may be given
instead of its jobs: it is expanded to the job folders that hold results.

Merging (:func:`merge_results`)
    * Directories of one run split with ``shard=i/n`` (same overrides apart from ``shard``,
      same metric columns, disjoint images) are concatenated; an image scored by two shards
      must have equal scores, a missing shard is reported in the notes.
    * Runs that give a metric column of the same name (a sweep over ``metric.vqa=blip,llava``
      writes ``tifa`` twice) are told apart by the overrides in which they differ:
      ``tifa[metric.vqa=blip]`` and ``tifa[metric.vqa=llava]``; runs with identical overrides
      fall back to the directory name.
    * Scores of different runs are joined on ``file_name``; meta-metrics are reused from a
      directory's ``metametrics.csv`` when it analysed exactly that run, and computed with
      :func:`analysis.pipeline.analyze` for everything else (shards, renamed columns, score-only
      directories).

    The runs, their names and costs are :mod:`analysis.report.runs` (:class:`~analysis.report.runs.RunGroup`,
    :class:`~analysis.report.runs.RunMerge`).

This module knows Hydra's folders; :mod:`analysis.report.page` draws and writes from the
:class:`analysis.report.merged.MergedResults` built here; :func:`build_report` does both (``ts2 report``,
``ts2 run`` and ``ts2.report`` call it). Never imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from seg_data.result_sets import check_inputs, check_result_set, published_path
from seg_data.results import (
    ANALYSIS_FILE,
    METAMETRICS_REQUIRED,
    PER_SEG_REQUIRED,
    RUN_FILE,
    AnalysisRecord,
    metric_columns,
    read_analysis_record,
    read_run_record,
    schema_of,
)

from ..scores_io import read_result_table, read_score_frame
from ..settings import AnalysisSettings, resolve_settings
from ..stats import ALPHA
from .merged import MergedResults
from .runs import ResultDir, RunGroup, RunMerge, merged_column_names
from .settings import ReportSettings

__all__ = [
    "ResultDir",
    "build_report",
    "complete_analysis",
    "merged_results",
    "merged_verdict",
    "expand_result_paths",
    "load_result_dir",
    "merge_results",
    "parse_overrides",
]

log = logging.getLogger(__name__)

_RESULT_FILES = ("scores.csv", "metametrics.csv")


# -- loading ---------------------------------------------------------------------------------------

def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``["+a.b=1", "c=x"]`` -> ``{"a.b": "1", "c": "x"}`` (``~key`` deletions become ``key: "~"``)."""
    out: dict[str, str] = {}
    for it in items:
        s = str(it).strip()
        if s.startswith("~"):
            out[s[1:].split("=", 1)[0]] = "~"
            continue
        key, sep, value = s.lstrip("+").partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _is_result_dir(p: Path) -> bool:
    return any((p / f).is_file() for f in _RESULT_FILES)


def expand_result_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Result directories named by ``paths``; a sweep folder is replaced by its job folders.

    Raises
    ------
    FileNotFoundError
        A path that does not exist, or a folder with no result files in it or in its direct
        sub-folders (the message lists what was expected).
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise FileNotFoundError(f"expected a result directory, got {str(p)!r} which does not exist")
        if p.is_file():
            raise FileNotFoundError(f"expected a result directory (holding scores.csv or metametrics.csv), got the file {p}")
        if _is_result_dir(p):
            out.append(p)
            continue
        from seg_data.model import seg_id_sort_key  # the one id sort key: job 2 before job 10

        kids = sorted((k for k in p.iterdir() if k.is_dir() and _is_result_dir(k)),
                      key=lambda k: seg_id_sort_key(k.name))
        if not kids:
            raise FileNotFoundError(f"{p}: expected scores.csv or metametrics.csv in it (a ts2 score/analyze output) "
                                    "or in its sub-folders (a Hydra sweep), found neither")
        out.extend(kids)
    seen: set[Path] = set()
    uniq = []
    for p in out:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            uniq.append(p)
    return uniq


def _analysed_score_table(p: Path, record: AnalysisRecord | None, metrics: Sequence[str]) -> pd.DataFrame | None:
    """The per-image scores a ``ts2 analyze`` job read: the files listed in its ``analysis.json``
    ``record`` (the user's table, then the reference table), joined on ``file_name``; else its Hydra
    config's ``scores=`` file. The analysed ``metrics`` are read as scores, other columns as text
    (a job with ``metrics=[...]`` may have read a table with text columns). ``None`` (with an INFO
    line) when the files are gone."""
    files = [Path(f) for f in record.score_files] if record is not None else []
    if not files:
        f = _analysed_scores_file(p)
        files = [f] if f is not None else []
    gone = [f for f in files if not f.is_file() or f.suffix.lower() != ".csv"]
    if gone:
        log.info("%s: the analysed score file(s) %s are gone or not CSV; figures that need per-image scores skip "
                 "them", p, ", ".join(map(str, gone)))
    tables = [read_score_frame(f, metrics)[0] for f in files if f not in gone]
    return _with_reference_scores(tables) if tables else None


def _with_reference_scores(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The first score table with the metric columns of the others (the reference tables an
    analysis read beside it) it lacks, joined on ``file_name``; tables without ``file_name``
    cannot be joined and stop the join."""
    out = tables[0]
    for t in tables[1:]:
        if "file_name" not in out.columns or "file_name" not in t.columns:
            break
        extra = [c for c in metric_columns(t.columns) if c not in out.columns]
        out = out.merge(t[["file_name", *extra]], on="file_name", how="left")
    return out


def _analysed_scores_file(p: Path) -> Path | None:
    """The score file a ``ts2 analyze`` job read (its ``scores=`` setting), when it is a CSV that
    still exists: relative paths are taken from the job's working directory."""
    conf, hyd = p / ".hydra" / "config.yaml", p / ".hydra" / "hydra.yaml"
    if not conf.is_file():
        return None
    import yaml

    try:
        src = (yaml.safe_load(conf.read_text()) or {}).get("scores")
        cwd = ((yaml.safe_load(hyd.read_text()) or {}).get("hydra", {}).get("runtime", {}).get("cwd")
               if hyd.is_file() else None)
    except (yaml.YAMLError, AttributeError) as e:
        log.warning("%s: could not read the job's config (%s); no per-image scores for this result", conf, e)
        return None
    if not isinstance(src, str) or not src.lower().endswith(".csv"):
        return None
    cand = Path(src).expanduser()
    for c in ([cand] if cand.is_absolute() else [Path(cwd) / cand] if cwd else []) + [cand]:
        if c.is_file():
            return c
    log.info("%s: the analysed score file %s is gone; figures that need per-image scores skip this result", p, src)
    return None


def load_result_dir(path: str | Path, name: str | None = None) -> ResultDir:
    """Read the result files of one directory.

    Raises
    ------
    FileNotFoundError
        Neither ``scores.csv`` nor ``metametrics.csv`` in ``path``.
    ValueError
        A file that is not valid CSV / JSON / YAML or lacks its key columns (naming the file).
    seg_data.result_sets.IncompleteResultError
        The folder's writer was interrupted (a ``ValueError`` too).
    seg_data.result_sets.StaleResultError
        A score table the folder's analysis was computed from has changed since (a ``ValueError``).
    """
    p = Path(path)
    if not _is_result_dir(p):
        raise FileNotFoundError(f"{p}: expected scores.csv or metametrics.csv, found neither")
    check_result_set(p)
    run = read_run_record(p / RUN_FILE) if (p / RUN_FILE).is_file() else None
    record = read_analysis_record(p / ANALYSIS_FILE) if (p / ANALYSIS_FILE).is_file() else None
    check_inputs(p, record)
    overrides = _read_overrides(p / ".hydra" / "overrides.yaml")
    schema = schema_of(run, record)
    mm = (read_result_table(p / "metametrics.csv", "meta-metric", METAMETRICS_REQUIRED,
                            dtype={"metric": str, "subset": str})
          if (p / "metametrics.csv").is_file() else None)
    if (p / "scores.csv").is_file():
        scores = read_score_frame(p / "scores.csv")[0]
    else:
        analysed = list(dict.fromkeys(mm["metric"])) if mm is not None else list(record.metrics if record else ())
        scores = _analysed_score_table(p, record, analysed)
    if record is None:
        return ResultDir(p, name or p.name, overrides, scores, run, mm, _read_per_seg(p), schema)
    return ResultDir(p, name or p.name, overrides, scores, run, mm, _read_per_seg(p), schema,
                     record.confidence, tuple(record.notes))


def _read_overrides(ov: Path) -> dict[str, str]:
    """The command-line overrides of a Hydra job (its ``.hydra/overrides.yaml``; none without one).

    Raises
    ------
    ValueError
        The file is not a YAML list.
    """
    if not ov.is_file():
        return {}
    import yaml

    try:
        items = yaml.safe_load(ov.read_text()) or []
    except yaml.YAMLError as e:
        raise ValueError(f"{ov}: expected a YAML list of overrides, could not parse it: {e}") from e
    if not isinstance(items, list):
        raise ValueError(f"{ov}: expected a YAML list of overrides, got {type(items).__name__}")
    return parse_overrides(items)


def _read_per_seg(p: Path) -> pd.DataFrame | None:
    """The folder's ``per_seg.csv`` (``None`` without one); a missing subset is the empty one."""
    if not (p / "per_seg.csv").is_file():
        return None
    ps = read_result_table(p / "per_seg.csv", "per-SEG", PER_SEG_REQUIRED,
                           dtype={"metric": str, "seg_id": str, "subset": str})
    if "subset" in ps.columns:
        ps["subset"] = ps["subset"].fillna("")
    return ps


def merge_results(dirs: Sequence[ResultDir], flops: Mapping[str, float] | None = None,
                  lower_is_better: Iterable[str] = ()) -> tuple[MergedResults, list[str]]:
    """Merge result directories (see the module docstring).

    Parameters
    ----------
    dirs : sequence of ResultDir
    flops : mapping, optional
        FLOPs per image for metrics whose run did not record one (e.g. released scores);
        keys are metric names as in the merged table (or before renaming).
    lower_is_better : iterable of str
        Extra lower-is-better metrics (``run.json`` directions are read automatically).

    Returns
    -------
    (MergedResults, list of str)
        The merged results (``metametrics``/``per_seg`` hold what could be reused) and the
        merged metric names that still need :func:`analysis.pipeline.analyze`.

    Raises
    ------
    ValueError
        No directories; two shards disagreeing on an image's score; runs that cannot be joined
        (no ``file_name``).
    """
    if not dirs:
        raise ValueError("expected at least one result directory, got none")
    notes: list[str] = []
    groups = RunGroup.of(dirs)
    merge = RunMerge(notes)
    for group, columns in zip(groups, merged_column_names(groups, notes), strict=True):
        merge.add(group, columns)
    merge.add_given_flops(flops)
    return merge.result(lower_is_better), merge.todo


def complete_analysis(merged: MergedResults, todo: Sequence[str], settings: AnalysisSettings | None = None,
                      dataset=None, **analysis: Any) -> MergedResults:
    """Compute the meta-metrics of ``todo`` metrics on the merged scores, with ``settings``
    (:class:`analysis.settings.AnalysisSettings`, default the config's, single ones replaced by
    ``analysis`` keyword arguments; a metric's direction also from the merge), and add them.

    Raises
    ------
    ValueError
        ``todo`` is not empty but there are no scores to analyse.
    """
    if not todo:
        return merged
    if merged.scores is None:
        raise ValueError(f"metrics {list(todo)} need analysis but no scores.csv was found for them")
    settings = resolve_settings(settings, analysis)
    confidence = settings.confidence
    res = _analyze_scores(merged, list(todo), settings, dataset)
    if merged.metametrics is not None and merged.confidence not in (None, float(confidence)):
        notes_ci = [(f"confidence intervals at two levels: {100 * merged.confidence:g}% (reused) and "
                     f"{100 * float(confidence):g}% (computed)")]
    else:
        notes_ci = []
    mm = res.metametrics_frame()
    ps = res.per_seg_frame()
    notes = list(merged.notes) + notes_ci + [f"analysis: {n}" for n in res.notes]
    return replace(
        merged, analysis=res if merged.metametrics is None and set(res.metrics) == set(merged.metrics) else None,
        metametrics=mm if merged.metametrics is None else pd.concat([merged.metametrics, mm], ignore_index=True),
        per_seg=ps if merged.per_seg is None else pd.concat([merged.per_seg, ps], ignore_index=True),
        notes=tuple(notes), confidence=float(confidence) if merged.metametrics is None else merged.confidence,
        dataset=merged.dataset or getattr(dataset, "name", None))


def _analyze_scores(merged: MergedResults, metrics: list[str], settings: AnalysisSettings, dataset=None,
                    **overrides: Any):
    """:func:`analysis.pipeline.analyze` of ``metrics`` from the merged per-image scores, with
    ``settings`` (``overrides`` on top) and the merge's directions."""
    from ..pipeline import analyze

    cols = [c for c in ("seg_id", "node", "file_name") if c in merged.scores.columns]
    return analyze(merged.scores[cols + metrics], dataset,
                   settings.updated(**overrides, lower_is_better=[m for m in metrics if m in merged.lower_is_better]))


def merged_verdict(merged: MergedResults, settings: AnalysisSettings, dataset=None, alpha: float = ALPHA,
                   n_permutations: int = 9999):
    """The :class:`analysis.verdict.Verdict` of the merged metrics (roles from the merge).

    Reuses ``merged.analysis`` when one analysis computed every merged metric; otherwise the
    merged per-image scores are analysed once more, all metrics together, with the same settings
    (the paired tests need every metric's bootstrap replicates on the same SEG resamples, which
    ``metametrics.csv`` does not hold). ``None`` (with an INFO line) when there is nothing to
    judge: no metric under evaluation, or no per-image scores to recompute from.
    """
    from ..verdict import verdict

    if not any(merged.role(m) == "metric" for m in merged.metrics):
        log.info("no verdict: every metric is a control or a reference")
        return None
    res = merged.analysis
    if res is None:
        if merged.scores is None or not set(merged.metrics) <= set(merged.scores.columns):
            log.info("no verdict: the per-image scores of %s are not available to compare metrics on",
                     ", ".join(m for m in merged.metrics if merged.scores is None or m not in merged.scores.columns))
            return None
        # The verdict's tests need the replicates only: no chance levels.
        res = _analyze_scores(merged, list(merged.metrics), settings, dataset,
                              meta_metrics=("rank", "sep", "delta"), chance=0)
    return verdict(res, merged.roles, alpha=alpha, n_permutations=n_permutations, seed=settings.seed)


# -- the report of result folders ------------------------------------------------------------------

def merged_results(results: Sequence[str | Path], settings: AnalysisSettings | None = None, *,
                   flops: Mapping[str, float] | None = None, dataset=None, **analysis: Any) -> MergedResults:
    """Read the result folders ``results`` (sweeps expanded), merge them and compute the
    meta-metrics still missing (:func:`complete_analysis`, with ``settings``: default those of
    ``conf/analysis/default.yaml``, single ones replaced by ``analysis`` keyword arguments): what
    ``ts2 report`` and ``ts2 explore`` draw from.

    Raises
    ------
    FileNotFoundError
        A result folder that does not exist or holds no result files.
    ValueError
        Unreadable result files, shards that disagree.
    """
    paths = expand_result_paths(results)
    shown = [published_path(p) for p in paths]  # ts2 run reports on its own set while writing it
    dirs = [load_result_dir(p, name=_display_name(q, shown)) for p, q in zip(paths, shown, strict=True)]
    settings = resolve_settings(settings, analysis)
    merged, todo = merge_results(dirs, flops=flops, lower_is_better=settings.lower_is_better)
    if todo:
        log.info("computing meta-metrics of %d metric(s) (%s protocol(s), %d bootstrap resamples): %s",
                 len(todo), ",".join(settings.protocol_names()), settings.bootstrap, ", ".join(todo))
    return complete_analysis(merged, todo, settings, dataset=dataset)


def build_report(results: Sequence[str | Path], output_dir: str | Path, settings: AnalysisSettings | None = None,
                 report: ReportSettings | None = None, *, dataset=None, groups: Mapping[str, str] | None = None,
                 extra_sections: Sequence[tuple[str, str]] = (), verdict: bool = True, **options: Any):
    """Merge ``results`` and write the report into ``output_dir`` (the library function under ``ts2 report``,
    ``ts2 run`` and ``ts2.report``).

    ``settings`` (:class:`analysis.settings.AnalysisSettings`; default: those of
    ``conf/analysis/default.yaml``) computes the meta-metrics the results lack and the verdict;
    ``report`` (:class:`analysis.report.settings.ReportSettings`; default: ``conf/report/default.yaml``'s) says
    how the page is drawn. ``options`` replace single settings of either by name (``bootstrap=0``,
    ``figures=[]``, ...; an unknown name is a ``TypeError``). ``groups`` (metric -> group label) and
    ``extra_sections`` (title, HTML) are for callers that draw more than a report config says.

    With ``report.human`` (a ``human_metametrics.csv`` of
    ``ts2 analyze human=...``, or its folder), the report also shows the SEG view and the human
    view of the same metrics side by side (both rank orders, Kendall's tau between them) and
    writes ``views.csv``; a folder of ``ts2 analyze human=[A,B,...]`` (``human_sets.csv``) adds the
    section of all its sets (:func:`analysis.human.sets.human_sets_html`). With ``verdict`` (default), the report
    opens with the verdict of every metric under evaluation against the references and controls
    (:mod:`analysis.verdict`) and writes ``verdict.csv``, ``ranking.csv`` and ``pairs.csv``. With
    ``report.explorer``, ``explorer.html`` (:mod:`analysis.report.explorer`) is written beside ``report.html``
    and linked from it. Returns :class:`analysis.report.page.ReportOutputs`.

    Raises
    ------
    FileNotFoundError
        A result folder that does not exist or holds no result files.
    ValueError
        Unreadable result files, shards that disagree, a bad ``scatter`` pair.
    TypeError
        An option that is neither an analysis nor a report setting.
    """
    report = (report or ReportSettings()).updated(**{k: v for k, v in options.items() if k in ReportSettings.keys()})
    settings = resolve_settings(settings, {k: v for k, v in options.items() if k not in ReportSettings.keys()})
    return _write_merged_report(merged_results(results, settings, flops=report.flops, dataset=dataset), output_dir,
                                settings, report, dataset, groups, extra_sections, verdict)


def _write_merged_report(merged, output_dir, settings: AnalysisSettings, report: ReportSettings, dataset,
                         groups, extra_sections, verdict: bool):
    """The page of merged results: the human views asked for, the verdict, the figures and tables."""
    from . import page as rp

    extra_files = {}
    if report.human is not None:
        from ..human.sets import human_sets_html, read_human_sets

        sets = read_human_sets(report.human)  # ts2 analyze human=[...]: the sets' section too
        hp = Path(report.human)
        if sets is None or hp.is_file() or (hp / "human_metametrics.csv").is_file():
            protocol = report.figure_protocol or ("paper" if "paper" in set(merged.metametrics["protocol"]) else
                                                  str(merged.metametrics["protocol"].iloc[0]))
            cmp = rp.views_frame(merged.metametrics, rp.read_human_results(report.human), protocol,
                                 report.seg_meta_metric, report.human_statistic, report.human_grouping)
            extra_files["views"] = cmp.table
            extra_sections = [*extra_sections, ("SEG view and human view",
                                                rp.views_html(cmp, protocol, report.seg_meta_metric,
                                                              report.human_statistic, report.human_grouping))]
        if sets is not None:
            extra_sections = [*extra_sections, ("Human-judgment sets", human_sets_html(*sets))]
    prompts = None if dataset is None else {s.seg_id: s.prompt for s in dataset}
    vd = merged_verdict(merged, settings, dataset=dataset) if verdict else None
    return rp.write_report(merged, output_dir, report, rp.ReportContent(
        verdict=vd, dataset=dataset, prompts=prompts, groups=groups, extra_sections=tuple(extra_sections),
        extra_files=extra_files))


def _display_name(p: Path, all_paths: Sequence[Path]) -> str:
    # Sweep jobs are folders "0", "1", ...: prefix the sweep's name so runs stay recognisable.
    if p.name.isdigit() and p.parent.name:
        return f"{p.parent.name}/{p.name}"
    names = [q.name for q in all_paths]
    if names.count(p.name) > 1:
        return f"{p.parent.name}/{p.name}"
    return p.name
