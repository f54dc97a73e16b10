"""Opening the project's SQLite files (score cache, QA cache) the same way.

WAL journal + ``synchronous=NORMAL``: a killed process never loses a committed transaction (only
an OS crash may drop the last ones, never corrupting the file); a busy timeout lets several
processes (shards of one run) share a file without "database is locked" errors.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["open_store", "StoreUnavailableError"]


class StoreUnavailableError(RuntimeError):
    """The store's folder or file cannot be created or written (read-only, full disk, permissions).

    Callers may go on without the store (the score command does, with a warning).
    """


def open_store(path: str | Path | None, schema: str, version: str, what: str, timeout: float = 60.0,
               check_same_thread: bool = True) -> tuple[sqlite3.Connection, str]:
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
    RuntimeError
        The file is not a SQLite database, or was written with another schema version; the
        message names the file and ``what`` it should have been.
    """
    in_memory = path is None or str(path) == ":memory:"
    spath = ":memory:" if in_memory else str(Path(path).expanduser())
    if not in_memory:
        try:
            Path(spath).parent.mkdir(parents=True, exist_ok=True)
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
    except sqlite3.DatabaseError as e:
        raise RuntimeError(f"{spath}: expected a {what} (SQLite), could not open it: {e}; "
                           "remove the file or use cache_dir=... to start a new one") from e
    if ver != version:
        db.close()
        raise RuntimeError(f"{spath}: expected {what} schema {version}, got {ver}; "
                           "run `ts2 cache clear` or point cache_dir elsewhere")
    return db, spath
