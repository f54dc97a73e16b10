"""The files of a scoring run: ``scores.csv`` (one row per item) and ``run.json`` (how it was made).

Both are written atomically (a temporary sibling, then ``os.replace``).
"""

from __future__ import annotations

import json
import logging
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

from seg_data.result_sets import atomic_write_text, published_path, result_set
from seg_data.results import BASE_COLUMNS, RUN_FILE, run_record

from .items import ScoreItem
from .run_types import MetricRun
from .scorer import Scorer

log = logging.getLogger(__name__)

__all__ = ["BASE_COLUMNS", "scores_frame", "write_outputs", "atomic_write_text", "package_versions"]

# -- outputs ---------------------------------------------------------------------------------------
def scores_frame(items: Sequence[ScoreItem], runs: Sequence[MetricRun]):
    """``seg_id, node, file_name, image_path, prompt`` + each run's columns, in item order.

    A run that failed on every item adds no column: an all-empty column would be read later as a
    metric with its scores missing (and merged as "runs scored different images"); its failures
    are in ``run.json``."""
    import numpy as np
    import pandas as pd

    df = pd.DataFrame([{"seg_id": it.seg_id, "node": it.node, "file_name": it.file_name,
                        "image_path": it.image_path, "prompt": it.prompt} for it in items], columns=list(BASE_COLUMNS))
    for run in runs:
        if len(run.scores) != len(items):
            raise ValueError(f"{run.name}: expected {len(items)} scores, got {len(run.scores)}")
        if items and all(sc is None for sc in run.scores):
            log.warning("%s failed on every one of its %d images: no column written to scores.csv (the reasons "
                        "are in run.json)", run.name, len(items))
            continue
        arr = np.full((len(items), len(run.columns)), np.nan)
        for i, s in enumerate(run.scores):
            if s is not None:
                arr[i] = s
        for k, col in enumerate(run.columns):
            df[col] = arr[:, k]
    return df


_PACKAGES = ("ts2", "torch", "torchvision", "open_clip_torch", "transformers", "tokenizers", "timm", "numpy",
             "pillow", "pandas", "hydra-core", "omegaconf", "tqdm")


def package_versions(extra: Sequence[str] = ()) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in (*_PACKAGES, *extra):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def write_outputs(output_dir: str | Path, items: Sequence[ScoreItem], runs: Sequence[MetricRun],
                  config: dict | None = None, extra: dict | None = None,
                  metrics: Sequence[Scorer] = ()) -> tuple[Path, Path]:
    """Write ``scores.csv`` and ``run.json`` into ``output_dir`` (each atomically); return both paths.

    ``metrics`` (the run's metric objects) get their :meth:`~metrics_adapters.base.Metric.finalize` hook on the finished
    table, so run-level columns (e.g. a composite normalised over the run) reach ``scores.csv``.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = scores_frame(items, runs)
    added: dict[str, bool] = {}
    for m in metrics:
        df = m.finalize(df)
        added.update(m.finalize_directions())
    directions = {c: h for r in runs for c, h in r.directions.items() if c in df.columns} | added
    roles = {c: r for m in metrics for c, r in m.roles().items() if c in df.columns}
    roles |= {c: roles.get(c, "metric") for c in directions}
    with result_set(out, "ts2 score") as stage:
        csv_path, json_path = stage / "scores.csv", stage / RUN_FILE
        atomic_write_text(csv_path, df.to_csv(index=False))
        record = run_record(n_items=len(items), columns=df.columns, metrics=[r.summary() for r in runs],
                            directions=directions, roles=roles,
                            derived_columns=added,  # column -> higher_is_better, added after scoring by finalize()
                            config=config, packages=package_versions(), **(extra or {}))
        atomic_write_text(json_path, json.dumps(record, indent=1, default=str))
        return published_path(csv_path), published_path(json_path)
