"""Image distortions with explicit parameters, as pure functions.

Images are NumPy arrays of shape ``(H, W, 3)``, float32 or float64, with values in ``[0, 1]``
(row index ``i`` downwards, column index ``j`` to the right, channels last). Every function

* checks its input against the library's one image contract
  (:func:`lpips_core.images.check_image`, re-exported here): a float array in ``[0, 1]``,
  finite; other dtypes (e.g. uint8) raise ``TypeError``, other shapes, non-finite values or
  values outside ``[0, 1]`` ``ValueError``;
* returns the dtype it got, computing in float64 inside;
* keeps the shape and the ``[0, 1]`` range (results are clipped where an operation could
  leave it), so every output meets the contract again, and never modifies its input;
* raises ``ValueError`` naming the bad value for an invalid parameter.

Every numeric parameter is bounded (the limits below, stated once, in one block). The bounds
keep every output finite whatever the chain, and keep the cost of one call on a 512 × 512
image (the app's largest working side) well under a second (a few seconds at 2048 × 2048):

* :data:`MAX_RADIUS` = 64 (blur half-width) and :data:`MAX_SIGMA` = 16 (blur sigma, whose
  default radius is then 64): a kernel of at most 129 taps;
* :data:`MAX_TAPS` = 63 taps for :func:`kernel_blur`, each of magnitude at most
  :data:`MAX_TAP` = 100 (an enormous tap such as ``1e308`` would overflow to ``inf - inf``);
* :data:`MAX_NOISE_SIGMA` = 1 (the whole ``[0, 1]`` range);
* :data:`MAX_RESAMPLE_FACTOR` = 16 (a 16 × downscale; the anti-aliasing Gaussian grows with it);
* DCT: ``q`` in :data:`DCT_Q_RANGE` = ``[1e-12, 1e6]`` (``c / q`` and the table's steps stay
  finite; above 8 every AC coefficient already rounds to 0) and ``block`` in ``[2, 64]``
  (:data:`MAX_BLOCK`: padding to a multiple of the block stays small);
* :data:`MAX_FACTOR` = 100 for contrast and saturation;
* :data:`MAX_OFFSET` = 1e6 pixels for shifts (far beyond any image the loader returns).

:data:`PARAMS` offers narrower ranges to user interfaces, always inside these limits.

Boundary handling is named after, and behaves exactly as, :func:`numpy.pad`'s modes, shown
for a row ``a b c d`` extended by two pixels on each side:

* ``"wrap"``:      ``c d | a b c d | a b``
* ``"edge"``:      ``a a | a b c d | d d``
* ``"reflect"``:   ``c b | a b c d | c b``
* ``"symmetric"``: ``b a | a b c d | d c``

Random distortions take ``seed``: an int (a fresh ``numpy.random.default_rng(seed)``) or a
``numpy.random.Generator``, which is advanced.

:data:`DISTORTIONS` maps a name to each function and :data:`PARAMS` describes each one's
parameters (default, range, step, help) for user interfaces; :func:`chain` applies a list of
named steps.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import math
import numbers
import reprlib
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
import scipy.fft
from PIL import Image
from scipy import ndimage
from skimage.transform import resize as _sk_resize

from lpips_core.conventions import LUMA
from lpips_core.images import check_image

__all__ = [
    "BOUNDARIES",
    "Boundary",
    "DCT_Q_RANGE",
    "JPEG_LUMINANCE_TABLE",
    "MAX_BLOCK",
    "MAX_FACTOR",
    "MAX_NOISE_SIGMA",
    "MAX_OFFSET",
    "MAX_RADIUS",
    "MAX_RESAMPLE_FACTOR",
    "MAX_SIGMA",
    "MAX_TAP",
    "MAX_TAPS",
    "as_generator",
    "check_image",
    "shift",
    "gaussian_blur",
    "gaussian_kernel",
    "kernel_blur",
    "gaussian_noise",
    "block_dct",
    "jpeg",
    "brightness",
    "contrast",
    "saturation",
    "rotate",
    "resample",
    "chain",
    "ParamSpec",
    "DISTORTIONS",
    "PARAMS",
]

Boundary = Literal["wrap", "edge", "reflect", "symmetric"]
BOUNDARIES: tuple[str, ...] = ("wrap", "edge", "reflect", "symmetric")

# scipy.ndimage spells numpy.pad's modes differently.
_NDIMAGE_MODE = {"wrap": "grid-wrap", "edge": "nearest", "reflect": "mirror", "symmetric": "reflect"}

# ITU-T T.81 (JPEG) Annex K, Table K.1: luminance quantisation table, rows = vertical
# frequency u, columns = horizontal frequency v.
JPEG_LUMINANCE_TABLE = np.array(
    [
        [16, 11, 10, 16, 24, 40, 51, 61],
        [12, 12, 14, 19, 26, 58, 60, 55],
        [14, 13, 16, 24, 40, 57, 69, 56],
        [14, 17, 22, 29, 51, 87, 80, 62],
        [18, 22, 37, 56, 68, 109, 103, 77],
        [24, 35, 55, 64, 81, 104, 113, 92],
        [49, 64, 78, 87, 103, 121, 120, 101],
        [72, 92, 95, 98, 112, 100, 103, 99],
    ],
    dtype=np.float64,
)
JPEG_LUMINANCE_TABLE.setflags(write=False)

# ------------------------------------------------------- parameter limits (see module doc)
MAX_OFFSET: float = 1e6
"""Largest ``|dx|``, ``|dy|`` of :func:`shift`, in pixels."""
MAX_SIGMA: float = 16.0
"""Largest Gaussian blur sigma, in pixels (default radius ``int(4 * 16 + 0.5) = 64``)."""
MAX_RADIUS: int = 64
"""Largest Gaussian blur half-width, in pixels (129 taps)."""
MAX_TAPS: int = 63
"""Most taps of a :func:`kernel_blur` kernel."""
MAX_TAP: float = 100.0
"""Largest ``|tap|`` of a :func:`kernel_blur` kernel."""
MAX_NOISE_SIGMA: float = 1.0
"""Largest standard deviation of :func:`gaussian_noise`."""
MAX_RESAMPLE_FACTOR: float = 16.0
"""Largest :func:`resample` factor."""
DCT_Q_RANGE: tuple[float, float] = (1e-12, 1e6)
"""Smallest and largest :func:`block_dct` quantisation step."""
MAX_BLOCK: int = 64
"""Largest :func:`block_dct` tile side."""
MAX_FACTOR: float = 100.0
"""Largest :func:`contrast` and :func:`saturation` factor."""


# ----------------------------------------------------------------------------- validation
def _as_f64(img: Any) -> tuple[np.ndarray, np.dtype]:
    """The image contract (:func:`check_image`), then ``(img as float64, its dtype)``.

    The float64 array is the input itself when it already is float64: do not write into it.
    """
    check_image(img, name="img")
    return img.astype(np.float64, copy=False), img.dtype
def _real(value: Any, name: str, *, lo: float | None = None, hi: float | None = None,
          lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    try:
        value = float(value)
    except OverflowError:  # an int beyond float's range
        raise ValueError(f"{name} must be finite; got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}; got {value!r}")
    if hi is not None and value > hi:
        raise ValueError(f"{name} must be <= {hi}; got {value!r}")
    return value


def _int(value: Any, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"in [{lo}, {hi}]" if lo is not None and hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be {bounds}; got {value}")
    return value


def _boundary(boundary: Any) -> str:
    if boundary not in BOUNDARIES:
        raise ValueError(
            f"unknown boundary {boundary!r}; valid boundaries are {', '.join(BOUNDARIES)}"
        )
    return boundary


def as_generator(seed: Any) -> np.random.Generator:
    """An int seed → a fresh ``numpy.random.default_rng(seed)``; a Generator is used as it is."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"seed must be an int or a numpy.random.Generator; got {seed!r} "
            f"({type(seed).__name__})"
        )
    if seed < 0:
        raise ValueError(f"seed must be >= 0; got {seed}")
    return np.random.default_rng(int(seed))


def _out(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Clip to [0, 1] and return a fresh array of ``dtype``."""
    return np.clip(x, 0.0, 1.0).astype(dtype)


# ------------------------------------------------------------------------------ geometry
def _boundary_index(idx: np.ndarray, n: int, boundary: str) -> np.ndarray:
    """Map integer indices, possibly outside ``[0, n)``, as ``numpy.pad`` would extend."""
    if boundary == "wrap":
        return idx % n
    if boundary == "edge":
        return np.clip(idx, 0, n - 1)
    if boundary == "symmetric":
        m = idx % (2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    if n == 1:  # "reflect" of a single pixel repeats it, as numpy.pad does
        return np.zeros_like(idx)
    m = idx % (2 * n - 2)
    return np.where(m < n, m, 2 * n - 2 - m)


def _shift_axis(x: np.ndarray, d: float, axis: int, boundary: str) -> np.ndarray:
    """``new[j] = old(j - d)`` along ``axis``, linear between neighbouring samples."""
    if d == 0:
        return x
    n = x.shape[axis]
    k = math.floor(d)
    t = d - k
    src = np.arange(n) - k
    a = np.take(x, _boundary_index(src, n, boundary), axis=axis)
    if t == 0:
        return a
    b = np.take(x, _boundary_index(src - 1, n, boundary), axis=axis)
    return (1 - t) * a + t * b


def shift(img: np.ndarray, dx: float, dy: float = 0, *, boundary: Boundary = "wrap") -> np.ndarray:
    """Translate the content right by ``dx`` and down by ``dy`` pixels.

    ``new[i, j] = old(i - dy, j - dx)``, where ``old`` is extended beyond the image by
    ``boundary``. Integer offsets are exact copies, identical to ``numpy.pad`` followed by a
    crop (e.g. ``"edge"`` with ``dx = 1``: ``new[:, 0] = old[:, 0]``,
    ``new[:, j] = old[:, j - 1]``). Fractional offsets interpolate bilinearly between the
    neighbouring (extended) pixels, one axis at a time. Offsets up to :data:`MAX_OFFSET`
    pixels are allowed, whatever the image size.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        dx: horizontal offset in pixels (positive: to the right), ``|dx| <= 1e6``.
        dy: vertical offset in pixels (positive: downwards), ``|dy| <= 1e6``.
        boundary: one of :data:`BOUNDARIES`.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: non-finite offset, one beyond :data:`MAX_OFFSET`, or unknown boundary.

    Example:
        >>> from lpips_explorer.synth import stripes
        >>> shift(stripes(), 1)[0, :, 0].tolist()
        [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    """
    x, dtype = _as_f64(img)
    dx = _real(dx, "dx", lo=-MAX_OFFSET, hi=MAX_OFFSET)
    dy = _real(dy, "dy", lo=-MAX_OFFSET, hi=MAX_OFFSET)
    boundary = _boundary(boundary)
    x = _shift_axis(x, dy, 0, boundary)
    x = _shift_axis(x, dx, 1, boundary)
    return _out(x, dtype)


def rotate(img: np.ndarray, degrees: float, *, boundary: Boundary = "reflect") -> np.ndarray:
    """Rotate about the image centre, counter-clockwise as displayed, keeping the shape.

    Bilinear interpolation (``scipy.ndimage.rotate`` with ``order=1``, ``reshape=False``);
    the corners that come from outside the image are filled by extending it with
    ``boundary`` (default ``"reflect"``, which avoids the black corners that would
    otherwise dominate any difference metric). ``degrees = 90`` on a square image equals
    ``numpy.rot90``.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        degrees: rotation angle in degrees, positive counter-clockwise.
        boundary: one of :data:`BOUNDARIES`.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: non-finite angle or unknown boundary.
    """
    x, dtype = _as_f64(img)
    degrees = _real(degrees, "degrees")
    boundary = _boundary(boundary)
    if degrees == 0:
        return _out(x, dtype)
    y = ndimage.rotate(x, degrees, axes=(1, 0), reshape=False, order=1,
                       mode=_NDIMAGE_MODE[boundary], prefilter=False)
    return _out(y, dtype)


def resample(img: np.ndarray, factor: float) -> np.ndarray:
    """Downscale by ``factor``, then scale back up to the original size.

    The small image is ``max(1, round(H / factor)) x max(1, round(W / factor))``. Down:
    Gaussian anti-aliasing (``sigma = (factor - 1) / 2`` per axis) then bilinear
    interpolation; up: cubic-spline interpolation; both ``skimage.transform.resize`` with
    ``mode="edge"``; the result is clipped to ``[0, 1]``. ``factor = 1`` is the identity.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        factor: downscaling factor in ``[1, 16]`` (:data:`MAX_RESAMPLE_FACTOR`).

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``factor`` outside ``[1, 16]`` or non-finite.
    """
    x, dtype = _as_f64(img)
    factor = _real(factor, "factor", lo=1.0, hi=MAX_RESAMPLE_FACTOR)
    if factor == 1:
        return _out(x, dtype)
    h, w = x.shape[:2]
    small = (max(1, round(h / factor)), max(1, round(w / factor)), 3)
    down = _sk_resize(x, small, order=1, mode="edge", anti_aliasing=True)
    up = _sk_resize(down, x.shape, order=3, mode="edge", anti_aliasing=False)
    return _out(up, dtype)


# ----------------------------------------------------------------------------- filtering
def _correlate_axis(x: np.ndarray, taps: np.ndarray, axis: int, boundary: str) -> np.ndarray:
    """``out[j] = sum_t taps[t] * ext[j + t - r]`` for odd-length ``taps``, ``r = len // 2``.

    ``ext`` is ``x`` extended as ``numpy.pad(mode=boundary)`` would; computed by
    ``scipy.ndimage.correlate1d`` with the equivalent mode (equal to the pad-then-'valid'
    correlation to float64 rounding, about 1e-15, and several times faster).
    """
    return ndimage.correlate1d(x, taps, axis=axis, mode=_NDIMAGE_MODE[boundary])


def gaussian_kernel(sigma: float, *, radius: int | None = None) -> np.ndarray:
    """Normalised 1-D Gaussian taps ``exp(-r^2 / (2 sigma^2))`` for ``r = -radius..radius``.

    Args:
        sigma: standard deviation in pixels, in ``(0, 16]`` (:data:`MAX_SIGMA`).
        radius: half-width in ``[0, 64]`` (:data:`MAX_RADIUS`); default
            ``max(1, int(4 * sigma + 0.5))`` (scipy's ``truncate=4`` convention).

    Returns:
        ``(2 * radius + 1,)`` float64 summing to 1.

    Raises:
        ValueError: ``sigma`` outside ``(0, 16]`` or non-finite, ``radius`` outside ``[0, 64]``.
    """
    sigma = _real(sigma, "sigma", lo=0.0, lo_open=True, hi=MAX_SIGMA)
    if radius is None:
        radius = max(1, int(4 * sigma + 0.5))
    radius = _int(radius, "radius", lo=0, hi=MAX_RADIUS)
    r = np.arange(-radius, radius + 1)
    k = np.exp(-(r**2) / (2 * sigma**2))
    return k / k.sum()


def gaussian_blur(
    img: np.ndarray,
    sigma: float,
    *,
    radius: int | None = None,
    boundary: Boundary = "reflect",
) -> np.ndarray:
    """Separable Gaussian blur.

    The normalised kernel of :func:`gaussian_kernel` is applied along H, then along W, each
    time by ``numpy.pad(mode=boundary)`` by ``radius`` pixels followed by a 'valid'
    correlation (the kernel is symmetric, so this is also a convolution). With
    ``radius=6``, ``boundary="reflect"`` this is the reference example's ``blur(x, sigma)``.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        sigma: standard deviation in pixels, in ``[0, 16]``; ``0`` is the identity.
        radius: kernel half-width in ``[0, 64]``; default ``max(1, int(4 * sigma + 0.5))``
            (scipy's ``truncate=4`` convention).
        boundary: one of :data:`BOUNDARIES`.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``. With ``boundary="wrap"`` the
        mean of every channel is preserved.

    Raises:
        ValueError: ``sigma`` outside ``[0, 16]`` or non-finite, ``radius`` outside
            ``[0, 64]``, unknown boundary.
    """
    x, dtype = _as_f64(img)
    sigma = _real(sigma, "sigma", lo=0.0, hi=MAX_SIGMA)
    boundary = _boundary(boundary)
    if radius is not None:
        radius = _int(radius, "radius", lo=0, hi=MAX_RADIUS)
    if sigma == 0:
        return _out(x, dtype)
    taps = gaussian_kernel(sigma, radius=radius)
    x = _correlate_axis(x, taps, 0, boundary)
    x = _correlate_axis(x, taps, 1, boundary)
    return _out(x, dtype)


def kernel_blur(
    img: np.ndarray, kernel: Sequence[float] | np.ndarray, *, boundary: Boundary = "wrap"
) -> np.ndarray:
    """Convolve with a separable kernel: the same 1-D taps along H, then along W.

    ``out[j] = sum_t kernel[t] * ext[j - (t - r)]`` with ``r = (len(kernel) - 1) / 2`` (a true
    convolution: the impulse response is ``kernel``, so ``[0, 0, 1]`` moves the content one
    pixel right/down). The taps are used as given, **not renormalised**: taps that do not
    sum to 1 change the mean brightness, and the result is clipped to ``[0, 1]``.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        kernel: 1-D taps of odd length at most 63 (:data:`MAX_TAPS`), each finite with
            ``|tap| <= 100`` (:data:`MAX_TAP`), e.g. ``[0.25, 0.5, 0.25]``.
        boundary: one of :data:`BOUNDARIES`.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: a kernel that is not 1-D, of even length, empty, longer than 63 taps,
            non-finite or with a tap beyond ``±100``; unknown boundary.

    Example:
        >>> from lpips_explorer.synth import stripes
        >>> kernel_blur(stripes(), [0.25, 0.5, 0.25])[0, :4, 0].tolist()
        [0.25, 0.25, 0.75, 0.75]
    """
    x, dtype = _as_f64(img)
    taps = _kernel_taps(kernel)
    boundary = _boundary(boundary)
    taps = taps[::-1]
    x = _correlate_axis(x, taps, 0, boundary)
    x = _correlate_axis(x, taps, 1, boundary)
    return _out(x, dtype)


def _kernel_taps(kernel: Any) -> np.ndarray:
    """Validate :func:`kernel_blur`'s taps (length checked before any conversion)."""
    shown = reprlib.repr(kernel)
    try:
        n = len(kernel) if not isinstance(kernel, (str, bytes)) else -1
    except TypeError:  # not a sequence (a number, a 0-d array)
        n = -1
    if n > MAX_TAPS:
        raise ValueError(f"kernel must have at most {MAX_TAPS} taps; got {n}")
    try:
        taps = np.asarray(kernel, dtype=np.float64) if n >= 0 else None
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"kernel must be a 1-D sequence of numbers; got {shown}") from None
    if taps is None or taps.ndim != 1 or taps.size % 2 == 0:
        raise ValueError(f"kernel must be a 1-D sequence of odd length; got {shown}")
    if not np.isfinite(taps).all():
        raise ValueError(f"kernel taps must be finite; got {shown}")
    if np.abs(taps).max() > MAX_TAP:
        raise ValueError(f"kernel taps must lie in [-{MAX_TAP:g}, {MAX_TAP:g}]; got {shown}")
    return taps


# ---------------------------------------------------------------------------------- noise
def gaussian_noise(img: np.ndarray, sigma: float, *, seed: int | np.random.Generator) -> np.ndarray:
    """Add white Gaussian noise of standard deviation ``sigma``, then clip to ``[0, 1]``.

    Draw order: the noise is ONE standard-normal array of shape ``(3, H, W)``
    (channel-first), transposed to ``(H, W, 3)``::

        np.clip(x + sigma * rng.standard_normal((3, H, W)).transpose(1, 2, 0), 0, 1)

    so the result is the transpose of the channel-first
    ``np.clip(x_chw + sigma * rng.standard_normal(x_chw.shape), 0, 1)`` drawn from the same
    stream. The draw happens even for ``sigma = 0``.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        sigma: noise standard deviation in ``[0, 1]`` (:data:`MAX_NOISE_SIGMA`), in units of
            the image range.
        seed: an int ``>= 0`` or a ``numpy.random.Generator`` (advanced by ``3 H W`` draws).

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``sigma`` outside ``[0, 1]`` or non-finite, negative seed.
        TypeError: ``seed`` neither an int nor a Generator.
    """
    x, dtype = _as_f64(img)
    sigma = _real(sigma, "sigma", lo=0.0, hi=MAX_NOISE_SIGMA)
    rng = as_generator(seed)
    h, w = x.shape[:2]
    noise = rng.standard_normal((3, h, w)).transpose(1, 2, 0)
    return _out(x + sigma * noise, dtype)


# ------------------------------------------------------------------------------ codecs
def block_dct(
    img: np.ndarray,
    q: float,
    *,
    block: int = 8,
    table: Literal["uniform", "jpeg"] = "uniform",
) -> np.ndarray:
    """Quantise the orthonormal 2-D DCT-II of every ``block x block`` tile, per channel.

    Each tile's coefficients ``c`` (``scipy.fft.dctn(norm="ortho")``) become
    ``step * round(c / step)``, the tile is inverted with ``idctn`` and the image is clipped
    to ``[0, 1]``. Tiles start at the top-left pixel. Steps:

    * ``table="uniform"``: ``step = q`` for every coefficient (the reference example's
      ``block_dct(x, q)``, which it applies to 64 x 64 patches);
    * ``table="jpeg"`` (``block = 8`` only): ``step[u, v] = q * T[u, v] / 16`` with ``T`` the
      JPEG luminance table :data:`JPEG_LUMINANCE_TABLE`. ``q`` is then still the DC step,
      as with the uniform table, and higher frequencies are quantised more coarsely in
      JPEG's proportions. ``q = 16 / 255`` reproduces the Annex K table's steps (libjpeg's
      quality 50) for 8-bit data rescaled to ``[0, 1]``; no colour conversion is done.

    Sizes that are not multiples of ``block`` are padded at the bottom and right with edge
    values (``numpy.pad(mode="edge")``) to the next multiple, processed, and cropped back.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        q: quantisation step (see above), in ``[1e-12, 1e6]`` (:data:`DCT_Q_RANGE`). With the
            ortho DCT a tile's DC coefficient is ``block`` times its mean, so ``q`` near 1
            already removes most detail; ``q -> 0`` is the identity.
        block: tile side in pixels, in ``[2, 64]`` (:data:`MAX_BLOCK`).
        table: ``"uniform"`` or ``"jpeg"``.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``q`` outside ``[1e-12, 1e6]`` or non-finite, ``block`` outside ``[2, 64]``,
            unknown table, ``"jpeg"`` with ``block != 8``.
    """
    x, dtype = _as_f64(img)
    q = _real(q, "q", lo=DCT_Q_RANGE[0], hi=DCT_Q_RANGE[1])
    block = _int(block, "block", lo=2, hi=MAX_BLOCK)
    if table not in ("uniform", "jpeg"):
        raise ValueError(f"unknown table {table!r}; valid tables are uniform, jpeg")
    if table == "jpeg" and block != 8:
        raise ValueError(f"table 'jpeg' needs block=8; got block={block}")
    step = q if table == "uniform" else (q / 16) * JPEG_LUMINANCE_TABLE[None, :, None, :, None]

    h, w = x.shape[:2]
    hp, wp = -(-h // block) * block, -(-w // block) * block
    xp = np.pad(x, ((0, hp - h), (0, wp - w), (0, 0)), mode="edge")
    tiles = xp.reshape(hp // block, block, wp // block, block, 3)
    c = scipy.fft.dctn(tiles, axes=(1, 3), norm="ortho")
    c = step * np.round(c / step)
    y = scipy.fft.idctn(c, axes=(1, 3), norm="ortho").reshape(hp, wp, 3)[:h, :w]
    return _out(y, dtype)


_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


def jpeg(
    img: np.ndarray,
    quality: int,
    *,
    subsampling: Literal["4:4:4", "4:2:2", "4:2:0"] = "4:2:0",
) -> np.ndarray:
    """Round-trip through Pillow's (libjpeg) baseline JPEG encoder and decoder.

    The image is rounded to 8 bits (``round(255 x)``), encoded as RGB JPEG with Pillow's
    ``quality`` scaling of the standard tables, decoded and divided by 255. Chroma
    subsampling defaults to ``"4:2:0"``, Pillow's and most cameras' default; choose
    ``"4:4:4"`` to see the quantisation alone.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        quality: 1 (worst) to 100; Pillow advises against values above 95.
        subsampling: ``"4:4:4"``, ``"4:2:2"`` or ``"4:2:0"``.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype with values ``k / 255``.

    Raises:
        ValueError: ``quality`` outside ``[1, 100]`` or unknown subsampling.
    """
    x, dtype = _as_f64(img)
    quality = _int(quality, "quality", lo=1, hi=100)
    if subsampling not in _SUBSAMPLING:
        raise ValueError(
            f"unknown subsampling {subsampling!r}; valid values are {', '.join(_SUBSAMPLING)}"
        )
    u8 = np.round(np.clip(x, 0, 1) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(u8).save(
        buf, format="JPEG", quality=quality, subsampling=_SUBSAMPLING[subsampling]
    )
    buf.seek(0)
    with Image.open(buf) as decoded:
        y = np.asarray(decoded.convert("RGB"), dtype=np.float64) / 255
    return _out(y, dtype)


# ------------------------------------------------------------------------------ colour
def brightness(img: np.ndarray, delta: float) -> np.ndarray:
    """Add ``delta`` to every channel, then clip: ``clip(x + delta, 0, 1)``.

    Additive (not multiplicative) so that ``delta`` is in the image's own units and a
    uniform offset has the same effect on dark and bright regions until clipping.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        delta: offset in ``[-1, 1]``; ``0`` is the identity.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``delta`` outside ``[-1, 1]`` or non-finite.
    """
    x, dtype = _as_f64(img)
    delta = _real(delta, "delta", lo=-1.0, hi=1.0)
    return _out(x + delta, dtype)


def _luma(x: np.ndarray) -> np.ndarray:
    return x @ np.asarray(LUMA)


def contrast(img: np.ndarray, factor: float) -> np.ndarray:
    """Scale deviations from the image's mean luma: ``clip(m + factor (x - m), 0, 1)``.

    ``m`` is the mean over the image of the BT.601 luma ``0.299 R + 0.587 G + 0.114 B`` (the
    convention of PIL's ``ImageEnhance.Contrast`` and torchvision's ``adjust_contrast``).
    ``factor = 0`` gives a flat grey ``m``, ``1`` the identity, ``> 1`` more contrast.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        factor: in ``[0, 100]`` (:data:`MAX_FACTOR`).

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``factor`` outside ``[0, 100]`` or non-finite.
    """
    x, dtype = _as_f64(img)
    factor = _real(factor, "factor", lo=0.0, hi=MAX_FACTOR)
    if factor == 1:
        return _out(x, dtype)
    m = float(_luma(x).mean())
    return _out(m + factor * (x - m), dtype)


def saturation(img: np.ndarray, factor: float) -> np.ndarray:
    """Scale each pixel's deviation from its own grey: ``clip(g + factor (x - g), 0, 1)``.

    ``g`` is the pixel's BT.601 luma ``0.299 R + 0.587 G + 0.114 B`` (torchvision's
    ``adjust_saturation``). ``factor = 0`` gives the greyscale image, ``1`` the identity,
    ``> 1`` more saturated colours.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        factor: in ``[0, 100]`` (:data:`MAX_FACTOR`).

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: ``factor`` outside ``[0, 100]`` or non-finite.
    """
    x, dtype = _as_f64(img)
    factor = _real(factor, "factor", lo=0.0, hi=MAX_FACTOR)
    if factor == 1:
        return _out(x, dtype)
    g = _luma(x)[:, :, None]
    return _out(g + factor * (x - g), dtype)


# ----------------------------------------------------------------------- registry, chain
@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """How a user interface should offer one distortion parameter.

    Attributes:
        default: the value to start from (its type tells the widget kind; ``None`` means
            "use the function's own default").
        min, max: the range to offer (always inside what the function accepts); ``None``
            for non-numeric parameters.
        step: widget step; ``None`` for non-numeric parameters.
        help: one line for a tooltip.
        choices: the closed set of values for a choice parameter, else ``None``.
    """

    default: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    help: str = ""
    choices: tuple | None = None


_BOUNDARY_HELP = "how the image is extended beyond its border (numpy.pad mode)"

DISTORTIONS: dict[str, Callable[..., np.ndarray]] = {
    "shift": shift,
    "gaussian_blur": gaussian_blur,
    "kernel_blur": kernel_blur,
    "gaussian_noise": gaussian_noise,
    "block_dct": block_dct,
    "jpeg": jpeg,
    "brightness": brightness,
    "contrast": contrast,
    "saturation": saturation,
    "rotate": rotate,
    "resample": resample,
}

PARAMS: dict[str, dict[str, ParamSpec]] = {
    "shift": {
        "dx": ParamSpec(1.0, -16.0, 16.0, 0.25, "pixels to the right (fractions interpolate)"),
        "dy": ParamSpec(0.0, -16.0, 16.0, 0.25, "pixels downwards (fractions interpolate)"),
        "boundary": ParamSpec("wrap", help=_BOUNDARY_HELP, choices=BOUNDARIES),
    },
    "gaussian_blur": {
        "sigma": ParamSpec(1.0, 0.0, 10.0, 0.1, "standard deviation in pixels; 0 = identity"),
        "radius": ParamSpec(None, 0, 64, 1, "kernel half-width; empty = int(4 sigma + 0.5)"),
        "boundary": ParamSpec("reflect", help=_BOUNDARY_HELP, choices=BOUNDARIES),
    },
    "kernel_blur": {
        "kernel": ParamSpec((0.25, 0.5, 0.25), help="odd-length 1-D taps, used as given"),
        "boundary": ParamSpec("wrap", help=_BOUNDARY_HELP, choices=BOUNDARIES),
    },
    "gaussian_noise": {
        "sigma": ParamSpec(0.05, 0.0, 0.5, 0.005, "noise standard deviation (image range 1)"),
        "seed": ParamSpec(0, 0, 2**31 - 1, 1, "random seed; the same seed gives the same noise"),
    },
    "block_dct": {
        "q": ParamSpec(0.1, 0.005, 2.0, 0.005, "quantisation step of the DCT coefficients"),
        "block": ParamSpec(8, 2, 32, 1, "tile side in pixels"),
        "table": ParamSpec("uniform", help="uniform steps or JPEG's luminance proportions "
                           "(block 8 only)", choices=("uniform", "jpeg")),
    },
    "jpeg": {
        "quality": ParamSpec(50, 1, 100, 1, "JPEG quality (Pillow)"),
        "subsampling": ParamSpec("4:2:0", help="chroma subsampling",
                                 choices=tuple(_SUBSAMPLING)),
    },
    "brightness": {
        "delta": ParamSpec(0.1, -1.0, 1.0, 0.01, "added to every channel, then clipped"),
    },
    "contrast": {
        "factor": ParamSpec(0.5, 0.0, 3.0, 0.05, "0 = flat grey, 1 = identity"),
    },
    "saturation": {
        "factor": ParamSpec(0.5, 0.0, 3.0, 0.05, "0 = greyscale, 1 = identity"),
    },
    "rotate": {
        "degrees": ParamSpec(5.0, -180.0, 180.0, 0.5, "counter-clockwise, about the centre"),
        "boundary": ParamSpec("reflect", help=_BOUNDARY_HELP, choices=BOUNDARIES),
    },
    "resample": {
        "factor": ParamSpec(2.0, 1.0, 8.0, 0.25, "downscale factor before scaling back up"),
    },
}


def _required_params(fn: Callable) -> set[str]:
    sig = inspect.signature(fn)
    return {
        name for i, (name, p) in enumerate(sig.parameters.items())
        if i > 0 and p.default is inspect.Parameter.empty
    }


def chain(img: np.ndarray, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> np.ndarray:
    """Apply named distortions in order.

    Each step is ``(name, params)`` with ``name`` a key of :data:`DISTORTIONS` and
    ``params`` its keyword arguments (random distortions take their ``seed`` from
    ``params``; it is required). Intermediate results stay float64; the result has
    ``img``'s dtype. An empty list returns a copy.

    Args:
        img: ``(H, W, 3)`` float32/float64 in ``[0, 1]``.
        steps: e.g. ``[("gaussian_blur", {"sigma": 1.0}), ("jpeg", {"quality": 30})]``.

    Returns:
        ``(H, W, 3)`` array of ``img``'s dtype in ``[0, 1]``.

    Raises:
        ValueError: a malformed step, an unknown name (the message lists the valid ones),
            an unknown or missing parameter, or any error of the step's own function.
    """
    x, dtype = _as_f64(img)
    for index, step in enumerate(steps):
        if isinstance(step, (str, bytes)) or not isinstance(step, Sequence) or len(step) != 2:
            raise ValueError(f"step {index} must be a (name, params) pair; got {step!r}")
        name, params = step
        if name not in DISTORTIONS:
            raise ValueError(
                f"unknown distortion {name!r} in step {index}; valid names are "
                f"{', '.join(DISTORTIONS)}"
            )
        if not isinstance(params, Mapping):
            raise ValueError(f"params of step {index} ({name}) must be a dict; got {params!r}")
        fn = DISTORTIONS[name]
        unknown = sorted(set(params) - set(PARAMS[name]))
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {', '.join(unknown)} for {name}; valid parameters are "
                f"{', '.join(PARAMS[name])}"
            )
        missing = sorted(_required_params(fn) - set(params))
        if missing:
            raise ValueError(f"step {index} ({name}) is missing parameter(s) {', '.join(missing)}")
        x = fn(x, **params)
    return _out(x, dtype)
