"""The scoring engine: a dataset's (prompt, image) pairs through metrics, cached and resumable.

For one metric, :func:`score_metric`

1. keys every item by image content (``sha256`` of the file) or, for metrics that never read
   pixels (``needs_images = False``), by its ``file_name``; items whose image file is missing are
   recorded as skipped;
2. scores each distinct ``(image, prompt)`` pair once and looks all of them up in the
   :class:`~metrics_adapters.cache.ScoreCache` under the key of :func:`cache_key`;
3. decodes the images of the missing pairs in a background :class:`torch.utils.data.DataLoader`
   (``num_workers`` processes run :func:`~metrics_adapters.images.decode_image` and the metric's
   :meth:`~metrics_adapters.base.Metric.preprocess`), runs the metric batch by batch under
   ``torch.inference_mode()`` (and ``torch.autocast`` for fp16/bf16 on CUDA), shows a tqdm bar
   and commits every batch's scores to the cache as soon as it finishes;
4. isolates failures: a batch that raises is retried item by item; an unreadable image, an
   exception or a non-finite score fails only its own item, with the reason recorded.

A killed run loses at most its batch in flight: started again, it finds every finished pair in
the cache. :func:`write_outputs` then writes ``scores.csv`` and ``run.json`` (atomically).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seg_data.results import BASE_COLUMNS, RUN_FILE, atomic_write_text, result_set, run_record

from .base import Metric, MetricError, ScoreItem
from .cache import ScoreCache
from .images import DEFAULT_MAX_SIDE, ImageDecodeError, decode_image, decode_settings

__all__ = ["EngineSettings", "Failure", "MetricRun", "score_metric", "score_items", "cache_key",
           "resolve_device", "effective_precision", "items_from_table", "scores_frame", "write_outputs",
           "preflight_output_dir", "package_versions", "BASE_COLUMNS", "atomic_write_text"]

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class EngineSettings:
    """How to run metrics (none of it but ``precision`` and ``max_image_side`` changes a score).

    Parameters
    ----------
    device : str
        ``"cpu"``, ``"cuda"`` (``"cuda:1"``, ...) or ``"auto"`` (CUDA when available).
    precision : str
        ``"fp32"``, or ``"fp16"``/``"bf16"`` autocast on CUDA (ignored, with a warning, on CPU).
    batch_size : int
        Distinct (image, prompt) pairs per metric call.
    num_workers : int or "auto"
        DataLoader processes decoding images in the background (0: in the main process).
        ``"auto"``: none on the CPU (there they only take cycles from the model: measured in
        ``benchmarks/scoring_speed.py``), ``min(4, cores // 2)`` with CUDA.
    max_image_side : int or None
        Larger images are downscaled first (see :mod:`metrics_adapters.images`).
    progress : bool
        Show a tqdm bar (images/s, ETA) on stderr.
    measure_flops : bool
        Count one item's real FLOPs with ``FlopCounterMode`` (loads the model even when every
        score is cached).
    """

    device: str = "auto"
    precision: str = "fp32"
    batch_size: int = 32
    num_workers: int | str = "auto"
    max_image_side: int | None = DEFAULT_MAX_SIDE
    progress: bool = True
    measure_flops: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"expected precision one of {PRECISIONS}, got {self.precision!r}")
        if int(self.batch_size) < 1:
            raise ValueError(f"expected batch_size >= 1, got {self.batch_size}")
        if self.num_workers != "auto" and not (isinstance(self.num_workers, int) and self.num_workers >= 0):
            raise ValueError(f"expected num_workers >= 0 or 'auto', got {self.num_workers!r}")

    def workers_for(self, device: str) -> int:
        """The number of DataLoader workers to use on ``device``."""
        if self.num_workers != "auto":
            return int(self.num_workers)
        return 0 if not str(device).startswith("cuda") else min(4, max(1, (os.cpu_count() or 2) // 2))


@dataclass(frozen=True)
class Failure:
    """An item a metric could not score, and why."""

    seg_id: str
    node: str
    file_name: str
    image_path: str | None
    reason: str


@dataclass(frozen=True)
class MetricRun:
    """Everything one metric's pass over the items produced (``scores`` in item order)."""

    name: str
    columns: tuple[str, ...]
    directions: dict[str, bool]
    score_range: tuple[float, float] | None
    fingerprint: dict[str, Any]
    cache_key: str
    model_ids: dict[str, Any]
    device: str
    precision: str
    n_items: int
    n_pairs: int            # distinct (image key, prompt) pairs among the items
    cache_hits: int         # pairs found in the cache
    cache_misses: int       # pairs that had to be computed (including those that failed)
    n_scored: int           # pairs computed and stored by this run
    failures: tuple[Failure, ...]
    truncated_prompts: int  # distinct prompts the text encoder's context cut
    truncated_items: int    # items whose prompt was cut
    wall_time_s: float
    compute_time_s: float
    images_per_s: float | None
    flops_per_image_estimate: float | None
    flops_per_image_measured: float | None
    load_error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)  # the metric's run_info(): tokens, cost, QA counters
    scores: tuple[tuple[float, ...] | None, ...] = field(default=(), repr=False)

    @property
    def n_failed(self) -> int:
        return len(self.failures)

    @property
    def failure_share(self) -> float:
        return self.n_failed / self.n_items if self.n_items else 0.0

    def summary(self) -> dict[str, Any]:
        """The JSON-ready record of ``run.json`` (without per-item scores)."""
        d = asdict(self)
        d.pop("scores")
        d["failures"] = [asdict(f) for f in self.failures]
        d["n_failed"] = self.n_failed
        d["failure_share"] = self.failure_share
        return d


# -- small pure helpers ----------------------------------------------------------------------------
def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available else ``"cpu"``; a CUDA request without CUDA fails.

    Raises
    ------
    RuntimeError
        ``device`` names CUDA but ``torch.cuda.is_available()`` is false.
    """
    import torch

    d = str(device or "auto").lower()
    if d == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if d.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"expected a CUDA device for device={device}, found none (use device=cpu or auto)")
    return d


def effective_precision(device: str, precision: str) -> str:
    """The precision that really runs: autocast fp16/bf16 only on CUDA, else fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"expected precision one of {PRECISIONS}, got {precision!r}")
    if precision != "fp32" and not str(device).startswith("cuda"):
        log.warning("precision=%s runs only on CUDA; using fp32 on %s", precision, device)
        return "fp32"
    return precision


def cache_key(metric: Metric, precision: str = "fp32", max_image_side: int | None = DEFAULT_MAX_SIDE) -> str:
    """Key of a metric's scores: its fingerprint + precision (+ the decode policy if it reads pixels)."""
    blob = {"metric": metric.fingerprint(), "precision": precision}
    if metric.needs_images:
        blob["decode"] = decode_settings(max_image_side)
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:32]


def items_from_table(table) -> list[ScoreItem]:
    """:class:`ScoreItem` per row of :meth:`seg_data.SEGDataset.image_table` (same order)."""
    out = []
    for r in table.itertuples(index=False):
        path = r.image_path
        if path is None or (isinstance(path, float) and math.isnan(path)):
            path = None
        out.append(ScoreItem(seg_id=str(r.seg_id), node=str(r.node), file_name=str(r.file_name),
                             prompt=str(r.prompt), image_path=None if path is None else str(path)))
    return out


def _autocast(device: str, precision: str):
    import torch

    if device.startswith("cuda") and precision in ("fp16", "bf16"):
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


class _DecodeDataset:
    """Map-style dataset of the pairs to compute: decode + preprocess, errors as values."""

    def __init__(self, items: list[ScoreItem], metric: Metric, max_side: int | None) -> None:
        self.items, self.metric, self.max_side = items, metric, max_side

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, j: int):
        if not self.metric.needs_images:
            return j, None, None
        try:
            img = decode_image(self.items[j].image_path, self.max_side)
        except ImageDecodeError as e:
            return j, None, str(e)
        try:
            return j, self.metric.preprocess(img), None
        except Exception as e:  # a metric's transform failing on one odd image fails that image only
            return j, None, f"preprocess failed: {type(e).__name__}: {e}"


def _collate(batch):
    return batch


# -- one metric --------------------------------------------------------------------------------------
def score_metric(metric: Metric, items: Sequence[ScoreItem], cache: ScoreCache | None = None,
                 settings: EngineSettings | None = None, unload: bool = True) -> MetricRun:
    """Score ``items`` with ``metric`` (see the module docstring).

    Parameters
    ----------
    metric : Metric
        Not yet loaded (the engine loads it only if something is missing from the cache).
    items : sequence of ScoreItem
        In dataset order; scores come back in this order.
    cache : ScoreCache or None
        ``None``: an in-memory cache (nothing persists).
    settings : EngineSettings or None
    unload : bool
        Free the metric's model at the end.

    Returns
    -------
    MetricRun
        ``scores[i]`` is the tuple of ``metric.output_columns()`` values of ``items[i]``, or
        ``None`` if it failed (the reason is in ``failures``).

    Raises
    ------
    RuntimeError
        ``device=cuda`` without CUDA. Metric errors never raise: they become failures.
    """
    import torch
    from torch.utils.data import DataLoader
    from tqdm.auto import tqdm

    settings = settings or EngineSettings()
    own_cache = cache is None
    cache = cache if cache is not None else ScoreCache(None)
    t_start = time.perf_counter()
    device = resolve_device(settings.device)
    precision = effective_precision(device, settings.precision)
    metric.prepare(items)  # data-dependent settings first: they are part of the cache key
    key = cache_key(metric, precision, settings.max_image_side)
    fingerprint = metric.fingerprint()
    cache.register(key, metric.name, {"fingerprint": fingerprint, "precision": precision,
                                      "decode": decode_settings(settings.max_image_side) if metric.needs_images else None})
    columns = metric.output_columns()
    n = len(items)

    # 1. image keys; missing files are skipped items, not errors of the run
    item_fail: dict[int, str] = {}
    image_keys: list[str | None] = [None] * n
    if metric.needs_images:
        for i, it in enumerate(tqdm(items, desc=f"{metric.name}: hashing", unit="img", leave=False,
                                    disable=not settings.progress or n < 500)):
            if it.image_path is None:
                item_fail[i] = "missing image: the dataset has no path for it (loaded without images?)"
                continue
            try:
                image_keys[i] = "sha256:" + cache.file_hash(it.image_path)
            except FileNotFoundError:
                item_fail[i] = f"missing image file: expected a file at {it.image_path}, found none"
            except OSError as e:
                item_fail[i] = f"unreadable image file {it.image_path}: {e}"
    else:
        image_keys = [f"name:{it.file_name}" for it in items]

    # 2. distinct pairs, first item of each stands for it (dataset order keeps a SEG's prompt together)
    rep: dict[tuple[str, str], int] = {}
    for i, it in enumerate(items):
        if image_keys[i] is not None:
            rep.setdefault((image_keys[i], it.prompt), i)
    cached = cache.get_many(key, rep)
    results: dict[tuple[str, str], tuple[tuple[float, ...], bool]] = dict(cached)
    todo = [p for p in rep if p not in cached]
    pair_fail: dict[tuple[str, str], str] = {}
    log.info("%s: %d items, %d distinct (image, prompt) pairs, %d cached, %d to compute on %s/%s",
             metric.name, n, len(rep), len(cached), len(todo), device, precision)

    flops_est = cache.get_flops(key)
    info: dict[str, Any] = {}
    flops_measured = None
    load_error = None
    compute_time = 0.0
    n_scored = 0
    loaded = False
    try:
        if todo or settings.measure_flops:
            try:
                metric.load(device, precision if precision != "fp32" else None)
                loaded = True
            except Exception as e:  # bad model id, offline hub, OOM: every pending pair fails with the reason
                load_error = f"{type(e).__name__}: {e}"
                log.error("%s: could not load the metric: %s", metric.name, load_error)
                for p in todo:
                    pair_fail[p] = f"metric failed to load: {load_error}"
        if loaded:
            est = metric.flops_per_image()
            if est is not None:
                flops_est = float(est)
                cache.set_flops(key, flops_est)
            if settings.measure_flops and rep:
                flops_measured = _measure(metric, items[rep[todo[0] if todo else next(iter(rep))]], settings,
                                          device, precision)
        if loaded and todo:
            t0 = time.perf_counter()
            n_scored = _compute(metric, [items[rep[p]] for p in todo], todo, key, cache, settings, device,
                                precision, results, pair_fail, n_cached=len(cached), DataLoader=DataLoader,
                                tqdm=tqdm, torch=torch)
            compute_time = time.perf_counter() - t0
        if flops_est is None:
            # Some costs are known only after scoring (e.g. the mean number of generated
            # questions); analytic ones need no model, so ask again even when nothing was loaded.
            est = metric.flops_per_image()
            if est is not None:
                flops_est = float(est)
                cache.set_flops(key, flops_est)
        info = dict(metric.run_info() or {})
    finally:
        if loaded and unload:
            metric.unload()
        if own_cache:
            cache.close()

    # 3. per-item results in item order
    scores: list[tuple[float, ...] | None] = []
    failures: list[Failure] = []
    truncated_prompts: set[str] = set()
    truncated_items = 0
    for i, it in enumerate(items):
        reason = item_fail.get(i)
        pair = None if image_keys[i] is None else (image_keys[i], it.prompt)
        if reason is None and pair in results:
            vals, trunc = results[pair]
            scores.append(vals)
            if trunc:
                truncated_prompts.add(it.prompt)
                truncated_items += 1
            continue
        reason = reason or pair_fail.get(pair, "not scored")
        scores.append(None)
        failures.append(Failure(it.seg_id, it.node, it.file_name, it.image_path, reason))
    if truncated_prompts:
        log.warning("%s: %d distinct prompt(s) (%d item(s)) were longer than the text encoder's context and "
                    "were truncated", metric.name, len(truncated_prompts), truncated_items)
    if failures:
        log.warning("%s: %d of %d item(s) failed (first: %s: %s)", metric.name, len(failures), n,
                    failures[0].file_name, failures[0].reason)
    return MetricRun(
        name=metric.name, columns=columns, directions=metric.directions(),
        score_range=None if metric.score_range is None else tuple(metric.score_range),
        fingerprint=fingerprint, cache_key=key, model_ids=dict(metric.model_ids()), device=device,
        precision=precision, n_items=n, n_pairs=len(rep), cache_hits=len(cached), cache_misses=len(todo), info=info,
        n_scored=n_scored, failures=tuple(failures), truncated_prompts=len(truncated_prompts),
        truncated_items=truncated_items, wall_time_s=time.perf_counter() - t_start, compute_time_s=compute_time,
        images_per_s=(n_scored / compute_time) if compute_time > 0 and n_scored else None,
        flops_per_image_estimate=flops_est, flops_per_image_measured=flops_measured, load_error=load_error,
        scores=tuple(scores))


def _measure(metric: Metric, item: ScoreItem, settings: EngineSettings, device: str, precision: str) -> float | None:
    from .flops import measure_flops

    try:
        payload = None
        if metric.needs_images:
            payload = [metric.preprocess(decode_image(item.image_path, settings.max_image_side))]
        import torch

        with torch.inference_mode(), _autocast(device, precision):
            return measure_flops(lambda: metric.score_batch([item], payload))
    except Exception as e:  # measuring is a report extra: never fail the run for it
        log.warning("%s: could not measure FLOPs on %s: %s: %s", metric.name, item.file_name, type(e).__name__, e)
        return None


def _compute(metric, todo_items, todo_pairs, key, cache, settings, device, precision, results, pair_fail,
             n_cached, DataLoader, tqdm, torch) -> int:
    """Run the metric over the missing pairs; fills ``results``/``pair_fail``; returns pairs stored."""
    ncols = len(metric.output_columns())
    workers = settings.workers_for(device) if metric.needs_images else 0
    if workers > 0:
        # The fast tokenizers' thread pool does not survive fork(); without this each worker warns.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    loader = DataLoader(_DecodeDataset(todo_items, metric, settings.max_image_side), batch_size=int(settings.batch_size),
                        shuffle=False, num_workers=workers, collate_fn=_collate,
                        **({"prefetch_factor": 2} if workers > 0 else {}))
    trunc_memo: dict[str, bool] = {}
    stored = 0
    bar = tqdm(total=len(todo_items), desc=metric.name, unit="img", disable=not settings.progress, dynamic_ncols=True)
    bar.set_postfix(cached=n_cached, failed=0)

    def call(batch_items, payloads):
        with torch.inference_mode(), _autocast(device, precision):
            vals = metric.score_batch(batch_items, payloads)
        return _as_rows(vals, len(batch_items), ncols, metric.name)

    try:
        for batch in loader:
            ok = []
            for j, payload, err in batch:
                if err is not None:
                    pair_fail[todo_pairs[j]] = err
                else:
                    ok.append((j, payload))
            if ok:
                b_items = [todo_items[j] for j, _ in ok]
                b_pay = None if not metric.needs_images else [p for _, p in ok]
                try:
                    rows: list[tuple[float, ...] | BaseException] = list(call(b_items, b_pay))
                except Exception as e:
                    # Isolate the bad item(s): the rest of the batch still gets scored.
                    log.warning("%s: batch of %d failed (%s: %s); retrying item by item", metric.name, len(ok),
                                type(e).__name__, e)
                    rows = []
                    for k, it in enumerate(b_items):
                        try:
                            rows.append(call([it], None if b_pay is None else [b_pay[k]])[0])
                        except Exception as e1:
                            rows.append(e1)
                new_prompts = list(dict.fromkeys(it.prompt for it in b_items if it.prompt not in trunc_memo))
                if new_prompts:
                    try:
                        trunc_memo.update(zip(new_prompts, metric.truncated_prompts(new_prompts), strict=True))
                    except Exception as e:  # counting is a report extra
                        log.warning("%s: could not check prompt truncation: %s", metric.name, e)
                        trunc_memo.update((p, False) for p in new_prompts)
                to_store = []
                for (j, _), it, row in zip(ok, b_items, rows, strict=True):
                    pair = todo_pairs[j]
                    if isinstance(row, BaseException):
                        pair_fail[pair] = f"metric error: {type(row).__name__}: {row}"
                    elif not all(math.isfinite(v) for v in row):
                        pair_fail[pair] = f"metric returned a non-finite score {row}"
                    else:
                        tr = bool(trunc_memo.get(it.prompt, False))
                        results[pair] = (row, tr)
                        to_store.append((pair[0], pair[1], row, tr))
                cache.put_many(key, to_store)  # committed now: a kill after this loses nothing of this batch
                stored += len(to_store)
            bar.update(len(batch))
            bar.set_postfix(cached=n_cached, failed=len(pair_fail))
    finally:
        bar.close()
    return stored


def score_items(metrics: Sequence[Metric], items: Sequence[ScoreItem], cache: ScoreCache | None = None,
                settings: EngineSettings | None = None) -> list[MetricRun]:
    """:func:`score_metric` for each metric in turn (one model in memory at a time).

    Raises
    ------
    ValueError
        Two metrics would write the same score column.
    """
    check_unique_columns(metrics)
    return [score_metric(m, items, cache, settings) for m in metrics]


def check_unique_columns(metrics: Sequence[Metric]) -> None:
    seen: dict[str, str] = {}
    for m in metrics:
        for c in m.output_columns():
            if c in BASE_COLUMNS or c in seen:
                raise ValueError(f"expected distinct score column names, got {c!r} twice "
                                 f"({seen.get(c, 'a base column')} and {m!r}); set a different name")
            seen[c] = repr(m)


# -- outputs ---------------------------------------------------------------------------------------
def scores_frame(items: Sequence[ScoreItem], runs: Sequence[MetricRun]):
    """``seg_id, node, file_name, image_path, prompt`` + each run's columns, in item order."""
    import numpy as np
    import pandas as pd

    df = pd.DataFrame([{"seg_id": it.seg_id, "node": it.node, "file_name": it.file_name,
                        "image_path": it.image_path, "prompt": it.prompt} for it in items], columns=list(BASE_COLUMNS))
    for run in runs:
        if len(run.scores) != len(items):
            raise ValueError(f"{run.name}: expected {len(items)} scores, got {len(run.scores)}")
        arr = np.full((len(items), len(run.columns)), np.nan)
        for i, s in enumerate(run.scores):
            if s is not None:
                arr[i] = s
        for k, col in enumerate(run.columns):
            df[col] = arr[:, k]
    return df


def preflight_output_dir(path: str | Path) -> Path:
    """Create ``path`` and prove it writable, before any model is loaded.

    Raises
    ------
    OSError
        The folder cannot be created or written.
    """
    p = Path(path).expanduser()
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".ts2-write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise OSError(f"expected a writable output_dir, got {p}: {e}") from e
    return p


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
                  metrics: Sequence[Metric] = ()) -> tuple[Path, Path]:
    """Write ``scores.csv`` and ``run.json`` into ``output_dir`` (each atomically); return both paths.

    ``metrics`` (the run's metric objects) get their :meth:`Metric.finalize` hook on the finished
    table, so run-level columns (e.g. a composite normalised over the run) reach ``scores.csv``.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = scores_frame(items, runs)
    added: dict[str, bool] = {}
    for m in metrics:
        df = m.finalize(df)
        added.update(m.finalize_directions())
    csv_path, json_path = out / "scores.csv", out / RUN_FILE
    directions = {c: h for r in runs for c, h in r.directions.items()} | added
    roles = {c: r for m in metrics for c, r in m.roles().items()}
    roles |= {c: roles.get(c, "metric") for c in directions}
    with result_set(out, "ts2 score"):
        atomic_write_text(csv_path, df.to_csv(index=False))
        record = run_record(n_items=len(items), columns=df.columns, metrics=[r.summary() for r in runs],
                            directions=directions, roles=roles,
                            derived_columns=added,  # column -> higher_is_better, added after scoring by finalize()
                            config=config, packages=package_versions(), **(extra or {}))
        atomic_write_text(json_path, json.dumps(record, indent=1, default=str))
    return csv_path, json_path
