"""Classic full-reference metrics: MSE, PSNR and SSIM.

Images are NumPy arrays of shape ``(H, W, 3)``, float32 or float64, with values in ``[0, 1]``
(the data range is 1 by convention, never guessed from the values). Both images are
converted to float64 before any arithmetic, so float32 and float64 inputs give the same
numbers to float32 rounding of the inputs. Every metric returns a Python ``float``.
"""

from __future__ import annotations

import numpy as np
from skimage.metrics import structural_similarity

from lpips_core.images import check_image

__all__ = ["mse", "psnr", "ssim", "SSIM_WINDOW"]

#: Side of the SSIM window: an 11 x 11 Gaussian with sigma 1.5 (scikit-image's
#: ``gaussian_weights=True`` truncates at 3.5 sigma, radius ``int(3.5 * 1.5 + 0.5) = 5``).
SSIM_WINDOW = 11


def _pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = check_image(a, name="a").astype(np.float64, copy=False)
    y = check_image(b, name="b").astype(np.float64, copy=False)
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same shape; got {x.shape} and {y.shape}")
    return x, y


def mse(a: np.ndarray, b: np.ndarray) -> float:
    """Mean squared error over all pixels and channels.

    Args:
        a, b: ``(H, W, 3)`` float32/float64 in ``[0, 1]``, the same shape.

    Returns:
        ``mean((a - b) ** 2)`` in ``[0, 1]``; 0 for identical images.

    Raises:
        TypeError: a dtype other than float32/float64.
        ValueError: a wrong shape, values outside ``[0, 1]``, or mismatched shapes.

    Example:
        >>> from lpips_explorer.synth import stripes
        >>> from lpips_explorer.distortions import shift
        >>> mse(stripes(), shift(stripes(), 1))
        0.5
    """
    x, y = _pair(a, b)
    return float(np.mean((x - y) ** 2))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB with data range 1: ``10 log10(1 / mse(a, b))``.

    Equals ``skimage.metrics.peak_signal_noise_ratio(a, b, data_range=1.0)`` on float64
    input.

    Args:
        a, b: ``(H, W, 3)`` float32/float64 in ``[0, 1]``, the same shape.

    Returns:
        PSNR in dB, ``>= 0``; ``float("inf")`` for identical images.

    Raises:
        TypeError: a dtype other than float32/float64.
        ValueError: a wrong shape, values outside ``[0, 1]``, or mismatched shapes.
    """
    err = mse(a, b)
    if err == 0:
        return float("inf")
    return float(10 * np.log10(1.0 / err))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Structural similarity (Wang, Bovik, Sheikh & Simoncelli, IEEE TIP 2004), mean over
    pixels and the three channels.

    Computed by ``skimage.metrics.structural_similarity(a, b, channel_axis=-1,
    data_range=1.0, gaussian_weights=True, sigma=1.5, use_sample_covariance=False)`` on
    float64 copies: the 11 x 11 Gaussian window with sigma 1.5, ``K1 = 0.01``,
    ``K2 = 0.03`` and population statistics of the original paper, rather than
    scikit-image's default 7 x 7 uniform window, so the numbers are comparable with those
    reported in the literature. Border pixels within 5 of the edge are excluded from the
    mean, as scikit-image does.

    Args:
        a, b: ``(H, W, 3)`` float32/float64 in ``[0, 1]``, the same shape, at least
            :data:`SSIM_WINDOW` (11) pixels on each side.

    Returns:
        SSIM in ``[-1, 1]``; 1 for identical images.

    Raises:
        TypeError: a dtype other than float32/float64.
        ValueError: a wrong shape, values outside ``[0, 1]``, mismatched shapes, or an image
            smaller than the 11 x 11 window (the window is not shrunk silently, since a
            different window gives numbers that cannot be compared).
    """
    x, y = _pair(a, b)
    h, w = x.shape[:2]
    if min(h, w) < SSIM_WINDOW:
        raise ValueError(
            f"ssim needs images of at least {SSIM_WINDOW} x {SSIM_WINDOW} pixels (its Gaussian "
            f"window); got shape {x.shape}"
        )
    value = structural_similarity(
        x, y, channel_axis=-1, data_range=1.0,
        gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
    )
    return float(value)
