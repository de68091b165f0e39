"""Synthetic reference images with known structure.

Every function returns a NumPy array of shape ``(H, W, 3)``, float32 by default, with values
in ``[0, 1]``. Grey images carry the same value in all three channels. Row index ``i`` runs
downwards, column index ``j`` to the right.

* :func:`stripes`, :func:`checkerboard`, :func:`flat` and :func:`gradient` are exact
  patterns for hand calculation; ``stripes()`` is the textbook 8 x 8 case whose every row is
  ``0 0 1 1 0 0 1 1``.
* :func:`grating` is an oriented sinusoid.
* :func:`texture_patch` draws the random "natural-like patch" (smooth colour texture, an
  oriented grating and a disk edge) used by the reference example this project reproduces.
"""

from __future__ import annotations

import numbers
from typing import Literal, Sequence

import numpy as np

from lpips_explorer.distortions import as_generator

__all__ = ["stripes", "checkerboard", "grating", "flat", "gradient", "texture_patch"]


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def _check_real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return float(value)


def _grey(plane: np.ndarray) -> np.ndarray:
    """``(H, W)`` float64 -> ``(H, W, 3)`` float32 with the plane in every channel."""
    return np.repeat(plane[:, :, None], 3, axis=2).astype(np.float32)


def stripes(
    size: int = 8,
    period: int = 4,
    *,
    orientation: Literal["vertical", "horizontal"] = "vertical",
) -> np.ndarray:
    """Binary stripes, the textbook case for shift and blur arithmetic.

    With ``orientation="vertical"`` the value depends on the column ``j`` only: it is 0 for
    the first ``ceil(period / 2)`` pixels of every period and 1 for the rest, starting at
    ``j = 0``. The defaults give an 8 x 8 image whose every row is ``0 0 1 1 0 0 1 1``.
    ``"horizontal"`` is the transpose (the value depends on the row).

    Args:
        size: side ``S`` of the square image, ``>= 1``.
        period: stripe period in pixels, ``>= 2``.
        orientation: ``"vertical"`` (stripes run top to bottom) or ``"horizontal"``.

    Returns:
        ``(S, S, 3)`` float32 with values in ``{0, 1}``.

    Raises:
        ValueError: ``size < 1``, ``period < 2`` or an unknown orientation.
        TypeError: ``size`` or ``period`` not an int.

    Example:
        >>> stripes()[0, :, 0].tolist()
        [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    """
    size = _check_int(size, "size", 1)
    period = _check_int(period, "period", 2)
    if orientation not in ("vertical", "horizontal"):
        raise ValueError(
            f"orientation must be 'vertical' or 'horizontal'; got {orientation!r}"
        )
    row = ((np.arange(size) % period) >= period / 2).astype(np.float64)
    plane = np.broadcast_to(row, (size, size))
    if orientation == "horizontal":
        plane = plane.T
    return _grey(plane)


def checkerboard(size: int = 8, square: int = 2) -> np.ndarray:
    """Binary checkerboard whose top-left square is dark.

    Pixel ``(i, j)`` is 1 when ``i // square + j // square`` is odd, else 0.

    Args:
        size: side ``S`` of the square image, ``>= 1``.
        square: side of one square in pixels, ``>= 1``.

    Returns:
        ``(S, S, 3)`` float32 with values in ``{0, 1}``.

    Raises:
        ValueError: ``size < 1`` or ``square < 1``.
        TypeError: ``size`` or ``square`` not an int.
    """
    size = _check_int(size, "size", 1)
    square = _check_int(square, "square", 1)
    idx = np.arange(size) // square
    plane = ((idx[:, None] + idx[None, :]) % 2).astype(np.float64)
    return _grey(plane)


def grating(
    freq: float,
    angle: float,
    *,
    size: int = 64,
    phase: float = 0.0,
    contrast: float = 1.0,
    mean: float = 0.5,
) -> np.ndarray:
    """Oriented sinusoidal grating.

    ``value(i, j) = mean + contrast / 2 * sin(2 pi freq (cos(a) x + sin(a) y) + phase)`` with
    ``x = j / S``, ``y = i / S`` and ``a = angle`` in degrees, clipped to ``[0, 1]``. So
    ``freq`` counts cycles per image side, and ``angle = 0`` varies along x (vertical bars);
    ``angle = 90`` varies along y.

    Args:
        freq: spatial frequency in cycles per image side, ``>= 0``.
        angle: direction of variation in degrees, measured from the x axis towards the
            y axis; since y points down, positive angles turn clockwise as displayed.
        size: side ``S`` of the square image, ``>= 1``.
        phase: phase offset in radians.
        contrast: peak-to-peak amplitude, in ``[0, 1]``.
        mean: mean grey level, in ``[0, 1]``.

    Returns:
        ``(S, S, 3)`` float32 in ``[0, 1]``.

    Raises:
        ValueError: negative or non-finite ``freq``, ``contrast`` or ``mean`` outside
            ``[0, 1]``, non-finite ``angle``/``phase``, ``size < 1``.
    """
    freq = _check_real(freq, "freq")
    if freq < 0:
        raise ValueError(f"freq must be >= 0; got {freq}")
    angle = _check_real(angle, "angle")
    phase = _check_real(phase, "phase")
    contrast = _check_real(contrast, "contrast")
    mean = _check_real(mean, "mean")
    if not 0.0 <= contrast <= 1.0:
        raise ValueError(f"contrast must be in [0, 1]; got {contrast}")
    if not 0.0 <= mean <= 1.0:
        raise ValueError(f"mean must be in [0, 1]; got {mean}")
    size = _check_int(size, "size", 1)
    yy, xx = np.mgrid[0:size, 0:size] / size
    a = np.deg2rad(angle)
    arg = 2 * np.pi * freq * (np.cos(a) * xx + np.sin(a) * yy) + phase
    plane = np.clip(mean + 0.5 * contrast * np.sin(arg), 0.0, 1.0)
    return _grey(plane)


def flat(value: float | Sequence[float], *, size: int = 64) -> np.ndarray:
    """Constant image.

    Args:
        value: a grey level in ``[0, 1]``, or an ``(r, g, b)`` triple of levels in ``[0, 1]``.
        size: side ``S`` of the square image, ``>= 1``.

    Returns:
        ``(S, S, 3)`` float32.

    Raises:
        ValueError: a level outside ``[0, 1]`` or non-finite, a sequence not of length 3,
            ``size < 1``.
    """
    size = _check_int(size, "size", 1)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        levels = [_check_real(value, "value")] * 3
    else:
        levels = list(value)
        if len(levels) != 3:
            raise ValueError(f"value must be one level or 3 levels (r, g, b); got {value!r}")
        levels = [_check_real(v, "value") for v in levels]
    for v in levels:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"value must lie in [0, 1]; got {value!r}")
    return np.broadcast_to(np.asarray(levels, np.float32), (size, size, 3)).copy()


def gradient(
    *, size: int = 64, direction: Literal["horizontal", "vertical"] = "horizontal"
) -> np.ndarray:
    """Linear grey ramp from 0 to 1 inclusive.

    ``"horizontal"``: ``value(i, j) = j / (S - 1)`` (dark on the left, bright on the right).
    ``"vertical"``: ``value(i, j) = i / (S - 1)`` (dark at the top).

    Args:
        size: side ``S`` of the square image, ``>= 2``.
        direction: ``"horizontal"`` or ``"vertical"``.

    Returns:
        ``(S, S, 3)`` float32 in ``[0, 1]``.

    Raises:
        ValueError: ``size < 2`` or an unknown direction.
    """
    size = _check_int(size, "size", 2)
    if direction not in ("horizontal", "vertical"):
        raise ValueError(f"direction must be 'horizontal' or 'vertical'; got {direction!r}")
    ramp = np.linspace(0.0, 1.0, size)
    plane = np.broadcast_to(ramp, (size, size))
    if direction == "vertical":
        plane = plane.T
    return _grey(plane)


def _smooth_same(tex: np.ndarray, kernel: np.ndarray, axis: int) -> np.ndarray:
    """Zero-padded 'same' convolution of every line of ``tex`` along ``axis``."""
    r = kernel.size // 2
    n = tex.shape[axis]
    pad = [(0, 0)] * tex.ndim
    pad[axis] = (r, r)
    padded = np.pad(tex, pad)
    out = np.zeros_like(tex)
    flipped = kernel[::-1]
    for t in range(kernel.size):
        out += flipped[t] * np.take(padded, np.arange(t, t + n), axis=axis)
    return out


def texture_patch(seed, size: int = 64, *, dtype=np.float32) -> np.ndarray:
    """Random "natural-like" colour patch: smooth texture + oriented grating + a disk edge.

    The draws and the float64 arithmetic follow the reference example's patch generator, so
    the same ``numpy`` stream gives the same patch (to rounding, ~1e-15):

    1. ``tex``: a ``(3, S, S)`` standard-normal array, smoothed along axis 1 (vertical)
       then axis 2 (horizontal) by a zero-padded "same" convolution with the normalised 9-tap Gaussian
       ``exp(-t^2 / (2 * 0.8^2))``, ``t = linspace(-2, 2, 9)``;
    2. ``theta ~ U(0, pi)``, ``f ~ U(3, 10)``; grating
       ``0.25 sin(2 pi f (cos(theta) x + sin(theta) y))`` with ``y, x = mgrid / S``;
    3. disk: centre ``x0 ~ U(.2, .8)``, then ``y0 ~ U(.2, .8)``, squared radius
       ``~ U(.02, .08)``;
    4. ``0.5 + 0.6 tex + grating * U(.3, 1, (3, 1, 1)) + 0.3 disk * U(-1, 1, (3, 1, 1))``,
       clipped to ``[0, 1]`` and transposed from ``(3, S, S)`` to ``(S, S, 3)``.

    Args:
        seed: an int ``>= 0`` (a fresh ``numpy.random.default_rng(seed)``) or a
            ``numpy.random.Generator``, which is advanced, so several patches can be drawn
            from one stream.
        size: side ``S`` of the square patch, ``>= 1``. (For ``S < 9`` the "same"
            convolution is the zero-padded one, cropped to ``S``.)
        dtype: ``np.float32`` (default) or ``np.float64`` for the unrounded result.

    Returns:
        ``(S, S, 3)`` array of ``dtype`` in ``[0, 1]``.

    Raises:
        TypeError: ``seed`` neither an int nor a Generator.
        ValueError: negative ``seed``, ``size < 1``, ``dtype`` not float32/float64.
    """
    rng = as_generator(seed)
    size = _check_int(size, "size", 1)
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64; got {dtype}")

    yy, xx = np.mgrid[0:size, 0:size] / size
    kernel = np.exp(-np.linspace(-2, 2, 9) ** 2 / (2 * 0.8**2))
    kernel /= kernel.sum()
    tex = rng.standard_normal((3, size, size))
    tex = _smooth_same(_smooth_same(tex, kernel, axis=1), kernel, axis=2)

    theta = rng.uniform(0, np.pi)
    f = rng.uniform(3, 10)
    grat = 0.25 * np.sin(2 * np.pi * f * (np.cos(theta) * xx + np.sin(theta) * yy))
    x0 = rng.uniform(0.2, 0.8)
    y0 = rng.uniform(0.2, 0.8)
    r2 = rng.uniform(0.02, 0.08)
    disk = ((xx - x0) ** 2 + (yy - y0) ** 2) < r2
    grating_gain = rng.uniform(0.3, 1, (3, 1, 1))
    disk_gain = rng.uniform(-1, 1, (3, 1, 1))
    img = 0.5 + 0.6 * tex + grat * grating_gain + 0.3 * disk * disk_gain
    return np.clip(img, 0, 1).transpose(1, 2, 0).astype(dtype)
