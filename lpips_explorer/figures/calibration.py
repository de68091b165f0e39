"""Figures for the calibration lab: toy 2AFC results, the quadrant-noise map, fitted weights, loss.

Pure builders (no Streamlit): data from :mod:`lpips_explorer.calibration` in, ``go.Figure`` out. The
plotted numbers are the module's, unrounded (hover shows three decimals).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go

from lpips_explorer.calibration import Accuracy, QuadrantCheck, RealLPIPSResult, StandInResult, TwoAFCResult
from lpips_explorer.figures.maps import LEGEND_BELOW, MAP_COLORSCALE

__all__ = ["SUBSETS", "fitted_weights", "quadrant_map", "training_loss", "twoafc_bars", "twoafc_rows"]

#: The accuracy columns: attribute of :class:`~lpips_explorer.calibration.Accuracy` → trace name.
SUBSETS: dict[str, str] = {"all": "all", "noise": "noise", "dct": "DCT"}
_SUBSET_COLORS = {"all": "#4c78a8", "noise": "#f58518", "dct": "#54a24b"}
_LAYER_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2")


def twoafc_rows(result: TwoAFCResult,
                real: Mapping[str, RealLPIPSResult] | None = None) -> dict[str, Accuracy]:
    """Row label → accuracy: L2, each stand-in (w = 1, lin), then the available real LPIPS rows."""
    rows = dict(result.rows())
    for res in (real or {}).values():
        rows.update(res.rows())
    return rows


def twoafc_bars(result: TwoAFCResult, real: Mapping[str, RealLPIPSResult] | None = None, *,
                height: int = 420) -> go.Figure:
    """Grouped bars: one group per row of :func:`twoafc_rows`, one trace per subset (all, noise, DCT).

    A dotted line marks chance (0.5) and a dashed one L2's overall score. The legend is below the
    chart (the toolbar that appears on hover is at its top) and the title short enough for a phone.
    """
    rows = twoafc_rows(result, real)
    labels = list(rows)
    fig = go.Figure()
    for key, name in SUBSETS.items():
        values = [getattr(acc, key) for acc in rows.values()]
        fig.add_trace(go.Bar(
            x=labels, y=values, name=name, marker_color=_SUBSET_COLORS[key],
            hovertemplate="%{x}<br>" + name + ": %{y:.3f}<extra></extra>",
        ))
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey", annotation_text="chance",
                  annotation_position="bottom right")
    fig.add_hline(y=result.l2.all, line_dash="dash", line_color="black", annotation_text="L2 (all)",
                  annotation_position="top right")
    n_test = result.settings.get("n_test", len(result.test_kind))
    fig.update_layout(
        barmode="group", height=height, margin=dict(l=10, r=10, t=40, b=10),
        title=f"Toy 2AFC on {n_test} test triplets",
        yaxis=dict(title="agreement (2AFC score)", range=[0, 1]), xaxis=dict(tickangle=-35),
        legend=LEGEND_BELOW,
    )
    return fig


def quadrant_map(check: QuadrantCheck, *, colorscale=MAP_COLORSCALE, height: int = 380) -> go.Figure:
    """The stand-in's spatial distance map for noise added to one quadrant, quadrant outlined
    (dashed); the title says how much of the map lies in it, short enough for a third of a laptop's page.

    ``colorscale`` defaults to the maps' explicit-stop Inferno (see :mod:`lpips_explorer.figures.maps`).
    """
    m = np.asarray(check.map)
    rows, cols = check.quadrant
    fig = go.Figure(go.Heatmap(
        z=m, colorscale=colorscale, colorbar=dict(title="distance"),
        hovertemplate="x %{x}, y %{y}: %{z:.4f}<extra></extra>",
    ))
    fig.add_shape(type="rect", x0=-0.5, y0=-0.5, x1=cols - 0.5, y1=rows - 0.5,
                  line=dict(color="cyan", width=2, dash="dash"))
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=40, b=10),
        title=dict(text=f"{check.share:.0%} in the dashed quadrant", font_size=15),
        yaxis=dict(autorange="reversed", scaleanchor="x", constrain="domain"),
        xaxis=dict(constrain="domain"),
    )
    return fig


def fitted_weights(standin: StandInResult, *, height: int = 320) -> go.Figure:
    """The fitted lin weights of one stand-in, channel by channel, one colour (trace) per layer (the
    legend, with each layer's share of zero weights, below the chart)."""
    fig = go.Figure()
    start = 0
    for i, (w, zero) in enumerate(zip(standin.weights, standin.zero_fraction)):
        idx = np.arange(start, start + len(w))
        fig.add_trace(go.Bar(
            x=idx, y=w, name=f"layer {i + 1} ({zero:.0%} zero)", marker_color=_LAYER_COLORS[i % len(_LAYER_COLORS)],
            customdata=np.arange(len(w)),
            hovertemplate=f"layer {i + 1}, channel " + "%{customdata}: %{y:.3f}<extra></extra>",
        ))
        start += len(w)
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey", annotation_text="start (w = 1)")
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=40, b=10), bargap=0,
        title=f"Net {standin.seed}: fitted channel weights",
        xaxis=dict(title="channel (layers concatenated)"), yaxis=dict(title="weight (kept ≥ 0)"),
        legend=LEGEND_BELOW,
    )
    return fig


def training_loss(result: TwoAFCResult, *, height: int = 300) -> go.Figure:
    """Training cross-entropy of each stand-in's lin fit, step by step."""
    fig = go.Figure()
    for s in result.standins:
        fig.add_trace(go.Scatter(x=np.arange(1, len(s.loss) + 1), y=s.loss, mode="lines",
                                 name=f"net {s.seed}"))
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=40, b=10), title="Fitting: training loss",
        xaxis=dict(title="Adam step"), yaxis=dict(title="binary cross-entropy"),
    )
    return fig
