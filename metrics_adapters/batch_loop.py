"""The engine's batch loop: decode in the background, score batch by batch, commit in the background.

:func:`compute` is step 3 of :func:`metrics_adapters.engine.score_metric` (see there); it is the
only part of a run that imports torch. Without torch installed (the light ``pip install -e .``)
the metrics that need no model (controls, the shapes detector, blur) still run: the batches are
then decoded in the main process and scored without ``inference_mode``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
from typing import Any

from .cache import ScoreCache
from .extras import missing_extra
from .hub import ModelUnavailableError
from .items import MetricError, ScoreItem
from .pipeline import BackgroundWriter, DecodeDataset, RawCollate, to_model_input
from .run_types import EngineSettings, Plan, Work
from .scorer import Scorer

__all__ = ["compute", "autocast"]

log = logging.getLogger(__name__)


def _torch():
    """``torch`` when it is installed, else ``None`` (the light install: no model metrics)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def autocast(device: str, precision: str):
    if device.startswith("cuda") and precision in ("fp16", "bf16"):
        import torch

        return torch.autocast(device_type="cuda", dtype=torch.float16 if precision == "fp16" else torch.bfloat16)
    return contextlib.nullcontext()


def _as_rows(values: Any, n: int, n_cols: int, name: str) -> list[tuple[float, ...]]:
    """Normalise a score_batch result to ``n`` rows of ``n_cols`` floats (non-finite kept)."""
    try:
        rows = list(values)
    except TypeError as e:
        raise MetricError(f"{name}: expected a sequence of {n} scores from score_batch, got {type(values).__name__}") from e
    if len(rows) != n:
        raise MetricError(f"{name}: expected {n} scores from score_batch, got {len(rows)}")
    out = []
    for r in rows:
        if isinstance(r, str | bytes):
            raise MetricError(f"{name}: expected numeric scores from score_batch, got {r!r}")
        try:
            r = tuple(float(v) for v in r)
        except TypeError:  # a scalar (float, numpy or 0-d tensor): one column
            r = (float(r),)
        if len(r) != n_cols:
            raise MetricError(f"{name}: expected {n_cols} values per item, got {len(r)}")
        out.append(r)
    return out


class _CacheWrites:
    """The cache writes of one run, done by a background thread; a cache that cannot take them
    (read-only, full disk) gives one warning and the run goes on with its scores in memory."""

    def __init__(self, cache: ScoreCache, key: str, name: str) -> None:
        self.cache, self.key, self.name, self.failed = cache, key, name, False
        self.writer = BackgroundWriter(self._write)

    def _write(self, rows) -> None:
        if self.failed:
            return
        try:
            self.cache.put_many(self.key, rows)
        except (sqlite3.Error, OSError) as e:
            self.failed = True
            log.warning("%s: cannot write to the score cache %s (%s: %s); going on without caching: this run's "
                        "scores reach scores.csv but a re-run computes them again", self.name, self.cache.path,
                        type(e).__name__, e)

    def put(self, rows) -> None:
        if rows:
            self.writer.put(rows)

    def close(self) -> None:
        self.writer.close()


def _in_process_batches(dataset, batch_size: int, collate_fn):
    """The batches a ``DataLoader(num_workers=0, shuffle=False)`` would give, without torch."""
    for start in range(0, len(dataset), batch_size):
        yield collate_fn([dataset[j] for j in range(start, min(start + batch_size, len(dataset)))])


def _loader(metric: Scorer, todo_items: list[ScoreItem], settings: EngineSettings, device: str):
    """The DataLoader of the to-do items and the metric's pixel spec (or ``None``); without torch,
    the same batches decoded in the main process."""
    spec = metric.pixel_spec() if metric.needs_images else None
    if _torch() is None:  # only metrics without a model loaded: a pixel spec is a torch model's
        return _in_process_batches(DecodeDataset(todo_items, metric, settings.max_image_side, None),
                                   settings.batch_for(device), RawCollate(False)), None
    from torch.utils.data import DataLoader

    workers = settings.workers_for(device) if metric.needs_images else 0
    workers = min(workers, max(0, len(todo_items) // 8))  # a few images do not pay a worker's start-up
    if workers > 0:
        # The fast tokenizers' thread pool does not survive fork(); without this each worker warns.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cuda = device.startswith("cuda")
    loader = DataLoader(DecodeDataset(todo_items, metric, settings.max_image_side, spec),
                        batch_size=settings.batch_for(device), shuffle=False, num_workers=workers,
                        collate_fn=RawCollate(spec is not None), pin_memory=cuda and metric.needs_images,
                        **({"prefetch_factor": 4, "persistent_workers": False} if workers > 0 else {}))
    return loader, spec


def _score_isolated(call, b_items: list[ScoreItem], images, name: str) -> list[tuple[float, ...] | BaseException]:
    """``call`` on the whole batch; if that raises, item by item so one bad item fails alone."""
    try:
        return list(call(b_items, images))
    except ModelUnavailableError:
        raise  # a model that cannot be loaded fails every item alike: compute() stops the metric
    except Exception as e:
        missing = missing_extra(e, f"metric {name}")  # a model loaded on first use, from an extra not installed
        if missing is not None:
            raise missing from e
        log.warning("%s: batch of %d failed (%s: %s); retrying item by item", name, len(b_items), type(e).__name__, e)
    rows: list[tuple[float, ...] | BaseException] = []
    for k, it in enumerate(b_items):
        one = None if images is None else (images[k:k + 1] if hasattr(images, "shape") else [images[k]])
        try:
            rows.append(call([it], one)[0])
        except Exception as e1:
            rows.append(e1)
    return rows


def compute(metric: Scorer, todo_items: list[ScoreItem], plan: Plan, cache: ScoreCache, settings: EngineSettings,
             work: Work) -> int:
    """Run the metric over the missing pairs; fills ``work.results``/``pair_fail``; returns pairs stored."""
    from seg_data.progress import tqdm

    torch = _torch()
    ncols = len(metric.output_columns())
    loader, spec = _loader(metric, todo_items, settings, plan.device)
    dtype = getattr(torch, spec.dtype) if spec is not None else None
    trunc_memo: dict[str, bool] = {}
    stored = 0
    writes = _CacheWrites(cache, plan.key, metric.name)
    bar = tqdm(total=len(todo_items), desc=metric.name, unit="img", disable=not settings.progress, dynamic_ncols=True)
    bar.set_postfix(cached=len(plan.cached), failed=0)

    def call(batch_items, images):
        with torch.inference_mode() if torch is not None else contextlib.nullcontext(), \
                autocast(plan.device, plan.precision):
            vals = metric.score_batch(batch_items, images)
        return _as_rows(vals, len(batch_items), ncols, metric.name)

    try:
        for batch in loader:
            if work.load_error is not None:
                break
            for j, err in batch.errors:
                work.pair_fail[plan.todo[j]] = err
            if batch.indices:
                b_items = [todo_items[j] for j in batch.indices]
                images = batch.images() if metric.needs_images else None
                if batch.raw:
                    images = to_model_input(images, spec, plan.device, dtype)
                try:
                    rows = _score_isolated(call, b_items, images, metric.name)
                except ModelUnavailableError as e:
                    work.fail_load(metric.name, e, plan.todo)
                    break
                _note_truncation(metric, b_items, trunc_memo)
                to_store = _collect(batch.indices, b_items, rows, plan, work, trunc_memo)
                writes.put(to_store)
                stored += len(to_store)
            bar.update(len(batch))
            bar.set_postfix(cached=len(plan.cached), failed=len(work.pair_fail))
    finally:
        bar.close()
        writes.close()  # every queued batch reaches the cache, also when interrupted
    return stored


def _note_truncation(metric: Scorer, b_items: list[ScoreItem], memo: dict[str, bool]) -> None:
    new_prompts = list(dict.fromkeys(it.prompt for it in b_items if it.prompt not in memo))
    if not new_prompts:
        return
    try:
        memo.update(zip(new_prompts, metric.truncated_prompts(new_prompts), strict=True))
    except Exception as e:  # counting is a report extra
        log.warning("%s: could not check prompt truncation: %s", metric.name, e)
        memo.update((p, False) for p in new_prompts)


def _collect(indices: list[int], b_items: list[ScoreItem], rows, plan: Plan, work: Work,
             trunc_memo: dict[str, bool]) -> list[tuple[str, str, tuple[float, ...], bool]]:
    """Sort a batch's rows into results and failures; return the rows to store."""
    to_store = []
    for j, it, row in zip(indices, b_items, rows, strict=True):
        pair = plan.todo[j]
        if isinstance(row, BaseException):
            work.pair_fail[pair] = f"metric error: {type(row).__name__}: {row}"
        elif not all(math.isfinite(v) for v in row):
            work.pair_fail[pair] = f"metric returned a non-finite score {row}"
        else:
            tr = bool(trunc_memo.get(it.prompt, False))
            work.results[pair] = (row, tr)
            to_store.append((pair[0], pair[1], row, tr))
    return to_store


