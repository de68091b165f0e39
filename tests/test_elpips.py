"""ELPIPS: E-LPIPS's random transformations on our LPIPS-VGG (issue 12, item 2).

The transformations are checked against hand-written equivalents (no network); the metric for
d(x, x) = 0, reproducibility by seed, gradients, and a standard error that falls like 1/√samples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lpips_core import LPIPS
from lpips_core.elpips import (
    ELPIPS, OFFSET_MAX, Transform, apply_transform, default_scales, sample_transform,
)


@pytest.fixture(scope="module")
def vgg():
    return LPIPS("vgg")


@pytest.fixture(scope="module")
def pair():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, 40, 40, generator=g)
    y = (x + 0.15 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    return x * 2 - 1, y * 2 - 1


def _t(**kw) -> Transform:
    base = dict(scale=1, scale_offset=(0, 0), offset=(0, 0), flip=0, swap=False, permutation=(0, 1, 2),
                colour=(1.0, 1.0, 1.0))
    return Transform(**{**base, **kw})


# --------------------------------------------------------------------------- transformations
def test_translation_is_reflect_padding_of_offset_max():
    x = torch.rand(2, 3, 10, 12)
    out = apply_transform(x, _t(offset=(0, 0)))
    assert out.shape == (2, 3, 10 + OFFSET_MAX, 12 + OFFSET_MAX)
    torch.testing.assert_close(out[..., OFFSET_MAX:, OFFSET_MAX:], x, rtol=0, atol=0)
    out = apply_transform(x, _t(offset=(3, 5)))
    torch.testing.assert_close(out, F.pad(x, (2, 5, 4, 3), mode="reflect"), rtol=0, atol=0)


def test_flip_swap_permutation_and_colour():
    x = torch.rand(1, 3, 9, 11)
    pad = F.pad(x, (OFFSET_MAX, 0, OFFSET_MAX, 0), mode="reflect")
    torch.testing.assert_close(apply_transform(x, _t(flip=1)), pad.flip(-1), rtol=0, atol=0)
    torch.testing.assert_close(apply_transform(x, _t(flip=2)), pad.flip(-2), rtol=0, atol=0)
    torch.testing.assert_close(apply_transform(x, _t(flip=3)), pad.flip(-2, -1), rtol=0, atol=0)
    torch.testing.assert_close(apply_transform(x, _t(swap=True)), pad.transpose(-2, -1), rtol=0, atol=0)
    torch.testing.assert_close(apply_transform(x, _t(permutation=(2, 0, 1))), pad[:, [2, 0, 1]], rtol=0, atol=0)
    scaled = apply_transform(x, _t(colour=(0.2, 0.5, 1.0)))
    torch.testing.assert_close(scaled, pad * torch.tensor([0.2, 0.5, 1.0]).view(1, 3, 1, 1))


def test_downscaling_box_averages_after_reflect_padding():
    x = torch.rand(1, 3, 10, 10)
    out = apply_transform(x, _t(scale=2, scale_offset=(1, 0)), offset_max=0)
    # full size (10 + 2) // 2 * 2 = 12: one row before (the offset), one after; two columns after
    padded = F.pad(x, (0, 2, 1, 1), mode="reflect")
    assert out.shape == (1, 3, 6, 6)
    torch.testing.assert_close(out, F.avg_pool2d(padded, 2))
    torch.testing.assert_close(out[0, :, 1, 0], x[0, :, 1:3, 0:2].mean((-2, -1)))


def test_sampled_transformations_follow_e_lpips_distributions():
    g = torch.Generator().manual_seed(1)
    ts = [sample_transform(g, scales=4) for _ in range(3000)]
    freq = np.bincount([t.scale for t in ts], minlength=5)[1:] / len(ts)
    expected = np.array([1, 1 / 4, 1 / 9, 1 / 16]) / sum([1, 1 / 4, 1 / 9, 1 / 16])
    np.testing.assert_allclose(freq, expected, atol=0.03)
    assert all(0 <= o <= OFFSET_MAX for t in ts for o in t.offset)
    assert all(0 <= o < t.scale for t in ts for o in t.scale_offset)
    assert {t.permutation for t in ts} == {(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)}
    assert {t.flip for t in ts} == {0, 1, 2, 3} and {t.swap for t in ts} == {False, True}
    colours = np.array([t.colour for t in ts])
    assert colours.min() >= 0.2 and colours.max() <= 1.0 and abs(colours.mean() - 0.6) < 0.02
    b = sample_transform(torch.Generator().manual_seed(2), colour="brightness")
    assert b.colour[0] == b.colour[1] == b.colour[2]


@pytest.mark.parametrize("side, scales", [(32, 1), (127, 1), (128, 2), (300, 4), (4000, 8)])
def test_default_scales_keep_64_px_per_scale(side, scales):
    assert default_scales(side, side + 10) == scales


# --------------------------------------------------------------------------- the metric
def test_identical_images_give_exactly_zero(vgg, pair):
    x, _ = pair
    metric = ELPIPS(vgg, samples=3, scales=2, seed=4)
    assert float(metric(x, x)[0]) == 0.0
    assert float(metric.evaluate(x, x, samples=4, seed=9).values.abs().max()) == 0.0


def test_same_seed_same_value_and_reseed(vgg, pair):
    x, y = pair
    a, b = ELPIPS(vgg, seed=7, scales=2), ELPIPS(vgg, seed=7, scales=2)
    first = [float(a(x, y)[0]) for _ in range(3)]
    assert first == [float(b(x, y)[0]) for _ in range(3)]
    assert len(set(first)) == 3  # a fresh transformation each call
    a.reseed(7)
    assert float(a(x, y)[0]) == first[0]
    assert float(ELPIPS(vgg, seed=8, scales=2)(x, y)[0]) != first[0]
    e1 = a.evaluate(x, y, samples=4, seed=3)
    e2 = b.evaluate(x, y, samples=4, seed=3)
    assert torch.equal(e1.values, e2.values) and e1.seed == 3 and e1.samples == 4


def test_one_sample_is_lpips_vgg_of_the_transformed_pair(vgg, pair):
    x, y = pair
    metric = ELPIPS(vgg, seed=11)
    t = metric.sample(40, 40, torch.Generator().manual_seed(11))
    tx = apply_transform((x + 1) / 2, t) * 2 - 1
    ty = apply_transform((y + 1) / 2, t) * 2 - 1
    assert float(metric(x, y)[0]) == pytest.approx(float(vgg(tx, ty)[0]), abs=1e-6)


def test_gradients_flow_to_both_inputs(vgg, pair):
    x, y = (t.clone().requires_grad_(True) for t in pair)
    ELPIPS(vgg, seed=0)(x, y).sum().backward()
    assert x.grad is not None and y.grad is not None
    assert float(x.grad.abs().sum()) > 0 and float(y.grad.abs().sum()) > 0
    assert all(not p.requires_grad for p in vgg.parameters())


@pytest.mark.slow
def test_standard_error_falls_like_one_over_sqrt_samples(vgg):
    """One seeded run of 256 samples on a 32 px pair, cut into disjoint blocks (a prefix is exactly
    what ``evaluate(samples=n)`` with the same seed draws, so every block is an honest n-sample run):

    - the reported SE is ``std(values, ddof=1) / √n``;
    - it means what it says: the spread of sixteen independent 16-sample means matches the SE of a
      16-sample run within 35 % (measured: 1.17 times it);
    - it falls like 1/√n: SE over the block sizes 4, 16, 64, 256 (block-averaged variances) has a
      log-log slope of −½ within 0.1 (measured −0.501), and the mean 16-sample SE over the
      256-sample SE is 4 within 1 (measured 3.92).
    """
    g = torch.Generator().manual_seed(3)
    x = torch.rand(1, 3, 32, 32, generator=g)
    y = (x + 0.15 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    metric = ELPIPS(vgg)
    est = metric.evaluate(x * 2 - 1, y * 2 - 1, samples=256, seed=5)
    v = est.values[:, 0].double()
    assert float(est.stderr[0]) == pytest.approx(float(v.std() / 16), rel=1e-5)
    assert float(est.mean[0]) == pytest.approx(float(v.mean()), rel=1e-6)
    short = metric.evaluate(x * 2 - 1, y * 2 - 1, samples=16, seed=5)
    torch.testing.assert_close(short.values, est.values[:16], rtol=0, atol=0)
    blocks16 = v.view(16, 16)
    se16 = blocks16.std(1) / 4
    spread = float(blocks16.mean(1).std())
    assert spread == pytest.approx(float(se16.mean()), rel=0.35), (spread, float(se16.mean()))
    ns = np.array([4, 16, 64, 256])
    se = np.array([math.sqrt(float(v.view(-1, n).var(1).mean()) / n) for n in ns])
    slope = np.polyfit(np.log(ns), np.log(se), 1)[0]
    assert abs(slope + 0.5) < 0.1, (slope, se)
    assert float(se16.mean() / est.stderr[0]) == pytest.approx(4.0, abs=1.0)
    print(f"spread/SE16 = {spread / float(se16.mean()):.3f}, slope = {slope:.3f}, "
          f"SE16/SE256 = {float(se16.mean() / est.stderr[0]):.3f}")


# --------------------------------------------------------------------------- errors
def test_errors(vgg, pair):
    x, y = pair
    with pytest.raises(TypeError, match="LPIPS model"):
        ELPIPS(object())
    with pytest.raises(ValueError, match="net='alex'"):
        ELPIPS(LPIPS("alex"))
    with pytest.raises(ValueError, match="samples must be an int ≥ 1, got 0"):
        ELPIPS(vgg, samples=0)
    with pytest.raises(ValueError, match="scales must be at most 8, got 9"):
        ELPIPS(vgg, scales=9)
    with pytest.raises(ValueError, match="colour must be"):
        ELPIPS(vgg, colour="hue")
    with pytest.raises(TypeError, match="seed must be an int"):
        ELPIPS(vgg, seed=1.5)
    metric = ELPIPS(vgg)
    with pytest.raises(ValueError, match="samples ≥ 2"):
        metric.evaluate(x, y, samples=1)
    with pytest.raises(ValueError, match="same size"):
        metric(x, y[..., :30])
    with pytest.raises(ValueError, match=r"shape \(N, 3, H, W\)"):
        metric(x[0], y)
