"""The one file schema of ts2's result folders: columns, roles, ``run.json``, atomic writes, sets.

Every package reads and writes result files through this module (it lives in ``seg_data``, the
one package all others may import), so ``ts2 score``, ``ts2 analyze`` and ``ts2 report`` agree on

* which columns of a score table are metrics (:data:`NON_METRIC_COLUMNS`, :func:`metric_columns`);
* a metric's **role** (:data:`ROLES`): ``metric`` (a faithfulness metric under evaluation),
  ``control`` (built to fail: random scores, shuffled inputs, answers without looking; drawn as
  a floor, never a competitor) and ``reference`` (published scores analysed beside a user's
  metric);
* the ``run.json`` record of a scoring run (:data:`RUN_FORMAT`, :func:`read_run_record`) and the
  directions (higher is better or not) and roles it declares, found beside a ``scores.csv``
  (:func:`run_record_beside`), and the ``analysis.json`` record of ``ts2 analyze``
  (:class:`AnalysisRecord`: :meth:`AnalysisRecord.to_json` writes it, :func:`read_analysis_record`
  reads it; :func:`folder_schema` joins the directions and roles of both records);
* how a file is written (:func:`atomic_write_text`: a temporary name, then ``os.replace``) and
  how a folder of files is written as a set (:func:`result_set`): a marker first, the files,
  then a manifest of every file with its size and SHA-256 written last. A reader calls
  :func:`check_result_set`; a folder whose writer was killed keeps its marker or fails the
  manifest, and is reported as interrupted, never read as complete.

No pandas, numpy or torch here: only the standard library.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "ANALYSIS_FILE",
    "RUN_DIR_FILES",
    "ANALYSIS_FORMAT",
    "ANALYSIS_FORMAT_VERSION",
    "AnalysisRecord",
    "BASE_COLUMNS",
    "DESCRIPTIVE_COLUMNS",
    "DiscardResultSet",
    "INCOMPLETE_MARKER",
    "KEY_COLUMNS",
    "MANIFEST",
    "NON_METRIC_COLUMNS",
    "KEY_ALIASES",
    "UNNAMED_COLUMN",
    "non_metric_reason",
    "ROLES",
    "RUN_FILE",
    "RUN_FORMAT",
    "RUN_FORMATS",
    "FolderLockedError",
    "FolderSchema",
    "IncompleteResultError",
    "StaleResultError",
    "RunRecord",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_inputs",
    "check_result_set",
    "check_role",
    "file_sha256",
    "folder_lock",
    "folder_schema",
    "schema_of",
    "input_fingerprints",
    "metric_columns",
    "published_path",
    "read_analysis_record",
    "read_run_record",
    "recover_result_folder",
    "result_set",
    "result_set_state",
    "run_record",
    "run_record_beside",
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
    """The ``run.json`` dict of a scoring run (the engine writes it with :func:`atomic_write_text`).

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
    roles: dict[str, str] = {}
    flops: dict[str, float] = {}
    walls: dict[str, float] = {}
    ips: dict[str, float] = {}
    for i, rec in enumerate(raw.get("metrics") or []):
        if not isinstance(rec, dict):
            raise ValueError(f"{p}: expected metrics[{i}] to be an object, got {type(rec).__name__}")
        cols = list(rec.get("columns") or [rec.get("name")])
        for c, higher in (rec.get("directions") or {}).items():
            directions[str(c)] = bool(higher)
        f = _finite(rec.get("flops_per_image_measured"))
        f = f if f is not None else _finite(rec.get("flops_per_image_estimate"))
        for c in cols:
            if c is None:
                continue
            if f is not None:
                flops[str(c)] = f
            w, r = _finite(rec.get("wall_time_s")), _finite(rec.get("images_per_s"))
            if w is not None:
                walls[str(c)] = w
            if r is not None:
                ips[str(c)] = r
    for c, higher in (raw.get("derived_columns") or {}).items():
        directions[str(c)] = bool(higher)
    directions.update({str(c): bool(h) for c, h in (raw.get("directions") or {}).items()})
    for c, r in (raw.get("roles") or {}).items():
        roles[str(c)] = check_role(r, f"{p}, roles[{c!r}]")
    for c in directions:
        roles.setdefault(c, "metric")
    ds = raw.get("dataset")
    return RunRecord(path=p, format=fmt, n_items=raw.get("n_items"), wall_time_s=_finite(raw.get("wall_time_s")),
                     directions=directions, roles=roles, flops=flops, metric_wall_time_s=walls, images_per_s=ips,
                     dataset=(ds.get("name") if isinstance(ds, dict) else ds), raw=raw)


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
    dataset), :func:`check_inputs` (``inputs``) and ``ts2 report``'s folder reader (``confidence``,
    ``score_files``) all go through it. Fields a version-1 file lacks read as empty / ``None``.

    ``lower_is_better`` names metrics whose scores fall as images get better; ``roles`` maps a
    metric to one of :data:`ROLES`; ``score_files`` are the absolute paths of the score tables
    read and ``inputs`` their sizes and SHA-256 (:func:`input_fingerprints`); ``protocols``,
    ``subsets``, ``n_segs``, ``excluded_segs`` and ``delta_sigma`` are per protocol;
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
        """The text of ``analysis.json`` (write it with :func:`atomic_write_text`)."""
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
    roles = {str(c): check_role(r, f"{p}, roles[{c!r}]") for c, r in _json_dict(raw, "roles", p).items()}
    conf = raw.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float))):
        raise ValueError(f"{p}: expected 'confidence' to be a number, got {conf!r}")
    ds = raw.get("dataset")
    return AnalysisRecord(
        source=str(raw.get("source") or ""), metrics=tuple(str(m) for m in _json_list(raw, "metrics", p)),
        lower_is_better=frozenset(str(m) for m in _json_list(raw, "lower_is_better", p)), roles=roles,
        dataset=None if ds is None else str(ds), score_files=tuple(str(f) for f in _json_list(raw, "score_files", p)),
        inputs=_json_dict(raw, "inputs", p), meta_metrics=tuple(str(m) for m in _json_list(raw, "meta_metrics", p)),
        protocols=_json_dict(raw, "protocols", p), subsets=_json_dict(raw, "subsets", p),
        subset_source=raw.get("subset_source"), n_segs=_json_dict(raw, "n_segs", p),
        excluded_segs=_json_dict(raw, "excluded_segs", p), delta_sigma=_json_dict(raw, "delta_sigma", p),
        bootstrap=int(raw.get("bootstrap") or 0), seed=raw.get("seed"),
        confidence=None if conf is None else float(conf), ci_method=raw.get("ci_method"),
        bootstrap_scheme=raw.get("bootstrap_scheme"), chance_permutations=int(raw.get("chance_permutations") or 0),
        min_segs_ci=raw.get("min_segs_ci"), notes=tuple(str(n) for n in _json_list(raw, "notes", p)),
        chance_null=raw.get("chance_null"), format=fmt, path=p, raw=raw,
        dataset_path=None if raw.get("dataset_path") is None else str(raw["dataset_path"]))


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


# -- atomic files --------------------------------------------------------------------------------

def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary sibling and ``os.replace``: a reader sees the
    old file or the new one, never half of one; on any error the temporary file is removed
    (a full disk must not also keep the half-written copy that filled it)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


# -- folders written as a set ----------------------------------------------------------------------

MANIFEST = "manifest.json"
INCOMPLETE_MARKER = ".ts2-incomplete"
_MANIFEST_FORMAT = "ts2-result-set/1"
# Not part of a result set: Hydra's own files, logs, and temporary files of writers in flight.
_UNTRACKED_DIRS = {".hydra"}


class IncompleteResultError(ValueError):
    """A result folder whose writer did not finish (killed, crashed, disk full)."""


def _tracked(folder: Path) -> list[Path]:
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or rel.parts[0] in _UNTRACKED_DIRS or p.name in (MANIFEST, INCOMPLETE_MARKER):
            continue
        if p.suffix == ".log" or p.name.endswith(".tmp"):
            continue
        out.append(p)
    return out


def file_sha256(p: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks (manifests, model weight checks)."""
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class DiscardResultSet(Exception):  # noqa: N818 - a signal, not an error
    """Raised in a :func:`result_set` body to end it without writing: the folder keeps what it
    held (a command that fails with its own message). :func:`result_set` swallows it."""


class FolderLockedError(RuntimeError):
    """Another live process is writing the same result folder."""


#: Sibling names of a result folder ``D`` (all in ``D``'s parent, hidden): the lock file, the
#: new set being written, and the old set on its way out.
LOCK_SUFFIX = ".ts2-lock"
_NEW, _OLD = ".ts2-new-", ".ts2-old-"
_HELD: dict[str, list] = {}  # abs folder -> [fd, depth, time taken]: one process may nest its own locks and sets
_ACTIVE: dict[str, Path] = {}  # abs folder -> staging folder of the set this process is writing
# Untracked files a command's own run leaves in its folder while it works (Hydra's, the log).
RUN_DIR_FILES = frozenset({".hydra", "ts2.log"})


def _sibling(folder: Path, tag: str) -> Path:
    return folder.parent / f".{folder.name}{tag}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _lock_info(text: str) -> tuple[str, int | None]:
    try:
        info = json.loads(text)
        return f"{info.get('writer')} (pid {info.get('pid')}, started {info.get('started')})", int(info.get("pid"))
    except (ValueError, TypeError, AttributeError):
        return "another process", None


@contextmanager
def folder_lock(folder: str | Path, writer: str) -> Iterator[Path]:
    """Hold the one-writer lock of result folder ``folder`` (an ``flock`` on the hidden sibling
    ``.NAME.ts2-lock``, which the kernel releases when its holder dies).

    Re-entrant within a process (a command that locks its folder and then writes a result set
    into it). On taking the lock, a stale lock file (its holder died without releasing it) is
    taken over with a logged note, and the siblings a dead writer left are tidied
    (:func:`recover_result_folder`).

    Raises
    ------
    FolderLockedError
        A live process holds the lock: the message names it (writer, pid, start time).
    """
    d = Path(os.path.abspath(Path(folder).expanduser()))
    key = str(d)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield d
        finally:
            _HELD[key][1] -= 1
        return
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one writer per folder is then the user's job
        yield d
        return
    lock = _sibling(d, LOCK_SUFFIX)
    d.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who, _ = _lock_info(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            os.close(fd)
            raise FolderLockedError(f"{d}: expected no other writer, got {who} writing it now; wait for it to "
                                    "finish or choose another output_dir") from None
        try:  # the holder before us may have unlinked the file after we opened it: lock the live one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        previous = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        if previous:  # a holder that released normally empties the file first
            who, pid = _lock_info(previous)
            if pid != os.getpid():
                log.warning("%s: took over the lock of %s, which is no longer running", d, who)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"writer": writer, "pid": os.getpid(),
                                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode("utf-8"), 0)
        _HELD[key] = [fd, 1, time.time()]
        recover_result_folder(d)
    except BaseException:
        _HELD.pop(key, None)
        os.close(fd)
        raise
    try:
        yield d
    finally:
        _HELD[key][1] -= 1
        if _HELD[key][1] == 0:
            del _HELD[key]
            try:
                os.ftruncate(fd, 0)
                lock.unlink(missing_ok=True)  # under the lock: a waiter re-checks the inode above
            except OSError:
                pass
            os.close(fd)


def recover_result_folder(folder: str | Path) -> None:
    """Tidy what a killed writer left beside ``folder`` (call with its lock held).

    A killed writer leaves at most a staging sibling (``.NAME.ts2-new-PID``) and, only with the
    two-rename fallback swap, an old set moved aside (``.NAME.ts2-old-PID``). A staging folder
    is removed, after handing back any file that was carried over into it from the live folder;
    a finished staging folder whose swap never happened while the live folder is gone is put in
    place; an old set is removed if the folder exists, else put back.
    """
    d = Path(os.path.abspath(folder))
    if not d.parent.is_dir():
        return
    for side in sorted(d.parent.glob(f".{glob.escape(d.name)}{_OLD}*")):
        if _ACTIVE.get(str(d)) == side:
            continue
        if d.exists():
            _rmtree(side)
        else:
            os.rename(side, d)
            log.warning("%s: restored the earlier result set (a writer died while swapping in its new one)", d)
    for side in sorted(d.parent.glob(f".{glob.escape(d.name)}{_NEW}*")):
        if _ACTIVE.get(str(d)) == side:
            continue
        finished = (side / MANIFEST).is_file() and not (side / INCOMPLETE_MARKER).exists()
        if not d.exists() and finished:
            os.rename(side, d)
            log.warning("%s: put in place the finished result set of a writer that died while swapping it in", d)
            continue
        if d.is_dir():
            _carry(side, d, _foreign(side))
        _rmtree(side)


def _rmtree(p: Path) -> None:
    shutil.rmtree(p, ignore_errors=True)


def _listed(folder: Path) -> set[str]:
    """Files of ``folder``'s own result set: its manifest's list (a folder without one, or with an
    unreadable one, but marked as being written by ts2: every tracked file)."""
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        return {str(k) for k in files}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if (folder / INCOMPLETE_MARKER).exists():
        return {str(p.relative_to(folder)) for p in _tracked(folder)}
    return set()


def _foreign(folder: Path, since: float | None = None, replaced: Iterable[str] = ()) -> list[str]:
    """Top-level entries of ``folder`` that are not its ts2 result set: a user's own files, and this
    run's Hydra files and log (those modified at ``since`` or later; older ones are an earlier
    run's and go with it). Entries named in ``replaced`` (the new set's) never carry over."""
    listed = _listed(folder)
    top_listed = {Path(r).parts[0] for r in listed}
    out = []
    skip = {MANIFEST, INCOMPLETE_MARKER, *replaced}
    for p in sorted(folder.iterdir()):
        name = p.name
        if name in skip or name in top_listed:
            continue
        if name in RUN_DIR_FILES or p.suffix == ".log":
            if since is not None and _newest_mtime(p) < since - 1:
                continue
        elif p.name.endswith(".tmp"):
            continue
        out.append(name)
    return out


def _newest_mtime(p: Path) -> float:
    if not p.is_dir():
        return p.stat().st_mtime
    return max([p.stat().st_mtime] + [q.stat().st_mtime for q in p.rglob("*")])


def _carry(src: Path, dst: Path, names: Iterable[str]) -> list[str]:
    moved = []
    for name in names:
        target = dst / name
        if target.exists():
            continue
        os.rename(src / name, target)
        moved.append(name)
    return moved


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two folders (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot exchange
        return False
    raise OSError(err, f"could not swap {b} into place: {os.strerror(err)}", str(b))


def _swap_in(stage: Path, final: Path, since: float) -> None:
    """Put the finished set ``stage`` at ``final``: carry over what is not the old set (a user's
    files, this run's Hydra files), then swap the two folders in one step, then drop the old set."""
    if not final.exists():
        os.rename(stage, final)
        return
    if not final.is_dir():
        raise NotADirectoryError(20, f"expected a folder for the result set, got a file at {final}", str(final))
    new_names = {p.name for p in stage.iterdir()}
    moved = _carry(final, stage, _foreign(final, since, new_names))
    try:
        if _exchange(stage, final):
            _rmtree(stage)  # now the old set
            return
        old = _sibling(final, f"{_OLD}{os.getpid()}")
        os.rename(final, old)  # the fallback: for a moment there is no folder, never a mixed one
        os.rename(stage, final)
        _rmtree(old)
    except BaseException:
        if final.is_dir() and stage.is_dir():
            _carry(stage, final, moved)
        raise


def check_swappable(folder: str | Path) -> Path:
    """``folder`` (absolute) when a result set may replace it: not the current folder nor one above
    it, however written (``sub/../..``, a symbolic link to ``.``).

    Raises
    ------
    ValueError
        Naming the folder as given and what it resolves to.
    """
    final = Path(os.path.abspath(Path(folder).expanduser()))
    cwd = Path.cwd().resolve()
    real = final.resolve()
    if cwd == real or real in cwd.parents:
        shown = f"{folder}" + (f" (-> {real})" if str(real) != str(folder) else "")
        raise ValueError(f"expected an output folder other than the current folder or one above it, got {shown}: "
                         "a result set replaces its folder whole; choose a new folder")
    return final


@contextmanager
def result_set(folder: str | Path, writer: str) -> Iterator[Path]:
    """Write a result folder's files as one set, swapped in whole or not at all.

    Yields a hidden staging folder beside ``folder`` (``.NAME.ts2-new-PID``): the body writes
    every file there. On a normal exit the manifest (each file with size and SHA-256) is
    written, the files in ``folder`` that are not its old set (a user's own files, this run's
    Hydra ``.hydra/`` and log) are moved over, and the staging folder takes ``folder``'s place
    in one atomic exchange (Linux ``renameat2``; elsewhere two renames, with a moment of no
    folder but never a mixed one); the old set is then deleted. So at every instant ``folder``
    holds the old complete set or the new one, and nothing of the old set reaches the new one
    or its manifest. An exception (a full disk, Ctrl-C) or a kill leaves ``folder`` as it was;
    the staging folder is removed (by the next writer if killed). A body that raises
    :class:`DiscardResultSet` ends the same way, without an exception.

    The folder's lock (:func:`folder_lock`) is held throughout. Nested calls for the same folder
    in one process (``ts2 run``: scores, then the report) write into the outer call's staging
    folder, and the set is swapped in once, when the outer call ends; files recorded by path
    while writing should be given as :func:`published_path` (the folder's own path).

    Raises
    ------
    FolderLockedError
        Another live process writes ``folder``.
    ValueError
        ``folder`` is the current working folder or one above it (it cannot be swapped).
    """
    final = Path(os.path.abspath(Path(folder).expanduser()))
    key = str(final)
    if key in _ACTIVE:
        try:
            yield _ACTIVE[key]
        except DiscardResultSet:
            pass  # the outer writer decides (ts2 run discards when its scoring failed)
        return
    check_swappable(final)
    with folder_lock(final, writer):
        since = _HELD[key][2] if key in _HELD else time.time()  # Hydra's files date from the lock on
        stage = _sibling(final, f"{_NEW}{os.getpid()}")
        _rmtree(stage)
        stage.mkdir(parents=True)
        # A plain write: the staging folder is private until the swap, and a half-written marker
        # marks as well as a whole one.
        (stage / INCOMPLETE_MARKER).write_text(json.dumps(
            {"writer": writer, "pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}), encoding="utf-8")
        _ACTIVE[key] = stage
        try:
            try:
                yield stage
            except DiscardResultSet:
                return
            files = {str(p.relative_to(stage)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
                     for p in _tracked(stage)}
            atomic_write_text(stage / MANIFEST, json.dumps({"format": _MANIFEST_FORMAT, "writer": writer,
                                                            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                            "files": files}, indent=1))
            (stage / INCOMPLETE_MARKER).unlink()
            _swap_in(stage, final, since)
        finally:
            del _ACTIVE[key]
            _rmtree(stage)


def published_path(path: str | Path) -> Path:
    """Where ``path``, written into the staging folder of a result set this process is writing,
    will be once the set is swapped in (any other path is returned as it is, made absolute)."""
    p = Path(os.path.abspath(Path(path).expanduser()))
    for final, stage in _ACTIVE.items():
        if p == stage or stage in p.parents:
            return Path(final) / p.relative_to(stage)
    return p


def result_set_state(folder: str | Path) -> tuple[str, str]:
    """``("complete" | "interrupted" | "unmanaged", why)`` for a result folder.

    ``unmanaged``: neither marker nor manifest (a folder written before result sets, or by
    hand); ``interrupted``: the marker is there, or a file of the manifest is missing or differs
    in size or SHA-256, or the manifest itself is unreadable.
    """
    d = Path(folder)
    if any(os.path.abspath(d) == str(stage) for stage in _ACTIVE.values()):
        return "unmanaged", f"{d}: the result set this process is writing"
    if (d / INCOMPLETE_MARKER).exists():
        try:
            info = json.loads((d / INCOMPLETE_MARKER).read_text(encoding="utf-8"))
            who = f" by {info.get('writer')} (pid {info.get('pid')}, started {info.get('started')})"
        except (OSError, ValueError, AttributeError):
            who = ""
        return "interrupted", f"{d}: its writing{who} never finished ({INCOMPLETE_MARKER} is still there)"
    m = d / MANIFEST
    if not m.exists():
        return "unmanaged", f"{d}: no {MANIFEST}"
    try:
        man = json.loads(m.read_text(encoding="utf-8"))
        files = man["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return "interrupted", f"{m}: unreadable manifest ({e})"
    for rel, info in files.items():
        p = d / rel
        if not p.is_file():
            return "interrupted", f"{d}: {rel} is listed in {MANIFEST} but missing"
        if p.stat().st_size != info.get("bytes") or file_sha256(p) != info.get("sha256"):
            return "interrupted", f"{d}: {rel} differs from {MANIFEST} (changed or cut short after the set was written)"
    return "complete", f"{d}: {len(files)} file(s) as listed in {MANIFEST}"


class StaleResultError(ValueError):
    """A result folder whose numbers came from an input file that has changed since."""


def input_fingerprints(paths: Iterable[str | Path]) -> dict[str, dict[str, Any]]:
    """``{absolute path: {"bytes", "sha256"}}`` of the input files a result was computed from
    (recorded in ``analysis.json`` as ``inputs``; :func:`check_inputs` compares them on read)."""
    out = {}
    for f in paths:
        p = Path(f).resolve()
        if p.is_file():
            out[str(p)] = {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
    return out


def check_inputs(folder: str | Path, record: AnalysisRecord | None = None) -> None:
    """Refuse a result folder whose recorded inputs (``analysis.json`` ``inputs``) have changed.

    ``record``: the folder's ``analysis.json`` when the caller has read it already.

    An input that no longer exists is not checked (the folder's own files still stand; readers
    that need the per-image scores say they are gone). A folder without the record (written
    before ts2 recorded inputs) passes.

    Raises
    ------
    StaleResultError
        An input file's size or SHA-256 differs from the record: the message names the file and
        the folder, and says to re-run the analysis.
    ValueError
        An unreadable ``analysis.json`` (:func:`read_analysis_record`).
    """
    d = Path(folder)
    if record is None:
        if not (d / ANALYSIS_FILE).is_file():
            return
        record = read_analysis_record(d / ANALYSIS_FILE)
    for name, info in record.inputs.items():
        p = Path(name)
        if not p.is_file() or not isinstance(info, dict):
            continue
        if p.stat().st_size != info.get("bytes") or file_sha256(p) != info.get("sha256"):
            raise StaleResultError(
                f"{d}: expected {p} as it was when analysed (sha256 {str(info.get('sha256'))[:12]}...), got a "
                f"changed file; its numbers are stale: run ts2 analyze on it again into {d}")


def check_result_set(folder: str | Path) -> str:
    """:func:`result_set_state`, raising for an interrupted folder.

    Raises
    ------
    IncompleteResultError
        The folder was not finished; the message names it and says to re-run its command.
    """
    state, why = result_set_state(folder)
    if state == "interrupted":
        raise IncompleteResultError(f"expected a complete result folder, got an interrupted one: {why}; "
                                    "run the command that writes it again")
    return state
