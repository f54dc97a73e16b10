"""The state of a scoring run, shared by the engine's modules.

:mod:`metrics_adapters.engine` plans and assembles a metric's run, :mod:`~metrics_adapters.batch_loop`
computes its batches, :mod:`~metrics_adapters.outputs` writes what it produced; the types they pass
to each other live here, so that none of those modules imports another one back (no import
cycle: ``lint-imports`` checks it in CI). :class:`EngineSettings`, :class:`Failure` and
:class:`MetricRun` are public (re-exported by :mod:`metrics_adapters.engine`); :class:`Plan` and
:class:`Work` are the engine's working state.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .images import DEFAULT_MAX_SIDE
from .pipeline import default_batch_size, default_workers

log = logging.getLogger(__name__)

__all__ = ["EngineSettings", "Failure", "MetricRun", "Plan", "Work", "Pair", "check_device",
           "PRECISIONS", "DECODERS", "VALID_DEVICES"]

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
DECODERS = ("pil", "gpu")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
VALID_DEVICES = "cpu, cuda, cuda:N (N = 0, 1, ...) or auto"


def check_device(device: Any) -> str:
    """``device`` lower-cased if it names a device ts2 can use; else a ``ValueError`` listing them.

    Examples
    --------
    >>> check_device("CUDA:1")
    'cuda:1'
    """
    d = str(device if device is not None else "auto").strip().lower()
    if not _DEVICE_RE.match(d):
        raise ValueError(f"expected device one of {VALID_DEVICES}, got {device!r}")
    return d


@dataclass(frozen=True)
class EngineSettings:
    """How to run metrics (only ``precision``, ``max_image_side`` and ``decode`` change a score).

    Parameters
    ----------
    device : str
        ``"cpu"``, ``"cuda"`` (``"cuda:1"``, ...) or ``"auto"`` (CUDA when available).
    precision : str
        ``"auto"`` (the precision policy: fp32 on the CPU, fp16 autocast on CUDA; see
        docs/metrics.md for its deviation), ``"fp32"``, or ``"fp16"``/``"bf16"`` autocast on
        CUDA (fp32, with a warning, on the CPU). The precision that runs is in the cache key.
    batch_size : int or "auto"
        Distinct (image, prompt) pairs per metric call; ``"auto"``: 32 on the CPU, 256 on CUDA.
    num_workers : int or "auto"
        DataLoader processes decoding images in the background (0: in the main process);
        ``"auto"``: see :func:`metrics_adapters.pipeline.default_workers`.
    max_image_side : int or None
        Larger images are downscaled first (see :mod:`metrics_adapters.images`).
    decode : str
        ``"pil"`` (Pillow, the decode policy of :mod:`metrics_adapters.images`). ``"gpu"``
        (nvJPEG on CUDA, its own cache key) is reserved and refused: not implemented yet.
    progress : bool
        Show a tqdm bar (images/s, ETA) on stderr.
    measure_flops : bool
        Count one item's real FLOPs with ``FlopCounterMode`` (loads the model even when every
        score is cached).
    rehash : bool
        Hash every image file's content again instead of trusting the remembered hash of an
        unchanged (absolute path, size, mtime_ns): for images rewritten in place by a tool that
        keeps size and modification time (docs/metrics.md, "What keys a cached score").
    """

    device: str = "auto"
    precision: str = "auto"
    batch_size: int | str = "auto"
    num_workers: int | str = "auto"
    max_image_side: int | None = DEFAULT_MAX_SIDE
    decode: str = "pil"
    progress: bool = True
    measure_flops: bool = False
    rehash: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", check_device(self.device))
        if self.precision not in PRECISIONS:
            raise ValueError(f"expected precision one of {PRECISIONS}, got {self.precision!r}")
        if self.decode not in DECODERS:
            raise ValueError(f"expected decode one of {DECODERS}, got {self.decode!r}")
        if self.decode == "gpu":  # the key exists (decode_settings) but the nvJPEG path is not written yet
            raise ValueError("decode=gpu (nvJPEG on CUDA) is not implemented yet; use decode=pil")
        if self.batch_size != "auto" and not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"expected batch_size >= 1 or 'auto', got {self.batch_size!r}")
        if self.num_workers != "auto" and not (isinstance(self.num_workers, int) and self.num_workers >= 0):
            raise ValueError(f"expected num_workers >= 0 or 'auto', got {self.num_workers!r}")

    def workers_for(self, device: str) -> int:
        """The number of DataLoader workers to use on ``device``."""
        return int(self.num_workers) if self.num_workers != "auto" else default_workers(device)

    def batch_for(self, device: str) -> int:
        return int(self.batch_size) if self.batch_size != "auto" else default_batch_size(device)


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
    load_time_s: float | None = None   # model load (None: no model was loaded, e.g. all cached)
    hash_time_s: float = 0.0           # keying the images (file hashes, mostly reused from the cache)
    batch_size: int | None = None
    num_workers: int | None = None

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


Pair = tuple[str, str]  # (image key, prompt)


@dataclass
class Plan:
    """What a metric's run has to do, worked out from the cache alone (no torch, no model)."""

    device: str
    precision: str
    key: str
    fingerprint: dict[str, Any]
    image_keys: list[str | None]
    item_fail: dict[int, str]
    rep: dict[Pair, int]                      # distinct pair -> its first item
    cached: dict[Pair, tuple[tuple[float, ...], bool]]
    todo: list[Pair]
    hash_time: float


@dataclass
class Work:
    """What loading and computing produced."""

    results: dict[Pair, tuple[tuple[float, ...], bool]]
    pair_fail: dict[Pair, str] = field(default_factory=dict)
    load_error: str | None = None
    load_time: float | None = None
    compute_time: float = 0.0
    n_scored: int = 0
    flops_est: float | None = None
    flops_measured: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def fail_load(self, metric_name: str, error: BaseException, todo: Sequence[Pair]) -> None:
        """The metric could not be loaded (at load, or a model it loads on first use): one error
        logged, and every pair of ``todo`` not scored yet fails with it, instead of the same error
        per batch and item."""
        self.load_error = f"{type(error).__name__}: {error}"
        log.error("%s: could not load the metric: %s", metric_name, self.load_error)
        for p in todo:
            if p not in self.results:
                self.pair_fail[p] = f"metric failed to load: {self.load_error}"
