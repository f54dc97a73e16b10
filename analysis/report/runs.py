"""Result folders and the runs they form when merged (the merge side of ``ts2 report``).

:class:`ResultDir`
    what one result folder holds (read by :func:`analysis.report.result_dirs.load_result_dir`);
:class:`RunGroup`
    one run of a merge: a folder, or the shards of one run split with ``shard=i/n``; it knows its
    label, its concatenated scores, its missing shards, the analysis it can lend and its
    :class:`analysis.report.merged.RunInfo`;
:class:`RunCosts`
    what one folder's ``run.json`` says its run cost (FLOPs, rates, wall time, cache counts);
:func:`merged_column_names`
    the name each run's metric column gets in the merged table (a column several runs give is
    qualified by the overrides in which they differ);
:class:`RunMerge`
    the merged parts gathered run by run, and the :class:`analysis.report.merged.MergedResults`
    they make.

:func:`analysis.report.result_dirs.merge_results` puts these together. Never imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from seg_data.result_sets import published_path
from seg_data.results import BASE_COLUMNS, FolderSchema, RunRecord, metric_columns

from .merged import MergedResults, RunInfo

__all__ = ["ResultDir", "RunCosts", "RunGroup", "RunMerge", "join_run_scores", "merged_column_names"]

# Overrides that never tell two runs' scores apart (where results go, which part of the data).
_IGNORED_KEYS = re.compile(r"^(shard|output_dir|hydra\..*|cache_dir|progress|results)$")


@dataclass(frozen=True)
class ResultDir:
    """What one result directory holds (``None`` for absent files)."""

    path: Path
    name: str
    overrides: dict[str, str]
    scores: pd.DataFrame | None = None
    run: RunRecord | None = None
    metametrics: pd.DataFrame | None = None
    per_seg: pd.DataFrame | None = None
    schema: FolderSchema = field(default_factory=lambda: FolderSchema({}, {}))
    confidence: float | None = None  # the CI level of metametrics.csv (analysis.json)
    notes: tuple[str, ...] = ()  # the notes of its analysis.json (missing scores, withheld CIs, ...)

    @property
    def shard(self) -> str | None:
        s = self.overrides.get("shard")
        if s is None and self.run:
            s = (self.run.raw.get("config") or {}).get("shard")
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
            return metric_columns(self.scores.columns)
        return []


# -- what a run cost -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunCosts:
    """What one result folder says about its run, for the merged ``columns`` only.

    ``flops`` and ``images_per_s`` per column (NaN rate: every score came from the cache, so no
    rate was measured, shown as "cached"); ``wall_time_s`` is the run's own wall time (scoring
    included loading, decoding, writing; a ``run.json`` that predates it has only per-metric times,
    whose sum undercounts, so it is ``None`` then); failures and cache counts are summed over the
    run's metrics; the directions and roles come from the folder's schema.
    """

    lower: frozenset[str] = frozenset()
    roles: dict[str, str] = field(default_factory=dict)
    flops: dict[str, float] = field(default_factory=dict)
    images_per_s: dict[str, float] = field(default_factory=dict)
    device: str | None = None
    wall_time_s: float | None = None
    n_failed: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    @classmethod
    def of(cls, d: ResultDir, columns: Iterable[str]) -> RunCosts:
        cols = set(columns)
        lower = frozenset(c for c in d.schema.lower_is_better if c in cols)
        roles = {c: r for c, r in d.schema.roles.items() if c in cols}
        if d.run is None:
            return cls(lower, roles)
        records = d.run.raw.get("metrics") or []
        return cls(lower, roles, flops={c: f for c, f in d.run.flops.items() if c in cols},
                   images_per_s={**{c: r for c, r in d.run.images_per_s.items() if c in cols},
                                 **dict.fromkeys(_cached_columns(records, cols), float("nan"))},
                   device=next((rec.get("device") for rec in records if rec.get("device")), None),
                   wall_time_s=d.run.wall_time_s, n_failed=sum(map(_failures, records)),
                   cache_hits=_total(records, "cache_hits"), cache_misses=_total(records, "cache_misses"))


def _failures(record: Mapping) -> int:
    """The failed images of one per-metric ``run.json`` record (its count, else its list of failures)."""
    return int(record.get("n_failed") or len(record.get("failures") or []))


def _total(records: Iterable[Mapping], key: str) -> int:
    """A count (``cache_hits``, ``cache_misses``) summed over the per-metric records (absent: 0)."""
    return sum(int(rec.get(key) or 0) for rec in records)


def _total_wall_time(costs: Sequence[RunCosts]) -> float | None:
    """A run's wall time: the sum over its folders (shards), unknown when one folder's is."""
    walls = [s.wall_time_s for s in costs]
    return None if any(w is None for w in walls) else float(sum(walls))


def _cached_columns(records: Iterable[Mapping], cols: set[str]) -> list[str]:
    """The columns (of ``cols``) of the per-metric ``run.json`` records whose every score came
    from the cache: no rate was measured for them."""
    return [c for rec in records if rec.get("images_per_s") is None and rec.get("cache_misses") == 0
            for c in rec.get("columns") or [] if c in cols]


# -- one run of a merge ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunGroup:
    """One run of a merge: a result folder, or the shards of one run (same overrides apart from
    ``shard``, same metric columns)."""

    dirs: tuple[ResultDir, ...]

    @classmethod
    def of(cls, dirs: Sequence[ResultDir]) -> list[RunGroup]:
        """``dirs`` grouped into runs, in order of first appearance: shards of one run together,
        every unsharded folder a run of its own."""
        groups: dict[tuple, list[ResultDir]] = {}
        for d in dirs:
            key = (d.identity, tuple(d.metric_columns())) if d.shard is not None else ("dir", str(d.path.resolve()))
            groups.setdefault(key, []).append(d)
        return [cls(tuple(g)) for g in groups.values()]

    @property
    def first(self) -> ResultDir:
        return self.dirs[0]

    @property
    def label(self) -> str:
        n = len(self.dirs)
        return self.first.name if n == 1 else f"{self.first.name} (+{n - 1} shard(s))"

    @property
    def is_sharded(self) -> bool:
        return len(self.dirs) > 1 or self.first.shard is not None

    def shard_notes(self) -> list[str]:
        """Shard settings not understood, splits that differ, and missing shards (whose images
        are then not in the report)."""
        if not self.is_sharded:
            return []
        from seg_data.shards import parse_shard

        notes = []
        parsed = []
        for d in self.dirs:
            try:
                parsed.append(parse_shard(d.shard))
            except (TypeError, ValueError) as e:
                notes.append(f"{d.name}: shard setting {d.shard!r} not understood ({e})")
        counts = {s.count for s in parsed if s is not None}
        if len(counts) > 1:
            notes.append(f"run {self.label}: shards of different splits {sorted(counts)} merged")
        for n in counts:
            have = {s.index for s in parsed if s is not None and s.count == n}
            missing = sorted(set(range(n)) - have)
            if missing:
                notes.append(f"run {self.label}: shard(s) {', '.join(f'{i}/{n}' for i in missing)} missing: its "
                             "images are not in the report")
        return notes

    def scores(self, notes: list[str]) -> pd.DataFrame | None:
        """The run's per-image scores: its shards concatenated, an image two shards scored alike
        kept once (with a line in ``notes``).

        Raises
        ------
        ValueError
            Shards without ``file_name``, or two shards giving one image different scores.
        """
        frames = [d.scores for d in self.dirs if d.scores is not None]
        if len(frames) <= 1:
            return frames[0] if frames else None
        names = [d.name for d in self.dirs]
        df = pd.concat(frames, ignore_index=True)
        if "file_name" not in df.columns:
            raise ValueError(f"shards {names}: expected a file_name column to merge on, got {list(df.columns)}")
        dup = df["file_name"].duplicated(keep=False)
        if not dup.any():
            return df
        clash = df[dup].groupby("file_name")[metric_columns(df.columns)].nunique(dropna=False)
        bad = clash[(clash > 1).any(axis=1)]
        if len(bad):
            raise ValueError(f"shards {names}: image {bad.index[0]!r} was scored by two shards with "
                             "different scores; expected disjoint shards of one run (same settings, shard=i/n)")
        notes.append(f"{int(dup.sum() - df['file_name'][dup].nunique())} image(s) appear in two shards of "
                     f"{self.first.name} with equal scores; kept once")
        return df.drop_duplicates("file_name").reset_index(drop=True)

    def reused_analysis(self, columns: Mapping[str, str]) -> tuple[pd.DataFrame, pd.DataFrame | None] | None:
        """The run's own meta-metrics and per-SEG values, renamed by ``columns``, when one folder
        analysed every one of them (shards never: their analyses cover part of the images)."""
        mm = self.first.metametrics
        if len(self.dirs) > 1 or mm is None or not set(columns) <= set(mm["metric"]):
            return None
        return _renamed_metrics(mm, columns), _renamed_metrics(self.first.per_seg, columns)

    def rates(self, columns: Mapping[str, str], costs: Sequence[RunCosts]) -> dict[str, float]:
        """Images per second of each merged column: the folder's own rates, or for shards the
        images over the time summed over the shards (a mean of rates would weigh them equally)."""
        if len(self.dirs) == 1:
            return {columns[c]: r for c, r in costs[0].images_per_s.items()}
        rates = {}
        runs = [d.run for d in self.dirs if d.run]
        for c in columns:
            timed = [r for r in runs if c in r.metric_wall_time_s]
            n = sum(r.n_items or 0 for r in timed)
            t = sum(r.metric_wall_time_s[c] for r in timed)
            if n and t > 0:
                rates[columns[c]] = n / t
        return rates

    def info(self, columns: Mapping[str, str], scores: pd.DataFrame | None, costs: Sequence[RunCosts]) -> RunInfo:
        """The run as the report lists it (folders, overrides, images, device, time, rates, cache)."""
        recorded = any(d.run for d in self.dirs)  # cache counts are unknown without a run.json
        return RunInfo(
            label=self.label, dirs=tuple(str(published_path(d.path)) for d in self.dirs),
            overrides=dict(self.first.identity), columns=dict(columns),
            shards=tuple(d.shard for d in self.dirs if d.shard is not None),
            n_images=None if scores is None else len(scores),
            device=next((s.device for s in costs if s.device), None),
            wall_time_s=_total_wall_time(costs),
            images_per_s=self.rates(columns, costs),
            n_failed=sum(s.n_failed for s in costs),
            cache_hits=sum(s.cache_hits for s in costs) if recorded else None,
            cache_misses=sum(s.cache_misses for s in costs) if recorded else None)


def _renamed_metrics(frame: pd.DataFrame | None, columns: Mapping[str, str]) -> pd.DataFrame | None:
    """The rows of a long table (``metametrics.csv``, ``per_seg.csv``) of the metrics in ``columns``,
    named as in the merged table."""
    if frame is None:
        return None
    out = frame[frame["metric"].isin(list(columns))].copy()
    out["metric"] = out["metric"].map(columns)
    return out


# -- the merged names of the runs' columns ---------------------------------------------------------

def merged_column_names(groups: Sequence[RunGroup], notes: list[str]) -> list[dict[str, str]]:
    """Each run's metric column -> its name in the merged table.

    A column given by several runs is qualified by the overrides that differ (else the directory
    name, else the run's index); each such column adds a line to ``notes``.
    """
    owners: dict[str, list[int]] = {}
    for gi, g in enumerate(groups):
        for c in g.first.metric_columns():
            owners.setdefault(c, []).append(gi)
    rename: list[dict[str, str]] = [{} for _ in groups]
    for c, gis in owners.items():
        names = [c] if len(gis) == 1 else _qualified_names(c, [groups[gi] for gi in gis], gis)
        for gi, nm in zip(gis, names, strict=True):
            rename[gi][c] = nm
        if len(gis) > 1:
            notes.append(f"column {c!r} comes from {len(gis)} runs; named " + ", ".join(names))
    return rename


def _qualified_names(column: str, owners: Sequence[RunGroup], indices: Sequence[int]) -> list[str]:
    """The names of a ``column`` several runs (``owners``, at ``indices`` of the merge) give:
    ``column[key=value,...]`` with the overrides in which they differ; with equal overrides the
    directory name is all that differs, and the run's index when even those are equal."""
    ids = [dict(g.first.identity) for g in owners]
    varying = [k for k in sorted(set().union(*ids)) if len({i.get(k) for i in ids}) > 1]
    tags = [",".join(f"{k}={i.get(k, '-')}" for k in varying) for i in ids] if varying else [g.first.name for g in owners]
    names = [f"{column}[{t}]" for t in tags]
    if len(set(names)) < len(names):
        names = [f"{column}[{g.first.name}]" for g in owners]
    if len(set(names)) < len(names):
        names = [f"{column}[{gi}]" for gi in indices]
    return names


# -- the merge, run by run -------------------------------------------------------------------------

@dataclass
class RunMerge:
    """The merged parts gathered run by run (:meth:`add`), then the merged results (:meth:`result`).

    ``todo`` lists the merged metrics no folder's analysis covers (they need
    :func:`analysis.pipeline.analyze`); ``notes`` are the report's notes, in the order they arose.
    """

    notes: list[str]
    score_frames: list[pd.DataFrame] = field(default_factory=list)
    mm_parts: list[pd.DataFrame] = field(default_factory=list)
    ps_parts: list[pd.DataFrame] = field(default_factory=list)
    runs: list[RunInfo] = field(default_factory=list)
    flops: dict[str, float] = field(default_factory=dict)
    lower: set[str] = field(default_factory=set)
    roles: dict[str, str] = field(default_factory=dict)
    confidences: set[float] = field(default_factory=set)
    datasets: list[str] = field(default_factory=list)
    todo: list[str] = field(default_factory=list)

    def add(self, group: RunGroup, columns: Mapping[str, str]) -> None:
        """Add one run whose metric columns are named ``columns`` (original -> merged name)."""
        self.notes += group.shard_notes()
        sc = group.scores(self.notes)
        costs = [RunCosts.of(d, columns) for d in group.dirs]
        for s in costs:
            self.flops.update({columns[c]: f for c, f in s.flops.items()})
            self.lower |= {columns[c] for c in s.lower}
            self.roles.update({columns[c]: r for c, r in s.roles.items()})
        self.datasets += [d.schema.dataset for d in group.dirs if d.schema.dataset]
        self._add_scores(sc, columns)
        self._add_analysis(group, columns)
        self.runs.append(group.info(columns, sc, costs))

    def _add_scores(self, scores: pd.DataFrame | None, columns: Mapping[str, str]) -> None:
        """The run's score columns, renamed, when it has any (a table of base columns only adds nothing)."""
        if scores is None:
            return
        base = [c for c in BASE_COLUMNS if c in scores.columns]
        own = [c for c in columns if c in scores.columns]
        if own:
            self.score_frames.append(scores[base + own].rename(columns=columns))

    def _add_analysis(self, group: RunGroup, columns: Mapping[str, str]) -> None:
        """The run's own analysis when it can be reused (with its confidence level and notes),
        else its metrics go to ``todo``."""
        reused = group.reused_analysis(columns)
        if reused is None:
            self.todo += [columns[c] for c in columns]
            return
        if group.first.confidence is not None:
            self.confidences.add(group.first.confidence)
        self.notes += [f"{group.label}: {n}" for n in group.first.notes]  # reused numbers keep what their analysis said
        self.mm_parts.append(reused[0])
        if reused[1] is not None:
            self.ps_parts.append(reused[1])

    def add_given_flops(self, flops: Mapping[str, float] | None) -> None:
        """Hand-given FLOPs per image (keys: merged or original column names) where no run recorded one.

        Raises
        ------
        ValueError
            A value :func:`analysis.pareto.parse_flops` does not read (naming the key).
        """
        from ..pareto import parse_flops

        for name, f in (flops or {}).items():
            matches = [m for run in self.runs for c, m in run.columns.items() if m == name or c == name]
            try:
                value = parse_flops(f)
            except ValueError as e:
                raise ValueError(f"flops[{name!r}]: {e}") from e
            for m in matches or [name]:
                self.flops.setdefault(m, value)

    def result(self, lower_is_better: Iterable[str] = ()) -> MergedResults:
        """The merged results; ``lower_is_better`` adds lower-is-better metrics to the recorded ones."""
        scores = join_run_scores(self.score_frames, self.notes)
        if len(self.confidences) > 1:  # before the notes are frozen into the result, so the report shows it
            self.notes.append(f"the inputs' confidence intervals have different levels {sorted(self.confidences)}")
        return MergedResults(
            scores=scores,
            metametrics=_concat(self.mm_parts), per_seg=_concat(self.ps_parts),
            flops=self.flops, lower_is_better=frozenset(self.lower | set(lower_is_better)), runs=tuple(self.runs),
            notes=tuple(self.notes), roles={m: self.roles.get(m, "metric") for r in self.runs for m in r.columns.values()},
            dataset=", ".join(dict.fromkeys(self.datasets)) or None,
            confidence=next(iter(self.confidences)) if len(self.confidences) == 1 else None)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame | None:
    return pd.concat(parts, ignore_index=True) if parts else None


def join_run_scores(frames: list[pd.DataFrame], notes: list[str]) -> pd.DataFrame | None:
    """The runs' score tables joined on ``file_name`` (outer: a run that did not score an image
    leaves a missing score, with a line in ``notes``).

    Raises
    ------
    ValueError
        Several tables, one without ``file_name``.
    """
    if len(frames) <= 1:
        return frames[0].reset_index(drop=True) if frames else None
    for f in frames:
        if "file_name" not in f.columns:
            raise ValueError("expected a file_name column in every score table to join runs on, got one without "
                             f"(columns {list(f.columns)})")
    out = frames[0]
    for f in frames[1:]:
        metric_cols = metric_columns(f.columns)
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
