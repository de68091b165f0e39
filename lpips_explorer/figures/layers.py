"""Inside a layer: the toy layer's arrows and terms, and a real layer's maps, weights and channels.

Pure builders (no Streamlit): every plotted number is one the caller passed in.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpips_explorer.toy_layer import ToyLayer
from lpips_explorer.figures.maps import LEGEND_BELOW, plotly_scale

__all__ = [
    "HIGHLIGHT_NAME",
    "OTHER_NAME",
    "heatmaps_row",
    "lin_weight_bars",
    "top_channel_bars",
    "toy_arrows",
    "toy_terms",
    "zero_share_bars",
]

_X_COLOUR = "#1f77b4"
_Y_COLOUR = "#d62728"
TOY_SPACING = 1.5  #: distance between the origins of neighbouring positions in :func:`toy_arrows`
TEXT_ROOM = 1.2  #: :func:`top_channel_bars`' x-axis end over the longest bar, leaving room for its label


def _toy_origin(i: int, j: int) -> tuple[float, float]:
    """Row 0 at the top, column 0 on the left."""
    return j * TOY_SPACING, (2 - i) * TOY_SPACING


def toy_arrows(toy: ToyLayer) -> go.Figure:
    """The toy layer's unit-normalised feature vectors as arrows, one pair per grid position.

    Each position's arrows start at its own origin (row 0 at the top); channel 1 points right,
    channel 2 up. Traces: ``"x̂ (reference)"`` and ``"ŷ (distorted)"``, each a ``go.Scatter`` of
    segments ``[origin, origin + vector, None, …]`` in row-major order, plus a faint quarter
    circle of radius 1 per position (``"unit circle"``). Annotations give each position's
    weighted and unweighted term.
    """
    fig = go.Figure()
    t = np.linspace(0, np.pi / 2, 30)
    cx, cy = [], []
    for i in range(3):
        for j in range(3):
            ox, oy = _toy_origin(i, j)
            cx += list(ox + np.cos(t)) + [None]
            cy += list(oy + np.sin(t)) + [None]
    fig.add_trace(go.Scatter(x=cx, y=cy, mode="lines", name="unit circle", hoverinfo="skip",
                             line=dict(color="lightgrey", width=1), showlegend=False))
    for name, vecs, colour in (("x̂ (reference)", toy.x_hat, _X_COLOUR), ("ŷ (distorted)", toy.y_hat, _Y_COLOUR)):
        xs, ys, hover = [], [], []
        for i in range(3):
            for j in range(3):
                ox, oy = _toy_origin(i, j)
                a, b = float(vecs[i, j, 0]), float(vecs[i, j, 1])
                xs += [ox, ox + a, None]
                ys += [oy, oy + b, None]
                label = f"({i}, {j}): ({a:.3f}, {b:.3f})"
                hover += [label, label, None]
                fig.add_annotation(x=ox + a, y=oy + b, ax=ox, ay=oy, xref="x", yref="y", axref="x", ayref="y",
                                   showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=2, arrowcolor=colour,
                                   text="")
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, line=dict(color=colour, width=3),
                                 hovertext=hover, hoverinfo="text"))
    for i in range(3):
        for j in range(3):
            ox, oy = _toy_origin(i, j)
            fig.add_annotation(
                x=ox + 0.55, y=oy - 0.18, showarrow=False, font=dict(size=11),
                text=f"{toy.terms[i, j]:.3f} <span style='color:grey'>({toy.terms_unweighted[i, j]:.3f})</span>",
            )
    fig.update_xaxes(range=[-0.3, 3 * TOY_SPACING - 0.2], showticklabels=False, showgrid=False, zeroline=False,
                     title_text="channel 1 →")
    fig.update_yaxes(range=[-0.4, 3 * TOY_SPACING - 0.2], showticklabels=False, showgrid=False, zeroline=False,
                     scaleanchor="x", title_text="channel 2 →")
    fig.update_layout(height=520, margin=dict(l=10, r=10, t=10, b=10),
                      legend=LEGEND_BELOW)
    return fig


def toy_terms(toy: ToyLayer, *, panels: Sequence[str] = ("weighted", "unweighted")) -> go.Figure:
    """The toy layer's per-position terms: the weighted and the unweighted heatmaps, side by side.

    ``panels`` picks them (``"weighted"``, ``"unweighted"``, in the order given): a page that
    shows each in its own column (stacked on a phone) asks for one at a time. ``z`` of each
    ``go.Heatmap`` trace is ``toy.terms`` or ``toy.terms_unweighted``, on one shared colour scale
    (the colour bar on the unweighted panel); the panel titles carry the two spatial means
    (``d_l``), short enough for half a laptop's page.
    """
    known = {"weighted": ("weighted term", toy.terms, f"weighted: d_l = {toy.d_l:.3f}"),
             "unweighted": ("unweighted term", toy.terms_unweighted, f"unweighted: mean {toy.d_l_unweighted:.3f}")}
    if not panels or any(p not in known for p in panels):
        raise ValueError(f"panels must name some of {list(known)}, got {list(panels)}")
    fig = make_subplots(rows=1, cols=len(panels), horizontal_spacing=0.2,
                        subplot_titles=[known[p][2] for p in panels])
    top = float(max(toy.terms.max(), toy.terms_unweighted.max()))
    for k, p in enumerate(panels, 1):
        name, z, _ = known[p]
        fig.add_trace(go.Heatmap(
            z=z, zmin=0, zmax=top, colorscale=plotly_scale("Inferno"), showscale=p == "unweighted", name=name,
            text=np.vectorize(lambda v: f"{v:.3f}")(z), texttemplate="%{text}",
            hovertemplate="row %{y}, col %{x}: %{z:.4f}<extra>" + name + "</extra>",
        ), row=1, col=k)
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{k if k > 1 else ''}", constrain="domain", dtick=1,
                         title_text="row", row=1, col=k)
        fig.update_xaxes(constrain="domain", dtick=1, title_text="column", row=1, col=k)
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=50, b=10))
    return fig


def heatmaps_row(
    panels: Mapping[str, np.ndarray],
    *,
    colorscale: str = "Viridis",
    share_scale: bool = True,
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    value_name: str = "value",
    height: int = 330,
) -> go.Figure:
    """Feature maps (or any 2-D maps) side by side at their native grid.

    Args:
        panels: title → ``(H, W)`` array.
        share_scale: one colour range (and one colour bar) for all panels, so two images' maps
            can be compared; otherwise each panel gets its own range and colour bar.
        zmid: the value at the middle of the colour scale (e.g. 0 for a diverging scale of
            differences); with ``zmid`` the range is symmetric about it.

    Returns:
        One ``go.Heatmap`` per panel (``z`` = the array, row 0 at the top).
    """
    if not panels:
        raise ValueError("heatmaps_row needs at least one panel")
    names = list(panels)
    arrays = [np.asarray(panels[n], dtype=np.float64) for n in names]
    for n, a in zip(names, arrays):
        if a.ndim != 2:
            raise ValueError(f"panel {n!r} must be 2-D, got shape {a.shape}")
    scale = plotly_scale(colorscale)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.07)

    def bounds(group):
        lo = min(float(a.min()) for a in group) if zmin is None else zmin
        hi = max(float(a.max()) for a in group) if zmax is None else zmax
        if zmid is not None:
            half = max(abs(lo - zmid), abs(hi - zmid)) or 1.0
            lo, hi = zmid - half, zmid + half
        return lo, hi

    shared = bounds(arrays)
    for k, (n, a) in enumerate(zip(names, arrays), start=1):
        lo, hi = shared if share_scale else bounds([a])
        right = fig.layout[f"xaxis{k if k > 1 else ''}"].domain[1]
        fig.add_trace(go.Heatmap(
            z=a, colorscale=scale, name=n, zmin=lo, zmax=hi,
            showscale=(k == len(names)) if share_scale else True,
            colorbar=dict(x=right + 0.005, thickness=10, len=0.85),
            hovertemplate="x %{x}, y %{y}<br>" + value_name + ": %{z:.4g}<extra></extra>",
        ), row=1, col=k)
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{k if k > 1 else ''}", showticklabels=False,
                         row=1, col=k)
        fig.update_xaxes(showticklabels=False, row=1, col=k)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10))
    return fig


#: Legend names of :func:`lin_weight_bars`' two traces.
HIGHLIGHT_NAME = "top channels of this pair's d_l"
OTHER_NAME = "other channels"


def lin_weight_bars(weights: Sequence[float], *, layer_name: str = "", highlight: Sequence[int] = ()) -> go.Figure:
    """The lin weights ``v`` of one layer, one bar per channel; ``highlight`` channels in red.

    Returns two ``go.Bar`` traces over the channel index (``x``; ``y`` = weight), overlaid:
    :data:`OTHER_NAME` (blue) and, when ``highlight`` is given, :data:`HIGHLIGHT_NAME` (red),
    named in a legend under the chart. The title states the share of exactly-zero weights.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    hl = np.zeros(w.size, dtype=bool)
    hl[[int(c) for c in highlight]] = True
    zero = float((w == 0).mean()) if w.size else 0.0
    channels = np.arange(w.size)
    fig = go.Figure()
    for name, mask, colour in ((OTHER_NAME, ~hl, _X_COLOUR), (HIGHLIGHT_NAME, hl, _Y_COLOUR)):
        if mask.any() or name == OTHER_NAME:
            fig.add_trace(go.Bar(x=channels[mask], y=w[mask], marker_color=colour, name=name,
                                 hovertemplate="channel %{x}: %{y:.4g}<extra>" + name + "</extra>"))
    fig.update_layout(
        title=f"{layer_name}: {zero:.1%} of {w.size} weights are zero" if layer_name else None,
        xaxis_title="channel", yaxis_title="weight v (on squared differences)", bargap=0, barmode="overlay",
        height=340, margin=dict(l=10, r=10, t=40, b=10), showlegend=bool(hl.any()),
        legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),
    )
    return fig


def zero_share_bars(layer_names: Sequence[str], shares: Sequence[float], *, title: str = "") -> go.Figure:
    """The share of zero lin weights per layer (``y`` in ``[0, 1]``, shown as percent)."""
    if len(layer_names) != len(shares):
        raise ValueError(f"{len(layer_names)} layer names for {len(shares)} shares")
    fig = go.Figure(go.Bar(x=list(layer_names), y=[float(s) for s in shares], name="zero weights",
                           text=[f"{s:.1%}" for s in shares], textposition="outside",
                           hovertemplate="%{x}: %{y:.1%} zero<extra></extra>"))
    fig.update_layout(title=title or None, yaxis=dict(tickformat=".0%", range=[0, 1.1]), height=300,
                      margin=dict(l=10, r=10, t=40 if title else 20, b=10))
    return fig


def top_channel_bars(channels: Sequence[int], contributions: Sequence[float], *, total: float,
                     layer_name: str = "") -> go.Figure:
    """The channels contributing most to a layer's term ``d_l``, largest on top.

    Args:
        channels: channel indices, in the order to show (largest first).
        contributions: each channel's ``v_c · mean_{h,w} Δ_c²``.
        total: the layer's ``d_l`` (the sum over all channels), for the shares.

    Returns:
        One horizontal ``go.Bar``: ``x`` = contributions, ``y`` = ``"ch <index>"`` labels.
    """
    if len(channels) != len(contributions):
        raise ValueError(f"{len(channels)} channels for {len(contributions)} contributions")
    vals = [float(c) for c in contributions]
    labels = [f"ch {int(c)}" for c in channels]
    shares = [v / total if total else 0.0 for v in vals]
    fig = go.Figure(go.Bar(
        x=vals, y=labels, orientation="h", customdata=shares, name="contribution",
        text=[f"{s:.1%}" for s in shares], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.4g} (%{customdata:.1%} of d_l)<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    # Room right of the longest bar for its label ("29.7%"): the axis runs a fifth further.
    top = max([v for v in vals if np.isfinite(v)], default=0.0)
    fig.update_xaxes(range=[0, top * TEXT_ROOM if top > 0 else 1.0])
    fig.update_layout(title=f"{layer_name}: top {len(vals)} channels of d_l = {total:.4f}" if layer_name else None,
                      xaxis_title="contribution to d_l", height=max(260, 26 * len(vals) + 90),
                      margin=dict(l=10, r=40, t=40, b=10))
    return fig
