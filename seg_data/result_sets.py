"""Result folders written as sets: atomic files, the folder swap, the one-writer lock, manifests.

The file system machinery of ts2's result folders, apart from their schema
(:mod:`seg_data.results`: columns, roles, the ``run.json`` and ``analysis.json`` records), so the
schema stays a data module and the process-global state (the locks held and the sets being
written by this process) lives in one module. It is in ``seg_data`` because ``ts2``,
``analysis`` and ``metrics_adapters`` all write result folders through it.

* how a file is written (:func:`atomic_write_text`: a temporary name, then ``os.replace``);
* how a folder of files is written as a set (:func:`result_set`): a marker first, the files,
  then a manifest of every file with its size and SHA-256 written last, the finished staging
  folder swapped in whole (Linux ``renameat2``); one writer per folder (:func:`folder_lock`),
  and a folder that may be replaced at all (:func:`check_swappable`);
* what a reader verifies: :func:`check_result_set` (a folder whose writer was killed keeps its
  marker or fails the manifest, and is reported as interrupted, never read as complete) and
  :func:`check_inputs` (the score tables an ``analysis.json`` records, by
  :func:`input_fingerprints`, have not changed since).

No pandas, numpy or torch here: only the standard library.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .results import ANALYSIS_FILE, AnalysisRecord, read_analysis_record

log = logging.getLogger(__name__)

__all__ = [
    "INCOMPLETE_MARKER",
    "LOCK_SUFFIX",
    "MANIFEST",
    "RUN_DIR_FILES",
    "DiscardResultSet",
    "FolderLockedError",
    "IncompleteResultError",
    "StaleResultError",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_inputs",
    "check_result_set",
    "check_swappable",
    "file_sha256",
    "folder_lock",
    "input_fingerprints",
    "published_path",
    "recover_result_folder",
    "result_set",
    "result_set_state",
]

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
