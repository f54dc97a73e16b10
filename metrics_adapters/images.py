"""Image decoding for scoring: any file Pillow reads -> one RGB image, or a clear error.

Policy (part of every image metric's cache key through :data:`DECODE_POLICY`):

- the first frame of animated files;
- EXIF orientation applied (what a viewer shows);
- each Pillow mode by its real range (:func:`_grey_to_8bit`), never by Pillow's
  ``convert("RGB")`` for high-bit-depth grey (which saturates everything above 255 to white):

  * ``I;16``, ``I;16B``, ``I;16L``, ``I;16N`` (16-bit grey): ``round(v / 257)`` (65535 -> 255);
  * ``I`` (32-bit integer grey): negative values are refused; when every value fits 0..65535 the
    image is 16-bit data (PNG/TIFF stored as ``I``) and scaled as above; otherwise it is scaled
    by the full range of the stored sample type, ``round(v * 255 / (2**32 - 1))`` for unsigned
    32-bit files (TIFF ``SampleFormat`` 1) and ``round(v * 255 / (2**31 - 1))`` for signed ones;
  * ``F`` (float grey): NaN, infinite or negative values are refused; values in [0, 1] are scaled
    by 255, values in [0, 255] (some above 1) are taken as they are (rounded), and an image with
    values above 255 (a float TIFF of 0..1000) is scaled by its maximum, ``round(v * 255 / max)``.
    An all-[0, 1] image is always read as the [0, 1] convention;
  * ``1``, ``L``, ``P``, ``RGB``, ``CMYK``, ``YCbCr`` and the alpha modes through Pillow's
    conversion; any other mode (``LAB``, ``HSV``, ...) is refused;

  a refused image is an :class:`ImageDecodeError` naming the file, the mode and the values found
  (the engine records it as that image's failure);
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

DECODE_POLICY = "rgb-v2"  # bump when the policy above changes: it invalidates cached scores
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


class _ValueRangeError(ValueError):
    """Pixel values or a mode the decode policy refuses (made an :class:`ImageDecodeError` with the path)."""


_UNSIGNED_32 = frozenset({"I;32", "I;32N", "I;32L", "I;32B"})  # Pillow's raw modes of unsigned 32-bit samples
_CONVERTED = frozenset({"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr"})
_WITH_ALPHA = frozenset({"RGBA", "LA", "PA", "La", "RGBa"})


def _raw_mode(img: Image.Image) -> str | None:
    """The raw (file) mode of ``img``'s first tile, read before ``load()`` (which clears the tiles)."""
    try:
        args = img.tile[0].args
    except (AttributeError, IndexError):
        return None
    raw = args[0] if isinstance(args, tuple) and args else args
    return raw if isinstance(raw, str) else None


def _grey_to_8bit(a: np.ndarray, mode: str, raw_mode: str | None = None) -> np.ndarray:
    """8-bit grey from a high-bit-depth grey array of Pillow mode ``mode`` (``I;16*``, ``I``, ``F``).

    The rules are the module's (see its docstring).

    Raises
    ------
    _ValueRangeError
        Negative ``I`` values, non-finite ``F`` values, ``F`` values outside [0, 255]
        (the message names the mode and the values found).
    """
    if mode.startswith("I;16"):
        return np.rint(a.astype(np.float64) / 257.0).astype(np.uint8)
    if mode == "I":
        if raw_mode in _UNSIGNED_32:
            a = np.ascontiguousarray(a).astype(np.int32, copy=False).view(np.uint32)  # Pillow stores them as int32
            full = 2.0 ** 32 - 1
        else:
            full = 2.0 ** 31 - 1
        lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
        if lo < 0:
            raise _ValueRangeError(f"expected non-negative values in a 32-bit integer (mode I) image, got a minimum of {lo}")
        scale = 257.0 if hi <= 65535 else full / 255.0
        return np.rint(a.astype(np.float64) / scale).astype(np.uint8)
    if mode == "F":
        a = a.astype(np.float64)
        bad = ~np.isfinite(a)
        if bad.any():
            kinds = " and ".join(k for k, m in (("NaN", np.isnan(a)), ("infinite", np.isinf(a))) if m.any())
            raise _ValueRangeError(f"expected finite values in a float (mode F) image, got {int(bad.sum())} {kinds} pixel(s)")
        lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
        if lo < 0:
            raise _ValueRangeError(f"expected float (mode F) pixel values of 0 or more (read as [0, 1], [0, 255], or "
                                   f"scaled by their maximum), got values in [{lo:g}, {hi:g}]")
        scale = 255.0 if hi <= 1.0 else (1.0 if hi <= 255.0 else 255.0 / hi)
        return np.rint(a * scale).astype(np.uint8)
    raise _ValueRangeError(f"expected a high-bit-depth grey mode (I;16*, I, F), got {mode!r}")


def _to_rgb(img: Image.Image, raw_mode: str | None = None) -> Image.Image:
    mode = img.mode
    if mode == "RGB":
        return img
    if mode.startswith("I;16") or mode in ("I", "F"):
        a = _grey_to_8bit(np.asarray(img), mode, raw_mode)
        return Image.fromarray(a, mode="L").convert("RGB")
    has_alpha = mode in _WITH_ALPHA or (mode in {"P", "L", "RGB"} and "transparency" in img.info)
    if has_alpha:
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode not in _CONVERTED:
        raise _ValueRangeError(f"expected an image mode ts2 can turn into RGB ({', '.join(sorted(_CONVERTED | _WITH_ALPHA))}, "
                         f"I;16*, I, F), got {mode!r}")
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
        The file is not a readable image (corrupt, truncated, unknown format, decompression bomb),
        or its mode or pixel values are refused by the policy above (negative 32-bit integers,
        NaN/infinite or out-of-range floats, a mode with no RGB conversion).

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
            raw_mode = _raw_mode(img)  # before load(), which forgets it: unsigned or signed 32-bit samples
            img.load()   # decode now: truncated or corrupt data fails here, not later
            # In place, and downscaled before the detaching copy: a 12000 x 12000 RGB PNG is then
            # held once at full size, not three times (0.6 GB peak instead of 1.7 GB).
            ImageOps.exif_transpose(img, in_place=True)
            rgb = _to_rgb(img, raw_mode)
            if max_side is not None and max(rgb.size) > max_side:
                rgb.thumbnail((int(max_side), int(max_side)), Image.Resampling.BICUBIC)
            if rgb is img:
                rgb = img.copy()  # detach from the file handle closed below
    except _ValueRangeError as e:
        raise ImageDecodeError(f"{p}: {e}") from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as e:
        raise ImageDecodeError(f"{p}: expected a readable image file, got {type(e).__name__}: {e}") from e
    return rgb
