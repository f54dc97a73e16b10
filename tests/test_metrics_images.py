"""Image decoding policy: every odd mode ends as the RGB a viewer would show, or a clear error."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hostile_cases import tiff_32bit
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


# -- issue 24, item 7: every Pillow mode by its real range ----------------------------------------------
# Each expected array is computed here from the pixel values written, not by Pillow's conversion.
def _grey(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.uint8)
    return np.repeat(v[..., None], 3, axis=-1)


def test_mode_1_black_and_white(tmp_path):
    im = Image.new("1", (3, 1))
    im.putpixel((1, 0), 1)
    im.save(tmp_path / "b.png")
    assert Image.open(tmp_path / "b.png").mode == "1"
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "b.png")), _grey([[0, 255, 0]]))


def test_mode_L_grey_is_copied(tmp_path):
    a = np.array([[0, 7, 128, 255]], dtype=np.uint8)
    Image.fromarray(a, mode="L").save(tmp_path / "l.png")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "l.png")), _grey(a))


def test_mode_P_looks_up_the_palette(tmp_path):
    palette = [10, 20, 30, 200, 100, 0, 1, 2, 3]
    im = Image.new("P", (3, 1))
    im.putpalette(palette + [0] * (768 - len(palette)))
    for x, idx in enumerate([2, 0, 1]):
        im.putpixel((x, 0), idx)
    im.save(tmp_path / "p.png")
    expected = np.array([[palette[3 * i:3 * i + 3] for i in (2, 0, 1)]], dtype=np.uint8)
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "p.png")), expected)


@pytest.mark.parametrize("mode, pixels", [
    ("LA", [(0, 0), (200, 255), (100, 128)]),
    ("RGBA", [(10, 20, 30, 0), (10, 20, 30, 255), (0, 100, 200, 128)]),
])
def test_alpha_modes_composite_on_white(tmp_path, mode, pixels):
    im = Image.new(mode, (len(pixels), 1))
    for x, px in enumerate(pixels):
        im.putpixel((x, 0), px)
    im.save(tmp_path / "a.png")
    colour = np.array([px[:-1] * (3 if mode == "LA" else 1) for px in pixels], dtype=np.float64)
    alpha = np.array([px[-1] for px in pixels], dtype=np.float64)[:, None] / 255.0
    expected = np.rint(colour * alpha + 255.0 * (1 - alpha))[None]
    np.testing.assert_allclose(np.asarray(decode_image(tmp_path / "a.png")).astype(float), expected, atol=1)


def test_mode_RGB_exact(tmp_path):
    a = np.array([[[1, 2, 3], [250, 128, 0]]], dtype=np.uint8)
    Image.fromarray(a).save(tmp_path / "rgb.png")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "rgb.png")), a)


def test_mode_CMYK_multiplies_ink_and_black(tmp_path):
    cmyk = [(0, 0, 0, 0), (255, 0, 0, 0), (0, 0, 0, 255), (51, 0, 102, 51)]
    im = Image.new("CMYK", (4, 1))
    for x, px in enumerate(cmyk):
        im.putpixel((x, 0), px)
    im.save(tmp_path / "c.tif")
    assert Image.open(tmp_path / "c.tif").mode == "CMYK"
    c = np.array(cmyk, dtype=np.float64)
    expected = np.rint((255 - c[:, :3]) * (255 - c[:, 3:]) / 255.0)[None]  # (1 - ink) * (1 - black)
    np.testing.assert_allclose(np.asarray(decode_image(tmp_path / "c.tif")).astype(float), expected, atol=1)


@pytest.mark.parametrize("dtype, suffix", [("<u2", "png"), ("<u2", "tif"), (">u2", "tif")])
def test_16bit_modes_from_files(tmp_path, dtype, suffix):
    values = np.array([[0, 257, 1000, 32768, 65535]])
    mode = "I;16B" if dtype.startswith(">") else "I;16"
    Image.frombytes(mode, (5, 1), values.astype(dtype).tobytes()).save(tmp_path / f"g.{suffix}")
    assert Image.open(tmp_path / f"g.{suffix}").mode in ("I;16", "I;16B", "I")
    expected = _grey(np.rint(values / 257.0))  # 0, 1, 4 (3.89), 128 (127.50), 255
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / f"g.{suffix}")), expected)


@pytest.mark.parametrize("mode, dtype", [("I;16", "<u2"), ("I;16L", "<u2"), ("I;16B", ">u2")])
def test_16bit_modes_in_memory(mode, dtype):
    from metrics_adapters.images import _to_rgb

    values = np.array([[0, 514, 65535]])
    im = Image.frombytes(mode, (3, 1), values.astype(dtype).tobytes())
    assert im.mode == mode
    np.testing.assert_array_equal(np.asarray(_to_rgb(im)), _grey([[0, 2, 255]]))


def test_mode_I_with_16bit_values_is_read_as_16bit(tmp_path):
    values = np.array([[0, 25700, 65535]], dtype=np.int32)
    Image.fromarray(values).save(tmp_path / "i.tif")  # Pillow writes mode I as signed 32-bit
    assert Image.open(tmp_path / "i.tif").mode == "I"
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "i.tif")), _grey([[0, 100, 255]]))


def test_unsigned_32bit_tiff_uses_the_full_32bit_range(tmp_path):
    # Pillow reads it as int32 (4294967295 -> -1); the old policy divided by 257 and clipped: all white.
    values = np.array([[0, 1 << 24, 1 << 31, 4294967295, 70000]], dtype=np.uint64)
    tiff_32bit(tmp_path / "u32.tif", values, sample_format=1)
    assert Image.open(tmp_path / "u32.tif").mode == "I"
    expected = _grey(np.rint(values * 255.0 / 4294967295.0))  # 0, 1, 128, 255, 0
    assert expected[0, :, 0].tolist() == [0, 1, 128, 255, 0]
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "u32.tif")), expected)


def test_signed_32bit_tiff_uses_the_signed_range_and_refuses_negatives(tmp_path):
    values = np.array([[0, 1 << 30, 2147483647]], dtype=np.int64)
    tiff_32bit(tmp_path / "s32.tif", values, sample_format=2)
    expected = _grey(np.rint(values * 255.0 / 2147483647.0))  # 0, 128, 255
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "s32.tif")), expected)
    tiff_32bit(tmp_path / "neg.tif", np.array([[5, -3]]), sample_format=2)
    with pytest.raises(ImageDecodeError, match=r"neg\.tif: expected non-negative values .* minimum of -3"):
        decode_image(tmp_path / "neg.tif")


def test_float_in_unit_range_is_scaled_by_255(tmp_path):
    values = np.array([[0.0, 0.25, 0.5, 1.0]], dtype=np.float32)
    Image.fromarray(values, mode="F").save(tmp_path / "f.tif")
    assert Image.open(tmp_path / "f.tif").mode == "F"
    # Was black: values <= 1 were taken as 0..255 levels.
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "f.tif")), _grey([[0, 64, 128, 255]]))


def test_float_in_byte_range_is_taken_as_is(tmp_path):
    values = np.array([[0.0, 1.5, 99.4, 255.0]], dtype=np.float32)
    Image.fromarray(values, mode="F").save(tmp_path / "f.tif")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "f.tif")), _grey([[0, 2, 99, 255]]))


def test_float_above_255_is_scaled_by_its_maximum(tmp_path):
    """Issue 46: a float TIFF of 0..1000 is a valid image: round(v * 255 / 1000)."""
    values = np.array([[0.0, 250.0, 500.0, 1000.0]], dtype=np.float32)
    Image.fromarray(values, mode="F").save(tmp_path / "f.tif")
    np.testing.assert_array_equal(np.asarray(decode_image(tmp_path / "f.tif")), _grey([[0, 64, 128, 255]]))


@pytest.mark.parametrize("values, reason", [
    ([0.5, np.nan], r"finite values .* got 1 NaN pixel"),
    ([0.5, np.inf], r"finite values .* got 1 infinite pixel"),
    ([-0.5, 0.5], r"float \(mode F\) pixel values of 0 or more .*, got values in \[-0.5, 0.5\]"),
])
def test_float_out_of_range_or_not_finite_is_a_per_image_failure(tmp_path, values, reason):
    Image.fromarray(np.array([values], dtype=np.float32), mode="F").save(tmp_path / "bad.tif")
    with pytest.raises(ImageDecodeError, match=r"bad\.tif: expected " + reason):
        decode_image(tmp_path / "bad.tif")


def test_mode_without_an_rgb_conversion_is_refused():
    from metrics_adapters.images import _to_rgb, _ValueRangeError

    with pytest.raises(_ValueRangeError, match="got 'HSV'"):
        _to_rgb(Image.new("HSV", (2, 2)))
