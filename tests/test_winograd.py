"""NNPACK's Winograd convolution with each layer's kernel transformed once (``lpips_core.winograd``).

The kept-kernel call must give exactly the bits of torch's own NNPACK call (the same NNPACK
function, the kernel transformed by the same code, only kept), with the ReLU fused or not; a
kernel is made again when its weight changes; a refused call falls back; and
``backbones.share_with_lanes`` makes (and later drops) only what a lane would make on first use.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lpips_core import LPIPS, backbones, winograd

pytestmark = pytest.mark.skipif(not winograd.available(),
                                reason="this PyTorch build does not export NNPACK's convolution")


def _layer(cin: int, cout: int, seed: int = 0) -> nn.Conv2d:
    torch.manual_seed(seed)
    layer = nn.Conv2d(cin, cout, 3, padding=1)
    layer.requires_grad_(False)
    return layer


@pytest.mark.parametrize("cin, cout, h, w", [(64, 64, 64, 64), (128, 256, 32, 32), (512, 512, 16, 16),
                                             (192, 384, 15, 15), (16, 24, 37, 61)])
def test_kept_kernel_gives_the_bits_of_torchs_nnpack_call(one_thread, cin, cout, h, w):
    """Same NNPACK function, same kernel transform: equal bits, with and without the fused ReLU."""
    layer = _layer(cin, cout)
    x = torch.randn(1, cin, h, w, generator=torch.Generator().manual_seed(1))
    want = torch._nnpack_spatial_convolution(x, layer.weight, layer.bias, layer.padding)
    assert torch.equal(winograd.conv3x3(layer, x), want)
    assert torch.equal(winograd.conv3x3(layer, x, relu=True), torch.relu(want))


def test_a_batch_is_its_images_one_at_a_time(one_thread):
    layer = _layer(32, 48)
    x = torch.randn(3, 32, 20, 24, generator=torch.Generator().manual_seed(2))
    got = winograd.conv3x3(layer, x)
    for i in range(3):
        assert torch.equal(got[i:i + 1], winograd.conv3x3(layer, x[i:i + 1]))
    torch.testing.assert_close(got, nn.functional.conv2d(x, layer.weight, layer.bias, padding=1), atol=1e-4, rtol=1e-4)


def test_a_changed_weight_gets_a_new_kernel(one_thread):
    layer = _layer(32, 32)
    x = torch.randn(1, 32, 16, 16, generator=torch.Generator().manual_seed(3))
    first = winograd.conv3x3(layer, x)
    kernel = winograd.transformed_kernel(layer)
    assert winograd.transformed_kernel(layer) is kernel and winograd.has_kernel(layer)
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place: a new version
    assert not winograd.has_kernel(layer)
    doubled = winograd.conv3x3(layer, x)
    assert torch.equal(doubled, torch._nnpack_spatial_convolution(x, layer.weight, layer.bias, layer.padding))
    assert not torch.equal(doubled, first)
    layer.weight = nn.Parameter(layer.weight.detach().clone(), requires_grad=False)  # new storage
    assert not winograd.has_kernel(layer)
    winograd.forget(layer)
    assert not winograd.has_kernel(layer)


@pytest.mark.parametrize("make, x", [
    (lambda: nn.Conv2d(32, 32, 3, padding=1), torch.zeros(1, 32, 11, 40)),          # a side under MIN_SIDE
    (lambda: nn.Conv2d(32, 32, 3, stride=2, padding=1), torch.zeros(1, 32, 32, 32)),
    (lambda: nn.Conv2d(32, 32, 3, padding=1, groups=2), torch.zeros(1, 32, 32, 32)),
    (lambda: nn.Conv2d(32, 32, 5, padding=2), torch.zeros(1, 32, 32, 32)),
    (lambda: nn.Conv2d(3, 64, 3, padding=1), torch.zeros(1, 3, 64, 64)),            # VGG16's first layer
    (lambda: nn.Conv2d(32, 32, 3, padding=1, bias=False), torch.zeros(1, 32, 32, 32)),
    (lambda: nn.Conv2d(32, 32, 3, padding=1).double(), torch.zeros(1, 32, 32, 32, dtype=torch.float64)),
])
def test_only_plain_3x3_layers_over_maps_of_min_side(make, x):
    assert not winograd.eligible(make(), x)
    assert winograd.eligible(nn.Conv2d(32, 32, 3, padding=1), torch.zeros(1, 32, winograd.MIN_SIDE, 40))


def test_a_refused_call_falls_back_for_the_rest_of_the_process(one_thread, monkeypatch):
    """NNPACK's status is checked: a refusal raises, the pass runs on torch's path with the same
    numbers, and the kept-kernel call is not tried again."""
    from lpips_core.conventions import to_input

    model = LPIPS("vgg", device="cpu")
    x = to_input(torch.rand(64, 64, 3).numpy())
    y = to_input(torch.rand(64, 64, 3).numpy())
    want = model(x, y)
    tries = []

    def refusing(*args):
        tries.append(1)
        return 29  # nnp_status_unsupported_algorithm

    monkeypatch.setitem(winograd._STATE, "fn", refusing)
    monkeypatch.setitem(winograd._STATE, "failed", False)
    for layer in backbones.contiguous_stack(model.backbone):
        if isinstance(layer, nn.Conv2d):
            winograd.forget(layer)
    torch.testing.assert_close(model(x, y), want, atol=1e-6, rtol=0)
    assert tries == [1] and not winograd.available()
    model(x, y)
    assert tries == [1]


def test_share_with_lanes_makes_and_drops_only_its_own(one_thread):
    model = LPIPS("vgg", device="cpu")
    stack_before = "_contiguous_features" in model.backbone.__dict__
    drop = backbones.share_with_lanes(model)
    stack = backbones.contiguous_stack(model.backbone)
    convs = [m for m in stack if winograd.layer_eligible(m)]
    assert len(convs) == 12 and all(winograd.has_kernel(m) for m in convs)  # every 3×3 layer but the first
    again = backbones.share_with_lanes(model)  # nothing left to make: its drop leaves them
    again()
    assert all(winograd.has_kernel(m) for m in convs)
    drop()
    assert not any(winograd.has_kernel(m) for m in convs)
    assert ("_contiguous_features" in model.backbone.__dict__) == stack_before
