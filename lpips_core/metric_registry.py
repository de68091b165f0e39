"""The learned metrics side by side: LPIPS, shift-tolerant LPIPS and DISTS.

One table (:data:`METRICS`) says, for each metric, which networks it has, which input range it
expects, what its result carries, how to build it and how to tell whether its weights are here.
Every model follows :mod:`lpips_core.protocol`; this module is the only place that knows a metric
by its name. These functions serve the CLI and the pages:

- :func:`prepare_input`: an image in ``[0, 1]`` → the tensor a metric is fed, under the metric's
  correct convention (``convention="correct"``) or a deliberately wrong one (Conventions page);
- :func:`build`: the model (build once and cache it; never inside a metric call);
- :func:`availability`: whether the weights are here, and where from, or the fix;
- :func:`resolve_net`: the network a metric runs on (the one named, checked, or its default).

=========  ===============  ============  ==========================================================
metric     nets             input range   result (:class:`~lpips_core.protocol.MetricResult`)
=========  ===============  ============  ==========================================================
lpips      alex vgg squeeze ``[-1, 1]``   per layer, maps; versions 0.1/0.0, lin or baseline
stlpips    alex vgg         ``[-1, 1]``   per layer, maps
dists      vgg              ``[0, 1]``    per stage, with ``texture`` and ``structure`` components;
                                          no maps
=========  ===============  ============  ==========================================================

Every model's ``compare(x, y).total`` is the ``(N,)`` distance; ``model(x, y)`` returns it too,
differentiably.

Example:
    >>> x = prepare_input("dists", ref01)                      # doctest: +SKIP
    >>> y = prepare_input("dists", dist01)                     # doctest: +SKIP
    >>> build("dists")(x, y)                                   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

import numpy as np
import torch
from torch import nn

from . import dists as _dists
from . import stlpips as _st
from . import weights as _weights
from .conventions import CONVENTIONS, to_input
from .model import LPIPS
from .protocol import LearnedMetric

__all__ = [
    "METRICS",
    "NET_LABELS",
    "MetricInfo",
    "MetricName",
    "availability",
    "build",
    "convention_note",
    "model_metric",
    "correct_convention",
    "prepare_input",
    "resolve_net",
]

MetricName = Literal["lpips", "stlpips", "dists"]

#: The backbones (:data:`lpips_core.weights.NETS`, in the app's order) and how people name them.
NET_LABELS: dict[str, str] = dict(zip(_weights.NETS, ("AlexNet", "VGG16", "SqueezeNet 1.1"), strict=True))


@dataclass(frozen=True)
class MetricInfo:
    """What a page or the CLI needs to know about one metric.

    Attributes:
        name: the key (``"lpips"``, ``"stlpips"``, ``"dists"``), as the CLI's ``--metric``.
        label: how to show it (``"ST-LPIPS"``).
        nets: the networks it has; ``default_net`` the one used when none is named.
        input_range: the convention of :mod:`lpips_core.conventions` its inputs must follow.
        reference: the paper.
        summary: one line on what it changes with respect to LPIPS.
        cls: the model class (a :class:`~lpips_core.protocol.LearnedMetric`).
        factory: ``(net, version, lin, device) → model``.
        available: ``net → (ok, source or the fix)``; cheap, loads nothing.
        versions: the weight versions it has (first = default); empty when it has one.
        has_baseline: it has an uncalibrated variant (``lin=False``).
        components: the names of the result's ``components`` (DISTS: texture, structure).
    """

    name: str
    label: str
    nets: tuple[str, ...]
    default_net: str
    input_range: str
    reference: str
    summary: str
    cls: type = field(repr=False, default=LearnedMetric)
    factory: Callable[..., LearnedMetric] = field(repr=False, default=None)
    available: Callable[[str], tuple[bool, str]] = field(repr=False, default=None)
    versions: tuple[str, ...] = ()
    has_baseline: bool = False
    components: tuple[str, ...] = ()

    @property
    def has_maps(self) -> bool:
        """The result has per-position layer maps (LPIPS, ST-LPIPS); DISTS's terms are statistics
        over whole feature maps, per stage, with its :attr:`components`."""
        return self.cls.has_maps

    @property
    def euclidean(self) -> bool:
        """The distance is a squared Euclidean distance between per-image embeddings
        (:mod:`lpips_core.space`): LPIPS's recipe (:class:`~lpips_core.model.LPIPSBase`: unit-normalised
        taps, non-negative channel weights on squared differences, spatial mean, sum over layers),
        which LPIPS and ST-LPIPS follow and DISTS does not."""
        from .model import LPIPSBase

        return issubclass(self.cls, LPIPSBase)


def _stlpips_available(net: str) -> tuple[bool, str]:
    path = _st.checkpoint_path(net)
    if path is None:
        return False, _st.fix_message(net)
    return True, f"stlpips-pytorch ({path.name})"


def _dists_available(net: str) -> tuple[bool, str]:
    ok, vgg = _weights.availability("vgg")
    if not ok:
        return False, f"DISTS needs VGG16: {vgg}"
    path = _dists.alpha_beta_path()
    if path is None:
        return False, _dists.fix_message()
    return True, f"VGG16: {vgg}; alpha/beta: DISTS-pytorch ({path.name})"


METRICS: dict[str, MetricInfo] = {
    "lpips": MetricInfo(
        "lpips", "LPIPS", _weights.NETS, "alex", "[-1,1]",
        "Zhang, Isola, Efros, Shechtman and Wang, CVPR 2018",
        "ImageNet features, unit-normalised, channel weights fitted to BAPPS 2AFC judgments.",
        cls=LPIPS, factory=lambda net, version, lin, device: LPIPS(net, version or "0.1", lin, device=device),
        available=lambda net: _weights.availability(net), versions=_weights.VERSIONS, has_baseline=True,
    ),
    "stlpips": MetricInfo(
        "stlpips", "ST-LPIPS", _st.ST_NETS, "alex", _st.STLPIPS.input_range,
        "Ghildyal and Liu, ECCV 2022",
        "LPIPS on an anti-aliased backbone (BlurPool, reflection padding, conv1 stride 1), "
        "retrained on BAPPS: tolerant of small shifts.",
        cls=_st.STLPIPS, factory=lambda net, version, lin, device: _st.STLPIPS(net, device=device),
        available=_stlpips_available,
    ),
    "dists": MetricInfo(
        "dists", "DISTS", ("vgg",), "vgg", _dists.DISTS.input_range,
        "Ding, Ma, Wang and Simoncelli, IEEE TPAMI 2022",
        "VGG16 with L2 pooling and the input as stage 0; structure (correlation) and texture "
        "(mean) terms per channel, fitted to KADID-10k: tolerant of resampled texture.",
        cls=_dists.DISTS, factory=lambda net, version, lin, device: _dists.DISTS(device=device),
        available=_dists_available, components=("texture", "structure"),
    ),
}

_NOTES = {
    ("[-1,1]", "[-1,1]"): "Correct: the image in [0, 1] is fed as 2x − 1.",
    ("[-1,1]", "[0,1]"): "Wrong: a [0, 1] image fed as if it were in [−1, 1] (the forgotten normalize=True).",
    ("[-1,1]", "[0,255]"): "Wrong: raw 8-bit values fed where [−1, 1] is expected.",
    ("[0,1]", "[0,1]"): "Correct: the image is fed in [0, 1], as torchvision's ToTensor gives it.",
    ("[0,1]", "[-1,1]"): "Wrong: an LPIPS-style 2x − 1 image fed where [0, 1] is expected.",
    ("[0,1]", "[0,255]"): "Wrong: raw 8-bit values fed where [0, 1] is expected.",
}


def _info(metric: str) -> MetricInfo:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {tuple(METRICS)}, got {metric!r}")
    return METRICS[metric]


def resolve_net(metric: str, net: str | None = None) -> str:
    """The network ``metric`` runs on: ``net`` checked against the metric's nets, or its
    ``default_net`` when ``None``.

    Raises:
        ValueError: an unknown metric, or a net the metric does not have.
    """
    info = _info(metric)
    if net is None:
        return info.default_net
    if net not in info.nets:
        raise ValueError(f"{info.label} has no {net!r} backbone; it has nets {info.nets}")
    return net


def correct_convention(metric: str) -> str:
    """The range convention ``metric`` expects: ``"[-1,1]"`` (LPIPS, ST-LPIPS) or ``"[0,1]"`` (DISTS)."""
    return _info(metric).input_range


def convention_note(metric: str, convention: str) -> str:
    """One sentence on what feeding ``metric`` under ``convention`` means (correct or which mistake)."""
    expected = correct_convention(metric)
    if convention == "correct":
        convention = expected
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be 'correct' or one of {CONVENTIONS}, got {convention!r}")
    return f"{METRICS[metric].label}: " + _NOTES[(expected, convention)]


def prepare_input(
    metric: str,
    img: np.ndarray | torch.Tensor,
    *,
    convention: str = "correct",
    size: int | Sequence[int] | None = None,
    grayscale: bool = False,
    method: str = "bilinear",
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """An image in ``[0, 1]`` → the ``(N, 3, H', W')`` float32 tensor to feed ``metric``.

    Args:
        metric: ``"lpips"``, ``"stlpips"`` or ``"dists"``.
        img: ``(H, W, 3)``/``(H, W)`` NumPy float array in ``[0, 1]``, or ``(N, 3, H, W)`` tensor in ``[0, 1]``.
        convention: ``"correct"`` (the metric's own: :func:`correct_convention`) or an explicit
            ``"[-1,1]"``, ``"[0,1]"``, ``"[0,255]"`` to show what a wrong one does.
        size, grayscale, method, device: as :func:`lpips_core.conventions.to_input`.

    Raises:
        ValueError: unknown metric or convention; bad shape, size or method.
        TypeError: not a float image.
    """
    expected = correct_convention(metric)
    if convention == "correct":
        convention = expected
    elif convention not in CONVENTIONS:
        raise ValueError(f"convention must be 'correct' or one of {CONVENTIONS}, got {convention!r}")
    return to_input(img, convention=convention, size=size, grayscale=grayscale, method=method, device=device)


def _check_variant(info: MetricInfo, version: str | None, lin: bool) -> str | None:
    if version is not None and version not in info.versions:
        if info.versions:
            raise ValueError(f"{info.label} has versions {info.versions}, got {version!r}")
        raise ValueError(f"{info.label} has one version: --version applies to --metric lpips only")
    if not lin and not info.has_baseline:
        raise ValueError(f"{info.label} has no uncalibrated baseline: --baseline applies to --metric lpips only")
    return version


def build(
    metric: str, net: str | None = None, *, version: str | None = None, lin: bool = True,
    device: torch.device | str | None = None,
) -> LearnedMetric:
    """The frozen model for ``metric`` (``net`` defaults to the metric's ``default_net``).

    ``version`` (default: the metric's first) and ``lin=False`` apply only to metrics that have
    them (LPIPS). Slow (loads weights): cache the result.

    Raises:
        ValueError: unknown metric, a net, version or baseline the metric does not have.
        WeightsUnavailable: weights missing; the message says how to fix it.
    """
    info = _info(metric)
    net = resolve_net(metric, net)
    version = _check_variant(info, version, lin)
    return info.factory(net, version, lin, device)


def availability(metric: str, net: str | None = None) -> tuple[bool, str]:
    """Whether ``metric``'s weights for ``net`` are here without a download, and their source or the fix.

    Cheap: looks for files, loads nothing.
    """
    info = _info(metric)
    return info.available(resolve_net(metric, net))


def model_metric(model: LearnedMetric) -> str:
    """The registry name of a model (``"stlpips"`` for an :class:`~lpips_core.stlpips.STLPIPS`).

    Raises:
        TypeError: not a model of a registered metric.
    """
    name = getattr(model, "metric", None)
    info = METRICS.get(name) if isinstance(name, str) else None
    if info is None or not isinstance(model, info.cls):
        raise TypeError(f"not a model of a registered metric: {type(model).__name__}")
    return name
