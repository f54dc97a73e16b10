"""The QA cache: VQA answers and generated question sets, in one SQLite file.

``qa.sqlite`` sits beside the score cache (``$TS2_CACHE_DIR`` or ``~/.cache/ts2``; the metric's
``cache_dir`` overrides it). Two tables:

``answers``
    keyed by :func:`answer_key` = hash of (VQA backend fingerprint, image key, question text and,
    for backends whose prompt shows the choices, the choices). TIFA and DSG share it: the same
    backend asked the same question about the same pixels reuses the answer.
``questions``
    keyed by :func:`question_key` = hash of (question style, template, generator fingerprint,
    prompt). A failed generation is stored too (with its error), so a deterministic generator is
    not asked again; ``retry_failed`` in the generator re-asks.

Rows are committed as soon as they are produced (WAL journal, busy timeout), so a killed run
loses nothing that finished and two processes can share the file.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..identity import fingerprint_hash

__all__ = ["QACache", "answer_key", "question_key", "fingerprint_hash", "image_key", "QA_CACHE_FILE"]

QA_CACHE_FILE = "qa.sqlite"
_SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, image_key TEXT NOT NULL, question TEXT NOT NULL,
    answer TEXT NOT NULL, created REAL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS questions (
    key TEXT PRIMARY KEY, generator TEXT NOT NULL, prompt TEXT NOT NULL, status TEXT NOT NULL,
    payload TEXT NOT NULL, created REAL) WITHOUT ROWID;
"""


def image_key(image: Any) -> str:
    """Content key of a decoded image: SHA-256 of its mode, size and pixel bytes.

    Pixels, not file bytes: the answer depends on what the model saw, which includes the engine's
    decode policy (EXIF rotation, alpha, downscaling).
    """
    h = hashlib.sha256()
    h.update(f"{image.mode}|{image.size[0]}x{image.size[1]}|".encode())
    h.update(image.tobytes())
    return "pix:" + h.hexdigest()


def answer_key(backend_hash: str, image: str, question: str, choices: Sequence[str] | None) -> str:
    """Key of one VQA answer.

    Parameters
    ----------
    backend_hash : str
        :func:`fingerprint_hash` of the VQA backend's fingerprint (model id, revision, prompt
        template, decoding).
    image : str
        :func:`image_key` of the pixels.
    question : str
        Exact question text (case and punctuation can change an answer).
    choices : sequence of str or None
        The choices, only when the backend puts them into its prompt; ``None`` otherwise so that
        TIFA and DSG share answers to the same question.
    """
    blob = json.dumps([backend_hash, image, question, None if choices is None else list(choices)])
    return hashlib.sha256(blob.encode()).hexdigest()


def question_key(style: str, template_hash: str, generator_hash: str, prompt: str) -> str:
    """Key of one generated question set (see the module docstring)."""
    return hashlib.sha256(json.dumps([style, template_hash, generator_hash, prompt]).encode()).hexdigest()


class QACache:
    """SQLite store of VQA answers and generated questions.

    Parameters
    ----------
    path : str or Path or None
        The SQLite file; ``None`` or ``":memory:"``: in memory (nothing persists).
    timeout : float
        Seconds to wait for another process's write lock.

    Raises
    ------
    RuntimeError
        The file exists but is not a QA cache of this schema.
    """

    def __init__(self, path: str | Path | None, timeout: float = 60.0) -> None:
        from ..sqlite_store import open_store

        self.in_memory = path is None or str(path) == ":memory:"
        # check_same_thread=False: API backends answer from worker threads, but every write
        # goes through this object from the calling thread.
        self._db, self.path = open_store(path, _SCHEMA, _SCHEMA_VERSION, "ts2 QA cache", timeout=timeout,
                                         check_same_thread=False)

    @classmethod
    def at(cls, cache_dir: str | Path | None = None, **kw: Any) -> QACache:
        """The cache inside ``cache_dir`` (default: the score cache's folder)."""
        if cache_dir in (None, ""):
            from ..cache import default_cache_dir

            cache_dir = default_cache_dir()
        return cls(Path(cache_dir).expanduser() / QA_CACHE_FILE, **kw)

    # -- answers -----------------------------------------------------------------------------------
    def get_answers(self, keys: Iterable[str]) -> dict[str, str]:
        cur = self._db.cursor()
        out = {}
        for k in keys:
            row = cur.execute("SELECT answer FROM answers WHERE key=?", (k,)).fetchone()
            if row is not None:
                out[k] = row[0]
        return out

    def put_answers(self, rows: Sequence[tuple[str, str, str, str, str]]) -> None:
        """Store ``(key, backend_hash, image_key, question, answer)`` rows in one transaction."""
        if not rows:
            return
        now = time.time()
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO answers VALUES (?,?,?,?,?,?)",
                                 [(*r, now) for r in rows])

    def n_answers(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    # -- questions ---------------------------------------------------------------------------------
    def get_question(self, key: str) -> tuple[str, dict] | None:
        """``(status, payload)`` of a stored generation, or ``None``."""
        row = self._db.execute("SELECT status, payload FROM questions WHERE key=?", (key,)).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def put_question(self, key: str, generator_hash: str, prompt: str, status: str, payload: dict) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO questions VALUES (?,?,?,?,?,?)",
                             (key, generator_hash, prompt, status, json.dumps(payload), time.time()))

    def n_questions(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM questions").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> QACache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
