"""From an image in ``[0, 1]`` to the tensor a network is fed: range convention, grayscale, size.

At the library's image layer an image is a NumPy array ``(H, W, 3)`` (or ``(H, W)`` grey), float
in ``[0, 1]``: the one image contract, :func:`lpips_core.images.check_image`. This module is the
edge where it becomes a ``(N, 3, H, W)`` float32 tensor. The input is checked, never guessed: a
float image in ``[0, 255]`` passed as if it were in ``[0, 1]`` (the very mistake the
``"[0,255]"`` convention demonstrates) raises ``ValueError`` saying to divide by 255; tensors
``(N, 3, H, W)`` get the same range check.

Range conventions (what the caller feeds the LPIPS model, whose contract is ``[-1, 1]``):

- ``"[-1,1]"``: correct. The image is fed as ``2x - 1``.
- ``"[0,1]"``: the forgotten ``normalize=True``: the ``[0, 1]`` image is fed unscaled.
- ``"[0,255]"``: raw 8-bit values are fed (``255x``), as a notebook that skipped all scaling did.

Grayscale: ``grayscale=True`` replaces the colour image by its luma (ITU-R BT.601 weights
0.299, 0.587, 0.114) replicated to three channels; a 2-D input is replicated as it is.

Size: ``size=None`` keeps the native size; an ``int`` ``n`` resizes to ``n × n`` (square, as the
64 × 64 BAPPS patches the lin weights were fitted on); a pair ``(H, W)`` resizes to exactly that.
The default interpolation is **antialiased bilinear** (``torch.nn.functional.interpolate`` with
``mode="bilinear", antialias=True, align_corners=False``, which matches Pillow's BILINEAR
resize); ``"bicubic"`` (antialiased, clipped back to ``[0, 1]``), ``"nearest"`` and ``"area"``
are available to show what the choice does. Resizing happens in ``[0, 1]``, before the range
convention is applied.
"""

from __future__ import annotations

import math

from typing import Literal, Sequence, get_args

import numpy as np
import torch
import torch.nn.functional as F

from .images import check_image, check_range

__all__ = [
    "CONVENTIONS",
    "CONVENTION_NOTES",
    "Convention",
    "LUMA",
    "RESIZE_METHODS",
    "ResizeMethod",
    "apply_convention",
    "parse_size",
    "resize",
    "to_gray",
    "to_input",
    "to_tensor",
]

Convention = Literal["[-1,1]", "[0,1]", "[0,255]"]
CONVENTIONS: tuple[Convention, ...] = get_args(Convention)
CONVENTION_NOTES: dict[str, str] = {
    "[-1,1]": "Correct: an image in [0, 1] is fed as 2x − 1, the range the package expects.",
    "[0,1]": "The forgotten normalize=True: a [0, 1] image fed as if it were in [−1, 1].",
    "[0,255]": "Raw 8-bit values fed without any scaling, as the FashionMNIST notebook did.",
}
ResizeMethod = Literal["bilinear", "bicubic", "nearest", "area"]
RESIZE_METHODS: tuple[ResizeMethod, ...] = get_args(ResizeMethod)

LUMA: tuple[float, float, float] = (0.299, 0.587, 0.114)
"""ITU-R BT.601 luma weights of R, G, B (as Pillow's ``convert("L")`` and torchvision use);
the one definition in the library."""


def to_tensor(img: np.ndarray, *, device: torch.device | str | None = None) -> torch.Tensor:
    """``(H, W, 3)`` or ``(H, W)`` float array in ``[0, 1]`` → ``(1, 3, H, W)`` float32 tensor.

    Raises:
        TypeError, ValueError: ``img`` breaks the image contract
            (:func:`lpips_core.images.check_image`): not a float array, wrong shape, non-finite,
            or outside ``[0, 1]`` (e.g. ``[0, 255]``: divide by 255 first).
    """
    img = check_image(img, name="img", gray=True)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    t = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)).permute(2, 0, 1)[None]
    return t.to(device) if device is not None else t


def _check_tensor(x: torch.Tensor) -> None:
    """The image contract for a tensor: ``(N, 3, H, W)``, floating, finite, in ``[0, 1]``."""
    if x.ndim != 4 or x.shape[1] != 3 or min(x.shape) < 1:
        raise ValueError(f"expected a tensor (N, 3, H, W) in [0, 1], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"expected a float tensor in [0, 1], got dtype {x.dtype}; divide 8-bit data by 255")
    lo, hi = (float(v) for v in torch.aminmax(x.detach()))  # NaN propagates into both, inf shows as one
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("img contains non-finite values (nan or inf)")
    check_range(lo, hi, name="img")


def to_gray(x: torch.Tensor) -> torch.Tensor:
    """``(N, 3, H, W)`` → BT.601 luma (:data:`LUMA`) replicated to 3 channels, same shape."""
    w = torch.tensor(LUMA, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x * w).sum(1, keepdim=True).expand(-1, 3, -1, -1).contiguous()


def parse_size(size: int | Sequence[int] | None, native: tuple[int, int]) -> tuple[int, int]:
    """``None`` → ``native``; ``n`` → ``(n, n)``; ``(h, w)`` → itself. Sides must be ≥ 1."""
    if size is None:
        return native
    if isinstance(size, (int, np.integer)):
        out = (int(size), int(size))
    else:
        out = tuple(int(s) for s in size)
        if len(out) != 2:
            raise ValueError(f"size must be an int or (H, W), got {size!r}")
    if min(out) < 1:
        raise ValueError(f"size must be positive, got {size!r}")
    return out  # type: ignore[return-value]


def resize(
    x: torch.Tensor, size: int | Sequence[int] | None, *, method: ResizeMethod = "bilinear"
) -> torch.Tensor:
    """Resize ``(N, 3, H, W)`` in ``[0, 1]`` to ``size`` (see module docstring) with ``method``."""
    if method not in RESIZE_METHODS:
        raise ValueError(f"method must be one of {RESIZE_METHODS}, got {method!r}")
    target = parse_size(size, (x.shape[-2], x.shape[-1]))
    if target == (x.shape[-2], x.shape[-1]):
        return x
    if method in ("bilinear", "bicubic"):
        out = F.interpolate(x, size=target, mode=method, align_corners=False, antialias=True)
        return out.clamp_(0.0, 1.0) if method == "bicubic" else out
    if method == "nearest":
        return F.interpolate(x, size=target, mode="nearest-exact")
    return F.interpolate(x, size=target, mode="area")


def apply_convention(x01: torch.Tensor, convention: Convention) -> torch.Tensor:
    """Map a tensor in ``[0, 1]`` to what the chosen convention feeds the network."""
    if convention == "[-1,1]":
        return x01 * 2.0 - 1.0
    if convention == "[0,1]":
        return x01
    if convention == "[0,255]":
        return x01 * 255.0
    raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")


def to_input(
    img: np.ndarray | torch.Tensor,
    *,
    convention: Convention = "[-1,1]",
    size: int | Sequence[int] | None = None,
    grayscale: bool = False,
    method: ResizeMethod = "bilinear",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Image in ``[0, 1]`` → network input ``(N, 3, H', W')`` float32.

    Args:
        img: ``(H, W, 3)``/``(H, W)`` NumPy float array in ``[0, 1]``, or a ``(N, 3, H, W)``
            float tensor in ``[0, 1]`` (both checked, within
            :data:`lpips_core.images.RANGE_SLACK`).
        convention: ``"[-1,1]"`` (correct), ``"[0,1]"`` or ``"[0,255]"``.
        size: ``None`` (native), ``n`` (``n × n``) or ``(H, W)``.
        grayscale: replace the image by its luma replicated to RGB.
        method: resize interpolation, one of :data:`RESIZE_METHODS`.
        device: where the tensor goes (the resize runs there too).

    Raises:
        ValueError: bad shape, convention, size or method; non-finite values; values outside
            ``[0, 1]`` (a float image in ``[0, 255]`` is refused with "divide by 255", never
            scaled silently). TypeError: not a float image.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if isinstance(img, torch.Tensor):
        _check_tensor(img)
        x = img.to(device=device, dtype=torch.float32) if device is not None else img.float()
    else:
        x = to_tensor(img, device=device)
    x = resize(x, size, method=method)
    if grayscale:
        x = to_gray(x)
    return apply_convention(x, convention)
