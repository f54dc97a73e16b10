"""The scoring engine: a dataset's (prompt, image) pairs through metrics, cached and resumable.

For one metric, :func:`score_metric`

1. keys every item by image content (``sha256`` of the file, remembered in the cache by path,
   size and mtime) or, for metrics that never read pixels (``needs_images = False``), by its
   ``file_name``; items whose image file is missing or not a regular file are recorded as skipped;
2. scores each distinct ``(image, prompt)`` pair once and looks all of them up in the
   :class:`~metrics_adapters.cache.ScoreCache` under the key of :func:`cache_key`. When every
   pair is cached, nothing else happens: no torch import, no model load;
3. otherwise decodes the missing images in background DataLoader workers through the input
   pipeline of :mod:`metrics_adapters.pipeline` (uint8 batches at the model's input size,
   normalised on the device), runs the metric batch by batch under ``torch.inference_mode()``
   (and ``torch.autocast`` for fp16/bf16 on CUDA), shows a tqdm bar and hands every batch's
   scores to a background thread that commits them to the cache;
4. isolates failures: a batch that raises is retried item by item; an unreadable image, an
   exception or a non-finite score fails only its own item, with the reason recorded. A model
   that cannot be loaded (:class:`~metrics_adapters.hub.ModelUnavailableError`, at load or on
   first use) fails the metric once: every pending item gets that reason, nothing is retried.

A killed run loses at most the batches in flight: started again, it finds every committed pair
in the cache. :func:`~metrics_adapters.outputs.write_outputs` then writes ``scores.csv`` and
``run.json`` (atomically). :func:`score_direct` scores pairs given in memory (``Metric.__call__``).

The engine takes a metric as a :class:`~metrics_adapters.scorer.Scorer` (what it calls on one) and
never imports :mod:`.base`: the base class imports the engine.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .batch_loop import autocast, compute
from .cache import ScoreCache
from .extras import MissingExtraError, missing_extra, require_module
from .flops import measure_flops
from .hub import require_models
from .identity import fingerprint_hash
from .images import DEFAULT_MAX_SIDE, ImageMissingError, decode_image, decode_settings
from .items import ScoreItem
from .outputs import (
    BASE_COLUMNS,
    atomic_write_text,
    package_versions,
    scores_frame,
    write_outputs,
)
from .run_types import (
    DECODERS,
    PRECISIONS,
    EngineSettings,
    Failure,
    MetricRun,
    Pair,
    Plan,
    Work,
    check_device,
)
from .scorer import Scorer

__all__ = ["EngineSettings", "Failure", "MetricRun", "score_metric", "score_items", "score_direct", "cache_key",
           "resolve_device", "effective_precision", "items_from_table", "scores_frame", "write_outputs",
           "package_versions", "BASE_COLUMNS", "atomic_write_text", "check_device", "PRECISIONS", "DECODERS"]

log = logging.getLogger(__name__)

# -- small pure helpers ----------------------------------------------------------------------------
def _cuda_possible() -> bool:
    """Whether CUDA could be available, without importing torch (a second of start-up).

    On Linux a CUDA device shows as ``/dev/nvidia<N>``; no such node, or ``CUDA_VISIBLE_DEVICES``
    hiding them all, means no CUDA. Elsewhere (or when torch is imported already) torch decides.
    """
    if "torch" in sys.modules or not sys.platform.startswith("linux"):
        return True
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None and os.environ["CUDA_VISIBLE_DEVICES"].strip() in ("", "-1"):
        return False
    return any(Path("/dev").glob("nvidia[0-9]*"))


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available else ``"cpu"``; a CUDA request without CUDA fails.

    Imports torch only where a CUDA device might exist (see :func:`_cuda_possible`).

    Raises
    ------
    ValueError
        ``device`` is not one of :data:`~metrics_adapters.run_types.VALID_DEVICES`.
    RuntimeError
        ``device`` names CUDA but no CUDA device is available.
    """
    d = check_device(device)
    if d == "cpu":
        return d
    available = False
    if _cuda_possible():
        try:
            import torch
        except ImportError:  # the light install (no torch): CPU only
            torch = None
        available = torch is not None and torch.cuda.is_available()
    if d == "auto":
        return "cuda" if available else "cpu"
    if not available:
        raise RuntimeError(f"expected a CUDA device for device={device}, found none (use device=cpu or auto)")
    return d


def effective_precision(device: str, precision: str) -> str:
    """The precision that really runs: ``auto`` is fp16 on CUDA and fp32 elsewhere; fp16/bf16
    autocast only on CUDA (fp32, with a warning, elsewhere)."""
    if precision not in PRECISIONS:
        raise ValueError(f"expected precision one of {PRECISIONS}, got {precision!r}")
    cuda = str(device).startswith("cuda")
    if precision == "auto":
        return "fp16" if cuda else "fp32"
    if precision != "fp32" and not cuda:
        log.warning("precision=%s runs only on CUDA; using fp32 on %s", precision, device)
        return "fp32"
    return precision


def cache_key(metric: Scorer, precision: str = "fp32", max_image_side: int | None = DEFAULT_MAX_SIDE,
              decode: str = "pil") -> str:
    """Key of a metric's scores: its fingerprint + precision (+ the decode policy if it reads pixels)."""
    blob = {"metric": metric.fingerprint(), "precision": precision}
    if metric.needs_images:
        blob["decode"] = decode_settings(max_image_side, decode)
    return fingerprint_hash(blob)


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


# -- one metric: the plan (no torch), the work, the result ---------------------------------------------
# Set on a metric the engine loaded and did not unload (score_metric(..., unload=False)): the next
# run on the same device and precision reuses the model instead of loading it again.
_LOADED = "_engine_loaded_on"


def _image_keys(metric: Scorer, items: Sequence[ScoreItem], cache: ScoreCache,
                settings: EngineSettings) -> tuple[list[str | None], dict[int, str]]:
    """Content keys of the items' images (or file-name keys), and the items that have none."""
    if not metric.needs_images:
        return [f"name:{it.file_name}" for it in items], {}
    keys: list[str | None] = [None] * len(items)
    fail: dict[int, str] = {}
    bar = None
    if settings.progress and len(items) >= 500:
        from seg_data.progress import tqdm

        bar = tqdm(total=len(items), desc=f"{metric.name}: hashing", unit="img", leave=False)
    try:
        for i, it in enumerate(items):
            if bar is not None:
                bar.update()
            if it.image_path is None:
                fail[i] = "missing image: the dataset has no path for it (loaded without images?)"
                continue
            try:
                keys[i] = "sha256:" + cache.file_hash(it.image_path, rehash=settings.rehash)
            except ImageMissingError as e:
                fail[i] = f"missing image file: {e}"
            except (OSError, ValueError, RuntimeError) as e:  # a FIFO, a device, a symlink loop, too big
                fail[i] = f"unreadable image file {it.image_path}: {e}"
    finally:
        if bar is not None:
            bar.close()
    return keys, fail


def _plan(metric: Scorer, items: Sequence[ScoreItem], cache: ScoreCache, settings: EngineSettings) -> Plan:
    device = resolve_device(settings.device)
    precision = effective_precision(device, settings.precision)
    metric.prepare(items)  # data-dependent settings first: they are part of the cache key
    key = cache_key(metric, precision, settings.max_image_side, settings.decode)
    fingerprint = metric.fingerprint()
    decode = decode_settings(settings.max_image_side, settings.decode) if metric.needs_images else None
    cache.register(key, metric.name, {"fingerprint": fingerprint, "precision": precision, "decode": decode})
    t0 = time.perf_counter()
    image_keys, item_fail = _image_keys(metric, items, cache, settings)
    hash_time = time.perf_counter() - t0
    # Distinct pairs; the first item of each stands for it (dataset order keeps a SEG's prompt together).
    rep: dict[Pair, int] = {}
    for i, it in enumerate(items):
        if image_keys[i] is not None:
            rep.setdefault((image_keys[i], it.prompt), i)
    cached = cache.get_many(key, rep)
    todo = [p for p in rep if p not in cached]
    log.info("%s: %d items, %d distinct (image, prompt) pairs, %d cached, %d to compute on %s/%s",
             metric.name, len(items), len(rep), len(cached), len(todo), device, precision)
    return Plan(device, precision, key, fingerprint, image_keys, item_fail, rep, cached, todo, hash_time)


def _inner_hint(metric: Scorer) -> str:
    """For a control that wraps an inner metric (shuffled_image, shuffled_text): the override that
    gives it a model-free inner metric, so the control runs on the light install too."""
    inner = getattr(metric, "inner", None)  # a MetricWrapper's (an optional member: not part of Scorer)
    if not isinstance(getattr(inner, "name", None), str):
        return ""
    free = getattr(metric, "model_free_inner", None)
    if free is None:
        return (f"; it is needed by its inner metric {inner.name}, and no model-free metric can score for "
                f"{metric.name} on the light install: install the extra, or leave {metric.name} out")
    return (f"; it is needed by its inner metric {inner.name}: for a model-free inner metric pass "
            f"metric@{metric.config_key}.inner={free} (what ts2 run uses on the light install)")


def _load(metric: Scorer, plan: Plan, work: Work) -> bool:
    """Load the metric; a failure fails every pending pair with the reason instead of raising,
    except a module of an optional extra that is not installed (:class:`MissingExtraError`) and a
    declared hub model that is not available (:class:`~metrics_adapters.hub.ModelUnavailableError`)."""
    state = (plan.device, plan.precision)
    if getattr(metric, _LOADED, None) == state:  # loaded by an earlier call and kept (unload=False)
        work.load_time = 0.0
        return True
    t0 = time.perf_counter()
    hub = metric.hub_models()
    if hub:  # hub weights are torch models: on the light install, the extra comes before the weights
        try:
            require_module("torch", f"metric {metric.name}")
        except MissingExtraError as e:
            raise MissingExtraError(str(e) + _inner_hint(metric), name=e.name) from e
    # Before load() imports the model stack (open_clip: 5 s): an uncached hub model on an offline
    # machine stops the run at once with one line (ModelUnavailableError, raised to the caller).
    require_models(hub, metric.config_key)
    try:
        metric.load(plan.device, plan.precision if plan.precision != "fp32" else None)
    except Exception as e:  # bad model id, offline hub, OOM
        # The light install without the model stack: every metric that needs it would fail the
        # same way, so stop at once with the extra to install instead of failing each image.
        missing = missing_extra(e, f"metric {metric.name}")
        if missing is not None:
            raise MissingExtraError(str(missing) + _inner_hint(metric), name=missing.name) from e
        work.fail_load(metric.name, e, plan.todo)
        return False
    work.load_time = time.perf_counter() - t0
    setattr(metric, _LOADED, state)
    log.info("%s: model loaded in %.1f s", metric.name, work.load_time)
    return True


def _update_flops(metric: Scorer, cache: ScoreCache, plan: Plan, work: Work) -> None:
    est = metric.flops_per_image()
    if est is not None:
        work.flops_est = float(est)
        cache.set_flops(plan.key, work.flops_est)


def check_column_names(metric: Scorer) -> None:
    """Refuse a metric whose score column would replace a key or info column of ``scores.csv``
    (``seg_id``, ``node``, ``file_name``, ``image_path``, ``prompt``, ``subset``).

    Raises
    ------
    ValueError
        Naming the metric and the reserved column.
    """
    from seg_data.results import BASE_COLUMNS, KEY_COLUMNS

    reserved = set(BASE_COLUMNS) | set(KEY_COLUMNS)
    taken = [c for c in (metric.name, *metric.output_columns()) if c in reserved]
    if taken:
        raise ValueError(f"{metric.name}: expected score column names other than the reserved {sorted(reserved)}, "
                         f"got {taken[0]!r}; choose another name")


def score_metric(metric: Scorer, items: Sequence[ScoreItem], cache: ScoreCache | None = None,
                 settings: EngineSettings | None = None, unload: bool = True) -> MetricRun:
    """Score ``items`` with ``metric`` (see the module docstring).

    Parameters
    ----------
    metric : Scorer
        A :class:`~metrics_adapters.base.Metric` (any :class:`~metrics_adapters.scorer.Scorer`), not
        yet loaded (the engine loads it only if something is missing from the cache).
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
    metrics_adapters.extras.MissingExtraError
        The metric needs a module of an optional extra (torch, ...) that is not installed.
    metrics_adapters.hub.ModelUnavailableError
        A model of :meth:`~metrics_adapters.base.Metric.hub_models` is neither cached nor
        downloadable now (checked before loading; one whose loader finds it missing later
        fails the metric's items instead).
    """
    settings = settings or EngineSettings()
    check_column_names(metric)
    t_start = time.perf_counter()
    own_cache = cache is None
    cache = cache if cache is not None else ScoreCache(None)
    try:
        plan = _plan(metric, items, cache, settings)
        work = Work(results=dict(plan.cached), flops_est=cache.get_flops(plan.key))
        _run_model(metric, items, cache, settings, plan, work, unload)
    finally:
        if own_cache:
            cache.close()
    return _assemble(metric, items, settings, plan, work, time.perf_counter() - t_start)


def _run_model(metric: Scorer, items: Sequence[ScoreItem], cache: ScoreCache, settings: EngineSettings,
               plan: Plan, work: Work, unload: bool) -> None:
    """What needs the metric's model: load it (only if a pair is missing or FLOPs are measured),
    record its cost, measure FLOPs on one item, score the missing pairs, then free it (``unload``)."""
    loaded = False
    try:
        if plan.todo or settings.measure_flops:
            loaded = _load(metric, plan, work)
        if loaded:
            _update_flops(metric, cache, plan, work)
            if settings.measure_flops and plan.rep:
                first = plan.todo[0] if plan.todo else next(iter(plan.rep))
                work.flops_measured = _measure(metric, items[plan.rep[first]], settings, plan)
        if loaded and plan.todo:
            t0 = time.perf_counter()
            work.n_scored = compute(metric, [items[plan.rep[p]] for p in plan.todo], plan, cache, settings, work)
            work.compute_time = time.perf_counter() - t0
        if work.flops_est is None:
            # Some costs are known only after scoring (e.g. the mean number of generated
            # questions); analytic ones need no model, so ask again even when nothing was loaded.
            _update_flops(metric, cache, plan, work)
        work.info = dict(metric.run_info() or {})
    finally:
        if loaded and unload:
            metric.unload()
            setattr(metric, _LOADED, None)


def score_direct(metric: Scorer, images: Sequence[Any], prompts: Sequence[str], *, device: str = "auto",
                 batch_size: int | str = "auto", progress: bool = False, max_image_side: int | None = None):
    """Score ``(image, prompt)`` pairs outside any dataset: the work of ``Metric.__call__``.

    :func:`score_metric` with an in-memory cache, ``num_workers=0`` and ``unload=False`` (the model
    stays loaded for the next call on the same device). In-memory images are written to a temporary
    folder as PNG (lossless) and read back through the engine's decoder, so they score as the same
    image file would. Parameters, return value and errors: :meth:`metrics_adapters.base.Metric.__call__`.
    """
    images, prompts = list(images), [str(p) for p in prompts]
    if len(images) != len(prompts):
        raise ValueError(f"{metric.name}: expected one prompt per image, got {len(images)} images and "
                         f"{len(prompts)} prompts")
    settings = EngineSettings(device=device, batch_size=batch_size, progress=progress, num_workers=0,
                              max_image_side=DEFAULT_MAX_SIDE if max_image_side is None else max_image_side)
    with tempfile.TemporaryDirectory(prefix="ts2-call-") as tmp:
        items = []
        for i, (img, prompt) in enumerate(zip(images, prompts, strict=True)):
            if img is None or isinstance(img, str) or hasattr(img, "__fspath__"):
                path = None if img is None else str(img)
            elif hasattr(img, "save"):
                path = f"{tmp}/{i}.png"
                img.save(path, format="PNG")
            else:
                raise ValueError(f"{metric.name}: expected images as PIL images or file paths, got "
                                 f"{type(img).__name__} at index {i}")
            items.append(ScoreItem(seg_id="-", node=str(i), file_name=f"image {i}", prompt=prompt,
                                   image_path=path))
        run = score_metric(metric, items, None, settings, unload=False)
    if run.failures:
        first = run.failures[0]
        raise ValueError(f"{metric.name}: expected a score for every image, got {run.n_failed} failure(s) of "
                         f"{run.n_items} (first: {first.file_name}: {first.reason})")
    out = np.array([s for s in run.scores], dtype=float)
    return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 and not metric.columns else out


def _assemble(metric: Scorer, items: Sequence[ScoreItem], settings: EngineSettings, plan: Plan, work: Work,
              wall: float) -> MetricRun:
    """Per-item scores and failures in item order, and the run's record."""
    out = _ItemOutcomes.of(items, plan, work)
    if out.truncated_prompts:
        log.warning("%s: %d distinct prompt(s) (%d item(s)) were longer than the text encoder's context and "
                    "were truncated", metric.name, len(out.truncated_prompts), out.truncated_items)
    if out.failures:
        log.warning("%s: %d of %d item(s) failed (first: %s: %s)", metric.name, len(out.failures), len(items),
                    out.failures[0].file_name, out.failures[0].reason)
    computed = bool(plan.todo) and work.load_time is not None
    return MetricRun(
        name=metric.name, columns=metric.output_columns(), directions=metric.directions(),
        score_range=None if metric.score_range is None else tuple(metric.score_range),
        fingerprint=plan.fingerprint, cache_key=plan.key, model_ids=dict(metric.model_ids()), device=plan.device,
        precision=plan.precision, n_items=len(items), n_pairs=len(plan.rep), cache_hits=len(plan.cached),
        cache_misses=len(plan.todo), info=work.info, n_scored=work.n_scored, failures=tuple(out.failures),
        truncated_prompts=len(out.truncated_prompts), truncated_items=out.truncated_items, wall_time_s=wall,
        compute_time_s=work.compute_time,
        images_per_s=(work.n_scored / work.compute_time) if work.compute_time > 0 and work.n_scored else None,
        flops_per_image_estimate=work.flops_est, flops_per_image_measured=work.flops_measured,
        load_error=work.load_error, scores=tuple(out.scores), load_time_s=work.load_time, hash_time_s=plan.hash_time,
        batch_size=settings.batch_for(plan.device) if computed else None,
        num_workers=(settings.workers_for(plan.device) if metric.needs_images else 0) if computed else None)


@dataclass
class _ItemOutcomes:
    """Each item's scores (``None``: failed) and failures, in item order, and the prompts the
    text encoder truncated (distinct prompts, and how many items had one)."""

    scores: list[tuple[float, ...] | None] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    truncated_prompts: set[str] = field(default_factory=set)
    truncated_items: int = 0

    @classmethod
    def of(cls, items: Sequence[ScoreItem], plan: Plan, work: Work) -> _ItemOutcomes:
        """Read each item's result off its (image, prompt) pair; an item failed before scoring
        (unreadable image...) keeps that reason, one whose pair failed gets the pair's."""
        out = cls()
        for i, it in enumerate(items):
            reason = plan.item_fail.get(i)
            pair = None if plan.image_keys[i] is None else (plan.image_keys[i], it.prompt)
            if reason is None and pair in work.results:
                vals, trunc = work.results[pair]
                out.scores.append(vals)
                if trunc:
                    out.truncated_prompts.add(it.prompt)
                    out.truncated_items += 1
                continue
            reason = reason or work.pair_fail.get(pair, "not scored")
            out.scores.append(None)
            out.failures.append(Failure(it.seg_id, it.node, it.file_name, it.image_path, reason))
        return out


def _measure(metric: Scorer, item: ScoreItem, settings: EngineSettings, plan: Plan) -> float | None:
    try:
        payload = None
        if metric.needs_images:
            payload = [metric.preprocess(decode_image(item.image_path, settings.max_image_side))]
        import torch

        with torch.inference_mode(), autocast(plan.device, plan.precision):
            return measure_flops(lambda: metric.score_batch([item], payload))
    except Exception as e:  # measuring is a report extra: never fail the run for it
        log.warning("%s: could not measure FLOPs on %s: %s: %s", metric.name, item.file_name, type(e).__name__, e)
        return None


def score_items(metrics: Sequence[Scorer], items: Sequence[ScoreItem], cache: ScoreCache | None = None,
                settings: EngineSettings | None = None) -> list[MetricRun]:
    """:func:`score_metric` for each metric in turn (one model in memory at a time).

    Raises
    ------
    ValueError
        Two metrics would write the same score column.
    """
    check_unique_columns(metrics)
    return [score_metric(m, items, cache, settings) for m in metrics]


def check_unique_columns(metrics: Sequence[Scorer]) -> None:
    """Refuse a reserved column name (:func:`check_column_names`) or one column written by two metrics.

    Raises
    ------
    ValueError
        Naming the column and the metrics.
    """
    seen: dict[str, str] = {}
    for m in metrics:
        check_column_names(m)
        for c in m.output_columns():
            if c in seen:
                raise ValueError(f"expected distinct score column names, got {c!r} twice "
                                 f"({seen[c]} and {m!r}); set a different name")
            seen[c] = repr(m)


