"""``ts2 run``: score a dataset, analyse the scores, and write the report, in one folder.

The folder then holds ``scores.csv``/``run.json`` (from the scoring engine), ``metametrics.csv``/
``per_seg.csv`` and the paper-style tables (analysis), and ``report.html`` with ``figures/``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

from seg_data.results import published_path, result_set
from ts2.commands import report as report_cmd
from ts2.commands import score as score_cmd
from ts2.common import output_dir

log = logging.getLogger(__name__)


class _NothingWritten(Exception):
    """Leaves the run's result set unwritten (the folder keeps what it held)."""

    def __init__(self, rc: int) -> None:
        super().__init__(rc)
        self.rc = rc


def main(cfg: DictConfig) -> int:
    out = output_dir(cfg)
    try:
        # One result set for the scores, the analysis and the report: swapped in whole at the end,
        # so a run that fails or is killed half-way leaves the folder's earlier run as it was.
        with result_set(out, "ts2 run") as stage:
            rc, html = _run(cfg, out, stage)
    except _NothingWritten as e:
        return e.rc
    sys.stdout.write(f"report: {published_path(html) if html else out / 'report.html'}\n")
    return rc


def _run(cfg: DictConfig, out: Path, stage: Path) -> tuple[int, Path]:
    rc = score_cmd.main(cfg)  # its scores.csv and run.json join this run's set (written into `stage`)
    if rc == 2 or not (stage / "scores.csv").is_file():
        log.error("scoring did not finish (exit code %d); no analysis or report written", rc)
        raise _NothingWritten(rc or 1)
    if rc:
        # Too many failed images: still analyse what was scored, but keep the non-zero exit.
        log.warning("scoring finished with failures above max_failure_share; the report covers the scored images")
    from ts2.common import load_dataset

    dataset = load_dataset(cfg)  # again, cheaply: gives the analysis the real edges and subsets
    try:
        res = report_cmd.report_from_config(cfg, [stage], out, dataset)
    except (FileNotFoundError, ValueError) as e:
        log.error("report failed: %s", e)
        raise _NothingWritten(2) from e
    for note in res.notes:
        log.warning("%s", note)
    return rc, res.html
