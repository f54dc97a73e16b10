"""Regenerate the small committed files of the bad-input corpus (``python tests/data/bad/make_corpus.py``).

Deterministic: the same Pillow version writes the same bytes. The huge image is NOT committed:
tests/test_bad_inputs.py draws it at run time (a 12000 x 12000 PNG compresses to a few hundred
KB but decodes to 432 MB). ``cases.yaml`` (hand-written) says what each file must produce.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).parent


def _noise(seed: int, size: int = 24, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), "RGB").convert(mode)


def main() -> None:
    img = HERE / "images"
    img.mkdir(exist_ok=True)
    _noise(0).save(img / "ok.png")
    _noise(1).save(img / "ok2.png")
    # a PNG whose name says JPEG: Pillow reads the content, not the name
    _noise(2).save(img / "png_named.jpg", format="PNG")
    # CMYK JPEG (print workflows): converted to RGB
    _noise(3, mode="CMYK").save(img / "cmyk.jpg", format="JPEG", quality=90)
    # 16-bit grey PNG: a horizontal ramp 0 .. 65535, scaled to 8 bits (not saturated at 255)
    ramp = np.tile(np.linspace(0, 65535, 24).round().astype(np.uint16), (24, 1))
    Image.fromarray(ramp).save(img / "grey16.png")
    # valid PNG signature followed by garbage
    (img / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(np.random.default_rng(4).integers(0, 256, 200,
                                                                                                   dtype=np.uint8)))
    # the first 60% of a valid PNG: decoding fails half way
    buf = io.BytesIO()
    _noise(5, size=64).save(buf, format="PNG")
    data = buf.getvalue()
    (img / "truncated.png").write_bytes(data[: int(len(data) * 0.6)])
    # zero bytes with an image name
    (img / "zero.jpg").write_bytes(b"")
    # a text file with an image name
    (img / "not_an_image.png").write_text("this is not an image\n")


if __name__ == "__main__":
    main()
