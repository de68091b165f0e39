"""Sweeps and the Conventions grid equal one-by-one computations with separate models.

The successor sweeps run for ST-LPIPS (AlexNet) in the fast tier; the same two tests on DISTS
(VGG16 at 96 px, a dozen passes each) are marked ``slow`` (full tier). DISTS's own parts of the
sweep (stage terms, its errors) stay in the fast tier.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lpips_core import LPIPS
from lpips_core.conventions import to_input
from lpips_explorer.distortions import gaussian_blur, shift
from lpips_core.spec import MetricSpec
from lpips_core.sweeps import VARIANTS, conventions_grid, grid_rows, lpips_many, metric_many
from lpips_explorer.synth import texture_patch


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
        ref, dist, get_model=lambda s: models[(s.version, s.lin)] if s.net == "alex" else None,
        nets=("alex", "squeeze"), sizes=(None, 64), progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # progress(done, total), the unavailable net too
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
        want = float(models[(v, lin)].compare(x, y))  # the unchecked path: the grid feeds wrong ranges on purpose
        assert c.value == pytest.approx(want, abs=1e-6), c
        ref_value = [d.value for d in cells if d.size_label == c.size_label and d.variant == "[-1,1]"][0]
        assert c.ratio == pytest.approx(c.value / ref_value)
        assert c.is_reference == (c.variant == "[-1,1]")
        # the cell's spec is the configuration it computed
        assert (c.spec.net, c.spec.version, c.spec.lin, c.spec.convention, c.spec.grayscale, c.spec.size) == (
            "alex", v, lin, conv, gray, size)
        assert c.row_spec == MetricSpec("lpips", net="alex")
    rows = grid_rows(cells)
    assert rows[0]["backbone"] == "alex" and rows[0]["size"] == "native" and rows[0]["ratio_to_reference"] == 1.0


def test_grid_inputs_and_scaling_in_numpy_give_the_bits_of_pytorch(models, pair, monkeypatch):
    """Where the head runs in NumPy (a CPU on at most two torch threads) the grid also maps its
    inputs there (conventions, grayscale, the scaling layer): the same float32 operations in the
    same order, so the same bits as PyTorch's; the whole grid agrees with the PyTorch head's
    within 1e-6 (relative)."""
    import lpips_core.model as model_module
    import lpips_core.sweeps as sweeps_module
    from lpips_core.conventions import resize, to_tensor

    ref, dist = pair
    keys = sweeps_module._feature_keys(VARIANTS, "0.1")
    for size in (None, 64, 131):
        t = resize(to_tensor(ref), size)
        assert torch.equal(sweeps_module._variant_inputs(t, keys, True), sweeps_module._variant_inputs(t, keys, False))
        x = sweeps_module._variant_inputs(t, keys, False)
        for m in (models[("0.1", True)], models[("0.0", True)]):
            assert torch.equal(m._scaled(x, None, numpy=True), m._scaled(x, None))
            assert torch.equal(m._pair_input(x, x.flip(0), None, numpy=True), m._pair_input(x, x.flip(0), None))
    grid = {}
    for numpy in (True, False):
        monkeypatch.setattr(model_module, "_numpy_head", lambda device, on=numpy: on)
        monkeypatch.setattr(sweeps_module, "_numpy_head", lambda device, on=numpy: on)
        cells = conventions_grid(ref, dist, get_model=lambda s: models[(s.version, True)], nets=("alex",),
                                 sizes=(None, 64))
        grid[numpy] = [c.value for c in cells]
    np.testing.assert_allclose(grid[True], grid[False], rtol=1e-6, atol=0)  # NumPy vs PyTorch head


def test_grid_computes_a_size_equal_to_the_native_one_once(models, pair, monkeypatch):
    """A 96 px pair at sizes native, 64 and 96: the 96 px cells are the native ones (the same
    inputs), computed once; every cell equals the one a grid of that size alone gives."""
    import lpips_core.sweeps as sweeps_module

    ref, dist = pair
    get = lambda s: models[(s.version, True)]  # noqa: E731
    calls = []
    real = sweeps_module._grid_values
    monkeypatch.setattr(sweeps_module, "_grid_values", lambda *a: calls.append(a[3]) or real(*a))
    cells = conventions_grid(ref, dist, get_model=get, nets=("alex",), sizes=(None, 64, 96))
    assert calls == [None, 64]
    by = {(c.size_label, c.variant): c.value for c in cells}
    for v in VARIANTS:
        assert by[("96×96", v)] == by[("native", v)]
    alone = conventions_grid(ref, dist, get_model=get, nets=("alex",), sizes=(96,))
    assert [c.value for c in alone] == [by[("96×96", c.variant)] for c in alone]


def test_grid_rejects_unknown_variant(pair):
    with pytest.raises(ValueError, match="unknown variants"):
        conventions_grid(*pair, get_model=lambda s: None, variants=("[-1,1]", "sRGB"))


# --------------------------------------------------------------------------- successor metrics (issue 8)
@pytest.fixture(scope="module")
def successors():
    """ST-LPIPS (alex) and DISTS as ``metric_registry.build`` gives them; skipped without weights."""
    from lpips_core import metric_registry

    out = {}
    for metric, net in (("stlpips", "alex"), ("dists", "vgg")):
        ok, why = metric_registry.availability(metric, net)
        if not ok:
            pytest.skip(why)
        out[metric] = metric_registry.build(metric, net)
    return out


@pytest.mark.parametrize("metric", ["stlpips", pytest.param("dists", marks=pytest.mark.slow)])
def test_metric_many_equals_direct_model_calls(successors, pair, metric):
    from lpips_core.metric_registry import prepare_input

    ref, _ = pair
    model = successors[metric]
    images = [shift(ref, 2), gaussian_blur(ref, 1.0), gaussian_blur(ref, 2.0)]
    got = metric_many(model, ref, images)  # the model's own spec
    want = [float(model(prepare_input(metric, ref), prepare_input(metric, img))) for img in images]
    np.testing.assert_allclose(got.total, want, rtol=1e-5, atol=1e-7)
    # a second call (the reference's features now cached) gives the same numbers, by spec name too
    name = MetricSpec.of_model(model).name
    np.testing.assert_allclose(metric_many(model, ref, images, spec=name).total, got.total, rtol=0, atol=1e-7)
    # a wrong convention and a size reach the inputs
    got = metric_many(model, ref, images[:1], spec=MetricSpec(metric, convention="[0,255]", size=64))
    x = prepare_input(metric, ref, convention="[0,255]", size=64)
    y = prepare_input(metric, images[0], convention="[0,255]", size=64)
    assert float(got.total[0]) == pytest.approx(float(model.compare(x, y)), rel=1e-5)


def test_metric_many_stlpips_per_layer_and_maps(successors, pair):
    from lpips_core.metric_registry import prepare_input

    ref, dist = pair
    model = successors["stlpips"]
    got = metric_many(model, ref, [dist], spatial=True)
    want = model.compare(prepare_input("stlpips", ref), prepare_input("stlpips", dist))
    np.testing.assert_allclose(got.per_layer, want.per_layer, rtol=1e-5, atol=1e-8)
    assert got.layer_maps.shape[-2:] == ref.shape[:2]
    assert float(got.spatial_map.mean()) == pytest.approx(float(got.total[0]), rel=1e-4)


def test_metric_many_dists_stage_terms(successors, pair):
    from lpips_core.metric_registry import prepare_input

    ref, dist = pair
    model = successors["dists"]
    got = metric_many(model, ref, [dist])
    want = model.compare(prepare_input("dists", ref), prepare_input("dists", dist))
    for part in ("texture", "structure"):
        np.testing.assert_allclose(got.components[part], want.components[part], rtol=1e-5, atol=1e-8)
    assert got.layer_names == want.layer_names


def test_metric_many_errors(successors, models, pair):
    ref, _ = pair
    with pytest.raises(ValueError, match="at least one image"):
        metric_many(successors["dists"], ref, [])
    with pytest.raises(ValueError, match="no spatial map"):
        metric_many(successors["dists"], ref, [ref], spatial=True)
    with pytest.raises(ValueError, match=r"image 0 has shape \(64, 64, 3\)"):
        metric_many(successors["stlpips"], ref, [np.zeros((64, 64, 3), np.float32)])
    with pytest.raises(TypeError, match=r"DISTS · VGG16 needs its own model \(dists-vgg-\[0,1\]\), got stlpips-alex"):
        metric_many(successors["stlpips"], ref, [ref], spec="dists")
    with pytest.raises(TypeError, match=r"LPIPS · AlexNet needs its own model .*, got stlpips-alex"):
        metric_many(successors["stlpips"], ref, [ref], spec="lpips")
    with pytest.raises(TypeError, match=r"ST-LPIPS · AlexNet needs its own model .*, got lpips-alex-0.1-lin"):
        metric_many(models[("0.1", True)], ref, [ref], spec="stlpips")
    with pytest.raises(TypeError, match=r"AlexNet \(baseline\) needs its own model .*, got lpips-alex-0.1-lin"):
        metric_many(models[("0.1", True)], ref, [ref], spec="lpips-alex-baseline")
    with pytest.raises(ValueError, match="SSIM is computed on the images directly"):
        metric_many(successors["dists"], ref, [ref], spec="ssim")


@pytest.mark.parametrize("metric", ["stlpips", pytest.param("dists", marks=pytest.mark.slow)])
def test_metric_conventions_grid_equals_direct_calls(successors, pair, metric):
    from lpips_core.metric_registry import convention_note, correct_convention, prepare_input
    from lpips_core.sweeps import metric_conventions_grid, metric_grid_rows

    ref, dist = pair
    model = successors[metric]
    cells = metric_conventions_grid(model, ref, dist, sizes=(None, 64))
    correct = correct_convention(metric)
    assert len(cells) == 2 * 3
    assert cells[0].variant == cells[3].variant == correct  # the correct convention first at each size
    for c in cells:
        size = None if c.size_label == "native" else 64
        x = prepare_input(metric, ref, convention=c.variant, size=size)
        y = prepare_input(metric, dist, convention=c.variant, size=size)
        assert c.value == pytest.approx(float(model.compare(x, y)), rel=1e-5, abs=1e-7), c
        base = next(d.value for d in cells if d.size_label == c.size_label and d.variant == correct)
        assert c.ratio == pytest.approx(c.value / base)
        assert c.is_reference == (c.variant == correct)
        assert c.note == convention_note(metric, c.variant)
        assert c.spec == MetricSpec(metric, convention=c.variant, size=size)  # what the cell computed
        assert c.row_spec == MetricSpec(metric)
    rows = metric_grid_rows(cells)
    assert {r["metric"] for r in rows} == {MetricSpec(metric).name}  # "stlpips-alex-[-1,1]", "dists-vgg-[0,1]"
    assert rows[0]["convention"] == correct and rows[0]["ratio_to_correct"] == 1.0 and rows[0]["is_correct"]
    assert set(rows[0]) == {"metric", "convention", "size", "value", "correct_value", "ratio_to_correct",
                            "is_correct", "what_it_models"}


def test_metric_conventions_grid_errors(successors, pair):
    from lpips_core.sweeps import metric_conventions_grid

    ref, dist = pair
    with pytest.raises(ValueError, match="unknown conventions"):
        metric_conventions_grid(successors["dists"], ref, dist, conventions=("sRGB",))
    with pytest.raises(ValueError, match="differs in shape"):
        metric_conventions_grid(successors["dists"], ref, dist[:64])
