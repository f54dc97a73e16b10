"""Classical no-reference blur measure (Crete-Roffet et al., 2007) on numpy and scipy, usable offline.

It is scikit-image's ``skimage.measure.blur_effect`` (0.19 - 0.26) written with ``scipy.ndimage``
only, so that ``blur`` runs on the light install (scikit-image and its image I/O stack would add
about 37 MB to a venv of 480 MB). ``tests/test_controls.py`` checks it equals scikit-image's
function wherever scikit-image is installed (the ``test`` extra installs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import Metric, ScoreItem

__all__ = ["BlurEffect", "blur_effect"]

# Luma weights of scikit-image's rgb2gray (ITU-R BT.709).
_LUMA = np.array([0.2125, 0.7154, 0.0721])
_SOBEL_EDGE = np.array([1.0, 0.0, -1.0])
_SOBEL_SMOOTH = np.array([1.0, 2.0, 1.0]) / 4
_EPSILON = np.spacing(np.float64(1))


def blur_effect(rgb: Any, h_size: int = 11) -> float:
    """Blur effect of an RGB image: 0 sharp .. 1 fully blurred (Crete-Roffet et al., 2007).

    The image is converted to grey (``Y = 0.2125 R + 0.7154 G + 0.0721 B``). Along each axis
    ``a``, with ``S = |sobel_a(Y)|`` and ``B = |sobel_a(uniform_filter_a(Y, h_size))|`` (both
    floored at machine epsilon, boundaries reflected), ``b_a = |sum S - sum max(0, S - B)| / sum S``
    over the pixels ``[2, n - 1)`` of each axis; the result is ``max(b_0, b_1)``. It is
    invariant to the scale of the pixel values (0..1 or 0..255 give the same number, up to the
    epsilon floor).

    Parameters
    ----------
    rgb : array-like, shape (H, W, 3)
        The image (any numeric dtype; used as float64).
    h_size : int
        Size of the re-blurring filter (scikit-image's default 11).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``rgb`` is not ``(H, W, 3)``.

    Examples
    --------
    >>> import scipy.ndimage as ndi
    >>> sharp = np.random.default_rng(0).random((32, 32, 3))
    >>> soft = ndi.uniform_filter(sharp, size=(5, 5, 1))
    >>> bool(blur_effect(sharp) < blur_effect(soft))
    True
    """
    import scipy.ndimage as ndi

    a = np.asarray(rgb, dtype=np.float64)
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"expected an RGB image of shape (H, W, 3), got shape {a.shape}")
    grey = a @ _LUMA
    inner = tuple(slice(2, n - 1) for n in grey.shape)
    per_axis = []
    for ax in (0, 1):
        # Sobel along `ax`, smoothing across it: scikit-image's sobel(image, axis=ax)
        kernel = np.outer(_SOBEL_EDGE, _SOBEL_SMOOTH) if ax == 0 else np.outer(_SOBEL_SMOOTH, _SOBEL_EDGE)
        sharp = np.maximum(_EPSILON, np.abs(ndi.convolve(grey, kernel, mode="reflect")))
        reblurred = ndi.uniform_filter1d(grey, h_size, axis=ax)
        blurred = np.maximum(_EPSILON, np.abs(ndi.convolve(reblurred, kernel, mode="reflect")))
        m1 = np.sum(sharp[inner])
        m2 = np.sum(np.maximum(0.0, sharp - blurred)[inner])
        per_axis.append(float(np.abs(m1 - m2) / m1))
    return max(per_axis)


class BlurEffect(Metric):
    """The blur effect of each image (Crete-Roffet et al., 2007), :func:`blur_effect`.

    The strength of blur, from the variation between the image and a re-blurred copy along each
    axis (the larger of the two), on the grey version of the RGB image. 0 means sharp, 1 fully
    blurred: lower is better. Prompt-independent.

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
        # The implementation is in the key: scores cached under scikit-image's version are
        # recomputed once (a cheap measure) rather than trusted across implementations.
        return {"h_size": self.h_size, "reduce": "max", "impl": "ts2-scipy-1"}

    def flops_per_image(self) -> float | None:
        return None  # a few filters per pixel: negligible next to any model

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        return [blur_effect(im.convert("RGB") if hasattr(im, "convert") else im, h_size=self.h_size)
                for im in images]
