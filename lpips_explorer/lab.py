"""The Distortion lab's computation: every metric on one pair, and what its table, bars and maps show.

The page builds a chain of distortions and draws; everything between the pair and the drawing
is here, for any list of :class:`~lpips_core.spec.MetricSpec` (no metric is named):

- :func:`score`: one learned spec on the pair (one forward pass of the distorted image; the
  reference's features come from the model's cache) as a :class:`Scored`;
- :func:`classic_values`: MSE, PSNR and SSIM (SSIM ``nan`` where the image is smaller than its window);
- :func:`metric_rows`: the metrics table, classic rows first, then each spec in order;
- :func:`layer_bars`, :func:`staged`, :func:`map_sources`, :func:`map_values`: what the per-layer
  bars, the per-stage (DISTS) bars and the spatial map show.

No Streamlit here; the page caches :func:`score` per pair and spec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from lpips_core import metric_registry
from lpips_core.spec import CLASSIC, MetricSpec
from lpips_core.sweeps import metric_many

__all__ = ["SUMMED", "Scored", "classic_label", "classic_values", "layer_bars", "map_sources", "map_values",
           "metric_rows", "note", "score", "staged"]

#: The map choice that sums every layer's map (its mean is the metric's value).
SUMMED = "summed"


@dataclass(frozen=True, eq=False)
class Scored:
    """One learned spec on the lab's pair.

    Attributes:
        spec: what was computed.
        total: the distance.
        per_layer: ``(L,)`` float32, the per-layer (per-stage) terms; they sum to ``total``.
        layer_names: ``L`` names.
        layer_maps: ``(L, H, W)`` float32 spatial maps at the image's size, or ``None`` (DISTS).
        components: extra per-stage terms by name (DISTS: ``texture``, ``structure``), each ``(L,)``.
    """

    spec: MetricSpec
    total: float
    per_layer: np.ndarray
    layer_names: tuple[str, ...]
    layer_maps: np.ndarray | None = None
    components: dict[str, np.ndarray] = field(default_factory=dict)


def score(model, spec: MetricSpec, ref: np.ndarray, dist: np.ndarray) -> Scored:
    """``spec`` (learned; ``model`` its model) on the pair, with its spatial maps where it has them.

    Args:
        ref, dist: ``(H, W, 3)`` float arrays in ``[0, 1]`` of one shape.

    Raises:
        ValueError: a classic spec, or a pair of two shapes. TypeError: ``model`` is not ``spec``'s.
    """
    r = metric_many(model, ref, [dist], spec=spec, spatial=spec.has_maps)
    return Scored(spec, float(r.total[0]), r.per_layer[0].numpy(), tuple(r.layer_names),
                  None if r.layer_maps is None else r.layer_maps[0].numpy(),
                  {k: v[0].numpy() for k, v in r.components.items()})


def classic_label(name: str) -> str:
    """A classic metric's label with its unit: ``"MSE"``, ``"PSNR (dB)"``, ``"SSIM"``."""
    c = CLASSIC[name]
    return f"{c.label} ({c.unit})" if c.unit else c.label


def classic_values(ref: np.ndarray, dist: np.ndarray) -> dict[str, float]:
    """Every classic metric on the pair, by spec name; ``nan`` where a metric refuses the pair
    (SSIM on an image smaller than its window; PSNR of identical images is ``inf``, not ``nan``)."""
    out = {}
    for name, c in CLASSIC.items():
        try:
            out[name] = float(c(ref, dist))
        except ValueError:  # SSIM's 11×11 window does not fit
            out[name] = float("nan")
    return out


def note(spec: MetricSpec) -> str:
    """The table's note for a learned spec: its version and head where the metric has them
    (``"v0.1, lin"``), else its input range (``"inputs in [0,1]"``)."""
    parts = [] if spec.version is None else [f"v{spec.version}"]
    if metric_registry.METRICS[spec.metric].has_baseline:
        parts.append("lin" if spec.lin else "baseline")
    return ", ".join(parts) if parts else f"inputs in {spec.convention}"


def metric_rows(classic: Mapping[str, float], results: Mapping[MetricSpec, Scored | None],
                specs: Sequence[MetricSpec]) -> list[dict]:
    """The metrics table: ``{"metric", "value", "note"}`` for each classic metric, then each of
    ``specs`` in order (``nan`` and ``"unavailable (no weights)"`` where ``results`` has no value).

    A learned row is named by the metric on its network (:attr:`MetricSpec.row_spec`: ``"LPIPS ·
    AlexNet"``); its note says the rest (:func:`note`: ``"v0.0, baseline"``)."""
    rows = [{"metric": classic_label(name), "value": value, "note": "image too small" if math.isnan(value) else ""}
            for name, value in classic.items()]
    for spec in specs:
        r = results.get(spec)
        rows.append({"metric": spec.row_spec.label, "value": float("nan") if r is None else r.total,
                     "note": "unavailable (no weights)" if r is None else note(spec)})
    return rows


def layer_bars(results: Mapping[MetricSpec, Scored | None]) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """``label → (layer names, per-layer terms)`` of the results that have spatial maps (their
    layers are LPIPS-like terms that stack to the value), in order; labels as :func:`metric_rows`'."""
    return {r.spec.row_spec.label: (r.layer_names, r.per_layer) for r in results.values()
            if r is not None and r.layer_maps is not None}


def staged(results: Mapping[MetricSpec, Scored | None]) -> list[Scored]:
    """The results with per-stage components and no maps (DISTS: texture and structure per stage)."""
    return [r for r in results.values() if r is not None and r.layer_maps is None and r.components]


def map_sources(results: Mapping[MetricSpec, Scored | None], first: MetricSpec | None = None) -> list[MetricSpec]:
    """The specs whose result has spatial maps, ``first`` (the sidebar's) leading when it has them."""
    have = [s for s, r in results.items() if r is not None and r.layer_maps is not None]
    return sorted(have, key=lambda s: s != first)


def map_values(result: Scored, layer: str) -> tuple[np.ndarray, str]:
    """The map to draw (``(H, W)``: one layer's, or every layer's summed for :data:`SUMMED`) and
    what its mean equals (``"= LPIPS"`` for the sum, else ``"= d_l of this layer"``)."""
    if result.layer_maps is None:
        raise ValueError(f"{result.spec.label} has no spatial maps")
    if layer == SUMMED:
        return result.layer_maps.sum(0), f"= {result.spec.metric_label}"
    if layer not in result.layer_names:
        raise ValueError(f"{layer!r} is not one of {result.layer_names} (or {SUMMED!r})")
    return result.layer_maps[result.layer_names.index(layer)], "= d_l of this layer"
