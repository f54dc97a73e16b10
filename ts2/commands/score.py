"""``ts2 score dataset=... metric=... [+metric@metrics.NAME=...] device=... batch_size=... output_dir=DIR``.

Scores every image of the dataset against its SEG's prompt with each configured metric and
writes ``DIR/scores.csv`` and ``DIR/run.json`` (see docs/metrics.md). Exit code: 0, or 1 when a
metric failed on more than ``max_failure_share`` of the images, or 2 for a configuration error
(unwritable output_dir, unknown or clashing metrics, no dataset).
"""

from __future__ import annotations

import errno
import logging
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from seg_data.result_sets import DiscardResultSet, result_set
from ts2.common import load_dataset, output_dir

log = logging.getLogger(__name__)


def list_metrics() -> str:
    from importlib.resources import files

    from metrics_adapters.catalog import describe_metrics, format_catalog

    lines = ["registered metrics (Python: metrics_adapters.get_metric(name, ...)):", format_catalog(describe_metrics())]
    confs = sorted(p.name.removesuffix(".yaml") for p in files("conf").joinpath("metric").iterdir()
                   if p.name.endswith(".yaml"))
    lines.append("metric configs (ts2 score metric=NAME): " + ", ".join(confs))
    return "\n".join(lines)


def main(cfg: DictConfig) -> int:
    if cfg.get("list_metrics"):
        sys.stdout.write(list_metrics() + "\n")
        return 0
    from ts2.common import check_output_dir

    out = output_dir(cfg)
    try:  # before any model or dataset is loaded: fail in a second, not after an hour
        check_output_dir(out)
    except OSError as e:
        log.error("%s", e.strerror or e)
        return 2
    from metrics_adapters.hub import ModelUnavailableError

    rc = 2
    # One result set: scores.csv, run.json and what the metrics write beside them (answers.csv,
    # questions, usage) go to a staging folder that replaces `out` whole once scoring is done. A
    # failed or killed run leaves the folder's earlier set as it was (finished scores stay cached).
    try:
        with result_set(out, "ts2 score") as stage:
            rc = _score(cfg, out, stage)
            if rc == 2:
                raise DiscardResultSet
    except ModelUnavailableError:
        raise  # nothing to do with writing: the command line prints its one line (ts2.cli.error_line)
    except OSError as e:  # the staging folder or the swap: the disk filled up, a permission changed
        log.error("could not write the result set to %s: %s (%s); %s is as it was, and every finished score is in "
                  "the cache, so the same command, run again once fixed, recomputes nothing", e.filename or out,
                  e.strerror or e, errno.errorcode.get(e.errno or 0, "?"), out)
        return 2
    return rc


def _with_output_dir(cfg: DictConfig, folder: Path) -> DictConfig:
    """``cfg`` with ``output_dir`` pointing at ``folder`` (the metrics' ``answers_dir`` follows it)."""
    c = cfg.copy()
    with open_dict(c):
        c.output_dir = str(folder)
    return c


class _Refused(Exception):
    """A run refused before any model is loaded (bad settings, no dataset, no room): one logged line, exit 2."""


def _checked_run(cfg: DictConfig, stage: Path):
    """The run's metrics and :class:`~metrics_adapters.scoring.ScoreSettings`, checked before the dataset and
    any model: a bad device, shard or metric fails in a second."""
    from metrics_adapters.scoring import ScoreSettings, check_run
    from ts2.metric_configs import metrics_from_config

    try:
        metrics = metrics_from_config(_with_output_dir(cfg, stage))
        settings = ScoreSettings.from_mapping(cfg)
        check_run(metrics, settings)
    except (ValueError, TypeError, RuntimeError) as e:
        raise _Refused(str(e)) from e
    return metrics, settings


def _dataset(cfg: DictConfig):
    try:
        return load_dataset(cfg)
    except (FileNotFoundError, ValueError) as e:  # missing file or columns, invalid SEGs (all listed)
        raise _Refused(str(e)) from e
    except NotADirectoryError as e:  # the cache folder of the mini set is a file (TS2_CACHE_DIR)
        raise _Refused(str(e.strerror or e)) from e


def _check_room(out: Path, items, metrics) -> None:
    """Room for ``scores.csv`` before any model (a long run must not die writing it)."""
    from ts2.common import MIN_FREE_BYTES, check_output_dir

    n_cols = sum(len(m.output_columns()) for m in metrics)
    try:
        check_output_dir(out, MIN_FREE_BYTES + sum(
            len(it.seg_id) + len(it.node) + len(it.file_name) + len(it.image_path or "") + len(it.prompt) + 8
            + 24 * n_cols for it in items))
    except OSError as e:
        raise _Refused(str(e.strerror or e)) from e


def _score(cfg: DictConfig, out: Path, stage: Path) -> int:
    t0 = time.perf_counter()
    from metrics_adapters.engine import write_outputs
    from metrics_adapters.scoring import score_selected, select_items

    try:
        metrics, settings = _checked_run(cfg, stage)
        ds = _dataset(cfg)
        items = select_items(ds, settings)
        if not items and settings.shard is not None and len(ds.image_table()):
            # More shards than images (or an unlucky hash split): an empty shard is a finished job,
            # not a failure, so a cluster array job does not report a spurious error.
            log.warning("shard %s of dataset %r holds no images; writing an empty scores.csv", cfg.shard, ds.name)
            write_outputs(out, [], [], config=OmegaConf.to_container(cfg, resolve=True), extra={
                "dataset": {"name": ds.name, "n_segs": len(ds), "n_images": 0}, "output_dir": str(out)})
            return 0
        if not items:
            raise _Refused(f"dataset {ds.name!r} has no images to score")
        _check_room(out, items, metrics)
    except _Refused as e:
        log.error("%s", e)
        return 2
    from metrics_adapters.cache import open_cache

    cache = open_cache(settings.cache, settings.cache_dir)
    log.info("scoring %d images of %r with %s; cache %s; output %s", len(items), ds.name,
             [m.name for m in metrics], cache.path, out)
    try:
        scored = score_selected(metrics, items, settings, cache)
    finally:
        cache.close()
    wall = time.perf_counter() - t0
    try:
        csv_path, json_path = write_outputs(out, items, scored.runs, config=OmegaConf.to_container(cfg, resolve=True),
                                            extra={"dataset": {"name": ds.name, "n_segs": len(ds),
                                                               "n_images": len(items)},
                                                   "output_dir": str(out), "cache_path": cache.path,
                                                   "wall_time_s": wall,
                                                   "max_failure_share": settings.max_failure_share},
                                            metrics=metrics)
    except OSError as e:  # e.g. the disk filled up during the run: the scores themselves are safe
        log.error("could not write scores.csv/run.json to %s: %s; every finished score is in the cache %s, so "
                  "the same command, run again once there is room, recomputes nothing", out, e, cache.path)
        return 2
    rc = _print_runs(scored, json_path)
    sys.stdout.write(f"wrote {csv_path} and {json_path} ({wall:.1f} s)\n")
    return rc


def _print_runs(scored, json_path: Path) -> int:
    """One line per metric run; a run over ``max_failure_share`` is logged as an error and makes the exit code 1."""
    rc = 0
    for r in scored.runs:
        rate = f"{r.images_per_s:.1f} img/s" if r.images_per_s else "-"
        sys.stdout.write(f"{r.name}: {r.n_items} images, {r.cache_hits} cached, {r.n_scored} scored ({rate}), "
                         f"{r.n_failed} failed, {r.truncated_prompts} truncated prompt(s)\n")
        if r in scored.failed_runs:
            log.error("%s failed on %d of %d images (%.1f%% > max_failure_share %.1f%%); reasons in %s",
                      r.name, r.n_failed, r.n_items, 100 * r.failure_share, 100 * scored.max_failure_share,
                      json_path)
            rc = 1
    return rc
