"""The LPIPS engine against the reference ``lpips`` 0.1.4 package and the published numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lpips_core import LPIPS
from lpips_core.conventions import to_input
from lpips_core.testing import reference_lpips
from lpips_core.weights import load_backbone_weights

SIZES = [(64, 64), (97, 131), (256, 256)]
CONVENTIONS = ["[-1,1]", "[0,1]", "[0,255]"]


def _pair(h: int, w: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A smooth image and a noisy, slightly shifted copy, both (H, W, 3) in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    base = np.stack([0.5 + 0.4 * np.sin(2 * np.pi * (3 + c) * (xx + 0.5 * yy)) for c in range(3)], -1)
    base = np.clip(base + 0.1 * rng.standard_normal((h, w, 3)), 0, 1).astype(np.float32)
    other = np.clip(np.roll(base, 1, axis=1) + 0.05 * rng.standard_normal((h, w, 3)), 0, 1).astype(np.float32)
    return base, other


@pytest.fixture(scope="module", params=["alex", "vgg"])
def net(request):
    return request.param


@pytest.fixture(scope="module")
def backbone_sd(net):
    return load_backbone_weights(net).state_dict


# The parity cells the fast tier runs: AlexNet in its default configuration on the non-square size,
# and with the other version and lin setting at 64 px. The other 21 cells (VGG16 at every size,
# every 256 px cell) run in the full tier; in the fast tier VGG16 is held to the reference
# package's numbers by test_golden_table.
FAST_PARITY = {("alex", True, "0.1", (97, 131)), ("alex", False, "0.0", (64, 64))}


def _parity_cells():
    for net in ("alex", "vgg"):
        for lin in (True, False):
            for version in ("0.1", "0.0"):
                for size in SIZES:
                    fast = (net, lin, version, size) in FAST_PARITY
                    yield pytest.param(net, version, lin, size, id=f"{net}-{lin}-{version}-{size[0]}x{size[1]}",
                                       marks=[] if fast else [pytest.mark.slow])


@pytest.mark.parametrize("net, version, lin, size", list(_parity_cells()), indirect=["net"])
def test_parity_with_reference_package(net, backbone_sd, version, lin, size):
    """Totals, per-layer terms and spatial maps equal the reference's to 1e-5 absolute, over
    3 sizes (one non-square) × 3 input conventions, both models holding the same backbone weights.
    The fast tier runs two AlexNet cells (``FAST_PARITY``); ``--full`` runs all 24."""
    ours = LPIPS(net, version, lin, device="cpu")
    ref = reference_lpips(net, version, lin, backbone_sd)
    for h, w in (size,):
        a, b = _pair(h, w, seed=h)
        for conv in CONVENTIONS:
            x, y = to_input(a, convention=conv), to_input(b, convention=conv)
            got = ours.compare(x, y)
            with torch.no_grad():
                total, layers = ref(x, y, retPerLayer=True)
                ref.spatial = True
                _, maps = ref(x, y, retPerLayer=True)
                ref.spatial = False
            ctx = f"{net} v{version} lin={lin} {h}x{w} {conv}"
            np.testing.assert_allclose(got.total, total.flatten(), atol=1e-5, rtol=0, err_msg=ctx)
            np.testing.assert_allclose(
                got.per_layer[0], torch.cat([t.flatten() for t in layers]), atol=1e-5, rtol=0, err_msg=ctx
            )
            np.testing.assert_allclose(got.layer_maps[0], torch.cat([m[0] for m in maps]), atol=1e-5, rtol=0, err_msg=ctx)
            if conv == "[-1,1]":
                np.testing.assert_allclose(ours(x, y).cpu(), total.flatten(), atol=1e-5, rtol=0, err_msg=ctx)
            elif conv == "[0,1]":  # the forgotten normalisation: the reference's number, and a warning
                ours._warned_range = False
                with pytest.warns(UserWarning, match="pass normalize=True"):
                    np.testing.assert_allclose(ours(x, y).cpu(), total.flatten(), atol=1e-5, rtol=0, err_msg=ctx)
            else:  # raw 8-bit values are refused with the fix
                with pytest.raises(ValueError, match=r"found values from 0 to 2\d\d.*divide by 127.5"):
                    ours(x, y)


# Provenance: the reference repository's test_network.py prints "Distances: (0.722, 0.138)" for
# (ex_ref, ex_p0) and (ex_ref, ex_p1) with AlexNet, v0.1, lin (its issue #120). The six-place table
# is the reference lpips 0.1.4 package on the same files and conv weights (tests/data/README.md).
GOLDEN_TABLE = {
    ("alex", "0.1", True): (0.721881, 0.137566),
    ("alex", "0.1", False): (4.826556, 2.206010),
    ("alex", "0.0", True): (0.405575, 0.083881),
    ("alex", "0.0", False): (4.999211, 2.148461),
    ("vgg", "0.1", True): (0.568613, 0.421664),
    ("vgg", "0.1", False): (5.909985, 4.995357),
    ("vgg", "0.0", True): (0.224046, 0.133128),
    ("vgg", "0.0", False): (5.906902, 4.910133),
}


def test_golden_published_distances(golden):
    """AlexNet v0.1 lin on the reference repo's examples: the published 0.722 and 0.138."""
    model = LPIPS("alex", "0.1", True)
    ref = to_input(golden["ex_ref"])
    d0 = float(model(ref, to_input(golden["ex_p0"])))
    d1 = float(model(ref, to_input(golden["ex_p1"])))
    assert (round(d0, 3), round(d1, 3)) == (0.722, 0.138)


@pytest.mark.parametrize("key", sorted(GOLDEN_TABLE))
def test_golden_table(golden, key):
    net, version, lin = key
    model = LPIPS(net, version, lin)
    ref = to_input(golden["ex_ref"])
    got = model.compare(torch.cat([ref, ref]), torch.cat([to_input(golden["ex_p0"]), to_input(golden["ex_p1"])]))
    np.testing.assert_allclose(got.total, GOLDEN_TABLE[key], atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


@pytest.mark.parametrize("lin", [True, False])
def test_per_layer_terms_sum_to_total(golden, lin):
    model = LPIPS("alex", lin=lin)
    res = model.compare(to_input(golden["ex_ref"]), to_input(golden["ex_p1"]))
    assert res.per_layer.shape == (1, 5)
    assert float(res.per_layer.sum()) == pytest.approx(float(res.total[0]), rel=1e-6)
    assert res.layer_names == ("relu1", "relu2", "relu3", "relu4", "relu5")


@pytest.mark.parametrize("size", [(64, 64), (97, 131), (224, 224)])
def test_spatial_map_mean_is_close_to_total(alex, size):
    """The summed map's mean equals the total only up to the bilinear upsampling: with
    ``align_corners=False`` an integer scale factor preserves a map's mean exactly, but AlexNet's
    grids (e.g. 15×15 from 64 px) scale by non-integer factors, which weight border samples
    unequally. Measured relative gaps are below 1e-4; we allow 1e-3."""
    a, b = _pair(*size, seed=3)
    res = alex.compare(to_input(a), to_input(b))
    assert res.layer_maps.shape == (1, 5, *size)
    assert float(res.spatial_map.mean()) == pytest.approx(float(res.total[0]), rel=1e-3)


def test_precomputed_features_match_direct_comparison(alex):
    a, b = _pair(64, 64, seed=5)
    _, c = _pair(64, 64, seed=6)
    x = to_input(a)
    batch = torch.cat([to_input(b), to_input(c)])
    fx = alex.features(x)
    via_features = alex.compare_features(fx, alex.features(batch))
    direct = alex.compare(torch.cat([x, x]), batch)
    np.testing.assert_allclose(via_features.total, direct.total, atol=1e-6)
    np.testing.assert_allclose(via_features.layer_maps, direct.layer_maps, atol=1e-6)
    swept = alex.compare_batch(x, batch, chunk=1)
    np.testing.assert_allclose(swept.total, direct.total, atol=1e-6)
    assert swept.layer_maps is None


def test_reference_features_are_cached(alex):
    a, _ = _pair(64, 64, seed=7)
    x = to_input(a)
    assert alex.reference_features(x) is alex.reference_features(x.clone())
    assert alex.reference_features(x) is not alex.reference_features(x * 0.5)


def test_channel_terms_reproduce_layer_terms(golden):
    model = LPIPS("alex")
    fx, fy = model.features(to_input(golden["ex_ref"])), model.features(to_input(golden["ex_p0"]))
    per_channel = model.channel_terms(fx, fy)
    res = model.compare_features(fx, fy, spatial=False)
    manual = torch.stack([(t[0] * w.cpu()).sum() for t, w in zip(per_channel, model.channel_weights)])
    np.testing.assert_allclose(manual, res.per_layer[0], rtol=1e-5)


def test_model_is_frozen_and_in_eval_mode(alex):
    alex.train()
    assert not alex.training and not alex.backbone.training
    assert not any(p.requires_grad for p in alex.parameters())


def test_device_placement(device):
    model = LPIPS("alex", device=device)
    assert model.device.type == device
    x = torch.rand(1, 3, 64, 64) * 2 - 1
    assert model(x, x).device.type == device
    assert model.compare(x, x).total.device.type == "cpu"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"net": "resnet"}, "net must be one of"),
        ({"version": "0.2"}, "version must be one of"),
    ],
)
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LPIPS(**kwargs)


@pytest.mark.parametrize("per", [1, 2, 3, 64])
def test_batching_choice_does_not_change_results(alex, monkeypatch, per):
    """Pairs and sweeps give the same numbers whatever ``images_per_batch`` allows (1 = every image
    alone, 2 = one pair a batch, 3 = pairs split unevenly, 64 = everything at once)."""
    xs = torch.cat([to_input(_pair(64, 64, seed=s)[0]) for s in (11, 12, 13)])
    ys = torch.cat([to_input(_pair(64, 64, seed=s)[1]) for s in (11, 12, 13)])
    want = alex.compare(xs, ys)
    want_channels = alex.pair_channel_terms(xs, ys)
    monkeypatch.setattr(alex, "images_per_batch", lambda h, w, images=None: per)
    got = alex.compare(xs, ys)
    np.testing.assert_allclose(got.total, want.total, atol=1e-6)
    np.testing.assert_allclose(got.layer_maps, want.layer_maps, atol=1e-6)
    np.testing.assert_allclose(alex(xs, ys).cpu(), want.total, atol=1e-6)
    for g, w in zip(alex.pair_channel_terms(xs, ys), want_channels):
        np.testing.assert_allclose(g, w, atol=1e-7)
    np.testing.assert_allclose(alex.compare(xs[:1], ys).total, alex.compare(xs[:1].expand(3, -1, -1, -1), ys).total,
                               atol=1e-6)
    np.testing.assert_allclose(alex.compare_batch(xs[:1], ys).total, alex.compare(xs[:1], ys).total, atol=1e-6)


@pytest.mark.parametrize("whole_chunk_bytes", [0, 512 << 10, 1 << 40])
@pytest.mark.parametrize("layout", ["nchw", "channels-last"])
def test_numpy_head_pair_by_pair_gives_the_bits_of_the_whole_chunk(monkeypatch, whole_chunk_bytes, layout):
    """The NumPy head normalises a chunk whose two sides share one backbone batch pair by pair
    (while each pair's maps are in the cache), or, for small maps, the whole chunk in one go: the
    same operations on the same values as normalising the whole chunk first, so the same bits,
    for maps small and large, in both layouts."""
    import lpips_core.model as model_module
    from lpips_core.model import _np_channel_terms, _np_prepare

    monkeypatch.setattr(model_module, "_NP_WHOLE_CHUNK_BYTES", whole_chunk_bytes)
    gen = torch.Generator().manual_seed(3)
    shapes = [(6, 64, 31, 29), (6, 192, 15, 15), (6, 8, 3, 2)]
    fmt = torch.channels_last if layout == "channels-last" else torch.contiguous_format
    taps = [torch.rand(s, generator=gen).sub_(0.4).clamp_(min=0).contiguous(memory_format=fmt)
            for s in shapes]  # ReLU-like, with zeros
    whole = _np_prepare([t.clone() for t in taps])
    want = _np_channel_terms([t[:3] for t in whole], [t[3:] for t in whole], False)
    raw = [t.clone() for t in taps]
    got = _np_channel_terms([t[:3] for t in raw], [t[3:] for t in raw], "both")
    assert all(g.shape == (3, s[1]) and torch.equal(g, w) for g, w, s in zip(got, want, shapes))


def test_images_per_batch_budget(alex):
    vgg = LPIPS("vgg", device="cpu")
    # first tap: 64 float32 channels; AlexNet at stride 4, VGG16 at full resolution; 12 MB on a CPU
    assert vgg.images_per_batch(256, 256) == 1 and vgg.images_per_batch(128, 128) == 3
    assert alex.images_per_batch(512, 512) == 3 and vgg.images_per_batch(512, 512) == 1
    assert alex.images_per_batch(256, 256) == 12 * 2**20 // (64 * 4 * 64 * 64)


def test_cpu_weights_are_channels_last_and_the_gradient_path_runs_a_contiguous_copy(golden):
    """A CPU model keeps its convolution weights channels-last (faster oneDNN convolutions); its
    distances equal a contiguous twin's, and a differentiable call runs a contiguous copy of the
    backbone, made once, that is not part of the model's state."""
    model = LPIPS("alex", "0.1", True, device="cpu")
    conv = next(m for m in model.backbone.features if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and not conv.weight.is_contiguous()
    plain = LPIPS("alex", "0.1", True, device="cpu").to(memory_format=torch.contiguous_format)
    x = to_input(golden["ex_ref"], size=(64, 64)).repeat(2, 1, 1, 1)
    y = torch.cat([to_input(golden[k], size=(64, 64)) for k in ("ex_p0", "ex_p1")])
    np.testing.assert_allclose(model(x, y).numpy(), plain(x, y).numpy(), atol=1e-6, rtol=0)  # measured 1.8e-7

    keys = set(model.state_dict())
    xg, yg = x.clone().requires_grad_(), y.clone().requires_grad_()
    model(xg, yg).sum().backward()
    twin = model.backbone.__dict__["_contiguous_features"]
    assert all(p.is_contiguous() for p in twin.parameters())
    assert set(model.state_dict()) == keys  # not registered
    xp, yp = x.clone().requires_grad_(), y.clone().requires_grad_()
    plain(xp, yp).sum().backward()
    for g, p in ((xg, xp), (yg, yp)):  # the same layout, the same arithmetic
        np.testing.assert_array_equal(g.grad.numpy(), p.grad.numpy())
    # a fixed target runs the fast (channels-last) path without a graph: the gradient moves by ~1e-9
    xf, xq = x.clone().requires_grad_(), x.clone().requires_grad_()
    model(xf, y).sum().backward()
    plain(xq, y).sum().backward()
    np.testing.assert_allclose(xf.grad.numpy(), xq.grad.numpy(), atol=1e-8, rtol=0)
    assert model.backbone.__dict__["_contiguous_features"] is twin  # made once


@pytest.mark.parametrize("net", ["alex", "vgg", "squeeze"])
def test_backbone_architecture_is_torchvisions(net):
    """The features stack built without importing torchvision (AlexNet, VGG16) is torchvision's,
    layer for layer; the weights' file names and URLs are its enums'."""
    import torchvision.models as tvm

    from lpips_core.backbones import TAPS, _features_architecture
    from lpips_core.weights import TV_WEIGHTS

    build = {"alex": tvm.alexnet, "vgg": tvm.vgg16, "squeeze": tvm.squeezenet1_1}[net]
    enum = {"alex": tvm.AlexNet_Weights, "vgg": tvm.VGG16_Weights, "squeeze": tvm.SqueezeNet1_1_Weights}[net]
    with torch.device("meta"):
        theirs = build(weights=None).features[: TAPS[net][-1] + 1]
    ours = _features_architecture(net)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert (TV_WEIGHTS[net].name, TV_WEIGHTS[net].url) == (str(enum.IMAGENET1K_V1), enum.IMAGENET1K_V1.url)


def test_building_the_default_models_does_not_import_torchvision():
    """The app's first page builds AlexNet, VGG16 and ST-LPIPS: none of that imports torchvision
    (whose import pulls in torch._dynamo, ~2 s) or sympy (meta-tensor references, ~0.6 s), in a
    fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys; from lpips_core import LPIPS, metric_registry; LPIPS('alex'); LPIPS('vgg'); "
            "metric_registry.build('stlpips', 'alex'); print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torchvision', 'sympy') or m.startswith('torch._dynamo')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- input range of model(x, y)
def test_normalize_true_maps_zero_one_images_and_equals_the_minus_one_one_call():
    """``model(x01, y01, normalize=True)`` is ``model(2 x01 − 1, 2 y01 − 1)``, value and gradient (the
    reference package's ``normalize=True``); neither call warns."""
    import warnings

    model = LPIPS("alex", device="cpu")
    a, b = _pair(64, 80, seed=3)
    x01, y01 = to_input(a, convention="[0,1]"), to_input(b, convention="[0,1]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = model(x01, y01, normalize=True)
        want = model(2 * x01 - 1, 2 * y01 - 1)
    assert torch.equal(got, want) and float(got) > 0.01
    xa, xb = x01.clone().requires_grad_(), x01.clone().requires_grad_()
    model(xa, y01, normalize=True).sum().backward()
    model(2 * xb - 1, 2 * y01 - 1).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=1e-7)


def test_a_forgotten_normalisation_warns_once_and_eight_bit_values_are_refused_with_the_fix():
    import warnings

    model = LPIPS("alex", device="cpu")
    a, b = _pair(64, 64, seed=4)
    x01, y01 = to_input(a, convention="[0,1]"), to_input(b, convention="[0,1]")
    with pytest.warns(UserWarning, match=r"both inputs lie in \[0, 1\].*normalize=True"):
        first = model(x01, y01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(model(x01, y01), first)            # once per model
        model(x01, y01, normalize=False)                      # said explicitly: no warning
    assert float(first) < float(model(x01, y01, normalize=True))  # the forgotten normalisation reads low
    x255, y255 = to_input(a, convention="[0,255]"), to_input(b, convention="[0,255]")
    with pytest.raises(ValueError, match=r"LPIPS \(alex\) expects x in \[-1, 1\]; found values from 0 to 2\d\d"):
        model(x255, y255)
    with pytest.raises(ValueError, match=r"normalize=True expects \[0, 1\] images: divide 8-bit values by 255"):
        model(x255, y255, normalize=True)
    with pytest.raises(ValueError, match=r"found values from nan"):
        model(torch.full_like(x01, float("nan")), y01)
