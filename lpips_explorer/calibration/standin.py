"""The stand-in: a fixed, randomly initialised five-layer conv net, and Eq. 1 on its features."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lpips_core.model import layer_term_maps, unit_normalize
from lpips_explorer.calibration.common import _int

__all__ = ["STANDIN_CHANNELS", "StandInNet", "standin_channel_terms", "standin_distance"]

#: Channels of the stand-in: the input, then its five tapped layers.
STANDIN_CHANNELS: tuple[int, ...] = (3, 32, 64, 96, 96, 64)


class StandInNet(nn.Module):
    """A fixed, randomly initialised five-layer conv net, tapped after each ReLU. Not LPIPS.

    Architecture (channels :data:`STANDIN_CHANNELS`): conv 5×5 stride 2 padding 2 → ReLU (tap 1)
    → max-pool 2 → conv 3×3 padding 1 → ReLU (tap 2) → max-pool 2 → three more conv 3×3 padding 1
    → ReLU (taps 3–5). The weights are PyTorch's default ``Conv2d`` initialisation drawn right
    after ``torch.manual_seed(seed)``; the global RNG state is restored afterwards. Frozen, eval.

    Args:
        seed: ``>= 0``; equal seeds give identical networks.

    Example:
        >>> net = StandInNet(0)
        >>> [tuple(t.shape) for t in net(torch.zeros(1, 3, 64, 64))]
        [(1, 32, 32, 32), (1, 64, 16, 16), (1, 96, 8, 8), (1, 96, 8, 8), (1, 64, 8, 8)]
    """

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed = _int(seed, "seed", lo=0)
        ch = STANDIN_CHANNELS
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            convs = [nn.Conv2d(ch[0], ch[1], 5, stride=2, padding=2)]
            convs += [nn.Conv2d(ch[i], ch[i + 1], 3, padding=1) for i in range(1, 5)]
        self.convs = nn.ModuleList(convs)
        self.requires_grad_(False)
        self.eval()

    @property
    def channels(self) -> tuple[int, ...]:
        """Channels of the five taps."""
        return STANDIN_CHANNELS[1:]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``x``: ``(N, 3, H, W)`` float in ``[-1, 1]`` → the five ReLU taps ``(N, C_l, H_l, W_l)``."""
        taps = []
        for i, conv in enumerate(self.convs):
            x = F.relu(conv(x))
            taps.append(x)
            if i < 2:
                x = F.max_pool2d(x, 2)
        return tuple(taps)

    @torch.no_grad()
    def features(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The taps unit-normalised over channels (:func:`lpips_core.model.unit_normalize`)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != 3:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor (N, 3, H, W) in [-1, 1]; got {got}")
        return tuple(unit_normalize(t) for t in self(x.float()))


def standin_distance(net: StandInNet, x: torch.Tensor, y: torch.Tensor, *,
                     weights: Sequence[torch.Tensor] | None = None, spatial: bool = False) -> torch.Tensor:
    """Eq. 1 on the stand-in's features, with the engine's per-layer term maps.

    Args:
        net: the stand-in.
        x, y: ``(N, 3, H, W)`` float32 in ``[-1, 1]`` (whatever the caller chose to feed).
        weights: per layer ``(C_l,)`` non-negative weights on the squared channel differences,
            or ``None`` (all 1: the cosine distance).
        spatial: ``False``: ``(N,)`` distances (spatial mean per layer, summed over layers);
            ``True``: ``(N, H, W)`` maps (each layer's map bilinearly upsampled to the input
            size, summed). The spatial mean of the map is close to, not exactly, the scalar.
    """
    with torch.no_grad():
        maps = layer_term_maps(net.features(x), net.features(y), weights)
        if spatial:
            size = tuple(x.shape[-2:])
            up = [F.interpolate(m, size=size, mode="bilinear", align_corners=False) for m in maps]
            return sum(up)[:, 0]
        return sum(m.mean((2, 3)) for m in maps)[:, 0]


def standin_channel_terms(net: StandInNet, ref: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``(N, ΣC_l)``: per channel, the spatial mean of the squared unit-feature difference.

    Layers are concatenated in order (32 + 64 + 96 + 96 + 64 = 352 columns). For weights ``w``
    (concatenated the same way) ``terms @ w`` is Eq. 1's distance: the weighted channel sum
    and the spatial mean commute. ``ref`` and ``other``: ``(N, 3, H, W)`` in ``[-1, 1]``.
    """
    return _channel_terms_from(net.features(ref), net.features(other))


def _channel_terms_from(fr: Sequence[torch.Tensor], fo: Sequence[torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([(a - b).pow(2).mean((2, 3)) for a, b in zip(fr, fo)], 1)
