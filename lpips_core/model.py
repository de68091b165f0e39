"""The LPIPS model: features → unit-normalise → (lin) channel weights → maps → per-layer → total.

Eq. 1 of Zhang et al. (2018), as the reference ``lpips`` 0.1.4 package computes it::

    d(x, y) = Σ_l  1/(H_l W_l) Σ_{h,w}  Σ_c  v_{l,c} (ŷ_{l,hwc}(x) − ŷ_{l,hwc}(y))²

with ``ŷ = f / (‖f‖₂ + 1e-10)`` over channels, ``v ≥ 0`` the lin weights applied to the *squared*
differences (``v = 1`` for the uncalibrated baseline) and, for version 0.1, the input first
mapped by the reference scaling layer ``(x − shift) / scale``. Version 0.0 skips that scaling
(the original release's bug, kept for comparison).

The model follows :mod:`lpips_core.protocol`: ``model(x, y)`` is differentiable with respect to
both inputs (use it as a loss, as the reference's forward); ``features``, ``reference_features``,
``compare``, ``compare_features``, ``compare_batch`` and the channel terms run under
:func:`torch.inference_mode` on the fast path (in-place normalisation, no graph).
"""

from __future__ import annotations

import os
from typing import Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .backbones import CHANNELS, LAYER_NAMES, Backbone
from .devices import resolve_device
from .protocol import Features, LearnedMetric, _compiling
from .weights import NETS, VERSIONS, lin_weights, load_backbone_weights

__all__ = ["EPS", "LPIPS", "LPIPSBase", "layer_term_maps", "unit_normalize"]

Net = Literal["alex", "vgg", "squeeze"]
Version = Literal["0.1", "0.0"]

EPS = 1e-10
_SHIFT = (-0.030, -0.088, -0.188)
_SCALE = (0.458, 0.448, 0.450)


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


def _difference(a_hat: torch.Tensor, b: torch.Tensor, *, raw_b: bool, own_b: bool = False) -> torch.Tensor:
    """``±(â − b̂)`` for one layer (it is squared next). With ``raw_b`` the features ``b`` are
    transient and not normalised yet: they are normalised and differenced in place, without
    allocating full-size temporaries. With ``own_b`` they are normalised already but transient
    too (nobody else holds them): the difference overwrites them."""
    if raw_b:
        if b.shape[0] >= a_hat.shape[0]:
            return _unit_normalize_(b).sub_(a_hat)
        return a_hat - _unit_normalize_(b.clone())
    if own_b and b.shape[0] >= a_hat.shape[0]:
        return b.sub_(a_hat)
    return a_hat - b


def _numpy_head(device: torch.device) -> bool:
    """Whether :meth:`LPIPSBase.pair_channel_terms` runs its head (normalise, difference, square,
    spatial mean) in NumPy on one thread: on a CPU with at most two intra-op threads.

    Those passes are short and memory-bound, about nine per layer; on two OpenMP threads each
    is a fork/join that waits whenever another process holds one of the two cores, so on a busy
    host the head runs faster on one thread than on two, and fastest in NumPy
    (docs/performance.md, "Measurements behind the code's choices"). With more threads the
    bandwidth of several cores wins. (``compare`` and ``forward`` keep the PyTorch head.)
    """
    return device.type == "cpu" and torch.get_num_threads() <= 2


def _np_unit_normalize_(f: np.ndarray) -> np.ndarray:
    """:func:`_unit_normalize_` of an ``(N, C, H, W)`` float32 array, in NumPy (one thread)."""
    r = np.einsum("nchw,nchw->nhw", f, f)
    np.sqrt(r, out=r)
    r += np.float32(EPS)
    np.reciprocal(r, out=r)
    f *= r[:, None]
    return f


def _np_prepare(taps: list[torch.Tensor]) -> list[torch.Tensor]:
    """Normalise CPU taps in place through their NumPy views."""
    for t in taps:
        _np_unit_normalize_(t.numpy())
    return taps


#: Both sides' maps of one layer of a chunk, in bytes, up to which the NumPy head normalises and
#: differences the chunk in one go rather than pair by pair (they stay in a core's cache either way).
_NP_WHOLE_CHUNK_BYTES = 512 << 10


def _np_channel_terms(fx: Sequence[torch.Tensor], fy: Sequence[torch.Tensor], raw_y: bool | str) -> list[torch.Tensor]:
    """Per layer ``(N, C_l)``: ``mean_hw((ŷ − x̂)²)``, overwriting the transient ``fy`` (normalised
    first if ``raw_y``); ``fx`` normalised, a batch of 1 or as many as ``fy``.

    ``raw_y == "both"``: neither side is normalised yet (both halves of one backbone batch, both
    transient). Each pair is then normalised and differenced on its own while its maps are still
    in the cache: the same operations on the same values as over the whole chunk, so the same
    bits, in less time than five passes over the chunk's maps, each from memory
    (docs/performance.md, "Measurements behind the code's choices"). A layer
    whose maps for the whole chunk fit in :data:`_NP_WHOLE_CHUNK_BYTES` is done in one go instead
    (the same bits again, and fewer calls: the small maps of the Conventions grid).
    """
    out = []
    for a, b in zip(fx, fy):
        na, nb = a.numpy(), b.numpy()
        if raw_y == "both" and na.nbytes + nb.nbytes <= _NP_WHOLE_CHUNK_BYTES:
            _np_unit_normalize_(na)
            _np_unit_normalize_(nb)
            out.append(torch.from_numpy(_np_squared_difference_mean_(na, nb)))
            continue
        if raw_y == "both":
            terms = np.empty(nb.shape[:2], dtype=nb.dtype)
            for i in range(nb.shape[0]):
                ai, bi = na[i:i + 1], nb[i:i + 1]
                _np_unit_normalize_(ai)
                _np_unit_normalize_(bi)
                terms[i] = _np_squared_difference_mean_(ai, bi)[0]
            out.append(torch.from_numpy(terms))
            continue
        if raw_y:
            _np_unit_normalize_(nb)
        out.append(torch.from_numpy(_np_squared_difference_mean_(na, nb)))
    return out


def _np_squared_difference_mean_(na: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """``mean_hw((nb − na)²)`` per image and channel, ``(N, C)``, computed in ``nb``'s memory."""
    np.subtract(nb, na, out=nb)
    np.multiply(nb, nb, out=nb)
    return np_position_mean(nb)


#: Positions summed in float32 per block by :func:`np_position_mean` before the blocks are summed
#: in float64: the float32 part of the error is that of a 256-term sum, whatever the map's size.
POSITION_BLOCK = 256


def np_position_mean(d: np.ndarray) -> np.ndarray:
    """The mean over positions of an ``(N, C, H, W)`` float32 array, ``(N, C)`` float32, with an
    error that does not grow with ``H · W``.

    NumPy sums pairwise only along the contiguous axis of a reduction. In the NCHW layout the
    positions are that axis, and ``np.add.reduce`` sums them pairwise. In the channels-last
    layout (the oneDNN backbones' output) the channels are, and a plain ``mean`` over the
    positions adds them one after another into a float32 accumulator per channel: on random
    maps its relative error was −7e-6 at 256², −5e-5 at 512², −4e-4 at 1024² (always low).
    There the positions are summed in float32 in blocks of :data:`POSITION_BLOCK` rows (one
    contiguous row of ``C`` values per position), and the block sums in float64: 4e-8 at every
    size, in the time of the plain ``mean`` (``benchmarks/accumulation.py``).
    """
    n, c, h, w = d.shape
    hw = h * w
    if c > 1 and d.strides[1] == d.itemsize and d.strides[3] == c * d.itemsize and d.strides[2] == w * c * d.itemsize:
        rows = d.transpose(0, 2, 3, 1).reshape(n, hw, c)  # a view: one row of C values per position
        full = hw - hw % POSITION_BLOCK
        blocks = np.add.reduce(rows[:, :full].reshape(n, full // POSITION_BLOCK, POSITION_BLOCK, c), axis=2)
        total = np.add.reduce(blocks, axis=1, dtype=np.float64)
        if full < hw:
            total += np.add.reduce(rows[:, full:], axis=1, dtype=np.float64)
        return (total / hw).astype(np.float32)
    flat = d.reshape(n, c, hw)  # NCHW (a view): positions contiguous, summed pairwise
    if flat.strides[2] != d.itemsize:
        return (np.add.reduce(flat, axis=2, dtype=np.float64) / hw).astype(np.float32)
    return (np.add.reduce(flat, axis=2).astype(np.float64) / hw).astype(np.float32)


def _weighted_sum(d2: torch.Tensor, weights: Sequence[torch.Tensor] | None, layer: int) -> torch.Tensor:
    """``Σ_c v_c d2_c`` per position: ``(N, C, H, W)`` → ``(N, 1, H, W)``."""
    if weights is None:
        return d2.sum(1, keepdim=True)
    return F.conv2d(d2, weights[layer].to(d2).view(1, -1, 1, 1))


class _LiveLayerTerm(torch.autograd.Function):
    """One layer's term against a fixed target, ``(N,)``: ``Σ_c v_c · mean_hw((f̂ − t)²)`` with
    ``f̂`` the unit-normalised raw tap ``f`` (the side that requires grad) and ``t`` the fixed
    side's normalised map, forward and backward each in a few passes over the maps.

    Autograd over the plain formula (:func:`unit_normalize`, the difference, its square, the lin
    weights, the mean) saves and re-reads about ten full-size tensors per layer; with VGG16 at
    256 px they held a training step at 1.4× its backbone passes (docs/performance.md). The
    backward here is the closed form: with ``r = ‖f‖`` over channels, ``s = r + ε`` and
    ``g = ∂L/∂f̂ = 2 v_c (f̂ − t) / (H W)`` times the incoming gradient,
    ``∂L/∂f = (g − f · ⟨g, f⟩ / (s r)) / s``. Where ``r = 0`` (a position where every channel is
    0) the second part is 0; the plain formula gives NaN there (the square root's derivative at
    0), as the reference does.

    A backward with ``create_graph=True`` (a gradient of a gradient) is computed through the
    plain formula instead, so that it can itself be differentiated.
    """

    @staticmethod
    def forward(f: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None):
        r = f.pow(2).sum(1, keepdim=True).sqrt_()
        inv = (r + EPS).reciprocal_()
        d = f * inv
        d = d.sub_(target) if d.shape == torch.broadcast_shapes(d.shape, target.shape) else d - target
        return _LiveLayerTerm._weigh(d.square().mean((2, 3)), weights), d, r, inv

    @staticmethod
    def _weigh(ch: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        """``(N, C)`` channel means → ``(N,)``: weighted by the lin weights, or summed (baseline)."""
        return ch.sum(1) if weights is None else ch @ weights.to(ch)

    @staticmethod
    def setup_context(ctx, inputs, output):
        f, _, weights = inputs
        _, d, r, inv = output
        ctx.save_for_backward(f, d, r, inv)  # not the target: f̂ − d gives it back where needed
        ctx.weights = weights
        ctx.mark_non_differentiable(d, r, inv)

    @staticmethod
    def backward(ctx, grad, *_):
        f, d, r, inv = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: through the plain formula, differentiable again
            target = f.detach() * inv - d
            with torch.enable_grad():
                f_ = f if f.requires_grad else f.detach().requires_grad_()
                term = _LiveLayerTerm._weigh((unit_normalize(f_) - target).pow(2).mean((2, 3)), ctx.weights)
                (gf,) = torch.autograd.grad(term, f_, grad, create_graph=True)
            return gf, None, None
        coef = grad.view(-1, 1, 1, 1) * (2.0 / (d.shape[2] * d.shape[3]))
        if ctx.weights is not None:
            coef = coef * ctx.weights.to(d).view(1, -1, 1, 1)
        g = d * coef  # ∂L/∂f̂
        dot = (g * f).sum(1, keepdim=True)  # ⟨g, f⟩ over channels: 0 where r = 0 (there f = 0)
        k = dot * inv * inv / r.clamp_min(torch.finfo(r.dtype).tiny)
        gf = g.mul_(inv).sub_(f * k)
        if gf.shape != f.shape:  # a batch of 1 against N
            gf = gf.sum(0, keepdim=True)
        return gf, None, None


class LPIPSBase(LearnedMetric):
    """LPIPS's recipe on any backbone: scaling layer, taps, unit normalisation, (lin) weights on the
    squared differences, spatial mean, sum over layers. :class:`LPIPS` and
    :class:`~lpips_core.stlpips.STLPIPS` build their parts and hand them to this constructor.

    Args:
        net, version: the configuration (``version`` tags features: only equal ones compare).
        backbone: a module mapping the scaled input to the tapped activations (a list).
        layer_names, channels: per tap.
        lin: per layer a ``(C_l,)`` weight tensor, or ``None`` for the baseline (all ones).
        weights: where the weights came from (shown to users).
        scaling: apply ``(x − shift) / scale`` first (version 0.1 and ST-LPIPS).
    """

    metric = "lpips"
    input_range = "[-1,1]"
    has_maps = True

    def __init__(self, *, net: str, version: str, backbone: nn.Module, layer_names: Sequence[str],
                 channels: Sequence[int], lin: Sequence[torch.Tensor] | None, weights: str,
                 device: torch.device | str | None, scaling: bool, shift=_SHIFT, scale=_SCALE,
                 label: str | None = None):
        super().__init__()
        self.net = net
        self.version = version
        self.lin = lin is not None
        self.layer_names = tuple(layer_names)
        self.weights = weights
        self.backbone = backbone
        self._scaling = scaling
        self.register_buffer("shift", torch.as_tensor(shift, dtype=torch.float32).view(1, 3, 1, 1).clone(), persistent=False)
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32).view(1, 3, 1, 1).clone(), persistent=False)
        for i, w in enumerate(lin or ()):
            if w.numel() != channels[i]:
                raise ValueError(f"lin weights of layer {i} have {w.numel()} channels, expected {channels[i]}")
            self.register_buffer(f"lin{i}", w.reshape(-1).float(), persistent=False)
        self._finish(device, label=label or net)

    @property
    def channel_weights(self) -> list[torch.Tensor] | None:
        """The lin weights per layer, ``[(C_l,), …]``, or ``None`` for the baseline."""
        if not self.lin:
            return None
        return [getattr(self, f"lin{i}") for i in range(len(self.layer_names))]

    def extra_repr(self) -> str:
        return f"net={self.net!r}, version={self.version!r}, lin={self.lin}, device={self.device}, weights={self.weights!r}"

    # ------------------------------------------------------------------ protocol parts
    def _stages(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self._scaling:
            x = (x - self.shift) / self.scale
        return list(self.backbone(x))

    def _prepare(self, stages: list[torch.Tensor]) -> list[torch.Tensor]:
        return [_unit_normalize_(t) for t in stages]

    def _graph_maps(self, stages: list[torch.Tensor]) -> list[torch.Tensor]:
        return [unit_normalize(t) for t in stages]

    def _fixed_target_terms(self, stages: list[torch.Tensor], fixed: list[torch.Tensor], *,
                            first: bool) -> torch.Tensor:
        """Each layer through :class:`_LiveLayerTerm` (symmetric, so ``first`` does not matter);
        while ``torch.compile`` traces, the plain formula, which it fuses itself."""
        if _compiling():
            return super()._fixed_target_terms(stages, fixed, first=first)
        weights = self.channel_weights
        total = 0
        for i, (f, t) in enumerate(zip(stages, fixed)):
            total = total + _LiveLayerTerm.apply(f, t, None if weights is None else weights[i])[0]
        return total

    def _graph_terms(self, fx: list[torch.Tensor], fy: list[torch.Tensor]) -> torch.Tensor:
        weights = self.channel_weights
        total = 0
        for i, (a, b) in enumerate(zip(fx, fy)):
            d2 = (a - b).pow(2)
            m = d2.sum(1, keepdim=True) if weights is None else F.conv2d(d2, weights[i].to(d2).view(1, -1, 1, 1))
            total = total + m.mean((2, 3))[:, 0]
        return total

    def _terms(self, fx: Sequence[torch.Tensor], fy: Sequence[torch.Tensor], *, spatial: bool,
               size: tuple[int, int], raw_y: bool = False, own_y: bool = False):
        """Per-layer terms ``(N, L)`` and, if ``spatial``, the upsampled maps ``(N, L, H, W)``, on the device.

        With ``raw_y`` the ``fy`` taps are transient and not normalised yet: they are normalised
        and differenced in place; with ``own_y`` they are normalised and transient (overwritten).
        Without maps, each layer's term is ``Σ_c v_c · mean_hw(Δ_c²)``: the same number as the
        mean of the weighted map (the sums commute) without building it.
        """
        weights = self.channel_weights
        per_layer, maps = [], []
        for i, (a, b) in enumerate(zip(fx, fy)):
            d2 = _difference(a, b, raw_b=raw_y, own_b=own_y).square_()
            if spatial:
                m = _weighted_sum(d2, weights, i)
                per_layer.append(m.mean((2, 3)))
                maps.append(F.interpolate(m, size=size, mode="bilinear", align_corners=False))
            else:
                ch = d2.mean((2, 3))
                per_layer.append((ch.sum(1) if weights is None else ch @ weights[i]).unsqueeze(1))
        return torch.cat(per_layer, 1), (torch.cat(maps, 1) if spatial else None), {}

    # ------------------------------------------------------------------ fast paths
    @torch.inference_mode()
    def channel_terms(self, fx: Features, fy: Features) -> list[torch.Tensor]:
        """Per layer ``(N, C_l)``: the spatial mean of each channel's squared difference, unweighted.

        ``d_l = Σ_c v_{l,c} · channel_terms[l][:, c]`` (``v = 1`` for the baseline).
        """
        self._check_pair(fx, fy)
        return [(a - b).square_().mean((2, 3)).cpu() for a, b in zip(fx.maps, fy.maps)]

    @torch.inference_mode()
    def pair_channel_terms(self, x: torch.Tensor, y: torch.Tensor, *,
                           input_affine: tuple[float, float] | None = None) -> list[torch.Tensor]:
        """:meth:`channel_terms` straight from inputs ``(N, 3, H, W)`` in ``[-1, 1]``: lin and
        baseline distances of the same pairs from one pass (the Conventions grid, datasets).

        Args:
            input_affine: ``(a, b)``: the inputs are in another range, which ``x · a + b`` maps to
                what the network is fed (``(2, -1)`` for images in ``[0, 1]``). The mapping and the
                version's scaling layer are then applied as one ``x · gain + bias`` (a few float32
                ulps from applying them in turn), written straight into the backbone's batch.
        """
        if _numpy_head(self.device):
            parts = [_np_channel_terms(fx, fy, raw)
                     for fx, fy, _, raw in self._pair_chunks(x, y, input_affine=input_affine, numpy=True)]
        else:
            parts = [[_difference(a, b, raw_b=raw, own_b=not raw).square_().mean((2, 3)) for a, b in zip(fx, fy)]
                     for fx, fy, _, raw in self._pair_chunks(x, y, input_affine=input_affine)]
        return [torch.cat(layer).cpu() for layer in zip(*parts)]

    def shares_backbone(self, other) -> bool:
        """Whether ``other``'s backbone computes exactly what this one's does (the same network
        and equal weights: VGG16 of version 0.0 and 0.1), so one pass can serve both."""
        if other is self:
            return True
        mine, theirs = self.backbone, getattr(other, "backbone", None)
        if theirs is mine:
            return True
        if type(theirs) is not type(mine) or getattr(theirs, "net", None) != getattr(mine, "net", None):
            return False
        a, b = dict(mine.named_parameters()), dict(theirs.named_parameters())
        return a.keys() == b.keys() and all(a[k].shape == b[k].shape and a[k].device == b[k].device
                                             and torch.equal(a[k], b[k]) for k in a)

    @torch.inference_mode()
    def pair_channel_terms_together(self, jobs: Sequence[tuple["LPIPSBase", torch.Tensor, torch.Tensor]]
                                    ) -> list[list[torch.Tensor]]:
        """:meth:`pair_channel_terms` of several ``(model, x, y)`` of one size, whose models
        :meth:`shares_backbone` with this one, in backbone batches that hold whole jobs (as many
        as :meth:`images_per_batch` allows): each job's inputs are scaled by its own model (its
        version's scaling layer), the backbone is this one. Small inputs (the 64 px searches of
        explain) then read the deep layers' weights once for all of them rather than once per
        job. ``x``, ``y``: ``(N, 3, H, W)`` in ``[-1, 1]`` on a CPU with the NumPy head
        (:func:`_numpy_head`). Returns each job's per-layer ``(N, C_l)`` terms."""
        if not jobs:
            return []
        size = tuple(jobs[0][1].shape[-2:])
        inputs = []
        for model, x, y in jobs:
            x, y = model._check_input(x, "x"), model._check_input(y, "y")
            model._check_sizes(x, y)
            if tuple(x.shape[-2:]) != size or x.shape[0] != y.shape[0]:
                raise ValueError("pair_channel_terms_together needs jobs of one size, with as many x as y")
            inputs.append(model._pair_input(x, y, None, numpy=True))
        per = max(self.images_per_batch(*size, images=sum(t.shape[0] for t in inputs)), 2)
        out: list[list[torch.Tensor]] = []
        start = 0
        while start < len(inputs):
            stop, images = start + 1, inputs[start].shape[0]
            while stop < len(inputs) and images + inputs[stop].shape[0] <= per:
                images += inputs[stop].shape[0]
                stop += 1
            taps = self._backbone_taps(torch.cat(inputs[start:stop]) if stop - start > 1 else inputs[start])
            at = 0
            for t in inputs[start:stop]:
                n = t.shape[0] // 2
                part = [tap[at:at + 2 * n] for tap in taps]
                out.append(_np_channel_terms([p[:n] for p in part], [p[n:] for p in part], "both"))
                at += 2 * n
            start = stop
        return out

    def _taps(self, x: torch.Tensor) -> tuple[list[torch.Tensor], tuple[int, int]]:
        """Validated input → the raw (not yet normalised) taps and the input size."""
        x = self._check_input(x)
        return self._run(x), (x.shape[-2], x.shape[-1])

    def _affine(self, input_affine: tuple[float, float]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gain, bias)``, each ``(1, 3, 1, 1)``: the backbone input is ``x · gain + bias``
        (``x · a + b``, then the scaling layer if the version has it; folded in float64)."""
        a, b = float(input_affine[0]), float(input_affine[1])
        if not self._scaling:
            return torch.full_like(self.shift, a), torch.full_like(self.shift, b)
        shift, scale = self.shift.double(), self.scale.double()
        return (a / scale).to(self.shift.dtype), ((b - shift) / scale).to(self.shift.dtype)

    def _scaled(self, x: torch.Tensor, input_affine: tuple[float, float] | None, *,
                numpy: bool = False) -> torch.Tensor:
        """Validated input → the backbone's input (as :meth:`_stages` scales it when ``input_affine``
        is ``None``; with ``numpy``, a CPU tensor, by NumPy on one thread: the same float32
        operations in the same order, so the same bits)."""
        if input_affine is None and numpy and self._scaling:
            out = np.subtract(x.detach().numpy(), self.shift.numpy())
            return torch.from_numpy(np.divide(out, self.scale.numpy(), out=out))
        if input_affine is None:
            return (x - self.shift) / self.scale if self._scaling else x
        gain, bias = self._affine(input_affine)
        return torch.addcmul(bias, x, gain)

    def _pair_input(self, xc: torch.Tensor, yc: torch.Tensor, input_affine: tuple[float, float] | None, *,
                    numpy: bool = False) -> torch.Tensor:
        """``xc`` and ``yc`` scaled into one ``(2n, 3, H, W)`` backbone batch, without an extra copy
        (with ``numpy`` and an ``input_affine``: by NumPy on one thread, CPU tensors)."""
        n = xc.shape[0]
        out = torch.empty((2 * n, *xc.shape[1:]), dtype=xc.dtype, device=xc.device)
        if numpy:  # one thread: no fork/join per elementwise pass (see _numpy_head)
            o, xa, ya = out.numpy(), xc.detach().numpy(), yc.detach().numpy()
            if input_affine is not None:
                gain, bias = (t.numpy() for t in self._affine(input_affine))
                np.multiply(xa, gain, out=o[:n])
                np.multiply(ya, gain, out=o[n:])
                o += bias
            elif self._scaling:  # the scaling layer, as the reference computes it
                np.subtract(xa, self.shift.numpy(), out=o[:n])
                np.subtract(ya, self.shift.numpy(), out=o[n:])
                np.divide(o, self.scale.numpy(), out=o)
            else:
                o[:n], o[n:] = xa, ya
            return out
        if input_affine is None and not self._scaling:
            return torch.cat([xc, yc], out=out)
        if input_affine is None:  # the scaling layer, as the reference computes it
            torch.sub(xc, self.shift, out=out[:n])
            torch.sub(yc, self.shift, out=out[n:])
            return out.div_(self.scale)
        gain, bias = self._affine(input_affine)
        torch.addcmul(bias, xc, gain, out=out[:n])
        torch.addcmul(bias, yc, gain, out=out[n:])
        return out

    def _backbone_taps(self, inp: torch.Tensor) -> list[torch.Tensor]:
        """The raw taps of an input already scaled for the backbone (:meth:`_run` without :meth:`_stages`'s scaling)."""
        try:
            return list(self.backbone(inp))
        except (RuntimeError, ValueError) as exc:  # as LearnedMetric._run words it
            if any(s in str(exc).lower() for s in ("size", "kernel", "padding", "dimension")):
                h, w = inp.shape[-2:]
                raise ValueError(f"an input of {h}×{w} px is too small for the {self._label} backbone: {exc}") from exc
            raise

    def _pair_chunks(self, x: torch.Tensor, y: torch.Tensor, *, input_affine: tuple[float, float] | None = None,
                     numpy: bool = False):
        """Yield ``(normalised taps of one side, taps of the other, input size, raw)`` over chunks of
        pairs sized by :meth:`images_per_batch` (the batch measured fastest on this host for
        this many images, :mod:`lpips_core.batching`; both sides of a chunk in one backbone batch when
        two images fit). ``raw``: the other side's taps are not normalised yet (else they are,
        together with the first side's, in one pass over the batch); either way they are
        transient. The squared difference is symmetric, so a batch of 1 on either side is the
        cached-style "one against many" case. ``input_affine``: as :meth:`pair_channel_terms`;
        ``numpy``: the elementwise work around the backbone (input mapping, normalisation) in
        NumPy on one thread (CPU tensors; see :func:`_numpy_head`); a chunk whose two sides share
        one batch then comes with neither side normalised and ``raw == "both"``
        (:func:`_np_channel_terms` normalises it pair by pair)."""
        prepare = _np_prepare if numpy else self._prepare
        x, y = self._check_input(x, "x"), self._check_input(y, "y")
        self._check_sizes(x, y)
        size = (x.shape[-2], x.shape[-1])
        # images through the backbone in chunks: both sides of equal batches, else the many side
        images = x.shape[0] + y.shape[0] if x.shape[0] == y.shape[0] else max(x.shape[0], y.shape[0])
        per = self.images_per_batch(*size, images=images)
        if x.shape[0] != y.shape[0]:
            one, many = (x, y) if x.shape[0] == 1 else (y, x)
            f_one = prepare(self._backbone_taps(self._scaled(one, input_affine, numpy=numpy)))
            for chunk in many.split(per):
                yield f_one, self._backbone_taps(self._scaled(chunk, input_affine, numpy=numpy)), size, True
            return
        if per < 2:
            for xc, yc in zip(x.split(1), y.split(1)):
                fx = prepare(self._backbone_taps(self._scaled(xc, input_affine, numpy=numpy)))
                yield fx, self._backbone_taps(self._scaled(yc, input_affine, numpy=numpy)), size, True
            return
        for xc, yc in zip(x.split(per // 2), y.split(per // 2)):
            taps = self._backbone_taps(self._pair_input(xc, yc, input_affine, numpy=numpy))
            n = xc.shape[0]
            if numpy:  # normalised pair by pair in _np_channel_terms
                yield [t[:n] for t in taps], [t[n:] for t in taps], size, "both"
                continue
            taps = prepare(taps)
            yield [t[:n] for t in taps], [t[n:] for t in taps], size, False

    def _pair_result(self, x: torch.Tensor, y: torch.Tensor, *, spatial: bool):
        parts = [self._terms(fx, fy, raw_y=raw, own_y=not raw, spatial=spatial, size=size)
                 for fx, fy, size, raw in self._pair_chunks(x, y)]
        per_layer = torch.cat([p[0] for p in parts])
        return per_layer, (torch.cat([p[1] for p in parts]) if spatial else None), {}

    def _batch_terms(self, fr: Features, chunk: torch.Tensor, *, spatial: bool):
        taps, size = self._taps(chunk)
        return self._terms(fr.maps, taps, raw_y=True, spatial=spatial, size=size)


def _lin(net: str, version: str, lin: bool, lin_path) -> list[torch.Tensor] | None:
    """The channel weights :class:`LPIPS` uses: a given file's, the released ``version``'s, or none."""
    if lin_path is None:
        return lin_weights(net, version) if lin else None
    if not lin:
        raise ValueError("lin_path gives lin weights: it needs lin=True")
    from .weights import lin_weights_file

    return lin_weights_file(lin_path, net)


class LPIPS(LPIPSBase):
    """Exact LPIPS (reference ``lpips`` 0.1.4) on torchvision backbones; frozen, eval mode.

    Args:
        net: ``"alex"`` (default), ``"vgg"`` or ``"squeeze"``.
        version: ``"0.1"`` (default) or ``"0.0"`` (no input scaling; the original release).
        lin: ``True`` for the learned channel weights, ``False`` for the uncalibrated baseline
            (all channels weighted 1: the reference's ``lpips=False``).
        device: ``None`` = auto (CUDA, then MPS, then CPU), or a torch device.
        backbone_state_dict: inject ``features`` weights (torchvision layout) instead of
            resolving them (tests, experiments); ``weights`` then reads ``"injected"``.
        lin_path: a lin weights file of the reference's layout (e.g. fitted by ``python -m
            lpips_core fit-lin``) used instead of the released ``version`` weights; ``lin_file``
            then names it. Needs ``lin=True``.

    Attributes:
        weights: where the backbone weights came from (see :mod:`lpips_core.weights`).
        layer_names: the taps, e.g. ``("relu1", …, "relu5")``.
        channel_weights: the lin weights per layer, ``[(C_l,), …]``, or ``None`` for baseline.
        ref_cache: the reference-feature cache (:class:`~lpips_core.caching.FeatureCache`).

    Differentiable: ``model(x, y)`` (see :mod:`lpips_core.protocol`); every other call is
    inference-only.

    Example:
        >>> model = LPIPS("alex")                       # doctest: +SKIP
        >>> x = torch.rand(1, 3, 64, 64) * 2 - 1        # images in [-1, 1]
        >>> model(x, x)                                 # doctest: +SKIP
        tensor([0.])
    """

    def __init__(
        self,
        net: Net = "alex",
        version: Version = "0.1",
        lin: bool = True,
        device: torch.device | str | None = None,
        *,
        backbone_state_dict: dict[str, torch.Tensor] | None = None,
        lin_path: str | os.PathLike | None = None,
    ):
        if net not in NETS:
            raise ValueError(f"net must be one of {NETS}, got {net!r}")
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
        if not isinstance(lin, bool):
            raise TypeError(f"lin must be a bool, got {lin!r}")
        device = resolve_device(device)
        if backbone_state_dict is None:
            resolved = load_backbone_weights(net)
            backbone_state_dict, source = resolved.state_dict, resolved.source
        else:
            source = "injected"
        super().__init__(
            net=net, version=version, backbone=Backbone(net, backbone_state_dict), layer_names=LAYER_NAMES[net],
            channels=CHANNELS[net], lin=_lin(net, version, lin, lin_path), weights=source, device=device,
            scaling=version == "0.1",
        )
        self.lin_file = None if lin_path is None else os.fspath(lin_path)
