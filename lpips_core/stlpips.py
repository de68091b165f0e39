"""Shift-tolerant LPIPS (Ghildyal and Liu, ECCV 2022) on the checkpoints of ``stlpips-pytorch``.

ST-LPIPS keeps LPIPS's recipe (scaling layer, taps after ReLUs, unit-normalised features, learned
non-negative channel weights on the squared differences, spatial mean, sum over layers) and
replaces the backbone by an anti-aliased one trained together with the lin weights on BAPPS:

- **BlurPool**: every stride-2 step (conv1's stride, each max pool) becomes a stride-1 operation
  followed by a depthwise ``[1, 2, 1] ⊗ [1, 2, 1] / 16`` blur applied with stride 2;
- **reflection padding** of 2 px on every side before each blur (the "pad more" variant);
- AlexNet's conv1 runs with **stride 1** (not 4), its blur sits *before* the first ReLU;
- VGG16's 2 × 2 max pools run with stride 1, each followed by the blur.

Layer by layer (``features`` indices as in the reference checkpoint, taps marked ``*``)::

    alex  0 conv 11×11/1 p2 · 1 blur · 2 relu* · 3 maxpool 3/1 · 4 blur · 5 conv 5×5 p2 · 6 relu*
          7 maxpool 3/1 · 8 blur · 9 conv 3×3 · 10 relu* · 11 conv · 12 relu* · 13 conv · 14 relu*
    vgg   conv-relu ×2 (tap 3) · [maxpool 2/1 · blur] · conv-relu ×2 (tap 9) · [pool · blur]
          conv-relu ×3 (tap 17) · [pool · blur] · ×3 (tap 25) · [pool · blur] · ×3 (tap 33)

Input convention: exactly LPIPS's, images in ``[-1, 1]`` (the reference package's
``normalize=False`` default), then the same scaling layer ``(x − shift) / scale``.

Weights: one file per net, ``stlpips_pytorch/weights/vST0.0/{net}_shift_tolerant.pth``, holding
backbone, blur filters, scaling layer and lin weights. The file is found through the installed
distribution's file list (``importlib.metadata``) without importing the package (whose code
imports IPython and torchsummary) and read with ``torch.load(weights_only=True)``.
Install it with ``pip install --no-deps stlpips-pytorch==0.0.2``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .backbones import CHANNELS, LAYER_NAMES, run_layers
from .model import LPIPSBase
from .devices import resolve_device
from .weights import WeightsUnavailable

__all__ = [
    "BlurDownsample",
    "MIN_SIDE",
    "ST_NETS",
    "ST_VERSION",
    "STLPIPS",
    "STBackbone",
    "checkpoint_path",
    "fix_message",
]

STNet = Literal["alex", "vgg"]
ST_NETS: tuple[str, ...] = ("alex", "vgg")
ST_VERSION = "ST0.0"
_DIST = "stlpips-pytorch"
_PIN = "stlpips-pytorch==0.0.2"
_TAPS: dict[str, tuple[int, ...]] = {"alex": (2, 6, 10, 12, 14), "vgg": (3, 9, 17, 25, 33)}
#: The smallest image side each backbone accepts: its reflection pads need every map to keep at
#: least 3 px (measured; a smaller side raises ``ValueError`` in :meth:`STLPIPS.features`).
MIN_SIDE: dict[str, int] = {"alex": 21, "vgg": 18}


class BlurDownsample(nn.Module):
    """Anti-aliased stride-2 subsampling: reflect-pad 2 px, depthwise binomial 3 × 3 blur, stride 2.

    ``(N, C, H, W)`` → ``(N, C, ⌊(H + 1) / 2⌋, ⌊(W + 1) / 2⌋)``. Needs ``H, W ≥ 3`` (reflection).
    """

    def __init__(self, channels: int):
        super().__init__()
        taps = torch.tensor([1.0, 2.0, 1.0])
        kernel = torch.outer(taps, taps) / 16.0
        self.channels = channels
        self.register_buffer("filt", kernel.expand(channels, 1, 3, 3).contiguous(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (2, 2, 2, 2), mode="reflect"), self.filt, stride=2, groups=self.channels)

    def extra_repr(self) -> str:
        return f"channels={self.channels}, filter=[1,2,1]²/16, pad=reflect 2, stride=2"


def _alex_layers() -> list[nn.Module]:
    return [
        nn.Conv2d(3, 64, 11, stride=1, padding=2), BlurDownsample(64), nn.ReLU(),
        nn.MaxPool2d(3, stride=1), BlurDownsample(64), nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(),
        nn.MaxPool2d(3, stride=1), BlurDownsample(192), nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(),
    ]


def _vgg_layers() -> list[nn.Module]:
    layers: list[nn.Module] = []
    c_in = 3
    for stage, (width, convs) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))):
        if stage:
            layers += [nn.MaxPool2d(2, stride=1), BlurDownsample(c_in)]
        for _ in range(convs):
            layers += [nn.Conv2d(c_in, width, 3, padding=1), nn.ReLU()]
            c_in = width
    return layers


class STBackbone(nn.Module):
    """The anti-aliased AlexNet or VGG16 of ST-LPIPS, returning the five tapped ReLU outputs.

    Args:
        net: ``"alex"`` or ``"vgg"``.
        state_dict: conv weights keyed by ``features`` index (``"0.weight"``, ``"5.bias"`` …, the
            reference checkpoint's ``net.sliceK.`` prefix removed). Blur filters found in it
            (``"1.filt"`` …) are checked against the binomial filter, not loaded.
    """

    def __init__(self, net: str, state_dict: dict[str, torch.Tensor]):
        super().__init__()
        if net not in ST_NETS:
            raise ValueError(f"net must be one of {ST_NETS}, got {net!r}")
        self.net = net
        self.first_stride = {"alex": 2, "vgg": 1}[net]  # conv1 stride 2 in the shift-tolerant AlexNet
        self.taps = _TAPS[net]
        self.features = nn.Sequential(*(_alex_layers() if net == "alex" else _vgg_layers()))
        own = self.features.state_dict()
        missing = [k for k in own if k not in state_dict]
        if missing:
            raise ValueError(f"ST-LPIPS {net} state dict lacks {missing[:4]}{'…' if len(missing) > 4 else ''}")
        self.features.load_state_dict({k: state_dict[k] for k in own}, strict=True)
        for idx, layer in enumerate(self.features):
            stored = state_dict.get(f"{idx}.filt")
            if isinstance(layer, BlurDownsample) and stored is not None:
                if stored.shape != layer.filt.shape or not torch.allclose(stored.float(), layer.filt, atol=1e-7):
                    raise ValueError(f"the checkpoint's blur filter {idx}.filt is not the binomial [1,2,1]²/16")
        self.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``(N, 3, H, W)`` scaled input → one ``(N, C_l, H_l, W_l)`` tensor per tap."""
        return run_layers(self, x, self.taps, last=self.taps[-1])


# ----------------------------------------------------------------------------- weights
def checkpoint_path(net: str) -> Path | None:
    """Where the installed ``stlpips-pytorch`` keeps ``net``'s checkpoint, or ``None``.

    Reads the distribution's file list; the package itself is never imported.
    """
    if net not in ST_NETS:
        raise ValueError(f"net must be one of {ST_NETS}, got {net!r}")
    try:
        files = importlib.metadata.files(_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    name = f"{net}_shift_tolerant.pth"
    for f in files:
        if f.name == name and f.parent.name == f"v{ST_VERSION}":
            path = Path(f.locate())
            return path if path.is_file() else None
    return None


def fix_message(net: str) -> str:
    """What to do when ``net``'s ST-LPIPS checkpoint is missing."""
    return (
        f"No ST-LPIPS {net} checkpoint: {_PIN} ships {net}_shift_tolerant.pth in "
        f"site-packages/stlpips_pytorch/weights/v{ST_VERSION}/. Install it with "
        f"'pip install --no-deps {_PIN}' (its code is never imported here, so its IPython and "
        f"torchsummary imports are not needed)."
    )


def _load_checkpoint(net: str, checkpoint: str | Path | None) -> tuple[dict[str, torch.Tensor], str]:
    if checkpoint is None:
        path = checkpoint_path(net)
        if path is None:
            raise WeightsUnavailable(net, fix_message(net))
        try:
            version = importlib.metadata.version(_DIST)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - found a file, so installed
            version = "?"
        source = f"stlpips-pytorch {version} ({path.name})"
    else:
        path = Path(checkpoint)
        if not path.is_file():
            raise WeightsUnavailable(net, f"ST-LPIPS checkpoint {path} does not exist. " + fix_message(net))
        source = f"file: {path}"
    from .weights import load_torch_file

    fix = (f"Reinstall it: pip install --force-reinstall --no-deps {_PIN}." if checkpoint is None
           else "Replace it with a good copy, or pass another checkpoint.")
    return load_torch_file(path, what=f"ST-LPIPS {net} checkpoint", fix=fix, net=net), source


def _split_checkpoint(net: str, sd: dict[str, torch.Tensor]) -> tuple[dict, list[torch.Tensor], dict]:
    """Reference checkpoint → (backbone dict by ``features`` index, lin weights, scaling layer)."""
    backbone = {}
    for key, value in sd.items():
        parts = key.split(".")
        if parts[0] == "net" and len(parts) == 4 and parts[1].startswith("slice"):
            backbone[f"{parts[2]}.{parts[3]}"] = value
    lins = []
    for i, channels in enumerate(CHANNELS[net][:5]):
        key = f"lin{i}.model.1.weight"
        if key not in sd:
            raise ValueError(f"ST-LPIPS {net} checkpoint lacks {key}")
        w = sd[key].reshape(-1).float().clone()
        if w.numel() != channels:
            raise ValueError(f"{key} has {w.numel()} channels, expected {channels}")
        lins.append(w)
    if "scaling_layer.shift" not in sd or "scaling_layer.scale" not in sd:
        raise ValueError(f"ST-LPIPS {net} checkpoint lacks the scaling layer (shift, scale)")
    scaling = {k: sd[f"scaling_layer.{k}"].float().reshape(1, 3, 1, 1) for k in ("shift", "scale")}
    return backbone, lins, scaling


# ----------------------------------------------------------------------------- the metric
class STLPIPS(LPIPSBase):
    """Shift-tolerant LPIPS (``stlpips-pytorch`` 0.0.2, ``variant="shift_tolerant"``); frozen, eval.

    LPIPS's recipe (:class:`~lpips_core.model.LPIPSBase`) on another network: everything after the
    features (:meth:`compare`, :meth:`compare_features`, :meth:`compare_batch`,
    :meth:`reference_features`, :meth:`channel_terms`, ``forward``) is LPIPS's own code, so results
    are :class:`~lpips_core.protocol.MetricResult` with per-layer terms and per-layer maps upsampled
    (bilinear) to the input size, and a page written for LPIPS takes this model unchanged.
    ``model(x, y)`` is differentiable (see :mod:`lpips_core.protocol`).

    Args:
        net: ``"alex"`` (default; the paper's main model) or ``"vgg"``.
        device: ``None`` = auto (CUDA, then MPS, then CPU), or a torch device.
        checkpoint: read this file instead of the installed package's (tests, experiments).

    Attributes:
        weights: provenance, e.g. ``"stlpips-pytorch 0.0.2: …/vST0.0/alex_shift_tolerant.pth"``.
        layer_names: ``("relu1", …, "relu5")`` or ``("relu1_2", …, "relu5_3")``.
        input_range: ``"[-1,1]"``, the convention inputs must follow (as LPIPS).
        version: ``"ST0.0"`` (features of LPIPS and ST-LPIPS never compare with each other).

    Raises:
        ValueError: unknown ``net`` or a checkpoint of the wrong shape.
        WeightsUnavailable: ``stlpips-pytorch`` is not installed; the message says how to fix it.

    Example:
        >>> model = STLPIPS("alex", device="cpu")           # doctest: +SKIP
        >>> x = torch.rand(1, 3, 64, 64) * 2 - 1             # images in [-1, 1]
        >>> model.compare(x, x.roll(1, -1)).total            # doctest: +SKIP
    """

    metric = "stlpips"
    input_range = "[-1,1]"

    def __init__(
        self,
        net: STNet = "alex",
        device: torch.device | str | None = None,
        *,
        checkpoint: str | Path | None = None,
    ):
        if net not in ST_NETS:
            raise ValueError(f"net must be one of {ST_NETS}, got {net!r}")
        device = resolve_device(device)
        sd, source = _load_checkpoint(net, checkpoint)
        try:
            backbone_sd, lins, scaling = _split_checkpoint(net, sd)
            backbone = STBackbone(net, backbone_sd)
        except (ValueError, RuntimeError) as exc:
            raise WeightsUnavailable(
                net, f"The ST-LPIPS {net} checkpoint ({source}) cannot be used: {exc}. " + fix_message(net)
            ) from exc
        super().__init__(
            net=net, version=ST_VERSION, backbone=backbone, layer_names=LAYER_NAMES[net],
            channels=[w.numel() for w in lins], lin=lins, weights=source, device=device, scaling=True,
            shift=scaling["shift"], scale=scaling["scale"], label=f"ST-LPIPS {net}",
        )

    def extra_repr(self) -> str:
        return f"net={self.net!r}, shift-tolerant {self.version}, device={self.device}, weights={self.weights!r}"

