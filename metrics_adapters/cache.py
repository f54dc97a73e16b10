"""The score cache: one SQLite file shared by runs and processes.

A score is keyed by ``(key, image_key, prompt)``:

- ``key``: hash of the metric's fingerprint (class + every setting that changes a score), the
  engine's numeric precision and, for metrics that read pixels, the image decode policy
  (see :func:`metrics_adapters.engine.cache_key`);
- ``image_key``: ``"sha256:<hex>"`` of the image file's bytes for metrics that read pixels, or
  ``"name:<file_name>"`` for metrics with ``needs_images = False`` (their scores cannot depend
  on pixels, and their image files may be absent, e.g. TIFA answer replay);
- ``prompt``: the raw prompt (templates are settings, so they are in ``key``).

The file uses WAL journaling and a busy timeout so that two processes (two ``ts2 score`` runs,
or a run and ``ts2 cache info``) can share it; every batch is committed as it finishes, so a
killed run loses at most the batch in flight. WAL needs a local file system (not NFS).

File hashes are cached too, by ``(absolute path, size, mtime_ns)``, so a resumed run does not
re-read every image to find what is done (a fully cached re-run of 4,096 images costs a ``stat``
and an indexed look-up per image).

One connection serves the engine's main thread and its background writer thread, behind a lock.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .images import file_sha256

log = logging.getLogger(__name__)

__all__ = ["ScoreCache", "CacheInfo", "FingerprintInfo", "default_cache_dir", "open_cache", "CACHE_FILE"]

CACHE_FILE = "scores.sqlite"
SCHEMA_VERSION = "1"


def default_cache_dir() -> Path:
    """``$TS2_CACHE_DIR``, else ``$XDG_CACHE_HOME/ts2``, else ``~/.cache/ts2`` (:func:`seg_data.paths.cache_root`)."""
    from seg_data.paths import cache_root

    return cache_root()


@dataclass(frozen=True)
class FingerprintInfo:
    key: str
    name: str
    fingerprint: dict
    n_scores: int
    flops_per_image: float | None
    last_used: float


@dataclass(frozen=True)
class CacheInfo:
    path: str
    size_bytes: int
    n_scores: int
    n_file_hashes: int
    metrics: tuple[FingerprintInfo, ...]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS fingerprints (
    key TEXT PRIMARY KEY, name TEXT, fingerprint TEXT, flops_per_image REAL, created REAL, last_used REAL);
CREATE TABLE IF NOT EXISTS scores (
    key TEXT NOT NULL, image_key TEXT NOT NULL, prompt TEXT NOT NULL,
    scores TEXT NOT NULL, truncated INTEGER NOT NULL DEFAULT 0, created REAL,
    PRIMARY KEY (key, image_key, prompt)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha256 TEXT) WITHOUT ROWID;
"""


def _locked(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kw):
        with self._lock:
            return fn(self, *args, **kw)
    return wrapper


class ScoreCache:
    """SQLite score store.

    Parameters
    ----------
    path : str or Path or None
        The SQLite file (created with its folder); ``None`` or ``":memory:"`` keeps everything in
        memory (``cache=false`` runs use this, so they take the same code path).
    timeout : float
        Seconds to wait for another process's write lock before failing.
    """

    def __init__(self, path: str | Path | None, timeout: float = 60.0) -> None:
        from .sqlite_store import SET_ASIDE_HINT, open_store

        self.in_memory = path is None or str(path) == ":memory:"
        self._db, self.path = open_store(path, _SCHEMA, SCHEMA_VERSION, "ts2 score cache", timeout=timeout,
                                         check_same_thread=False, fix=SET_ASIDE_HINT)
        self._migrate()
        self._lock = threading.RLock()
        self._read_only = False
        self._registered: dict[str, tuple[str, str]] = {}  # key -> (name, fingerprint JSON) of this process

    def _migrate(self) -> None:
        """Bring a cache of an older layout of schema 1 up to date: caches written before prompt
        truncation was recorded have no ``truncated`` column (``no such column: truncated``)."""
        from .sqlite_store import SET_ASIDE_HINT, StoreUnreadableError

        try:
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(scores)")}
            if "truncated" not in cols:
                with self._db:
                    self._db.execute("ALTER TABLE scores ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0")
                log.info("score cache %s: added the column 'truncated' of the current layout", self.path)
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise StoreUnreadableError(self.path, f"{self.path}: expected a ts2 score cache, could not update its "
                                       f"layout: {e}; {SET_ASIDE_HINT}") from e

    @classmethod
    def at(cls, cache_dir: str | Path | None = None, **kw) -> ScoreCache:
        """The cache file inside ``cache_dir`` (default :func:`default_cache_dir`).

        Raises
        ------
        StoreUnavailableError
            ``cache_dir`` is a file (the message of :func:`seg_data.paths.check_cache_folder`).
        """
        from seg_data.paths import check_cache_folder

        from .sqlite_store import StoreUnavailableError

        d = default_cache_dir() if cache_dir in (None, "") else Path(cache_dir).expanduser()
        try:
            check_cache_folder(d)
        except NotADirectoryError as e:
            raise StoreUnavailableError(e.strerror) from e
        return cls(d / CACHE_FILE, **kw)

    # -- fingerprints ------------------------------------------------------------------------------
    def _writable(self, e: sqlite3.Error | None = None) -> bool:
        """False once a write failed (read-only or full cache): the run goes on uncached, warned once."""
        if e is not None and not self._read_only:
            self._read_only = True
            log.warning("cannot write to the score cache %s (%s: %s); going on without caching: scores still reach "
                        "scores.csv, but a re-run computes them again", self.path, type(e).__name__, e)
        return not self._read_only

    @_locked
    def register(self, key: str, name: str, fingerprint: dict) -> None:
        if not self._writable():
            return
        now = time.time()
        try:
            self._register(key, name, fingerprint, now)
        except sqlite3.Error as e:
            self._writable(e)

    def _register(self, key: str, name: str, fingerprint: dict, now: float) -> None:
        self._registered[key] = (name, json.dumps(fingerprint, sort_keys=True, default=str))
        with self._db:
            self._db.execute(
                "INSERT INTO fingerprints (key, name, fingerprint, created, last_used) VALUES (?,?,?,?,?) "
                "ON CONFLICT(key) DO UPDATE SET name=excluded.name, last_used=excluded.last_used",
                (key, name, json.dumps(fingerprint, sort_keys=True, default=str), now, now))

    @_locked
    def set_flops(self, key: str, flops_per_image: float | None) -> None:
        if flops_per_image is None or not self._writable():
            return
        try:
            with self._db:
                self._db.execute("UPDATE fingerprints SET flops_per_image=? WHERE key=?", (float(flops_per_image), key))
        except sqlite3.Error as e:
            self._writable(e)

    @_locked
    def get_flops(self, key: str) -> float | None:
        row = self._db.execute("SELECT flops_per_image FROM fingerprints WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    # -- scores ------------------------------------------------------------------------------------
    @_locked
    def get_many(self, key: str, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], tuple[tuple[float, ...], bool]]:
        """Cached ``(scores, truncated)`` for each ``(image_key, prompt)`` found.

        A stored row that is not all finite numbers (the engine never stores one: a non-finite score
        is a failure) is not served: it is scored again, and a warning says how many were skipped.
        """
        out = {}
        bad = 0
        cur = self._db.cursor()
        for image_key, prompt in pairs:
            row = cur.execute("SELECT scores, truncated FROM scores WHERE key=? AND image_key=? AND prompt=?",
                              (key, image_key, prompt)).fetchone()
            if row is not None:
                try:
                    scores = tuple(float(x) for x in json.loads(row[0]))
                except (TypeError, ValueError):
                    scores = (math.nan,)
                if not all(math.isfinite(v) for v in scores):
                    bad += 1
                    continue
                out[(image_key, prompt)] = (scores, bool(row[1]))
        if bad:
            log.warning("score cache %s: %d cached row(s) of key %s hold a score that is not a finite number; "
                        "not used, scored again", self.path, bad, key[:12])
        return out

    @_locked
    def put_many(self, key: str, rows: Sequence[tuple[str, str, Sequence[float], bool]]) -> None:
        """Store ``(image_key, prompt, scores, truncated)`` rows in one transaction."""
        if not rows or not self._writable():
            return
        now = time.time()
        try:
            with self._db:
                if key in self._registered:
                    # A `ts2 cache clear` from another process may have removed the fingerprint
                    # since register(): put it back, so these scores stay reachable by name.
                    name, fp = self._registered[key]
                    self._db.execute("INSERT OR IGNORE INTO fingerprints (key, name, fingerprint, created, last_used) "
                                     "VALUES (?,?,?,?,?)", (key, name, fp, now, now))
                self._db.executemany(
                    "INSERT OR REPLACE INTO scores (key, image_key, prompt, scores, truncated, created) "
                    "VALUES (?,?,?,?,?,?)",
                    [(key, ik, p, json.dumps([float(v) for v in vals]), int(bool(tr)), now) for ik, p, vals, tr in rows])
        except sqlite3.Error as e:
            self._writable(e)

    @_locked
    def count(self, key: str | None = None) -> int:
        if key is None:
            return self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM scores WHERE key=?", (key,)).fetchone()[0]

    # -- file hashes -------------------------------------------------------------------------------
    def file_hash(self, path: str | Path, rehash: bool = False) -> str:
        """SHA-256 of a regular file, remembered by (absolute path, size, mtime_ns).

        A file rewritten in place with the same size and modification time keeps its remembered
        hash (and so its cached scores); ``rehash=True`` reads every file again (content mode).

        Only a regular file's ``stat`` can match a remembered row; anything else (a FIFO, a
        device, a symlink loop) goes to :func:`~metrics_adapters.images.file_sha256`, which
        refuses it without reading.

        Raises
        ------
        ImageMissingError
            No file at ``path`` (a ``FileNotFoundError``).
        ImageDecodeError
            Not a regular file, too big or unreadable (a ``ValueError``; the message names it).
        """
        p = os.path.abspath(os.fspath(path))
        try:
            st = os.stat(p)
        except OSError:
            st = None  # file_sha256 raises the right error below
        if st is not None and stat.S_ISREG(st.st_mode) and not rehash:
            with self._lock:
                row = self._db.execute("SELECT size, mtime_ns, sha256 FROM file_hashes WHERE path=?", (p,)).fetchone()
            if row is not None and row[0] == st.st_size and row[1] == st.st_mtime_ns:
                return row[2]
        digest, st = file_sha256(p)
        with self._lock:
            if self._writable():
                try:
                    with self._db:
                        self._db.execute("INSERT OR REPLACE INTO file_hashes VALUES (?,?,?,?)",
                                         (p, st.st_size, st.st_mtime_ns, digest))
                except sqlite3.Error as e:  # read-only or full: the hash is still right, just not kept
                    self._writable(e)
        return digest

    # -- management --------------------------------------------------------------------------------
    @_locked
    def info(self) -> CacheInfo:
        rows = self._db.execute(
            "SELECT f.key, f.name, f.fingerprint, f.flops_per_image, f.last_used, "
            "(SELECT COUNT(*) FROM scores s WHERE s.key = f.key) FROM fingerprints f ORDER BY f.last_used DESC").fetchall()
        metrics = tuple(FingerprintInfo(key=k, name=n, fingerprint=json.loads(fp), n_scores=c, flops_per_image=fl,
                                        last_used=lu) for k, n, fp, fl, lu, c in rows)
        size = 0
        if not self.in_memory:
            size = sum(os.path.getsize(self.path + s) for s in ("", "-wal", "-shm") if os.path.exists(self.path + s))
        return CacheInfo(path=self.path, size_bytes=size, n_scores=self.count(),
                         n_file_hashes=self._db.execute("SELECT COUNT(*) FROM file_hashes").fetchone()[0],
                         metrics=metrics)

    @_locked
    def clear(self, name: str | None = None, key: str | None = None) -> int:
        """Delete scores: all of them, or those of metric column ``name``, or of a key (prefix).

        Returns the number of scores deleted.
        """
        with self._db:
            if name is None and key is None:
                n = self.count()
                self._db.execute("DELETE FROM scores")
                self._db.execute("DELETE FROM fingerprints")
                self._db.execute("DELETE FROM file_hashes")
            else:
                where, args = [], []
                if name is not None:
                    where.append("name = ?")
                    args.append(name)
                if key is not None:
                    where.append("key LIKE ?")
                    args.append(key.replace("%", "") + "%")
                keys = [r[0] for r in self._db.execute(f"SELECT key FROM fingerprints WHERE {' AND '.join(where)}", args)]
                n = 0
                for k in keys:
                    n += self._db.execute("DELETE FROM scores WHERE key=?", (k,)).rowcount
                    self._db.execute("DELETE FROM fingerprints WHERE key=?", (k,))
                # Scores without a fingerprint (written by caches older than the re-registration in
                # put_many, during a clear) cannot be named: any targeted clear removes them too.
                n += self._db.execute("DELETE FROM scores WHERE key NOT IN (SELECT key FROM fingerprints)").rowcount
        if not self.in_memory:
            self._db.execute("VACUUM")
        return n

    @_locked
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ScoreCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_cache(enabled: bool = True, cache_dir: str | Path | None = None) -> ScoreCache:
    """The score cache in ``cache_dir`` (None: :func:`default_cache_dir`), or an in-memory one:
    when ``enabled`` is false, or, with a warning, when the folder is read-only or full.

    Raises
    ------
    metrics_adapters.sqlite_store.StoreUnreadableError
        The cache file is not SQLite, is damaged, or has another schema: the run stops (fails
        closed) with the file named and the fix (``ts2 cache clear`` sets it aside).
    """
    from .sqlite_store import StoreUnavailableError

    if not enabled:
        return ScoreCache(None)
    try:
        return ScoreCache.at(cache_dir)
    except StoreUnavailableError as e:
        log.warning("%s; running without the score cache: nothing is reused or kept for a re-run", e)
        return ScoreCache(None)
