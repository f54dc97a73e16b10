"""Collect result directories into one report: merged tables, figures and a self-contained HTML.

A *result directory* is what ``ts2 score`` / ``ts2 analyze`` / ``ts2 run`` write, any subset of

``scores.csv``
    one row per image: ``seg_id, node, file_name, image_path, prompt`` + one column per metric;
``run.json``
    the scoring run's record: per metric ``columns``, ``directions`` (column -> higher is
    better), ``flops_per_image_estimate`` / ``flops_per_image_measured``, device, wall time,
    images/s, failures;
``metametrics.csv`` / ``per_seg.csv``
    the analysis outputs (long tables, see :mod:`analysis.pipeline`);
``.hydra/overrides.yaml``
    the command-line overrides of the job (Hydra writes it for every run and sweep job).

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

This module never imports torch.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ResultDir", "RunInfo", "MergedResults", "ReportFigure", "ReportOutputs", "FIGURE_KINDS",
           "expand_result_paths", "load_result_dir", "merge_results", "complete_analysis", "make_figures",
           "metametrics_html", "write_report", "render_html", "parse_overrides"]

log = logging.getLogger(__name__)

BASE_COLUMNS = ("seg_id", "node", "file_name", "image_path", "prompt")
NON_METRIC_COLUMNS = frozenset(BASE_COLUMNS) | {"subset", "level", "source", "image_source", "target_prompt",
                                                "status", "error", "errors", "Unnamed: 0", "index"}
# Overrides that never tell two runs' scores apart (where results go, which part of the data).
_IGNORED_KEYS = re.compile(r"^(shard|output_dir|hydra\..*|cache_dir|progress|results)$")
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


@dataclass(frozen=True)
class ResultDir:
    """What one result directory holds (``None`` for absent files)."""

    path: Path
    name: str
    overrides: dict[str, str]
    scores: pd.DataFrame | None = None
    run: dict | None = None
    metametrics: pd.DataFrame | None = None
    per_seg: pd.DataFrame | None = None

    @property
    def shard(self) -> str | None:
        s = self.overrides.get("shard")
        if s is None and self.run:
            s = (self.run.get("config") or {}).get("shard")
        return None if s in (None, "", "null", "None") else str(s)

    @property
    def identity(self) -> tuple[tuple[str, str], ...]:
        """Overrides that change scores (shard and output locations left out)."""
        return tuple(sorted((k, v) for k, v in self.overrides.items() if not _IGNORED_KEYS.match(k)))

    def metric_columns(self) -> list[str]:
        """The metrics of this result: those analysed when there is a ``metametrics.csv`` (a
        ``ts2 analyze metrics=[...]`` job may have read a wider score file), else the score columns."""
        if self.metametrics is not None:
            return list(dict.fromkeys(self.metametrics["metric"]))
        if self.scores is not None:
            return [c for c in self.scores.columns if c not in NON_METRIC_COLUMNS]
        return []


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
        kids = sorted((k for k in p.iterdir() if k.is_dir() and _is_result_dir(k)),
                      key=lambda k: (0, int(k.name), "") if k.name.isdigit() else (1, 0, k.name))
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


def _read_csv(path: Path, what: str, required: Sequence[str], dtype: dict | None = None) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=dtype, keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: could not read {what} as CSV ({type(e).__name__}: {e})") from e
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: expected {what} columns {list(required)}, missing {missing} (got {list(df.columns)})")
    return df


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
    """
    p = Path(path)
    if not _is_result_dir(p):
        raise FileNotFoundError(f"{p}: expected scores.csv or metametrics.csv, found neither")
    overrides: dict[str, str] = {}
    ov = p / ".hydra" / "overrides.yaml"
    if ov.is_file():
        import yaml

        try:
            items = yaml.safe_load(ov.read_text()) or []
        except yaml.YAMLError as e:
            raise ValueError(f"{ov}: expected a YAML list of overrides, could not parse it: {e}") from e
        if not isinstance(items, list):
            raise ValueError(f"{ov}: expected a YAML list of overrides, got {type(items).__name__}")
        overrides = parse_overrides(items)
    run = None
    if (p / "run.json").is_file():
        try:
            run = json.loads((p / "run.json").read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{p / 'run.json'}: expected JSON, could not parse it: {e}") from e
    key = {"seg_id": str, "node": str, "file_name": str}
    score_file = p / "scores.csv" if (p / "scores.csv").is_file() else _analysed_scores_file(p)
    scores = _read_csv(score_file, "score table", ("seg_id", "node"), dtype=key) if score_file else None
    mm = (_read_csv(p / "metametrics.csv", "meta-metric", ("metric", "protocol", "meta_metric", "subset", "value"),
                    dtype={"metric": str, "subset": str})
          if (p / "metametrics.csv").is_file() else None)
    ps = (_read_csv(p / "per_seg.csv", "per-SEG", ("metric", "protocol", "meta_metric", "seg_id", "value"),
                    dtype={"metric": str, "seg_id": str, "subset": str})
          if (p / "per_seg.csv").is_file() else None)
    if ps is not None and "subset" in ps.columns:
        ps["subset"] = ps["subset"].fillna("")
    return ResultDir(p, name or p.name, overrides, scores, run, mm, ps)


# -- merging ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    """One merged run (a directory, or the shards of one run)."""

    label: str
    dirs: tuple[str, ...]
    overrides: dict[str, str]
    columns: dict[str, str]          # original column -> name in the merged table
    shards: tuple[str, ...] = ()
    n_images: int | None = None
    device: str | None = None
    wall_time_s: float | None = None
    images_per_s: float | None = None
    n_failed: int = 0
    cache_hits: int | None = None
    cache_misses: int | None = None


@dataclass(frozen=True)
class MergedResults:
    """Everything the report draws from, after merging the inputs."""

    scores: pd.DataFrame | None
    metametrics: pd.DataFrame | None
    per_seg: pd.DataFrame | None
    flops: dict[str, float]
    lower_is_better: frozenset[str]
    runs: tuple[RunInfo, ...]
    notes: tuple[str, ...] = ()

    @property
    def metrics(self) -> list[str]:
        if self.metametrics is not None:
            return list(dict.fromkeys(self.metametrics["metric"]))
        if self.scores is not None:
            return [c for c in self.scores.columns if c not in NON_METRIC_COLUMNS]
        return []


def _run_summary(run: dict | None, columns: Iterable[str]) -> dict[str, Any]:
    """Per-column FLOPs and direction, and run-level numbers, from a ``run.json`` record."""
    out: dict[str, Any] = {"flops": {}, "lower": set(), "device": None, "wall": 0.0, "ips": [], "failed": 0,
                           "hits": 0, "misses": 0, "n_items": None}
    if not run:
        return out
    out["n_items"] = run.get("n_items")
    cols = set(columns)
    for rec in run.get("metrics") or []:
        rcols = rec.get("columns") or [rec.get("name")]
        f = rec.get("flops_per_image_measured") or rec.get("flops_per_image_estimate")
        for c in rcols:
            if c in cols and f is not None and np.isfinite(float(f)):
                out["flops"][c] = float(f)
        for c, higher in (rec.get("directions") or {}).items():
            if c in cols and higher is False:
                out["lower"].add(c)
        out["device"] = out["device"] or rec.get("device")
        out["wall"] += float(rec.get("wall_time_s") or 0.0)
        if rec.get("images_per_s"):
            out["ips"].append(float(rec["images_per_s"]))
        out["failed"] += int(rec.get("n_failed") or len(rec.get("failures") or []))
        out["hits"] += int(rec.get("cache_hits") or 0)
        out["misses"] += int(rec.get("cache_misses") or 0)
    return out


def _concat_shards(group: list[ResultDir], notes: list[str]) -> pd.DataFrame | None:
    frames = [d.scores for d in group if d.scores is not None]
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0]
    df = pd.concat(frames, ignore_index=True)
    if "file_name" not in df.columns:
        raise ValueError(f"shards {[d.name for d in group]}: expected a file_name column to merge on, got {list(df.columns)}")
    dup = df["file_name"].duplicated(keep=False)
    if dup.any():
        metric_cols = [c for c in df.columns if c not in NON_METRIC_COLUMNS]
        clash = df[dup].groupby("file_name")[metric_cols].nunique(dropna=False)
        bad = clash[(clash > 1).any(axis=1)]
        if len(bad):
            raise ValueError(f"shards {[d.name for d in group]}: image {bad.index[0]!r} was scored by two shards with "
                             "different scores; expected disjoint shards of one run (same settings, shard=i/n)")
        notes.append(f"{int(dup.sum() - df['file_name'][dup].nunique())} image(s) appear in two shards of "
                     f"{group[0].name} with equal scores; kept once")
        df = df.drop_duplicates("file_name").reset_index(drop=True)
    return df


def _shard_notes(group: list[ResultDir], label: str) -> list[str]:
    from .shards import parse_shard

    notes = []
    parsed = []
    for d in group:
        try:
            parsed.append(parse_shard(d.shard))
        except (TypeError, ValueError) as e:
            notes.append(f"{d.name}: shard setting {d.shard!r} not understood ({e})")
    counts = {s.count for s in parsed if s is not None}
    if len(counts) > 1:
        notes.append(f"run {label}: shards of different splits {sorted(counts)} merged")
    for n in counts:
        have = {s.index for s in parsed if s is not None and s.count == n}
        missing = sorted(set(range(n)) - have)
        if missing:
            notes.append(f"run {label}: shard(s) {', '.join(f'{i}/{n}' for i in missing)} missing: its images are "
                         "not in the report")
    return notes


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
    # 1. group shards of one run
    groups: dict[tuple, list[ResultDir]] = {}
    for d in dirs:
        key = (d.identity, tuple(d.metric_columns())) if d.shard is not None else ("dir", str(d.path.resolve()))
        groups.setdefault(key, []).append(d)
    group_list = list(groups.values())
    # 2. names: a column given by several runs is qualified by the overrides that differ
    owners: dict[str, list[int]] = {}
    for gi, g in enumerate(group_list):
        for c in g[0].metric_columns():
            owners.setdefault(c, []).append(gi)
    rename: list[dict[str, str]] = [{} for _ in group_list]
    for c, gis in owners.items():
        if len(gis) == 1:
            rename[gis[0]][c] = c
            continue
        ids = [dict(group_list[gi][0].identity) for gi in gis]
        keys = sorted(set().union(*ids))
        varying = [k for k in keys if len({i.get(k) for i in ids}) > 1]
        names = []
        for gi, ident in zip(gis, ids):
            tag = ",".join(f"{k}={ident.get(k, '-')}" for k in varying) if varying else group_list[gi][0].name
            names.append(f"{c}[{tag}]")
        if len(set(names)) < len(names):  # equal overrides: the directory name is all that differs
            names = [f"{c}[{group_list[gi][0].name}]" for gi in gis]
        if len(set(names)) < len(names):
            names = [f"{c}[{gi}]" for gi in gis]
        for gi, nm in zip(gis, names):
            rename[gi][c] = nm
        notes.append(f"column {c!r} comes from {len(gis)} runs; named " + ", ".join(names))
    # 3. scores, meta-metrics, costs, directions
    score_frames: list[pd.DataFrame] = []
    mm_parts, ps_parts, runs = [], [], []
    flops_out: dict[str, float] = {}
    lower: set[str] = set()
    todo: list[str] = []
    for g, ren in zip(group_list, rename):
        label = g[0].name if len(g) == 1 else f"{g[0].name} (+{len(g) - 1} shard(s))"
        if len(g) > 1 or g[0].shard is not None:
            notes += _shard_notes(g, label)
        sc = _concat_shards(g, notes)
        summ = [_run_summary(d.run, ren) for d in g]
        for s in summ:
            for c, f in s["flops"].items():
                flops_out[ren[c]] = f
            lower |= {ren[c] for c in s["lower"]}
        if sc is not None:
            keep = [c for c in BASE_COLUMNS if c in sc.columns] + [c for c in ren if c in sc.columns]
            if len(keep) > len([c for c in BASE_COLUMNS if c in sc.columns]):
                score_frames.append(sc[keep].rename(columns=ren))
        reusable = len(g) == 1 and g[0].metametrics is not None and set(ren) <= set(g[0].metametrics["metric"])
        if reusable:
            mm = g[0].metametrics[g[0].metametrics["metric"].isin(list(ren))].copy()
            mm["metric"] = mm["metric"].map(ren)
            mm_parts.append(mm)
            if g[0].per_seg is not None:
                ps = g[0].per_seg[g[0].per_seg["metric"].isin(list(ren))].copy()
                ps["metric"] = ps["metric"].map(ren)
                ps_parts.append(ps)
        else:
            todo += [ren[c] for c in ren]
        ips = [x for s in summ for x in s["ips"]]
        runs.append(RunInfo(
            label=label, dirs=tuple(str(d.path) for d in g), overrides=dict(g[0].identity), columns=dict(ren),
            shards=tuple(d.shard for d in g if d.shard is not None),
            n_images=None if sc is None else len(sc),
            device=next((s["device"] for s in summ if s["device"]), None),
            wall_time_s=sum(s["wall"] for s in summ) or None,
            images_per_s=float(np.mean(ips)) if ips else None,
            n_failed=sum(s["failed"] for s in summ),
            cache_hits=sum(s["hits"] for s in summ) if any(d.run for d in g) else None,
            cache_misses=sum(s["misses"] for s in summ) if any(d.run for d in g) else None))
    for name, f in (flops or {}).items():
        matches = [m for run in runs for c, m in run.columns.items() if m == name or c == name]
        for m in matches or [name]:
            flops_out.setdefault(m, float(f))
    lower |= set(lower_is_better)
    scores = _join_scores(score_frames, notes)
    merged = MergedResults(
        scores=scores,
        metametrics=pd.concat(mm_parts, ignore_index=True) if mm_parts else None,
        per_seg=pd.concat(ps_parts, ignore_index=True) if ps_parts else None,
        flops=flops_out, lower_is_better=frozenset(lower), runs=tuple(runs), notes=tuple(notes))
    return merged, todo


def _join_scores(frames: list[pd.DataFrame], notes: list[str]) -> pd.DataFrame | None:
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    for f in frames:
        if "file_name" not in f.columns:
            raise ValueError("expected a file_name column in every score table to join runs on, got one without "
                             f"(columns {list(f.columns)})")
    out = frames[0]
    for f in frames[1:]:
        metric_cols = [c for c in f.columns if c not in NON_METRIC_COLUMNS]
        base = [c for c in BASE_COLUMNS if c in f.columns and c != "file_name"]
        n_before = len(out)
        out = out.merge(f[["file_name", *base, *metric_cols]], on="file_name", how="outer", suffixes=("", "__r"))
        for c in base:
            if f"{c}__r" in out.columns:
                out[c] = out[c].fillna(out[f"{c}__r"])
                out = out.drop(columns=f"{c}__r")
        if len(out) != n_before or out[metric_cols].isna().all(axis=1).any():
            notes.append("runs scored different images: the merged table has a missing score where a run did not "
                         "score an image")
    return out.reset_index(drop=True)


def complete_analysis(merged: MergedResults, todo: Sequence[str], protocols: Sequence[str] = ("paper",),
                      bootstrap: int = 1000, seed: int = 0, dataset=None, subsets: str = "auto") -> MergedResults:
    """Compute the meta-metrics of ``todo`` metrics on the merged scores and add them.

    Raises
    ------
    ValueError
        ``todo`` is not empty but there are no scores to analyse.
    """
    if not todo:
        return merged
    if merged.scores is None:
        raise ValueError(f"metrics {list(todo)} need analysis but no scores.csv was found for them")
    from .pipeline import analyze

    cols = [c for c in ("seg_id", "node", "file_name") if c in merged.scores.columns]
    frame = merged.scores[cols + list(todo)]
    res = analyze(frame, dataset=dataset, protocols=list(protocols), bootstrap=int(bootstrap), seed=int(seed),
                  subsets=subsets, lower_is_better=[m for m in todo if m in merged.lower_is_better])
    mm = res.metametrics_frame()
    ps = res.per_seg_frame()
    notes = list(merged.notes) + [f"analysis: {n}" for n in res.notes]
    return MergedResults(
        scores=merged.scores,
        metametrics=mm if merged.metametrics is None else pd.concat([merged.metametrics, mm], ignore_index=True),
        per_seg=ps if merged.per_seg is None else pd.concat([merged.per_seg, ps], ignore_index=True),
        flops=merged.flops, lower_is_better=merged.lower_is_better, runs=merged.runs, notes=tuple(notes))


# -- figures ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReportFigure:
    """A written figure: file and caption."""

    path: Path
    caption: str
    section: str


def _best_worst(per_seg: pd.DataFrame, protocol: str, k: int,
                eligible: Iterable[str] | None = None) -> tuple[list[str], list[str], pd.Series]:
    """Best and worst ``k`` SEGs by mean per-SEG rank_m over the metrics (only ``eligible`` ones)."""
    d = per_seg[(per_seg["meta_metric"] == "rank") & (per_seg["protocol"] == protocol)]
    if eligible is not None:
        d = d[d["seg_id"].astype(str).isin(set(eligible))]
    mean = d.groupby("seg_id")["value"].mean().dropna()
    if mean.empty:
        return [], [], mean
    order = mean.sort_values(kind="stable")
    k = min(k, len(order) // 2 if len(order) > 1 else 1)
    return list(order.index[::-1][:k]), list(order.index[:k]), mean


FIGURE_KINDS = ("pareto", "histograms", "heatmaps", "scatter")


def make_figures(merged: MergedResults, out_dir: str | Path, protocol: str | None = None,
                 labels: Mapping[str, str] | None = None, groups: Mapping[str, str] | None = None,
                 scatter: Sequence[str] | None = None, n_heatmaps: int = 2, max_hist_per_figure: int = 9,
                 prompts: Mapping[str, str] | None = None, kinds: Sequence[str] = FIGURE_KINDS,
                 pareto: Sequence[str] | None = None) -> list[ReportFigure]:
    """Write the report figures into ``out_dir`` (PNG) and return them with captions.

    Parameters
    ----------
    protocol : str, optional
        Protocol of the meta-metrics drawn (default: ``paper`` if present, else the first).
    kinds : sequence of str
        Which figures: any of ``pareto``, ``histograms``, ``heatmaps``, ``scatter`` (default all).
    pareto : sequence of str, optional
        Meta-metrics that get a Pareto figure (default: every one in the meta-metrics).
    scatter : (str, str), optional
        The two metrics of the per-SEG rank_m scatter (default: the two best by Avg rank_m).
    n_heatmaps : int
        Number of best and of worst SEGs (by mean per-SEG rank_m over the metrics) drawn.
    """
    from . import plots

    unknown = sorted(set(kinds) - set(FIGURE_KINDS))
    if unknown:
        raise ValueError(f"expected figure kinds among {list(FIGURE_KINDS)}, got {unknown}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs: list[ReportFigure] = []
    labels = dict(labels or {})
    mm = merged.metametrics
    if mm is not None and len(mm):
        protocols = list(dict.fromkeys(mm["protocol"]))
        if protocol is None:
            protocol = "paper" if "paper" in protocols else protocols[0]
        elif protocol not in protocols:
            raise ValueError(f"expected a protocol among {protocols} for the figures, got {protocol!r}")
    metrics = merged.metrics
    # Pareto frontiers
    if "pareto" in kinds and mm is not None and merged.flops:
        pts = mm[mm["protocol"] == protocol].copy()
        if pareto is not None:
            missing = sorted(set(pareto) - set(pts["meta_metric"]))
            if missing:
                raise ValueError(f"expected Pareto meta-metrics among {sorted(set(pts['meta_metric']))}, got {missing}")
            pts = pts[pts["meta_metric"].isin(list(pareto))]
        pts["flops"] = pts["metric"].map(merged.flops)
        with_cost = pts.dropna(subset=["flops"])
        no_cost = sorted(set(pts["metric"]) - set(with_cost["metric"]))
        for mmname in dict.fromkeys(pts["meta_metric"]):
            costed = with_cost.loc[with_cost["meta_metric"] == mmname, "metric"].unique()
            if len(costed) < 2:  # a frontier of one point says nothing
                log.info("Pareto figure of %s skipped: FLOPs per image known for %d metric(s) (%s), need 2; "
                         "give the others with flops={name: value}", mmname, len(costed), ", ".join(costed) or "-")
                continue
            fig = plots.pareto_figure(pts, mmname, labels=labels, groups=groups)
            p = plots.save_figure(fig, out / f"pareto_{mmname}.png")
            cap = (f"{mmname} ({protocol} protocol) against FLOPs per image; the dashed staircase is the Pareto "
                   "frontier (no other metric is both cheaper and better); whiskers are 95% bootstrap CIs.")
            if no_cost:
                cap += f" Not shown (no FLOPs estimate): {', '.join(no_cost)}."
            figs.append(ReportFigure(p, cap, "Pareto frontiers"))
    elif "pareto" in kinds and mm is not None:
        log.info("no FLOPs per image known for any metric: Pareto plots skipped")
    # histograms per error level
    sc = merged.scores
    hist_metrics = [m for m in metrics if sc is not None and m in sc.columns]
    for i in range(0, len(hist_metrics) if "histograms" in kinds else 0, max_hist_per_figure):
        chunk = hist_metrics[i:i + max_hist_per_figure]
        fig = plots.score_histograms(sc, chunk, labels=labels)
        p = plots.save_figure(fig, out / f"histograms_{i // max_hist_per_figure + 1}.png")
        figs.append(ReportFigure(p, "Score distributions per error count (the populations sep_m's KS statistic "
                               "compares). A metric that separates errors moves its mass to lower scores "
                               "row by row.", "Score distributions"))
    # heatmaps of the best and worst SEGs
    ps = merged.per_seg
    if "heatmaps" in kinds and n_heatmaps > 0 and sc is not None and ps is not None and hist_metrics \
            and protocol is not None:
        # A SEG whose images sit on one error level has nothing to order (SEG 103 of TS2): its
        # rank_m is 0 or undefined by convention, which says nothing about the metrics.
        lv = plots.add_levels(sc[["seg_id", "node"]])
        multi = lv.groupby(lv["seg_id"].astype(str))["level"].nunique()
        best, worst, mean = _best_worst(ps, protocol, n_heatmaps, eligible=multi.index[multi > 1])
        for kind, ids in (("best", best), ("worst", worst)):
            for sid in ids:
                vals = ps[(ps["protocol"] == protocol) & (ps["meta_metric"] == "rank") & (ps["seg_id"] == sid)]
                vals = dict(zip(vals["metric"], vals["value"]))
                prompt = (prompts or {}).get(sid)
                if prompt is None and "prompt" in sc.columns:
                    pr = sc.loc[sc["seg_id"].astype(str) == sid, "prompt"].dropna()
                    prompt = str(pr.iloc[0]) if len(pr) else None
                fig = plots.seg_heatmap(sc, sid, hist_metrics, lower_is_better=sorted(merged.lower_is_better),
                                        seg_values=vals, labels=labels, prompt=prompt,
                                        title=f"{kind.capitalize()} SEG {sid} (mean rank$_m$ {100 * mean[sid]:.0f}%)")
                p = plots.save_figure(fig, out / f"heatmap_{kind}_seg{_safe(sid)}.png")
                figs.append(ReportFigure(p, f"SEG {sid}, one of the {n_heatmaps} {kind} SEGs by mean per-SEG rank_m "
                                       f"({protocol} protocol): cells coloured from each metric's worst (red) to "
                                       "best (blue) score within the SEG, nodes ordered by error count.",
                                    "Per-SEG heatmaps"))
    # scatter of two metrics' per-SEG rank_m
    if "scatter" in kinds and ps is not None and protocol is not None:
        ranked = [m for m in metrics if ((ps["metric"] == m) & (ps["meta_metric"] == "rank")).any()]
        if scatter:
            pair = list(scatter)
            unknown = [m for m in pair if m not in ranked]
            if len(pair) != 2 or unknown:
                raise ValueError(f"expected scatter=[a,b] with two metrics among {ranked}, got {pair}")
        elif len(ranked) >= 2:
            avg = mm[(mm["protocol"] == protocol) & (mm["meta_metric"] == "rank") & (mm["subset"] == "Avg")]
            best2 = avg.set_index("metric")["value"].reindex(ranked).sort_values(ascending=False, kind="stable")
            pair = list(best2.index[:2])
        else:
            pair = []
        if pair:
            fig = plots.rank_scatter(ps, pair[0], pair[1], protocol=protocol, labels=labels)
            p = plots.save_figure(fig, out / "scatter_rank.png")
            figs.append(ReportFigure(p, f"Per-SEG rank_m of {labels.get(pair[0], pair[0])} vs "
                                   f"{labels.get(pair[1], pair[1])} ({protocol} protocol), one point per SEG.",
                                "Per-SEG comparison"))
    return figs


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(s))


# -- tables and HTML -------------------------------------------------------------------------------

def _fmt_pct(v: float) -> str:
    return "" if v is None or not np.isfinite(v) else f"{100 * v:.1f}"


def metametrics_html(mm: pd.DataFrame, protocol: str, labels: Mapping[str, str] | None = None) -> str:
    """The Table-2-style table of one protocol as HTML: metrics as columns, meta-metric x subset
    rows, values in % with the 95% CI below, best of each row in bold."""
    labels = dict(labels or {})
    d = mm[mm["protocol"] == protocol]
    metrics = list(dict.fromkeys(d["metric"]))
    mms = list(dict.fromkeys(d["meta_metric"]))
    subsets = list(dict.fromkeys(d["subset"]))
    subsets = (["Avg"] if "Avg" in subsets else []) + [s for s in subsets if s != "Avg"]
    idx = d.set_index(["meta_metric", "subset", "metric"])
    head = "".join(f"<th>{html.escape(labels.get(m, m))}</th>" for m in metrics)
    rows = [f"<tr><th>meta-metric</th><th>subset</th>{head}</tr>"]
    for k in mms:
        for s in subsets:
            vals = []
            for m in metrics:
                try:
                    r = idx.loc[(k, s, m)]
                except KeyError:
                    vals.append(None)
                    continue
                r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
                vals.append(r)
            # Best after rounding to the printed 0.1, like table.md: printed ties are all bold.
            fin = [round(100 * float(r["value"]), 1) for r in vals if r is not None and np.isfinite(float(r["value"]))]
            if not fin:
                continue
            best = max(fin)
            cells = []
            for r in vals:
                if r is None or not np.isfinite(float(r["value"])):
                    cells.append("<td></td>")
                    continue
                v = float(r["value"])
                txt = _fmt_pct(v)
                if round(100 * v, 1) == best:
                    txt = f"<b>{txt}</b>"
                lo, hi = r.get("ci_low"), r.get("ci_high")
                if lo is not None and hi is not None and np.isfinite(float(lo)) and np.isfinite(float(hi)):
                    txt += f"<br><small>[{_fmt_pct(float(lo))}, {_fmt_pct(float(hi))}]</small>"
                cells.append(f"<td>{txt}</td>")
            rows.append(f"<tr><td>{html.escape(k)}</td><td>{html.escape(s)}</td>{''.join(cells)}</tr>")
    return "<table class='mm'>" + "".join(rows) + "</table>"


def read_human_results(path: str | Path) -> pd.DataFrame:
    """``human_metametrics.csv`` (``ts2 analyze human=...``), given as the file or its folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "human_metametrics.csv"
    return _read_csv(p, "human results", ["metric", "statistic", "grouping", "value"])


def views_frame(mm: pd.DataFrame, human: pd.DataFrame, protocol: str, seg_meta_metric: str = "rank",
                statistic: str = "kendall_b", grouping: str = "prompt"):
    """The SEG view (``seg_meta_metric``, subset Avg, ``protocol``) beside the human view
    (``statistic`` with ``grouping``) of the metrics in both; see :func:`analysis.views.compare_views`."""
    from .views import compare_views, view_values

    d = mm[(mm["protocol"] == protocol) & (mm["meta_metric"] == seg_meta_metric) & (mm["subset"] == "Avg")]
    seg = dict(zip(d["metric"], d["value"].astype(float)))
    return compare_views(seg, view_values(human, statistic=statistic, grouping=grouping))


def views_html(cmp, protocol: str, seg_meta_metric: str, statistic: str, grouping: str) -> str:
    """HTML of a :class:`analysis.views.ViewComparison`: both rank orders and Kendall's tau."""
    t = cmp.table
    rows = ["<tr><th>metric</th><th>SEG view: %s (%s, Avg)</th><th>SEG rank</th><th>human view: %s (%s)</th>"
            "<th>human rank</th><th>shift</th></tr>" % tuple(html.escape(x) for x in
                                                              (seg_meta_metric, protocol, statistic, grouping))]
    for r in t.itertuples(index=False):
        rows.append(f"<tr><td>{html.escape(str(r.metric))}</td><td>{_fmt_pct(float(r.seg_value))}</td>"
                    f"<td>{int(r.seg_rank)}</td><td>{_fmt_pct(float(r.human_value))}</td>"
                    f"<td>{int(r.human_rank)}</td><td>{int(r.rank_shift):+d}</td></tr>")
    tau = "n/a (fewer than 2 common metrics)" if not np.isfinite(cmp.tau) else f"{cmp.tau:.3f} (p = {cmp.pvalue:.3g})"
    parts = [f"<p>Order under the SEG view: {html.escape(' > '.join(cmp.seg_order))}<br>"
             f"Order under the human view: {html.escape(' > '.join(cmp.human_order))}<br>"
             f"Kendall's tau-b between the two views over {cmp.n} metric(s): <b>{tau}</b></p>",
             "<table>" + "".join(rows) + "</table>"]
    for name, only in (("SEG", cmp.only_seg), ("human", cmp.only_human)):
        if only:
            parts.append(f"<p class='note'>Only in the {name} view (left out): {html.escape(', '.join(only))}</p>")
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .5em;
text-align:right;vertical-align:top}th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.9em;color:#444}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}.note{color:#8a4b00}
"""


def render_html(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """A complete HTML page from ``(heading, html body)`` sections (bodies are trusted HTML)."""
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{b}\n" for h, b in sections)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


def figure_html(fig: ReportFigure) -> str:
    """``<figure>`` with the PNG embedded as base64 (the page needs no other file)."""
    data = base64.b64encode(Path(fig.path).read_bytes()).decode("ascii")
    return (f"<figure><img alt='{html.escape(fig.path.name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(fig.caption)} <code>figures/{html.escape(fig.path.name)}</code>"
            "</figcaption></figure>")


def runs_html(runs: Sequence[RunInfo]) -> str:
    head = ("<tr><th>run</th><th>metric columns</th><th>overrides</th><th>images</th><th>device</th>"
            "<th>wall time (s)</th><th>images/s</th><th>failed</th><th>cache hits / misses</th></tr>")
    rows = []
    for r in runs:
        cols = ", ".join(html.escape(v) for v in r.columns.values())
        ov = " ".join(html.escape(f"{k}={v}") for k, v in r.overrides.items()) or "-"
        if r.shards:
            ov += " <small>(shards " + ", ".join(html.escape(s) for s in r.shards) + ")</small>"
        hm = "-" if r.cache_hits is None else f"{r.cache_hits} / {r.cache_misses}"
        wt = "-" if r.wall_time_s is None else f"{r.wall_time_s:.1f}"
        ips = "-" if r.images_per_s is None else f"{r.images_per_s:.2f}"
        rows.append(f"<tr><td>{html.escape(r.label)}</td><td>{cols}</td><td>{ov}</td>"
                    f"<td>{'-' if r.n_images is None else r.n_images}</td><td>{html.escape(str(r.device or '-'))}</td>"
                    f"<td>{wt}</td><td>{ips}</td><td>{r.n_failed}</td><td>{hm}</td></tr>")
    return "<table>" + head + "".join(rows) + "</table>"


@dataclass(frozen=True)
class ReportOutputs:
    """Paths written by :func:`write_report`."""

    output_dir: Path
    html: Path
    tables: tuple[Path, ...]
    figures: tuple[Path, ...]
    metametrics: Path | None
    per_seg: Path | None
    scores: Path | None
    notes: tuple[str, ...] = field(default_factory=tuple)


def write_report(merged: MergedResults, output_dir: str | Path, title: str = "TS2 report",
                 protocol: str | None = None, labels: Mapping[str, str] | None = None,
                 groups: Mapping[str, str] | None = None, scatter: Sequence[str] | None = None,
                 n_heatmaps: int = 2, extra_sections: Sequence[tuple[str, str]] = (),
                 prompts: Mapping[str, str] | None = None, figures: Sequence[str] = FIGURE_KINDS,
                 pareto: Sequence[str] | None = None) -> ReportOutputs:
    """Write ``report.html``, the merged ``metametrics.csv``/``per_seg.csv``/``scores.csv``, the
    paper-style ``table.md``/``.tex``/``.csv`` and ``figures/*.png`` into ``output_dir``.

    ``extra_sections`` are ``(heading, html)`` pairs placed after the table (e.g. the
    discrepancy list of ``ts2 reproduce``).
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    mm, ps = merged.metametrics, merged.per_seg
    written_mm = written_ps = written_sc = None
    if mm is not None:
        written_mm = out / "metametrics.csv"
        mm.to_csv(written_mm, index=False)
    if ps is not None:
        written_ps = out / "per_seg.csv"
        ps.to_csv(written_ps, index=False)
    if merged.scores is not None:
        written_sc = out / "scores.csv"
        merged.scores.to_csv(written_sc, index=False)
    from .tables import write_tables

    table_paths = write_tables(mm, out, labels=labels) if mm is not None else []
    figs = make_figures(merged, out / "figures", protocol=protocol, labels=labels, groups=groups, scatter=scatter,
                        n_heatmaps=n_heatmaps, prompts=prompts, kinds=figures, pareto=pareto)
    sections: list[tuple[str, str]] = []
    if mm is not None:
        protocols = list(dict.fromkeys(mm["protocol"]))
        body = ("<p>Values in %, 95% bootstrap confidence interval over SEGs below each value (when computed), "
                "best of each row in bold. The same table is in <code>table.md</code>, <code>table.tex</code> and "
                "<code>table.csv</code>; every cell with its CI is in <code>metametrics.csv</code>.</p>")
        for p in protocols:
            body += f"<h3>protocol: {html.escape(p)}</h3>" + metametrics_html(mm, p, labels)
        if merged.flops:
            body += "<p>FLOPs per image: " + ", ".join(
                f"{html.escape((labels or {}).get(m, m))} {_fmt_flops(f)}" for m, f in merged.flops.items()) + "</p>"
        sections.append(("Meta-metrics", body))
    sections.extend(extra_sections)
    by_section: dict[str, list[ReportFigure]] = {}
    for f in figs:
        by_section.setdefault(f.section, []).append(f)
    for sec, fs in by_section.items():
        sections.append((sec, "".join(figure_html(f) for f in fs)))
    sections.append(("Runs", runs_html(merged.runs)))
    if merged.notes:
        sections.append(("Notes", "<ul>" + "".join(f"<li class='note'>{html.escape(n)}</li>" for n in merged.notes)
                         + "</ul>"))
    page = render_html(title, sections)
    html_path = out / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return ReportOutputs(out, html_path, tuple(table_paths), tuple(f.path for f in figs), written_mm, written_ps,
                         written_sc, merged.notes)


def _fmt_flops(f: float) -> str:
    from .plots import si_flops

    return si_flops(f) or "-"
