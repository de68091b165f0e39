"""Tests for lpips_explorer.distortions: textbook numbers, reference-example oracles, properties
and one test per error path."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from scipy import ndimage

from lpips_explorer import distortions as D
from lpips_core.metrics import mse
from lpips_explorer.synth import stripes, texture_patch


# ----------------------------------------------------------- oracles (restated definitions)
def reference_blur(x: np.ndarray, s: float) -> np.ndarray:
    """The reference example's ``blur(x, s)`` on a channel-first ``(3, H, W)`` array."""
    r = np.arange(-6, 7)
    k = np.exp(-(r**2) / (2 * s**2))
    k /= k.sum()
    for ax in (1, 2):
        x = np.apply_along_axis(lambda v: np.convolve(np.pad(v, 6, mode="reflect"), k, "valid"), ax, x)
    return x


C8 = np.array(
    [[np.sqrt((1 if u == 0 else 2) / 8) * np.cos((2 * i + 1) * u * np.pi / 16) for i in range(8)]
     for u in range(8)]
)


def reference_block_dct(x: np.ndarray, q: float) -> np.ndarray:
    """The reference example's ``block_dct(x, q)`` on a channel-first ``(3, H, H)`` array."""
    h = x.shape[1]
    c = np.einsum("ui,ajibk,vk->ajbuv", C8, x.reshape(3, h // 8, 8, h // 8, 8), C8)
    c = q * np.round(c / q)
    return np.clip(np.einsum("ui,ajbuv,vk->ajibk", C8, c, C8).reshape(3, h, h), 0, 1)


@pytest.fixture(scope="module")
def patch64() -> np.ndarray:
    return texture_patch(0, dtype=np.float64)


@pytest.fixture(scope="module")
def rand16() -> np.ndarray:
    return np.random.default_rng(42).random((16, 16, 3))


# ------------------------------------------------------------------- textbook numbers
def test_textbook_shift_and_blur_numbers():
    """On the 8 x 8 period-4 stripes: a wrap shift by 1 px has MSE 0.5, the wrap
    1/4 [1 2 1] blur MSE 0.0625; the shift is 8 times "worse" for MSE."""
    s = stripes()
    shifted = D.shift(s, 1)
    blurred = D.kernel_blur(s, [0.25, 0.5, 0.25])
    for c in range(3):
        np.testing.assert_array_equal(shifted[:, :, c], np.tile([1, 0, 0, 1, 1, 0, 0, 1], (8, 1)))
        np.testing.assert_array_equal(
            blurred[:, :, c], np.tile([0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75], (8, 1))
        )
    assert mse(s, shifted) == 0.5
    assert mse(s, blurred) == 0.0625
    assert mse(s, shifted) / mse(s, blurred) == 8


# ------------------------------------------------------------------------------ shift
def test_shift_zero_is_identity(patch64):
    np.testing.assert_array_equal(D.shift(patch64, 0, 0), patch64)


def test_wrap_shift_by_period_is_identity():
    s = stripes()
    np.testing.assert_array_equal(D.shift(s, 4), s)
    np.testing.assert_array_equal(D.shift(s, -8, 8), s)


@pytest.mark.parametrize("boundary", D.BOUNDARIES)
@pytest.mark.parametrize("dx, dy", [(1, 0), (0, 2), (-3, 1), (5, -4), (20, -37)])
def test_integer_shift_is_pad_and_crop(rand16, boundary, dx, dy):
    """new[i, j] = padded[i - dy, j - dx]: numpy.pad followed by a crop, for any offset."""
    h, w = rand16.shape[:2]
    p = 40
    padded = np.pad(rand16, ((p, p), (p, p), (0, 0)), mode=boundary)
    expected = padded[p - dy:p - dy + h, p - dx:p - dx + w]
    np.testing.assert_array_equal(D.shift(rand16, dx, dy, boundary=boundary), expected)


def test_edge_shift_by_one_repeats_first_column(rand16):
    out = D.shift(rand16, 1, boundary="edge")
    np.testing.assert_array_equal(out[:, 0], rand16[:, 0])
    np.testing.assert_array_equal(out[:, 1:], rand16[:, :-1])


def test_subpixel_shift_is_bilinear(rand16):
    half = D.shift(rand16, 0.5, boundary="wrap")
    np.testing.assert_allclose(half, 0.5 * rand16 + 0.5 * np.roll(rand16, 1, axis=1), atol=1e-15)
    both = D.shift(rand16, 0.25, -0.75, boundary="edge")
    a = D.shift(rand16, 0, -1, boundary="edge")
    b = D.shift(rand16, 0, 0, boundary="edge")
    vert = 0.75 * a + 0.25 * b
    expected = 0.75 * vert + 0.25 * D.shift(vert, 1, boundary="edge")
    np.testing.assert_allclose(both, expected, atol=1e-14)


def test_shift_float32_in_float32_out():
    out = D.shift(stripes(), 0.5)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[0, :, 0], np.float32([0.5, 0, 0.5, 1, 0.5, 0, 0.5, 1]))


# ----------------------------------------------------------------------- Gaussian blur
def test_gaussian_blur_equals_reference_blur(patch64):
    """radius 6, reflect, sigma 1: the reference example's blur(x, 1.0), channel-first."""
    ours = D.gaussian_blur(patch64, 1.0, radius=6, boundary="reflect")
    ref = reference_blur(patch64.transpose(2, 0, 1), 1.0).transpose(1, 2, 0)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def test_gaussian_blur_sigma_zero_is_identity(patch64):
    np.testing.assert_array_equal(D.gaussian_blur(patch64, 0), patch64)


def test_gaussian_blur_wrap_preserves_mean(patch64):
    out = D.gaussian_blur(patch64, 2.5, boundary="wrap")
    np.testing.assert_allclose(out.mean(axis=(0, 1)), patch64.mean(axis=(0, 1)), atol=1e-12)


def test_gaussian_default_radius_matches_scipy(patch64):
    """Default radius int(4 sigma + 0.5) is scipy's truncate=4; numpy 'reflect' is ndimage 'mirror'."""
    assert D.gaussian_kernel(1.0).size == 9 and D.gaussian_kernel(0.1).size == 3
    ours = D.gaussian_blur(patch64, 1.3)
    ref = ndimage.gaussian_filter(patch64, sigma=(1.3, 1.3, 0), mode="mirror", truncate=4.0)
    np.testing.assert_allclose(ours, ref, atol=1e-12)


# ------------------------------------------------------------------------- kernel blur
def test_kernel_blur_is_a_convolution(rand16):
    """Impulse response [0, 0, 1] moves content one pixel right and down."""
    np.testing.assert_array_equal(D.kernel_blur(rand16, [0, 0, 1]), D.shift(rand16, 1, 1))


def test_kernel_blur_is_not_renormalised():
    grey = np.full((4, 4, 3), 0.5)
    np.testing.assert_allclose(D.kernel_blur(grey, [0.25, 0.25, 0.25]), 0.5 * 0.75**2)


def test_kernel_blur_edge_boundary():
    s = stripes(8, 4).astype(np.float64)
    out = D.kernel_blur(s, [0.25, 0.5, 0.25], boundary="edge")
    np.testing.assert_allclose(out[0, :, 0], [0, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 1])


# ------------------------------------------------------------------------------- noise
def test_noise_reproducible_and_seed_kinds(patch64):
    a = D.gaussian_noise(patch64, 0.1, seed=5)
    np.testing.assert_array_equal(a, D.gaussian_noise(patch64, 0.1, seed=5))
    np.testing.assert_array_equal(a, D.gaussian_noise(patch64, 0.1, seed=np.random.default_rng(5)))
    assert not np.array_equal(a, D.gaussian_noise(patch64, 0.1, seed=6))


def test_noise_channel_first_draw_order(patch64):
    """Matches the reference example's channel-first np.clip(x + s * rng.standard_normal(x.shape), 0, 1)."""
    rng = np.random.default_rng(0)
    x_chw = patch64.transpose(2, 0, 1)
    ref = np.clip(x_chw + 0.05 * rng.standard_normal(x_chw.shape), 0, 1).transpose(1, 2, 0)
    np.testing.assert_array_equal(D.gaussian_noise(patch64, 0.05, seed=0), ref)


def test_noise_measured_sigma_on_mid_grey():
    grey = np.full((256, 256, 3), 0.5, np.float32)
    out = D.gaussian_noise(grey, 0.08, seed=1)
    assert out.dtype == np.float32
    measured = float(np.std(out.astype(np.float64) - 0.5))
    assert abs(measured - 0.08) < 0.05 * 0.08


# ----------------------------------------------------------------------- block DCT
def test_block_dct_equals_reference(patch64):
    ref_in = patch64.transpose(2, 0, 1)
    for q in (0.05, 0.3, 1.0):
        ours = D.block_dct(patch64, q)
        ref = reference_block_dct(ref_in, q).transpose(1, 2, 0)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def test_block_dct_tiny_q_is_identity(patch64):
    np.testing.assert_allclose(D.block_dct(patch64, 1e-9), patch64, atol=1e-6)
    np.testing.assert_allclose(D.block_dct(patch64, 1e-9, block=5), patch64, atol=1e-6)


@pytest.mark.parametrize("q", [8.0, 1e6])
def test_block_dct_huge_q_constant_per_block(patch64, q):
    """On [0, 1] data every AC coefficient of an ortho 8 x 8 DCT is below 4 in magnitude,
    so q >= 8 rounds them all to 0 and leaves each block constant."""
    out = D.block_dct(patch64, q)
    tiles = out.reshape(8, 8, 8, 8, 3)
    assert np.all(np.ptp(tiles, axis=(1, 3)) < 1e-12)


def test_block_dct_pads_with_edge_and_crops():
    x = np.random.default_rng(3).random((13, 10, 3))
    out = D.block_dct(x, 0.2)
    assert out.shape == (13, 10, 3)
    padded = np.pad(x, ((0, 3), (0, 6), (0, 0)), mode="edge")
    np.testing.assert_allclose(out, D.block_dct(padded, 0.2)[:13, :10], atol=1e-15)


def test_block_dct_jpeg_table_steps():
    """Table "jpeg": step = q * T / 16; a coefficient pattern survives only where its step allows."""
    x = np.random.default_rng(4).random((8, 8, 3))
    q = 0.2
    ours = D.block_dct(x, q, table="jpeg")
    import scipy.fft

    step = q * D.JPEG_LUMINANCE_TABLE / 16
    c = scipy.fft.dctn(x, axes=(0, 1), norm="ortho")
    c = step[:, :, None] * np.round(c / step[:, :, None])
    ref = np.clip(scipy.fft.idctn(c, axes=(0, 1), norm="ortho"), 0, 1)
    np.testing.assert_allclose(ours, ref, atol=1e-14)
    assert D.JPEG_LUMINANCE_TABLE[0, 0] == 16 and D.JPEG_LUMINANCE_TABLE[7, 7] == 99


# ---------------------------------------------------------------------------- JPEG
def test_jpeg_quality_orders_error(patch64):
    hi = D.jpeg(patch64, 95)
    lo = D.jpeg(patch64, 5)
    assert mse(patch64, hi) < mse(patch64, lo)
    np.testing.assert_allclose(hi * 255, np.round(hi * 255), atol=1e-9)  # 8-bit values


def test_jpeg_subsampling_444_is_closer(patch64):
    assert mse(patch64, D.jpeg(patch64, 75, subsampling="4:4:4")) < mse(
        patch64, D.jpeg(patch64, 75, subsampling="4:2:0")
    )


# ---------------------------------------------------------------------------- colour
def test_brightness_adds_and_clips():
    x = np.array([[[0.2, 0.5, 0.95]]])
    np.testing.assert_allclose(D.brightness(x, 0.1), [[[0.3, 0.6, 1.0]]])
    np.testing.assert_allclose(D.brightness(x, -0.3), [[[0.0, 0.2, 0.65]]])


def test_contrast_about_mean_luma(rand16):
    np.testing.assert_array_equal(D.contrast(rand16, 1), rand16)
    m = float((rand16 @ [0.299, 0.587, 0.114]).mean())
    np.testing.assert_allclose(D.contrast(rand16, 0), np.full_like(rand16, m))
    np.testing.assert_allclose(D.contrast(rand16, 0.5), m + 0.5 * (rand16 - m))


def test_saturation_zero_is_grey(rand16):
    np.testing.assert_array_equal(D.saturation(rand16, 1), rand16)
    g = D.saturation(rand16, 0)
    np.testing.assert_allclose(g[:, :, 0], rand16 @ [0.299, 0.587, 0.114])
    np.testing.assert_array_equal(g[:, :, 0], g[:, :, 1])


# ---------------------------------------------------------------------- rotate, resample
def test_rotate_90_is_rot90_and_0_is_identity(patch64):
    np.testing.assert_allclose(D.rotate(patch64, 90), np.rot90(patch64), atol=1e-12)
    np.testing.assert_array_equal(D.rotate(patch64, 0), patch64)


@pytest.mark.parametrize("boundary", D.BOUNDARIES)
def test_ndimage_mode_names_match_numpy_pad(boundary):
    """rotate's boundary goes through scipy.ndimage under another name; check the mapping."""
    v = np.array([0.1, 0.4, 0.2, 0.9, 0.6])
    for s in (-4, -2, 2, 4):
        shifted = ndimage.shift(v, s, order=1, mode=D._NDIMAGE_MODE[boundary], prefilter=False)
        padded = np.pad(v, 5, mode=boundary)
        np.testing.assert_allclose(shifted, padded[5 - s:5 - s + v.size], atol=1e-15)


def test_rotate_keeps_constant_image():
    grey = np.full((20, 30, 3), 0.4)
    np.testing.assert_allclose(D.rotate(grey, 33, boundary="edge"), grey, atol=1e-12)


def test_resample_identity_and_smooth_image():
    from lpips_explorer.synth import gradient

    g = gradient(size=32).astype(np.float64)
    np.testing.assert_array_equal(D.resample(g, 1), g)
    out = D.resample(g, 2)
    assert out.shape == g.shape
    assert mse(g, out) < 1e-4
    grey = np.full((17, 9, 3), 0.3)
    np.testing.assert_allclose(D.resample(grey, 3.5), grey, atol=1e-12)


# ------------------------------------------------------------------------------ chain
def test_chain_equals_sequential_calls(patch64):
    steps = [("gaussian_blur", {"sigma": 1.0}), ("gaussian_noise", {"sigma": 0.02, "seed": 3}),
             ("shift", {"dx": 2})]
    expected = D.shift(D.gaussian_noise(D.gaussian_blur(patch64, 1.0), 0.02, seed=3), 2)
    np.testing.assert_array_equal(D.chain(patch64, steps), expected)


def test_chain_empty_returns_copy():
    s = stripes()
    out = D.chain(s, [])
    np.testing.assert_array_equal(out, s)
    assert out is not s and out.dtype == np.float32


def test_chain_keeps_float32(patch64):
    out = D.chain(patch64.astype(np.float32), [("jpeg", {"quality": 50}), ("contrast", {"factor": 2})])
    assert out.dtype == np.float32


# --------------------------------------------------------------------- registry, specs
def _defaults(name: str) -> dict:
    return {k: spec.default for k, spec in D.PARAMS[name].items() if spec.default is not None}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(D.DISTORTIONS))
def test_every_distortion_keeps_shape_dtype_range(name, dtype):
    img = np.random.default_rng(11).random((20, 24, 3)).astype(dtype)
    before = img.copy()
    out = D.DISTORTIONS[name](img, **_defaults(name))
    assert out.shape == img.shape and out.dtype == img.dtype
    assert out.min() >= 0 and out.max() <= 1
    assert out is not img
    np.testing.assert_array_equal(img, before)  # input untouched


@pytest.mark.parametrize("name", sorted(D.DISTORTIONS))
def test_param_specs_match_signatures_and_ranges_are_accepted(name):
    fn = D.DISTORTIONS[name]
    sig_params = list(inspect.signature(fn).parameters)[1:]
    assert sorted(sig_params) == sorted(D.PARAMS[name])
    img = np.random.default_rng(12).random((16, 16, 3))
    for pname, spec in D.PARAMS[name].items():
        assert isinstance(spec, D.ParamSpec)
        values = list(spec.choices or ()) + [v for v in (spec.min, spec.max) if v is not None]
        for value in values:
            params = {**_defaults(name), pname: value}
            if name == "block_dct" and pname == "block" and value != 8:
                params["table"] = "uniform"
            out = fn(img, **params)
            assert out.shape == img.shape


def test_param_spec_is_frozen():
    spec = D.PARAMS["shift"]["dx"]
    with pytest.raises(AttributeError):
        spec.default = 3  # type: ignore[misc]


# -------------------------------------------------------------------- errors: images
def test_uint8_image_is_a_type_error():
    with pytest.raises(TypeError, match="float32 or float64.*got dtype uint8.*/ 255"):
        D.shift(np.zeros((4, 4, 3), np.uint8), 1)


def test_list_image_is_a_type_error():
    with pytest.raises(TypeError, match="numpy array"):
        D.brightness([[[0.0, 0.0, 0.0]]], 0.1)


def test_grey_2d_image_is_a_value_error():
    with pytest.raises(ValueError, match=r"shape \(H, W, 3\); got shape \(4, 4\)"):
        D.gaussian_blur(np.zeros((4, 4)), 1.0)


def test_channel_first_image_is_a_value_error():
    with pytest.raises(ValueError, match=r"got shape \(3, 8, 8\)"):
        D.gaussian_blur(np.zeros((3, 8, 8)), 1.0)


def test_out_of_range_image_is_a_value_error():
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]; got min=0, max=255"):
        D.shift(np.full((2, 2, 3), 255.0) * np.array([0, 1, 1]), 1)


def test_nan_image_is_a_value_error():
    x = np.zeros((2, 2, 3))
    x[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        D.rotate(x, 10)


# ---------------------------------------------------------------- errors: parameters
@pytest.fixture
def img() -> np.ndarray:
    return np.full((8, 8, 3), 0.5)


def test_unknown_boundary(img):
    with pytest.raises(ValueError, match="unknown boundary 'zero'; valid boundaries are wrap, edge, reflect, symmetric"):
        D.shift(img, 1, boundary="zero")


def test_shift_rejects_nan(img):
    with pytest.raises(ValueError, match="dx must be finite; got nan"):
        D.shift(img, float("nan"))


def test_shift_rejects_infinite_dy(img):
    with pytest.raises(ValueError, match="dy must be finite; got inf"):
        D.shift(img, 0, float("inf"))


def test_shift_rejects_string_offset(img):
    with pytest.raises(TypeError, match="dx must be a real number"):
        D.shift(img, "1")


def test_gaussian_blur_rejects_negative_sigma(img):
    with pytest.raises(ValueError, match="sigma must be >= 0.0; got -1.0"):
        D.gaussian_blur(img, -1)


def test_gaussian_blur_rejects_negative_radius(img):
    with pytest.raises(ValueError, match=r"radius must be in \[0, 64\]; got -2"):
        D.gaussian_blur(img, 1, radius=-2)


def test_gaussian_blur_rejects_unknown_boundary(img):
    with pytest.raises(ValueError, match="unknown boundary 'constant'"):
        D.gaussian_blur(img, 1, boundary="constant")


def test_gaussian_kernel_rejects_zero_sigma():
    with pytest.raises(ValueError, match="sigma must be > 0.0; got 0.0"):
        D.gaussian_kernel(0)


def test_kernel_blur_rejects_even_kernel(img):
    with pytest.raises(ValueError, match="odd length; got \\[0.5, 0.5\\]"):
        D.kernel_blur(img, [0.5, 0.5])


def test_kernel_blur_rejects_2d_kernel(img):
    with pytest.raises(ValueError, match="1-D sequence of odd length"):
        D.kernel_blur(img, np.ones((3, 3)) / 9)


def test_kernel_blur_rejects_nan_taps(img):
    with pytest.raises(ValueError, match="kernel taps must be finite"):
        D.kernel_blur(img, [0.25, float("nan"), 0.25])


def test_noise_rejects_negative_sigma(img):
    with pytest.raises(ValueError, match="sigma must be >= 0.0; got -0.1"):
        D.gaussian_noise(img, -0.1, seed=0)


def test_noise_rejects_negative_seed(img):
    with pytest.raises(ValueError, match="seed must be >= 0; got -3"):
        D.gaussian_noise(img, 0.1, seed=-3)


def test_noise_rejects_none_seed(img):
    with pytest.raises(TypeError, match="seed must be an int or a numpy.random.Generator; got None"):
        D.gaussian_noise(img, 0.1, seed=None)


def test_block_dct_rejects_zero_q(img):
    with pytest.raises(ValueError, match="q must be >= 1e-12; got 0.0"):
        D.block_dct(img, 0)


def test_block_dct_rejects_infinite_q(img):
    with pytest.raises(ValueError, match="q must be finite; got inf"):
        D.block_dct(img, float("inf"))


def test_block_dct_rejects_block_one(img):
    with pytest.raises(ValueError, match=r"block must be in \[2, 64\]; got 1"):
        D.block_dct(img, 0.1, block=1)


def test_block_dct_rejects_unknown_table(img):
    with pytest.raises(ValueError, match="unknown table 'mpeg'; valid tables are uniform, jpeg"):
        D.block_dct(img, 0.1, table="mpeg")


def test_block_dct_jpeg_table_needs_block_8(img):
    with pytest.raises(ValueError, match="table 'jpeg' needs block=8; got block=4"):
        D.block_dct(img, 0.1, block=4, table="jpeg")


def test_jpeg_rejects_quality_zero(img):
    with pytest.raises(ValueError, match=r"quality must be in \[1, 100\]; got 0"):
        D.jpeg(img, 0)


def test_jpeg_rejects_quality_above_100(img):
    with pytest.raises(ValueError, match=r"quality must be in \[1, 100\]; got 101"):
        D.jpeg(img, 101)


def test_jpeg_rejects_float_quality(img):
    with pytest.raises(TypeError, match="quality must be an int; got 50.5"):
        D.jpeg(img, 50.5)


def test_jpeg_rejects_unknown_subsampling(img):
    with pytest.raises(ValueError, match="unknown subsampling '4:1:1'"):
        D.jpeg(img, 50, subsampling="4:1:1")


def test_brightness_rejects_delta_above_one(img):
    with pytest.raises(ValueError, match="delta must be <= 1.0; got 1.5"):
        D.brightness(img, 1.5)


def test_contrast_rejects_negative_factor(img):
    with pytest.raises(ValueError, match="factor must be >= 0.0; got -1.0"):
        D.contrast(img, -1)


def test_saturation_rejects_nan_factor(img):
    with pytest.raises(ValueError, match="factor must be finite; got nan"):
        D.saturation(img, float("nan"))


def test_rotate_rejects_infinite_angle(img):
    with pytest.raises(ValueError, match="degrees must be finite; got inf"):
        D.rotate(img, float("inf"))


def test_rotate_rejects_unknown_boundary(img):
    with pytest.raises(ValueError, match="unknown boundary 'mirror'"):
        D.rotate(img, 10, boundary="mirror")


def test_resample_rejects_factor_below_one(img):
    with pytest.raises(ValueError, match="factor must be >= 1.0; got 0.5"):
        D.resample(img, 0.5)


def test_chain_rejects_unknown_name(img):
    with pytest.raises(ValueError, match="unknown distortion 'sharpen' in step 1; valid names are shift, gaussian_blur"):
        D.chain(img, [("shift", {"dx": 1}), ("sharpen", {})])


def test_chain_rejects_unknown_parameter(img):
    with pytest.raises(ValueError, match="unknown parameter\\(s\\) size for gaussian_blur; valid parameters are sigma, radius, boundary"):
        D.chain(img, [("gaussian_blur", {"sigma": 1, "size": 3})])


def test_chain_requires_seed_for_noise(img):
    with pytest.raises(ValueError, match="step 0 \\(gaussian_noise\\) is missing parameter\\(s\\) seed"):
        D.chain(img, [("gaussian_noise", {"sigma": 0.1})])


def test_chain_rejects_malformed_step(img):
    with pytest.raises(ValueError, match="step 0 must be a \\(name, params\\) pair; got 'shift'"):
        D.chain(img, ["shift"])


def test_chain_rejects_non_dict_params(img):
    with pytest.raises(ValueError, match="params of step 0 \\(shift\\) must be a dict"):
        D.chain(img, [("shift", 1)])


def test_chain_propagates_step_errors(img):
    with pytest.raises(ValueError, match="q must be >= 1e-12; got -1.0"):
        D.chain(img, [("block_dct", {"q": -1})])


# ------------------------------------------------------------- bounds: hostile parameters
from lpips_core.images import check_image  # noqa: E402


def test_check_image_is_the_one_contract():
    from lpips_core import images

    assert D.check_image is images.check_image


@pytest.mark.parametrize("fn, kwargs, match", [
    (D.shift, {"dx": 1e6 + 1}, r"dx must be <= 1000000.0; got 1000001.0"),
    (D.shift, {"dx": 0, "dy": -2e6}, r"dy must be >= -1000000.0; got -2000000.0"),
    (D.shift, {"dx": 10**400}, r"dx must be finite"),
    (D.gaussian_blur, {"sigma": 16.5}, r"sigma must be <= 16.0; got 16.5"),
    (D.gaussian_blur, {"sigma": 1.0, "radius": 65}, r"radius must be in \[0, 64\]; got 65"),
    (D.gaussian_blur, {"sigma": 1e308}, r"sigma must be <= 16.0"),
    (D.kernel_blur, {"kernel": [1e308, -1e308, 1e308]}, r"kernel taps must lie in \[-100, 100\]"),
    (D.kernel_blur, {"kernel": [0.0] * 100_001}, r"kernel must have at most 63 taps; got 100001"),
    (D.kernel_blur, {"kernel": [1.0 / 65] * 65}, r"at most 63 taps; got 65"),
    (D.kernel_blur, {"kernel": ["a", "b", "c"]}, r"1-D sequence of numbers"),
    (D.kernel_blur, {"kernel": 3.0}, r"1-D sequence of odd length; got 3.0"),
    (D.gaussian_noise, {"sigma": 1.5, "seed": 0}, r"sigma must be <= 1.0; got 1.5"),
    (D.resample, {"factor": 17.0}, r"factor must be <= 16.0; got 17.0"),
    (D.block_dct, {"q": 1e-300}, r"q must be >= 1e-12; got 1e-300"),
    (D.block_dct, {"q": 1e308, "table": "jpeg"}, r"q must be <= 1000000.0; got 1e\+308"),
    (D.block_dct, {"q": 0.1, "block": 10**9}, r"block must be in \[2, 64\]; got 1000000000"),
    (D.contrast, {"factor": 1e308}, r"factor must be <= 100.0"),
    (D.saturation, {"factor": 101}, r"factor must be <= 100.0; got 101.0"),
])
def test_hostile_parameters_are_value_errors(img, fn, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(img, **kwargs)


def test_extreme_kernel_taps_in_a_chain_are_refused_at_once():
    """The lab's free-text taps ``1e308, -1e308, 1e308`` once gave NaN (``inf - inf``), and a
    100,001-tap kernel kept a server busy for minutes: both are now immediate ValueErrors."""
    import time

    big = np.random.default_rng(0).random((512, 512, 3))
    for kernel in ([1e308, -1e308, 1e308], [1.0 / 100_001] * 100_001):
        start = time.perf_counter()
        with pytest.raises(ValueError, match="kernel"):
            D.chain(big, [("gaussian_blur", {"sigma": 1.0}), ("kernel_blur", {"kernel": kernel})])
        assert time.perf_counter() - start < 2.0


def _limit_params() -> list[tuple[str, dict]]:
    """Every distortion with each numeric parameter at each end of its hard limits."""
    lo_hi = {
        "shift": {"dx": (-D.MAX_OFFSET, D.MAX_OFFSET - 0.5), "dy": (-D.MAX_OFFSET + 0.25, D.MAX_OFFSET)},
        "gaussian_blur": {"sigma": (0.0, D.MAX_SIGMA), "radius": (0, D.MAX_RADIUS)},
        "kernel_blur": {"kernel": ([D.MAX_TAP, -D.MAX_TAP, D.MAX_TAP], [D.MAX_TAP, -D.MAX_TAP] * 31 + [D.MAX_TAP])},
        "gaussian_noise": {"sigma": (0.0, D.MAX_NOISE_SIGMA)},
        "block_dct": {"q": D.DCT_Q_RANGE, "block": (2, D.MAX_BLOCK)},
        "jpeg": {"quality": (1, 100)},
        "brightness": {"delta": (-1.0, 1.0)},
        "contrast": {"factor": (0.0, D.MAX_FACTOR)},
        "saturation": {"factor": (0.0, D.MAX_FACTOR)},
        "rotate": {"degrees": (-1e300, 1e300)},
        "resample": {"factor": (1.0, D.MAX_RESAMPLE_FACTOR)},
    }
    assert sorted(lo_hi) == sorted(D.DISTORTIONS)
    cases = []
    for name, params in lo_hi.items():
        for pname, ends in params.items():
            for value in ends:
                kw = {**_defaults(name), pname: value}
                if name == "block_dct" and kw.get("block") != 8:
                    kw["table"] = "uniform"
                cases.append((name, kw))
    cases.append(("block_dct", {"q": D.DCT_Q_RANGE[1], "table": "jpeg"}))
    cases.append(("block_dct", {"q": D.DCT_Q_RANGE[0], "table": "jpeg"}))
    return cases


@pytest.mark.parametrize("name, kwargs", _limit_params())
def test_every_output_meets_the_image_contract_at_the_limits(name, kwargs):
    """At both ends of every hard limit, on an image with exact 0s and 1s, the output is finite
    and in [0, 1] (the contract holds), with the input's shape and dtype."""
    img = np.random.default_rng(5).random((20, 24, 3))
    img[:4] = 0.0
    img[-4:] = 1.0
    out = D.DISTORTIONS[name](img, **kwargs)
    assert check_image(out) is out
    assert out.shape == img.shape and out.dtype == img.dtype


def test_a_chain_of_every_distortion_at_its_limits_stays_finite():
    img = np.random.default_rng(6).random((24, 24, 3)).astype(np.float32)
    steps = [(name, kw) for name, kw in _limit_params()]
    out = D.chain(img, steps)
    assert check_image(out) is out and out.dtype == np.float32


@pytest.mark.parametrize("name", sorted(D.PARAMS))
def test_ui_ranges_lie_inside_the_hard_limits(name):
    """PARAMS offers a range that each function accepts at both ends (so no UI can ask for a
    refused value) and that is inside the module's limits."""
    limits = {("shift", "dx"): D.MAX_OFFSET, ("shift", "dy"): D.MAX_OFFSET, ("gaussian_blur", "sigma"): D.MAX_SIGMA,
              ("gaussian_blur", "radius"): D.MAX_RADIUS, ("gaussian_noise", "sigma"): D.MAX_NOISE_SIGMA,
              ("block_dct", "q"): D.DCT_Q_RANGE[1], ("block_dct", "block"): D.MAX_BLOCK,
              ("contrast", "factor"): D.MAX_FACTOR, ("saturation", "factor"): D.MAX_FACTOR,
              ("resample", "factor"): D.MAX_RESAMPLE_FACTOR}
    for pname, spec in D.PARAMS[name].items():
        if (name, pname) in limits:
            assert abs(spec.min) <= limits[name, pname] and abs(spec.max) <= limits[name, pname]


@pytest.mark.parametrize("boundary", D.BOUNDARIES)
@pytest.mark.parametrize("n", [1, 2, 5])
def test_kernel_longer_than_the_image_equals_pad_then_valid(boundary, n):
    """The C correlation equals the definition (numpy.pad by r, then a 'valid' correlation)
    even when the kernel (63 taps) is far wider than the image."""
    rng = np.random.default_rng(n)
    x = rng.random((n, n + 2, 3))
    taps = rng.random(63)
    taps /= taps.sum()
    r = 31
    expected = x
    for axis in (0, 1):
        pad = [(0, 0)] * 3
        pad[axis] = (r, r)
        padded = np.pad(expected, pad, mode=boundary)
        size = expected.shape[axis]
        expected = sum(w * np.take(padded, np.arange(t, t + size), axis=axis) for t, w in enumerate(taps[::-1]))
    np.testing.assert_allclose(D.kernel_blur(x, taps, boundary=boundary), np.clip(expected, 0, 1), atol=1e-13)
