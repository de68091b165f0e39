"""``model(x, y)`` as a loss: gradients with respect to both inputs equal the reference packages'.

Oracles (:mod:`lpips_core.testing`): ``lpips`` 0.1.4's ``LPIPS`` holding our backbone weights,
``stlpips-pytorch`` 0.0.2 on the shipped checkpoints and ``DISTS-pytorch`` 0.1 (its
``require_grad=True`` path) with our VGG16 — each differentiated with ``torch.autograd.grad`` on
the same inputs. ``gradcheck`` in float64 checks our analytic gradient against finite differences.

VGG16 backward passes are the expensive part: LPIPS-VGG (both lin settings) and ST-LPIPS-VGG are
marked ``slow`` (full tier); the fast tier checks the same code paths on AlexNet, and DISTS (VGG16
only) once.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lpips_core.conventions import to_input
from lpips_core.dists import DISTS
from lpips_core.model import LPIPS
from lpips_core.stlpips import STLPIPS
from lpips_core.testing import reference_dists, reference_lpips, reference_stlpips
from lpips_core.weights import load_backbone_weights

SIZES = [(64, 64), (97, 131)]


def _pair(golden, h: int, w: int, convention: str = "[-1,1]") -> tuple[torch.Tensor, torch.Tensor]:
    """Two pairs of real images at ``h × w``: (ex_ref, ex_ref) against (ex_p0, ex_p1)."""
    x = torch.cat([to_input(golden["ex_ref"], convention=convention, size=(h, w))] * 2)
    y = torch.cat([to_input(golden[k], convention=convention, size=(h, w)) for k in ("ex_p0", "ex_p1")])
    return x, y


def _grads(fn, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
    d = fn(x, y).flatten()
    gx, gy = torch.autograd.grad(d.sum(), (x, y))
    return d.detach(), gx, gy


def _assert_same(ours, theirs, ctx: str) -> None:
    (d, gx, gy), (rd, rgx, rgy) = ours, theirs
    np.testing.assert_allclose(d, rd, atol=1e-5, rtol=0, err_msg=ctx)
    for name, g, rg in (("x", gx, rgx), ("y", gy, rgy)):
        assert float(rg.abs().max()) > 1e-5, f"{ctx}: the oracle's gradient w.r.t. {name} is ~0"
        np.testing.assert_allclose(g, rg, atol=1e-6, rtol=0, err_msg=f"{ctx}: d/d{name}")


@pytest.fixture(scope="module", params=["alex", pytest.param("vgg", marks=pytest.mark.slow)])
def net_sd(request):
    return request.param, load_backbone_weights(request.param).state_dict


@pytest.mark.parametrize("lin", [True, False], ids=["lin", "baseline"])
def test_lpips_gradients_equal_the_reference(golden, net_sd, lin):
    net, sd = net_sd
    ours = LPIPS(net, "0.1", lin, device="cpu", backbone_state_dict=sd)
    ref = reference_lpips(net, "0.1", lin, sd)
    for h, w in SIZES:
        x, y = _pair(golden, h, w)
        _assert_same(_grads(ours, x, y), _grads(lambda a, b: ref(a, b), x, y), f"{net} lin={lin} {h}×{w}")
    assert all(p.grad is None and not p.requires_grad for p in ours.parameters())


@pytest.mark.parametrize("net", ["alex", pytest.param("vgg", marks=pytest.mark.slow)])
def test_stlpips_gradients_equal_the_reference(golden, net):
    ours, ref = STLPIPS(net, device="cpu"), reference_stlpips(net)
    x, y = _pair(golden, 64, 64)
    _assert_same(_grads(ours, x, y), _grads(lambda a, b: ref(a, b), x, y), f"ST-LPIPS {net}")


def test_dists_gradients_equal_the_reference(golden):
    sd = load_backbone_weights("vgg").state_dict
    ours, ref = DISTS(device="cpu", backbone_state_dict=sd), reference_dists(sd)
    x, y = _pair(golden, 64, 64, convention="[0,1]")
    _assert_same(_grads(ours, x, y), _grads(lambda a, b: ref(a, b, require_grad=True), x, y), "DISTS")


def test_gradient_flows_to_either_input_alone(golden):
    model = LPIPS("alex", device="cpu")
    x, y = _pair(golden, 64, 64)
    y = y.clone().requires_grad_()
    d = model(x, y)
    assert d.requires_grad and d.shape == (2,)
    (g,) = torch.autograd.grad(d.sum(), y)
    assert float(g.abs().max()) > 0
    x1 = x[:1].clone().requires_grad_()  # a batch of 1 broadcasts against 2
    (g1,) = torch.autograd.grad(model(x1, y.detach()).sum(), x1)
    _, gx, _ = _grads(model, x, y.detach())
    np.testing.assert_allclose(g1[0], gx.sum(0), atol=1e-6)


def test_gradcheck_float64():
    """Finite differences agree with the analytic gradient on a tiny input (AlexNet's smallest, 32 px)."""
    model = LPIPS("alex", device="cpu").double()
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(1, 3, 32, 32, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()
    y = (torch.rand(1, 3, 32, 32, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_()
    assert model(x, y).dtype == torch.float64
    assert torch.autograd.gradcheck(model, (x, y), eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=True)
