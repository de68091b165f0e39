"""A corpus of good, awkward and hostile image files, generated in memory (no binary blobs).

Used by ``tests/test_images.py`` for ``lpips_core.images.load_image``, and meant to be reused
by the CLI and browser-uploader tests::

    from image_corpus import corpus      # tests/ is on sys.path under pytest

    for case in corpus():
        ...  # write case.data to tmp_path / case.filename, upload it, or pass the bytes

Each :class:`Case` says what must happen: ``expect == "ok"`` means the file loads and
``re.search(case.match, "\\n".join(notices))`` holds (``r"\\A\\Z"``: no notice at all);
``expect == "error"`` means ``ImageLoadError`` whose message satisfies
``re.search(case.match, message)``. Cases that need non-default ``load_image`` options carry
them in ``kwargs`` (a CLI/uploader test may map them to its own flags or skip those cases);
``shape`` is the expected ``(H, W)`` of an ``ok`` result when it is known.

Everything is deterministic (seeded) and cheap: the whole corpus builds in well under a second
and is cached per process; the biggest item is the 20 000 x 20 000 "decompression bomb" PNG,
about 50 kB.
"""

from __future__ import annotations

import functools
import io
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from PIL import Image, features

__all__ = ["Case", "corpus", "bomb_png", "exif_jpeg", "marker_image", "png16_rgb", "raw_png"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True, eq=False)
class Case:
    """One file of the corpus and what loading it must give (see the module docstring)."""

    name: str
    data: bytes
    filename: str
    expect: Literal["ok", "error"]
    match: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, int] | None = None


# ------------------------------------------------------------------------------------------
# Builders (public: tests use them for targeted value checks)


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def raw_png(width: int, height: int, bit_depth: int, color_type: int, idat: bytes) -> bytes:
    """A PNG written chunk by chunk, for what Pillow cannot save (16-bit RGB, huge sizes).

    ``idat`` is the zlib-compressed scanlines (each prefixed by its filter byte).
    """
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


@functools.lru_cache(maxsize=4)
def bomb_png(side: int = 20_000) -> bytes:
    """A valid ``side x side`` 1-bit black PNG that compresses to a few tens of kB.

    Decoding it would need ``side**2`` bytes in Pillow (400 MB for 20 000); the loader must
    refuse it from the header. Built row-batch by row-batch, so building it stays small too.
    """
    row = b"\x00" * (1 + (side + 7) // 8)  # filter byte + packed bits
    compressor = zlib.compressobj(9)
    batch = 1000
    parts = [compressor.compress(row * batch) for _ in range(side // batch)]
    parts.append(compressor.compress(row * (side % batch)))
    parts.append(compressor.flush())
    return raw_png(side, side, 1, 0, b"".join(parts))


def png16_rgb(values: np.ndarray) -> bytes:
    """A 16-bit-per-channel RGB PNG of ``values`` ``(H, W, 3)`` uint16."""
    values = np.asarray(values, dtype=">u2")
    h, w, _ = values.shape
    scanlines = b"".join(b"\x00" + values[r].tobytes() for r in range(h))
    return raw_png(w, h, 16, 2, zlib.compress(scanlines))


def marker_image(width: int = 64, height: int = 32) -> Image.Image:
    """Gray RGB image with a red 16x16 block in the top-left corner (for orientation tests)."""
    pixels = np.full((height, width, 3), 128, dtype=np.uint8)
    pixels[:16, :16] = (255, 0, 0)
    return Image.fromarray(pixels)


def exif_jpeg(image: Image.Image, orientation: int) -> bytes:
    """JPEG bytes of ``image`` tagged with EXIF ``orientation`` (1..8)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _save(image, "JPEG", quality=95, exif=exif.tobytes())


def _save(image: Image.Image, fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _noise(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


# ------------------------------------------------------------------------------------------
# The corpus


@functools.lru_cache(maxsize=1)
def _build() -> tuple[Case, ...]:
    cases: list[Case] = []

    def ok(name, data, filename, match, *, shape=None, **kwargs):
        cases.append(Case(name, data, filename, "ok", match, dict(kwargs), shape))

    def error(name, data, filename, match, **kwargs):
        cases.append(Case(name, data, filename, "error", match, dict(kwargs)))

    noise = Image.fromarray(_noise(12, 16))
    rgb_png = _save(noise, "PNG")
    jpeg = _save(Image.fromarray(_noise(48, 64, seed=1)), "JPEG", quality=90)

    # -- Loads fine, with the right notice. --
    ok("rgb8_png", rgb_png, "noise.png", r"\A\Z", shape=(12, 16))
    ok("jpeg_named_png", jpeg, "photo.png", r"\A\Z", shape=(48, 64))
    ok("bmp", _save(noise, "BMP"), "noise.bmp", r"\A\Z", shape=(12, 16))
    ok("jpeg_exif6", exif_jpeg(marker_image(), 6), "phone.jpg",
       r"rotated 90° clockwise to apply its EXIF orientation tag \(6\)", shape=(64, 32))
    ok("jpeg_exif8", exif_jpeg(marker_image(), 8), "phone8.jpg",
       r"rotated 90° counter-clockwise to apply its EXIF orientation tag \(8\)",
       shape=(64, 32))
    bits = np.zeros((10, 12), dtype=bool)
    bits[:, 6:] = True
    ok("mode_1_png", _save(Image.fromarray(bits), "PNG"), "bw.png", r"1-bit black-and-white",
       shape=(10, 12))
    gray = np.arange(120, dtype=np.uint8).reshape(10, 12)
    ok("mode_L_png", _save(Image.fromarray(gray), "PNG"), "gray.png", r"Grayscale image",
       shape=(10, 12))
    la = Image.merge("LA", [Image.fromarray(gray), Image.new("L", (12, 10), 100)])
    ok("mode_LA_png", _save(la, "PNG"), "gray_alpha.png",
       r"(?s)Grayscale image.*transparent.*white background", shape=(10, 12))
    palette = Image.new("P", (12, 10), 1)
    palette.putpalette([255, 0, 0, 0, 0, 255] + [0, 0, 0] * 254)
    ok("mode_P_png", _save(palette, "PNG"), "palette.png", r"Palette \(indexed-colour\)",
       shape=(10, 12))
    ok("mode_P_transparent_png", _save(palette, "PNG", transparency=1), "logo.png",
       r"(?s)Palette.*transparent.*white background", shape=(10, 12))
    ok("mode_RGBA_png", _save(Image.new("RGBA", (12, 10), (255, 0, 0, 128)), "PNG"),
       "logo_rgba.png", r"100% of the pixels are \(partly\) transparent.*white background",
       shape=(10, 12))
    gray16 = (np.arange(120, dtype=np.uint16).reshape(10, 12) * 541)
    ok("png16_gray", _save(Image.fromarray(gray16), "PNG"), "depth16.png",
       r"16-bit grayscale image: values were divided by 65535", shape=(10, 12))
    ok("png16_rgb", png16_rgb(np.full((10, 12, 3), 1000, dtype=np.uint16)), "rgb48.png",
       r"stores 16 bits per colour channel.*8 bits", shape=(10, 12))
    tiff16 = Image.frombytes("I;16B", (12, 10), gray16.astype(">u2").tobytes())
    ok("tiff16_gray_bigendian", _save(tiff16, "TIFF"), "depth16.tif",
       r"16-bit grayscale image", shape=(10, 12))
    floats = np.linspace(0.0, 1.0, 120, dtype=np.float32).reshape(10, 12)
    ok("tiff_float_in_range", _save(Image.fromarray(floats), "TIFF"), "float.tif",
       r"floating-point grayscale image: values used as stored", shape=(10, 12))
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # red
    ok("cmyk_jpeg", _save(cmyk, "JPEG", quality=95), "print.jpg",
       r"CMYK image: converted to RGB", shape=(16, 16))
    ycbcr = Image.new("RGB", (12, 10), (200, 30, 40)).convert("YCbCr")
    ok("ycbcr_tiff", _save(ycbcr, "TIFF"), "ycbcr.tif", r"YCbCr image: converted to RGB",
       shape=(10, 12))
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    ok("gif_animated", _save(frames[0], "GIF", save_all=True, append_images=frames[1:]),
       "anim.gif", r"(?s)GIF file has 3 frames.*only the first frame was used", shape=(8, 8))
    ok("apng_animated", _save(frames[0], "PNG", save_all=True, append_images=frames[1:]),
       "anim.png", r"PNG file has 3 frames.*only the first frame", shape=(8, 8))
    if features.check("webp"):
        ok("webp_animated",
           _save(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True),
           "anim.webp", r"WEBP file has 3 frames.*only the first frame", shape=(8, 8))
    wide = _save(Image.new("RGB", (3000, 40), (10, 200, 30)), "PNG")
    ok("over_max_side", wide, "panorama.png",
       r"Downscaled from 3000 x 40 to 2048 x 27 pixels \(W x H\) with Lanczos",
       shape=(27, 2048))
    tiny = _save(Image.fromarray(_noise(8, 8, seed=2)), "PNG")
    ok("tiny_upscaled", tiny, "icon.png",
       r"Upscaled from 8 x 8 to 31 x 31 pixels \(W x H\) with bicubic.*min_side=31",
       shape=(31, 31), min_side=31)

    # -- Refused, with a specific message. --
    error("tiny_small_error", tiny, "icon.png",
          r"8 x 8 pixels \(W x H\), smaller than the 31 pixels per side", min_side=31,
          small="error")
    error("too_elongated", _save(Image.new("L", (5000, 20)), "PNG"), "strip.png",
          r"too elongated .*max_side=2048.*at least 31 pixels", min_side=31)
    big = _save(Image.fromarray(_noise(64, 64, seed=3)), "PNG")
    error("truncated_png", big[: len(big) // 2], "half.png", r"truncated or corrupt")
    big_jpeg = _save(Image.fromarray(_noise(64, 64, seed=3)), "JPEG", quality=90)
    error("truncated_jpeg", big_jpeg[: len(big_jpeg) // 2], "half.jpg",
          r"truncated or corrupt")
    error("png_cut_in_header", big[:20], "stub.png", r"truncated or corrupt")
    error("png_signature_only", big[:8], "sig.png",
          r"starts like a PNG file .*truncated or corrupt")
    # Pillow does not verify PNG CRCs or zlib checksums, so a flipped byte inside the
    # pixel data can load silently; a damaged deflate header is always detected.
    broken = bytearray(_save(Image.fromarray(np.add.outer(np.arange(32), np.arange(32))
                                             .astype(np.uint8)), "PNG"))
    idat = broken.index(b"IDAT") + 4
    broken[idat:idat + 2] = b"\xff\xff"
    error("png_corrupt_idat", bytes(broken), "damaged.png", r"truncated or corrupt")
    error("png_zero_width", raw_png(0, 5, 8, 0, zlib.compress(b"\x00" * 5)), "zero.png",
          r"PNG file .*truncated or corrupt")
    error("random_bytes", np.random.default_rng(7).integers(0, 256, 4096, np.uint8).tobytes(),
          "random.png", r"is not an image format Pillow can read \(first bytes: ")
    error("pdf_renamed_png", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\n",
          "report.png", r"starts with '%PDF', so it is a PDF document")
    error("text_renamed_png", b"This is not an image.\nJust some notes.\n" * 4, "notes.png",
          r"contains text \(starting 'This is not an i")
    error("html_saved_page", b"<!DOCTYPE html><html><body><img src=x.png></body></html>",
          "image.png", r"HTML web page")
    error("svg_drawing", b'<svg xmlns="http://www.w3.org/2000/svg" width="10"/>', "logo.svg",
          r"SVG vector drawing.*export it as PNG")
    error("heic_photo", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64,
          "IMG_0001.HEIC", r"HEIC photo.*export it as JPEG")
    error("empty_file", b"", "empty.png", r"is empty \(0 bytes\)")
    error("bomb_20000x20000", bomb_png(), "bomb.png",
          r"400,000,000 pixels.*refused before decoding")
    out_of_range = Image.fromarray(np.full((10, 12), 3.5, dtype=np.float32))
    error("tiff_float_out_of_range", _save(out_of_range, "TIFF"), "hdr.tif",
          r"floating-point image with values from 3.5 to 3.5; only float images already "
          r"in \[0, 1\]")
    try:  # Pillow cannot write signed 16-bit TIFFs; tifffile comes with scikit-image
        import tifffile
    except ImportError:  # pragma: no cover
        tifffile = None
    if tifffile is not None:
        buffer = io.BytesIO()
        tifffile.imwrite(buffer, np.full((3, 4), -5, dtype=np.int16))
        error("tiff_int16_signed", buffer.getvalue(), "signed.tif",
              r"signed 16-bit integer samples")
    return tuple(cases)


def corpus() -> list[Case]:
    """All cases, in a fixed order (names are unique and usable as test ids)."""
    return list(_build())
