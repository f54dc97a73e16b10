"""The schema of ts2's result folders: columns, roles and the records ``run.json`` and ``analysis.json``.

A data module: what the files of a result folder hold and how a record is read, with no file
system machinery (writing a folder whole, its lock and manifest live in
:mod:`seg_data.result_sets`, which depends on this module, never the other way). Every
package reads result files through these names (they live in ``seg_data``, the one package all
others may import), so ``ts2 score``, ``ts2 analyze`` and ``ts2 report`` agree on

* which columns of a score table are metrics (:data:`NON_METRIC_COLUMNS`, :func:`metric_columns`);
* the columns of the long result tables: what ``ts2 analyze`` writes (:data:`METAMETRICS_COLUMNS`,
  :data:`PER_SEG_COLUMNS`) and the fewer a reader requires (:data:`METAMETRICS_REQUIRED`,
  :data:`PER_SEG_REQUIRED`, :data:`HUMAN_REQUIRED` for ``human_metametrics.csv``);
* a metric's **role** (:data:`ROLES`): ``metric`` (a faithfulness metric under evaluation),
  ``control`` (built to fail: random scores, shuffled inputs, answers without looking; drawn as
  a floor, never a competitor) and ``reference`` (published scores analysed beside a user's
  metric);
* the ``run.json`` record of a scoring run (:data:`RUN_FORMAT`, :func:`read_run_record`) and the
  directions (higher is better or not) and roles it declares, found beside a ``scores.csv``
  (:func:`run_record_beside`), and the ``analysis.json`` record of ``ts2 analyze``
  (:class:`AnalysisRecord`: :meth:`AnalysisRecord.to_json` writes it, :func:`read_analysis_record`
  reads it; :func:`folder_schema` joins the directions and roles of both records).

No pandas, numpy or torch here: only the standard library.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ANALYSIS_FILE",
    "ANALYSIS_FORMAT",
    "ANALYSIS_FORMAT_VERSION",
    "AnalysisRecord",
    "BASE_COLUMNS",
    "DESCRIPTIVE_COLUMNS",
    "HUMAN_REQUIRED",
    "KEY_ALIASES",
    "KEY_COLUMNS",
    "METAMETRICS_COLUMNS",
    "METAMETRICS_REQUIRED",
    "NON_METRIC_COLUMNS",
    "PER_SEG_COLUMNS",
    "PER_SEG_REQUIRED",
    "ROLES",
    "RUN_FILE",
    "RUN_FORMAT",
    "RUN_FORMATS",
    "UNNAMED_COLUMN",
    "FolderSchema",
    "RunRecord",
    "check_role",
    "folder_schema",
    "metric_columns",
    "non_metric_reason",
    "read_analysis_record",
    "read_run_record",
    "run_record",
    "run_record_beside",
    "schema_of",
]

# -- score-table columns ---------------------------------------------------------------------------

#: What ``ts2 score`` writes before the metric columns, in this order.
BASE_COLUMNS: tuple[str, ...] = ("seg_id", "node", "file_name", "image_path", "prompt")
#: Columns that identify an image and its SEG in any score table.
KEY_COLUMNS: tuple[str, ...] = ("seg_id", "node", "file_name", "subset")
#: Descriptive columns a score table may carry that are never metrics. (``errors`` is not one:
#: an error count is a lower-is-better metric.)
DESCRIPTIVE_COLUMNS: frozenset[str] = frozenset({
    "prompt", "target_prompt", "image_path", "source", "image_source", "level", "status", "error",
    "Unnamed: 0", "index"})
#: Every non-metric column: keys and descriptive columns.
NON_METRIC_COLUMNS: frozenset[str] = frozenset(BASE_COLUMNS) | frozenset(KEY_COLUMNS) | DESCRIPTIVE_COLUMNS
#: Other names of key columns (the TS2 metadata's ``id``/``rank``): read as the key when the key
#: column is absent, and never a metric beside it (``id`` beside ``seg_id`` is a row id).
KEY_ALIASES: dict[str, str] = {"id": "seg_id", "rank": "node", "image_id": "file_name"}
#: A blank header as pandas names it (``Unnamed: 4``: an index column, Excel's trailing comma).
UNNAMED_COLUMN = re.compile(r"^Unnamed: \d+(_level_\d+)?$")


def non_metric_reason(name: str, columns: Iterable[str] = ()) -> str | None:
    """Why column ``name`` of a table with ``columns`` is not a metric (None: it is one).

    Examples
    --------
    >>> non_metric_reason("clip", ["seg_id", "id", "clip"]) is None
    True
    >>> non_metric_reason("id", ["seg_id", "id", "clip"])
    "another name of the key column 'seg_id', which the table has"
    >>> non_metric_reason("Unnamed: 4")
    'a column without a header name'
    """
    name = str(name)
    if name in NON_METRIC_COLUMNS:
        return "a key or descriptive column"
    if UNNAMED_COLUMN.match(name):
        return "a column without a header name"
    cols = {str(c) for c in columns}
    if name in KEY_ALIASES and KEY_ALIASES[name] in cols:
        return f"another name of the key column {KEY_ALIASES[name]!r}, which the table has"
    return None


def metric_columns(columns: Iterable[str]) -> list[str]:
    """The metric columns among ``columns`` (order kept): every column without a
    :func:`non_metric_reason` (keys, descriptive names, blank headers, key aliases beside their key)."""
    columns = [str(c) for c in columns]
    return [c for c in columns if non_metric_reason(c, columns) is None]


# -- long result tables ----------------------------------------------------------------------------

#: The columns of ``metametrics.csv`` as ``ts2 analyze`` writes them, in this order (the last five
#: are the chance levels, NaN without them).
METAMETRICS_COLUMNS: tuple[str, ...] = ("metric", "protocol", "meta_metric", "subset", "value", "ci_low", "ci_high",
                                        "n_segs", "chance", "chance_low", "chance_high", "chance_mc_error", "adjusted")
#: The columns of ``per_seg.csv`` as ``ts2 analyze`` writes them, in this order.
PER_SEG_COLUMNS: tuple[str, ...] = ("metric", "protocol", "meta_metric", "seg_id", "subset", "value")
#: The columns a reader of each long result table requires (a table may have more: those above,
#: or fewer of them when an older ts2 wrote it).
METAMETRICS_REQUIRED: tuple[str, ...] = ("metric", "protocol", "meta_metric", "subset", "value")
PER_SEG_REQUIRED: tuple[str, ...] = ("metric", "protocol", "meta_metric", "seg_id", "value")
#: ... and of ``human_metametrics.csv`` (``ts2 analyze human=``).
HUMAN_REQUIRED: tuple[str, ...] = ("metric", "statistic", "grouping", "value")


# -- roles ---------------------------------------------------------------------------------------

#: ``metric``: evaluated; ``control``: built to fail (a floor); ``reference``: published scores
#: analysed beside a user's metric.
ROLES: tuple[str, ...] = ("metric", "control", "reference")


def check_role(role: str, where: str = "role") -> str:
    """``role`` if it is one of :data:`ROLES`.

    Raises
    ------
    ValueError
        Any other value, naming ``where`` and the valid roles.
    """
    if role not in ROLES:
        raise ValueError(f"{where}: expected a role among {list(ROLES)}, got {role!r}")
    return str(role)


# -- run.json -------------------------------------------------------------------------------------

RUN_FILE = "run.json"
ANALYSIS_FILE = "analysis.json"
#: Version written by ``ts2 score``: /2 added ``roles`` (column -> role) and ``directions``
#: (column -> higher is better) at the top level.
RUN_FORMAT = "ts2-score-run/2"
RUN_FORMATS: tuple[str, ...] = ("ts2-score-run/1", RUN_FORMAT)


def run_record(*, n_items: int, columns: Iterable[str], metrics: Iterable[Mapping[str, Any]],
               directions: Mapping[str, bool], roles: Mapping[str, str], derived_columns: Mapping[str, bool],
               **extra: Any) -> dict[str, Any]:
    """The ``run.json`` dict of a scoring run (the engine writes it with
    :func:`seg_data.result_sets.atomic_write_text`).

    ``metrics`` are the per-metric summaries (``name, columns, directions, wall_time_s,
    images_per_s, flops_per_image_*`` ...); ``directions``/``roles`` cover every score column,
    derived ones included. ``extra`` (dataset, config, wall_time_s of the whole run ...) is
    merged in.

    Raises
    ------
    ValueError
        A role not in :data:`ROLES`.
    """
    for c, r in roles.items():
        check_role(r, f"column {c!r}")
    return {"format": RUN_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "n_items": int(n_items),
            "columns": list(columns), "directions": {str(k): bool(v) for k, v in directions.items()},
            "roles": dict(roles), "metrics": [dict(m) for m in metrics],
            "derived_columns": {str(k): bool(v) for k, v in derived_columns.items()}, **extra}


@dataclass(frozen=True)
class RunRecord:
    """A parsed ``run.json``.

    ``directions`` and ``roles`` map every score column the run declared (per-metric records
    and derived columns; a /1 file has no roles, read as ``metric``); ``flops`` holds the
    measured FLOPs per image, else the estimate; ``wall_time_s`` is the whole run's wall time
    (``None`` in files that lack it) and ``metric_wall_time_s``/``images_per_s`` are per column.
    """

    path: Path
    format: str
    n_items: int | None
    wall_time_s: float | None
    directions: dict[str, bool]
    roles: dict[str, str]
    flops: dict[str, float]
    metric_wall_time_s: dict[str, float]
    images_per_s: dict[str, float]
    dataset: str | None
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def lower_is_better(self) -> frozenset[str]:
        return frozenset(c for c, h in self.directions.items() if not h)


def _finite(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _json_object(p: Path, what: str) -> dict:
    """The JSON object in ``p`` (``run.json``, ``analysis.json``); ``what`` names the record in errors."""
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: expected {what} (JSON), could not parse it: {e}") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: expected a JSON object, got {type(raw).__name__}")
    return raw


def read_run_record(path: str | Path) -> RunRecord:
    """Read and check a ``run.json``.

    Raises
    ------
    ValueError
        Not JSON, not an object, an unknown ``format``, a role not in :data:`ROLES`, or a
        ``metrics`` entry that is not an object (naming the file).
    """
    p = Path(path)
    raw = _json_object(p, "a ts2 run record")
    fmt = raw.get("format", "ts2-score-run/1")
    if fmt not in RUN_FORMATS:
        raise ValueError(f"{p}: expected format among {list(RUN_FORMATS)}, got {fmt!r}")
    directions: dict[str, bool] = {}
    flops: dict[str, float] = {}
    walls: dict[str, float] = {}
    ips: dict[str, float] = {}
    for i, rec in enumerate(raw.get("metrics") or []):
        if not isinstance(rec, dict):
            raise ValueError(f"{p}: expected metrics[{i}] to be an object, got {type(rec).__name__}")
        cols = [str(c) for c in list(rec.get("columns") or [rec.get("name")]) if c is not None]
        directions.update(_directions(rec.get("directions")))
        cost = _MetricCost.of(rec)
        for c in cols:
            cost.enter(c, flops, walls, ips)
    directions.update(_directions(raw.get("derived_columns")))
    directions.update(_directions(raw.get("directions")))
    roles = _roles(raw.get("roles") or {}, p)
    for c in directions:
        roles.setdefault(c, "metric")
    ds = raw.get("dataset")
    return RunRecord(path=p, format=fmt, n_items=raw.get("n_items"), wall_time_s=_finite(raw.get("wall_time_s")),
                     directions=directions, roles=roles, flops=flops, metric_wall_time_s=walls, images_per_s=ips,
                     dataset=(ds.get("name") if isinstance(ds, dict) else ds), raw=raw)


def _directions(declared: Mapping[Any, Any] | None) -> dict[str, bool]:
    """Column -> higher is better, of a ``directions`` (or ``derived_columns``) object; absent: none."""
    return {str(c): bool(higher) for c, higher in (declared or {}).items()}


@dataclass(frozen=True)
class _MetricCost:
    """What one ``metrics`` entry of ``run.json`` records of its cost, non-finite values dropped: FLOPs per
    image (measured, else estimated), wall time and images per second."""

    flops: float | None
    wall_time_s: float | None
    images_per_s: float | None

    @classmethod
    def of(cls, rec: Mapping[str, Any]) -> _MetricCost:
        f = _finite(rec.get("flops_per_image_measured"))
        return cls(flops=f if f is not None else _finite(rec.get("flops_per_image_estimate")),
                   wall_time_s=_finite(rec.get("wall_time_s")), images_per_s=_finite(rec.get("images_per_s")))

    def enter(self, column: str, flops: dict, walls: dict, ips: dict) -> None:
        """Enter the known costs for ``column`` in the record's per-column tables."""
        for table, value in ((flops, self.flops), (walls, self.wall_time_s), (ips, self.images_per_s)):
            if value is not None:
                table[column] = value


def run_record_beside(scores_path: str | Path) -> RunRecord | None:
    """The ``run.json`` in the folder of a score file, or ``None`` when there is none."""
    p = Path(scores_path)
    rj = p.parent / RUN_FILE
    return read_run_record(rj) if p.suffix and rj.is_file() else None


# -- analysis.json ---------------------------------------------------------------------------------

#: Version of ``analysis.json`` written by ``ts2 analyze``. A file without ``format`` (written before
#: ts2 versioned it) is version 1; version 2 adds the ``format`` key to the same fields.
ANALYSIS_FORMAT_VERSION = 2
ANALYSIS_FORMAT = f"ts2-analysis/{ANALYSIS_FORMAT_VERSION}"
_ANALYSIS_FORMAT_RE = re.compile(r"^ts2-analysis/(\d+)$")


@dataclass(frozen=True)
class AnalysisRecord:
    """The ``analysis.json`` of ``ts2 analyze``: what was analysed, how, and from which files.

    Written by :meth:`to_json` (``analysis/report/outputs.py`` builds the record from an analysis), read
    back by :func:`read_analysis_record`, the one reader: ``folder_schema`` (directions, roles,
    dataset), :func:`seg_data.result_sets.check_inputs` (``inputs``) and ``ts2 report``'s folder
    reader (``confidence``, ``score_files``) all go through it. Fields a version-1 file lacks read
    as empty / ``None``.

    ``lower_is_better`` names metrics whose scores fall as images get better; ``roles`` maps a
    metric to one of :data:`ROLES`; ``score_files`` are the absolute paths of the score tables
    read and ``inputs`` their sizes and SHA-256 (:func:`seg_data.result_sets.input_fingerprints`);
    ``protocols``, ``subsets``, ``n_segs``, ``excluded_segs`` and ``delta_sigma`` are per protocol;
    ``confidence`` is the level of the CIs in ``metametrics.csv``; ``chance_null`` describes the
    chance levels' null (``None``: none were computed). ``path`` is the file read (``None`` for a
    record built to be written), ``raw`` its parsed JSON.
    """

    source: str = ""
    metrics: tuple[str, ...] = ()
    lower_is_better: frozenset[str] = frozenset()
    roles: dict[str, str] = field(default_factory=dict)
    dataset: str | None = None
    score_files: tuple[str, ...] = ()
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta_metrics: tuple[str, ...] = ()
    protocols: dict[str, dict[str, Any]] = field(default_factory=dict)
    subsets: dict[str, list[str]] = field(default_factory=dict)
    subset_source: str | None = None
    n_segs: dict[str, int] = field(default_factory=dict)
    excluded_segs: dict[str, list[str]] = field(default_factory=dict)
    delta_sigma: dict[str, dict[str, float | None]] = field(default_factory=dict)
    bootstrap: int = 0
    seed: int | None = None
    confidence: float | None = None
    ci_method: str | None = None
    bootstrap_scheme: str | None = None
    chance_permutations: int = 0
    min_segs_ci: int | None = None
    notes: tuple[str, ...] = ()
    chance_null: str | None = None
    dataset_path: str | None = None  # the dataset's folder, absolute (ts2 explore draws its images)
    format: str = ANALYSIS_FORMAT
    path: Path | None = None
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def version(self) -> int:
        """The format's version number (1 for a file written before ts2 versioned it)."""
        return int(_ANALYSIS_FORMAT_RE.match(self.format).group(1))

    @property
    def directions(self) -> dict[str, bool]:
        """Metric -> higher is better."""
        return {m: m not in self.lower_is_better for m in self.metrics}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to ``analysis.json``: ``format`` first (always
        :data:`ANALYSIS_FORMAT`: a record read from an older file is written in the current
        format), ``chance_null`` only when chance levels were computed."""
        out: dict[str, Any] = {
            "format": ANALYSIS_FORMAT, "source": self.source, "metrics": list(self.metrics),
            "lower_is_better": sorted(self.lower_is_better), "roles": dict(self.roles), "dataset": self.dataset,
            "score_files": list(self.score_files), "inputs": dict(self.inputs),
            "meta_metrics": list(self.meta_metrics), "protocols": dict(self.protocols),
            "subsets": dict(self.subsets), "subset_source": self.subset_source, "n_segs": dict(self.n_segs),
            "excluded_segs": dict(self.excluded_segs), "delta_sigma": dict(self.delta_sigma),
            "bootstrap": self.bootstrap, "seed": self.seed, "confidence": self.confidence,
            "ci_method": self.ci_method, "bootstrap_scheme": self.bootstrap_scheme,
            "chance_permutations": self.chance_permutations, "min_segs_ci": self.min_segs_ci,
            "notes": list(self.notes)}
        if self.dataset_path is not None:
            out["dataset_path"] = self.dataset_path
        if self.chance_null is not None:
            out["chance_null"] = self.chance_null
        return out

    def to_json(self) -> str:
        """The text of ``analysis.json`` (write it with :func:`seg_data.result_sets.atomic_write_text`)."""
        return json.dumps(self.to_dict(), indent=1)


def _json_list(raw: Mapping[str, Any], key: str, p: Path) -> list:
    v = raw.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{p}: expected {key!r} to be a list, got {type(v).__name__}")
    return v


def _json_dict(raw: Mapping[str, Any], key: str, p: Path) -> dict:
    v = raw.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{p}: expected {key!r} to be an object, got {type(v).__name__}")
    return v


def _analysis_format(raw: Mapping[str, Any], p: Path) -> str:
    """The record's ``format`` (``ts2-analysis/1`` when absent), refusing another kind of file or a
    newer version than this ts2 writes."""
    fmt = raw.get("format", "ts2-analysis/1")
    m = _ANALYSIS_FORMAT_RE.match(fmt) if isinstance(fmt, str) else None
    if m is None:
        raise ValueError(f"{p}: expected format 'ts2-analysis/N' (an analysis record of ts2 analyze), got {fmt!r}")
    if int(m.group(1)) > ANALYSIS_FORMAT_VERSION:
        raise ValueError(f"{p}: expected format <= {ANALYSIS_FORMAT_VERSION} ({ANALYSIS_FORMAT!r}), got "
                         f"{int(m.group(1))} ({fmt!r}): written by a newer ts2; upgrade ts2 to read it")
    return fmt


def read_analysis_record(path: str | Path) -> AnalysisRecord:
    """Read and check an ``analysis.json`` (the one reader of it).

    A file without ``format`` is read as version 1 (the same fields, written before ts2 versioned
    the file); fields it lacks read as empty or ``None``.

    Raises
    ------
    ValueError
        Not JSON, not an object, a ``format`` that is not ``ts2-analysis/N`` or is newer than
        :data:`ANALYSIS_FORMAT` ("expected format <= 2 ..., got 3 ..."), a list or object field of
        another type, a role not in :data:`ROLES`, a confidence that is not a number (each naming
        the file).
    """
    p = Path(path)
    raw = _json_object(p, "a ts2 analysis record")
    fmt = _analysis_format(raw, p)
    roles = _roles(_json_dict(raw, "roles", p), p)
    conf = _confidence(raw.get("confidence"), p)
    return AnalysisRecord(
        source=str(raw.get("source") or ""), metrics=_json_texts(raw, "metrics", p),
        lower_is_better=frozenset(_json_texts(raw, "lower_is_better", p)), roles=roles,
        dataset=_optional_text(raw.get("dataset")), score_files=_json_texts(raw, "score_files", p),
        inputs=_json_dict(raw, "inputs", p), meta_metrics=_json_texts(raw, "meta_metrics", p),
        protocols=_json_dict(raw, "protocols", p), subsets=_json_dict(raw, "subsets", p),
        subset_source=raw.get("subset_source"), n_segs=_json_dict(raw, "n_segs", p),
        excluded_segs=_json_dict(raw, "excluded_segs", p), delta_sigma=_json_dict(raw, "delta_sigma", p),
        bootstrap=int(raw.get("bootstrap") or 0), seed=raw.get("seed"),
        confidence=conf, ci_method=raw.get("ci_method"),
        bootstrap_scheme=raw.get("bootstrap_scheme"), chance_permutations=int(raw.get("chance_permutations") or 0),
        min_segs_ci=raw.get("min_segs_ci"), notes=_json_texts(raw, "notes", p),
        chance_null=raw.get("chance_null"), format=fmt, path=p, raw=raw,
        dataset_path=_optional_text(raw.get("dataset_path")))


def _json_texts(raw: Mapping[str, Any], key: str, p: Path) -> tuple[str, ...]:
    """A list field as text (metric names, file paths, notes); absent: empty."""
    return tuple(str(v) for v in _json_list(raw, key, p))


def _optional_text(value: Any) -> str | None:
    """A text field that may be absent (``None``)."""
    return None if value is None else str(value)


def _confidence(conf: Any, p: Path) -> float | None:
    """The CIs' level as a float (absent: ``None``); a bool or a non-number is refused."""
    if conf is None:
        return None
    if isinstance(conf, bool) or not isinstance(conf, (int, float)):
        raise ValueError(f"{p}: expected 'confidence' to be a number, got {conf!r}")
    return float(conf)


def _roles(declared: Mapping[Any, Any], p: Path) -> dict[str, str]:
    """Column -> role of a record's ``roles``, each role checked (:func:`check_role`)."""
    return {str(c): check_role(r, f"{p}, roles[{c!r}]") for c, r in declared.items()}


@dataclass(frozen=True)
class FolderSchema:
    """Directions and roles a result folder declares (``run.json`` and ``analysis.json``)."""

    directions: dict[str, bool]
    roles: dict[str, str]
    dataset: str | None = None

    @property
    def lower_is_better(self) -> frozenset[str]:
        return frozenset(c for c, h in self.directions.items() if not h)


def folder_schema(folder: str | Path) -> FolderSchema:
    """Directions and roles from a folder's ``run.json`` and ``analysis.json`` (read here; see
    :func:`schema_of`).

    Raises
    ------
    ValueError
        Either file unreadable (:func:`read_run_record`, :func:`read_analysis_record`), or a role
        not in :data:`ROLES`.
    """
    d = Path(folder)
    run = read_run_record(d / RUN_FILE) if (d / RUN_FILE).is_file() else None
    analysed = read_analysis_record(d / ANALYSIS_FILE) if (d / ANALYSIS_FILE).is_file() else None
    return schema_of(run, analysed)


def schema_of(run: RunRecord | None, analysed: AnalysisRecord | None) -> FolderSchema:
    """Directions and roles of a folder from its parsed ``run.json`` and ``analysis.json`` records
    (either may be None); the analysis wins: it is what was analysed, e.g. reference metrics added
    beside a run's scores."""
    directions: dict[str, bool] = {}
    roles: dict[str, str] = {}
    dataset = None
    if run is not None:
        directions.update(run.directions)
        roles.update(run.roles)
        dataset = run.dataset
    if analysed is not None:
        for m in analysed.metrics:
            directions.setdefault(m, True)
        directions.update({m: False for m in analysed.lower_is_better})
        roles.update(analysed.roles)
        dataset = analysed.dataset or dataset
    return FolderSchema(directions, roles, dataset)

