"""Tests for lpips_explorer.synth: exact patterns and the reference example's random patch."""

from __future__ import annotations

import numpy as np
import pytest

from lpips_explorer import synth


def reference_make_patch(rng: np.random.Generator, size: int = 64) -> np.ndarray:
    """Oracle: the reference example's patch generator, restated from its definition
    (channel-first ``(3, size, size)`` float64; same draws in the same order)."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    k = np.exp(-np.linspace(-2, 2, 9) ** 2 / (2 * 0.8**2))
    k /= k.sum()
    tex = rng.standard_normal((3, size, size))
    for ax in (1, 2):
        tex = np.apply_along_axis(lambda v: np.convolve(v, k, "same"), ax, tex)
    th = rng.uniform(0, np.pi)
    f = rng.uniform(3, 10)
    grat = 0.25 * np.sin(2 * np.pi * f * (np.cos(th) * xx + np.sin(th) * yy))
    cx = rng.uniform(0.2, 0.8)
    cy = rng.uniform(0.2, 0.8)
    r2 = rng.uniform(0.02, 0.08)
    disk = ((xx - cx) ** 2 + (yy - cy) ** 2) < r2
    a = rng.uniform(0.3, 1, (3, 1, 1))
    b = rng.uniform(-1, 1, (3, 1, 1))
    img = 0.5 + 0.6 * tex + grat * a + 0.3 * disk * b
    return np.clip(img, 0, 1)


# --------------------------------------------------------------------------- patterns
def test_stripes_textbook_case():
    """The textbook 8 x 8, period-4 stripes: every row 0 0 1 1 0 0 1 1, grey RGB float32."""
    s = synth.stripes()
    assert s.shape == (8, 8, 3) and s.dtype == np.float32
    expected = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.float32)
    for c in range(3):
        np.testing.assert_array_equal(s[:, :, c], np.tile(expected, (8, 1)))


def test_stripes_horizontal_is_transpose():
    v = synth.stripes(12, 6)
    h = synth.stripes(12, 6, orientation="horizontal")
    np.testing.assert_array_equal(h, v.transpose(1, 0, 2))


def test_stripes_odd_period():
    row = synth.stripes(10, 5)[0, :, 0]
    np.testing.assert_array_equal(row, [0, 0, 0, 1, 1, 0, 0, 0, 1, 1])


def test_checkerboard():
    c = synth.checkerboard(4, 1)
    assert c.shape == (4, 4, 3) and c.dtype == np.float32
    np.testing.assert_array_equal(c[:, :, 0], [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]])
    c2 = synth.checkerboard(8, 2)[:, :, 1]
    assert c2[0, 0] == c2[1, 1] == 0 and c2[0, 2] == c2[2, 0] == 1 and c2[2, 2] == 0


def test_grating_values():
    g = synth.grating(2, 0, size=16)
    assert g.shape == (16, 16, 3) and g.dtype == np.float32
    x = np.arange(16) / 16
    np.testing.assert_allclose(g[5, :, 0], 0.5 + 0.5 * np.sin(2 * np.pi * 2 * x), atol=1e-6)
    assert np.ptp(g[:, 3, 0]) == 0  # angle 0 varies along x only
    v = synth.grating(2, 90, size=16)
    np.testing.assert_allclose(v[:, :, 0], g[:, :, 0].T, atol=1e-6)
    np.testing.assert_array_equal(synth.grating(0, 30, size=4, mean=0.25), synth.flat(0.25, size=4))
    low = synth.grating(3, 45, size=32, contrast=0.2)
    assert low.min() >= 0.4 - 1e-6 and low.max() <= 0.6 + 1e-6


def test_flat_and_gradient():
    f = synth.flat(0.3, size=5)
    assert f.shape == (5, 5, 3) and f.dtype == np.float32 and np.all(f == np.float32(0.3))
    c = synth.flat((0.1, 0.2, 0.3), size=2)
    np.testing.assert_array_equal(c[1, 1], np.float32([0.1, 0.2, 0.3]))
    g = synth.gradient(size=5)
    np.testing.assert_allclose(g[2, :, 0], [0, 0.25, 0.5, 0.75, 1])
    gv = synth.gradient(size=5, direction="vertical")
    np.testing.assert_array_equal(gv, g.transpose(1, 0, 2))


# ------------------------------------------------------------------------- texture patch
@pytest.mark.parametrize("seed", [0, 1, 1234])
def test_texture_patch_matches_reference(seed):
    """texture_patch(seed) is the reference patch for default_rng(seed), transposed to HWC."""
    ours = synth.texture_patch(seed, dtype=np.float64)
    ref = reference_make_patch(np.random.default_rng(seed)).transpose(1, 2, 0)
    assert ours.shape == (64, 64, 3) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def test_texture_patch_generator_stream():
    """Several patches drawn from one Generator follow the reference's consecutive draws."""
    g_ours, g_ref = np.random.default_rng(7), np.random.default_rng(7)
    for size in (64, 32, 64):
        ours = synth.texture_patch(g_ours, size, dtype=np.float64)
        ref = reference_make_patch(g_ref, size).transpose(1, 2, 0)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
    assert g_ours.random() == g_ref.random()  # both streams advanced by the same draws


def test_texture_patch_float32_default():
    p32 = synth.texture_patch(3)
    p64 = synth.texture_patch(3, dtype=np.float64)
    assert p32.dtype == np.float32 and p32.shape == (64, 64, 3)
    np.testing.assert_array_equal(p32, p64.astype(np.float32))
    assert 0 <= p32.min() and p32.max() <= 1
    np.testing.assert_array_equal(synth.texture_patch(3), p32)  # reproducible
    assert not np.array_equal(synth.texture_patch(4), p32)


def test_texture_patch_small_size():
    p = synth.texture_patch(0, 5)
    assert p.shape == (5, 5, 3) and 0 <= p.min() and p.max() <= 1


# ----------------------------------------------------------------------------- errors
def test_stripes_rejects_small_period():
    with pytest.raises(ValueError, match="period must be >= 2; got 1"):
        synth.stripes(8, 1)


def test_stripes_rejects_zero_size():
    with pytest.raises(ValueError, match="size must be >= 1; got 0"):
        synth.stripes(0)


def test_stripes_rejects_unknown_orientation():
    with pytest.raises(ValueError, match="'diagonal'"):
        synth.stripes(orientation="diagonal")


def test_size_must_be_int():
    with pytest.raises(TypeError, match="size must be an int"):
        synth.checkerboard(8.0)


def test_checkerboard_rejects_zero_square():
    with pytest.raises(ValueError, match="square must be >= 1; got 0"):
        synth.checkerboard(8, 0)


def test_grating_rejects_contrast_above_one():
    with pytest.raises(ValueError, match="contrast must be in \\[0, 1\\]; got 1.5"):
        synth.grating(2, 0, contrast=1.5)


def test_grating_rejects_negative_freq():
    with pytest.raises(ValueError, match="freq must be >= 0; got -1"):
        synth.grating(-1, 0)


def test_grating_rejects_nan_angle():
    with pytest.raises(ValueError, match="angle must be finite; got nan"):
        synth.grating(1, float("nan"))


def test_flat_rejects_out_of_range():
    with pytest.raises(ValueError, match="value must lie in \\[0, 1\\]; got 1.5"):
        synth.flat(1.5)


def test_flat_rejects_two_levels():
    with pytest.raises(ValueError, match="3 levels"):
        synth.flat((0.1, 0.2))


def test_gradient_rejects_unknown_direction():
    with pytest.raises(ValueError, match="'up'"):
        synth.gradient(direction="up")


def test_texture_patch_rejects_int_dtype():
    with pytest.raises(ValueError, match="dtype must be float32 or float64; got uint8"):
        synth.texture_patch(0, dtype=np.uint8)


def test_texture_patch_rejects_negative_seed():
    with pytest.raises(ValueError, match="seed must be >= 0; got -1"):
        synth.texture_patch(-1)


def test_texture_patch_rejects_string_seed():
    with pytest.raises(TypeError, match="seed must be an int or a numpy.random.Generator"):
        synth.texture_patch("0")
