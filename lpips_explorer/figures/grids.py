"""The Conventions grid as a heatmap table: (metric on a backbone) × variant rows, size columns.

Pure builder over :class:`lpips_core.sweeps.GridCell` (no Streamlit). A row is a cell's
:attr:`~lpips_core.sweeps.GridCell.row_spec` and variant, named by ``row_label`` (default: the
spec's :attr:`~lpips_core.spec.MetricSpec.label`, ``"LPIPS · AlexNet"``).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from lpips_core.spec import MetricSpec
from lpips_core.sweeps import GridCell
from lpips_explorer.figures.maps import LEGEND_BELOW, plotly_scale

RowLabel = Callable[[MetricSpec], str]

__all__ = ["conventions_heatmap", "grid_layout", "size_curves"]


def grid_layout(cells: Sequence[GridCell]) -> tuple[list[tuple[MetricSpec, str]], list[str]]:
    """The row keys ``(row spec, variant)`` and column labels (sizes), in the cells' first-seen order."""
    rows = list(dict.fromkeys((c.row_spec, c.variant) for c in cells))
    cols = list(dict.fromkeys(c.size_label for c in cells))
    return rows, cols


def conventions_heatmap(cells: Sequence[GridCell], *, row_label: RowLabel | None = None,
                        value_name: str = "LPIPS") -> go.Figure:
    """Each cell coloured by ``log2`` of its ratio to the reference convention, labelled with both.

    Rows are ``(metric on a backbone, variant)``, named ``"<row_label(spec)> · <variant>"``, the
    reference variant of each marked ``★``;
    columns are the sizes. The single ``go.Heatmap`` trace has ``z = log2(ratio)`` (0 = agrees
    with the reference; ±1 = twice or half) and ``customdata[r][c] = [value, ratio,
    reference value, note]``; cell text is the ratio (``"ref"`` for the reference row) above
    the value. ``value_name`` names the value in the hover (``"LPIPS"``; ``"distance"`` for a
    grid of several metrics, as :func:`lpips_core.sweeps.metric_conventions_grid` gives).
    """
    if not cells:
        raise ValueError("conventions_heatmap needs at least one cell")
    label = row_label or (lambda spec: spec.label)
    rows, cols = grid_layout(cells)
    index = {(c.row_spec, c.variant, c.size_label): c for c in cells}
    z = np.full((len(rows), len(cols)), np.nan)
    text = [["" for _ in cols] for _ in rows]
    custom = [[[None, None, None, ""] for _ in cols] for _ in rows]
    for r, (row, variant) in enumerate(rows):
        for k, size in enumerate(cols):
            c = index.get((row, variant, size))
            if c is None:
                continue
            ratio = c.ratio
            if ratio is not None and math.isfinite(ratio) and ratio > 0:
                z[r, k] = math.log2(ratio)
            head = "ref" if c.is_reference else (f"×{ratio:.2f}" if math.isfinite(ratio) else "n/a")
            text[r][k] = f"{head}<br>{c.value:.4f}"
            custom[r][k] = [c.value, ratio, c.reference_value, c.note]
    marked = {(c.row_spec, c.variant) for c in cells if c.is_reference}
    ylabels = [f"{label(row)} · {variant}{' ★' if (row, variant) in marked else ''}" for row, variant in rows]
    finite = np.abs(z[np.isfinite(z)])
    span = max(1.0, float(finite.max())) if finite.size else 1.0
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=ylabels, text=text, texttemplate="%{text}", customdata=custom,
        colorscale=plotly_scale("RdBu_r"), zmid=0.0, zmin=-span, zmax=span, xgap=2, ygap=2,
        colorbar=dict(title=dict(text="log₂ ratio", side="right")),
        hovertemplate=("%{y} at %{x}<br>" + value_name + " %{customdata[0]:.4f}<br>ratio to reference ×%{customdata[1]:.3f}"
                       "<br>%{customdata[3]}<extra></extra>"),
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(side="top")
    fig.update_layout(height=max(300, 34 * len(rows) + 120), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def size_curves(cells: Sequence[GridCell], *, row_label: RowLabel | None = None,
                value_name: str = "LPIPS", height: int = 260) -> go.Figure:
    """The correct convention's value against the size, one line per row (metric on a backbone).

    Takes the reference cells (``is_reference``) of a grid; the x-axis is categorical, the sizes
    in the cells' first-seen order (e.g. ``"native (256×192)"``, ``"64×64"`` …). One
    ``go.Scatter`` per row spec, named by ``row_label``, ``y`` exactly the cells' values.
    """
    refs = [c for c in cells if c.is_reference]
    if not refs:
        raise ValueError("size_curves needs at least one reference cell (is_reference=True)")
    label = row_label or (lambda spec: spec.label)
    sizes = list(dict.fromkeys(c.size_label for c in refs))
    fig = go.Figure()
    for row in dict.fromkeys(c.row_spec for c in refs):
        by_size = {c.size_label: c.value for c in refs if c.row_spec == row}
        xs = [s for s in sizes if s in by_size]
        name = label(row)
        fig.add_trace(go.Scatter(x=xs, y=[by_size[s] for s in xs], mode="lines+markers", name=name,
                                 hovertemplate=f"{name} at %{{x}}: {value_name} %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=sizes, title_text="size scored at")
    fig.update_yaxes(title_text=value_name, rangemode="tozero")
    # the legend below the chart: at its top right the toolbar that appears on hover would cover it
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10),
                      legend=LEGEND_BELOW)
    return fig
