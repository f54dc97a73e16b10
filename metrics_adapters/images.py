"""Image decoding for scoring: any file Pillow reads -> one RGB image, or a clear error.

Policy (part of every image metric's cache key through :data:`DECODE_POLICY`):

- the first frame of animated files;
- EXIF orientation applied (what a viewer shows);
- 16-bit grey (``I;16*``, ``I``) scaled to 8 bits by 65535 -> 255, not clipped (Pillow's
  ``convert("RGB")`` would saturate everything above 255 to white); float images (``F``) are
  clipped to [0, 255];
- transparency (``RGBA``, ``LA``, ``PA``, palette with a transparent colour) composited on white,
  so transparent pixels do not show whatever colour the encoder left under them;
- CMYK and other modes through Pillow's conversion;
- images longer than ``max_side`` on either side downscaled (aspect kept) to ``max_side``:
  the embedding models resize to a few hundred pixels anyway, and a 20k-pixel scan would
  otherwise take seconds and gigabytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = ["ImageDecodeError", "ImageMissingError", "decode_image", "file_sha256", "DECODE_POLICY",
           "decode_settings"]

DECODE_POLICY = "rgb-v1"  # bump when the policy above changes: it invalidates cached scores
DEFAULT_MAX_SIDE = 4096


class ImageDecodeError(ValueError):
    """An image file that cannot be read as an image (corrupt, truncated, not an image)."""


class ImageMissingError(ImageDecodeError, FileNotFoundError):
    """An image file that does not exist (or an item that has no image path)."""


def decode_settings(max_side: int | None) -> dict:
    """What a decode depends on, for cache keys."""
    return {"policy": DECODE_POLICY, "max_side": None if max_side is None else int(max_side)}


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _to_rgb(img: Image.Image) -> Image.Image:
    mode = img.mode
    if mode == "RGB":
        return img
    if mode.startswith("I;16") or mode == "I":
        # 16-bit grey (PNG/TIFF). "I" is how older Pillow versions open 16-bit PNGs.
        a = np.asarray(img, dtype=np.float64)
        a = np.clip(np.rint(a / 257.0), 0, 255).astype(np.uint8)
        return Image.fromarray(a, mode="L").convert("RGB")
    if mode == "F":
        a = np.clip(np.rint(np.asarray(img, dtype=np.float64)), 0, 255).astype(np.uint8)
        return Image.fromarray(a, mode="L").convert("RGB")
    has_alpha = mode in {"RGBA", "LA", "PA", "La", "RGBa"} or (mode in {"P", "L", "RGB"} and "transparency" in img.info)
    if has_alpha:
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")


def decode_image(path: str | Path | None, max_side: int | None = DEFAULT_MAX_SIDE) -> Image.Image:
    """Read ``path`` into an RGB :class:`PIL.Image.Image` under the module's decode policy.

    Parameters
    ----------
    path : str or Path or None
        The image file.
    max_side : int or None
        Longest allowed side; larger images are downscaled (aspect kept). ``None``: never.

    Returns
    -------
    PIL.Image.Image
        Fully decoded, mode ``"RGB"``.

    Raises
    ------
    ImageMissingError
        ``path`` is ``None`` or no file exists there.
    ImageDecodeError
        The file is not a readable image (corrupt, truncated, unknown format, decompression bomb).

    Examples
    --------
    >>> import tempfile, os
    >>> from PIL import Image
    >>> p = os.path.join(tempfile.mkdtemp(), "x.png")
    >>> Image.new("LA", (8, 4), (0, 0)).save(p)       # fully transparent black
    >>> im = decode_image(p)
    >>> im.mode, im.size, im.getpixel((0, 0))
    ('RGB', (8, 4), (255, 255, 255))
    """
    if path is None:
        raise ImageMissingError("expected an image path, got none (was the dataset loaded without images?)")
    p = Path(path)
    if not p.is_file():
        raise ImageMissingError(f"expected an image file at {p}, found none")
    try:
        with Image.open(p) as img:
            img.seek(0)  # first frame of animated GIF/PNG/WebP
            img.load()   # decode now: truncated or corrupt data fails here, not later
            # In place, and downscaled before the detaching copy: a 12000 x 12000 RGB PNG is then
            # held once at full size, not three times (0.6 GB peak instead of 1.7 GB).
            ImageOps.exif_transpose(img, in_place=True)
            rgb = _to_rgb(img)
            if max_side is not None and max(rgb.size) > max_side:
                rgb.thumbnail((int(max_side), int(max_side)), Image.Resampling.BICUBIC)
            if rgb is img:
                rgb = img.copy()  # detach from the file handle closed below
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as e:
        raise ImageDecodeError(f"{p}: expected a readable image file, got {type(e).__name__}: {e}") from e
    return rgb
