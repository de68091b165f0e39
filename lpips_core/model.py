"""The LPIPS model: features → unit-normalise → (lin) channel weights → maps → per-layer → total.

Eq. 1 of Zhang et al. (2018), as the reference ``lpips`` 0.1.4 package computes it::

    d(x, y) = Σ_l  1/(H_l W_l) Σ_{h,w}  Σ_c  v_{l,c} (ŷ_{l,hwc}(x) − ŷ_{l,hwc}(y))²

with ``ŷ = f / (‖f‖₂ + 1e-10)`` over channels, ``v ≥ 0`` the lin weights applied to the *squared*
differences (``v = 1`` for the uncalibrated baseline) and, for version 0.1, the input first
mapped by the reference scaling layer ``(x − shift) / scale``. Version 0.0 skips that scaling
(the original release's bug, kept for comparison).

Everything runs under :func:`torch.inference_mode` on a frozen model: this is a metric engine,
not a loss (use the reference package to backpropagate).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .backbones import CHANNELS, LAYER_NAMES, Backbone
from .weights import NETS, VERSIONS, lin_weights, load_backbone_weights

__all__ = ["EPS", "Features", "LPIPS", "LPIPSResult", "check_input", "layer_term_maps", "resolve_device", "unit_normalize"]

EPS = 1e-10
_SHIFT = (-0.030, -0.088, -0.188)
_SCALE = (0.458, 0.448, 0.450)


def resolve_device(device: torch.device | str | None = None) -> torch.device:
    """``None``/``"auto"`` → CUDA if available, then Apple MPS, then CPU; else ``torch.device(device)``."""
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available here")
    return dev


def unit_normalize(f: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Divide each position's channel vector by its L2 norm plus ``eps``: ``(N, C, H, W)`` → same."""
    return f / (f.pow(2).sum(1, keepdim=True).sqrt() + eps)


def _unit_normalize_(f: torch.Tensor) -> torch.Tensor:
    """In-place :func:`unit_normalize` (times the reciprocal of ``‖f‖ + ε``), for tensors nobody
    else holds. Every internal path normalises this way, so identical inputs give bitwise
    identical features and a distance of exactly 0."""
    return f.mul_(f.pow(2).sum(1, keepdim=True).sqrt_().add_(EPS).reciprocal_())


def layer_term_maps(
    fx: Sequence[torch.Tensor], fy: Sequence[torch.Tensor], weights: Sequence[torch.Tensor] | None
) -> list[torch.Tensor]:
    """Eq. 1's per-position terms for each layer, before the spatial mean.

    Args:
        fx, fy: unit-normalised features, one ``(N, C_l, H_l, W_l)`` tensor per layer (a batch of
            1 broadcasts against a batch of N).
        weights: per layer a ``(C_l,)`` tensor of non-negative weights on the squared channel
            differences, or ``None`` for the uncalibrated sum over channels (``v = 1``).

    Returns:
        One ``(N, 1, H_l, W_l)`` map per layer; its spatial mean is the layer's term ``d_l``.
    """
    return [_weighted_sum(_difference(a, b, raw_b=False).square_(), weights, i) for i, (a, b) in enumerate(zip(fx, fy))]


def _difference(a_hat: torch.Tensor, b: torch.Tensor, *, raw_b: bool) -> torch.Tensor:
    """``±(â − b̂)`` for one layer (it is squared next). With ``raw_b`` the features ``b`` are
    transient and not normalised yet: they are normalised and differenced in place, without
    allocating full-size temporaries."""
    if not raw_b:
        return a_hat - b
    if b.shape[0] >= a_hat.shape[0]:
        return _unit_normalize_(b).sub_(a_hat)
    return a_hat - _unit_normalize_(b.clone())


def _weighted_sum(d2: torch.Tensor, weights: Sequence[torch.Tensor] | None, layer: int) -> torch.Tensor:
    """``Σ_c v_c d2_c`` per position: ``(N, C, H, W)`` → ``(N, 1, H, W)``."""
    if weights is None:
        return d2.sum(1, keepdim=True)
    return F.conv2d(d2, weights[layer].to(d2).view(1, -1, 1, 1))


def check_input(x: torch.Tensor, device: torch.device, *, name: str = "x", value_range: str = "[-1,1]") -> torch.Tensor:
    """Validate a network input ``(N, 3, H, W)`` float tensor and move it to ``device`` as float32.

    Raises:
        TypeError: not a float tensor. ValueError: wrong shape.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor (N, 3, H, W) in {value_range}, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"{name} must have shape (N, 3, H, W), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a float tensor in {value_range}, got dtype {x.dtype}")
    return x.to(device, torch.float32, non_blocking=True)


@dataclass(frozen=True, eq=False)
class Features:
    """Unit-normalised activations of a batch of images at every tapped layer.

    Attributes:
        maps: one ``(N, C_l, H_l, W_l)`` tensor per layer, on the model's device.
        input_size: ``(H, W)`` of the network input (the size spatial maps are upsampled to).
        net, version: the configuration that produced them (features are comparable only
            between equal configurations).
    """

    maps: tuple[torch.Tensor, ...]
    input_size: tuple[int, int]
    net: str
    version: str

    @property
    def batch(self) -> int:
        return self.maps[0].shape[0]

    def __getitem__(self, index) -> "Features":
        if isinstance(index, int):
            index = slice(index, index + 1)
        return Features(tuple(m[index] for m in self.maps), self.input_size, self.net, self.version)


@dataclass(frozen=True, eq=False)
class LPIPSResult:
    """What one comparison gives, on the CPU.

    Attributes:
        total: ``(N,)`` the LPIPS distance per pair.
        per_layer: ``(N, L)`` the terms ``d_l``; they sum to ``total``.
        layer_maps: ``(N, L, H, W)`` each layer's unaveraged term map, bilinearly upsampled to
            the input size as the reference does with ``spatial=True``; ``None`` when not asked.
        layer_names: the ``L`` tap names (``relu1`` …).
    """

    total: torch.Tensor
    per_layer: torch.Tensor
    layer_maps: torch.Tensor | None
    layer_names: tuple[str, ...]

    @property
    def spatial_map(self) -> torch.Tensor:
        """``(N, H, W)``: the layer maps summed, the reference's ``spatial=True`` output."""
        if self.layer_maps is None:
            raise ValueError("this result was computed with spatial=False: no maps")
        return self.layer_maps.sum(1)

    @staticmethod
    def cat(parts: Sequence["LPIPSResult"]) -> "LPIPSResult":
        maps = None if parts[0].layer_maps is None else torch.cat([p.layer_maps for p in parts])
        return LPIPSResult(
            torch.cat([p.total for p in parts]), torch.cat([p.per_layer for p in parts]), maps, parts[0].layer_names
        )


class LPIPS(nn.Module):
    """Exact LPIPS (reference ``lpips`` 0.1.4) on torchvision backbones; frozen, eval mode.

    Args:
        net: ``"alex"`` (default), ``"vgg"`` or ``"squeeze"``.
        version: ``"0.1"`` (default) or ``"0.0"`` (no input scaling; the original release).
        lin: ``True`` for the learned channel weights, ``False`` for the uncalibrated baseline
            (all channels weighted 1: the reference's ``lpips=False``).
        device: ``None`` = auto (CUDA, then MPS, then CPU), or a torch device.
        backbone_state_dict: inject ``features`` weights (torchvision layout) instead of
            resolving them (tests, experiments); ``weights`` then reads ``"injected"``.

    Attributes:
        weights: where the backbone weights came from (see :mod:`lpips_core.weights`).
        layer_names: the taps, e.g. ``("relu1", …, "relu5")``.
        channel_weights: the lin weights per layer, ``[(C_l,), …]``, or ``None`` for baseline.

    Example:
        >>> model = LPIPS("alex")                       # doctest: +SKIP
        >>> x = torch.rand(1, 3, 64, 64) * 2 - 1        # images in [-1, 1]
        >>> model(x, x)                                 # doctest: +SKIP
        tensor([0.])
    """

    input_range = "[-1,1]"

    def __init__(
        self,
        net: str = "alex",
        version: str = "0.1",
        lin: bool = True,
        device: torch.device | str | None = None,
        *,
        backbone_state_dict: dict[str, torch.Tensor] | None = None,
    ):
        super().__init__()
        if net not in NETS:
            raise ValueError(f"net must be one of {NETS}, got {net!r}")
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
        if not isinstance(lin, bool):
            raise TypeError(f"lin must be a bool, got {lin!r}")
        if backbone_state_dict is None:
            resolved = load_backbone_weights(net)
            backbone_state_dict, source = resolved.state_dict, resolved.source
        else:
            source = "injected"
        self._assemble(
            net=net, version=version, backbone=Backbone(net, backbone_state_dict), layer_names=LAYER_NAMES[net],
            channels=CHANNELS[net], lin=lin_weights(net, version) if lin else None, weights=source, device=device,
            scaling=version == "0.1",
        )

    def _assemble(self, *, net: str, version: str, backbone: nn.Module, layer_names: tuple[str, ...],
                  channels: Sequence[int], lin: Sequence[torch.Tensor] | None, weights: str,
                  device: torch.device | str | None, scaling: bool, shift=_SHIFT, scale=_SCALE,
                  label: str | None = None) -> None:
        """Set up a model from its parts (subclasses with other backbones call this too)."""
        self.net = net
        self.version = version
        self.lin = lin is not None
        self.layer_names = tuple(layer_names)
        self.weights = weights
        self.backbone = backbone
        self._scaling = scaling
        self._label = label or net
        self.register_buffer("shift", torch.as_tensor(shift, dtype=torch.float32).view(1, 3, 1, 1).clone(), persistent=False)
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32).view(1, 3, 1, 1).clone(), persistent=False)
        for i, w in enumerate(lin or ()):
            if w.numel() != channels[i]:
                raise ValueError(f"lin weights of layer {i} have {w.numel()} channels, expected {channels[i]}")
            self.register_buffer(f"lin{i}", w.reshape(-1).float(), persistent=False)
        self.requires_grad_(False)
        self.eval()
        self.device = resolve_device(device)
        self.to(self.device)
        self._ref_cache: OrderedDict[tuple, Features] = OrderedDict()
        self.ref_cache_size = 8

    # ------------------------------------------------------------------ configuration
    @property
    def channel_weights(self) -> list[torch.Tensor] | None:
        if not self.lin:
            return None
        return [getattr(self, f"lin{i}") for i in range(len(self.layer_names))]

    def extra_repr(self) -> str:
        return f"net={self.net!r}, version={self.version!r}, lin={self.lin}, device={self.device}, weights={self.weights!r}"

    def train(self, mode: bool = True) -> "LPIPS":
        return super().train(False)  # always eval: there is nothing to train here

    # ------------------------------------------------------------------ features
    def _check_input(self, x: torch.Tensor, name: str = "x") -> torch.Tensor:
        return check_input(x, self.device, name=name, value_range=self.input_range)

    def _taps(self, x: torch.Tensor) -> tuple[list[torch.Tensor], tuple[int, int]]:
        """Validated input → the backbone's raw (not yet normalised) taps and the input size."""
        x = self._check_input(x)
        if self._scaling:
            x = (x - self.shift) / self.scale
        try:
            taps = self.backbone(x)
        except (RuntimeError, ValueError) as exc:
            if any(s in str(exc).lower() for s in ("size", "kernel", "padding", "dimension")):
                raise ValueError(
                    f"an input of {x.shape[-2]}×{x.shape[-1]} px is too small for the {self._label} backbone: {exc}"
                ) from exc
            raise
        return list(taps), (x.shape[-2], x.shape[-1])

    @torch.inference_mode()
    def features(self, x: torch.Tensor) -> Features:
        """Run ``x`` (``(N, 3, H, W)`` float in ``[-1, 1]``) through the backbone once.

        Returns the unit-normalised taps, reusable with :meth:`compare_features` against any
        number of other images of the same size.

        Raises:
            ValueError: wrong shape, or an image too small for this backbone.
        """
        taps, size = self._taps(x)
        return Features(tuple(_unit_normalize_(t) for t in taps), size, self.net, self.version)

    @torch.inference_mode()
    def reference_features(self, x: torch.Tensor) -> Features:
        """:meth:`features` with a small LRU keyed by the content of ``x``.

        A reference image compared against many distorted copies goes through the network once
        per (image, convention, size): those are all in ``x``; net and version are this model's.
        """
        x = self._check_input(x)
        digest = hashlib.blake2b(x.detach().cpu().numpy().tobytes(), digest_size=16).hexdigest()
        key = (tuple(x.shape), digest)
        hit = self._ref_cache.get(key)
        if hit is not None:
            self._ref_cache.move_to_end(key)
            return hit
        feats = self.features(x)
        self._ref_cache[key] = feats
        while len(self._ref_cache) > self.ref_cache_size:
            self._ref_cache.popitem(last=False)
        return feats

    # ------------------------------------------------------------------ comparison
    def _check_pair(self, fx: Features, fy: Features) -> None:
        if (fx.net, fx.version) != (self.net, self.version) or (fy.net, fy.version) != (self.net, self.version):
            raise ValueError(
                f"features from net={fx.net}/{fy.net}, version={fx.version}/{fy.version} cannot be compared "
                f"by a net={self.net}, version={self.version} model"
            )
        if fx.input_size != fy.input_size:
            raise ValueError(f"features of a {fx.input_size} input and a {fy.input_size} input cannot be compared")
        if fx.batch != fy.batch and 1 not in (fx.batch, fy.batch):
            raise ValueError(f"batch sizes {fx.batch} and {fy.batch} do not broadcast")

    @torch.inference_mode()
    def compare_features(self, fx: Features, fy: Features, *, spatial: bool = True) -> LPIPSResult:
        """Compare precomputed features (a batch of 1 broadcasts against a batch of N).

        Args:
            spatial: also return the per-layer maps upsampled to the input size.
        """
        self._check_pair(fx, fy)
        return self._result(*self._terms(fx.maps, fy.maps, raw_y=False, spatial=spatial, size=fx.input_size))

    def _terms(self, fx: Sequence[torch.Tensor], fy: Sequence[torch.Tensor], *, raw_y: bool, spatial: bool,
               size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-layer terms ``(N, L)`` and, if ``spatial``, the upsampled maps ``(N, L, H, W)``, on the device.

        Without maps, each layer's term is ``Σ_c v_c · mean_hw(Δ_c²)``: the same number as the
        mean of the weighted map (the sums commute) without building the map.
        """
        weights = self.channel_weights
        per_layer, maps = [], []
        for i, (a, b) in enumerate(zip(fx, fy)):
            d2 = _difference(a, b, raw_b=raw_y).square_()
            if spatial:
                m = _weighted_sum(d2, weights, i)
                per_layer.append(m.mean((2, 3)))
                maps.append(F.interpolate(m, size=size, mode="bilinear", align_corners=False))
            else:
                ch = d2.mean((2, 3))
                per_layer.append((ch.sum(1) if weights is None else ch @ weights[i]).unsqueeze(1))
        return torch.cat(per_layer, 1), (torch.cat(maps, 1) if spatial else None)

    def _result(self, per_layer: torch.Tensor, maps: torch.Tensor | None) -> LPIPSResult:
        return LPIPSResult(per_layer.sum(1).cpu(), per_layer.cpu(), None if maps is None else maps.cpu(),
                           self.layer_names)

    @torch.inference_mode()
    def channel_terms(self, fx: Features, fy: Features) -> list[torch.Tensor]:
        """Per layer ``(N, C_l)``: the spatial mean of each channel's squared difference, unweighted.

        ``d_l = Σ_c v_{l,c} · channel_terms[l][:, c]`` (``v = 1`` for the baseline).
        """
        self._check_pair(fx, fy)
        return [(a - b).square_().mean((2, 3)).cpu() for a, b in zip(fx.maps, fy.maps)]

    @torch.inference_mode()
    def pair_channel_terms(self, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        """:meth:`channel_terms` straight from inputs ``(N, 3, H, W)`` in ``[-1, 1]``: lin and
        baseline distances of the same pairs from one pass (the Conventions grid)."""
        parts = [[_difference(a, b, raw_b=True).square_().mean((2, 3)) for a, b in zip(fx, fy)]
                 for fx, fy, _ in self._pair_chunks(x, y)]
        return [torch.cat(layer).cpu() for layer in zip(*parts)]

    def images_per_batch(self, height: int, width: int) -> int:
        """How many ``height × width`` images go through the backbone together.

        As many as keep the first tap's activations (64 float32 channels at the backbone's first
        stride) within a budget: 12 MB on a CPU, where bigger batches ran slower per image once
        they outgrew the caches (measured on 2 cores, ms per image for batches of 1/2/4: VGG16 at
        256 px 240/253/308, at 128 px 72/65/67; AlexNet at 512 px 52/47/53, at 256 px 14/13/12),
        and 2 GB on a GPU.
        """
        stride = getattr(self.backbone, "first_stride", 1)
        per_image = 64 * 4 * -(-height // stride) * -(-width // stride)
        budget = (12 << 20) if self.device.type == "cpu" else (2 << 30)
        return max(1, budget // per_image)

    def _pair_chunks(self, x: torch.Tensor, y: torch.Tensor):
        """Yield ``(normalised taps of one side, raw taps of the other, input size)`` over chunks of
        pairs sized by :meth:`images_per_batch` (both sides of a chunk in one backbone batch when
        two images fit). The squared difference is symmetric, so a batch of 1 on either side is
        the cached-style "one against many" case."""
        x, y = self._check_input(x, "x"), self._check_input(y, "y")
        if x.shape[-2:] != y.shape[-2:]:
            raise ValueError(f"x and y must have the same size, got {tuple(x.shape)} and {tuple(y.shape)}")
        per = self.images_per_batch(x.shape[-2], x.shape[-1])
        if x.shape[0] != y.shape[0]:
            if 1 not in (x.shape[0], y.shape[0]):
                raise ValueError(f"batch sizes {x.shape[0]} and {y.shape[0]} do not broadcast")
            one, many = (x, y) if x.shape[0] == 1 else (y, x)
            f_one = list(self.features(one).maps)
            for chunk in many.split(per):
                taps, size = self._taps(chunk)
                yield f_one, taps, size
            return
        if per < 2:
            for xc, yc in zip(x.split(1), y.split(1)):
                taps, size = self._taps(yc)
                yield list(self.features(xc).maps), taps, size
            return
        for xc, yc in zip(x.split(per // 2), y.split(per // 2)):
            taps, size = self._taps(torch.cat([xc, yc]))
            n = xc.shape[0]
            yield [_unit_normalize_(t[:n]) for t in taps], [t[n:] for t in taps], size

    def _pair_terms(self, x: torch.Tensor, y: torch.Tensor, *, spatial: bool):
        parts = [self._terms(fx, fy, raw_y=True, spatial=spatial, size=size) for fx, fy, size in self._pair_chunks(x, y)]
        per_layer = torch.cat([p[0] for p in parts])
        return per_layer, (torch.cat([p[1] for p in parts]) if spatial else None)

    @torch.inference_mode()
    def compare(self, x: torch.Tensor, y: torch.Tensor, *, spatial: bool = True) -> LPIPSResult:
        """Compare ``x`` and ``y``: ``(N, 3, H, W)`` float in ``[-1, 1]`` (or a batch of 1 against N).

        Both go through the backbone in one batch when two images fit :meth:`images_per_batch`.
        """
        return self._result(*self._pair_terms(x, y, spatial=spatial))

    @torch.inference_mode()
    def compare_batch(
        self, reference: torch.Tensor, others: torch.Tensor, *, spatial: bool = False, chunk: int | None = None
    ) -> LPIPSResult:
        """One reference ``(1, 3, H, W)`` against many images ``(K, 3, H, W)``, all in ``[-1, 1]``.

        The reference's features come from :meth:`reference_features` (cached); the others go
        through the network in batches of ``chunk`` (default: :meth:`images_per_batch`).
        """
        if reference.ndim != 4 or reference.shape[0] != 1:
            raise ValueError(f"reference must have shape (1, 3, H, W), got {tuple(reference.shape)}")
        fr = self.reference_features(reference)
        others = self._check_input(others, "others")
        if others.shape[-2:] != reference.shape[-2:]:
            raise ValueError(f"others must match the reference size {tuple(reference.shape[-2:])}, got {tuple(others.shape)}")
        if chunk is None:
            chunk = self.images_per_batch(others.shape[-2], others.shape[-1])
        parts = []
        for o in others.split(chunk):
            taps, size = self._taps(o)
            parts.append(self._result(*self._terms(fr.maps, taps, raw_y=True, spatial=spatial, size=size)))
        return parts[0] if len(parts) == 1 else LPIPSResult.cat(parts)

    @torch.inference_mode()
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(N,)`` distances, on the model's device: the reference ``LPIPS(...)(x, y)``, ``normalize=False``."""
        return self._pair_terms(x, y, spatial=False)[0].sum(1)
