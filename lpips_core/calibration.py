"""Calibration lab: what LPIPS's learned "lin" weights do, shown on random features.

A fixed, randomly initialised five-layer convolutional network (the *stand-in*) replaces the
pretrained backbone, so everything here runs without downloading weights. On its features the
engine's Eq. 1 code (:func:`lpips_core.model.unit_normalize`, :func:`lpips_core.model.layer_term_maps`)
gives distances, and two experiments show what the channel weights are for:

* :func:`mechanics` — one synthetic 64 × 64 patch: the cosine identity behind the unweighted
  distance, a spatial map that finds noise added to one quadrant, and a table of distances for
  four distortions under the ``[-1, 1]`` and ``[0, 1]`` input conventions and after a 2×
  bilinear upsampling.
* :func:`run_2afc` — a toy two-alternative forced-choice test whose answers are fixed by
  construction: the one-pixel shift of a patch is always the "closer" patch; the other one
  carries Gaussian noise or block-DCT artifacts whose MSE is 0.5 to 2 times the shift's. Plain
  L2, each stand-in with all channel weights 1, and each stand-in with non-negative channel
  weights fitted to training triplets (a logistic link on ``d0 − d1``, Adam, projection onto
  ``w ≥ 0`` after every step) are scored on held-out triplets; ties count 0.5.
  :func:`score_lpips_2afc` / :func:`real_lpips_2afc` score the same test triplets with the real
  AlexNet / VGG16 LPIPS (baseline and lin) where their weights are available.

With the default seeds and sizes the numbers are those of the worked example in the reference
article on LPIPS (section "Example"); the random streams are consumed in the same order:

* mechanics: one ``numpy.random.default_rng(0)`` stream gives the patch, then the noise for the
  cosine check (σ = 0.1), then the quadrant noise (σ = 0.15, top-left ``S/2 × S/2``), then the
  noise of the "noise s=0.05" row; the stand-in is built with ``torch.manual_seed(0)``;
* 2AFC: training triplets from ``default_rng(1)``, test triplets from ``default_rng(2)``; each
  triplet draws a patch, the MSE ratio ``U(0.5, 2)``, a coin for the kind (``< 0.5``: noise, else
  block DCT, the smallest step of ``linspace(0.02, 1, 50)`` whose MSE reaches the target) and a
  coin for the order (``< 0.5``: the shift is ``x1``, label ``h = 1``); stand-in ``k`` is built
  with ``torch.manual_seed(k)``.

None of these numbers are LPIPS values: the stand-in has random weights. The point is the
mechanics: what the weights can and cannot do, and that they are fitted on the distortion kinds
they are then tested on, which flatters them.

Run ``python -m lpips_core.calibration`` for the tables, ``--json`` for one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import numbers
import sys
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .conventions import to_input
from .distortions import block_dct, gaussian_blur, gaussian_noise, shift
from .model import LPIPS, layer_term_maps, unit_normalize
from .synth import texture_patch
from .weights import WeightsUnavailable

__all__ = [
    "Accuracy",
    "DCT_STEPS",
    "DEFAULT_NET_SEEDS",
    "KINDS",
    "MECHANICS_COLUMNS",
    "MECHANICS_ROWS",
    "Mechanics",
    "MechanicsRow",
    "Progress",
    "QuadrantCheck",
    "REAL_NET_LABELS",
    "RealLPIPSResult",
    "STANDIN_CHANNELS",
    "StandInNet",
    "StandInResult",
    "Triplets",
    "TwoAFCResult",
    "fit_lin",
    "make_triplets",
    "mechanics",
    "real_lpips_2afc",
    "run_2afc",
    "score_2afc",
    "score_lpips_2afc",
    "standin_channel_terms",
    "standin_distance",
    "torch_threads",
]

#: Channels of the stand-in: the input, then its five tapped layers.
STANDIN_CHANNELS: tuple[int, ...] = (3, 32, 64, 96, 96, 64)
#: Row labels of the mechanics table, in order (the reference example's labels).
MECHANICS_ROWS: tuple[str, ...] = ("noise s=0.05", "blur s=1.0", "block DCT q=0.2", "1-px shift")
#: Keys of a :class:`MechanicsRow`, with what each column means.
MECHANICS_COLUMNS: dict[str, str] = {
    "mse": "MSE of the images in [0, 1]",
    "minus1_1": "stand-in distance, inputs in [-1, 1] (correct)",
    "zero_one": "stand-in distance, inputs left in [0, 1]",
    "up2x": "stand-in distance, both images bilinearly upsampled 2x",
}
#: The two kinds of "far" patch in the toy 2AFC.
KINDS: tuple[str, ...] = ("noise", "dct")
#: Block-DCT quantisation steps searched (ascending) for a DCT triplet.
DCT_STEPS: np.ndarray = np.linspace(0.02, 1, 50)
DEFAULT_NET_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
DEFAULT_THREADS = 4  # the reference example's torch.set_num_threads(4)
#: Display names of the pretrained backbones.
REAL_NET_LABELS: dict[str, str] = {"alex": "AlexNet", "vgg": "VGG16", "squeeze": "SqueezeNet 1.1"}

#: ``progress(fraction in [0, 1], message)``
Progress = Callable[[float, str], None]


# ----------------------------------------------------------------------------- helpers
def _int(value, name: str, *, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}; got {value}")
    return int(value)


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0; got {value!r}")
    return value


def _report(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(min(1.0, max(0.0, float(fraction))), message)


def _scaled(progress: Progress | None, start: float, stop: float) -> Progress | None:
    """A callback that maps its own ``[0, 1]`` onto ``[start, stop]`` of ``progress``."""
    if progress is None:
        return None
    return lambda f, msg: progress(start + (stop - start) * min(1.0, max(0.0, f)), msg)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count after.

    ``None`` leaves the count alone. The reference example sets 4 threads; on the 2-core
    machine we checked, 1, 2 and 4 threads gave bit-identical results (features, fitted
    weights, every table cell).
    """
    if n is None:
        yield
        return
    n = _int(n, "threads", lo=1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a - b) ** 2))


def _to_net(images: np.ndarray | Sequence[np.ndarray], *, convention: str = "[-1,1]",
            size: int | None = None) -> torch.Tensor:
    """``(H, W, 3)`` or ``(N, H, W, 3)`` float in ``[0, 1]`` → contiguous ``(N, 3, H', W')`` float32.

    The cast to float32 happens before the convention's arithmetic (``2x − 1`` in float32), as
    :func:`lpips_core.conventions.to_input` does it.
    """
    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"expected images (N, H, W, 3) or (H, W, 3); got shape {arr.shape}")
    x01 = torch.from_numpy(np.ascontiguousarray(arr.transpose(0, 3, 1, 2), dtype=np.float32))
    return to_input(x01, convention=convention, size=size).contiguous()


# ----------------------------------------------------------------------------- the stand-in
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


# ----------------------------------------------------------------------------- mechanics
@dataclass(frozen=True)
class MechanicsRow:
    """One distortion of the mechanics table (see :data:`MECHANICS_COLUMNS`)."""

    mse: float
    minus1_1: float
    zero_one: float
    up2x: float

    def as_dict(self) -> dict[str, float]:
        return {"mse": self.mse, "minus1_1": self.minus1_1, "zero_one": self.zero_one, "up2x": self.up2x}


@dataclass(frozen=True, eq=False)
class QuadrantCheck:
    """Noise added to the top-left quadrant only, and where the spatial map puts the distance.

    Attributes:
        scalar: the stand-in distance (spatial means).
        map_mean: the mean of the ``(H, W)`` spatial map.
        share: the fraction of the map's sum inside the noised quadrant.
        map: ``(H, W)`` float32, the spatial map.
        image: ``(H, W, 3)`` float64, the patch with the noised quadrant.
        quadrant: ``(rows, cols)`` of the noised quadrant (``S // 2`` each).
    """

    scalar: float
    map_mean: float
    share: float
    map: np.ndarray
    image: np.ndarray
    quadrant: tuple[int, int]


@dataclass(frozen=True, eq=False)
class Mechanics:
    """The mechanics of Eq. 1 on one patch (see :func:`mechanics`).

    Attributes:
        cosine_gap: max over layer-3 positions of ``|Σ_c (â − b̂)² − (2 − 2 cos(a, b))|``, which
            is 0 up to float32 rounding (order 1e-7).
        quadrant: the quadrant-noise check.
        rows: :data:`MECHANICS_ROWS` → :class:`MechanicsRow`.
        patch: ``(S, S, 3)`` float64 reference patch in ``[0, 1]``.
        distorted: :data:`MECHANICS_ROWS` → the distorted patch.
        seed, net_seed: the NumPy stream's seed and the stand-in's seed.
    """

    cosine_gap: float
    quadrant: QuadrantCheck
    rows: dict[str, MechanicsRow]
    patch: np.ndarray
    distorted: dict[str, np.ndarray]
    seed: int
    net_seed: int

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: row.as_dict() for name, row in self.rows.items()}


def mechanics(*, seed: int = 0, net_seed: int = 0, size: int = 64) -> Mechanics:
    """The cosine identity, the quadrant-noise map and the mechanics table on one patch.

    Draws from ``numpy.random.default_rng(seed)`` in this order: the patch
    (:func:`lpips_core.synth.texture_patch`), noise σ = 0.1 over the whole patch (cosine check at
    layer 3), noise σ = 0.15 on the top-left ``size // 2`` square (quadrant check), noise
    σ = 0.05 (first table row). The other rows are the Gaussian blur σ = 1 (radius 6, reflected
    boundary), the 8 × 8 block DCT with uniform step 0.2 and the one-pixel shift to the right
    with the edge column repeated. Images are float64; the networks see float32.

    Args:
        seed: seed of the NumPy stream, ``>= 0``.
        net_seed: seed of the stand-in, ``>= 0``.
        size: side of the square patch, ``>= 16``.

    Returns:
        :class:`Mechanics`.
    """
    seed = _int(seed, "seed", lo=0)
    size = _int(size, "size", lo=16)
    rng = np.random.default_rng(seed)
    x = texture_patch(rng, size, dtype=np.float64)
    net = StandInNet(net_seed)
    tx = _to_net(x)

    # w = 1: Σ_c (â − b̂)² = 2 − 2 cos(a, b) at every position (checked at layer 3).
    noisy = gaussian_noise(x, 0.1, seed=rng)
    a, b = net.features(tx)[2], net.features(_to_net(noisy))[2]
    term = layer_term_maps([a], [b], None)[0][:, 0]
    cos = (a * b).sum(1)
    cosine_gap = float((term - (2 - 2 * cos)).abs().max())

    half = size // 2
    loc = x.copy()
    loc[:half, :half] = gaussian_noise(x[:half, :half], 0.15, seed=rng)
    tloc = _to_net(loc)
    dmap = standin_distance(net, tx, tloc, spatial=True)[0]
    quadrant = QuadrantCheck(
        scalar=float(standin_distance(net, tx, tloc)[0]),
        map_mean=float(dmap.mean()),
        share=float(dmap[:half, :half].sum() / dmap.sum()),
        map=dmap.numpy().copy(),
        image=loc,
        quadrant=(half, half),
    )

    distorted = {
        "noise s=0.05": gaussian_noise(x, 0.05, seed=rng),
        "blur s=1.0": gaussian_blur(x, 1.0, radius=6, boundary="reflect"),
        "block DCT q=0.2": block_dct(x, 0.2),
        "1-px shift": shift(x, 1, boundary="edge"),
    }
    rows = {}
    for name, d in distorted.items():
        rows[name] = MechanicsRow(
            mse=_mse(x, d),
            minus1_1=float(standin_distance(net, tx, _to_net(d))[0]),
            zero_one=float(standin_distance(net, _to_net(x, convention="[0,1]"),
                                            _to_net(d, convention="[0,1]"))[0]),
            up2x=float(standin_distance(net, _to_net(x, size=2 * size), _to_net(d, size=2 * size))[0]),
        )
    return Mechanics(cosine_gap, quadrant, rows, x, distorted, seed, net.seed)


# ----------------------------------------------------------------------------- triplets
@dataclass(frozen=True, eq=False)
class Triplets:
    """Toy 2AFC triplets with answers fixed by construction.

    Attributes:
        ref, x0, x1: ``(N, S, S, 3)`` float64 in ``[0, 1]``.
        h: ``(N,)`` float64: 1 when ``x1`` is the closer patch (the shift), 0 when ``x0`` is.
        kind: ``(N,)`` str, ``"noise"`` or ``"dct"``: what the farther patch carries.
        ratio: ``(N,)`` the drawn target ratio MSE(far) / MSE(shift) in ``[0.5, 2)`` (the
            realised MSE of a DCT patch is at least the target; clipping can lower noise's).
        seed: the NumPy seed they came from.
    """

    ref: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    h: np.ndarray
    kind: np.ndarray
    ratio: np.ndarray
    seed: int

    def __len__(self) -> int:
        return len(self.h)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``ref, x0, x1`` as ``(N, 3, S, S)`` float32 network inputs in ``[-1, 1]``."""
        return _to_net(self.ref), _to_net(self.x0), _to_net(self.x1)


def _dct_far(x: np.ndarray, target: float) -> np.ndarray:
    """Block DCT with the smallest step of :data:`DCT_STEPS` whose MSE reaches ``target`` (else 1)."""
    for q in DCT_STEPS:
        far = block_dct(x, float(q))
        if _mse(x, far) >= target:
            return far
    return block_dct(x, 1.0)


def make_triplets(n: int, seed: int, *, size: int = 64, progress: Progress | None = None) -> Triplets:
    """Draw ``n`` triplets from ``numpy.random.default_rng(seed)``.

    Per triplet: a patch ``x`` (:func:`lpips_core.synth.texture_patch`); ``near`` = ``x`` shifted
    one pixel right, edge column repeated; a target MSE = MSE(x, near) · U(0.5, 2); a coin
    ``< 0.5`` for noise (σ = √target, clipped) else the block DCT of :func:`_dct_far`; a coin
    ``< 0.5`` to put the shift second (``h = 1``), else first (``h = 0``).

    Args:
        n: number of triplets, ``>= 1``.
        seed: ``>= 0``.
        size: patch side, ``>= 16``.
        progress: called with the fraction done and a message.
    """
    n = _int(n, "n", lo=1)
    seed = _int(seed, "seed", lo=0)
    size = _int(size, "size", lo=16)
    rng = np.random.default_rng(seed)
    ref, x0, x1 = (np.empty((n, size, size, 3)) for _ in range(3))
    h, ratio = np.empty(n), np.empty(n)
    kind = np.empty(n, dtype="<U5")
    step = max(1, n // 50)
    for i in range(n):
        x = texture_patch(rng, size, dtype=np.float64)
        near = shift(x, 1, boundary="edge")
        ratio[i] = rng.uniform(0.5, 2)
        target = _mse(x, near) * ratio[i]
        if rng.random() < 0.5:
            kind[i], far = "noise", gaussian_noise(x, math.sqrt(target), seed=rng)
        else:
            kind[i], far = "dct", _dct_far(x, target)
        if rng.random() < 0.5:
            x0[i], x1[i], h[i] = far, near, 1.0
        else:
            x0[i], x1[i], h[i] = near, far, 0.0
        ref[i] = x
        if (i + 1) % step == 0 or i + 1 == n:
            _report(progress, (i + 1) / n, f"triplets (seed {seed}): {i + 1}/{n}")
    return Triplets(ref, x0, x1, h, kind, ratio, seed)


# ----------------------------------------------------------------------------- scoring and fitting
@dataclass(frozen=True, eq=False)
class Accuracy:
    """2AFC agreement with the constructed answers: overall and per kind of far patch.

    Attributes:
        all, noise, dct: mean score over all test triplets / the noise ones / the DCT ones
            (``nan`` where a subset is empty).
        per_triplet: ``(N,)`` 1 (right), 0 (wrong) or 0.5 (tie).
    """

    all: float
    noise: float
    dct: float
    per_triplet: np.ndarray

    def as_dict(self) -> dict[str, float]:
        return {"all": self.all, "noise": self.noise, "dct": self.dct}


def score_2afc(d0, d1, h) -> np.ndarray:
    """Per triplet: 1 when the metric calls the right patch closer, 0 when not, 0.5 on a tie.

    ``h = 1`` means ``x1`` is the closer one. ``d0, d1, h``: ``(N,)`` arrays or tensors.
    """
    d0, d1, h = (np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
                 for v in (d0, d1, h))
    if not d0.shape == d1.shape == h.shape:
        raise ValueError(f"d0, d1 and h must have the same shape; got {d0.shape}, {d1.shape}, {h.shape}")
    return (d0 < d1) * (1 - h) + (d1 < d0) * h + (d0 == d1) * 0.5


def _accuracy(scores: np.ndarray, kind: np.ndarray) -> Accuracy:
    def mean(mask):
        return float(scores[mask].mean()) if mask.any() else float("nan")

    return Accuracy(mean(np.ones(len(scores), bool)), mean(kind == "noise"), mean(kind == "dct"), scores)


def fit_lin(t0: torch.Tensor, t1: torch.Tensor, h: torch.Tensor | np.ndarray, *, steps: int = 300,
            lr: float = 0.05, progress: Progress | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Fit non-negative channel weights ``w`` (start: all 1) to 2AFC labels.

    Model: ``P(x1 is closer) = sigmoid(t0 @ w − t1 @ w)``, binary cross-entropy against ``h``,
    full-batch Adam (learning rate ``lr``, PyTorch's defaults otherwise), then ``w`` clamped to
    ``>= 0`` after every step.

    Args:
        t0, t1: ``(N, C)`` channel terms of (ref, x0) and (ref, x1) (:func:`standin_channel_terms`).
        h: ``(N,)`` labels in ``{0, 1}``.
        steps: Adam steps, ``>= 0``.
        lr: learning rate, ``> 0``.

    Returns:
        ``(w, loss)``: ``(C,)`` float32 weights and the ``(steps,)`` training loss before each step.
    """
    steps = _int(steps, "steps", lo=0)
    lr = _positive(lr, "lr")
    t0, t1 = t0.detach().clone().float(), t1.detach().clone().float()
    h = torch.as_tensor(np.asarray(h), dtype=torch.float32)
    if t0.ndim != 2 or t0.shape != t1.shape or h.shape != t0.shape[:1]:
        raise ValueError(
            f"t0, t1 must be (N, C) and h (N,); got {tuple(t0.shape)}, {tuple(t1.shape)}, {tuple(h.shape)}"
        )
    w = torch.ones(t0.shape[1], requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    losses = np.empty(steps)
    every = max(1, steps // 20)
    with torch.enable_grad():
        for i in range(steps):
            loss = F.binary_cross_entropy_with_logits(t0 @ w - t1 @ w, h)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                w.clamp_(min=0)
            losses[i] = loss.item()
            if (i + 1) % every == 0 or i + 1 == steps:
                _report(progress, (i + 1) / steps, f"fitting: step {i + 1}/{steps}")
    return w.detach(), losses


def _split(w: torch.Tensor, channels: Sequence[int]) -> tuple[np.ndarray, ...]:
    return tuple(p.numpy().copy() for p in torch.split(w, list(channels)))


# ----------------------------------------------------------------------------- the experiment
@dataclass(frozen=True, eq=False)
class StandInResult:
    """One stand-in network in the toy 2AFC.

    Attributes:
        seed: the network's seed.
        unweighted: test accuracy with all channel weights 1 (the row "w = 1").
        lin: test accuracy with the fitted weights (the row "lin").
        weights: the fitted weights, one ``(C_l,)`` array per layer.
        loss: ``(steps,)`` training loss.
        train_unweighted, train_lin: accuracy on the training triplets.
    """

    seed: int
    unweighted: Accuracy
    lin: Accuracy
    weights: tuple[np.ndarray, ...]
    loss: np.ndarray
    train_unweighted: Accuracy
    train_lin: Accuracy

    @property
    def zero_fraction(self) -> tuple[float, ...]:
        """Per layer, the fraction of fitted weights that are exactly 0."""
        return tuple(float((w == 0).mean()) for w in self.weights)


@dataclass(frozen=True, eq=False)
class TwoAFCResult:
    """The toy 2AFC: L2 and every stand-in (w = 1 and lin) on the same test triplets.

    Attributes:
        l2: accuracy of the mean squared difference of the network inputs.
        standins: one :class:`StandInResult` per network seed, in order.
        test_kind: ``(N,)`` the test triplets' kinds.
        settings: the arguments of :func:`run_2afc`.
    """

    l2: Accuracy
    standins: tuple[StandInResult, ...]
    test_kind: np.ndarray
    settings: dict

    def rows(self) -> dict[str, Accuracy]:
        """Row label → accuracy, in the reference example's order and labels."""
        out = {"L2": self.l2}
        for s in self.standins:
            out[f"stand-in net {s.seed}, w = 1"] = s.unweighted
            out[f"stand-in net {s.seed}, lin"] = s.lin
        return out

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: acc.as_dict() for name, acc in self.rows().items()}


def run_2afc(
    *,
    net_seeds: Sequence[int] = DEFAULT_NET_SEEDS,
    n_train: int = 600,
    n_test: int = 600,
    train_seed: int = 1,
    test_seed: int = 2,
    steps: int = 300,
    lr: float = 0.05,
    size: int = 64,
    threads: int | None = DEFAULT_THREADS,
    test: Triplets | None = None,
    progress: Progress | None = None,
) -> TwoAFCResult:
    """The toy 2AFC experiment; deterministic for given arguments.

    Training and test triplets come from :func:`make_triplets`; L2 is scored on the float32
    network inputs; each stand-in is scored with all weights 1 and with weights fitted by
    :func:`fit_lin` on the training triplets, both on the test triplets.

    Args:
        net_seeds: seeds of the stand-ins (distinct, ``>= 0``), one row pair each.
        n_train, n_test: numbers of triplets, ``>= 1``.
        train_seed, test_seed: NumPy seeds of the two sets.
        steps, lr: the fit (see :func:`fit_lin`).
        size: patch side.
        threads: torch threads during the run (restored after); ``None`` keeps the current.
        test: reuse already drawn test triplets (must match ``n_test``, ``test_seed``, ``size``).
        progress: ``progress(fraction, message)``; the fraction rises from 0 to 1.

    Returns:
        :class:`TwoAFCResult`.
    """
    seeds = tuple(_int(s, "net seed", lo=0) for s in net_seeds)
    if not seeds:
        raise ValueError("net_seeds must name at least one stand-in")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"net_seeds must be distinct; got {list(seeds)}")
    n_train, n_test = _int(n_train, "n_train", lo=1), _int(n_test, "n_test", lo=1)
    steps, lr = _int(steps, "steps", lo=0), _positive(lr, "lr")
    if test is not None and (len(test), test.seed, test.ref.shape[1]) != (n_test, test_seed, size):
        raise ValueError(
            f"the given test triplets (n={len(test)}, seed={test.seed}, size={test.ref.shape[1]}) do not "
            f"match n_test={n_test}, test_seed={test_seed}, size={size}"
        )
    settings = dict(net_seeds=list(seeds), n_train=n_train, n_test=n_test, train_seed=train_seed,
                    test_seed=test_seed, steps=steps, lr=lr, size=size)

    # Rough cost model (CPU): a triplet ≈ 1 unit; one stand-in's features ≈ 0.35 unit per
    # triplet; a fitting step on 600 triplets ≈ 0.15 unit.
    build = float(n_train + (n_test if test is None else 0))
    per_net = 0.35 * (n_train + n_test) + 0.15 * steps * n_train / 600
    total = build + per_net * len(seeds)
    done = 0.0

    with torch_threads(threads):
        train = make_triplets(n_train, train_seed, size=size,
                              progress=_scaled(progress, 0, n_train / total))
        done += n_train
        if test is None:
            test = make_triplets(n_test, test_seed, size=size,
                                 progress=_scaled(progress, done / total, (done + n_test) / total))
            done += n_test
        tr, te = train.tensors(), test.tensors()
        l2 = _accuracy(score_2afc((te[0] - te[1]).pow(2).mean((1, 2, 3)),
                                  (te[0] - te[2]).pow(2).mean((1, 2, 3)), test.h), test.kind)
        results = []
        for k, seed in enumerate(seeds):
            label = f"stand-in net {seed} ({k + 1}/{len(seeds)})"
            _report(progress, done / total, f"{label}: features")
            net = StandInNet(seed)
            terms = {}
            for name, (r, a, b) in (("train", tr), ("test", te)):
                fr = net.features(r)
                terms[name] = (_channel_terms_from(fr, net.features(a)), _channel_terms_from(fr, net.features(b)))
            done += 0.35 * (n_train + n_test)
            fit_share = 0.15 * steps * n_train / 600 / total
            w, loss = fit_lin(*terms["train"], train.h, steps=steps, lr=lr,
                              progress=_scaled(_relabel(progress, label), done / total, done / total + fit_share))
            done += 0.15 * steps * n_train / 600
            ones = torch.ones_like(w)

            def acc(name, v, triplets):
                t0, t1 = terms[name]
                return _accuracy(score_2afc(t0 @ v, t1 @ v, triplets.h), triplets.kind)

            results.append(StandInResult(
                seed=seed, unweighted=acc("test", ones, test), lin=acc("test", w, test),
                weights=_split(w, net.channels), loss=loss,
                train_unweighted=acc("train", ones, train), train_lin=acc("train", w, train),
            ))
    _report(progress, 1.0, "done")
    return TwoAFCResult(l2, tuple(results), test.kind.copy(), settings)


def _relabel(progress: Progress | None, label: str) -> Progress | None:
    if progress is None:
        return None
    return lambda f, msg: progress(f, f"{label}: {msg}")


# ----------------------------------------------------------------------------- the real LPIPS
@dataclass(frozen=True, eq=False)
class RealLPIPSResult:
    """The toy 2AFC scored with a pretrained LPIPS backbone.

    Attributes:
        net, version: the configuration.
        baseline: accuracy with every channel weighted 1 (``lin=False``); ``None`` if unavailable.
        lin: accuracy with the published lin weights; ``None`` if unavailable.
        note: where the weights came from, or why they are unavailable.
    """

    net: str
    version: str
    baseline: Accuracy | None
    lin: Accuracy | None
    note: str

    @property
    def available(self) -> bool:
        return self.baseline is not None

    @property
    def label(self) -> str:
        return f"LPIPS {REAL_NET_LABELS.get(self.net, self.net)} v{self.version}"

    def rows(self) -> dict[str, Accuracy]:
        """``"LPIPS AlexNet v0.1, baseline"`` / ``", lin"`` → accuracy (empty when unavailable)."""
        out = {}
        if self.baseline is not None:
            out[f"{self.label}, baseline"] = self.baseline
        if self.lin is not None:
            out[f"{self.label}, lin"] = self.lin
        return out


def score_lpips_2afc(model: LPIPS, test: Triplets, *, chunk: int = 50,
                     progress: Progress | None = None) -> tuple[Accuracy, Accuracy | None]:
    """Score the test triplets with a real LPIPS model: ``(baseline, lin)``.

    One pass through the backbone gives both: the baseline sums the per-channel terms
    (:meth:`LPIPS.channel_terms`), lin weights them with :attr:`LPIPS.channel_weights`
    (``None`` when the model was built with ``lin=False``). Inputs are the triplets in
    ``[-1, 1]`` at their native size. ``chunk`` triplets go through the network at a time.
    """
    chunk = _int(chunk, "chunk", lo=1)
    weights = model.channel_weights
    v = None if weights is None else torch.cat([w.detach().float().cpu() for w in weights])
    d = {"base": ([], []), "lin": ([], [])}
    n = len(test)
    for start in range(0, n, chunk):
        sl = slice(start, min(n, start + chunk))
        r, a, b = (_to_net(arr[sl]) for arr in (test.ref, test.x0, test.x1))
        fr = model.features(r)
        for j, other in enumerate((a, b)):
            terms = torch.cat(model.channel_terms(fr, model.features(other)), 1)
            d["base"][j].append(terms.sum(1))
            if v is not None:
                d["lin"][j].append(terms @ v)
        _report(progress, sl.stop / n, f"{model.net}: {sl.stop}/{n} test triplets")
    base = _accuracy(score_2afc(torch.cat(d["base"][0]), torch.cat(d["base"][1]), test.h), test.kind)
    lin = None
    if v is not None:
        lin = _accuracy(score_2afc(torch.cat(d["lin"][0]), torch.cat(d["lin"][1]), test.h), test.kind)
    return base, lin


def real_lpips_2afc(test: Triplets, *, nets: Sequence[str] = ("alex", "vgg"), version: str = "0.1",
                    device: torch.device | str | None = None,
                    progress: Progress | None = None) -> dict[str, RealLPIPSResult]:
    """:func:`score_lpips_2afc` for each backbone in ``nets``, building the models here.

    A backbone whose weights are unavailable (:class:`lpips_core.WeightsUnavailable`) gives a
    result with ``baseline = lin = None`` and the reason in ``note``; nothing is downloaded
    unless :mod:`lpips_core.weights` allows it.
    """
    out = {}
    for k, net in enumerate(nets):
        part = _scaled(progress, k / len(nets), (k + 1) / len(nets))
        try:
            model = LPIPS(net, version, lin=True, device=device)
        except WeightsUnavailable as exc:
            out[net] = RealLPIPSResult(net, version, None, None, str(exc))
            _report(part, 1.0, f"{net}: unavailable")
            continue
        base, lin = score_lpips_2afc(model, test, progress=part)
        out[net] = RealLPIPSResult(net, version, base, lin, f"weights: {model.weights}")
    return out


# ----------------------------------------------------------------------------- CLI
def _format_tables(mech: Mechanics, afc: TwoAFCResult, real: Mapping[str, RealLPIPSResult] | None) -> str:
    q = mech.quadrant
    size = mech.patch.shape[0]
    lines = [
        f"w = 1, layer 3: max |sum_c (a-b)^2 - (2 - 2 cos)| = {mech.cosine_gap:.1e}",
        f"noise in the top-left quadrant only: scalar {q.scalar:.4f}, mean of spatial map {q.map_mean:.4f}, "
        f"share of the map in that quadrant {q.share:.2f}",
        "",
        f"{'distortion':16s} {'MSE':>8s} {'[-1,1]':>8s} {'[0,1]':>8s} {f'{2 * size}x{2 * size}':>8s}",
    ]
    for name, row in mech.rows.items():
        lines.append(f"{name:16s} {row.mse:8.5f} {row.minus1_1:8.4f} {row.zero_one:8.4f} {row.up2x:8.4f}")
    rows: dict[str, Accuracy | None] = dict(afc.rows())
    for res in (real or {}).values():
        rows.update(res.rows() if res.available else {f"{res.label}: unavailable ({res.note})": None})
    width = max([26] + [len(name) for name, acc in rows.items() if acc is not None])
    title = f"2AFC on {afc.settings['n_test']} test triplets"
    lines += ["", f"{title:{width}s} {'all':>6s} {'noise':>6s} {'DCT':>6s}"]
    for name, acc in rows.items():
        lines.append(name if acc is None else f"{name:{width}s} {acc.all:6.3f} {acc.noise:6.3f} {acc.dct:6.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lpips_core.calibration",
        description="Random-feature stand-in for LPIPS: mechanics table and toy 2AFC with fitted 'lin' weights "
                    "(the reference example's settings unless changed).",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--nets", type=int, default=len(DEFAULT_NET_SEEDS), help="number of stand-ins (seeds 0..n-1)")
    parser.add_argument("--triplets", type=int, default=600, help="training and test triplets each")
    parser.add_argument("--steps", type=int, default=300, help="Adam steps of the lin fit")
    parser.add_argument("--real", action="store_true",
                        help="also score the test triplets with the real AlexNet and VGG16 LPIPS (if available)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    def progress(f: float, msg: str) -> None:
        if not args.quiet:
            print(f"\r[{f:6.1%}] {msg:60.60s}", end="", file=sys.stderr, flush=True)

    mech = mechanics()
    test = make_triplets(args.triplets, 2)
    afc = run_2afc(net_seeds=tuple(range(args.nets)), n_train=args.triplets, n_test=args.triplets,
                   steps=args.steps, test=test, progress=progress)
    real = real_lpips_2afc(test, progress=progress) if args.real else None
    if not args.quiet:
        print(file=sys.stderr)
    if args.json:
        out = {
            "mechanics": mech.as_dict(),
            "twoafc": afc.as_dict(),
            "checks": {
                "cosine_gap": mech.cosine_gap,
                "quadrant": {"scalar": mech.quadrant.scalar, "map_mean": mech.quadrant.map_mean,
                             "share": mech.quadrant.share},
            },
        }
        if real is not None:
            out["real_lpips"] = {
                net: ({"baseline": r.baseline.as_dict(), "lin": r.lin.as_dict() if r.lin else None, "note": r.note}
                      if r.available else {"unavailable": r.note})
                for net, r in real.items()
            }
        print(json.dumps(out))
    else:
        print(_format_tables(mech, afc, real))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
