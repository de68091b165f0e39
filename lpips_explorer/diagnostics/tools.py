"""Image tools behind the checks: resize to a size, file facts, EXIF undo, shift and blockiness.

Pure NumPy/torch functions on ``(H, W, 3)`` float arrays in ``[0, 1]``; no model involved except
in :func:`lpips_values`, the one way every check scores a pair.
"""

from __future__ import annotations

import io
import math
from typing import Any, Sequence

import numpy as np
from PIL import Image

from lpips_core.cells import number
from lpips_core.conventions import LUMA, RESIZE_METHODS, resize, to_tensor
from lpips_explorer.distortions import shift
from lpips_core.images import LoadedImage, image_to_png_bytes, undo_exif_orientation
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many

__all__ = [
    "GRAY_TOLERANCE",
    "JPEG_BLOCK",
    "SHIFT_UPSAMPLE",
    "blockiness",
    "alpha_dropped",
    "demo_pair",
    "distinct_levels",
    "encode_like",
    "estimate_shift",
    "image_facts",
    "is_gray",
    "lpips_values",
    "match_size",
    "undo_exif",
]

#: ITU-R BT.601 luma weights (:data:`lpips_core.conventions.LUMA`, the one definition).
_LUMA = np.asarray(LUMA)
#: Largest channel difference (in ``[0, 1]`` units) for a pixel to count as gray: half an 8-bit level.
GRAY_TOLERANCE = 1.0 / 512
#: JPEG's block size (pixels), the grid :func:`blockiness` measures.
JPEG_BLOCK = 8
#: Sub-pixel precision of :func:`estimate_shift`: ``1 / SHIFT_UPSAMPLE`` px.
SHIFT_UPSAMPLE = 10
#: Largest value of an 8-bit channel, for scaling ``[0, 1]`` to bytes.
_U8_MAX = 255.0



def luma(img: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` → ``(H, W)`` float64 BT.601 luma."""
    return np.asarray(img, dtype=np.float64) @ _LUMA


def is_gray(img: np.ndarray, tol: float = GRAY_TOLERANCE) -> bool:
    """Whether every pixel of ``(H, W, 3)`` has its three channels within ``tol`` of each other."""
    a = np.asarray(img)
    return bool(np.abs(a[..., 0] - a[..., 1]).max() <= tol and np.abs(a[..., 1] - a[..., 2]).max() <= tol)


def match_size(img: np.ndarray, size: tuple[int, int], *, method: str = "bilinear") -> np.ndarray:
    """Resize ``(H, W, 3)`` in ``[0, 1]`` to ``size = (H', W')`` with the engine's resize.

    Uses :func:`lpips_core.conventions.resize` (antialiased bilinear by default), the same
    resampling the model's ``size`` option applies, so the numbers match what a user of the
    library would get. Returns float32 ``(H', W', 3)``; the image itself when the size agrees.

    Raises:
        ValueError: ``method`` not one of :data:`lpips_core.conventions.RESIZE_METHODS`.
    """
    if method not in RESIZE_METHODS:
        raise ValueError(f"method must be one of {RESIZE_METHODS}, got {method!r}")
    if tuple(img.shape[:2]) == tuple(size):
        return img
    out = resize(to_tensor(img), tuple(size), method=method)[0].permute(1, 2, 0).clamp_(0, 1)
    return np.ascontiguousarray(out.numpy(), dtype=np.float32)


def image_facts(img: LoadedImage) -> dict[str, Any]:
    """The facts about one loaded file that can explain a score (JSON-ready).

    ``value_min``/``value_max`` are over the decoded ``[0, 1]`` array. ``levels`` is the number of
    distinct values of its first (red) channel on the file's own integer grid (``levels_possible``:
    ``2 ** bit_depth``, e.g. 256 for 8-bit data; fewer means a reduced or quantised range), the
    array rounded to that grid first: a file with transparency was composited on a background,
    which puts its partly transparent pixels between the grid's steps (an 8-bit RGBA file could
    otherwise show tens of thousands of distinct values). Files of more than 16 bits per sample
    (32-bit integer or float) count their distinct values as decoded (``levels_possible`` ``None``).
    """
    a = img.array
    levels, possible = distinct_levels(a[..., 0], img.bit_depth)
    return {
        "name": img.name,
        "format": img.format,
        "mode": img.mode,
        "stored_size_wh": list(img.original_size),
        "size_hw": list(img.size),
        "bit_depth": img.bit_depth,
        "value_min": float(a.min()),
        "value_max": float(a.max()),
        "levels": levels,
        "levels_possible": possible,
        "had_alpha": img.had_alpha,
        "was_grayscale": img.was_grayscale,
        "effectively_grayscale": is_gray(a),
        "exif_orientation": img.exif_orientation,
        "n_frames": img.n_frames,
        "downscaled_from_hw": list(img.downscaled_from) if img.downscaled_from else None,
        "upscaled_from_hw": list(img.upscaled_from) if img.upscaled_from else None,
        "icc_profile": img.icc_profile,
        "notices": list(img.notices),
    }


#: Bits per sample up to which :func:`distinct_levels` counts on the file's integer grid.
_GRID_BITS = 16


def distinct_levels(channel: np.ndarray, bit_depth: int) -> tuple[int, int | None]:
    """``(levels, possible)``: the distinct values of one ``[0, 1]`` channel on a ``bit_depth``-bit
    grid (values rounded to the nearest of its ``2 ** bit_depth`` steps) and that number of steps.

    Beyond :data:`_GRID_BITS` bits the values are counted as they are and ``possible`` is ``None``.

    Example:
        >>> distinct_levels(np.array([0.0, 0.5, 0.502, 1.0]), 8)
        (3, 256)
    """
    if bit_depth > _GRID_BITS:
        return int(np.unique(channel).size), None
    top = float(2 ** bit_depth - 1)
    return int(np.unique(np.rint(np.asarray(channel, dtype=np.float64) * top)).size), 2 ** bit_depth


def undo_exif(img: np.ndarray, orientation: int) -> np.ndarray:
    """The image as stored in the file, before its EXIF orientation ``orientation`` was applied.

    The loader applies Pillow's transpose for tags 2–8; this applies the inverse. Tag 1 (or any
    other value) returns the image unchanged.
    """
    return undo_exif_orientation(img, orientation)  # the loader's own EXIF table


def estimate_shift(reference: np.ndarray, test: np.ndarray, *,
                   upsample: int = SHIFT_UPSAMPLE) -> tuple[float, float]:
    """Translation between two same-size images by phase correlation, to ``1/upsample`` px.

    Returns:
        ``(dy, dx)``: shifting ``test`` by ``dy`` down and ``dx`` right best matches
        ``reference`` (:func:`skimage.registration.phase_cross_correlation` on the luma,
        ``normalization="phase"``, ``upsample_factor=upsample``).

    Raises:
        ValueError: the two shapes differ.
    """
    from skimage.registration import phase_cross_correlation

    if reference.shape != test.shape:
        raise ValueError(f"estimate_shift needs equal shapes, got {reference.shape} and {test.shape}")
    moved, _, _ = phase_cross_correlation(luma(reference), luma(test), upsample_factor=upsample)
    return float(moved[0]), float(moved[1])


def blockiness(img: np.ndarray, *, block: int = JPEG_BLOCK) -> float:
    """How much stronger luma steps are across ``block``-pixel boundaries than elsewhere.

    Definition: with ``Y`` the BT.601 luma, take the mean absolute difference between
    horizontally adjacent pixels over the column pairs that straddle a block boundary
    (columns ``kB − 1`` and ``kB``, grid anchored at the top-left pixel as JPEG's is) and
    divide it by the same mean over all other adjacent column pairs; do the same for rows; the
    blockiness is the mean of the two ratios. About 1 for an image without a block grid; well
    above 1 (e.g. 1.5–3) for a strongly compressed JPEG. A flat image gives 1.

    Args:
        img: ``(H, W, 3)`` float in ``[0, 1]``, at least ``2 · block`` pixels per side.
        block: the block size (8 for JPEG).

    Raises:
        ValueError: an image too small for two blocks per side.
    """
    y = luma(img)
    h, w = y.shape
    if min(h, w) < 2 * block:
        raise ValueError(f"blockiness needs at least {2 * block} pixels per side, got {h}×{w}")
    ratios = []
    for d in (np.abs(np.diff(y, axis=1)), np.abs(np.diff(y, axis=0)).T):
        idx = np.arange(d.shape[1])
        on = (idx + 1) % block == 0
        across, within = float(d[:, on].mean()), float(d[:, ~on].mean())
        ratios.append(1.0 if within == 0 and across == 0 else (across / within if within > 0 else float("inf")))
    return float(np.mean(ratios))


def demo_pair(reference: np.ndarray, *, dx: float = 3.0, dy: float = 2.0, quality: int = 30) -> tuple[bytes, bytes]:
    """Files for trying the checks without uploads: the reference as PNG, a test as JPEG.

    The test image is the reference shifted by ``(dx, dy)`` pixels (``"reflect"`` boundary) and
    saved as a baseline JPEG of ``quality`` (4:2:0), so the misalignment and blockiness checks
    have something to find. Both go through :func:`load_image` exactly like uploads.
    """
    moved = shift(np.asarray(reference, dtype=np.float32), dx, dy, boundary="reflect")
    buf = io.BytesIO()
    Image.fromarray(np.rint(moved * _U8_MAX).astype(np.uint8)).save(buf, format="JPEG", quality=int(quality))
    return image_to_png_bytes(np.asarray(reference, dtype=np.float32)), buf.getvalue()


def lpips_values(model: LPIPS, ref: np.ndarray, images: Sequence[np.ndarray], **opts) -> list[float]:
    """LPIPS of ``ref`` against each of ``images`` (:func:`lpips_core.sweeps.lpips_many`, ``opts`` passed on).

    The counterfactuals' references (on black, resized, cropped…) are one-offs: they use the
    model's reference cache but are not stored in it (``keep_reference=False`` unless ``opts``
    says otherwise), so the pair's own reference, scored first, stays cached for the user's next
    test image."""
    opts.setdefault("keep_reference", False)
    return [float(v) for v in lpips_many(model, ref, list(images), **opts).total]


def fmt(v: float | None) -> str:
    """A score to 4 decimals (:func:`~lpips_core.cells.number`), ``"n/a"`` for ``None`` or a non-finite value."""
    return "n/a" if v is None or not math.isfinite(v) else number(v, 4)


def ratio_text(value: float, base: float) -> str:
    """``" (×1.23)"`` for ``value / base``; empty when either is non-finite or ``base <= 0``."""
    if not (math.isfinite(value) and math.isfinite(base)) or base <= 0:
        return ""
    return f" (×{value / base:.2f})"


def alpha_dropped(data: bytes) -> bytes | None:
    """The file's RGB channels with its alpha channel ignored, as PNG bytes; ``None`` without alpha.

    The EXIF orientation is applied first (as :func:`lpips_core.images.load_image` does), so the
    result loads upright; load it with :func:`load_image` to get the pixels a loader that
    discards transparency would compare (whatever colour the transparent pixels hide).
    """
    from PIL import ImageOps

    with Image.open(io.BytesIO(data)) as im:
        if "A" not in im.getbands() and "transparency" not in im.info:
            return None
        rgb = ImageOps.exif_transpose(im).convert("RGBA").convert("RGB")
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue()


def encode_like(img: np.ndarray, jpeg_file: bytes) -> np.ndarray | None:
    """``img`` re-encoded with a JPEG file's own quantisation tables and chroma subsampling.

    Args:
        img: ``(H, W, 3)`` float in ``[0, 1]`` (rounded to 8 bits before encoding).
        jpeg_file: the bytes of a JPEG file.

    Returns:
        ``(H, W, 3)`` float32 in ``[0, 1]``, the decoded re-encoding; ``None`` when ``jpeg_file``
        is not a JPEG.
    """
    from PIL import JpegImagePlugin

    with Image.open(io.BytesIO(jpeg_file)) as im:
        if im.format != "JPEG":
            return None
        tables, sampling = dict(im.quantization), JpegImagePlugin.get_sampling(im)
    buf = io.BytesIO()
    u8 = np.rint(np.clip(np.asarray(img, dtype=np.float64), 0, 1) * _U8_MAX).astype(np.uint8)
    opts = {"qtables": tables} | ({"subsampling": sampling} if sampling >= 0 else {})
    Image.fromarray(u8).save(buf, format="JPEG", **opts)
    with Image.open(buf) as out:
        return np.asarray(out.convert("RGB"), dtype=np.float32) / np.float32(_U8_MAX)
