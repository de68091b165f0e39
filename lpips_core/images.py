"""Load any untrusted image file into an RGB float array, safely.

People drop arbitrary files on the app's uploader or pass them to the CLI: phone photos with
EXIF rotation, 16-bit PNGs, transparent logos, CMYK JPEGs, animated GIFs, truncated downloads,
gigantic images, PDFs renamed ``.png``. :func:`load_image` turns each of them into either

* a :class:`LoadedImage` -- an ``(H, W, 3)`` float32 array in ``[0, 1]`` plus human-readable
  ``notices`` saying what was done to the pixels and why, and the facts a "debug a score" page
  reports (format, mode, bit depth, alpha, EXIF orientation, frames, resizing); or
* an :class:`ImageLoadError` whose message says what was wrong and what to do.

:func:`check_image` states the library's one image contract, which every loaded array meets:
``(H, W, 3)`` float, finite, in ``[0, 1]``.

Nothing but :class:`ImageLoadError` escapes for a bad *file*. Programming errors in the
*options* (a negative ``max_side``, an unknown ``small=``) raise ``ValueError``/``TypeError``
as everywhere else in ``lpips_core``.

Safety choices, stated once:

* **The pixel budget.** Two limits are read from the header (Pillow's lazy ``Image.open`` reads
  only the header) *before* any pixel is decoded, and an image over either is refused with
  :class:`ImageTooLarge`:

  - ``max_pixels`` (default :data:`DEFAULT_MAX_PIXELS`, 16 million) bounds the image the loader
    *returns*: the size after ``max_side`` downscaling, or the stored size when ``max_side`` is
    ``None`` (how datasets are scored, at native size). A float32 image of 16 MP is 192 MB, and
    the networks' first activations are several times that, so this is what keeps one pair of
    solid-colour 10 000 x 8 000 PNGs (250 KB each) from taking gigabytes;
  - :data:`DECODE_MAX_PIXELS` (80 million, e.g. 10 000 x 8 000, or ``max_pixels`` if larger)
    bounds the stored size, which Pillow decodes at about 4 bytes a pixel before downscaling: a
    24 MP phone photo shown at 2048 px passes, a 108/200 MP sensor mode is refused. It lies
    below Pillow's own warning threshold (``PIL.Image.MAX_IMAGE_PIXELS``, about 89.5 MP by
    default), so Pillow never warns about an image this loader accepts.

  The check does not rely on (and never changes) Pillow's global ``MAX_IMAGE_PIXELS``; when
  Pillow's own guard fires first (its hard error is at twice that global, about 179 MP), its
  ``DecompressionBombError``/``DecompressionBombWarning`` is reported as :class:`ImageTooLarge`
  too, and so is a ``MemoryError`` while decoding. A ``max_pixels`` above Pillow's hard limit
  therefore has no effect beyond it.
* **Only regular files** are read from a path: ``os.stat`` is checked *before* the file is
  opened, so a directory, a named pipe (which would block forever), a device such as
  ``/dev/zero`` (endless) or a socket is refused unread, and so is a file larger than
  :data:`MAX_FILE_BYTES`.
* **Truncated files** are refused: ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` is never set, so a
  half-downloaded file is not silently padded with grey.
* **Resizing.** An image whose longer side exceeds ``max_side`` (default 2048) is downscaled,
  aspect ratio kept, with Lanczos filtering (JPEGs are first reduced by libjpeg's DCT scaling
  to no less than twice the target, as ``PIL.Image.thumbnail`` does, which saves memory and
  time and is visually equivalent). An image whose shorter side is below ``min_side`` is
  upscaled with bicubic interpolation (``small="upscale"``) or refused (``small="error"``).
  Resizing happens once, in the stored orientation, before the EXIF rotation is applied.
* **Transparency** is composited onto ``background`` (white by default), because LPIPS
  compares opaque RGB images; the result is ``c * a + background * (1 - a)``.
* **Bit depth.** 8-bit values map to exactly ``value / 255``, 16-bit grayscale to
  ``value / 65535``. Pillow decodes 16-bit *colour* PNG/TIFF at 8 bits; a notice says so.
  32-bit float images are accepted only when their values already lie in ``[0, 1]``.
  Colour profiles (ICC) are not applied; ``LoadedImage.icc_profile`` records whether one
  was embedded.

:data:`MIN_INPUT_SIDE` gives the smallest input side each LPIPS backbone accepts; pass
``min_side=min_side_for(net)`` so tiny images are upscaled (or refused) with a clear notice
instead of failing deep inside a convolution.

Example:
    >>> from lpips_core.images import load_image, min_side_for
    >>> img = load_image("photo.jpg", min_side=min_side_for("alex"))  # doctest: +SKIP
    >>> img.array.shape, img.array.dtype, img.notices  # doctest: +SKIP
    ((1536, 2048, 3), dtype('float32'), ('Downscaled from 4032 x 3024 ...',))
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, Sequence, Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from . import files

try:  # libspng: a faster decoder for plain 8-bit RGB PNGs (see _png_rgb8_fast); Pillow otherwise
    import pyspng as _spng
except ImportError:  # pragma: no cover - a declared dependency; Pillow decodes everything alone
    _spng = None

__all__ = [
    "DECODE_MAX_PIXELS",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_SIDE",
    "MAX_FILE_BYTES",
    "MIN_INPUT_SIDE",
    "RANGE_SLACK",
    "ImageLoadError",
    "ImageTooLarge",
    "LoadedImage",
    "array_from_uint8",
    "check_file",
    "read_image_file",
    "check_image",
    "check_range",
    "header_pixels",
    "image_to_png_bytes",
    "load_image",
    "min_side_for",
    "undo_exif_orientation",
]

DEFAULT_MAX_SIDE: int = 2048
"""Default limit on the longer side of a loaded image; larger images are downscaled."""

DEFAULT_MAX_PIXELS: int = 16_000_000
"""The pixel budget: the most pixels (width x height, from the header) of the image
:func:`load_image` returns, after ``max_side`` downscaling; larger images are refused unread."""

DECODE_MAX_PIXELS: int = 80_000_000
"""The most pixels a file may store (what Pillow decodes before downscaling), read from the header."""

MAX_FILE_BYTES: int = 512 * 2**20
"""Largest file :func:`load_image` reads from a path (512 MiB, checked with ``os.stat`` first).

An 80-megapixel image (:data:`DECODE_MAX_PIXELS`) stored uncompressed as 16-bit RGB TIFF is
about 480 MiB, so every image the loader accepts fits; a multi-gigabyte (or sparse) file is
refused before a byte is read."""

RANGE_SLACK: float = 1e-6
"""Rounding slack of the image contract: values in ``[-1e-6, 1 + 1e-6]`` count as ``[0, 1]``."""

MIN_INPUT_SIDE: dict[str, int] = {"alex": 31, "vgg": 16, "squeeze": 17}
"""Smallest side (in pixels, per dimension) each LPIPS backbone accepts.

Found empirically with random weights on the torchvision architectures, exactly as the
reference ``lpips`` package slices them (``lpips/pretrained_networks.py``), by feeding
``(1, 3, s, s)`` zeros for increasing ``s``:

* ``"alex"``: ``torchvision.models.alexnet().features[:12]`` (conv1 .. relu5; the final
  max-pool is not used by LPIPS) -- 31 works, 30 raises "Output size is too small".
  (The whole ``features``, with its last max-pool, would need 63.)
* ``"vgg"``: ``torchvision.models.vgg16().features[:30]`` (up to relu5_3, index 29,
  excluding the last max-pool) -- 16 works, 15 raises.
* ``"squeeze"``: ``torchvision.models.squeezenet1_1().features[:13]`` (up to index 12,
  the last Fire module) -- 17 works, 16 raises.

Each layer's output size is non-decreasing in its input size and the two spatial dimensions
are independent, so every side >= the minimum works, for non-square inputs too.
``tests/test_images.py`` re-checks these values against torchvision and the ``lpips`` package.
"""


def min_side_for(net: str) -> int:
    """Smallest image side the LPIPS backbone ``net`` accepts (see :data:`MIN_INPUT_SIDE`).

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.

    Returns:
        The minimum side in pixels, e.g. ``min_side_for("alex") == 31``.

    Raises:
        ValueError: ``net`` is not one of the known backbones.
    """
    try:
        return MIN_INPUT_SIDE[net]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown backbone {net!r}; expected one of {sorted(MIN_INPUT_SIDE)}"
        ) from None


def check_image(img: Any, *, name: str = "image", gray: bool = False) -> np.ndarray:
    """Check the library's one image contract and return ``img`` itself (no copy).

    The contract, used by :func:`lpips_core.conventions.to_input`, the distortions and the
    classic metrics: a NumPy array of shape ``(H, W, 3)`` (or ``(H, W)`` grey when ``gray``)
    with ``H, W >= 1``, of a floating dtype (float16/32/64), every value finite and in
    ``[0, 1]`` (within :data:`RANGE_SLACK`). 8-bit data is not guessed: divide it by 255, or
    read files with :func:`load_image`, which returns arrays that satisfy the contract.

    Args:
        img: the array to check.
        name: the argument name used in error messages.
        gray: also accept a 2-D ``(H, W)`` array.

    Returns:
        ``img``, unchanged.

    Raises:
        TypeError: not a NumPy array, or not a floating dtype (e.g. ``uint8``).
        ValueError: another shape, non-finite values, or values outside ``[0, 1]`` (the
            message gives the min and max it got and what to do).

    Example:
        >>> check_image(np.full((2, 2, 3), 0.5, np.float32)).shape
        (2, 2, 3)
        >>> check_image(np.full((2, 2, 3), 255.0))  # says "divide by 255"  # doctest: +SKIP
    """
    shapes = "(H, W, 3) or (H, W)" if gray else "(H, W, 3)"
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape {shapes}; got {type(img).__name__}")
    if not np.issubdtype(img.dtype, np.floating):
        raise TypeError(
            f"{name} must be float32 or float64 (any float dtype) with values in [0, 1]; got dtype "
            f"{img.dtype}. Convert 8-bit data with img.astype(np.float32) / 255, or read the file "
            "with lpips_core.images.load_image."
        )
    ok_ndim = img.ndim == 3 and img.shape[2] == 3 or (gray and img.ndim == 2)
    if not ok_ndim or img.shape[0] < 1 or img.shape[1] < 1:
        raise ValueError(f"{name} must have shape {shapes}; got shape {img.shape}")
    if not np.isfinite(img).all():
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    check_range(float(img.min()), float(img.max()), name=name)
    return img


def check_range(lo: float, hi: float, *, name: str = "image") -> None:
    """Raise the contract's ``ValueError`` unless ``[lo, hi]`` lies in ``[0, 1]`` (with slack).

    Used by :func:`check_image` and, with a tensor's min and max, by
    :func:`lpips_core.conventions.to_input`, so both say the same thing.

    Raises:
        ValueError: ``lo < -RANGE_SLACK`` or ``hi > 1 + RANGE_SLACK``; the message names the
            range it got and the likely fix (divide by 255 for [0, 255] data, ``(x + 1) / 2``
            for [-1, 1] data).
    """
    if lo >= -RANGE_SLACK and hi <= 1 + RANGE_SLACK:
        return
    if lo >= -RANGE_SLACK and hi <= 255 + RANGE_SLACK:
        advice = (" It looks like 8-bit values in [0, 255]: divide by 255, or read the file with "
                  "lpips_core.images.load_image.")
    elif lo >= -1 - RANGE_SLACK and hi <= 1 + RANGE_SLACK:
        advice = " It looks like an image in [-1, 1]: map it to [0, 1] with (x + 1) / 2."
    else:
        advice = " Scale it to [0, 1] first."
    raise ValueError(f"{name} values must lie in [0, 1]; got min={lo:.6g}, max={hi:.6g}.{advice}")


class ImageLoadError(ValueError):
    """A file could not be turned into an image; the message says why and what to do."""


class ImageTooLarge(ImageLoadError):
    """An image over the pixel budget (or the file-size cap), refused before it was decoded, or
    one that ran out of memory while decoding."""


@dataclass(frozen=True)
class LoadedImage:
    """An image ready for LPIPS, with what was done to it and the facts about the file.

    Attributes:
        array: ``(H, W, 3)`` float32, C-contiguous, RGB in ``[0, 1]``.
        notices: one human-readable sentence per change made to the pixels, and why.
        name: the file name, when known (``""`` for raw bytes).
        format: Pillow's format name, e.g. ``"PNG"``, ``"JPEG"``, ``"GIF"``, ``"MPO"``.
        mode: the original Pillow mode, e.g. ``"RGB"``, ``"P"``, ``"I;16"``, ``"CMYK"``.
        original_size: ``(W, H)`` as stored in the file, before EXIF rotation (Pillow order).
        size: ``(H, W)`` of ``array`` (NumPy order).
        bit_depth: bits per sample as stored in the file (1, 2, 4, 8, 16 or 32).
        had_alpha: the file had an alpha channel or a transparent palette/colour key.
        was_grayscale: the file had a single gray (or 1-bit) channel.
        exif_orientation: the EXIF orientation tag, 1 (upright) when absent.
        n_frames: number of frames (animations, multi-page TIFF, MPO); only frame 0 is used.
        downscaled_from: ``(H, W)`` before downscaling, or ``None``.
        upscaled_from: ``(H, W)`` before upscaling, or ``None``.
        icc_profile: the file embeds an ICC colour profile (it is not applied).
    """

    array: np.ndarray
    notices: tuple[str, ...]
    name: str
    format: str
    mode: str
    original_size: tuple[int, int]
    size: tuple[int, int]
    bit_depth: int
    had_alpha: bool
    was_grayscale: bool
    exif_orientation: int
    n_frames: int
    downscaled_from: tuple[int, int] | None
    upscaled_from: tuple[int, int] | None
    icc_profile: bool

    @property
    def exif_rotated(self) -> bool:
        """Whether an EXIF orientation other than upright was applied."""
        return self.exif_orientation in _ORIENTATION_TEXT


# EXIF orientation -> (Pillow transpose, what it does to the stored pixels).
_ORIENTATION_TEXT: dict[int, tuple[Image.Transpose, str]] = {
    2: (Image.Transpose.FLIP_LEFT_RIGHT, "mirrored left-right"),
    3: (Image.Transpose.ROTATE_180, "rotated 180°"),
    4: (Image.Transpose.FLIP_TOP_BOTTOM, "mirrored top-bottom"),
    5: (Image.Transpose.TRANSPOSE, "transposed (mirrored across the main diagonal)"),
    6: (Image.Transpose.ROTATE_270, "rotated 90° clockwise"),
    7: (Image.Transpose.TRANSVERSE, "transversed (mirrored across the anti-diagonal)"),
    8: (Image.Transpose.ROTATE_90, "rotated 90° counter-clockwise"),
}

# Each EXIF transpose's inverse: the two quarter turns invert each other, the rest themselves.
_INVERSE_TRANSPOSE = {Image.Transpose.ROTATE_90: Image.Transpose.ROTATE_270,
                      Image.Transpose.ROTATE_270: Image.Transpose.ROTATE_90}


def undo_exif_orientation(array: np.ndarray, orientation: int) -> np.ndarray:
    """The image as stored in the file, before :func:`load_image` applied its EXIF orientation.

    Uses the loader's own table of orientation tags (one definition) and Pillow's inverse
    transpose, applied to an index map, so it is exact for any dtype and channel count.

    Args:
        array: ``(H, W)`` or ``(H, W, C)``, any dtype (e.g. ``LoadedImage.array``).
        orientation: the EXIF tag (``LoadedImage.exif_orientation``); tags 2-8 are undone,
            any other value returns the array unchanged.

    Returns:
        A new C-contiguous array (``(W, H, ...)`` for the tags 5-8 that swap the axes), or
        ``array`` itself for tags without a transpose.
    """
    a = np.asarray(array)
    entry = _ORIENTATION_TEXT.get(int(orientation))
    if entry is None:
        return a
    h, w = a.shape[:2]
    undo = _INVERSE_TRANSPOSE.get(entry[0], entry[0])
    index = np.asarray(Image.fromarray(np.arange(h * w, dtype=np.int32).reshape(h, w)).transpose(undo))
    return a.reshape(h * w, *a.shape[2:])[index]


_GRAY_MODES = {"1", "L", "LA", "La", "I", "F"}
_ALPHA_MODES = {"RGBA", "RGBa", "LA", "La", "PA"}
_UINT16_MODES = {"I;16", "I;16L", "I;16B", "I;16N"}

# Leading bytes of formats people upload by mistake, or that Pillow cannot read here.
_SIGNATURES: list[tuple[bytes, int, str, str]] = [
    # (magic, offset, what it is, what to do)
    (b"%PDF", 0, "a PDF document", "export the page as PNG or JPEG"),
    (b"PK\x03\x04", 0, "a ZIP archive (or a .docx/.xlsx/.pptx document)",
     "extract the image from it"),
    (b"\x1f\x8b", 0, "gzip-compressed data", "decompress it first"),
    (b"Rar!", 0, "a RAR archive", "extract the image from it"),
    (b"7z\xbc\xaf", 0, "a 7-Zip archive", "extract the image from it"),
    (b"<svg", 0, "an SVG vector drawing", "export it as PNG"),
    (b"<?xml", 0, "an XML file (perhaps an SVG drawing)", "export it as PNG"),
    (b"<!DOCTYPE html", 0, "an HTML web page (a saved page, not the image)",
     "save the image itself (right-click > Save image)"),
    (b"<html", 0, "an HTML web page (a saved page, not the image)",
     "save the image itself (right-click > Save image)"),
    (b"ftypheic", 4, "a HEIC photo", "export it as JPEG (on iPhone: Settings > Camera > "
     "Formats > Most Compatible)"),
    (b"ftypheix", 4, "a HEIC photo", "export it as JPEG"),
    (b"ftyphevc", 4, "a HEIC photo", "export it as JPEG"),
    (b"ftypmif1", 4, "a HEIF image", "export it as JPEG or PNG"),
    (b"ftypmsf1", 4, "a HEIF image sequence", "export a frame as JPEG or PNG"),
    (b"ftypavif", 4, "an AVIF image", "export it as PNG or JPEG"),
    (b"ftypisom", 4, "an MP4 video", "export a frame as PNG"),
    (b"ftypmp4", 4, "an MP4 video", "export a frame as PNG"),
    (b"ftypqt", 4, "a QuickTime video", "export a frame as PNG"),
    (b"\x1aE\xdf\xa3", 0, "a WebM/Matroska video", "export a frame as PNG"),
]
# Image formats Pillow normally reads: if the file starts like one of these but cannot be
# opened, it is truncated, corrupt or an unsupported variant.
_IMAGE_SIGNATURES: list[tuple[bytes, int, str]] = [
    (b"\x89PNG\r\n\x1a\n", 0, "PNG"),
    (b"\xff\xd8\xff", 0, "JPEG"),
    (b"GIF87a", 0, "GIF"),
    (b"GIF89a", 0, "GIF"),
    (b"BM", 0, "BMP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"WEBP", 8, "WebP"),
    (b"8BPS", 0, "Photoshop PSD"),
]

_PILLOW_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")

ImageSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]
"""What :func:`load_image` reads: a path, the file's bytes, or a binary file-like object."""


def load_image(
    source: ImageSource,
    *,
    max_side: int | None = DEFAULT_MAX_SIDE,
    min_side: int | None = None,
    small: Literal["upscale", "error"] = "upscale",
    background: Sequence[float] = (1.0, 1.0, 1.0),
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> LoadedImage:
    """Decode an untrusted image file into an RGB float array, with notices.

    Args:
        source: a path (``str`` or ``os.PathLike``), the raw file ``bytes``
            (``bytearray``/``memoryview`` too), or a binary file-like object. Objects with
            ``getvalue()`` (``io.BytesIO``, Streamlit's ``UploadedFile``) are read whole;
            otherwise ``read()`` is called after seeking to the start when possible. A
            ``name`` attribute, when present, is used in messages.
        max_side: longer-side limit in pixels; larger images are downscaled (Lanczos,
            aspect kept) with a notice. ``None`` disables downscaling.
        min_side: shorter-side minimum in pixels, e.g. ``min_side_for("alex")``; ``None``
            (default) accepts any size.
        small: what to do with an image whose shorter side is below ``min_side``:
            ``"upscale"`` (bicubic, aspect kept, with a notice) or ``"error"``.
        background: RGB floats in ``[0, 1]`` onto which transparent pixels are composited;
            white by default.
        max_pixels: the pixel budget: refuse, before decoding, an image whose returned size
            (after ``max_side`` downscaling; the stored size when ``max_side`` is ``None``) would
            exceed this many pixels (default :data:`DEFAULT_MAX_PIXELS`, 16 million). Files
            storing more than ``max(DECODE_MAX_PIXELS, max_pixels)`` pixels are refused too.

    Returns:
        A :class:`LoadedImage`; ``array`` is ``(H, W, 3)`` float32 C-contiguous in ``[0, 1]``,
        and 8-bit values are exactly ``value / 255``.

    Raises:
        ImageTooLarge: (an ``ImageLoadError``) over the pixel budget, over the file-size cap, or
            out of memory while decoding.
        ImageLoadError: the file is missing, empty, not an image, truncated or corrupt, too
            small (``small="error"``), too elongated to satisfy both ``min_side``
            and ``max_side``, or in a pixel format with no defined ``[0, 1]`` mapping.
            The original exception, if any, is kept as ``__cause__``.
        TypeError: ``source`` or an option has the wrong type.
        ValueError: an option has an invalid value (plain ``ValueError``, not
            ``ImageLoadError``).
    """
    bg = _check_options(max_side, min_side, small, background, max_pixels)
    data, name = _read_source(source)
    label = f"'{name}'" if name else "the file"
    if not data:
        raise ImageLoadError(
            f"{_cap(label)} is empty (0 bytes): the upload or download did not complete. "
            "Choose the file again, or re-download it."
        )
    try:
        return _decode(data, name, label, max_side, min_side, small, bg, max_pixels)
    except ImageLoadError:
        raise
    except Exception as exc:  # anything a hostile file can provoke inside Pillow: said in words
        raise _decode_error(exc, data, label, max_pixels) from exc


def _decode_error(exc: Exception, data: bytes, label: str, max_pixels: int) -> ImageLoadError:
    """What a failure while decoding ``data`` says to the user: Pillow's decompression-bomb guard
    and running out of memory are :class:`ImageTooLarge`; an unidentified format is named from
    the file's first bytes; anything else is a truncated, corrupt or unsupported file."""
    if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        match = _PILLOW_BOMB_PIXELS.search(str(exc))
        count = f"{int(match.group(1)):,} pixels" if match else "too many pixels"
        side = math.isqrt(max_pixels)
        return ImageTooLarge(
            f"{_cap(label)} has {count}, more than Pillow's decompression-bomb limit, so it "
            f"was refused before decoding ({exc}). Downscale it (e.g. to at most "
            f"{side} x {side}) and try again."
        )
    if isinstance(exc, MemoryError):
        return ImageTooLarge(
            f"Ran out of memory while decoding {label}. Downscale it (e.g. to 4000 x 3000) "
            "and try again."
        )
    if isinstance(exc, UnidentifiedImageError):
        return ImageLoadError(_unidentified_message(data, label))
    if isinstance(exc, (OSError, SyntaxError, EOFError, ValueError, IndexError, KeyError)):
        return ImageLoadError(
            f"{_cap(label)} could not be decoded: the file is truncated or corrupt "
            f"(Pillow: {type(exc).__name__}: {exc}). Re-download it, or re-export it from "
            "the program that made it."
        )
    return ImageLoadError(
        f"Unexpected error while decoding {label} ({type(exc).__name__}: {exc}): the "
        "file may be corrupt or use a feature Pillow does not support. Re-export it as "
        "PNG or JPEG and try again."
    )


def image_to_png_bytes(array: np.ndarray) -> bytes:
    """Encode an image array as 8-bit PNG bytes (e.g. for a download button).

    Args:
        array: ``(H, W, 3)`` or ``(H, W)``; float in ``[0, 1]`` (rounded to ``value * 255``)
            or ``uint8``.

    Returns:
        The PNG file as bytes; ``load_image`` of it gives back ``round(array * 255) / 255``.

    Raises:
        TypeError: ``array`` is not a NumPy array of a float or uint8 dtype.
        ValueError: wrong shape, or float values outside ``[0, 1]`` or not finite.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"array must be a numpy.ndarray, got {type(array).__name__}")
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] != 3):
        raise ValueError(f"array must have shape (H, W, 3) or (H, W), got {array.shape}")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"array must not be empty, got shape {array.shape}")
    if array.dtype == np.uint8:
        pixels = array
    elif np.issubdtype(array.dtype, np.floating):
        lo, hi = float(np.min(array)), float(np.max(array))
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0.0 or hi > 1.0:
            raise ValueError(
                f"float array values must be finite and in [0, 1], got min {lo} and max {hi}"
            )
        pixels = np.rint(array.astype(np.float64) * 255.0).astype(np.uint8)
    else:
        raise TypeError(f"array dtype must be a float dtype or uint8, got {array.dtype}")
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return buffer.getvalue()


def array_from_uint8(array: np.ndarray) -> np.ndarray:
    """Convert 8-bit pixels to this module's convention.

    Args:
        array: ``(H, W, 3)`` or ``(H, W)`` (gray, copied into R, G and B), dtype ``uint8``.

    Returns:
        ``(H, W, 3)`` float32 C-contiguous, exactly ``value / 255``.

    Raises:
        TypeError: not a NumPy ``uint8`` array.
        ValueError: wrong shape.
    """
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8:
        got = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
        raise TypeError(f"array must be a numpy uint8 array, got {got}")
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3):
        raise ValueError(f"array must have shape (H, W, 3) or (H, W), got {array.shape}")
    out = np.empty(array.shape[:2] + (3,), dtype=np.float32)
    out[...] = array
    out /= np.float32(255.0)
    return out


# --------------------------------------------------------------------------------------------
# Internals


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _size_text(w: int, h: int) -> str:
    return f"{w} x {h} pixels (W x H)"


def _check_options(max_side, min_side, small, background, max_pixels) -> np.ndarray:
    for opt, value in (("max_side", max_side), ("min_side", min_side)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{opt} must be an int or None, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{opt} must be >= 1, got {value}")
    if max_side is not None and min_side is not None and min_side > max_side:
        raise ValueError(f"min_side ({min_side}) must not exceed max_side ({max_side})")
    if small not in ("upscale", "error"):
        raise ValueError(f"small must be 'upscale' or 'error', got {small!r}")
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, (int, np.integer)):
        raise TypeError(f"max_pixels must be an int, got {type(max_pixels).__name__}")
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be >= 1, got {max_pixels}")
    try:
        bg = np.asarray(background, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"background must be 3 floats in [0, 1], got {background!r}"
        ) from None
    # three floats checked in Python: cheaper than NumPy reductions on so few values; NaN fails too
    if bg.shape != (3,) or not all(0.0 <= v <= 1.0 for v in bg.tolist()):
        raise ValueError(f"background must be 3 floats in [0, 1], got {background!r}")
    return bg


def _read_source(source) -> tuple[bytes, str]:
    """Return the whole file as bytes and a display name ("" when unknown)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), ""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        return read_image_file(path), path
    if hasattr(source, "getvalue") or hasattr(source, "read"):
        raw_name = getattr(source, "name", "")
        name = os.path.basename(raw_name) if isinstance(raw_name, str) else ""
        try:
            if hasattr(source, "getvalue"):
                data = source.getvalue()
            else:
                if hasattr(source, "seek"):
                    try:
                        source.seek(0)
                    except (OSError, ValueError):
                        pass  # not seekable: read from where it is
                data = source.read()
        except OSError as exc:
            label = f"'{name}'" if name else "the uploaded file"
            raise ImageLoadError(f"Could not read {label}: {exc}.") from exc
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise TypeError(
                "file-like source must return bytes (open files in binary mode 'rb'), "
                f"got {type(data).__name__}"
            )
        return data, name
    raise TypeError(
        "source must be a path, bytes or a binary file-like object, "
        f"got {type(source).__name__}"
    )


def read_image_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the image file at ``path``, through the one reader
    (:func:`lpips_core.files.read_bytes`): a regular file of at most :data:`MAX_FILE_BYTES`, its
    type and size checked before anything is read.

    Raises:
        ImageLoadError: the path is missing, unreadable, a directory, a FIFO, a device, a
            socket, or larger than :data:`MAX_FILE_BYTES` (:class:`ImageTooLarge`).
    """
    name = os.fsdecode(path)
    try:
        return files.read_bytes(path, max_bytes=MAX_FILE_BYTES)
    except (files.UnsafeFile, OSError, ValueError) as exc:
        raise _path_error(exc, name) from exc


def check_file(path: str | os.PathLike[str]) -> None:
    """Refuse, from ``os.stat`` alone (nothing is opened), a path :func:`load_image` must not read
    (:func:`lpips_core.files.check_regular` with :data:`MAX_FILE_BYTES`).

    Args:
        path: the file's path.

    Raises:
        ImageLoadError: the path does not exist, cannot be examined, is a directory, a named
            pipe, a device or a socket, or holds more than :data:`MAX_FILE_BYTES`.
    """
    name = os.fsdecode(path)
    try:
        files.check_regular(path, max_bytes=MAX_FILE_BYTES)
    except (files.UnsafeFile, OSError, ValueError) as exc:
        raise _path_error(exc, name) from exc


def _path_error(exc: BaseException, name: str) -> ImageLoadError:
    """What the reader's refusal or an ``OSError`` on an image path says to the user."""
    if isinstance(exc, files.UnsafeFile):
        return _refusal(exc, name)
    if isinstance(exc, FileNotFoundError):
        return ImageLoadError(f"No such file: '{name}'. Check the path.")
    if isinstance(exc, IsADirectoryError):
        return ImageLoadError(f"'{name}' is a directory, not an image file. Give the path of a file.")
    if isinstance(exc, PermissionError):
        return ImageLoadError(f"Permission denied reading '{name}'. Check the file's permissions.")
    return ImageLoadError(f"Could not read '{name}': {exc}.")  # OSError, or ValueError: a NUL byte in the path


def _refusal(exc: "files.UnsafeFile", name: str) -> ImageLoadError:
    """The reader's refusal of an image path, in this module's words."""
    if exc.kind == "directory":
        return ImageLoadError(f"'{name}' is a directory, not an image file. Give the path of a file.")
    if exc.kind == "too_large":
        size = f"{exc.size / 2**20:,.0f} MiB" if exc.size is not None else "larger"
        return ImageTooLarge(
            f"'{name}' is {size}, more than the {MAX_FILE_BYTES // 2**20} MiB "
            "an image file may have here, so it was not read. Downscale or re-compress it."
        )
    kind = exc.reason.removeprefix("it is ").split(", not a regular file")[0]
    return ImageLoadError(
        f"'{name}' is {kind}, not an image file, so it was not read. Give the path of an "
        "image file."
    )


def _unidentified_message(data: bytes, label: str) -> str:
    head = data[:32]
    for magic, offset, what, advice in _SIGNATURES:
        if head[offset:offset + len(magic)].lower() == magic.lower():
            shown = magic.decode("latin-1")
            return (
                f"{_cap(label)} is not an image format Pillow can read: its content starts "
                f"with {shown!r}, so it is {what}. Please {advice}."
            )
    for magic, offset, fmt in _IMAGE_SIGNATURES:
        if head[offset:offset + len(magic)] == magic:
            return (
                f"{_cap(label)} starts like a {fmt} file but Pillow could not read its header: "
                "the file is truncated or corrupt (or an unsupported variant of "
                f"{fmt}). Re-download it, or re-export it as PNG or JPEG."
            )
    stripped = data[:512].lstrip()
    if stripped.startswith((b"<", b"{", b"[")) or _looks_like_text(data[:512]):
        preview = stripped[:16].decode("utf-8", errors="replace")
        return (
            f"{_cap(label)} is not an image format Pillow can read: it contains text "
            f"(starting {preview!r}), not image data. Choose a PNG, JPEG, WebP, GIF, BMP "
            "or TIFF file."
        )
    return (
        f"{_cap(label)} is not an image format Pillow can read (first bytes: "
        f"{data[:8].hex(' ')}). Choose a PNG, JPEG, WebP, GIF, BMP or TIFF file; if it "
        "should be one, it is corrupt: re-download or re-export it."
    )


def _looks_like_text(chunk: bytes) -> bool:
    if not chunk:
        return False
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(chunk) - 3:
            return False
        text = chunk[: exc.start].decode("utf-8")  # a character cut at the chunk's end
    return all(ch.isprintable() or ch in "\t\r\n\f" for ch in text)


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation tag (1 when absent or unreadable, as viewers treat it)."""
    try:
        value = im.getexif().get(0x0112, 1)
        return int(value) if value else 1
    except Exception:  # malformed EXIF: ignore it, as viewers do
        return 1


def _rawmode(im: Image.Image) -> str:
    """The decoder's raw mode of the first tile (e.g. "RGB;16B"), or "" when unknown."""
    tile = getattr(im, "tile", None)
    if not tile:
        return ""
    args = tile[0][3] if len(tile[0]) > 3 else None
    if isinstance(args, tuple) and args:
        args = args[0]
    return args if isinstance(args, str) else ""


def _stored_bit_depth(im: Image.Image, data: bytes) -> int:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) > 24:
        return int(data[24])
    tags = getattr(im, "tag_v2", None)
    if tags is not None:
        bits = tags.get(258)
        if isinstance(bits, tuple) and bits:
            return int(max(bits))
        if isinstance(bits, int):
            return bits
    raw = _rawmode(im)
    if ";16" in raw:
        return 16
    if ";32" in raw:
        return 32
    if im.mode == "1":
        return 1
    if im.mode in _UINT16_MODES or im.mode.startswith("I;16"):
        return 16
    if im.mode in ("I", "F"):
        return 32
    return 8


def _plan_size(
    w: int, h: int, max_side, min_side, small, label: str, rotated: bool
) -> tuple[int, int] | None:
    """Target (W, H) in stored orientation, or None to keep the size."""
    shown = _size_text(h, w) if rotated else _size_text(w, h)
    long_side, short_side = max(w, h), min(w, h)
    if max_side is not None and long_side > max_side:
        scale = max_side / long_side
        target = (
            (max_side, max(1, round(h * scale))) if w >= h
            else (max(1, round(w * scale)), max_side)
        )
        if min_side is not None and min(target) < min_side:
            raise ImageLoadError(
                f"{_cap(label)} is {shown}: too elongated to fit its longer side within "
                f"max_side={max_side} while keeping its shorter side at least "
                f"{min_side} pixels (the backbone's minimum). Crop it to a less elongated "
                "region and try again."
            )
        return target
    if min_side is not None and short_side < min_side:
        if small == "error":
            raise ImageLoadError(
                f"{_cap(label)} is {shown}, smaller than the {min_side} pixels per side "
                f"that the chosen backbone needs (min_side={min_side}). Use an image at least "
                f"{min_side} x {min_side} pixels."
            )
        scale = min_side / short_side
        if w <= h:
            target = (min_side, max(min_side, round(h * scale)))
        else:
            target = (max(min_side, round(w * scale)), min_side)
        if max_side is not None and max(target) > max_side:
            raise ImageLoadError(
                f"{_cap(label)} is {shown}: too elongated to bring its shorter side up to "
                f"{min_side} pixels (the backbone's minimum) while keeping its longer side "
                f"within max_side={max_side}. Crop it to a less elongated region and try "
                "again."
            )
        return target
    return None


def _decode(data, name, label, max_side, min_side, small, bg, max_pixels) -> LoadedImage:
    """Decode ``data`` (already known non-empty) into a :class:`LoadedImage`: the header's checks,
    the first frame, one resize in the stored orientation, then the EXIF orientation."""
    notices: list[str] = []
    with Image.open(io.BytesIO(data)) as im:
        fmt = im.format or "unknown"
        mode = im.mode
        w, h = im.size
        _check_stored_size(w, h, max_pixels, label)
        bit_depth = _stored_bit_depth(im, data)
        rawmode = _rawmode(im)
        icc = bool(im.info.get("icc_profile"))
        n_frames = _first_frame(im, fmt, notices)

        # Orientation before decoding only where it costs nothing (JPEG/WebP keep EXIF in
        # the header); it only affects how sizes are worded in the size-limit messages.
        early = _orientation(im) if "exif" in im.info else 1
        target = _plan_size(w, h, max_side, min_side, small, label, early in (5, 6, 7, 8))
        _check_budget(w, h, target, max_pixels, label)

        box = _draft_box(im, target, fmt, mode, w, n_frames)
        pixels = _png_rgb8_fast(im, data, fmt, mode, bit_depth, n_frames)
        if pixels is not None and target is None:
            # A plain 8-bit RGB PNG used at its own size: no orientation tag, alpha, conversion
            # or resize below would touch its pixels, so they are used as decoded.
            return LoadedImage(
                array=array_from_uint8(pixels), notices=tuple(notices), name=name, format=fmt,
                mode=mode, original_size=(w, h), size=(h, w), bit_depth=bit_depth,
                had_alpha=False, was_grayscale=False, exif_orientation=1, n_frames=n_frames,
                downscaled_from=None, upscaled_from=None, icc_profile=icc,
            )
        if pixels is not None:
            frame = Image.fromarray(pixels)
        else:
            im.load()  # decode errors propagate from here (never swallowed below)
            frame = im

        # After load: PNG keeps EXIF (eXIf chunk) wherever it likes, even after the pixels.
        orientation = _orientation(frame)
        rotated = orientation in (5, 6, 7, 8)

        had_alpha = mode in _ALPHA_MODES or "transparency" in frame.info
        was_grayscale = mode in _GRAY_MODES or mode.startswith("I;16")

        # -- Bring the frame to one of: RGB, RGBA, L, LA (8-bit) or F (float in [0, 1]). --
        work, note = _canonical(frame, frame.mode, fmt, bit_depth, rawmode, label)
        if note:
            notices.append(note)

        work, down = _resize(work, target, box, im.size, w, h, rotated, max_side, min_side, notices)
        work = _apply_orientation(work, orientation, notices)
        array = _to_rgb_float(work, bg, notices)

    before = (h, w) if not rotated else (w, h)
    return LoadedImage(
        array=array,
        notices=tuple(notices),
        name=name,
        format=fmt,
        mode=mode,
        original_size=(w, h),
        size=(int(array.shape[0]), int(array.shape[1])),
        bit_depth=bit_depth,
        had_alpha=bool(had_alpha),
        was_grayscale=bool(was_grayscale),
        exif_orientation=orientation,
        n_frames=n_frames,
        downscaled_from=before if down is True else None,
        upscaled_from=before if down is False else None,
        icc_profile=icc,
    )


def _check_stored_size(w: int, h: int, max_pixels: int, label: str) -> None:
    """Refuse, from the header, a declared size that is empty (a corrupt file) or a stored image
    over ``max(DECODE_MAX_PIXELS, max_pixels)`` pixels (:class:`ImageTooLarge`): what Pillow would
    decode before any downscaling."""
    if w < 1 or h < 1:
        raise ImageLoadError(
            f"{_cap(label)} declares a size of {w} x {h} pixels: the file is corrupt. "
            "Re-download it or re-export it."
        )
    decode_cap = max(DECODE_MAX_PIXELS, max_pixels)
    if w * h > decode_cap:
        side = math.isqrt(decode_cap)
        raise ImageTooLarge(
            f"{_cap(label)} is {_size_text(w, h)} = {w * h:,} pixels, more than the "
            f"{decode_cap:,} this loader decodes, so it was refused before decoding to "
            f"protect memory. Downscale it (e.g. to at most {side} x {side}) and try again."
        )


def _first_frame(im: Image.Image, fmt: str, notices: list[str]) -> int:
    """The file's frame count (1 when it cannot be counted), with ``im`` left on frame 0 and a
    notice when other frames are ignored."""
    try:
        n_frames = int(getattr(im, "n_frames", 1) or 1)
        counted = True
    except Exception:  # a damaged later frame must not stop us using the first one
        n_frames, counted = 1, False
    if n_frames > 1 or not counted:
        im.seek(0)  # counting frames moves through the file; come back to frame 0
    if n_frames > 1:
        notices.append(
            f"The {fmt} file has {n_frames} frames (an animation, pages or several "
            "images); only the first frame was used."
        )
    elif not counted:
        notices.append(
            f"The {fmt} file's frames could not be counted (a later frame is damaged); "
            "only the first frame was used."
        )
    return n_frames


def _draft_box(im: Image.Image, target: tuple[int, int] | None, fmt: str, mode: str, w: int,
               n_frames: int) -> tuple | None:
    """For a single-frame JPEG to be downscaled: ask libjpeg for DCT scaling to no less than twice
    ``target`` (``Image.thumbnail``'s ``reducing_gap=2``) and return the source box of the drafted
    image to resize from, else ``None``."""
    if target is not None and target[0] < w and fmt in ("JPEG", "MPO") and n_frames == 1:
        drafted = im.draft(mode, (target[0] * 2, target[1] * 2))
        if drafted is not None:
            return drafted[1]
    return None


def _resize(work: Image.Image, target: tuple[int, int] | None, box: tuple | None,
            decoded_size: tuple[int, int], w: int, h: int, rotated: bool, max_side, min_side,
            notices: list[str]) -> tuple[Image.Image, bool | None]:
    """Resize once, in the stored orientation, to ``target`` (W, H), with a notice.

    Returns:
        The resized image and ``True`` (downscaled, Lanczos), ``False`` (upscaled, bicubic) or
        ``None`` (no ``target``: unchanged).
    """
    if target is None:
        return work, None
    down = target[0] < w
    resample = Image.Resampling.LANCZOS if down else Image.Resampling.BICUBIC
    if box is not None and work.size != decoded_size:
        box = None  # conversion changed the geometry: resize from the whole frame
    work = work.resize(target, resample, box=box)
    shown_before = (w, h) if not rotated else (h, w)
    shown_after = target if not rotated else (target[1], target[0])
    if down:
        notices.append(
            f"Downscaled from {shown_before[0]} x {shown_before[1]} to "
            f"{shown_after[0]} x {shown_after[1]} pixels (W x H) with Lanczos "
            f"filtering, to keep the longer side within max_side={max_side}."
        )
    else:
        notices.append(
            f"Upscaled from {shown_before[0]} x {shown_before[1]} to "
            f"{shown_after[0]} x {shown_after[1]} pixels (W x H) with bicubic "
            f"interpolation, because the chosen backbone needs at least {min_side} "
            f"pixels per side (min_side={min_side})."
        )
    return work, down


def _apply_orientation(work: Image.Image, orientation: int, notices: list[str]) -> Image.Image:
    """``work`` turned upright by its EXIF ``orientation`` (after resizing: transposes are exact),
    with a notice; unchanged for an upright or unknown tag."""
    transpose = _ORIENTATION_TEXT.get(orientation)
    if transpose is None:
        return work
    work = work.transpose(transpose[0])
    notices.append(
        f"The image was {transpose[1]} to apply its EXIF orientation tag "
        f"({orientation}), so it is upright as the camera intended."
    )
    return work


def _check_budget(w: int, h: int, target: tuple[int, int] | None, max_pixels: int, label: str) -> None:
    """Refuse (:class:`ImageTooLarge`) an image whose returned size, ``target`` or the stored
    ``w x h``, exceeds the pixel budget ``max_pixels``: from the header, before decoding."""
    tw, th = target if target is not None else (w, h)
    if tw * th <= max_pixels:
        return
    side = math.isqrt(max_pixels)
    size = _size_text(w, h) + (f" (to be used at {tw} x {th})" if target is not None else "")
    raise ImageTooLarge(
        f"{_cap(label)} is {size} = {tw * th:,} pixels, more than the pixel budget of "
        f"{max_pixels:,} (max_pixels), so it was refused before decoding to protect memory. "
        f"Downscale it (e.g. to at most {side} x {side}), or raise the budget (max_pixels; "
        "--max-pixels on the command line)."
    )


def header_pixels(source: "str | os.PathLike[str]") -> int | None:
    """Width x height of an image file from its header alone (no pixel decoded), or ``None`` when
    the path is not a regular file within :data:`MAX_FILE_BYTES` or its header is not an image's.

    Used to add up the pixels of many files (an upload's total pixel budget) before any of
    them is decoded. A file past Pillow's decompression-bomb limit gives the count Pillow read.
    """
    import warnings

    try:
        with files.open_regular(source, max_bytes=MAX_FILE_BYTES) as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(fh) as im:
                w, h = im.size
    except Image.DecompressionBombError as exc:
        match = _PILLOW_BOMB_PIXELS.search(str(exc))
        return int(match.group(1)) if match else None
    except Exception:  # any unreadable header: the file is reported when it is loaded
        return None
    return int(w) * int(h) if w > 0 and h > 0 else None


def _png_rgb8_fast(im: Image.Image, data: bytes, fmt: str, mode: str, bit_depth: int,
                   n_frames: int) -> np.ndarray | None:
    """The pixels of a plain 8-bit RGB PNG decoded by libspng (``pyspng``), else ``None``.

    Plain: one frame, no transparency key and no ``eXIf`` chunk anywhere in the file (Pillow
    finds one after the pixels only while decoding), so Pillow's path would use the pixels as
    they are stored. libspng decodes such a file to the same bytes as Pillow in less time, and
    decoding is a sizeable share of a dataset run's work at small image sizes. Anything else, or
    any failure of libspng (a corrupt or truncated file), returns ``None``: Pillow decodes it and
    words the error.
    """
    if (_spng is None or fmt != "PNG" or mode != "RGB" or bit_depth != 8 or n_frames != 1
            or "transparency" in im.info):
        return None
    chunks = _png_chunk_types(data)
    if chunks is None or b"eXIf" in chunks:
        return None
    try:
        pixels = _spng.load(data)
    except Exception:
        return None
    w, h = im.size
    if pixels.dtype != np.uint8 or pixels.shape != (h, w, 3):
        return None
    return pixels


def _png_chunk_types(data: bytes) -> set[bytes] | None:
    """The chunk types of a PNG file, walked from chunk header to chunk header up to ``IEND``
    (a few dozen steps, where searching the whole file for a type's four bytes would read every
    byte and could match them inside compressed pixels); ``None`` if the chunks run past the end
    of the file or ``IEND`` is missing (a truncated or corrupt file)."""
    view, pos, end, types = memoryview(data), 8, len(data), set()
    while pos + 12 <= end:
        length = int.from_bytes(view[pos:pos + 4], "big")
        kind = bytes(view[pos + 4:pos + 8])
        pos += 12 + length
        if pos > end:
            return None
        types.add(kind)
        if kind == b"IEND":
            return types
    return None


def _canonical(
    im: Image.Image, mode: str, fmt: str, bit_depth: int, rawmode: str, label: str
) -> tuple[Image.Image, str | None]:
    """Convert to RGB, RGBA, L, LA or F (float in [0, 1]); return it and a notice."""
    has_key = "transparency" in im.info
    if mode == "RGB":
        if has_key:
            return im.convert("RGBA"), None
        return im, _reduced_note(fmt, bit_depth, rawmode)
    if mode == "RGBA":
        return im, _reduced_note(fmt, bit_depth, rawmode)
    if mode in ("RGBa", "RGBX"):
        return im.convert("RGBA" if mode == "RGBa" else "RGB"), None
    if mode == "L":
        return (im.convert("LA") if has_key else im), (
            "Grayscale image: its single channel was copied into R, G and B "
            "(the backbones take RGB input)."
        )
    if mode in ("LA", "La"):
        return im.convert("LA") if mode == "La" else im, (
            "Grayscale image: its single channel was copied into R, G and B "
            "(the backbones take RGB input)."
        )
    if mode == "1":
        return im.convert("L"), (
            "1-bit black-and-white image: black became 0 and white 1, copied into R, G and B."
        )
    if mode in ("P", "PA"):
        out = im.convert("RGBA" if (has_key or mode == "PA") else "RGB")
        return out, "Palette (indexed-colour) image: converted to RGB through its palette."
    if mode == "CMYK":
        return im.convert("RGB"), (
            "CMYK image: converted to RGB with Pillow's plain formula (no colour "
            "management), so colours may differ slightly from a print-oriented viewer."
        )
    return _canonical_wide(im, mode, bit_depth, rawmode, label, has_key)


def _canonical_wide(
    im: Image.Image, mode: str, bit_depth: int, rawmode: str, label: str, has_key: bool
) -> tuple[Image.Image, str | None]:
    """:func:`_canonical` for the modes beyond 8 bits per sample (16-bit and 32-bit integer,
    float) and any other mode Pillow can convert to RGB; refuses those with no ``[0, 1]`` mapping.
    ``has_key``: the image has a transparent colour key."""
    if mode in _UINT16_MODES:
        values = np.asarray(im).astype(np.float32)
        values /= np.float32(65535.0)
        ignored = " (its transparent colour key was ignored: unsupported at 16 bits)"
        return Image.fromarray(values), (
            "16-bit grayscale image: values were divided by 65535 (not 255) to map them "
            f"to [0, 1], keeping the full 16-bit precision{ignored if has_key else ''}."
        )
    if mode == "I":
        signed = rawmode.endswith("S") or rawmode.startswith("I;16S")
        if bit_depth <= 16 and not signed:
            full = float(2**bit_depth - 1)
            values = np.asarray(im).astype(np.float64)
            if values.min() < 0 or values.max() > full:
                raise ImageLoadError(
                    f"{_cap(label)} is a {bit_depth}-bit integer image with values outside "
                    f"0..{int(full)}: the file is corrupt. Re-export it as 8- or 16-bit PNG."
                )
            return Image.fromarray((values / full).astype(np.float32)), (
                f"{bit_depth}-bit grayscale image: values were divided by {int(full)} to map "
                "them to [0, 1]."
            )
        kind = "signed 16-bit" if signed else f"{bit_depth}-bit"
        raise ImageLoadError(
            f"{_cap(label)} stores {kind} integer samples (Pillow mode I), which have no "
            "standard black and white levels to map to [0, 1]. Re-export it as an 8- or "
            "16-bit PNG."
        )
    if mode == "F":
        values = np.asarray(im, dtype=np.float32)
        lo, hi = float(np.min(values)), float(np.max(values))
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0.0 or hi > 1.0:
            raise ImageLoadError(
                f"{_cap(label)} is a 32-bit floating-point image with values from {lo:g} to "
                f"{hi:g}; only float images already in [0, 1] can be used (no range is "
                "guessed). Re-export it as an 8- or 16-bit PNG."
            )
        return im, (
            "32-bit floating-point grayscale image: values used as stored (they already lie "
            "in [0, 1])."
        )
    if mode.startswith("I;16"):
        raise ImageLoadError(
            f"{_cap(label)} stores 16-bit samples in Pillow mode {mode}, which has no "
            "standard mapping to [0, 1]. Re-export it as an 8- or 16-bit PNG."
        )
    try:
        converted = im.convert("RGB")
    except (ValueError, OSError) as exc:
        raise ImageLoadError(
            f"{_cap(label)} uses the {mode} colour mode, which Pillow cannot convert to RGB. "
            "Re-export it as an RGB PNG or JPEG."
        ) from exc
    return converted, f"{mode} image: converted to RGB by Pillow."


def _reduced_note(fmt: str, bit_depth: int, rawmode: str) -> str | None:
    if bit_depth > 8 or ";16" in rawmode:
        return (
            f"The {fmt} stores 16 bits per colour channel, but Pillow decodes colour images "
            "at 8 bits: the low byte of each value was dropped (values are the high byte / 255)."
        )
    return None


def _to_rgb_float(work: Image.Image, bg: np.ndarray, notices: list[str]) -> np.ndarray:
    """(H, W, 3) float32 C-contiguous in [0, 1] from an RGB, RGBA, L, LA or F image."""
    if work.mode == "F":
        gray = np.clip(np.asarray(work, dtype=np.float32), 0.0, 1.0)  # Lanczos overshoot
        out = np.empty(gray.shape + (3,), dtype=np.float32)
        out[...] = gray[:, :, None]
        return out
    pixels = np.asarray(work)
    if work.mode in ("RGB", "L"):
        return array_from_uint8(pixels)
    if work.mode not in ("RGBA", "LA"):  # pragma: no cover - _canonical guarantees this
        raise ImageLoadError(f"internal error: unexpected working mode {work.mode}")
    alpha = pixels[:, :, -1]
    colour = pixels[:, :, :-1]
    transparent = int(np.count_nonzero(alpha < 255))
    if transparent == 0:
        return array_from_uint8(colour if colour.shape[2] == 3 else colour[:, :, 0])
    a = alpha.astype(np.float64)[:, :, None] / 255.0
    c = colour.astype(np.float64) / 255.0  # (H, W, 1) for LA broadcasts over bg's 3 channels
    out = np.ascontiguousarray((c * a + bg * (1.0 - a)).astype(np.float32))
    share = 100.0 * transparent / alpha.size
    bg_text = ", ".join(f"{v:g}" for v in bg)
    what = "a white" if np.all(bg == 1.0) else ("a black" if np.all(bg == 0.0) else "the")
    notices.append(
        f"{share:.3g}% of the pixels are (partly) transparent: they were composited onto "
        f"{what} background (RGB {bg_text}), because LPIPS compares opaque RGB images."
    )
    return out
