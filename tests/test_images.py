"""Tests for ``lpips_core.images``: loading untrusted image files safely.

The bad-image corpus is generated in memory by ``tests/image_corpus.py`` (no binary blobs).
"""

from __future__ import annotations

import io
import re
import time
import warnings

import numpy as np
import pytest
from PIL import Image, ImageFile

from image_corpus import bomb_png, corpus, exif_jpeg, marker_image, png16_rgb
from lpips_core.images import (
    DECODE_MAX_PIXELS,
    DEFAULT_MAX_PIXELS,
    MIN_INPUT_SIDE,
    ImageLoadError,
    ImageTooLarge,
    header_pixels,
    LoadedImage,
    array_from_uint8,
    image_to_png_bytes,
    load_image,
    min_side_for,
)

CASES = corpus()


def _png(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def _upload(data: bytes, name: str) -> io.BytesIO:
    """Stand-in for Streamlit's UploadedFile: a BytesIO with a ``name``."""
    source = io.BytesIO(data)
    source.name = name
    return source


def _check_output(result: LoadedImage) -> None:
    a = result.array
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    assert a.ndim == 3 and a.shape[2] == 3 and a.flags["C_CONTIGUOUS"]
    assert result.size == a.shape[:2]
    assert np.isfinite(a).all() and a.min() >= 0.0 and a.max() <= 1.0


# ---------------------------------------------------------------------------------------------
# The whole corpus: only ImageLoadError may escape, and each case gives its own message.


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case(case):
    try:
        result = load_image(_upload(case.data, case.filename), **case.kwargs)
    except ImageLoadError as exc:
        assert case.expect == "error", f"{case.name} should load but raised: {exc}"
        message = str(exc)
        assert re.search(case.match, message), f"{message!r} !~ {case.match!r}"
        assert case.filename in message  # the message names the file
        return
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{case.name}: {type(exc).__name__} escaped instead of ImageLoadError: {exc}")
    assert case.expect == "ok", f"{case.name} should be refused but loaded: {result.notices}"
    notices = "\n".join(result.notices)
    assert re.search(case.match, notices), f"{notices!r} !~ {case.match!r}"
    _check_output(result)
    if case.shape is not None:
        assert result.size == case.shape


def test_corpus_names_unique_and_cover_brief():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    required = {
        "jpeg_exif6", "mode_1_png", "mode_L_png", "mode_LA_png", "mode_P_png",
        "mode_P_transparent_png", "mode_RGBA_png", "png16_gray", "cmyk_jpeg", "gif_animated",
        "truncated_png", "truncated_jpeg", "random_bytes", "pdf_renamed_png", "empty_file",
        "bomb_20000x20000", "over_max_side", "tiny_upscaled", "tiny_small_error",
    }
    assert required <= set(names)


def test_bomb_file_is_small():
    data = bomb_png()
    assert len(data) < 100_000  # 20 000 x 20 000 pixels in ~50 kB


# ---------------------------------------------------------------------------------------------
# Exact values


def test_rgb8_png_round_trip_is_exactly_value_over_255():
    pixels = np.arange(256 * 3, dtype=np.uint16).reshape(16, 16, 3) % 256
    pixels = pixels.astype(np.uint8)
    result = load_image(_png(Image.fromarray(pixels)))
    expected = pixels.astype(np.float64) / 255.0
    np.testing.assert_array_equal(result.array, expected.astype(np.float32))
    assert result.notices == ()
    assert (result.format, result.mode, result.bit_depth) == ("PNG", "RGB", 8)
    assert result.original_size == (16, 16) and result.size == (16, 16)
    assert not result.had_alpha and not result.was_grayscale and not result.exif_rotated
    assert result.n_frames == 1 and result.downscaled_from is None
    assert result.upscaled_from is None


def test_exif_orientation_6_rotates_clockwise():
    # Stored 64 x 32 (W x H) with a red block top-left; orientation 6 = rotate 90° clockwise,
    # so the output is 64 high, 32 wide, and the red block ends up top-right.
    result = load_image(exif_jpeg(marker_image(64, 32), 6))
    assert result.original_size == (64, 32)
    assert result.array.shape == (64, 32, 3)
    assert result.exif_orientation == 6 and result.exif_rotated
    top_right = result.array[4:12, 20:28].mean(axis=(0, 1))
    top_left = result.array[4:12, 4:12].mean(axis=(0, 1))
    np.testing.assert_allclose(top_right, [1.0, 0.0, 0.0], atol=0.06)
    np.testing.assert_allclose(top_left, [128 / 255] * 3, atol=0.06)


def test_exif_orientation_8_rotates_counter_clockwise():
    # Orientation 8 = rotate 90° counter-clockwise: the top-left block goes bottom-left.
    result = load_image(exif_jpeg(marker_image(64, 32), 8))
    assert result.array.shape == (64, 32, 3)
    bottom_left = result.array[52:60, 4:12].mean(axis=(0, 1))
    np.testing.assert_allclose(bottom_left, [1.0, 0.0, 0.0], atol=0.06)


def test_rgba_composited_on_white_exactly():
    result = load_image(_png(Image.new("RGBA", (4, 3), (255, 0, 0, 128))))
    a = 128 / 255
    expected = np.array([1.0 * a + (1 - a), 0.0 * a + (1 - a), 0.0 * a + (1 - a)])
    assert result.array[0, 0].tolist() == expected.astype(np.float32).tolist()
    assert result.array[0, 0, 0] == 1.0
    assert result.array[0, 0, 1] == np.float32(127 / 255)
    assert result.had_alpha and result.mode == "RGBA"


def test_rgba_background_option_and_fully_transparent_pixels():
    pixels = np.zeros((2, 2, 4), dtype=np.uint8)
    pixels[0, 0] = (10, 20, 30, 255)  # opaque: kept exactly
    result = load_image(_png(Image.fromarray(pixels)), background=(0.0, 0.5, 1.0))
    np.testing.assert_array_equal(result.array[0, 0], np.float32([10, 20, 30]) / 255)
    np.testing.assert_array_equal(result.array[1, 1], np.float32([0.0, 0.5, 1.0]))
    assert re.search(r"75% of the pixels .*RGB 0, 0.5, 1", result.notices[0])


def test_opaque_rgba_has_no_notice():
    result = load_image(_png(Image.new("RGBA", (3, 3), (1, 2, 3, 255))))
    assert result.notices == () and result.had_alpha
    np.testing.assert_array_equal(result.array[0, 0], np.float32([1, 2, 3]) / 255)


def test_png16_gray_is_value_over_65535():
    values = np.array([[0, 1, 257, 32768, 65534, 65535]], dtype=np.uint16)
    result = load_image(_png(Image.fromarray(values)))
    expected = (values.astype(np.float64) / 65535).astype(np.float32)
    np.testing.assert_array_equal(result.array[..., 0], expected)
    np.testing.assert_array_equal(result.array[..., 2], expected)
    assert result.bit_depth == 16 and result.was_grayscale and result.mode == "I;16"
    assert result.array[0, 1, 0] != 0.0  # 1/65535 is not rounded away as it would be at 8 bit


def test_png16_rgb_is_reduced_to_8_bit_high_byte():
    values = np.zeros((1, 2, 3), dtype=np.uint16)
    values[0, 0] = (65535, 1000, 255)
    values[0, 1] = (256, 511, 0)
    result = load_image(png16_rgb(values))
    expected = (values >> 8).astype(np.float64) / 255
    np.testing.assert_array_equal(result.array, expected.astype(np.float32))
    assert result.bit_depth == 16
    assert "16 bits per colour channel" in result.notices[0]


def test_mode_1_and_L_values():
    bits = np.array([[False, True, True]])
    result = load_image(_png(Image.fromarray(bits)))
    np.testing.assert_array_equal(result.array[0, :, 0], [0.0, 1.0, 1.0])
    assert result.bit_depth == 1 and result.was_grayscale
    gray = np.array([[0, 7, 255]], dtype=np.uint8)
    result = load_image(_png(Image.fromarray(gray)))
    np.testing.assert_array_equal(result.array[0], np.repeat(np.float32(gray[0] / 255)[:, None],
                                                             3, axis=1))


def test_la_composites_gray_on_background():
    la = Image.merge("LA", [Image.new("L", (2, 2), 0), Image.new("L", (2, 2), 51)])  # a = 0.2
    result = load_image(_png(la), background=(1.0, 0.0, 0.5))
    a = 51 / 255
    expected = np.array([1.0 * (1 - a), 0.0, 0.5 * (1 - a)]).astype(np.float32)
    np.testing.assert_array_equal(result.array[0, 0], expected)


def test_palette_with_transparency():
    palette = Image.new("P", (3, 1), 0)
    palette.putpalette([255, 0, 0, 0, 0, 255] + [0, 0, 0] * 254)
    palette.putpixel((2, 0), 1)
    result = load_image(_png(palette, transparency=1))
    np.testing.assert_array_equal(result.array[0, 0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(result.array[0, 2], [1.0, 1.0, 1.0])  # transparent -> white
    assert result.had_alpha and result.mode == "P"


def test_cmyk_jpeg_red():
    buffer = io.BytesIO()
    Image.new("CMYK", (16, 16), (0, 255, 255, 0)).save(buffer, "JPEG", quality=95)
    result = load_image(buffer.getvalue())
    np.testing.assert_allclose(result.array[8, 8], [1.0, 0.0, 0.0], atol=0.02)
    assert result.mode == "CMYK"


def test_animated_gif_first_frame():
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    result = load_image(buffer.getvalue())
    np.testing.assert_array_equal(result.array, np.broadcast_to([1.0, 0.0, 0.0], (8, 8, 3)))
    assert result.n_frames == 3
    assert "3 frames" in result.notices[0]


# ---------------------------------------------------------------------------------------------
# Sizes: bombs, downscaling, upscaling


def test_bomb_refused_from_header_even_without_pillows_guard(monkeypatch):
    """Our max_pixels check works when an app has disabled Pillow's global guard."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    loads = []
    real_load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load",
                        lambda self: loads.append(1) or real_load(self))
    start = time.perf_counter()
    with pytest.raises(ImageLoadError, match=r"20000 x 20000 pixels \(W x H\) = 400,000,000 "
                                             r"pixels, more than the 80,000,000 .*refused "
                                             r"before decoding"):
        load_image(bomb_png())
    assert time.perf_counter() - start < 1.0
    assert loads == []  # no pixel was decoded


def test_bomb_refused_with_pillows_guard_and_warnings_as_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ImageLoadError, match=r"400,000,000 pixels"):
            load_image(bomb_png())


def test_max_pixels_is_enforced_below_pillow_limits():
    data = _png(Image.new("L", (100, 50)))
    with pytest.raises(ImageTooLarge, match=r"5,000 pixels, more than the pixel budget of 4,999 \(max_pixels\)"):
        load_image(data, max_pixels=4999)
    assert load_image(data, max_pixels=5000).size == (50, 100)
    assert DEFAULT_MAX_PIXELS == 16_000_000 and DECODE_MAX_PIXELS == 80_000_000
    assert DECODE_MAX_PIXELS < Image.MAX_IMAGE_PIXELS  # Pillow never warns on what we accept


def test_the_budget_counts_the_returned_pixels_and_the_header_decides():
    """A 4000 x 3000 PNG (12 MP stored) against a 2 MP budget: the budget counts the pixels
    returned, so max_side=1024 (1024 x 768, 0.79 MP) passes, max_side=2048 (3.1 MP) and native
    size (12 MP) are refused, with the sizes in the message."""
    data = _png(Image.new("RGB", (4000, 3000), (10, 20, 30)))
    assert load_image(data, max_side=1024, max_pixels=2_000_000).size == (768, 1024)
    with pytest.raises(ImageTooLarge, match=r"4000 x 3000 pixels \(W x H\) \(to be used at 2048 x 1536\) = "
                                            r"3,145,728 pixels, more than the pixel budget of 2,000,000"):
        load_image(data, max_side=2048, max_pixels=2_000_000)
    with pytest.raises(ImageTooLarge, match=r"= 12,000,000 pixels, more than the pixel budget of 2,000,000"):
        load_image(data, max_side=None, max_pixels=2_000_000)
    assert header_pixels(io.BytesIO(data)) is None  # paths only


def test_header_pixels_reads_only_the_header(tmp_path):
    path = tmp_path / "big.png"
    path.write_bytes(bomb_png())
    assert header_pixels(path) == 400_000_000  # Pillow's bomb error carries the count
    (tmp_path / "text.png").write_text("not an image")
    assert header_pixels(tmp_path / "text.png") is None and header_pixels(tmp_path) is None


def test_downscale_keeps_aspect_and_reports_sizes():
    result = load_image(_png(Image.new("RGB", (300, 120), (0, 128, 255))), max_side=100)
    assert result.size == (40, 100)
    assert result.downscaled_from == (120, 300) and result.upscaled_from is None
    np.testing.assert_allclose(result.array[20, 50], [0, 128 / 255, 1], atol=1e-6)
    assert "Downscaled from 300 x 120 to 100 x 40 pixels" in result.notices[0]


def test_downscale_large_jpeg_uses_draft_and_stays_accurate():
    pixels = np.zeros((1200, 1600, 3), dtype=np.uint8)
    pixels[:, 800:] = (200, 100, 50)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    result = load_image(buffer.getvalue(), max_side=200)
    assert result.size == (150, 200) and result.original_size == (1600, 1200)
    np.testing.assert_allclose(result.array[75, 20], [0, 0, 0], atol=0.02)
    np.testing.assert_allclose(result.array[75, 180], [200 / 255, 100 / 255, 50 / 255],
                               atol=0.02)


def test_downscale_rotated_photo_reports_displayed_sizes():
    result = load_image(exif_jpeg(marker_image(64, 32), 6), max_side=32)
    assert result.size == (32, 16)
    assert result.downscaled_from == (64, 32)
    assert "Downscaled from 32 x 64 to 16 x 32 pixels (W x H)" in result.notices[0]


def test_downscale_16_bit_keeps_range():
    values = np.zeros((40, 40), dtype=np.uint16)
    values[:, 20:] = 65535  # a hard edge: Lanczos rings past 0 and 1, the loader clips
    result = load_image(_png(Image.fromarray(values)), max_side=15)
    assert result.size == (15, 15)
    assert result.array.min() == 0.0 and result.array.max() == 1.0


def test_tiny_image_upscaled_or_refused():
    data = _png(Image.new("RGB", (8, 4), (255, 0, 0)))
    result = load_image(data, min_side=16)
    assert result.size == (16, 32) and result.upscaled_from == (4, 8)
    np.testing.assert_allclose(result.array, np.broadcast_to([1.0, 0, 0], (16, 32, 3)), atol=1e-6)
    assert "bicubic" in result.notices[0]
    with pytest.raises(ImageLoadError, match=r"8 x 4 pixels .*smaller than the 16 pixels"):
        load_image(data, min_side=16, small="error")
    assert load_image(data, min_side=4).size == (4, 8)  # exactly the minimum: untouched


def test_too_elongated_for_both_limits():
    data = _png(Image.new("L", (400, 2)))
    with pytest.raises(ImageLoadError, match="too elongated to bring its shorter side up"):
        load_image(data, min_side=16, max_side=1000)
    with pytest.raises(ImageLoadError, match="too elongated to fit its longer side"):
        load_image(data, min_side=2, max_side=100)


# ---------------------------------------------------------------------------------------------
# Sources


def test_sources_path_bytes_and_file_likes(tmp_path):
    data = _png(Image.new("RGB", (3, 2), (0, 255, 0)))
    path = tmp_path / "green.png"
    path.write_bytes(data)
    results = [
        load_image(path),
        load_image(str(path)),
        load_image(data),
        load_image(bytearray(data)),
        load_image(memoryview(data)),
        load_image(_upload(data, "green.png")),
    ]
    with open(path, "rb") as handle:
        handle.read(5)  # a file read partway is still read from the start, as Pillow does
        results.append(load_image(handle))

    class ReadOnly:  # has read() only, like a socket file or a zip member
        def __init__(self, payload):
            self._payload = payload

        def read(self):
            return self._payload

    results.append(load_image(ReadOnly(data)))
    for result in results:
        np.testing.assert_array_equal(result.array, np.broadcast_to([0.0, 1.0, 0.0], (2, 3, 3)))
    assert results[0].name.endswith("green.png") and results[5].name == "green.png"
    assert results[2].name == ""


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ImageLoadError, match=r"No such file: '.*nope.png'"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(ImageLoadError, match="is a directory"):
        load_image(tmp_path)


def test_wrong_source_type_is_a_type_error():
    with pytest.raises(TypeError, match="got int"):
        load_image(42)
    with pytest.raises(TypeError, match="binary mode"):
        load_image(io.StringIO("not bytes"))


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_side": 0}, ValueError, "max_side must be >= 1, got 0"),
        ({"max_side": 2.5}, TypeError, "max_side must be an int or None, got float"),
        ({"min_side": -1}, ValueError, "min_side must be >= 1, got -1"),
        ({"min_side": 64, "max_side": 32}, ValueError, r"min_side \(64\) must not exceed"),
        ({"small": "crop"}, ValueError, "small must be 'upscale' or 'error', got 'crop'"),
        ({"background": (1, 1)}, ValueError, r"background must be 3 floats .*\(1, 1\)"),
        ({"background": (0, 0, 2)}, ValueError, r"background must be 3 floats"),
        ({"max_pixels": 0}, ValueError, "max_pixels must be >= 1, got 0"),
    ],
)
def test_bad_options(options, error, match):
    with pytest.raises(error, match=match) as info:
        load_image(b"irrelevant", **options)
    assert not isinstance(info.value, ImageLoadError)


def test_load_truncated_images_flag_untouched():
    for case in CASES:
        if case.name.startswith("truncated"):
            with pytest.raises(ImageLoadError):
                load_image(case.data)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_unexpected_exception_is_wrapped_with_cause(monkeypatch):
    def boom(self, *args, **kwargs):
        raise RuntimeError("decoder exploded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", boom)
    with pytest.raises(ImageLoadError, match=r"Unexpected error .*RuntimeError: decoder "
                                             r"exploded") as info:
        load_image(_png(Image.new("L", (2, 2))))  # gray: Pillow decodes it (plain RGB takes libspng)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_corrupt_error_keeps_cause():
    case = next(c for c in CASES if c.name == "truncated_png")
    with pytest.raises(ImageLoadError) as info:
        load_image(case.data)
    assert isinstance(info.value.__cause__, OSError)


# ---------------------------------------------------------------------------------------------
# Helpers


def test_image_to_png_bytes_round_trip():
    rng = np.random.default_rng(0)
    array = rng.random((5, 7, 3))
    result = load_image(image_to_png_bytes(array))
    expected = (np.rint(array * 255) / 255).astype(np.float32)
    np.testing.assert_array_equal(result.array, expected)
    with pytest.raises(ValueError, match=r"min -0.5 and max"):
        image_to_png_bytes(np.full((2, 2, 3), -0.5))
    with pytest.raises(ValueError, match=r"got \(2, 2, 4\)"):
        image_to_png_bytes(np.zeros((2, 2, 4)))
    with pytest.raises(TypeError, match="int64"):
        image_to_png_bytes(np.zeros((2, 2, 3), dtype=np.int64))


def test_array_from_uint8():
    values = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = array_from_uint8(values)
    assert out.shape == (16, 16, 3) and out.dtype == np.float32 and out.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(out[..., 1], (values / 255).astype(np.float32))
    with pytest.raises(TypeError, match="float64"):
        array_from_uint8(values.astype(np.float64))


# ---------------------------------------------------------------------------------------------
# Backbone minimum sizes, checked against the real architectures (random weights, no download)


def _lpips_feature_stacks():
    torchvision = pytest.importorskip("torchvision")
    models = torchvision.models
    # vgg16()'s features come from make_layers(cfgs["D"]); building them directly skips the
    # 120M-parameter classifier's random init (seconds). The reference-lpips test below
    # builds the full torchvision.models.vgg16 anyway.
    vgg16_features = models.vgg.make_layers(models.vgg.cfgs["D"], batch_norm=False)
    return {
        # Slices exactly as lpips/pretrained_networks.py uses them.
        "alex": models.alexnet(weights=None).features[:12],  # conv1 .. relu5
        "vgg": vgg16_features[:30],  # .. relu5_3 (index 29), without the last max-pool
        "squeeze": models.squeezenet1_1(weights=None).features[:13],  # .. index 12
    }


@pytest.fixture(scope="module")
def feature_stacks():
    return _lpips_feature_stacks()


@pytest.mark.parametrize("net", sorted(MIN_INPUT_SIDE))
def test_min_input_side_matches_torchvision(net, feature_stacks):
    torch = pytest.importorskip("torch")
    side = MIN_INPUT_SIDE[net]
    stack = feature_stacks[net].eval()
    with torch.inference_mode():
        assert stack(torch.zeros(1, 3, side, side)).shape[-2:] == (1, 1)
        assert stack(torch.zeros(1, 3, side, 3 * side)).shape[-2] == 1
        for shape in ((side - 1, side - 1), (side - 1, 4 * side), (4 * side, side - 1)):
            with pytest.raises(RuntimeError, match="too small"):
                stack(torch.zeros(1, 3, *shape))


@pytest.mark.parametrize("net", sorted(MIN_INPUT_SIDE))
def test_min_input_side_matches_reference_lpips(net):
    """The reference lpips package (random backbone, its bundled lin weights) agrees."""
    torch = pytest.importorskip("torch")
    lpips = pytest.importorskip("lpips")
    model = lpips.LPIPS(net=net, pnet_rand=True, pretrained=True, verbose=False).eval()
    side = MIN_INPUT_SIDE[net]
    with torch.inference_mode():
        x = torch.zeros(1, 3, side, side)
        assert model(x, x).shape == (1, 1, 1, 1)
        y = torch.zeros(1, 3, side - 1, side - 1)
        with pytest.raises(RuntimeError):
            model(y, y)


def test_min_side_for():
    assert min_side_for("alex") == 31 and min_side_for("vgg") == 16
    assert min_side_for("squeeze") == 17
    with pytest.raises(ValueError, match=r"unknown backbone 'resnet'"):
        min_side_for("resnet")


# --------------------------------------------------------------------- non-regular files
def _load_in_thread(path) -> BaseException | None:
    """``load_image(path)`` in a daemon thread: the raised error, or a failure if it blocks."""
    import threading

    box: list = []

    def target():
        try:
            load_image(path)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box.append(exc)
        else:
            box.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), f"load_image({path}) blocked"
    return box[0]


def test_fifo_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    exc = _load_in_thread(fifo)
    assert isinstance(exc, ImageLoadError)
    assert re.search(r"pipe\.png' is a named pipe \(FIFO\), not an image file, so it was not read", str(exc))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_character_device_is_refused_unread(device):
    exc = _load_in_thread(device)
    assert isinstance(exc, ImageLoadError)
    assert str(exc).startswith(f"'{device}' is a character device, not an image file")


def test_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s.png"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(ImageLoadError, match="is a socket, not an image file"):
            load_image(path)


def test_huge_file_is_refused_unread(tmp_path):
    """A sparse file one byte over MAX_FILE_BYTES: refused from os.stat, nothing is read."""
    from lpips_core.images import MAX_FILE_BYTES

    path = tmp_path / "huge.bmp"
    with open(path, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    start = time.perf_counter()
    with pytest.raises(ImageLoadError, match=r"huge\.bmp' is 512 MiB, more than the 512 MiB"):
        load_image(path)
    assert time.perf_counter() - start < 1.0


def test_symlink_to_an_image_is_read(tmp_path):
    target = tmp_path / "real.png"
    target.write_bytes(_png(Image.new("RGB", (2, 2), (0, 255, 0))))
    link = tmp_path / "link.png"
    link.symlink_to(target)
    np.testing.assert_array_equal(load_image(link).array, np.broadcast_to([0.0, 1.0, 0.0], (2, 2, 3)))


def test_nul_in_path_is_an_image_load_error():
    with pytest.raises(ImageLoadError, match="Could not read"):
        load_image("bad\0name.png")


# --------------------------------------------------------------------- the image contract
from lpips_core.images import RANGE_SLACK, check_image, check_range  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_contract_accepts_float_images_and_returns_them(dtype):
    img = np.linspace(0, 1, 2 * 3 * 3, dtype=dtype).reshape(2, 3, 3)
    assert check_image(img) is img
    gray = np.zeros((4, 5), dtype)
    assert check_image(gray, gray=True) is gray


def test_contract_slack_is_one_millionth():
    img = np.full((1, 1, 3), 1.0 + RANGE_SLACK)
    img[0, 0, 0] = -RANGE_SLACK
    assert check_image(img) is img
    with pytest.raises(ValueError, match=r"got min=-2e-06, max=1"):
        check_image(img - RANGE_SLACK)


@pytest.mark.parametrize("bad, error, match", [
    (np.zeros((2, 2, 3), np.uint8), TypeError,
     r"image must be float32 or float64 \(any float dtype\) .*got dtype uint8\. .*/ 255, or read the file with "
     r"lpips_core\.images\.load_image"),
    (np.zeros((2, 2, 3), bool), TypeError, r"got dtype bool"),
    ([[[0.0, 0.0, 0.0]]], TypeError, r"image must be a numpy array of shape \(H, W, 3\); got list"),
    (np.zeros((2, 2)), ValueError, r"image must have shape \(H, W, 3\); got shape \(2, 2\)"),
    (np.zeros((3, 8, 8)), ValueError, r"got shape \(3, 8, 8\)"),
    (np.zeros((0, 8, 3)), ValueError, r"got shape \(0, 8, 3\)"),
    (np.zeros((2, 2, 4)), ValueError, r"got shape \(2, 2, 4\)"),
    (np.array([[[0.0, np.nan, 0.0]]]), ValueError, r"image contains non-finite values \(nan or inf\)"),
    (np.array([[[0.0, np.inf, 0.0]]]), ValueError, r"non-finite"),
    (np.full((2, 2, 3), 255.0), ValueError,
     r"image values must lie in \[0, 1\]; got min=255, max=255\. It looks like 8-bit values in \[0, 255\]: "
     r"divide by 255"),
    (np.full((2, 2, 3), -1.0), ValueError, r"got min=-1, max=-1\. It looks like an image in \[-1, 1\]: .*\(x \+ 1\) / 2"),
    (np.full((2, 2, 3), 1000.0), ValueError, r"got min=1000, max=1000\. Scale it to \[0, 1\] first"),
])
def test_contract_refusals(bad, error, match):
    with pytest.raises(error, match=match):
        check_image(bad)


def test_contract_names_the_argument():
    with pytest.raises(ValueError, match=r"^ref values must lie in \[0, 1\]"):
        check_image(np.full((1, 1, 3), 2.0), name="ref")


def test_check_range_alone():
    check_range(0.0, 1.0)
    with pytest.raises(ValueError, match=r"^x values must lie in \[0, 1\]; got min=0, max=254\.5\. It looks like 8-bit"):
        check_range(0.0, 254.5, name="x")


def test_every_loaded_image_meets_the_contract():
    for case in CASES:
        if case.expect == "error":
            continue
        loaded = load_image(case.data, **case.kwargs)
        assert check_image(loaded.array) is loaded.array, case.name


# ------------------------------------------------------- the contract at conventions.to_input
def test_to_input_refuses_a_0_255_float_image_as_if_0_1():
    """The app's central mistake must not happen silently in the library: a float image in
    [0, 255] passed as [0, 1] raises, with the range it got and the fix."""
    from lpips_core.conventions import to_input

    img255 = np.random.default_rng(0).random((8, 8, 3)) * 255
    lo, hi = img255.min(), img255.max()
    with pytest.raises(ValueError, match=rf"img values must lie in \[0, 1\]; got min={lo:.6g}, max={hi:.6g}\. "
                                         r"It looks like 8-bit values in \[0, 255\]: divide by 255, or read the file "
                                         r"with lpips_core\.images\.load_image"):
        to_input(img255)
    # the fix works, and equals the hand-scaled definition 2 x - 1
    out = to_input(img255 / 255)
    np.testing.assert_allclose(out[0].permute(1, 2, 0).numpy(), (img255 / 255) * 2 - 1, atol=1e-6)


@pytest.mark.parametrize("convention", ["[-1,1]", "[0,1]", "[0,255]"])
def test_to_input_tensor_gets_the_same_range_check(convention):
    import torch

    from lpips_core.conventions import to_input

    with pytest.raises(ValueError, match=r"img values must lie in \[0, 1\]; got min=0, max=255\. It looks like 8-bit"):
        to_input(torch.linspace(0, 255, 48).reshape(1, 3, 4, 4), convention=convention)
    with pytest.raises(ValueError, match=r"got min=-1, max=1\. It looks like an image in \[-1, 1\]"):
        to_input(torch.linspace(-1, 1, 48).reshape(1, 3, 4, 4), convention=convention)
    with pytest.raises(ValueError, match="non-finite"):
        to_input(torch.full((1, 3, 4, 4), float("nan")), convention=convention)
    with pytest.raises(TypeError, match="float tensor in \\[0, 1\\], got dtype torch.uint8"):
        to_input(torch.zeros((1, 3, 4, 4), dtype=torch.uint8), convention=convention)
    with pytest.raises(ValueError, match=r"tensor \(N, 3, H, W\) in \[0, 1\], got shape \(3, 4, 4\)"):
        to_input(torch.zeros((3, 4, 4)), convention=convention)
    x = torch.linspace(0, 1, 48).reshape(1, 3, 4, 4)
    scale = {"[-1,1]": (2.0, -1.0), "[0,1]": (1.0, 0.0), "[0,255]": (255.0, 0.0)}[convention]
    torch.testing.assert_close(to_input(x, convention=convention), x * scale[0] + scale[1])


@pytest.mark.parametrize("bad, error", [
    (np.zeros((4, 4, 3), np.uint8), TypeError), (np.full((4, 4), 2.0), ValueError),
    (np.full((4, 4, 3), np.nan), ValueError), (np.zeros((4, 4, 2)), ValueError),
])
def test_to_input_numpy_refusals_follow_the_contract(bad, error):
    from lpips_core.conventions import to_input

    with pytest.raises(error) as raised:
        to_input(bad)
    with pytest.raises(error) as direct:
        check_image(bad, name="img", gray=True)
    assert str(raised.value) == str(direct.value)


def test_literal_types_name_the_closed_choices():
    import typing

    from lpips_core import conventions as C

    assert typing.get_args(C.Convention) == C.CONVENTIONS == ("[-1,1]", "[0,1]", "[0,255]")
    assert typing.get_args(C.ResizeMethod) == C.RESIZE_METHODS == ("bilinear", "bicubic", "nearest", "area")
    hints = typing.get_type_hints(C.to_input)
    assert hints["convention"] == C.Convention and hints["method"] == C.ResizeMethod


def test_one_luma_definition():
    """BT.601 luma is defined once (conventions.LUMA); the distortions use it."""
    from lpips_core import conventions as C
    from lpips_explorer import distortions as D

    assert C.LUMA == (0.299, 0.587, 0.114)
    img = np.random.default_rng(1).random((4, 4, 3))
    np.testing.assert_allclose(D.saturation(img, 0.0)[:, :, 0], img @ np.array(C.LUMA))


# ------------------------------------------------------------------- EXIF, one table
@pytest.mark.parametrize("tag", range(1, 9))
def test_undo_exif_orientation_inverts_the_loader(tag):
    """Undoing the tag the loader applied gives the pixels as stored in the file (decoded by
    Pillow with no transpose), for every EXIF orientation."""
    from lpips_core.images import undo_exif_orientation

    data = exif_jpeg(marker_image(40, 24), tag)
    loaded = load_image(data)
    assert loaded.exif_orientation == tag
    with Image.open(io.BytesIO(data)) as im:
        stored = np.asarray(im.convert("RGB"), dtype=np.float32) / np.float32(255)
    undone = undo_exif_orientation(loaded.array, tag)
    np.testing.assert_array_equal(undone, stored)
    assert undone.flags.c_contiguous


@pytest.mark.parametrize("tag", range(2, 9))
def test_undo_exif_orientation_is_pillows_inverse_for_any_dtype(tag):
    from lpips_core.images import _ORIENTATION_TEXT, undo_exif_orientation

    a = (np.random.default_rng(tag).random((5, 7, 3)) * 255).astype(np.uint8)
    applied = np.asarray(Image.fromarray(a).transpose(_ORIENTATION_TEXT[tag][0]))
    np.testing.assert_array_equal(undo_exif_orientation(applied, tag), a)
    gray = np.random.default_rng(tag).random((5, 7))
    applied_gray = np.asarray(Image.fromarray(gray.astype(np.float32)).transpose(_ORIENTATION_TEXT[tag][0]))
    np.testing.assert_array_equal(undo_exif_orientation(applied_gray, tag), gray.astype(np.float32))
    assert undo_exif_orientation(a, 1) is a


# ---------------------------------------------------------------------------------------------
# libspng decodes plain 8-bit RGB PNGs (lpips_core.images._png_rgb8_fast): the same result as
# Pillow alone, and only those files take that path.


class _SpngSpy:
    """Counts the files libspng decodes (``images._spng`` wrapped)."""

    def __init__(self, spng):
        self.spng, self.calls = spng, 0

    def load(self, data):
        self.calls += 1
        return self.spng.load(data)


def _both_ways(monkeypatch, data: bytes, **options):
    """``load_image`` with libspng (and how many files it decoded), then with Pillow alone."""
    from lpips_core import images

    assert images._spng is not None, "pyspng (a declared dependency) is not installed"
    spy = _SpngSpy(images._spng)
    monkeypatch.setattr(images, "_spng", spy)
    fast = load_image(data, **options)
    monkeypatch.setattr(images, "_spng", None)
    slow = load_image(data, **options)
    monkeypatch.setattr(images, "_spng", spy.spng)
    return fast, slow, spy.calls


@pytest.mark.parametrize("shape", [(1, 1), (37, 53), (256, 256), (300, 517)])
def test_plain_rgb8_png_decodes_with_libspng_exactly_as_pillow(monkeypatch, shape):
    rng = np.random.default_rng(sum(shape))
    pixels = rng.integers(0, 256, size=(*shape, 3), dtype=np.uint8)
    for options in ({}, {"optimize": True}, {"compress_level": 0}):
        fast, slow, calls = _both_ways(monkeypatch, _png(Image.fromarray(pixels), **options))
        assert calls == 1
        np.testing.assert_array_equal(fast.array, slow.array)
        np.testing.assert_array_equal(fast.array, pixels.astype(np.float32) / np.float32(255))
        assert (fast.notices, fast.format, fast.mode, fast.bit_depth) == (slow.notices, "PNG", "RGB", 8)
    # A downscale works on the libspng pixels as on Pillow's.
    fast, slow, calls = _both_ways(monkeypatch, _png(Image.fromarray(pixels)), max_side=16)
    np.testing.assert_array_equal(fast.array, slow.array)
    assert fast.notices == slow.notices and fast.downscaled_from == slow.downscaled_from


def test_other_pngs_keep_pillows_path(monkeypatch):
    """Alpha, a transparency key, palette, gray, 16 bit and an eXIf orientation: never libspng."""
    rgb = np.random.default_rng(1).integers(0, 256, size=(20, 30, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    files = {
        "rgba": _png(Image.fromarray(rgb).convert("RGBA")),
        "rgb with a transparency key": _png(Image.fromarray(rgb), transparency=(0, 0, 0)),
        "palette": _png(Image.fromarray(rgb).convert("P")),
        "gray": _png(Image.fromarray(rgb).convert("L")),
        "16-bit rgb": png16_rgb(rgb.astype(np.uint16) * 257),
        "exif orientation": _png(Image.fromarray(rgb), exif=exif.tobytes()),
    }
    for what, data in files.items():
        fast, slow, calls = _both_ways(monkeypatch, data)
        assert calls == 0, what
        np.testing.assert_array_equal(fast.array, slow.array)
    assert fast.exif_rotated and fast.array.shape == (30, 20, 3)  # the eXIf chunk was applied


def test_a_truncated_rgb8_png_gets_pillows_message(monkeypatch):
    pixels = np.random.default_rng(2).integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    data = _png(Image.fromarray(pixels))[:-300]
    messages = []
    for spng in (True, False):
        from lpips_core import images

        if not spng:
            monkeypatch.setattr(images, "_spng", None)
        with pytest.raises(ImageLoadError) as err:
            load_image(data)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "truncated or corrupt" in messages[0]


def _chunk(kind: bytes, body: bytes) -> bytes:
    import zlib

    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def test_png_chunks_are_read_by_type_not_by_searching_the_bytes(monkeypatch):
    """An eXIf chunk after the pixels (which Pillow applies while decoding) keeps Pillow's path;
    the four bytes "eXIf" inside another chunk's data do not; a file whose chunks run past its
    end is left to Pillow."""
    from lpips_core import images

    rgb = np.random.default_rng(3).integers(0, 256, size=(20, 30, 3), dtype=np.uint8)
    plain = _png(Image.fromarray(rgb))
    assert plain[-12:] == _chunk(b"IEND", b"")
    exif = Image.Exif()
    exif[0x0112] = 6
    body = exif.tobytes()
    body = body[6:] if body.startswith(b"Exif\x00\x00") else body  # an eXIf chunk holds the TIFF data alone
    late_exif = plain[:-12] + _chunk(b"eXIf", body) + plain[-12:]
    fast, slow, calls = _both_ways(monkeypatch, late_exif)
    assert calls == 0 and fast.exif_orientation == slow.exif_orientation == 6
    np.testing.assert_array_equal(fast.array, slow.array)
    assert fast.array.shape == (30, 20, 3)

    text = plain[:33] + _chunk(b"tEXt", b"Comment\x00eXIf tRNS acTL") + plain[33:]
    fast, slow, calls = _both_ways(monkeypatch, text)
    assert calls == 1 and fast.exif_orientation == 1
    np.testing.assert_array_equal(fast.array, rgb.astype(np.float32) / np.float32(255))

    assert images._png_chunk_types(plain) == {b"IHDR", b"IDAT", b"IEND"}
    assert images._png_chunk_types(plain[:-12]) is None  # no IEND
    assert images._png_chunk_types(plain[:40]) is None  # a chunk runs past the end
