"""A metric in a configuration: :class:`MetricSpec`, the one type every page, the CLI, the dataset
scorer, the class study and the Conventions grid use to say what they measure.

A spec is a :class:`MetricSpec`, or its name as a string (what ``--metrics`` takes and what
table columns are called)::

    mse | psnr | ssim
    lpips-alex-0.1-lin-[-1,1]          LPIPS: net, version, lin|baseline, input convention
    lpips-vgg-0.0-baseline-[0,1]-gray@64
    stlpips-alex-[-1,1]                ST-LPIPS: net, convention
    dists-vgg-[0,1]                    DISTS

Parts may be left out (``"lpips"``, ``"lpips-vgg"``, ``"dists"``): they take the defaults given
to :func:`parse_spec`, else the metric's own (its default net, first version, lin weights, its
correct input range, colour, native size). ``-gray`` feeds the luma replicated to RGB; ``@N``
(or ``@HxW``) resizes both images before the network (antialiased bilinear, see
:mod:`lpips_core.conventions`). Which parts a learned metric has is read from
:data:`lpips_core.metric_registry.METRICS` (nets, versions, ``has_baseline``, ``input_range``);
the classic metrics (:mod:`lpips_core.metrics`) have none and are computed on the ``[0, 1]``
images at their native size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from . import metric_registry
from . import metrics as _classic
from .conventions import CONVENTIONS
from .metric_registry import NET_LABELS

__all__ = ["CLASSIC", "ClassicMetric", "MetricSpec", "NET_LABELS", "parse_spec", "parse_specs", "standard_specs"]


@dataclass(frozen=True)
class ClassicMetric:
    """A metric computed on the ``[0, 1]`` images themselves (:mod:`lpips_core.metrics`).

    Attributes:
        name: the spec name and table column (``"psnr"``).
        label: for people (``"PSNR"``); ``unit`` what its values count (``"dB"``, or ``""``).
        fn: ``(a, b) → float`` on two ``(H, W, 3)`` float images in ``[0, 1]`` of one shape.
        higher_is_better: a similarity (a larger value is a closer match), else a distance.

    Calling it calls ``fn``.
    """

    name: str
    label: str
    fn: Callable[[np.ndarray, np.ndarray], float] = field(repr=False)
    higher_is_better: bool
    unit: str = ""

    def __call__(self, a: np.ndarray, b: np.ndarray) -> float:
        return self.fn(a, b)


CLASSIC: dict[str, ClassicMetric] = {c.name: c for c in (
    ClassicMetric("mse", "MSE", _classic.mse, False),
    ClassicMetric("psnr", "PSNR", _classic.psnr, True, "dB"),
    ClassicMetric("ssim", "SSIM", _classic.ssim, True),
)}
"""The classic metrics by name, the one place they are declared."""

_SIZE = re.compile(r"@(\d+)(?:x(\d+))?$")
_CONV = re.compile(r"-?(\[[^\]]*\])")


@dataclass(frozen=True)
class MetricSpec:
    """One metric under one configuration (normalised on creation: defaults filled in).

    Attributes:
        metric: ``"mse"``, ``"psnr"``, ``"ssim"`` or a key of
            :data:`~lpips_core.metric_registry.METRICS` (``"lpips"``, ``"stlpips"``, ``"dists"``).
        net, version, lin: the learned metric's network, weights version and lin weights
            (``lin=False``: the uncalibrated baseline); ``None``/``True`` where it has none.
        convention: the input range fed to the network (``"[-1,1]"``, ``"[0,1]"``, ``"[0,255]"``);
            default: the metric's own.
        grayscale: feed the luma replicated to RGB.
        size: resize both images to ``size`` (``n`` or ``(h, w)``) before the network.

    Raises:
        ValueError: an unknown metric, or a part the metric does not have.
    """

    metric: str
    net: str | None = None
    version: str | None = None
    lin: bool = True
    convention: str | None = None
    grayscale: bool = False
    size: int | tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.metric in CLASSIC:
            if (self.net, self.version, self.lin, self.convention, self.grayscale, self.size) != (
                    None, None, True, None, False, None):
                raise ValueError(f"{self.metric} has no network options; got {self!r}")
            return
        if self.metric not in metric_registry.METRICS:
            raise ValueError(f"metric must be one of {(*CLASSIC, *metric_registry.METRICS)}, got {self.metric!r}")
        info = metric_registry.METRICS[self.metric]
        net = metric_registry.resolve_net(self.metric, self.net)
        version = self.version if self.version is not None else (info.versions[0] if info.versions else None)
        if version is not None and version not in info.versions:
            raise ValueError(f"{info.label} has versions {info.versions}, got {version!r}" if info.versions else
                             f"{info.label} has one version: version (--version) applies to --metric lpips only")
        if not self.lin and not info.has_baseline:
            raise ValueError(f"{info.label} has no uncalibrated baseline: lin=False (--baseline) applies to --metric lpips only")
        conv = info.input_range if self.convention in (None, "correct") else self.convention
        if conv not in CONVENTIONS:
            raise ValueError(f"convention must be one of {CONVENTIONS}, got {self.convention!r}")
        size = self.size
        if size is not None:
            size = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
            if len(size) != 2 or min(size) < 1:
                raise ValueError(f"size must be a positive int or (h, w), got {self.size!r}")
            size = size[0] if size[0] == size[1] else size
        for name, value in (("net", net), ("version", version), ("convention", conv), ("size", size),
                            ("lin", bool(self.lin)), ("grayscale", bool(self.grayscale))):
            object.__setattr__(self, name, value)

    @property
    def learned(self) -> bool:
        """A network metric (built through :func:`lpips_core.metric_registry.build`)."""
        return self.metric in metric_registry.METRICS

    @property
    def name(self) -> str:
        """The canonical name (:func:`parse_spec` of it gives this spec back)."""
        if not self.learned:
            return self.metric
        info = metric_registry.METRICS[self.metric]
        parts = [self.metric, self.net]
        if info.versions:
            parts.append(self.version)
        if info.has_baseline:
            parts.append("lin" if self.lin else "baseline")
        parts.append(self.convention)
        if self.grayscale:
            parts.append("gray")
        text = "-".join(parts)
        if self.size is not None:
            text += f"@{self.size}" if isinstance(self.size, int) else f"@{self.size[0]}x{self.size[1]}"
        return text

    @property
    def pass_key(self) -> tuple:
        """Specs with equal keys share one network pass per image (they differ only in ``lin``)."""
        return (self.metric, self.net, self.version, self.convention, self.grayscale, self.size)

    @property
    def label(self) -> str:
        """For people: ``"MSE"``, ``"LPIPS · AlexNet"``, ``"LPIPS · VGG16 (v0.0, baseline, [0,1], gray, 64 px)"``.

        What equals the metric's own default (version 0.1, lin, its input range, colour, native
        size) is left out."""
        if not self.learned:
            return CLASSIC[self.metric].label
        info = metric_registry.METRICS[self.metric]
        text = f"{info.label} · {NET_LABELS.get(self.net, self.net)}"
        extra = []
        if info.versions and self.version != info.versions[0]:
            extra.append(f"v{self.version}")
        if info.has_baseline and not self.lin:
            extra.append("baseline")
        if self.convention != info.input_range:
            extra.append(self.convention)
        if self.grayscale:
            extra.append("gray")
        if self.size is not None:
            extra.append(f"{self.size} px" if isinstance(self.size, int) else f"{self.size[1]}×{self.size[0]} px")
        return text + (f" ({', '.join(extra)})" if extra else "")

    @property
    def metric_label(self) -> str:
        """The metric alone, for people: ``"LPIPS"``, ``"ST-LPIPS"``, ``"DISTS"``, ``"MSE"``."""
        return metric_registry.METRICS[self.metric].label if self.learned else CLASSIC[self.metric].label

    @property
    def higher_is_better(self) -> bool:
        """A similarity (PSNR, SSIM: larger is closer); every learned metric is a distance."""
        return not self.learned and CLASSIC[self.metric].higher_is_better

    @property
    def differentiable(self) -> bool:
        """``model(x, y)`` of a learned metric is differentiable (usable as a loss); the classic
        metrics here are NumPy functions on ``[0, 1]`` images."""
        return self.learned

    @property
    def euclidean(self) -> bool:
        """The metric is a squared Euclidean distance between per-image embeddings (LPIPS and
        ST-LPIPS, whose channel weights are non-negative in every released file; see
        :mod:`lpips_core.space`): a set of N images needs N forward passes for all its pairs. DISTS
        and the classic metrics are not."""
        return self.learned and metric_registry.METRICS[self.metric].euclidean

    @property
    def has_maps(self) -> bool:
        """The learned metric's result has spatial maps (LPIPS, ST-LPIPS; not DISTS nor the classic ones)."""
        return self.learned and metric_registry.METRICS[self.metric].has_maps

    @property
    def components(self) -> tuple[str, ...]:
        """The names of the result's extra terms per stage (DISTS: ``texture``, ``structure``); ``()`` for none."""
        return metric_registry.METRICS[self.metric].components if self.learned else ()

    @property
    def model_spec(self) -> "MetricSpec":
        """What the model depends on: this spec with the input (convention, colour, size) at the
        metric's defaults. Specs with equal ``model_spec`` share one model; its name keys model caches."""
        if not self.learned:
            return self
        return MetricSpec(self.metric, net=self.net, version=self.version, lin=self.lin)

    @property
    def row_spec(self) -> "MetricSpec":
        """The metric on this spec's network with every other option at the metric's defaults
        (a row of a table that varies the rest: the Conventions grid)."""
        return self if not self.learned else MetricSpec(self.metric, net=self.net)

    @classmethod
    def of_model(cls, model) -> "MetricSpec":
        """The spec a model computes at its own input convention, colour and size.

        Raises:
            TypeError: not a model of a registered metric.
        """
        metric = metric_registry.model_metric(model)
        info = metric_registry.METRICS[metric]
        return cls(metric, net=model.net, version=getattr(model, "version", None) if info.versions else None,
                   lin=getattr(model, "channel_weights", None) is not None if info.has_baseline else True)

    def check_model(self, model) -> None:
        """Refuse a model that is not this spec's (a cache that mixed them up would give wrong numbers).

        Raises:
            TypeError: a model of another metric, network, version or head (or no model's).
        """
        try:
            own = MetricSpec.of_model(model).model_spec
        except TypeError:
            own = None
        if own != self.model_spec:
            raise TypeError(f"{self.label} needs its own model ({self.model_spec.name}), got "
                            f"{own.name if own is not None else type(model).__name__}")

    @classmethod
    def for_model(cls, model, spec: "MetricSpec | str | None" = None) -> "MetricSpec":
        """The spec ``model`` is asked to compute: ``spec`` (a spec or its name) checked against
        the model (:meth:`check_model`), or by default the model's own (:meth:`of_model`). The one
        way a function given a model and a spec answers "does this model compute this spec?".

        Raises:
            ValueError: a malformed spec name, or a classic metric (no model computes it).
            TypeError: ``model`` is not the spec's model (another metric, network, version or head),
                or not a model of a registered metric.
        """
        if spec is None:
            return cls.of_model(model)
        spec = parse_spec(spec)
        if not spec.learned:
            raise ValueError(f"{spec.label} is computed on the images directly; it has no model")
        spec.check_model(model)
        return spec

    def replace(self, **changes) -> "MetricSpec":
        """This spec with some fields changed (validated again)."""
        import dataclasses

        return dataclasses.replace(self, **changes)

    def availability(self) -> tuple[bool, str]:
        """``(True, source)`` where the weights are here (always for a classic metric), else
        ``(False, the fix)``. Cheap: loads nothing."""
        if not self.learned:
            return True, "computed"
        return metric_registry.availability(self.metric, self.net)

    def build(self, device=None):
        """The frozen model for this spec (slow: loads weights; cache it). Classic metrics have none.

        Raises:
            ValueError: a classic metric. WeightsUnavailable: the weights are missing (the message says how to fix it).
        """
        if not self.learned:
            raise ValueError(f"{self.label} is computed on the images directly; it has no model")
        return metric_registry.build(self.metric, self.net, version=self.version, lin=self.lin, device=device)

    def prepare(self, img, *, method: str = "bilinear", device=None):
        """An image in ``[0, 1]`` (``(H, W, 3)`` array or ``(N, 3, H, W)`` tensor) → the network input
        under this spec's convention, colour and size (:func:`lpips_core.metric_registry.prepare_input`)."""
        if not self.learned:
            raise ValueError(f"{self.label} is computed on the images directly; it takes no network input")
        return metric_registry.prepare_input(self.metric, img, convention=self.convention, size=self.size,
                                             grayscale=self.grayscale, method=method, device=device)

    def classic(self, a: np.ndarray, b: np.ndarray) -> float:
        """A classic metric's value on two ``(H, W, 3)`` images in ``[0, 1]``."""
        if self.learned:
            raise ValueError(f"{self.label} is a learned metric: build its model and compare")
        return float(CLASSIC[self.metric](a, b))

    @classmethod
    def parse(cls, text: "str | MetricSpec", **defaults) -> "MetricSpec":
        """:func:`parse_spec`: a spec from its name (``"lpips-vgg-0.0-baseline"``), defaults filling the rest."""
        return parse_spec(text, **defaults)

    def __str__(self) -> str:
        return self.name


def parse_spec(text: str | MetricSpec, *, net: str | None = None, version: str | None = None,
               lin: bool | None = None, convention: str | None = None, grayscale: bool | None = None,
               size: int | tuple[int, int] | None = None) -> MetricSpec:
    """A spec from its name; the keyword defaults fill parts the name leaves out, where the metric has them.

    Raises:
        ValueError: an unknown metric or part, or one the metric does not have.
    """
    if isinstance(text, MetricSpec):
        return text
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a metric spec must be a non-empty string, got {text!r}")
    rest = text.strip().lower().replace("st-lpips", "stlpips")
    m = _SIZE.search(rest)
    own_size = None
    if m:
        own_size = int(m.group(1)) if m.group(2) is None else (int(m.group(1)), int(m.group(2)))
        rest = rest[: m.start()]
    m = _CONV.search(rest)
    own_conv = None
    if m:
        own_conv = m.group(1).replace(" ", "")
        rest = rest[: m.start()] + rest[m.end():]
    tokens = [t for t in rest.split("-") if t]
    if not tokens:
        raise ValueError(f"no metric in spec {text!r}")
    metric, tokens = tokens[0], tokens[1:]
    if metric in CLASSIC:
        if tokens or own_conv or own_size:
            raise ValueError(f"{metric} takes no options, got {text!r}")
        return MetricSpec(metric)
    if metric not in metric_registry.METRICS:
        raise ValueError(f"unknown metric {metric!r} in {text!r}; valid: {(*CLASSIC, *metric_registry.METRICS)}")
    info = metric_registry.METRICS[metric]
    own: dict = {}
    for t in tokens:
        if t in info.nets:
            own["net"] = t
        elif t in info.versions:
            own["version"] = t
        elif t in ("lin", "baseline") and info.has_baseline:
            own["lin"] = t == "lin"
        elif t in ("gray", "grayscale"):
            own["grayscale"] = True
        else:
            raise ValueError(f"{info.label} has no option {t!r} (in {text!r})")
    defaults = {
        "net": net if net in info.nets else None,
        "version": version if version in info.versions else None,
        "lin": lin if (lin is not None and info.has_baseline) else True,
        "grayscale": bool(grayscale),
    }
    return MetricSpec(
        metric,
        net=own.get("net", defaults["net"]),
        version=own.get("version", defaults["version"]),
        lin=own.get("lin", defaults["lin"]),
        convention=own_conv if own_conv is not None else convention,
        grayscale=own.get("grayscale", defaults["grayscale"]),
        size=own_size if own_size is not None else size,
    )


def parse_specs(texts: str | Sequence[str | MetricSpec], **defaults) -> tuple[MetricSpec, ...]:
    """Specs from a comma-separated string or a sequence; duplicates (same name) kept once, in order.

    Raises:
        ValueError: an empty list, or any bad spec (see :func:`parse_spec`).
    """
    if isinstance(texts, str):
        texts = [t for t in texts.split(",") if t.strip()] if "[" not in texts else _split_commas(texts)
    specs = [parse_spec(t, **defaults) for t in texts]
    if not specs:
        raise ValueError("no metrics given")
    return tuple({s.name: s for s in specs}.values())


def _split_commas(text: str) -> list[str]:
    """Split on commas outside brackets (``"lpips-[-1,1],ssim"`` → two specs)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [t for t in out if t.strip()]


def standard_specs(*, baselines: bool = True) -> list[MetricSpec]:
    """Every metric at its defaults: the classic ones, then each learned metric of
    :data:`~lpips_core.metric_registry.METRICS` on each of its networks, followed by its
    uncalibrated baseline where it has one (``baselines``). A metric added to the registry
    appears here without a change.
    """
    out = [MetricSpec(name) for name in CLASSIC]
    for name, info in metric_registry.METRICS.items():
        for net in info.nets:
            out.append(MetricSpec(name, net=net))
            if baselines and info.has_baseline:
                out.append(MetricSpec(name, net=net, lin=False))
    return out
