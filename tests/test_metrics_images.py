"""Image decoding policy: every odd mode ends as the RGB a viewer would show, or a clear error."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from metrics_adapters.images import ImageDecodeError, ImageMissingError, decode_image, decode_settings, file_sha256


def test_rgb_roundtrip_is_exact(tmp_path):
    a = np.random.default_rng(0).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    Image.fromarray(a).save(tmp_path / "x.png")
    im = decode_image(tmp_path / "x.png")
    assert im.mode == "RGB" and im.size == (13, 9)
    np.testing.assert_array_equal(np.asarray(im), a)


def test_16bit_grey_is_scaled_not_saturated(tmp_path):
    # 0, 257*100, 65535 must map to 0, 100, 255; Pillow's convert("RGB") would give 0, 255, 255.
    a = np.array([[0, 257 * 100, 65535]], dtype=np.uint16)
    Image.fromarray(a).save(tmp_path / "g16.png")
    assert Image.open(tmp_path / "g16.png").mode.startswith("I")
    im = decode_image(tmp_path / "g16.png")
    assert im.mode == "RGB"
    assert [im.getpixel((x, 0)) for x in range(3)] == [(0, 0, 0), (100, 100, 100), (255, 255, 255)]


def test_cmyk_jpeg_becomes_rgb(tmp_path):
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(tmp_path / "c.jpg")  # pure red in CMYK
    r, g, b = decode_image(tmp_path / "c.jpg").getpixel((4, 4))
    assert r > 200 and g < 60 and b < 60


def test_palette_transparency_composited_on_white(tmp_path):
    im = Image.new("P", (4, 2))
    im.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    im.putpixel((0, 0), 1)                       # red, opaque
    im.info["transparency"] = 0                  # index 0 (black) is transparent
    im.save(tmp_path / "p.png", transparency=0)
    out = decode_image(tmp_path / "p.png")
    assert out.getpixel((0, 0)) == (255, 0, 0)
    assert out.getpixel((1, 0)) == (255, 255, 255)  # not the black under the transparency


def test_half_transparent_rgba_blends_with_white(tmp_path):
    Image.new("RGBA", (2, 2), (0, 0, 0, 128)).save(tmp_path / "a.png")
    v = decode_image(tmp_path / "a.png").getpixel((0, 0))
    assert v[0] == v[1] == v[2] and abs(v[0] - 127) <= 1  # 255 * (1 - 128/255)


def test_exif_orientation_applied(tmp_path):
    im = Image.new("RGB", (6, 2), (0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW to display
    im.save(tmp_path / "o.jpg", exif=exif)
    assert decode_image(tmp_path / "o.jpg").size == (2, 6)


def test_huge_image_downscaled_keeping_aspect(tmp_path):
    Image.new("RGB", (3000, 600), (10, 20, 30)).save(tmp_path / "big.png")
    im = decode_image(tmp_path / "big.png", max_side=1000)
    assert im.size == (1000, 200)
    assert decode_image(tmp_path / "big.png", max_side=None).size == (3000, 600)


def test_first_frame_of_animation(tmp_path):
    frames = [Image.new("RGB", (4, 4), c) for c in [(255, 0, 0), (0, 255, 0)]]
    frames[0].save(tmp_path / "a.gif", save_all=True, append_images=frames[1:])
    r, g, _ = decode_image(tmp_path / "a.gif").getpixel((1, 1))
    assert r > 200 and g < 50


@pytest.mark.parametrize("content", [b"", b"not an image at all", None])
def test_corrupt_files_raise_clear_error(tmp_path, content):
    p = tmp_path / "bad.jpg"
    if content is None:  # a real JPEG cut in half
        buf = io.BytesIO()
        Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
        content = buf.getvalue()[: len(buf.getvalue()) // 2]
    p.write_bytes(content)
    with pytest.raises(ImageDecodeError, match="expected a readable image file") as e:
        decode_image(p)
    assert str(p) in str(e.value)
    assert not isinstance(e.value, ImageMissingError)


def test_missing_file_and_missing_path(tmp_path):
    with pytest.raises(ImageMissingError, match="found none"):
        decode_image(tmp_path / "nope.png")
    with pytest.raises(ImageMissingError, match="expected an image path"):
        decode_image(None)


def test_file_sha256_and_decode_settings(tmp_path):
    import hashlib

    p = tmp_path / "f.bin"
    p.write_bytes(b"abc" * 1000)
    assert file_sha256(p, chunk=7)[0] == hashlib.sha256(b"abc" * 1000).hexdigest()
    assert decode_settings(512) != decode_settings(1024)
