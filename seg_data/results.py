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
  (:func:`run_record_beside`), and the ``analysis.json`` of ``ts2 analyze`` (:func:`folder_schema`);
* how a file is written (:func:`atomic_write_text`: a temporary name, then ``os.replace``) and
  how a folder of files is written as a set (:func:`result_set`): a marker first, the files,
  then a manifest of every file with its size and SHA-256 written last. A reader calls
  :func:`check_result_set`; a folder whose writer was killed keeps its marker or fails the
  manifest, and is reported as interrupted, never read as complete.

No pandas, numpy or torch here: only the standard library.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ANALYSIS_FILE",
    "BASE_COLUMNS",
    "DESCRIPTIVE_COLUMNS",
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
    "FolderSchema",
    "IncompleteResultError",
    "RunRecord",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_result_set",
    "check_role",
    "file_sha256",
    "folder_schema",
    "metric_columns",
    "read_run_record",
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


def read_run_record(path: str | Path) -> RunRecord:
    """Read and check a ``run.json``.

    Raises
    ------
    ValueError
        Not JSON, not an object, an unknown ``format``, a role not in :data:`ROLES`, or a
        ``metrics`` entry that is not an object (naming the file).
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: expected a ts2 run record (JSON), could not parse it: {e}") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: expected a JSON object, got {type(raw).__name__}")
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
    """Directions and roles from a folder's ``run.json`` and ``analysis.json`` (the latter wins:
    it is what was analysed, e.g. reference metrics added beside a run's scores).

    Raises
    ------
    ValueError
        Either file unreadable, or a role not in :data:`ROLES`.
    """
    d = Path(folder)
    directions: dict[str, bool] = {}
    roles: dict[str, str] = {}
    dataset = None
    if (d / RUN_FILE).is_file():
        rec = read_run_record(d / RUN_FILE)
        directions.update(rec.directions)
        roles.update(rec.roles)
        dataset = rec.dataset
    a = d / ANALYSIS_FILE
    if a.is_file():
        try:
            meta = json.loads(a.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{a}: expected JSON, could not parse it: {e}") from e
        for m in meta.get("metrics") or []:
            directions.setdefault(str(m), True)
        for m in meta.get("lower_is_better") or []:
            directions[str(m)] = False
        for c, r in (meta.get("roles") or {}).items():
            roles[str(c)] = check_role(r, f"{a}, roles[{c!r}]")
        dataset = meta.get("dataset") or dataset
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


@contextmanager
def result_set(folder: str | Path, writer: str) -> Iterator[Path]:
    """Write a folder's files as one set.

    On entry the folder is created, its manifest removed and the marker
    :data:`INCOMPLETE_MARKER` written; the body writes the files; on a normal exit the manifest
    (every file of the folder but Hydra's ``.hydra/`` and logs, with size and SHA-256) is
    written atomically and the marker removed, in that order. A writer killed at any point
    leaves the marker, or files that disagree with the manifest: :func:`check_result_set`
    reports the folder as interrupted. An exception in the body leaves the marker too.
    """
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    marker = d / INCOMPLETE_MARKER
    atomic_write_text(marker, json.dumps({"writer": writer, "pid": os.getpid(),
                                          "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    (d / MANIFEST).unlink(missing_ok=True)
    yield d
    files = {str(p.relative_to(d)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)} for p in _tracked(d)}
    atomic_write_text(d / MANIFEST, json.dumps({"format": _MANIFEST_FORMAT, "writer": writer,
                                                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                "files": files}, indent=1))
    marker.unlink(missing_ok=True)


def result_set_state(folder: str | Path) -> tuple[str, str]:
    """``("complete" | "interrupted" | "unmanaged", why)`` for a result folder.

    ``unmanaged``: neither marker nor manifest (a folder written before result sets, or by
    hand); ``interrupted``: the marker is there, or a file of the manifest is missing or differs
    in size or SHA-256, or the manifest itself is unreadable.
    """
    d = Path(folder)
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
