"""Figures for the Shift-vs-blur lesson: tiny images shown pixel by pixel, and metric curves.

Pure builders: data in, ``plotly.graph_objects.Figure`` out (the answer's ratio bars: HTML, see
:class:`RatioBars`). They plot the values they are given
(nothing is recomputed here), so a test can compare every plotted number with the library's.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpips_explorer.figures.maps import LEGEND_BELOW, plotly_scale

__all__ = ["BAR_COLOUR", "EXTRA_ROWS", "HIGHLIGHT_COLOUR", "METRIC_ROWS", "RATIO_AXIS_TITLE", "RatioBars", "block_mean", "layer_maps_by_shift", "layer_ratio_curves", "pixel_grid",
           "shift_blur_ratios", "sweep_curves"]

#: The rows of :func:`sweep_curves`, in order; a series belongs to the row its name starts with.
METRIC_ROWS: tuple[str, ...] = ("MSE", "PSNR", "SSIM", "LPIPS")
#: Rows a caller may add with ``rows=`` (the successor metrics).
EXTRA_ROWS: tuple[str, ...] = ("ST-LPIPS", "DISTS")
_ROW_TITLES = {"MSE": "MSE ↓", "PSNR": "PSNR (dB) ↑", "SSIM": "SSIM ↑", "LPIPS": "LPIPS ↓",
               "ST-LPIPS": "ST-LPIPS ↓", "DISTS": "DISTS ↓"}


def _finite_or_none(values: Sequence[float]) -> list[float | None]:
    """Plotly cannot draw ∞ (identical images' PSNR); such points become gaps."""
    return [float(v) if v is not None and math.isfinite(float(v)) else None for v in values]


def _cell_text(value: float, spec: str) -> str:
    """``value`` in the format ``spec`` without its leading zero: ``.25``, ``-.5``, ``0``, ``1``."""
    text = format(value, spec)
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def pixel_grid(
    panels: Mapping[str, np.ndarray],
    *,
    zmin: float = 0.0,
    zmax: float = 1.0,
    text_format: str = "g",
) -> go.Figure:
    """Small single-channel images side by side, every pixel a labelled cell.

    Args:
        panels: title → ``(H, W)`` array (or ``(H, W, 3)``: channel 0 is shown), e.g. the 8×8
            stripes, its shifted and blurred copies and their squared errors.
        zmin, zmax: the shared grey scale.
        text_format: how each cell's value is printed (Python's format spec), a leading zero
            dropped: ``0``, ``.25``, ``1`` (short enough for three 8×8 panels side by side on a phone).

    Returns:
        One ``go.Heatmap`` per panel (row 0 at the top), ``z`` exactly the given values.
    """
    if not panels:
        raise ValueError("pixel_grid needs at least one panel")
    names = list(panels)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.04)
    for k, name in enumerate(names, start=1):
        z = np.asarray(panels[name], dtype=np.float64)
        if z.ndim == 3:
            z = z[:, :, 0]
        if z.ndim != 2:
            raise ValueError(f"panel {name!r} must be (H, W) or (H, W, 3), got shape {z.shape}")
        fig.add_trace(
            go.Heatmap(
                z=z, zmin=zmin, zmax=zmax, colorscale=plotly_scale("gray"), showscale=False, name=name,
                text=np.vectorize(lambda v: _cell_text(v, text_format))(z), texttemplate="%{text}",
                textfont={"size": 9}, hovertemplate="row %{y}, col %{x}: %{z:.4f}<extra>" + name + "</extra>",
            ),
            row=1, col=k,
        )
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{k if k > 1 else ''}", showticklabels=False,
                         row=1, col=k)
        fig.update_xaxes(showticklabels=False, row=1, col=k)
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def sweep_curves(
    columns: Mapping[str, tuple[Sequence[float], Mapping[str, Sequence[float]]]],
    *,
    markers: Mapping[str, float] | None = None,
    height: int | None = None,
    rows: Sequence[str] | None = None,
    shared_y: bool = False,
) -> go.Figure:
    """Metric curves against a distortion parameter: one column per sweep, one row per metric.

    Args:
        columns: column title (e.g. ``"shift (px)"``) → ``(x values, series)``, where ``series``
            maps a name starting with a :data:`METRIC_ROWS` entry (``"MSE"``, ``"PSNR (dB)"``,
            ``"SSIM"``, ``"LPIPS · AlexNet"`` …) to one value per x.
        markers: column title → the current parameter value, drawn as a dotted vertical line.
        height: the figure's height in px (default 205 per row: 820 for the four standard rows).
        rows: the row prefixes, in order (default :data:`METRIC_ROWS`); e.g. add ``"ST-LPIPS"``
            and ``"DISTS"`` (:data:`EXTRA_ROWS`) for the successor metrics. A series belongs to
            the first row its name starts with.
        shared_y: one y-axis per row across the columns (``yaxis2`` … match their row's first
            axis), so a shift and a blur of the same metric are read on the same scale.

    Returns:
        One ``go.Scatter`` per (column, series), named after the series; non-finite values
        (PSNR of identical images) are gaps. ``meta`` of each trace is ``[column, series]``.

    Raises:
        ValueError: a series whose name matches no row, or whose length differs from x.
    """
    cols = list(columns)
    metric_rows = tuple(METRIC_ROWS if rows is None else rows)
    if not metric_rows:
        raise ValueError("sweep_curves needs at least one row")
    height = 205 * len(metric_rows) if height is None else height
    fig = make_subplots(
        rows=len(metric_rows), cols=len(cols), shared_xaxes="columns",
        vertical_spacing=0.05 if len(metric_rows) <= 4 else 0.2 / len(metric_rows),
        horizontal_spacing=0.08, column_titles=cols, shared_yaxes="rows" if shared_y else False,
        row_titles=[_ROW_TITLES.get(r, r) for r in metric_rows],
    )
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
               "#7f7f7f"]
    colour_of: dict[str, str] = {}
    lines: list[dict] = []
    for c, col in enumerate(cols, start=1):
        x, series = columns[col]
        x = [float(v) for v in x]
        for name, values in series.items():
            row = next((i for i, r in enumerate(metric_rows, start=1) if name.startswith(r)), None)
            if row is None:
                raise ValueError(f"series {name!r} matches none of the rows {metric_rows}")
            if len(values) != len(x):
                raise ValueError(f"series {name!r} of column {col!r} has {len(values)} values for {len(x)} x values")
            colour = colour_of.setdefault(name, palette[len(colour_of) % len(palette)])
            fig.add_trace(
                go.Scatter(
                    x=x, y=_finite_or_none(values), mode="lines+markers", name=name, meta=[col, name],
                    line={"color": colour}, legendgroup=name, showlegend=c == 1,
                    hovertemplate=f"{col} = %{{x}}<br>{name}: %{{y:.4g}}<extra></extra>",
                ),
                row=row, col=c,
            )
        if markers and col in markers:  # one layout update below (add_vline per panel is slow)
            for r in range(1, len(metric_rows) + 1):
                sub = fig.get_subplot(r, c)
                xref, yref = (a.plotly_name.replace("axis", "") for a in (sub.xaxis, sub.yaxis))
                lines.append(dict(type="line", x0=float(markers[col]), x1=float(markers[col]), y0=0, y1=1,
                                  xref=xref, yref=f"{yref} domain", line=dict(dash="dot", color="grey")))
    # the row titles stand to the right of the last column: the right margin holds them; the legend
    # below (the toolbar that appears on hover is at the top right)
    fig.update_layout(height=height, margin=dict(l=10, r=34, t=40, b=10), shapes=lines, legend=LEGEND_BELOW)
    return fig


#: :func:`shift_blur_ratios`' colours: the highlighted metric (the sidebar's backbone) and the others.
HIGHLIGHT_COLOUR, BAR_COLOUR = "#d62728", "#7f9fbf"
#: The axis title under :func:`shift_blur_ratios`' bars.
RATIO_AXIS_TITLE = "shifted copy's distance ÷ blurred copy's (log scale; < 1: the shift is forgiven)"
#: A bar ending this close (percent of the axis) left of the line at 1 has its label after the line:
#: a label (``×0.62``, about 40 px) fits in that share of the axis at a phone's width.
LABEL_ROOM = 25.0


@dataclass(frozen=True)
class RatioBars:
    """Each metric's shift-to-blur ratio as horizontal bars on one logarithmic axis, drawn in HTML.

    The Shift-vs-blur page's answer chart: plain HTML and CSS (``st.html``), so a new visitor's
    browser draws it at once instead of first loading and evaluating Plotly's 4.7 MB bundle (which
    kept the page busy for seconds after the verdict). The numbers are the ones given.

    Attributes:
        names, ratios, colours: one per bar, top to bottom (the non-positive or non-finite ratios
            left out).
        lo, hi: the axis' ends, ``log10`` of the ratio: the ratios and 1, with 0.15 decade of room
            on the left and 0.45 on the right for the longest bar's label.
        ticks: ``(ratio, label)`` of the axis ticks.
    """

    names: tuple[str, ...]
    ratios: tuple[float, ...]
    colours: tuple[str, ...]
    lo: float
    hi: float
    ticks: tuple[tuple[float, str], ...]

    def position(self, ratio: float) -> float:
        """Where ``ratio`` sits along the axis, in percent of its length."""
        return 100.0 * (math.log10(ratio) - self.lo) / (self.hi - self.lo)

    def label_at(self, ratio: float) -> float:
        """Where the bar's label ``×0.62`` starts, in percent of the axis (a small gap follows):
        just after the bar, or just after the dashed line at 1 when the bar ends left of that line
        by less than :data:`LABEL_ROOM` of the axis (the label would be drawn across the line)."""
        end, one = self.position(ratio), self.position(1.0)
        return one if end < one < end + LABEL_ROOM else end

    @property
    def html(self) -> str:
        """The chart: one grid row per bar (name, bar, label ``×0.25``; a tooltip and ``data-metric``/
        ``data-ratio`` attributes on each), a dashed line at 1, the ticks and the axis title."""
        one = self.position(1.0)
        line = (f'<div style="position:absolute;left:{one:.3f}%;top:0;bottom:0;'
                'border-left:1px dashed #31333f"></div>')
        rows = []
        for name, ratio, colour in zip(self.names, self.ratios, self.colours):
            width = self.position(ratio)
            label = html.escape(name)
            rows.append(
                f'<div style="text-align:right;white-space:nowrap;padding-right:0.4rem">{label}</div>'
                f'<div title="{label}: shift ÷ blur = {ratio:.3g}" data-metric="{label}" data-ratio="{ratio!r}" '
                'style="position:relative;height:1.5rem">'
                f'<div style="position:absolute;left:0;top:0.25rem;bottom:0.25rem;width:{width:.3f}%;'
                f'background:{colour};border-radius:2px"></div>{line}'
                f'<div style="position:absolute;left:calc({self.label_at(ratio):.3f}% + 0.3rem);top:0;line-height:1.5rem;'
                f'white-space:nowrap">×{ratio:.2g}</div></div>')
        ticks = "".join(
            f'<div style="position:absolute;left:{self.position(v):.3f}%;top:0;height:0.3rem;'
            f'border-left:1px solid #8e8e8e"></div><div style="position:absolute;left:{self.position(v):.3f}%;'
            f'top:0.3rem;transform:translateX(-50%);white-space:nowrap">{text}</div>' for v, text in self.ticks)
        axis = (f'<div></div><div style="position:relative;height:1.5rem;border-top:1px solid #8e8e8e;'
                f'color:#6b6b6b">{ticks}</div>')
        return ('<div class="svb-ratio-bars" style="font-size:0.875rem;line-height:1.2;padding:0.25rem 0 0.5rem">'
                '<div style="display:grid;grid-template-columns:max-content minmax(0,1fr);align-items:center">'
                + "".join(rows) + axis + '</div>'
                f'<div style="text-align:center;color:#6b6b6b;font-size:0.8rem;padding-top:0.1rem">'
                f'{html.escape(RATIO_AXIS_TITLE)}</div></div>')


def _ticks(lo: float, hi: float) -> tuple[tuple[float, str], ...]:
    """1, 2, 5 × 10^k inside ``[10^lo, 10^hi]`` when the axis spans under two decades, else powers of 10."""
    steps = (1, 2, 5) if hi - lo < 2 else (1,)
    out = []
    for k in range(math.floor(lo), math.ceil(hi) + 1):
        for m in steps:
            v = m * 10.0 ** k
            if lo <= math.log10(v) <= hi:
                out.append((v, f"{v:g}"))
    return tuple(out)


def shift_blur_ratios(ratios: Mapping[str, float], *, highlight: str | None = None) -> RatioBars:
    """Each metric's shift-to-blur ratio on ONE shared logarithmic axis (:class:`RatioBars`).

    Args:
        ratios: metric name → (distance of the shifted copy) / (distance of the blurred copy),
            a positive number (1 = the metric rates both alike; > 1 = the shift counts as worse).
            Non-finite or non-positive ratios (an unchanged copy) are left out.
        highlight: the name drawn in :data:`HIGHLIGHT_COLOUR` (the sidebar's backbone).

    Raises:
        ValueError: no ratio is positive and finite.
    """
    kept = {k: float(v) for k, v in ratios.items() if v is not None and math.isfinite(float(v)) and float(v) > 0}
    if not kept:
        raise ValueError(f"shift_blur_ratios needs at least one positive finite ratio, got {dict(ratios)}")
    lo = math.log10(min(min(kept.values()), 1.0)) - 0.15
    hi = math.log10(max(max(kept.values()), 1.0)) + 0.45
    names = tuple(kept)
    return RatioBars(names, tuple(kept[n] for n in names),
                     tuple(HIGHLIGHT_COLOUR if n == highlight else BAR_COLOUR for n in names), lo, hi, _ticks(lo, hi))


def block_mean(a: np.ndarray, max_side: int) -> np.ndarray:
    """``(..., H, W)`` averaged over k×k blocks (k the smallest integer with ``ceil(side / k) ≤ max_side``);
    edge blocks average what they hold. ``(…, H, W)`` in, ``(…, ceil(H/k), ceil(W/k))`` out."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"block_mean needs (..., H, W), got shape {a.shape}")
    if max_side < 1:
        raise ValueError(f"max_side must be ≥ 1, got {max_side}")
    h, w = a.shape[-2:]
    k = max(1, math.ceil(max(h, w) / max_side))
    if k == 1:
        return a
    hh, ww = math.ceil(h / k) * k, math.ceil(w / k) * k
    pad = [(0, 0)] * (a.ndim - 2) + [(0, hh - h), (0, ww - w)]
    total = np.pad(a, pad).reshape(*a.shape[:-2], hh // k, k, ww // k, k).sum(axis=(-3, -1))
    count = np.pad(np.ones((h, w)), pad[-2:]).reshape(hh // k, k, ww // k, k).sum(axis=(-3, -1))
    return total / count


def layer_maps_by_shift(
    maps: Mapping[str, np.ndarray],
    layer_names: Sequence[str],
    *,
    max_side: int = 48,
    height: int | None = None,
) -> go.Figure:
    """Each layer's distance map (columns) for each copy (rows), on ONE colour scale.

    Args:
        maps: row title (``"shift 1 px"``, ``"blur σ = 1.5"`` …) → ``(L, H, W)`` non-negative maps,
            e.g. ``MetricResult.layer_maps[i]`` (each layer's spatial term at the input's size).
        layer_names: the ``L`` column titles.
        max_side: maps are block-averaged (:func:`block_mean`) to at most this many cells a side.
        height: px (default 30 + 90 per row).

    Returns:
        One ``go.Heatmap`` per (row, layer), ``z`` the block-averaged map, all with the same
        ``zmin = 0`` and ``zmax`` = the largest value shown; the last trace carries the colour bar.
    """
    if not maps:
        raise ValueError("layer_maps_by_shift needs at least one row of maps")
    rows = list(maps)
    small = {}
    for r in rows:
        m = np.asarray(maps[r], dtype=np.float64)
        if m.ndim != 3 or m.shape[0] != len(layer_names):
            raise ValueError(f"row {r!r} must be (L={len(layer_names)}, H, W), got shape {m.shape}")
        small[r] = block_mean(m, max_side)
    zmax = max(float(s.max()) for s in small.values()) or 1.0
    fig = make_subplots(rows=len(rows), cols=len(layer_names), column_titles=list(layer_names), row_titles=rows,
                        horizontal_spacing=0.01, vertical_spacing=0.03)
    scale = plotly_scale("Viridis")
    for i, r in enumerate(rows, start=1):
        for j, name in enumerate(layer_names, start=1):
            last = i == len(rows) and j == len(layer_names)
            fig.add_trace(go.Heatmap(
                z=small[r][j - 1], zmin=0.0, zmax=zmax, colorscale=scale, showscale=last,
                colorbar=dict(thickness=10, len=0.9, title=dict(text="term", side="right")),
                hovertemplate=f"{r} · {name}<br>" + "term %{z:.3g}<extra></extra>",
            ), row=i, col=j)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(height=height or 30 + 90 * len(rows), margin=dict(l=10, r=30, t=30, b=5))
    return fig


def layer_ratio_curves(
    shifts: Sequence[float],
    shift_terms: np.ndarray,
    blur_terms: Sequence[float],
    layer_names: Sequence[str],
    *,
    blur_label: str = "the blur",
    height: int = 300,
) -> go.Figure:
    """Each layer's term for a growing shift, as a multiple of the same layer's term for the blur.

    Args:
        shifts: ``S`` shift sizes (px).
        shift_terms: ``(S, L)`` per-layer terms (``MetricResult.per_layer``) of the shifted copies.
        blur_terms: ``(L,)`` per-layer terms of the blurred copy (positive).
        layer_names: the ``L`` layer names.

    Returns:
        One ``go.Scatter`` per layer, ``y = shift_terms[:, l] / blur_terms[l]``, on a log y-axis with a
        dashed line at 1 (above it, the layer finds the shift worse than the blur); ``blur_label``
        names the blur in the hover (the axis title is short enough for the chart's height on a phone).
    """
    terms = np.asarray(shift_terms, dtype=np.float64)
    blur = np.asarray(blur_terms, dtype=np.float64)
    if terms.shape != (len(shifts), len(layer_names)) or blur.shape != (len(layer_names),):
        raise ValueError(f"need shift_terms ({len(shifts)}, {len(layer_names)}) and blur_terms "
                         f"({len(layer_names)},), got {terms.shape} and {blur.shape}")
    if not np.all(blur > 0):
        raise ValueError(f"blur_terms must be positive, got {blur.tolist()}")
    fig = go.Figure()
    for j, name in enumerate(layer_names):
        fig.add_trace(go.Scatter(
            x=[float(s) for s in shifts], y=(terms[:, j] / blur[j]).tolist(), mode="lines+markers", name=name,
            hovertemplate=f"{name}: shift %{{x}} px → %{{y:.3g}}× {blur_label}<extra></extra>",
        ))
    fig.add_hline(y=1.0, line_dash="dash", line_color="black")
    fig.update_yaxes(type="log", title_text="× its term for the blur")
    fig.update_xaxes(title_text="shift (px)")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), legend=LEGEND_BELOW)
    return fig
