"""Quality-aware composite: ``S = w1 * S_align + w2 * S_quality`` (Miyamoto et al., eq. 1).

Each part is min-max normalised over the run before weighting, so the composite of an image
depends on every other image of the run. That cannot be computed batch by batch, so the design
is two steps:

1. :class:`CompositeMetric` is an ordinary (cached, resumable) metric that scores both inner
   metrics per image and writes their *raw* values as two columns, ``<name>_align`` and
   ``<name>_quality``;
2. :meth:`CompositeMetric.finalize` (or the pure :func:`composite_scores` on any two
   ``scores.csv`` columns) adds the column ``<name>`` once the run is complete.

The raw columns stay in ``scores.csv``, so the weights can be swept afterwards without scoring
again (Hydra sweeps over ``metric.w_align`` reuse the cache: the weights are not in the
fingerprint of the raw scores).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Metric, ScoreItem
from .controls.shuffle import _instantiate
from .hub import under

__all__ = ["CompositeMetric", "minmax", "composite_scores", "add_composite"]


def minmax(x: Sequence[float], higher_is_better: bool = True) -> np.ndarray:
    """Min-max normalise to [0, 1], oriented so that 1 is best.

    ``(x - min) / (max - min)`` over the finite values (NaN stays NaN); for lower-is-better
    inputs ``1 -`` that. A constant input (``max == min``) maps to 0.5 everywhere: it carries no
    ordering, and 0.5 keeps it from shifting the composite in either direction.

    Examples
    --------
    >>> minmax([2.0, 4.0, 3.0]).tolist()
    [0.0, 1.0, 0.5]
    >>> minmax([2.0, 4.0, float("nan")], higher_is_better=False).tolist()
    [1.0, 0.0, nan]
    """
    a = np.asarray(x, dtype=float)
    fin = np.isfinite(a)
    out = np.full(a.shape, np.nan)
    if not fin.any():
        return out
    lo, hi = a[fin].min(), a[fin].max()
    out[fin] = 0.5 if hi == lo else (a[fin] - lo) / (hi - lo)
    if not higher_is_better:
        out[fin] = 1.0 - out[fin]
    return out


def composite_scores(align: Sequence[float], quality: Sequence[float], w_align: float = 0.5, w_quality: float = 0.5,
                     align_higher_is_better: bool = True, quality_higher_is_better: bool = True) -> np.ndarray:
    """``w_align * minmax(align) + w_quality * minmax(quality)`` per image (NaN if either is NaN).

    Raises
    ------
    ValueError
        Different lengths, or negative weights, or both weights 0.

    Examples
    --------
    >>> composite_scores([0.0, 1.0], [10.0, 0.0], 0.5, 0.5, True, False).tolist()
    [0.0, 1.0]
    """
    a, q = np.asarray(align, dtype=float), np.asarray(quality, dtype=float)
    if a.shape != q.shape:
        raise ValueError(f"expected align and quality of equal length, got {a.shape} and {q.shape}")
    if w_align < 0 or w_quality < 0 or w_align + w_quality == 0:
        raise ValueError(f"expected non-negative weights, not both 0, got w_align={w_align}, w_quality={w_quality}")
    return w_align * minmax(a, align_higher_is_better) + w_quality * minmax(q, quality_higher_is_better)


def add_composite(frame, align_col: str, quality_col: str, out_col: str, w_align: float = 0.5, w_quality: float = 0.5,
                  align_higher_is_better: bool = True, quality_higher_is_better: bool = True):
    """A copy of a ``scores.csv`` DataFrame with the composite of two of its columns added.

    Raises
    ------
    KeyError
        A named column is missing (the message lists the columns there are).
    """
    missing = [c for c in (align_col, quality_col) if c not in frame.columns]
    if missing:
        raise KeyError(f"expected columns {missing} in the score table, got {list(frame.columns)}")
    out = frame.copy()
    out[out_col] = composite_scores(out[align_col].to_numpy(), out[quality_col].to_numpy(), w_align, w_quality,
                                    align_higher_is_better, quality_higher_is_better)
    return out


class CompositeMetric(Metric):
    """Alignment + image quality, weighted after per-run min-max normalisation.

    Parameters
    ----------
    name : str
        The composite's column; the raw parts are ``<name>_align`` and ``<name>_quality``.
    align, quality : Metric or config, optional
        Any one-column alignment metric and any one-column quality metric (defaults: ``clipscore``
        and ``blur``).
    w_align, w_quality : float
        Weights (the paper's default 0.5 / 0.5).

    Notes
    -----
    :meth:`score_batch` returns the raw parts; :meth:`finalize` adds the composite column to a
    finished score table (the engine's ``scores.csv`` frame).
    """

    paper = "Miyamoto et al., VQA-based evaluation metrics for T2I generation (eq. 1)"

    higher_is_better = True
    score_range = None
    columns = ("align", "quality")

    def __init__(self, name: str = "composite", align: Metric | Any = None, quality: Metric | Any = None,
                 w_align: float = 0.5, w_quality: float = 0.5) -> None:
        super().__init__(name)
        self.align = _instantiate(align, "align")
        self.quality = _instantiate(quality, "quality")
        if self.align is None:  # defaults = conf/metric/composite.yaml
            from .embedding.clipscore import OpenCLIPScore

            self.align = OpenCLIPScore()
        if self.quality is None:
            from .quality import BlurEffect

            self.quality = BlurEffect()
        for part in (self.align, self.quality):
            if len(part.output_columns()) != 1:
                raise ValueError(f"{name}: expected one-column inner metrics, got {part!r} with {part.output_columns()}")
        self.w_align, self.w_quality = float(w_align), float(w_quality)
        composite_scores([0.0], [0.0], self.w_align, self.w_quality)  # validate the weights now
        self.needs_images = bool(self.align.needs_images or self.quality.needs_images)

    def settings(self) -> dict[str, Any]:
        # The weights only act in finalize(): raw parts are shared across weight sweeps.
        return {"align": self.align.fingerprint(), "quality": self.quality.fingerprint()}

    def directions(self) -> dict[str, bool]:
        a, q = self.output_columns()
        return {a: self.align.higher_is_better, q: self.quality.higher_is_better}

    def model_ids(self) -> dict[str, Any]:
        return {"align": self.align.model_ids(), "quality": self.quality.model_ids()}

    def hub_models(self) -> tuple[Any, ...]:
        return (*under("align", self.align.hub_models()), *under("quality", self.quality.hub_models()))

    def flops_per_image(self) -> float | None:
        fa, fq = self.align.flops_per_image(), self.quality.flops_per_image()
        return None if fa is None and fq is None else float(fa or 0.0) + float(fq or 0.0)

    def prepare(self, items: Sequence[ScoreItem]) -> None:
        self.align.prepare(items)
        self.quality.prepare(items)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.align.load(device, dtype)
        self.quality.load(device, dtype)

    def unload(self) -> None:
        self.align.unload()
        self.quality.unload()

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any] | None) -> list[tuple[float, float]]:
        a = list(self.align.score_batch(items, images if self.align.needs_images else None))
        q = list(self.quality.score_batch(items, images if self.quality.needs_images else None))
        return [(float(x), float(y)) for x, y in zip(a, q, strict=True)]

    def finalize(self, frame):
        """``frame`` (a finished score table) with the column ``<name>`` = the composite added."""
        a, q = self.output_columns()
        return add_composite(frame, a, q, self.name, self.w_align, self.w_quality,
                             self.align.higher_is_better, self.quality.higher_is_better)

    def finalize_directions(self) -> dict[str, bool]:
        """Direction of the column :meth:`finalize` adds."""
        return {self.name: True}
