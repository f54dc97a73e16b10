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
import os
import stat
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = ["ImageDecodeError", "ImageMissingError", "decode_image", "file_sha256", "DECODE_POLICY",
           "decode_settings", "MAX_IMAGE_BYTES", "GPU_DECODE_POLICY"]

DECODE_POLICY = "rgb-v1"  # bump when the policy above changes: it invalidates cached scores
GPU_DECODE_POLICY = "nvjpeg-v1"  # decode=gpu: JPEGs through torchvision.io.decode_jpeg on CUDA
DEFAULT_MAX_SIDE = 4096
MAX_IMAGE_BYTES = 1 << 30  # a bigger "image" file is refused before it is read (hashing reads it whole)


class ImageDecodeError(ValueError):
    """An image file that cannot be read as an image (corrupt, truncated, not an image)."""


class ImageMissingError(ImageDecodeError, FileNotFoundError):
    """An image file that does not exist (or an item that has no image path)."""


def decode_settings(max_side: int | None, decoder: str = "pil") -> dict:
    """What a decode depends on, for cache keys (``decoder="pil"`` keeps the keys of older runs)."""
    out = {"policy": DECODE_POLICY, "max_side": None if max_side is None else int(max_side)}
    if decoder != "pil":
        out["gpu_jpeg"] = GPU_DECODE_POLICY
    return out


_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def _file_kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "special file")


def file_sha256(path: str | Path, chunk: int = 1 << 20, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[str, os.stat_result]:
    """SHA-256 (hex) of a regular file's bytes, and the ``stat`` of the file that was read.

    The file is opened without blocking and checked on its descriptor (no race with a swap):
    a FIFO, a device such as ``/dev/zero``, a directory or a file over ``max_bytes`` is refused
    instead of hanging or reading forever; the read stops at ``max_bytes`` even if the file grows.

    Raises
    ------
    ImageMissingError
        Nothing exists at ``path`` (or a dangling symlink).
    ImageDecodeError
        Not a regular file, too big, a symlink loop, or unreadable (the message names the path).
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError as e:
        raise ImageMissingError(f"expected a file at {p}, found none") from e
    except OSError as e:  # a symlink loop (ELOOP), permissions, ...
        raise ImageDecodeError(f"{p}: expected a readable image file, got {e.strerror or e}") from e
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ImageDecodeError(f"{p}: expected a regular image file, got a {_file_kind(st.st_mode)}")
        if st.st_size > max_bytes:
            raise ImageDecodeError(f"{p}: expected an image file of at most {max_bytes} bytes, got {st.st_size}")
        h = hashlib.sha256()
        left = max_bytes + 1
        while left > 0 and (block := f.read(min(chunk, left))):
            h.update(block)
            left -= len(block)
        if left <= 0:
            raise ImageDecodeError(f"{p}: expected an image file of at most {max_bytes} bytes, it grew past that")
    return h.hexdigest(), st


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
    try:
        st = p.stat()
    except FileNotFoundError as e:
        raise ImageMissingError(f"expected a file at {p}, found none") from e
    except OSError as e:  # a symlink loop, permissions
        raise ImageDecodeError(f"{p}: expected a readable image file, got {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):  # Pillow would block on a FIFO or read /dev/zero forever
        raise ImageDecodeError(f"{p}: expected a regular image file, got a {_file_kind(st.st_mode)}")
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
