"""``ts2 run``: score a dataset, analyse the scores, and write the report, in one folder.

The folder then holds ``scores.csv``/``run.json`` (from the scoring engine), ``metametrics.csv``/
``per_seg.csv`` and the paper-style tables (analysis), and ``report.html`` with ``figures/``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

from ts2.commands import report as report_cmd
from ts2.commands import score as score_cmd
from ts2.common import output_dir

log = logging.getLogger(__name__)


def main(cfg: DictConfig) -> int:
    out = output_dir(cfg)
    rc = score_cmd.main(cfg)
    if rc == 2 or not (out / "scores.csv").is_file():
        log.error("scoring did not finish (exit code %d); no analysis or report written", rc)
        return rc or 1
    if rc:
        # Too many failed images: still analyse what was scored, but keep the non-zero exit.
        log.warning("scoring finished with failures above max_failure_share; the report covers the scored images")
    from ts2.common import load_dataset

    dataset = load_dataset(cfg)  # again, cheaply: gives the analysis the real edges and subsets
    try:
        res = report_cmd.report_from_config(cfg, [out], out, dataset)
    except (FileNotFoundError, ValueError) as e:
        log.error("report failed: %s", e)
        return 2
    for note in res.notes:
        log.warning("%s", note)
    sys.stdout.write(f"report: {Path(res.html).resolve()}\n")
    return rc
