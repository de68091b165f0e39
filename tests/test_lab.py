"""lpips_explorer.lab: the Distortion lab's computation, against the models and the metrics directly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lpips_core import metrics as M
from lpips_core.spec import MetricSpec
from lpips_explorer import lab as L
from lpips_explorer.distortions import gaussian_blur, jpeg
from lpips_explorer.synth import texture_patch

ALEX = MetricSpec("lpips", net="alex")
ALEX00 = MetricSpec("lpips", net="alex", version="0.0", lin=False)


@pytest.fixture(scope="module")
def pair():
    ref = texture_patch(2, size=64)
    return ref, jpeg(gaussian_blur(ref, 1.0), 40)


@pytest.fixture(scope="module")
def models():
    return {s: s.build() for s in (ALEX, ALEX00)}


def test_score_is_the_models_value_with_its_layers_and_maps(pair, models):
    ref, dist = pair
    for spec, model in models.items():
        r = L.score(model, spec, ref, dist)
        x, y = spec.prepare(ref), spec.prepare(dist)
        want = model.compare(x, y, spatial=True)
        assert r.spec == spec and r.total == pytest.approx(float(want.total[0]), rel=1e-5)
        np.testing.assert_allclose(r.per_layer, want.per_layer[0].numpy(), rtol=1e-5, atol=1e-9)
        assert r.layer_names == tuple(want.layer_names) and r.layer_maps.shape == (5, 64, 64)
        assert float(r.layer_maps.sum(0).mean()) == pytest.approx(r.total, rel=1e-3)  # the map's mean is the value
        assert r.components == {}
    with pytest.raises(TypeError, match="needs its own model"):
        L.score(models[ALEX], ALEX00, ref, dist)


def test_classic_values_and_the_table(pair):
    ref, dist = pair
    classic = L.classic_values(ref, dist)
    assert classic == {"mse": M.mse(ref, dist), "psnr": M.psnr(ref, dist), "ssim": M.ssim(ref, dist)}
    small = texture_patch(0, size=8)
    tiny = L.classic_values(small, small)
    assert tiny["mse"] == 0.0 and tiny["psnr"] == math.inf and math.isnan(tiny["ssim"])

    scored = L.Scored(ALEX, 0.25, np.array([0.1, 0.15]), ("a", "b"))
    rows = L.metric_rows(tiny, {ALEX: scored, ALEX00: None}, [ALEX, ALEX00, MetricSpec("dists")])
    assert [r["metric"] for r in rows] == ["MSE", "PSNR (dB)", "SSIM", "LPIPS · AlexNet", "LPIPS · AlexNet",
                                           "DISTS · VGG16"]
    assert [r["note"] for r in rows] == ["", "", "image too small", "v0.1, lin", "unavailable (no weights)",
                                         "unavailable (no weights)"]
    assert rows[3]["value"] == 0.25 and math.isnan(rows[4]["value"]) and rows[1]["value"] == math.inf


def test_notes_say_what_the_row_leaves_out():
    assert L.note(ALEX) == "v0.1, lin" and L.note(ALEX00) == "v0.0, baseline"
    assert L.note(MetricSpec("stlpips")) == "inputs in [-1,1]" and L.note(MetricSpec("dists")) == "inputs in [0,1]"
    assert L.classic_label("psnr") == "PSNR (dB)" and L.classic_label("ssim") == "SSIM"


def test_bars_stages_maps():
    maps = np.stack([np.full((4, 4), 0.1), np.full((4, 4), 0.2)])
    lp = L.Scored(ALEX, 0.3, np.array([0.1, 0.2]), ("relu1", "relu2"), maps)
    vgg = MetricSpec("lpips", net="vgg")
    dists = L.Scored(MetricSpec("dists"), 0.5, np.array([0.2, 0.3]), ("input", "relu1_2"), None,
                     {"texture": np.array([0.1, 0.1]), "structure": np.array([0.1, 0.2])})
    results = {ALEX: lp, vgg: None, MetricSpec("dists"): dists}
    assert list(L.layer_bars(results)) == ["LPIPS · AlexNet"]
    assert L.staged(results) == [dists]
    st = L.Scored(MetricSpec("stlpips"), 0.2, np.array([0.1, 0.1]), ("relu1", "relu2"), maps)
    both = {MetricSpec("stlpips"): st, ALEX: lp}
    assert L.map_sources(both, first=ALEX) == [ALEX, MetricSpec("stlpips")]  # the sidebar's first
    assert L.map_sources(both) == [MetricSpec("stlpips"), ALEX]
    values, equals = L.map_values(lp, L.SUMMED)
    np.testing.assert_allclose(values, np.full((4, 4), 0.3))
    assert equals == "= LPIPS" and L.map_values(st, L.SUMMED)[1] == "= ST-LPIPS"
    values, equals = L.map_values(lp, "relu2")
    assert np.all(values == 0.2) and equals == "= d_l of this layer"
    with pytest.raises(ValueError, match="has no spatial maps"):
        L.map_values(dists, L.SUMMED)
    with pytest.raises(ValueError, match="'relu9' is not one of"):
        L.map_values(lp, "relu9")
