"""Naming colours from pixels: a fixed HSV partition into basic colour terms.

GenEval classifies an object's colour among basic colour terms (Berlin and Kay) with a CLIP
model on the masked crop. For flat-coloured scenes (the bundled synthetic set) and as a
weights-free default, this module names each pixel by where it falls in HSV space:

- value < 0.2: ``black``; saturation < 0.2: ``white`` (value > 0.85) or ``gray``;
- otherwise by hue (degrees): red [345, 15), orange [15, 40), yellow [40, 70), green [70, 165),
  cyan [165, 195), blue [195, 255), purple [255, 295), pink [295, 345); an orange or red hue
  with value < 0.6 is ``brown``.

The boundaries are generic colour-term boundaries, fixed here once; they are not fitted to (and
do not read) any dataset's palette.
"""

from __future__ import annotations

import numpy as np

__all__ = ["COLOUR_NAMES", "CHROMATIC", "colour_index", "name_colours", "dominant_colour", "normalise_colour"]

COLOUR_NAMES = ("black", "white", "gray", "red", "orange", "yellow", "green", "cyan", "blue", "purple",
                "pink", "brown")
CHROMATIC = frozenset(COLOUR_NAMES[3:])
_IDX = {n: i for i, n in enumerate(COLOUR_NAMES)}
# hue bin upper edges (degrees) -> name; the first bin wraps around from 345.
_HUE_EDGES = np.array([15, 40, 70, 165, 195, 255, 295, 345, 360], dtype=float)
_HUE_NAMES = np.array([_IDX[n] for n in ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink", "red")])
_SYNONYMS = {"grey": "gray", "violet": "purple", "magenta": "pink", "teal": "cyan", "turquoise": "cyan"}


def normalise_colour(word: str) -> str | None:
    """A colour word as one of :data:`COLOUR_NAMES` (``grey`` -> ``gray``), or ``None``."""
    w = str(word).strip().lower()
    w = _SYNONYMS.get(w, w)
    return w if w in _IDX else None


def colour_index(rgb: np.ndarray) -> np.ndarray:
    """Index into :data:`COLOUR_NAMES` of each pixel of an ``(..., 3)`` uint8 RGB array.

    Examples
    --------
    >>> [COLOUR_NAMES[i] for i in colour_index(np.array([[220, 30, 30], [30, 60, 220], [245, 245, 240]]))]
    ['red', 'blue', 'white']
    """
    a = np.asarray(rgb, dtype=np.float64) / 255.0
    if a.shape[-1] != 3:
        raise ValueError(f"expected an (..., 3) RGB array, got shape {a.shape}")
    mx, mn = a.max(-1), a.min(-1)
    v = mx
    chroma = mx - mn
    s = np.where(mx > 0, chroma / np.where(mx > 0, mx, 1), 0.0)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    safe = np.where(chroma > 0, chroma, 1.0)
    h = np.where(mx == r, ((g - b) / safe) % 6.0,
                 np.where(mx == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0)) * 60.0
    h = np.where(chroma > 0, h, 0.0)
    hue_idx = _HUE_NAMES[np.searchsorted(_HUE_EDGES, h, side="right").clip(0, len(_HUE_EDGES) - 1)]
    out = hue_idx.copy()
    brownish = ((h < 40) | (h >= 345)) & (v < 0.6)
    out = np.where(brownish, _IDX["brown"], out)
    out = np.where(s < 0.2, np.where(v > 0.85, _IDX["white"], _IDX["gray"]), out)
    out = np.where(v < 0.2, _IDX["black"], out)
    return out.astype(np.int64)


def name_colours(rgb: np.ndarray) -> np.ndarray:
    """Colour names (str array) of an ``(..., 3)`` RGB array."""
    return np.asarray(COLOUR_NAMES, dtype=object)[colour_index(rgb)]


def dominant_colour(pixels: np.ndarray, chromatic_first: bool = True) -> str | None:
    """The most frequent colour name among ``(N, 3)`` pixels (``None`` for no pixels).

    With ``chromatic_first``, a chromatic colour holding at least a quarter of the pixels wins
    over white/gray/black (highlights and shadows should not rename a red car "white").
    """
    px = np.asarray(pixels).reshape(-1, 3)
    if px.size == 0:
        return None
    counts = np.bincount(colour_index(px), minlength=len(COLOUR_NAMES))
    if chromatic_first:
        chrom = counts.copy()
        chrom[:3] = 0
        if chrom.max() >= 0.25 * counts.sum():
            return COLOUR_NAMES[int(chrom.argmax())]
    return COLOUR_NAMES[int(counts.argmax())]
