"""From an image in ``[0, 1]`` to the tensor a network is fed: range convention, grayscale, size.

At the library's image layer an image is a NumPy array ``(H, W, 3)`` (or ``(H, W)`` grey), float
in ``[0, 1]``. This module is the edge where it becomes a ``(N, 3, H, W)`` float32 tensor.

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

from typing import Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "CONVENTIONS",
    "CONVENTION_NOTES",
    "Convention",
    "RESIZE_METHODS",
    "apply_convention",
    "parse_size",
    "resize",
    "to_gray",
    "to_input",
    "to_tensor",
]

Convention = Literal["[-1,1]", "[0,1]", "[0,255]"]
CONVENTIONS: tuple[str, ...] = ("[-1,1]", "[0,1]", "[0,255]")
CONVENTION_NOTES: dict[str, str] = {
    "[-1,1]": "Correct: an image in [0, 1] is fed as 2x − 1, the range the package expects.",
    "[0,1]": "The forgotten normalize=True: a [0, 1] image fed as if it were in [−1, 1].",
    "[0,255]": "Raw 8-bit values fed without any scaling, as the FashionMNIST notebook did.",
}
RESIZE_METHODS: tuple[str, ...] = ("bilinear", "bicubic", "nearest", "area")
_LUMA = (0.299, 0.587, 0.114)


def _check_image(img: np.ndarray) -> np.ndarray:
    if not isinstance(img, np.ndarray):
        raise TypeError(f"expected a NumPy array (H, W, 3) in [0, 1], got {type(img).__name__}")
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"expected an image of shape (H, W, 3) or (H, W), got {img.shape}")
    if not np.issubdtype(img.dtype, np.floating):
        raise TypeError(f"expected a float image in [0, 1], got dtype {img.dtype}; divide 8-bit data by 255")
    return img


def to_tensor(img: np.ndarray, *, device: torch.device | str | None = None) -> torch.Tensor:
    """``(H, W, 3)`` or ``(H, W)`` float array in ``[0, 1]`` → ``(1, 3, H, W)`` float32 tensor."""
    img = _check_image(img)
    t = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)).permute(2, 0, 1)[None]
    return t.to(device) if device is not None else t


def to_gray(x: torch.Tensor) -> torch.Tensor:
    """``(N, 3, H, W)`` → BT.601 luma replicated to 3 channels, same shape."""
    w = torch.tensor(_LUMA, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
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


def resize(x: torch.Tensor, size: int | Sequence[int] | None, *, method: str = "bilinear") -> torch.Tensor:
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


def apply_convention(x01: torch.Tensor, convention: str) -> torch.Tensor:
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
    convention: str = "[-1,1]",
    size: int | Sequence[int] | None = None,
    grayscale: bool = False,
    method: str = "bilinear",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Image in ``[0, 1]`` → network input ``(N, 3, H', W')`` float32.

    Args:
        img: ``(H, W, 3)``/``(H, W)`` NumPy float array in ``[0, 1]``, or a ``(N, 3, H, W)``
            tensor in ``[0, 1]``.
        convention: ``"[-1,1]"`` (correct), ``"[0,1]"`` or ``"[0,255]"``.
        size: ``None`` (native), ``n`` (``n × n``) or ``(H, W)``.
        grayscale: replace the image by its luma replicated to RGB.
        method: resize interpolation, one of :data:`RESIZE_METHODS`.
        device: where the tensor goes (the resize runs there too).

    Raises:
        ValueError: bad shape, convention, size or method. TypeError: not a float image.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if isinstance(img, torch.Tensor):
        if img.ndim != 4 or img.shape[1] != 3:
            raise ValueError(f"expected a tensor (N, 3, H, W), got {tuple(img.shape)}")
        x = img.to(device=device, dtype=torch.float32) if device is not None else img.float()
    else:
        x = to_tensor(img, device=device)
    x = resize(x, size, method=method)
    if grayscale:
        x = to_gray(x)
    return apply_convention(x, convention)
