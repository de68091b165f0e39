"""torchvision backbones tapped after the same ReLUs as the reference ``lpips`` package.

==========  ==========================================  ==================================
net         taps (torchvision ``features`` index)        layer names
==========  ==========================================  ==================================
alex        1, 4, 7, 9, 11                               relu1 … relu5
vgg         3, 8, 15, 22, 29                             relu1_2, relu2_2, relu3_3, relu4_3,
                                                         relu5_3
squeeze     1, 4, 7, 9, 10, 11, 12 (SqueezeNet 1.1)      relu1 … relu7
==========  ==========================================  ==================================

Only ``features`` up to the last tap is kept (no classifier, no final pooling).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["Backbone", "CHANNELS", "FIRST_STRIDE", "LAYER_NAMES", "TAPS", "layers_for"]

TAPS: dict[str, tuple[int, ...]] = {
    "alex": (1, 4, 7, 9, 11),
    "vgg": (3, 8, 15, 22, 29),
    "squeeze": (1, 4, 7, 9, 10, 11, 12),
}
LAYER_NAMES: dict[str, tuple[str, ...]] = {
    "alex": ("relu1", "relu2", "relu3", "relu4", "relu5"),
    "vgg": ("relu1_2", "relu2_2", "relu3_3", "relu4_3", "relu5_3"),
    "squeeze": ("relu1", "relu2", "relu3", "relu4", "relu5", "relu6", "relu7"),
}
#: stride of the first tap relative to the input (its activations dominate a batch's memory)
FIRST_STRIDE: dict[str, int] = {"alex": 4, "vgg": 1, "squeeze": 2}
CHANNELS: dict[str, tuple[int, ...]] = {
    "alex": (64, 192, 384, 256, 256),
    "vgg": (64, 128, 256, 512, 512),
    "squeeze": (64, 128, 256, 384, 384, 512, 512),
}


#: torchvision's ``features`` layers up to the last tap, for the two plain stacks: ``(out
#: channels, kernel, stride, padding)`` per convolution (each followed by an in-place ReLU) and
#: ``"M"`` for a 3×3/2 (AlexNet) or 2×2/2 (VGG16) max-pool. ``tests/test_model.py`` checks that
#: the modules built from them print exactly as torchvision's ``alexnet().features`` and
#: ``vgg16().features`` sliced at the last tap.
_PLAIN: dict[str, tuple] = {
    "alex": ((64, 11, 4, 2), "M", (192, 5, 1, 2), "M", (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1)),
    "vgg": ((64, 3, 1, 1), (64, 3, 1, 1), "M", (128, 3, 1, 1), (128, 3, 1, 1), "M",
            *((256, 3, 1, 1),) * 3, "M", *((512, 3, 1, 1),) * 3, "M", *((512, 3, 1, 1),) * 3),
}


def _features_architecture(net: str) -> nn.Sequential:
    """The ``features`` stack up to the last tap, on the meta device (no time spent initialising
    weights that are replaced anyway).

    AlexNet and VGG16 are built from :data:`_PLAIN`, without importing torchvision: that import
    pulls in ``torch._dynamo`` (1.9 s on an idle core, 3.6 s on the cold path of the app's first
    page). SqueezeNet 1.1 (Fire modules) comes from torchvision itself.
    """
    with torch.device("meta"):
        if net in _PLAIN:
            pool = (3, 2) if net == "alex" else (2, 2)
            layers: list[nn.Module] = []
            channels = 3
            for spec in _PLAIN[net]:
                if spec == "M":
                    layers.append(nn.MaxPool2d(kernel_size=pool[0], stride=pool[1]))
                    continue
                out, kernel, stride, padding = spec
                layers += [nn.Conv2d(channels, out, kernel_size=kernel, stride=stride, padding=padding),
                           nn.ReLU(inplace=True)]
                channels = out
            return nn.Sequential(*layers)[: TAPS[net][-1] + 1]
        import torchvision.models as tvm

        return tvm.squeezenet1_1(weights=None).features[: TAPS[net][-1] + 1]


def layers_for(owner: nn.Module, x: torch.Tensor) -> nn.Sequential:
    """The layers ``owner`` (a backbone with a ``features`` stack) runs ``x`` through.

    ``owner.features`` itself, unless a gradient will flow (autograd enabled and ``x`` requires
    grad) while its weights are channels-last (a CPU model, see
    :attr:`lpips_core.protocol.LearnedMetric.channels_last_on_cpu`): then a contiguous copy of
    the stack, made on first use (and again after a dtype or device change). Channels-last
    convolutions give the same distances to ~1e-8 but moved VGG16's input gradients up to 1.6e-5
    from the reference package's; the copy keeps them within the 1e-6 parity bound. The copy is
    not a registered submodule (not in ``state_dict``, not moved by ``.to``).
    """
    feats = owner.features
    if not (torch.is_grad_enabled() and x.requires_grad):
        return feats
    weight = next((m.weight for m in feats.modules() if isinstance(m, nn.Conv2d)), None)
    if weight is None or weight.is_contiguous():
        return feats
    twin = owner.__dict__.get("_contiguous_features")
    first = next(twin.parameters(), None) if twin is not None else None
    if first is None or first.dtype != weight.dtype or first.device != weight.device:
        twin = copy.deepcopy(feats).to(memory_format=torch.contiguous_format)
        owner.__dict__["_contiguous_features"] = twin
    return twin


class Backbone(nn.Module):
    """A frozen torchvision ``features`` stack returning the tapped activations.

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.
        state_dict: the ``features`` weights in torchvision layout (keys ``"0.weight"`` …);
            entries past the last tap are ignored.
    """

    def __init__(self, net: str, state_dict: dict[str, torch.Tensor]):
        super().__init__()
        if net not in TAPS:
            raise ValueError(f"net must be one of {tuple(TAPS)}, got {net!r}")
        self.net = net
        self.taps = TAPS[net]
        self.layer_names = LAYER_NAMES[net]
        self.first_stride = FIRST_STRIDE[net]
        self.features = _features_architecture(net)
        own = self.features.state_dict()
        missing = [k for k in own if k not in state_dict]
        if missing:
            raise ValueError(f"{net} backbone state dict lacks {missing[:4]}{'…' if len(missing) > 4 else ''}")
        # The meta parameters are replaced by float32 CPU copies of the weights (assign; never the
        # caller's tensors): ``to_empty`` would allocate them first, and its first call imports
        # sympy through torch's meta-tensor references (0.57 s idle, 1.6 s on the app's cold path).
        # (load_state_dict still checks every shape against the architecture, assign or not.)
        weights = {k: state_dict[k].detach().to("cpu", torch.float32, copy=True) for k in own}
        self.features.load_state_dict(weights, strict=True, assign=True)
        self.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``x``: ``(N, 3, H, W)`` network input → one ``(N, C_l, H_l, W_l)`` tensor per tap."""
        out = []
        taps = set(self.taps)
        for i, layer in enumerate(layers_for(self, x)):
            x = layer(x)
            if i in taps:
                out.append(x)
        return out
