"""Classical no-reference blur measure (scikit-image), usable offline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import Metric, ScoreItem

__all__ = ["BlurEffect"]


class BlurEffect(Metric):
    """``skimage.measure.blur_effect`` of each image (Crete-Roffet et al., 2007).

    The strength of blur, from the variation between the image and a re-blurred copy along each
    axis (the larger of the two, ``reduce_func=max``), on the RGB image (``channel_axis=-1``).
    0 means sharp, 1 fully blurred: lower is better. Prompt-independent.

    Parameters
    ----------
    name : str
    h_size : int
        Size of the re-blurring filter (scikit-image's default 11).
    """

    paper = "Crete-Roffet et al. 2007, The blur effect (SPIE 6492)"

    higher_is_better = False
    role = "control"  # prompt-blind: it cannot see a faithfulness error, only image quality
    score_range = (0.0, 1.0)
    needs_images = True

    def __init__(self, name: str = "blur", h_size: int = 11) -> None:
        super().__init__(name)
        self.h_size = int(h_size)
        if self.h_size < 1:
            raise ValueError(f"{name}: expected h_size >= 1, got {h_size}")

    def settings(self) -> dict[str, Any]:
        import skimage

        return {"h_size": self.h_size, "reduce": "max", "skimage": skimage.__version__}

    def flops_per_image(self) -> float | None:
        return None  # a few filters per pixel: negligible next to any model

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        try:
            import skimage.measure  # noqa: F401
        except ImportError as e:
            raise ImportError("the blur quality metric needs scikit-image (pip install scikit-image)") from e

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        from skimage.measure import blur_effect

        out = []
        for im in images:
            arr = np.asarray(im.convert("RGB") if hasattr(im, "convert") else im, dtype=np.float64)
            out.append(float(blur_effect(arr, h_size=self.h_size, channel_axis=-1)))
        return out
