"""Tests for lpips_core.metrics: scikit-image as the oracle, textbook values, error paths."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from lpips_core import metrics as M
from lpips_explorer.distortions import gaussian_blur, gaussian_noise, shift
from lpips_explorer.synth import stripes, texture_patch


@pytest.fixture(scope="module")
def pair() -> tuple[np.ndarray, np.ndarray]:
    x = texture_patch(0, dtype=np.float64)
    return x, gaussian_noise(x, 0.05, seed=1)


def test_mse_textbook_and_properties(pair):
    s = stripes()
    assert M.mse(s, shift(s, 1)) == 0.5
    assert M.mse(s, s) == 0.0
    x, y = pair
    assert M.mse(x, y) == M.mse(y, x)
    assert M.mse(x, y) == pytest.approx(float(np.mean((x - y) ** 2)), abs=1e-15)


def test_psnr_equals_skimage(pair):
    x, y = pair
    expected = peak_signal_noise_ratio(x, y, data_range=1.0)
    assert abs(M.psnr(x, y) - expected) < 1e-9
    z = gaussian_blur(x, 1.5)
    assert abs(M.psnr(x, z) - peak_signal_noise_ratio(x, z, data_range=1.0)) < 1e-9


def test_psnr_textbook():
    s = stripes()
    assert M.psnr(s, shift(s, 1)) == pytest.approx(10 * np.log10(2), abs=1e-12)


def test_psnr_identical_is_inf(pair):
    assert M.psnr(pair[0], pair[0]) == float("inf")


def test_ssim_equals_skimage_gaussian_window(pair):
    """Oracle: skimage with the Wang et al. settings, called directly on float64."""
    x, y = pair
    for b in (y, gaussian_blur(x, 2.0), shift(x, 1)):
        expected = structural_similarity(
            x, b, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=1.5,
            use_sample_covariance=False,
        )
        assert abs(M.ssim(x, b) - expected) < 1e-9


def test_ssim_identical_is_one_and_symmetric(pair):
    x, y = pair
    assert M.ssim(x, x) == pytest.approx(1.0, abs=1e-12)
    assert M.ssim(x, y) == pytest.approx(M.ssim(y, x), abs=1e-12)
    assert -1 <= M.ssim(x, y) < 1


def test_float32_inputs_computed_in_float64(pair):
    x, y = (a.astype(np.float32) for a in pair)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert M.mse(x, y) == M.mse(x64, y64)
    assert M.psnr(x, y) == M.psnr(x64, y64)
    assert M.ssim(x, y) == M.ssim(x64, y64)


def test_results_are_python_floats_with_the_oracles_values(pair):
    """A Python float, and the right one (a NaN would pass a type check alone): NumPy's mean of
    squares, scikit-image's PSNR and SSIM, on the same pair."""
    x, y = pair
    want = {
        M.mse: float(np.mean((x - y) ** 2)),
        M.psnr: peak_signal_noise_ratio(x, y, data_range=1.0),
        M.ssim: structural_similarity(x, y, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                      use_sample_covariance=False),
    }
    for fn, value in want.items():
        got = fn(x, y)
        assert type(got) is float and np.isfinite(got)
        assert got == pytest.approx(value, rel=1e-12, abs=1e-15), fn.__name__
    # the pair is a mild noise (σ = 0.05, clipped): values in a range that would catch a wrong scale
    assert 1e-3 < want[M.mse] < 3e-3 and 25 < want[M.psnr] < 30 and 0.5 < want[M.ssim] < 1


def test_ssim_at_window_size():
    """An 11×11 image, the smallest SSIM takes: one window position, scikit-image's value."""
    rng = np.random.default_rng(0)
    a, b = rng.random((11, 11, 3)), rng.random((11, 11, 3))
    want = structural_similarity(a, b, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                 use_sample_covariance=False)
    got = M.ssim(a, b)
    assert type(got) is float and got == pytest.approx(want, abs=1e-12)
    assert -1 < got < 0.2  # two independent uniform images are barely similar


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("fn", [M.mse, M.psnr, M.ssim])
def test_mismatched_shapes_name_both(fn):
    a, b = np.zeros((16, 16, 3)), np.zeros((16, 12, 3))
    with pytest.raises(ValueError, match=r"same shape; got \(16, 16, 3\) and \(16, 12, 3\)"):
        fn(a, b)


def test_ssim_rejects_image_smaller_than_window():
    s = stripes()
    with pytest.raises(ValueError, match=r"at least 11 x 11 pixels.*got shape \(8, 8, 3\)"):
        M.ssim(s, s)


def test_uint8_is_a_type_error():
    a = np.zeros((16, 16, 3), np.uint8)
    with pytest.raises(TypeError, match="a must be float32 or float64.*got dtype uint8"):
        M.psnr(a, a)


def test_second_image_named_in_errors():
    with pytest.raises(ValueError, match=r"b must have shape \(H, W, 3\); got shape \(16, 16\)"):
        M.mse(np.zeros((16, 16, 3)), np.zeros((16, 16)))


def test_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match="a values must lie in \\[0, 1\\]; got min=0, max=2"):
        M.mse(np.full((4, 4, 3), 2.0) * np.array([0, 1, 1]), np.zeros((4, 4, 3)))
