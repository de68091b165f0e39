"""The one protocol every learned metric follows (LPIPS, ST-LPIPS, DISTS and what comes next).

A learned metric is a frozen ``nn.Module`` (:class:`LearnedMetric`) with:

=====================================  ===========================================================
call                                   what it does
=====================================  ===========================================================
``model(x, y, normalize=None)``        ``(N,)`` distances (``reduction="mean"``/``"sum"``: 0-d);
                                       **differentiable** w.r.t. ``x`` and ``y`` whenever autograd
                                       is enabled and an input requires grad (the reference
                                       packages' forward; a side that does not runs without a
                                       graph); otherwise the fast path. Inputs in the metric's
                                       range, or in ``[0, 1]`` with ``normalize=True``; values
                                       outside raise ``ValueError`` (not under ``torch.compile``,
                                       which traces it as one graph).
``features(x)``                        :class:`Features`: the network's stages of a batch, once.
``reference_features(x)``              ``features`` through a thread-safe, byte-bounded LRU keyed
                                       by the content of ``x`` (:class:`~lpips_core.caching.FeatureCache`).
``compare_features(fx, fy, spatial=)`` :class:`MetricResult` from precomputed features.
``compare(x, y, spatial=)``            :class:`MetricResult` of pairs (a batch of 1 broadcasts).
``compare_batch(ref, others, ...)``    one reference ``(1, 3, H, W)`` against ``(K, 3, H, W)``.
=====================================  ===========================================================

Everything but ``model(x, y)`` runs under :func:`torch.inference_mode`: no autograd graph is
built, and those paths stay as fast as a bare backbone pass allows. They take the network input
as given, without a range check: the Conventions lesson feeds deliberately wrong ranges through
them (``[0, 1]`` or ``[0, 255]`` where ``[-1, 1]`` is expected) to show what the mistake costs.

The result type is the same for every metric: ``total`` ``(N,)``, ``per_layer`` ``(N, L)``
(layers for LPIPS-like metrics, stages for DISTS), ``layer_maps`` ``(N, L, H, W)`` where the
metric has spatial maps, and named ``components`` (DISTS: ``texture`` and ``structure`` per stage).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Literal, Mapping, Sequence

import torch
from torch import nn

from . import batching
from .caching import FeatureCache
from .devices import resolve_device

__all__ = [
    "Features",
    "LearnedMetric",
    "MetricResult",
    "REDUCTIONS",
    "check_input",
]

#: The reductions ``model(x, y, reduction=…)`` takes: ``(N,)`` distances, their mean, their sum.
REDUCTIONS: tuple[str, ...] = ("none", "mean", "sum")
Reduction = Literal["none", "mean", "sum"]

#: Whether ``torch.compile`` (or ``torch.export``) is tracing the call (``False`` on a torch too
#: old to say: it has no ``torch.compiler.is_compiling``).
_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def check_input(
    x: torch.Tensor, device: torch.device, *, name: str = "x", value_range: str = "[-1,1]",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Validate a network input ``(N, 3, H, W)`` float tensor and move it to ``device`` as ``dtype``.

    Keeps the autograd history (``x.to`` is differentiable).

    Raises:
        TypeError: not a float tensor. ValueError: wrong shape or an empty batch.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor (N, 3, H, W) in {value_range}, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"{name} must have shape (N, 3, H, W), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch: shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a float tensor in {value_range}, got dtype {x.dtype}")
    return x.to(device, dtype, non_blocking=True)


# ----------------------------------------------------------------------------- data
@dataclass(frozen=True, eq=False)
class Features:
    """A metric's stages for a batch of images, ready for :meth:`LearnedMetric.compare_features`.

    Attributes:
        maps: one ``(N, C_l, H_l, W_l)`` tensor per stage, on the model's device (LPIPS-like
            metrics: unit-normalised taps; DISTS: the input, then its five taps).
        input_size: ``(H, W)`` of the network input (the size spatial maps are upsampled to).
        net, version: the configuration that produced them.
        metric: the registry name of the metric (features compare only within one metric,
            net and version).
    """

    maps: tuple[torch.Tensor, ...]
    input_size: tuple[int, int]
    net: str
    version: str | None
    metric: str = "lpips"

    @property
    def batch(self) -> int:
        return self.maps[0].shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held by the maps (what a cache entry costs)."""
        return sum(m.numel() * m.element_size() for m in self.maps)

    def __getitem__(self, index) -> "Features":
        if isinstance(index, int):
            index = slice(index, index + 1)
        return Features(tuple(m[index] for m in self.maps), self.input_size, self.net, self.version, self.metric)


@dataclass(frozen=True, eq=False)
class MetricResult:
    """What one comparison gives, on the CPU, for any learned metric.

    Attributes:
        total: ``(N,)`` the distance per pair.
        per_layer: ``(N, L)`` the per-layer (DISTS: per-stage) terms; they sum to ``total``.
        layer_maps: ``(N, L, H, W)`` each layer's unaveraged term map, bilinearly upsampled to the
            input size (the reference's ``spatial=True``); ``None`` when not asked or not defined.
        layer_names: the ``L`` layer (stage) names.
        components: named ``(N, L)`` parts of ``per_layer`` that sum to it (DISTS: ``texture``
            and ``structure``); empty for LPIPS-like metrics.
    """

    total: torch.Tensor
    per_layer: torch.Tensor
    layer_maps: torch.Tensor | None
    layer_names: tuple[str, ...]
    components: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def __float__(self) -> float:
        """The distance of a single pair as a Python float: ``float(model.compare(x, y))``.

        Raises:
            ValueError: the result holds more than one pair (use :meth:`tolist`).
        """
        if self.total.numel() != 1:
            raise ValueError(f"float() needs a result of one pair, this one has {self.total.numel()}; use .tolist()")
        return float(self.total.reshape(()))

    def tolist(self) -> list[float]:
        """The ``N`` distances as Python floats."""
        return [float(v) for v in self.total.detach().cpu().reshape(-1)]

    @property
    def spatial_map(self) -> torch.Tensor:
        """``(N, H, W)``: the layer maps summed, the reference's ``spatial=True`` output."""
        if self.layer_maps is None:
            raise ValueError("this result has no spatial maps (computed with spatial=False, or the metric has none)")
        return self.layer_maps.sum(1)

    @classmethod
    def cat(cls, parts: Sequence["MetricResult"]) -> "MetricResult":
        """Concatenate results of consecutive batches (same metric and layers)."""
        first = parts[0]
        maps = None if first.layer_maps is None else torch.cat([p.layer_maps for p in parts])
        comps = {k: torch.cat([p.components[k] for p in parts]) for k in first.components}
        return type(first)(
            torch.cat([p.total for p in parts]), torch.cat([p.per_layer for p in parts]), maps, first.layer_names, comps
        )


# ----------------------------------------------------------------------------- the base class
class LearnedMetric(nn.Module):
    """Base of every learned metric: frozen, always in eval mode, one device, one protocol.

    Subclasses set the class attributes, build their network, call :meth:`_finish`, and implement
    :meth:`_stages` (input → raw stage tensors, autograd-friendly), :meth:`_prepare` (raw stages →
    the stored :class:`Features` maps) and :meth:`_terms` (features → per-layer terms, maps and
    components). Everything else here is shared.

    Class attributes:
        metric: the registry name (``"lpips"``, ``"stlpips"``, ``"dists"``).
        input_range: the convention inputs must follow (``"[-1,1]"`` or ``"[0,1]"``).
        has_maps: whether the metric has spatial maps.
    """

    metric: ClassVar[str] = ""
    input_range: ClassVar[str] = "[-1,1]"
    has_maps: ClassVar[bool] = True
    #: Keep the weights channels-last on a CPU, so oneDNN's convolutions run without a layout
    #: reorder around every layer: faster for every backbone, distances within 5e-8 of the
    #: contiguous layout, gradients within the 1e-6 parity bound (the timings: docs/performance.md,
    #: "Measurements behind the code's choices").
    channels_last_on_cpu: ClassVar[bool] = True

    net: str
    version: str | None
    layer_names: tuple[str, ...]
    weights: str

    def _finish(self, device: torch.device | str | None, *, label: str | None = None) -> None:
        """Freeze, set eval mode, move to the device, create the reference cache."""
        self._label = label or f"{self.metric} {self.net}"
        self.requires_grad_(False)
        self.eval()
        self.device = resolve_device(device)
        self.to(self.device)
        if self.device.type == "cpu" and self.channels_last_on_cpu:
            self.to(memory_format=torch.channels_last)
        self.ref_cache = FeatureCache()
        self._warned_range = False

    def train(self, mode: bool = True) -> "LearnedMetric":
        return super().train(False)  # always eval: nothing here is trained

    def extra_repr(self) -> str:
        return f"net={self.net!r}, version={self.version!r}, device={self.device}, weights={self.weights!r}"

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype the model computes in (float32; float64 after ``model.double()``)."""
        for b in self.buffers():
            if b.is_floating_point():
                return b.dtype
        return torch.float32

    # --------------------------------------------------------------- to implement
    def _stages(self, x: torch.Tensor) -> list[torch.Tensor]:  # pragma: no cover - abstract
        """Validated input ``(N, 3, H, W)`` → the raw stage tensors (no in-place ops)."""
        raise NotImplementedError

    def _prepare(self, stages: list[torch.Tensor]) -> list[torch.Tensor]:
        """Raw stages → the maps stored in :class:`Features` (may work in place)."""
        return stages

    def _terms(self, fx: Sequence[torch.Tensor], fy: Sequence[torch.Tensor], *, spatial: bool,
               size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, torch.Tensor]]:
        """Prepared maps → ``(per_layer (N, L), maps (N, L, H, W) or None, components)``, on the device."""
        raise NotImplementedError  # pragma: no cover - abstract

    # --------------------------------------------------------------- shared
    def _check_input(self, x: torch.Tensor, name: str = "x") -> torch.Tensor:
        return check_input(x, self.device, name=name, value_range=self.input_range, dtype=self.dtype)

    def _spatial(self, spatial: bool | None) -> bool:
        if spatial is None:
            return self.has_maps
        if spatial and not self.has_maps:
            raise ValueError(f"{self._label} has no spatial map (its terms are statistics over whole feature maps)")
        return bool(spatial)

    def _run(self, x: torch.Tensor) -> list[torch.Tensor]:
        try:
            return list(self._stages(x))
        except (RuntimeError, ValueError) as exc:
            if any(s in str(exc).lower() for s in ("size", "kernel", "padding", "dimension")):
                raise ValueError(
                    f"an input of {x.shape[-2]}×{x.shape[-1]} px is too small for the {self._label} backbone: {exc}"
                ) from exc
            raise

    def _features(self, x: torch.Tensor) -> Features:
        x = self._check_input(x)
        maps = self._prepare(self._run(x))
        return Features(tuple(maps), (x.shape[-2], x.shape[-1]), self.net, self.version, self.metric)

    @torch.inference_mode()
    def features(self, x: torch.Tensor) -> Features:
        """Run ``x`` (``(N, 3, H, W)`` float in :attr:`input_range`) through the network once.

        Raises:
            ValueError: wrong shape, or an image too small for this network. TypeError: not a float tensor.
        """
        return self._features(x)

    @torch.inference_mode()
    def reference_features(self, x: torch.Tensor, *, keep: bool = True) -> Features:
        """:meth:`features` through this model's :class:`~lpips_core.caching.FeatureCache` (keyed by
        the content of ``x``).

        ``keep=False`` uses a cached entry but does not store a new one: for one-off references
        (a diagnosis's counterfactuals) that would push out the ones a user comes back to (a
        VGG16 reference at 512 px alone takes 122 MiB of the default 128).

        Returned features are shared between callers and threads: never modify them.
        """
        x = self._check_input(x)
        key = FeatureCache.key(x)
        if keep:
            return self.ref_cache.get_or_compute(key, lambda: self._features(x))
        hit = self.ref_cache.peek(key)
        return hit if hit is not None else self._features(x)

    def _check_pair(self, fx: Features, fy: Features) -> None:
        mine = (self.metric, self.net, self.version)
        for f in (fx, fy):
            if (f.metric, f.net, f.version) != mine:
                raise ValueError(
                    f"features of {f.metric} net={f.net}, version={f.version} cannot be compared by a "
                    f"{self.metric} net={self.net}, version={self.version} model"
                )
        if fx.input_size != fy.input_size:
            raise ValueError(f"features of a {fx.input_size} input and a {fy.input_size} input cannot be compared")
        if fx.batch != fy.batch and 1 not in (fx.batch, fy.batch):
            raise ValueError(f"batch sizes {fx.batch} and {fy.batch} do not broadcast")

    def _result(self, per_layer: torch.Tensor, maps: torch.Tensor | None,
                components: Mapping[str, torch.Tensor] | None = None) -> MetricResult:
        comps = {k: v.cpu() for k, v in (components or {}).items()}
        return MetricResult(per_layer.sum(1).cpu(), per_layer.cpu(), None if maps is None else maps.cpu(),
                            self.layer_names, comps)

    @torch.inference_mode()
    def compare_features(self, fx: Features, fy: Features, *, spatial: bool | None = None) -> MetricResult:
        """Compare precomputed features (a batch of 1 broadcasts against a batch of N).

        Args:
            spatial: also return the per-layer maps upsampled to the input size (default: when
                the metric has maps).
        """
        self._check_pair(fx, fy)
        return self._result(*self._terms(fx.maps, fy.maps, spatial=self._spatial(spatial), size=fx.input_size))

    def images_per_batch(self, height: int, width: int, *, images: int | None = None) -> int:
        """How many ``height × width`` images go through the network together.

        A CPU call with ``images`` (how many images it runs) of at least
        :data:`~lpips_core.batching.MIN_IMAGES` gets the batch size measured fastest per image on
        this host, among those the call can use (:mod:`lpips_core.batching`: measured once per
        host, backbone, thread count and size, and kept). Otherwise (a GPU, a single pair,
        ``images`` not given, calibration off) the memory rule :meth:`_batch_rule` decides.
        """
        rule = self._batch_rule(height, width)
        if images is None or images < batching.MIN_IMAGES or self.device.type != "cpu" or not batching.calibrated():
            return rule
        cap = min(images, max(1, batching.CPU_CAP_BYTES // self._first_stage_bytes(height, width)))
        if cap < 2:
            return 1
        from .backbones import nnpack_conv

        key = batching.case_key(
            f"{self.metric}-{self.net} {str(self.dtype).removeprefix('torch.')}", height, width,
            threads=torch.get_num_threads(), nnpack=nnpack_conv(torch.empty(0, dtype=self.dtype, device=self.device)),
            layout="channels-last" if self.channels_last_on_cpu else "nchw")

        def run(b: int) -> None:
            with torch.inference_mode():
                self._run(torch.rand(b, 3, height, width, dtype=self.dtype, device=self.device))

        return batching.fastest_batch(key, cap, run)

    def _first_stage_bytes(self, height: int, width: int) -> int:
        """Bytes of one image's first-stage activations (64 channels at the network's first stride)."""
        stride = getattr(getattr(self, "backbone", None), "first_stride", 1)
        return 64 * self.dtype.itemsize * -(-height // stride) * -(-width // stride)

    def _batch_rule(self, height: int, width: int) -> int:
        """The memory rule: as many images as keep the first stage's activations within a budget —
        12 MB on a CPU (a host with little cache runs bigger batches no faster per image, often
        slower: docs/performance.md, "Measurements behind the code's choices"), and 2 GB on a GPU."""
        budget = (12 << 20) if self.device.type == "cpu" else (2 << 30)
        return max(1, budget // self._first_stage_bytes(height, width))

    def _check_sizes(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if x.shape[-2:] != y.shape[-2:]:
            raise ValueError(f"x and y must have the same size, got {tuple(x.shape)} and {tuple(y.shape)}")
        if x.shape[0] != y.shape[0] and 1 not in (x.shape[0], y.shape[0]):
            raise ValueError(f"batch sizes {x.shape[0]} and {y.shape[0]} do not broadcast")

    def _pair_result(self, x: torch.Tensor, y: torch.Tensor, *, spatial: bool) -> tuple:
        """Generic pair path: both sides' features in one batch when they fit, then the terms."""
        x, y = self._check_input(x, "x"), self._check_input(y, "y")
        self._check_sizes(x, y)
        per = self.images_per_batch(*x.shape[-2:], images=2 * x.shape[0])
        if x.shape[0] == y.shape[0] and 2 * x.shape[0] <= max(2, per):
            both = self._features(torch.cat([x, y]))
            n = x.shape[0]
            fx, fy = both[:n], both[n:]
        else:
            fx, fy = self._features(x), self._features(y)
        return self._terms(fx.maps, fy.maps, spatial=spatial, size=fx.input_size)

    @torch.inference_mode()
    def compare(self, x: torch.Tensor, y: torch.Tensor, *, spatial: bool | None = None) -> MetricResult:
        """Compare ``x`` and ``y``: ``(N, 3, H, W)`` float in :attr:`input_range` (or 1 against N).

        Args:
            spatial: also return per-layer maps (default: when the metric has maps).
        """
        return self._result(*self._pair_result(x, y, spatial=self._spatial(spatial)))

    def _batch_terms(self, fr: Features, chunk: torch.Tensor, *, spatial: bool) -> tuple:
        """One chunk of :meth:`compare_batch` against the reference's features."""
        fo = self._features(chunk)
        return self._terms(fr.maps, fo.maps, spatial=spatial, size=fo.input_size)

    @torch.inference_mode()
    def compare_batch(
        self, reference: torch.Tensor, others: torch.Tensor, *, spatial: bool = False, chunk: int | None = None,
        keep_reference: bool = True,
    ) -> MetricResult:
        """One reference ``(1, 3, H, W)`` against many images ``(K, 3, H, W)``, all in :attr:`input_range`.

        The reference's features come from :meth:`reference_features` (cached; ``keep_reference``
        is its ``keep``); the others go through the network in batches of ``chunk`` (default:
        :meth:`images_per_batch` for this many images).
        """
        spatial = self._spatial(spatial)
        if not isinstance(reference, torch.Tensor) or reference.ndim != 4 or reference.shape[0] != 1:
            raise ValueError(f"reference must have shape (1, 3, H, W), got {tuple(getattr(reference, 'shape', ()))}")
        fr = self.reference_features(reference, keep=keep_reference)
        others = self._check_input(others, "others")
        if others.shape[-2:] != reference.shape[-2:]:
            raise ValueError(f"others must match the reference size {tuple(reference.shape[-2:])}, got {tuple(others.shape)}")
        if chunk is None:
            chunk = self.images_per_batch(others.shape[-2], others.shape[-1], images=others.shape[0])
        parts = [self._result(*self._batch_terms(fr, o, spatial=spatial)) for o in others.split(chunk)]
        return parts[0] if len(parts) == 1 else MetricResult.cat(parts)

    # --------------------------------------------------------------- the differentiable call
    def _distance_graph(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(N,)`` distances with the autograd graph (no in-place ops on anything autograd saves).

        When exactly one input requires grad (a loss against a fixed target, the usual case), the
        other goes through the network on its own, without a graph (:meth:`_fixed_maps`): in one
        batch with the first, autograd would carry the backward pass through its half too, which
        costs about as much again (docs/performance.md). Otherwise both sides share one batch (a
        batch of 1 expanded).
        """
        x, y = self._check_input(x, "x"), self._check_input(y, "y")
        self._check_sizes(x, y)
        if torch.is_grad_enabled() and x.requires_grad != y.requires_grad:
            if x.requires_grad:
                return self._fixed_target_terms(self._run(x), self._fixed_maps(y), first=True)
            return self._fixed_target_terms(self._run(y), self._fixed_maps(x), first=False)
        n = max(x.shape[0], y.shape[0])
        both = self._run(torch.cat([x.expand(n, -1, -1, -1), y.expand(n, -1, -1, -1)]))
        fx, fy = self._graph_maps([s[:n] for s in both]), self._graph_maps([s[n:] for s in both])
        return self._graph_terms(fx, fy)

    def _graph_maps(self, stages: list[torch.Tensor]) -> list[torch.Tensor]:
        """Raw stages → comparable maps, out of place (default: as :meth:`_prepare`)."""
        return self._prepare(stages)

    def _fixed_target_terms(self, stages: list[torch.Tensor], fixed: list[torch.Tensor], *,
                            first: bool) -> torch.Tensor:
        """``(N,)`` distances of the raw ``stages`` of the side that requires grad (with their graph)
        and the comparable maps of the fixed side (:meth:`_fixed_maps`); a batch of 1 broadcasts.
        ``first``: the side with the graph is ``x``. Default: :meth:`_graph_terms` of
        :meth:`_graph_maps`; a metric may fuse its head into fewer passes over the maps."""
        live = self._graph_maps(stages)
        return self._graph_terms(live, fixed) if first else self._graph_terms(fixed, live)

    def _fixed_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The comparable maps of an input no gradient flows to, as :meth:`features` computes them
        (the fast layout, NNPACK where it applies, normalised in place), under ``no_grad`` rather
        than inference mode: autograd may save them for the other side's backward pass."""
        with torch.no_grad():
            return self._prepare(self._run(x))

    def _graph_terms(self, fx: list[torch.Tensor], fy: list[torch.Tensor]) -> torch.Tensor:
        per_layer, _, _ = self._terms(fx, fy, spatial=False, size=(0, 0))
        return per_layer.sum(1)

    def forward(self, x: torch.Tensor, y: torch.Tensor, normalize: bool | None = None, *,
                reduction: Reduction = "none") -> torch.Tensor:
        """The distances of ``x`` and ``y`` (``(N, 3, H, W)`` float) on the model's device.

        Args:
            x, y: images in :attr:`input_range` (``[-1, 1]`` for LPIPS and ST-LPIPS, ``[0, 1]`` for
                DISTS), or in ``[0, 1]`` with ``normalize=True``. A batch of 1 broadcasts.
            normalize: ``True``: the inputs are ``[0, 1]`` images, mapped to the metric's range here
                (``2x − 1`` for LPIPS, as the reference's ``normalize=True``). ``False``: they are
                in the metric's range. ``None`` (default): as ``False``, and a ``[-1, 1]`` metric
                warns once per model when both inputs lie in ``[0, 1]`` — the forgotten
                normalisation, which gives a wrong number without an error (the Conventions page
                shows how wrong).
            reduction: ``"none"`` (default): ``(N,)``, one distance per pair (``N`` the larger
                batch); ``"mean"`` or ``"sum"``: a 0-d tensor, their mean or sum (the loss
                conventions of torchmetrics, piq and pyiqa).

        Differentiable with respect to both inputs when autograd is enabled and either requires
        grad (use it as a loss); otherwise computed on the fast, graph-free path. The network's
        parameters never require grad. When one input requires grad and the other does not (a
        fixed target), only the first carries a graph.

        Under ``torch.compile`` (``torch.compiler.is_compiling()``) the call traces as one graph:
        types, shapes and ``reduction`` are still checked (once, while tracing), but the two checks
        that read values are skipped, the range check (``ValueError``) and the forgotten-
        normalisation warning; both sides then run the differentiable path (no NNPACK, no
        measured batch sizes). Check the range eagerly once if the inputs are untrusted.

        Raises:
            ValueError: a value outside the expected range (the message gives the range found and
                the fix), a wrong shape, an unknown ``reduction``. TypeError: not a float tensor,
                a ``reduction`` that is not a string.
        """
        if not isinstance(reduction, str):
            raise TypeError(f"reduction must be a str, one of {REDUCTIONS}, got {type(reduction).__name__}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        compiling = _compiling()
        x, y = self._in_range(x, "x", normalize), self._in_range(y, "y", normalize)
        if normalize is None and not compiling and not self._warned_range and self.input_range == "[-1,1]" and \
                float(x.detach().amin()) >= 0 and float(y.detach().amin()) >= 0:
            self._warned_range = True
            warnings.warn(f"{type(self).__name__} ({self.net}): both inputs lie in [0, 1], but this metric expects [-1, 1]. If they "
                          "are [0, 1] images, pass normalize=True (or feed 2 * x - 1); pass normalize=False "
                          "to say they are in [-1, 1].", UserWarning, stacklevel=4)  # the caller of model(x, y)
        if normalize and self.input_range == "[-1,1]":
            x, y = x * 2 - 1, y * 2 - 1
        if compiling or (torch.is_grad_enabled() and (x.requires_grad or y.requires_grad)):
            d = self._distance_graph(x, y)
        elif torch.is_grad_enabled():
            with torch.no_grad():
                d = self._forward_fast(x, y)
        else:
            d = self._forward_fast(x, y)
        return d if reduction == "none" else d.mean() if reduction == "mean" else d.sum()

    #: How far outside its range an input may stray (float rounding of a resize or a ``2x − 1``).
    RANGE_TOLERANCE: ClassVar[float] = 1e-3

    def _in_range(self, x: torch.Tensor, name: str, normalize: bool | None) -> torch.Tensor:
        """``x`` validated (type, shape) and checked to lie in the expected range (not while
        ``torch.compile`` traces the call: reading the values would break its graph)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (N, 3, H, W), got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a float tensor, got dtype {x.dtype}")
        if _compiling():
            return x
        expected = "[0,1]" if normalize else self.input_range
        lo, hi = (0.0, 1.0) if expected == "[0,1]" else (-1.0, 1.0)
        if x.numel() == 0:
            return x
        found_lo, found_hi = (float(v) for v in torch.aminmax(x.detach()))
        tol = self.RANGE_TOLERANCE
        if not (found_lo >= lo - tol and found_hi <= hi + tol):  # also catches NaN
            if normalize:
                fix = "normalize=True expects [0, 1] images" + (
                    ": divide 8-bit values by 255" if found_hi > 1 + tol and found_lo >= -tol else "")
            elif expected == "[-1,1]":
                fix = ("for [0, 1] images pass normalize=True" if found_lo >= -tol and found_hi <= 1 + tol else
                       "for 8-bit values divide by 127.5 and subtract 1 (or divide by 255 and pass normalize=True)"
                       if found_lo >= -tol else "scale the images to [-1, 1]")
            else:
                fix = "divide 8-bit values by 255" if found_lo >= -tol else "map [-1, 1] images with (x + 1) / 2"
            raise ValueError(f"{type(self).__name__} ({self.net}) expects {name} in {expected[0]}{expected[1:-1].replace(',', ', ')}"
                             f"{expected[-1]}; found values from {found_lo:.4g} to {found_hi:.4g}: {fix}")
        return x

    def _forward_fast(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        per_layer, _, _ = self._pair_result(x, y, spatial=False)
        return per_layer.sum(1)
