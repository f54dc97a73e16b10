"""Per-image side outputs of metrics that explain their scores (``answers.csv``, usage totals).

The scoring engine writes ``scores.csv`` and ``run.json`` but has no channel for per-image extras
such as a judge's reason, so the metrics that have them write them here themselves, into the
run's output folder (their ``answers_dir`` setting, ``${output_dir}`` in their configs):

- :class:`AnswerLog` appends one row per scored image as soon as its batch is done (a killed
  run keeps every finished row); columns ``metric, seg_id, node, file_name, prompt`` then the
  metric's own fields. A file with another header (another metric's answers) is left alone and
  the rows go to ``answers_<metric>.csv`` instead. Rows are keyed by ``(metric, file_name,
  prompt)``; when an image is scored again (a retried failure) the last row wins
  (:func:`read_answers` applies that rule).
- :func:`write_usage` writes ``usage_<metric>.json`` (tokens, estimated cost) atomically.

Neither ever contains an API key: rows hold model replies and our own messages only, and the
client redacts keys from the error messages it raises.
"""

from __future__ import annotations

import csv
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["AnswerLog", "read_answers", "write_usage", "ANSWER_KEY_COLUMNS"]

log = logging.getLogger(__name__)

# The first columns of every answers.csv row (not the score-table keys of seg_data.results.KEY_COLUMNS).
ANSWER_KEY_COLUMNS = ("metric", "seg_id", "node", "file_name", "prompt")


class AnswerLog:
    """Append-only CSV of per-image outputs of one metric.

    Parameters
    ----------
    directory : path-like or None
        The run's output folder; ``None`` disables the log (rows are dropped silently -- the
        scores themselves still go to ``scores.csv``).
    metric : str
        The metric's column name (first column of every row).
    fields : sequence of str
        The metric's own columns after the key columns.
    filename : str
        ``answers.csv`` by default.
    """

    def __init__(self, directory: str | Path | None, metric: str, fields: Sequence[str],
                 filename: str = "answers.csv") -> None:
        self.metric = str(metric)
        self.columns = [*ANSWER_KEY_COLUMNS, *fields]
        self._lock = threading.Lock()
        self.path: Path | None = None
        if directory is not None and str(directory) not in ("", "None", "null"):
            self.path = self._choose(Path(directory).expanduser(), filename)

    def _choose(self, directory: Path, filename: str) -> Path:
        p = directory / filename
        if p.exists() and p.stat().st_size > 0:
            with open(p, newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), [])
            if header != self.columns:
                alt = directory / f"answers_{self.metric}.csv"
                log.info("%s holds other answers (header %s); writing %s's rows to %s", p, header[:6], self.metric, alt)
                return alt
        return p

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append ``rows`` (dicts with the key fields and the metric's fields) and flush."""
        if self.path is None or not rows:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists() or self.path.stat().st_size == 0
            with open(self.path, "a", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=self.columns, extrasaction="ignore")
                if new:
                    w.writeheader()
                for r in rows:
                    w.writerow({"metric": self.metric, **{k: _cell(v) for k, v in r.items()}})
                f.flush()


def _cell(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return v


def read_answers(path: str | Path):
    """An answers file as a DataFrame, one row per ``(metric, file_name, prompt)`` (last wins)."""
    import pandas as pd

    df = pd.read_csv(path, dtype={"seg_id": str, "node": str})
    return df.drop_duplicates(subset=["metric", "file_name", "prompt"], keep="last").reset_index(drop=True)


def write_usage(directory: str | Path | None, metric: str, usage: Mapping[str, Any]) -> Path | None:
    """Write ``usage_<metric>.json`` into ``directory`` atomically (no-op for ``None``)."""
    if directory is None or str(directory) in ("", "None", "null"):
        return None
    d = Path(directory).expanduser()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"usage_{metric}.json"
    from seg_data.result_sets import atomic_write_text

    return atomic_write_text(path, json.dumps(dict(usage), indent=1, default=str))
