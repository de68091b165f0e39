"""Scores around a pair: each way of matching the sizes, and LPIPS before/after undoing a shift."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lpips_core.conventions import RESIZE_METHODS
from lpips_explorer.distortions import shift
from lpips_core.images import min_side_for
from lpips_core.model import LPIPS
from lpips_explorer.diagnostics.tools import SHIFT_UPSAMPLE, estimate_shift, lpips_values, match_size
from lpips_explorer.text import size_text

__all__ = ["Alignment", "EQUAL_SIZE_SIDES", "ResizeOption", "SQUARE_SIDE", "alignment", "resize_options"]

#: Square sides tried for a pair of equal sizes: the BAPPS patch size the lin weights were
#: fitted on, and a common working size.
EQUAL_SIZE_SIDES: tuple[int, ...] = (64, 256)
#: The square both images are resized to (ignoring the aspect ratio) when their sizes differ.
SQUARE_SIDE = 256
#: Slack under which a fractional shift rounds down to whole pixels of crop.
_CROP_EPS = 1e-9


@dataclass(frozen=True)
class ResizeOption:
    """One way of bringing the pair to a common size, and the LPIPS it gives.

    Attributes:
        label: what was done, e.g. ``"both → 64×64 px"`` (sizes written width first, as
            :func:`lpips_explorer.text.size_text` does).
        method: the resampling (``"none"``, ``"crop"`` or one of :data:`RESIZE_METHODS`).
        size: ``(H, W)`` the pair was compared at (NumPy order).
        lpips: the score; ``note``: what the option means.
    """

    label: str
    method: str
    size: tuple[int, int]
    lpips: float
    note: str


@dataclass(frozen=True)
class Alignment:
    """The estimated translation of the test image and LPIPS around undoing it.

    Attributes:
        dy, dx: the shift (pixels, down and right) that moves the test image onto the reference,
            as returned by phase correlation.
        crop: the border (pixels per side) removed from both images for the before/after scores,
            so that no extended border pixel is compared.
        lpips_before, lpips_after: LPIPS on that central crop, unaligned and aligned; ``nan`` when
            the crop would leave an image too small for the backbone.
    """

    dy: float
    dx: float
    crop: int
    lpips_before: float
    lpips_after: float


def resize_options(model: LPIPS, reference: np.ndarray, test: np.ndarray,
                   *, convention: str = "[-1,1]") -> list[ResizeOption]:
    """The LPIPS each way of bringing the pair to one size gives.

    Equal sizes: the native pair, and both resized to each of :data:`EQUAL_SIZE_SIDES` squared.
    Different sizes: the test resized to the reference's size with each of
    :data:`RESIZE_METHODS`; the reference resized to the test's size; both resized to
    :data:`SQUARE_SIDE` squared (ignores the aspect ratio); and the central crop to the common
    size (no resampling; only meaningful when the two differ by a border).

    Args:
        reference, test: ``(H, W, 3)`` and ``(H', W', 3)`` float in ``[0, 1]``.
    """
    h, w = reference.shape[:2]
    th, tw = test.shape[:2]
    opts = dict(convention=convention)
    out: list[ResizeOption] = []
    if (h, w) == (th, tw):
        native = lpips_values(model, reference, [test], **opts)[0]
        out.append(ResizeOption("native size", "none", (h, w), native, "the pair as loaded"))
        for side in EQUAL_SIZE_SIDES:
            v = lpips_values(model, reference, [test], size=side, **opts)[0]
            out.append(ResizeOption(f"both → {size_text(side, side)}", "bilinear", (side, side), v,
                                    "the model's size option (antialiased bilinear)"))
        return out
    moved = [match_size(test, (h, w), method=m) for m in RESIZE_METHODS]
    for m, v in zip(RESIZE_METHODS, lpips_values(model, reference, moved, **opts)):
        out.append(ResizeOption(f"test → reference size ({m})", m, (h, w), v,
                                "the reference stays untouched" if m == "bilinear" else f"{m} interpolation"))
    ref_small = match_size(reference, (th, tw))
    out.append(ResizeOption("reference → test size (bilinear)", "bilinear", (th, tw),
                            lpips_values(model, ref_small, [test], **opts)[0], "the test stays untouched"))
    square = (SQUARE_SIDE, SQUARE_SIDE)
    sq_ref, sq_test = match_size(reference, square), match_size(test, square)
    out.append(ResizeOption(f"both → {size_text(SQUARE_SIDE, SQUARE_SIDE)} (bilinear)", "bilinear", square,
                            lpips_values(model, sq_ref, [sq_test], **opts)[0], "ignores the aspect ratio"))
    ch, cw = min(h, th), min(w, tw)
    if min(ch, cw) >= min_side_for(model.net):
        def crop(a):
            y0, x0 = (a.shape[0] - ch) // 2, (a.shape[1] - cw) // 2
            return np.ascontiguousarray(a[y0:y0 + ch, x0:x0 + cw])
        out.append(ResizeOption(f"central crop to {size_text(cw, ch)}", "crop", (ch, cw),
                                lpips_values(model, crop(reference), [crop(test)], **opts)[0],
                                "no resampling; valid only if the images differ by a border"))
    return out


def alignment(model: LPIPS, reference: np.ndarray, test: np.ndarray, *, convention: str = "[-1,1]",
              upsample: int = SHIFT_UPSAMPLE) -> Alignment:
    """Estimate the test image's translation and score the central crop before and after undoing it.

    The test is moved by the estimated ``(dy, dx)`` with :func:`lpips_explorer.distortions.shift`
    (bilinear for fractions, ``"edge"`` boundary); both images then lose ``ceil(max |d|)`` pixels
    on every side, so the extended border never enters either score.

    Args:
        reference, test: ``(H, W, 3)`` float in ``[0, 1]``, the same shape.

    Raises:
        ValueError: the two shapes differ.
    """
    dy, dx = estimate_shift(reference, test, upsample=upsample)
    crop = int(math.ceil(max(abs(dy), abs(dx)) - _CROP_EPS))
    h, w = reference.shape[:2]
    if min(h, w) - 2 * crop < min_side_for(model.net):
        return Alignment(dy, dx, crop, float("nan"), float("nan"))
    aligned = shift(np.asarray(test, dtype=np.float32), dx, dy, boundary="edge")

    def c(a):
        return np.ascontiguousarray(a[crop:h - crop, crop:w - crop])

    before, after = lpips_values(model, c(reference), [c(test), c(aligned)], convention=convention)
    return Alignment(dy, dx, crop, before, after)
