"""The engine's input pipeline: decode workers, one tensor per batch, normalisation on the device.

Image metrics that can split their preprocessing declare a :class:`PixelSpec`
(:meth:`~metrics_adapters.base.Metric.pixel_spec`):

- in the DataLoader workers, :func:`~metrics_adapters.images.decode_image` and the spec's
  ``resize`` (the model's own resize and crop, on the PIL image) give a ``uint8`` array already at
  the model's input size;
- :func:`collate` stacks a batch's images into ONE ``uint8`` tensor ``[B, 3, H, W]`` (a list of
  float tensors would cost a shared-memory file descriptor and a float copy per image, and four
  times the bytes to move);
- in the main process the batch is pinned (CUDA), copied with ``non_blocking=True`` and converted
  to float and normalised on the device in the model's dtype by :func:`to_model_input`, with the
  same operations, in the same order, as torchvision's ``ToTensor`` + ``Normalize`` (so CPU fp32
  scores are bit-identical to the model's own preprocessing).

Metrics without a spec keep the old contract: their :meth:`preprocess` runs in the workers, and
payloads that are tensors of one shape are still stacked into one tensor per batch.

:class:`BackgroundWriter` takes the cache writes off the critical path.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .images import ImageDecodeError, decode_image
from .items import ScoreItem
from .scorer import Scorer

__all__ = ["PixelSpec", "Batch", "DecodeDataset", "collate", "to_model_input", "BackgroundWriter",
           "default_workers", "default_batch_size", "available_cpus", "split_torchvision_transform"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PixelSpec:
    """A model's preprocessing split into a CPU part (PIL) and a device part (float, normalise).

    Parameters
    ----------
    resize : callable
        RGB ``PIL.Image`` -> RGB ``PIL.Image`` at the model's input size (resize, crop).
    mean, std : tuple of float
        Per-channel normalisation after scaling: ``(x * scale - mean) / std``.
    scale : float or None
        ``None``: divide by 255 (torchvision ``ToTensor``); else multiply by it (transformers'
        ``rescale_factor``).
    dtype : str
        The model's input dtype (``torch`` attribute name): the conversion and normalisation
        run in it, on the device.
    """

    resize: Callable[[Any], Any]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    scale: float | None = None
    dtype: str = "float32"

    def to_uint8(self, image):
        """PIL RGB image -> contiguous ``uint8`` tensor ``[3, H, W]`` at the model's input size."""
        import numpy as np
        import torch

        img = self.resize(image)
        if getattr(img, "mode", "RGB") != "RGB":
            img = img.convert("RGB")
        a = np.array(img, dtype=np.uint8, copy=True)
        return torch.from_numpy(a).permute(2, 0, 1).contiguous()


def split_torchvision_transform(transform) -> PixelSpec | None:
    """A :class:`PixelSpec` from a torchvision ``Compose`` ending in ``ToTensor, Normalize``.

    Everything before ``ToTensor`` (resize, crop, RGB conversion) runs on PIL images in the
    workers; ``None`` when the transform has another shape (the engine then runs it whole).
    """
    from torchvision import transforms as T

    steps = list(getattr(transform, "transforms", []))
    k = next((i for i, s in enumerate(steps) if isinstance(s, T.ToTensor)), None)  # open_clip: MaybeToTensor
    if k is None:
        return None
    tail = steps[k + 1:]
    if len(tail) != 1 or not isinstance(tail[0], T.Normalize) or getattr(tail[0], "inplace", False):
        return None
    return PixelSpec(resize=T.Compose(steps[:k]), mean=tuple(float(m) for m in tail[0].mean),
                     std=tuple(float(s) for s in tail[0].std))


def to_model_input(pixels, spec: PixelSpec, device: str, dtype):
    """``uint8 [B, 3, H, W]`` -> normalised ``dtype`` tensor on ``device``.

    The copy is non-blocking (the batch is pinned when the device is CUDA); the float
    conversion and normalisation run on the device, as ``ToTensor`` + ``Normalize`` would.
    """
    import torch

    x = pixels.to(device, non_blocking=True).to(dtype)
    x = x.div(255) if spec.scale is None else x.mul(spec.scale)
    mean = torch.as_tensor(spec.mean, dtype=dtype, device=x.device)[:, None, None]
    std = torch.as_tensor(spec.std, dtype=dtype, device=x.device)[:, None, None]
    return x.sub_(mean).div_(std)


@dataclass
class Batch:
    """What a DataLoader worker hands the main process for one batch.

    ``indices`` are the positions (in the engine's to-do list) of the items that decoded;
    ``pixels`` stacks their images into one tensor when possible, else ``payloads`` lists them;
    ``errors`` holds ``(index, reason)`` of the items that did not decode.
    """

    indices: list[int]
    pixels: Any = None
    payloads: list | None = None
    errors: list[tuple[int, str]] = field(default_factory=list)
    raw: bool = False  # pixels are uint8 under the metric's PixelSpec (normalise on the device)

    def __len__(self) -> int:
        return len(self.indices) + len(self.errors)

    def pin_memory(self):  # called by DataLoader(pin_memory=True) in its pinning thread
        if self.pixels is not None:
            self.pixels = self.pixels.pin_memory()
        return self

    def images(self, k: slice | None = None):
        """The images of the decoded items (all, or a slice), as the metric gets them."""
        if self.pixels is not None:
            return self.pixels if k is None else self.pixels[k]
        if self.payloads is None:
            return None
        return self.payloads if k is None else self.payloads[k]


class DecodeDataset:
    """Map-style dataset of the items to compute: decode + (split) preprocess, errors as values."""

    def __init__(self, items: Sequence[ScoreItem], metric: Scorer, max_side: int | None,
                 spec: PixelSpec | None) -> None:
        self.items, self.metric, self.max_side, self.spec = list(items), metric, max_side, spec

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
            return j, (self.spec.to_uint8(img) if self.spec is not None else self.metric.preprocess(img)), None
        except Exception as e:  # a metric's transform failing on one odd image fails that image only
            return j, None, f"preprocess failed: {type(e).__name__}: {e}"


def collate(samples, raw: bool = False) -> Batch:
    """``[(j, payload, error)]`` -> :class:`Batch`; tensors of one shape become one tensor."""
    ok = [(j, p) for j, p, err in samples if err is None]
    batch = Batch(indices=[j for j, _ in ok], errors=[(j, err) for j, _, err in samples if err is not None], raw=raw)
    payloads = [p for _, p in ok]
    if not payloads or all(p is None for p in payloads):
        return batch
    if _stackable(payloads):
        import torch

        batch.pixels = torch.stack(payloads)
    else:
        batch.payloads = payloads
        batch.raw = False
    return batch


def _is_tensor(p: Any) -> bool:
    """Whether a payload is a torch tensor (checked without importing torch)."""
    return hasattr(p, "shape") and hasattr(p, "dtype") and type(p).__module__.startswith("torch")


def _stackable(payloads: Sequence[Any]) -> bool:
    """Whether the payloads are torch tensors of one shape and dtype, so one stacked tensor."""
    return all(_is_tensor(p) for p in payloads) and len({(tuple(p.shape), p.dtype) for p in payloads}) == 1


class RawCollate:
    """Picklable ``collate_fn`` that marks uint8 batches (a lambda would not pickle under spawn)."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw

    def __call__(self, samples) -> Batch:
        return collate(samples, self.raw)


def available_cpus() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_workers(device: str, cpus: int | None = None) -> int:
    """Decode processes for ``num_workers=auto``.

    CUDA: every core but the one feeding the GPU, at most 16 (decode + resize of a 512-px JPEG
    takes ~6 ms per core, so an H100 running ViT-L-14 at ~1,700 images/s needs 10 or more).
    CPU: one when there are at least 2 cores (decoding then overlaps the model's forward,
    measured in ``benchmarks/scoring_speed.py``), else none.
    """
    n = available_cpus() if cpus is None else int(cpus)
    if str(device).startswith("cuda"):
        return max(1, min(16, n - 1))
    return 1 if n >= 2 else 0


def default_batch_size(device: str) -> int:
    """``batch_size=auto``: 256 on CUDA (fills an H100 with ViT-L-14 in fp16), 32 on the CPU."""
    return 256 if str(device).startswith("cuda") else 32


class BackgroundWriter:
    """Runs ``write(rows)`` calls in one background thread, in order, so the model never waits.

    :meth:`close` (also on errors and interrupts) waits for every queued write; the first
    exception a write raised is re-raised there.
    """

    def __init__(self, write: Callable[[Any], None], max_queued: int = 8) -> None:
        self._write = write
        self._q: queue.Queue = queue.Queue(maxsize=max_queued)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ts2-cache-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            rows = self._q.get()
            if rows is None:
                return
            if self._error is None:
                try:
                    self._write(rows)
                except BaseException as e:  # kept and re-raised in the main thread by close()
                    self._error = e

    def put(self, rows) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(rows)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
