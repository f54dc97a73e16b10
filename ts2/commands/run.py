"""``ts2 run``: score a dataset, analyse the scores, and write the report, in one folder.

The folder then holds ``scores.csv``/``run.json`` (from the scoring engine), ``metametrics.csv``/
``per_seg.csv`` and the paper-style tables (analysis), and ``report.html`` with ``figures/``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

from seg_data.result_sets import DiscardResultSet, result_set
from ts2.commands import report as report_cmd
from ts2.commands import score as score_cmd
from ts2.common import output_dir

log = logging.getLogger(__name__)


def main(cfg: DictConfig) -> int:
    out = output_dir(cfg)
    rc, html = 2, None
    # One result set for the scores, the analysis and the report: swapped in whole at the end, so
    # a run that fails or is killed half-way leaves the folder's earlier run as it was.
    with result_set(out, "ts2 run") as stage:
        rc, html = _run(cfg, out, stage)
        if html is None:
            raise DiscardResultSet
    if html is not None:
        sys.stdout.write(f"report: {html}\n")
    return rc


def _run(cfg: DictConfig, out: Path, stage: Path) -> tuple[int, Path | None]:
    """Score, then report on the scores; ``(exit code, report path or None when nothing is to be written)``."""
    rc = score_cmd.main(cfg)  # its scores.csv and run.json join this run's set (written into `stage`)
    if rc == 2 or not (stage / "scores.csv").is_file():
        log.error("scoring did not finish (exit code %d); no analysis or report written", rc)
        return rc or 1, None
    if rc:
        # Too many failed images: still analyse what was scored, but keep the non-zero exit.
        log.warning("scoring finished with failures above max_failure_share; the report covers the scored images")
    from ts2.common import load_dataset

    dataset = load_dataset(cfg)  # again, cheaply: gives the analysis the real edges and subsets
    try:
        res = report_cmd.report_from_config(cfg, [stage], out, dataset)
    except (FileNotFoundError, ValueError) as e:
        log.error("report failed: %s", e)
        return 2, None
    for note in res.notes:
        log.warning("%s", note)
    return rc, res.html
