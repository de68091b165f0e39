"""Sweeps and the Conventions grid equal one-by-one computations with separate models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lpips_core import LPIPS
from lpips_core.conventions import to_input
from lpips_core.distortions import gaussian_blur, shift
from lpips_core.sweeps import VARIANTS, conventions_grid, grid_rows, lpips_many
from lpips_core.synth import texture_patch


@pytest.fixture(scope="module")
def models():
    return {(v, lin): LPIPS("alex", v, lin) for v in ("0.1", "0.0") for lin in (True, False)}


@pytest.fixture(scope="module")
def pair():
    ref = texture_patch(3, size=96)
    return ref, gaussian_blur(ref, 1.5)


def test_lpips_many_equals_pairwise(models, pair):
    ref, _ = pair
    model = models[("0.1", True)]
    images = [shift(ref, d) for d in range(4)] + [gaussian_blur(ref, s) for s in (0.5, 1.0)]
    got = lpips_many(model, ref, images)
    want = [float(model(to_input(ref), to_input(img))) for img in images]
    np.testing.assert_allclose(got.total, want, atol=1e-6)
    # Shift by 0 is the identity; the reference and the batch run through the convolution at
    # different batch sizes, whose kernels may round differently: zero up to ~1e-14.
    assert abs(float(got.total[0])) < 1e-10


def test_lpips_many_errors(models, pair):
    ref, _ = pair
    with pytest.raises(ValueError, match="at least one image"):
        lpips_many(models[("0.1", True)], ref, [])
    with pytest.raises(ValueError, match=r"image 0 has shape \(64, 64, 3\)"):
        lpips_many(models[("0.1", True)], ref, [np.zeros((64, 64, 3), np.float32)])


def test_grid_equals_separate_models(models, pair):
    ref, dist = pair
    seen = []
    cells = conventions_grid(
        ref, dist, get_model=lambda net, v: models[(v, True)] if net == "alex" else None,
        nets=("alex", "squeeze"), sizes=(None, 64), progress=lambda f, m: seen.append((f, m)),
    )
    assert [round(f, 2) for f, _ in seen] == [0.25, 0.5, 0.75, 1.0] and "unavailable" in seen[-1][1]
    assert len(cells) == 2 * len(VARIANTS)
    expected_cfg = {
        "[-1,1]": ("0.1", True, "[-1,1]", False), "[0,1]": ("0.1", True, "[0,1]", False),
        "[0,255]": ("0.1", True, "[0,255]", False), "v0.0": ("0.0", True, "[-1,1]", False),
        "baseline": ("0.1", False, "[-1,1]", False), "grayscale": ("0.1", True, "[-1,1]", True),
    }
    for c in cells:
        v, lin, conv, gray = expected_cfg[c.variant]
        size = None if c.size_label == "native" else 64
        x = to_input(ref, convention=conv, size=size, grayscale=gray)
        y = to_input(dist, convention=conv, size=size, grayscale=gray)
        want = float(models[(v, lin)](x, y))
        assert c.value == pytest.approx(want, abs=1e-6), c
        ref_value = [d.value for d in cells if d.size_label == c.size_label and d.variant == "[-1,1]"][0]
        assert c.ratio == pytest.approx(c.value / ref_value)
        assert c.is_reference == (c.variant == "[-1,1]")
    rows = grid_rows(cells)
    assert rows[0]["backbone"] == "alex" and rows[0]["size"] == "native" and rows[0]["ratio_to_reference"] == 1.0


def test_grid_rejects_unknown_variant(pair):
    with pytest.raises(ValueError, match="unknown variants"):
        conventions_grid(*pair, get_model=lambda n, v: None, variants=("[-1,1]", "sRGB"))
