"""Figures for the Shift-vs-blur lesson: tiny images shown pixel by pixel, and metric curves.

Pure builders: data in, ``plotly.graph_objects.Figure`` out. They plot the values they are given
(nothing is recomputed here), so a test can compare every plotted number with the library's.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .maps import plotly_scale

__all__ = ["EXTRA_ROWS", "METRIC_ROWS", "pixel_grid", "sweep_curves"]

#: The rows of :func:`sweep_curves`, in order; a series belongs to the row its name starts with.
METRIC_ROWS: tuple[str, ...] = ("MSE", "PSNR", "SSIM", "LPIPS")
#: Rows a caller may add with ``rows=`` (the successor metrics).
EXTRA_ROWS: tuple[str, ...] = ("ST-LPIPS", "DISTS")
_ROW_TITLES = {"MSE": "MSE ↓", "PSNR": "PSNR (dB) ↑", "SSIM": "SSIM ↑", "LPIPS": "LPIPS ↓",
               "ST-LPIPS": "ST-LPIPS ↓", "DISTS": "DISTS ↓"}


def _finite_or_none(values: Sequence[float]) -> list[float | None]:
    """Plotly cannot draw ∞ (identical images' PSNR); such points become gaps."""
    return [float(v) if v is not None and math.isfinite(float(v)) else None for v in values]


def pixel_grid(
    panels: Mapping[str, np.ndarray],
    *,
    zmin: float = 0.0,
    zmax: float = 1.0,
    text_format: str = ".2f",
) -> go.Figure:
    """Small single-channel images side by side, every pixel a labelled cell.

    Args:
        panels: title → ``(H, W)`` array (or ``(H, W, 3)``: channel 0 is shown), e.g. the 8×8
            stripes, its shifted and blurred copies and their squared errors.
        zmin, zmax: the shared grey scale.
        text_format: how each cell's value is printed (``d3`` format).

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
                text=np.vectorize(lambda v: format(v, text_format))(z), texttemplate="%{text}",
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
        horizontal_spacing=0.08, column_titles=cols,
        row_titles=[_ROW_TITLES.get(r, r) for r in metric_rows],
    )
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
               "#7f7f7f"]
    colour_of: dict[str, str] = {}
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
        if markers and col in markers:
            for r in range(1, len(metric_rows) + 1):
                fig.add_vline(x=float(markers[col]), line_dash="dot", line_color="grey", row=r, col=c)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.03, x=0))
    return fig
