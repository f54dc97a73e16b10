"""Opening the project's SQLite files (score cache, QA cache) the same way.

WAL journal + ``synchronous=NORMAL``: a killed process never loses a committed transaction (only
an OS crash may drop the last ones, never corrupting the file); a busy timeout lets several
processes (shards of one run) share a file without "database is locked" errors.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["open_store", "StoreUnavailableError", "StoreUnreadableError", "set_aside", "SET_ASIDE_HINT"]


class StoreUnavailableError(RuntimeError):
    """The store's folder or file cannot be created or written (read-only, full disk, permissions).

    Callers may go on without the store (the score command does, with a warning).
    """


def open_store(path: str | Path | None, schema: str, version: str, what: str, timeout: float = 60.0,
               check_same_thread: bool = True,
               fix: str = "rename or remove the file, or use cache_dir=... elsewhere") -> tuple[sqlite3.Connection, str]:
    """Open (creating if needed) the SQLite file at ``path`` (``None``/``":memory:"``: in memory).

    ``schema`` is a script of ``CREATE TABLE IF NOT EXISTS`` statements that includes a table
    ``meta(k TEXT PRIMARY KEY, v TEXT)``; the ``schema`` row is set to ``version`` on creation.

    Returns
    -------
    (connection, path)
        ``path`` as a string (``":memory:"`` for an in-memory store).

    Raises
    ------
    StoreUnavailableError
        The folder or file cannot be created or written (read-only, full, permissions).
    StoreUnreadableError
        The file is not a SQLite database, is damaged, or was written with another schema
        version; the message names the file, ``what`` it should have been and ``fix``.
    """
    in_memory = path is None or str(path) == ":memory:"
    spath = ":memory:" if in_memory else str(Path(path).expanduser())
    if not in_memory:
        try:
            Path(spath).parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError as e:  # mkdir(exist_ok=True) says only "File exists" when it is a file
            raise StoreUnavailableError(f"{spath}: expected a folder for the {what} at {Path(spath).parent}, "
                                        "got a file") from e
        except OSError as e:
            raise StoreUnavailableError(f"{spath}: cannot create the folder of the {what}: {e.strerror or e}") from e
    try:
        db = sqlite3.connect(spath, timeout=timeout, check_same_thread=check_same_thread)
        if not in_memory:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        with db:
            db.executescript(schema)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (version,))
        (ver,) = db.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
    except sqlite3.OperationalError as e:
        if "locked" in str(e):
            raise RuntimeError(f"{spath}: the {what} stayed locked by another process for {timeout:.0f} s: {e}") from e
        raise StoreUnavailableError(f"{spath}: cannot open the {what} for writing ({e}); check that the folder "
                                    "is writable and has free space, or use cache_dir=... (or cache=false)") from e
    except sqlite3.DatabaseError as e:  # not SQLite, or a damaged file ("database disk image is malformed")
        raise StoreUnreadableError(spath, f"{spath}: expected a {what} (SQLite), could not read it: {e}; "
                                   f"{fix}") from e
    if ver != version:
        db.close()
        raise StoreUnreadableError(spath, f"{spath}: expected {what} schema {version}, got {ver} (written by "
                                   f"{'a newer' if str(ver) > str(version) else 'another'} ts2); {fix}")
    return db, spath


SET_ASIDE_HINT = "`ts2 cache clear` sets it aside and starts a new one (or use cache_dir=... elsewhere)"


class StoreUnreadableError(RuntimeError):
    """A store file that is not SQLite, is damaged, or has another schema version; ``.path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def set_aside(path: str | Path) -> Path:
    """Rename an unreadable store file (and its ``-wal``/``-shm`` companions) to
    ``<name>.unreadable-<UTC time>`` beside it, so a new store can be made; nothing is deleted.

    Returns the new path of the main file.
    """
    import time

    p = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = p.with_name(f"{p.name}.unreadable-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(p) + suffix)
        if src.exists():
            src.rename(Path(str(target) + suffix))
    return target
