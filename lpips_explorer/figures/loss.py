"""Figures for "LPIPS as a loss": loss curves, sharpness, the fooling experiment, and the
experiments' small images enlarged for display.

Pure builders: data in, ``plotly.graph_objects.Figure`` (or an image array) out. They plot the
values they are given (nothing is recomputed here), so a test can compare every plotted number
with the library's. Titles are short enough for a chart ~600 px wide (a page at 1024 px with its
sidebar open); the explanations are in the axis titles and the page's captions.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpips_explorer.figures.maps import LEGEND_BELOW

__all__ = ["SHOWN_SIDE", "enlarge", "fooling_curves", "fooling_ratios", "loss_curves", "sharpness_bars"]

#: The least side, in px, an experiment's image is shown at (``enlarge``).
SHOWN_SIDE = 192


def enlarge(img: np.ndarray, at_least: int = SHOWN_SIDE) -> np.ndarray:
    """``img`` ``(H, W, C)`` repeated ``f × f`` (nearest neighbour, every pixel an ``f × f``
    block) with ``f = ceil(at_least / min(H, W))``, at least 1: a 96 px result becomes 192 px, so
    that blur and artefacts are seen as computed, not smoothed by the browser's resampling.

    Raises:
        ValueError: ``img`` not ``(H, W)`` or ``(H, W, C)`` with ``H, W ≥ 1``, or ``at_least < 1``.
    """
    img = np.asarray(img)
    if img.ndim not in (2, 3) or min(img.shape[:2]) < 1:
        raise ValueError(f"img must be (H, W) or (H, W, C) with H, W >= 1, got shape {img.shape}")
    if isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 1:
        raise ValueError(f"at_least must be an int >= 1, got {at_least!r}")
    f = max(1, math.ceil(at_least / min(img.shape[:2])))
    return np.repeat(np.repeat(img, f, axis=0), f, axis=1) if f > 1 else img


def _check_named(name: str, data: Mapping) -> None:
    if not data:
        raise ValueError(f"{name} needs at least one series")


def loss_curves(curves: Mapping[str, Sequence[float]]) -> go.Figure:
    """Each loss's value per step divided by its value at step 0 (the losses have different units).

    Args:
        curves: loss label → its values per step (the first must be non-zero).

    Returns:
        One line per loss; ``y`` is ``values / values[0]``, ``x`` the step (1, 2, …).
    """
    _check_named("loss_curves", curves)
    fig = go.Figure()
    for label, values in curves.items():
        values = [float(v) for v in values]
        if not values:
            continue
        if values[0] == 0:
            raise ValueError(f"the curve of {label!r} starts at 0: it cannot be shown relative to its start")
        fig.add_trace(go.Scatter(x=list(range(1, len(values) + 1)), y=[v / values[0] for v in values],
                                 mode="lines", name=label,
                                 hovertemplate=f"{label}<br>step %{{x}}: %{{y:.3f}} × the first value<extra></extra>"))
    fig.update_layout(title="Loss ÷ its first value, per step", xaxis_title="step",
                      yaxis_title="loss ÷ loss at step 1", height=380, margin=dict(t=50, b=40, l=60, r=20),
                      legend=LEGEND_BELOW)
    return fig


def sharpness_bars(values: Mapping[str, float]) -> go.Figure:
    """High-frequency energy of each image relative to the reference (1 = as sharp as the reference).

    Args:
        values: image label → its sharpness (e.g. ``"mean of the copies"``, ``"MSE"``, ``"LPIPS · VGG16"``).

    Returns:
        One bar per image on a log axis, the value printed on it, a dashed line at 1 (the reference).
    """
    _check_named("sharpness_bars", values)
    names = list(values)
    ys = [float(values[n]) for n in names]
    if min(ys) <= 0:
        raise ValueError(f"sharpness values must be positive for a log axis, got {dict(zip(names, ys))}")
    fig = go.Figure(go.Bar(x=names, y=ys, text=[f"{y:.3g}" for y in ys], textposition="outside",
                           hovertemplate="%{x}: %{y:.3g} × the reference's high-frequency energy<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dash", annotation_text="reference", annotation_position="top left")
    fig.update_layout(title="Sharpness: high-frequency energy", yaxis_type="log",
                      yaxis_title="÷ the reference's", height=380, margin=dict(t=50, b=40, l=60, r=20))
    return fig


def fooling_curves(runs: Mapping[str, tuple[Sequence[float], Sequence[float]]], eps: float) -> go.Figure:
    """The fooling experiment along the way: the metric's distance to the source and the pixel
    distance (RMS) to the source, per step.

    Args:
        runs: metric label → ``(distances per step, RMS distances per step)``.
        eps: the bound, drawn as a dashed line on the upper panel.

    Returns:
        Two rows sharing the step axis: row 1 the metric's value, row 2 the RMS pixel distance.
    """
    _check_named("fooling_curves", runs)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("metric's distance to the source (≤ ε wanted)",
                                        "RMS pixel distance to the source"))
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    for k, (label, (ds, l2s)) in enumerate(runs.items()):
        color = palette[k % len(palette)]
        steps = list(range(1, len(ds) + 1))
        fig.add_trace(go.Scatter(x=steps, y=[float(v) for v in ds], mode="lines", name=label, legendgroup=label,
                                 line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[float(v) for v in l2s], mode="lines", name=label, legendgroup=label,
                                 showlegend=False, line=dict(color=color)), row=2, col=1)
    fig.add_hline(y=float(eps), line_dash="dash", annotation_text="ε", row=1, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(height=500, margin=dict(t=50, b=40, l=60, r=20),
                      legend=LEGEND_BELOW)
    return fig


def fooling_ratios(ours: Mapping[str, float], published: Mapping[str, tuple[float, float]] | None = None) -> go.Figure:
    """How far each metric let the image move: RMS pixel distance ÷ ε, ours beside the published.

    Args:
        ours: metric label → our ratio.
        published: label → ``(mean, standard error)`` from the paper (drawn as a second series
            with error bars), e.g. :data:`lpips_explorer.loss_lab.PUBLISHED_FOOLING`.

    Returns:
        One bar series "this run" and, when given, one "Kettunen et al. 2019" with error bars.
    """
    _check_named("fooling_ratios", ours)
    fig = go.Figure(go.Bar(name="this run", x=list(ours), y=[float(v) for v in ours.values()],
                           text=[f"{float(v):.2f}" for v in ours.values()], textposition="outside"))
    if published:
        fig.add_trace(go.Bar(name="Kettunen et al. 2019 (their attack)", x=list(published),
                             y=[m for m, _ in published.values()],
                             error_y=dict(type="data", array=[se for _, se in published.values()]),
                             text=[f"{m:g} ± {se:g}" for m, se in published.values()], textposition="inside"))
    fig.update_layout(title="Pixel distance reached ÷ ε", yaxis_title="RMS distance ÷ ε", barmode="group",
                      height=400, margin=dict(t=50, b=40, l=60, r=20),
                      legend=LEGEND_BELOW)
    return fig
