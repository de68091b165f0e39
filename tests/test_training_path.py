"""``model(x, y)`` inside a training step: a fixed target, ``reduction=``, and ``torch.compile``.

- **A fixed target.** When only ``x`` requires grad (a loss against a fixed ``y``, the usual
  case), ``y`` goes through the network on its own without a graph; the value and the gradient
  still equal the reference package's (oracles of :mod:`lpips_core.testing`: ``lpips`` 0.1.4
  holding our backbone weights, ``stlpips-pytorch`` 0.0.2, ``DISTS-pytorch`` 0.1), and so do
  those of the one-batch path taken when both inputs require grad. SqueezeNet has no offline
  weights: as in ``test_weights.py``, it runs on generated (seeded, random) weights that ours
  and the reference hold alike.
- **Reductions.** ``reduction="none" | "mean" | "sum"``: ``(N,)``, then 0-d tensors.
- **torch.compile.** The forward and a loss built on it trace as one graph (no graph break, by
  ``torch._dynamo.explain``, which needs no C++ compiler), forward and forward + backward; the
  compiled values and gradients equal eager ones within 1e-6 with the ``aot_eager`` backend
  (eager kernels: this tests the traced program), and with ``inductor`` (C++ code) in the full
  tier where a C++ compiler exists. The value checks skipped while tracing are tested too.

Tiers: AlexNet in the fast tier; VGG16, ST-LPIPS and DISTS under compile, the VGG16 and
SqueezeNet gradients and the inductor run in the full one.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
import torch

from lpips_core.conventions import to_input
from lpips_core.dists import DISTS
from lpips_core.model import LPIPS
from lpips_core.protocol import REDUCTIONS
from lpips_core.stlpips import STLPIPS
from lpips_core.testing import reference_dists, reference_lpips, reference_stlpips
from lpips_core.weights import load_backbone_weights

slow = pytest.mark.slow


def _pair(golden, h: int = 64, w: int = 64, convention: str = "[-1,1]") -> tuple[torch.Tensor, torch.Tensor]:
    """Two pairs of real images: (ex_ref, ex_ref) against (ex_p0, ex_p1)."""
    x = torch.cat([to_input(golden["ex_ref"], convention=convention, size=(h, w))] * 2)
    y = torch.cat([to_input(golden[k], convention=convention, size=(h, w)) for k in ("ex_p0", "ex_p1")])
    return x, y


def _step(fn, x: torch.Tensor, y: torch.Tensor, both: bool):
    """``fn(x, y).sum()`` differentiated w.r.t. ``x`` (and ``y`` when ``both``): (values, grads)."""
    x = x.clone().requires_grad_()
    y = y.clone().requires_grad_() if both else y.clone()
    d = fn(x, y).flatten()
    grads = torch.autograd.grad(d.sum(), (x, y) if both else (x,))
    return d.detach(), grads


def _assert_same(ours, theirs, ctx: str) -> None:
    (d, gs), (rd, rgs) = ours, theirs
    np.testing.assert_allclose(d, rd, atol=1e-5, rtol=0, err_msg=ctx)
    for name, g, rg in zip("xy", gs, rgs):
        assert float(rg.abs().max()) > 1e-5, f"{ctx}: the oracle's gradient w.r.t. {name} is ~0"
        np.testing.assert_allclose(g, rg, atol=1e-6, rtol=0, err_msg=f"{ctx}: d/d{name}")


def _weights(net: str) -> dict[str, torch.Tensor]:
    if net != "squeeze":
        return load_backbone_weights(net).state_dict
    import torchvision

    torch.manual_seed(1)  # no offline SqueezeNet weights: generated ones, held by both (test_weights.py)
    return torchvision.models.squeezenet1_1(weights=None).features.state_dict()


# ----------------------------------------------------------------------------- gradients
@pytest.fixture(scope="module", params=["alex", pytest.param("vgg", marks=slow), pytest.param("squeeze", marks=slow)])
def net_sd(request):
    return request.param, _weights(request.param)


@pytest.mark.parametrize("both", [False, True], ids=["x-only", "both"])
@pytest.mark.parametrize("lin", [True, False], ids=["lin", "baseline"])
def test_lpips_gradients_equal_the_reference(golden, net_sd, lin, both):
    """Only ``x`` requiring grad (the target's own pass, without a graph) and both requiring grad
    (one batch): the values within 1e-5 and gradients within 1e-6 of the reference's."""
    net, sd = net_sd
    ours = LPIPS(net, "0.1", lin, device="cpu", backbone_state_dict=sd)
    ref = reference_lpips(net, "0.1", lin, sd)
    for h, w in ((64, 64), (97, 131)):
        x, y = _pair(golden, h, w)
        _assert_same(_step(ours, x, y, both), _step(lambda a, b: ref(a, b), x, y, both), f"{net} lin={lin} {h}×{w}")


@pytest.mark.parametrize("net", ["alex", pytest.param("vgg", marks=slow)])
def test_stlpips_fixed_target_gradients_equal_the_reference(golden, net):
    ours, ref = STLPIPS(net, device="cpu"), reference_stlpips(net)
    x, y = _pair(golden)
    _assert_same(_step(ours, x, y, False), _step(lambda a, b: ref(a, b), x, y, False), f"ST-LPIPS {net}")


@pytest.mark.parametrize("side", [64, pytest.param(192, marks=slow)])
def test_dists_fixed_target_gradients_equal_the_reference(golden, side):
    """At 192 px a target through NNPACK moved the gradient by 1.8e-6 (one thread): DISTS's stays on oneDNN."""
    sd = load_backbone_weights("vgg").state_dict
    ours, ref = DISTS(device="cpu", backbone_state_dict=sd), reference_dists(sd)
    x, y = _pair(golden, side, side, convention="[0,1]")
    _assert_same(_step(ours, x, y, False), _step(lambda a, b: ref(a, b, require_grad=True), x, y, False), "DISTS")


def test_a_fixed_target_goes_through_the_network_alone_and_without_a_graph(golden, monkeypatch):
    """One pass per side: ``x`` (requiring grad) with a graph, the target without one; a batch of 1
    against 2 runs once (not expanded), and its gradient is the sum of the expanded one's."""
    model = LPIPS("alex", device="cpu")
    x, y = _pair(golden)
    runs = []
    real = model._run

    def run(t):
        out = real(t)
        runs.append((t.shape[0], t.requires_grad, all(s.requires_grad for s in out)))
        return out

    monkeypatch.setattr(model, "_run", run)
    x1 = x[:1].clone().requires_grad_()
    (g1,) = torch.autograd.grad(model(x1, y).sum(), x1)
    assert runs == [(1, True, True), (2, False, False)]
    runs.clear()
    _, (gx,) = _step(model, x, y, False)
    assert runs == [(2, True, True), (2, False, False)]
    np.testing.assert_allclose(g1[0], gx.sum(0), atol=1e-6, rtol=0)
    runs.clear()
    _step(model, x, y, True)
    assert runs == [(4, True, True)]  # both require grad: one batch


@pytest.mark.parametrize("lin", [True, False], ids=["lin", "baseline"])
def test_the_fixed_target_head_passes_gradcheck_and_gradgradcheck(lin):
    """The fused head of a fixed target (``model._LiveLayerTerm``, a closed-form backward) against
    finite differences in float64: ``x`` alone, ``y`` alone, a batch of 1 against 2; and its
    gradient of a gradient (``create_graph=True``, through the plain formula)."""
    model = LPIPS("alex", "0.1", lin, device="cpu").double()
    g = torch.Generator().manual_seed(3)
    x, y = (torch.rand(2, 3, 32, 32, generator=g, dtype=torch.float64) * 2 - 1 for _ in range(2))
    kw = dict(eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=True)
    assert torch.autograd.gradcheck(lambda a: model(a, y), (x.clone().requires_grad_(),), **kw)
    assert torch.autograd.gradcheck(lambda b: model(x, b), (y.clone().requires_grad_(),), **kw)
    assert torch.autograd.gradcheck(lambda a: model(a, y), (x[:1].clone().requires_grad_(),), **kw)
    assert torch.autograd.gradgradcheck(lambda a: model(a, y), (x.clone().requires_grad_(),), **kw)


def test_the_fixed_target_head_equals_the_plain_formula_and_is_finite_at_a_zero_feature_vector():
    """One layer: the fused head's value and gradient equal autograd's over the plain formula
    (``unit_normalize``, the weighted squared difference, the spatial mean) within float32 rounding,
    except at a position whose channels are all 0. There the plain formula's gradient is NaN (the
    square root's derivative at 0, as in the reference package); the fused one is the limit,
    ``∂L/∂f̂ / ε``: ``2 v_c (0 − t_c) / (H W ε)``."""
    from lpips_core.model import EPS, _LiveLayerTerm, unit_normalize

    g = torch.Generator().manual_seed(4)
    f = torch.rand(2, 8, 5, 5, generator=g)
    f[:, :, 2, 3] = 0
    f.requires_grad_()
    t = unit_normalize(torch.rand(2, 8, 5, 5, generator=g))
    w = torch.rand(8, generator=g)
    value = _LiveLayerTerm.apply(f, t, w)[0]
    (gf,) = torch.autograd.grad(value.sum(), f)
    plain = ((unit_normalize(f) - t).pow(2).mean((2, 3)) @ w)
    (gp,) = torch.autograd.grad(plain.sum(), f)
    np.testing.assert_allclose(value.detach(), plain.detach(), rtol=1e-6, atol=0)
    zero = torch.zeros_like(gf, dtype=torch.bool)
    zero[:, :, 2, 3] = True
    assert bool(gp[zero].isnan().all()) and bool(gf.isfinite().all())
    np.testing.assert_allclose(gf[~zero], gp[~zero], rtol=0, atol=1e-6)
    limit = 2 * w.view(1, -1) * (0 - t[:, :, 2, 3]) / (25 * EPS)
    np.testing.assert_allclose(gf[:, :, 2, 3], limit.float(), rtol=1e-5)


# ----------------------------------------------------------------------------- reduction
@pytest.mark.parametrize("build", [lambda: LPIPS("alex", device="cpu"), lambda: STLPIPS("alex", device="cpu"),
                                   lambda: DISTS(device="cpu")], ids=["lpips", "stlpips", "dists"])
def test_reduction_shapes_and_values(golden, build):
    """``"none"`` (the default) is ``(N,)``; ``"mean"`` and ``"sum"`` are 0-d tensors equal to the
    mean and sum of those, on the fast path and the differentiable one, a batch of 1 against 2
    included; their gradients are those of ``.mean()`` and ``.sum()``."""
    model = build()
    x, y = _pair(golden, convention=model.input_range)
    d = model(x, y)
    assert d.shape == (2,) and torch.equal(model(x, y, reduction="none"), d)
    for reduction, fn in (("mean", torch.mean), ("sum", torch.sum)):
        r = model(x, y, reduction=reduction)
        assert r.shape == () and float(r) == pytest.approx(float(fn(d)), abs=1e-6)
        assert model(x[:1], y, reduction=reduction).shape == ()
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        (ga,) = torch.autograd.grad(model(xa, y, reduction=reduction), xa)
        (gb,) = torch.autograd.grad(fn(model(xb, y)), xb)
        torch.testing.assert_close(ga, gb, rtol=0, atol=0)
    assert model(x[:1], y).shape == (2,)
    one = model(x[:1].clone().requires_grad_(), y)  # a batch of 1 broadcasts on the graph path too
    assert one.shape == (2,) and one.requires_grad
    np.testing.assert_allclose(one.detach(), model(x[:1], y), atol=1e-5, rtol=0)
    assert REDUCTIONS == ("none", "mean", "sum")


@pytest.mark.parametrize("bad", ["avg", "Mean", ""])
def test_an_unknown_reduction_is_refused(golden, bad):
    model = LPIPS("alex", device="cpu")
    x, y = _pair(golden)
    with pytest.raises(ValueError, match=r"reduction must be one of \('none', 'mean', 'sum'\), got '"):
        model(x, y, reduction=bad)


@pytest.mark.parametrize("bad", [None, 1, ("mean",)])
def test_a_reduction_that_is_not_a_string_is_refused(golden, bad):
    model = LPIPS("alex", device="cpu")
    x, y = _pair(golden)
    with pytest.raises(TypeError, match=r"reduction must be a str, one of .*, got"):
        model(x, y, reduction=bad)


# ----------------------------------------------------------------------------- torch.compile
@pytest.fixture
def dynamo():
    """``torch._dynamo``, reset before and after (compiled code caches are per function)."""
    import torch._dynamo as dynamo

    dynamo.reset()
    yield dynamo
    dynamo.reset()


_BUILD = {
    "lpips-alex": lambda: LPIPS("alex", device="cpu"),
    "lpips-vgg": lambda: LPIPS("vgg", device="cpu"),
    "stlpips-alex": lambda: STLPIPS("alex", device="cpu"),
    "dists": lambda: DISTS(device="cpu"),
}
COMPILED = ["lpips-alex", pytest.param("lpips-vgg", marks=slow), pytest.param("stlpips-alex", marks=slow),
            pytest.param("dists", marks=slow)]


def _compile_inputs(model) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    lo = 0.0 if model.input_range == "[0,1]" else -1.0
    x, y = (torch.rand(2, 3, 64, 64, generator=g) * (1 - lo) + lo for _ in range(2))
    return x, y


@pytest.mark.parametrize("name", COMPILED)
def test_compiles_to_one_graph_forward_and_backward(dynamo, name):
    """``torch._dynamo.explain``: the module's forward, and a loss calling it on an input that
    requires grad (alone, and with the target requiring grad too), give one graph and no break."""
    model = _BUILD[name]()
    x, y = _compile_inputs(model)

    def loss(a, b):
        return model(a, b, reduction="mean")

    for fn, args in ((model, (x, y)), (loss, (x.clone().requires_grad_(), y)),
                     (loss, (x.clone().requires_grad_(), y.clone().requires_grad_()))):
        dynamo.reset()
        e = dynamo.explain(fn)(*args)
        assert (e.graph_count, e.graph_break_count) == (1, 0), [str(b.reason)[:300] for b in e.break_reasons]


def _compiled_equals_eager(model, backend: str) -> None:
    """Compiled (``fullgraph``: a break would raise) forward, loss and gradient within 1e-6 of eager."""
    x, y = _compile_inputs(model)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    np.testing.assert_allclose(compiled(x, y).detach(), model(x, y), atol=1e-6, rtol=0)

    def loss(a, b):
        return model(a, b, reduction="sum")

    closs = torch.compile(loss, backend=backend, fullgraph=True)
    for both in (False, True):
        (dc, gc), (de, ge) = _step(closs, x, y, both), _step(loss, x, y, both)
        np.testing.assert_allclose(dc, de, atol=1e-6, rtol=0)
        for g, want in zip(gc, ge):
            assert float(want.abs().max()) > 1e-5
            np.testing.assert_allclose(g, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_values_and_gradients_equal_eager(dynamo, name):
    _compiled_equals_eager(_BUILD[name](), "aot_eager")


@slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None and shutil.which("cc") is None,
                    reason="inductor compiles C++: no C++ compiler here (the aot_eager test covers the traced graph)")
def test_inductor_compiled_values_and_gradients_equal_eager(dynamo):
    _compiled_equals_eager(LPIPS("alex", device="cpu"), "inductor")


def test_under_compile_the_value_checks_are_skipped_and_the_others_kept(dynamo):
    """Traced, the range check and the forgotten-normalisation warning (both read values) are
    skipped; the type, shape and ``reduction`` checks still raise."""
    model = LPIPS("alex", device="cpu")
    x, y = _compile_inputs(model)
    compiled = torch.compile(model, backend="aot_eager")
    with pytest.raises(ValueError, match="expects x in"):
        model(x * 3, y)
    np.testing.assert_allclose(compiled(x * 3, y), model.compare(x * 3, y).total, atol=1e-6, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled((x + 1) / 2, (y + 1) / 2)  # [0, 1] images, no normalize: eager would warn
    with pytest.raises(ValueError, match="same size"):
        compiled(x, y[..., :32])
    with pytest.raises(ValueError, match="reduction must be one of"):
        compiled(x, y, reduction="avg")
