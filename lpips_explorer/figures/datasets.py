"""The "Score a dataset" page's chart: each metric's per-pair values, one box per method."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpips_core.spec import parse_spec

from ..text import plotly_escape

__all__ = ["distributions"]


def distributions(table: pd.DataFrame, names: Sequence[str], *, per_row: int = 1) -> go.Figure:
    """One panel per metric (titled with its label), one horizontal box per method with every pair's point.

    Args:
        table: the per-pair rows with a ``method`` column (``error_kind`` empty where scored)
            and one column per metric name. The methods are folder names: plain text on the axis
            (:func:`~lpips_explorer.text.plotly_escape`).
        names: the metric columns, in order.
        per_row: panels per row. One (the default) keeps every panel the page's full width, so its
            method names, values and title fit a phone as well as a laptop.

    Returns:
        A figure with one ``go.Box`` per (metric, method), ``x`` the method's values (``orientation="h"``,
        the method's name on the y-axis), no legend (the names are on the axes).
    """
    cols = max(1, min(per_row, len(names)))
    rows = math.ceil(len(names) / cols)
    methods = list(dict.fromkeys(table["method"]))
    panel = 60 + 34 * len(methods)  # px per panel: its boxes, tick labels and the next panel's title
    height = 30 + rows * panel
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[parse_spec(n).label for n in names],
                        vertical_spacing=min(0.3, 55 / height) if rows > 1 else 0.0, horizontal_spacing=0.12)
    for j, name in enumerate(names):
        r, c = divmod(j, cols)
        for i, m in enumerate(methods):
            m_text = plotly_escape(m)
            vals = table.loc[(table["method"] == m) & (table["error_kind"] == ""), name].astype(float)
            fig.add_trace(go.Box(x=vals[np.isfinite(vals)], name=m_text, orientation="h", boxpoints="all", jitter=0.4,
                                 legendgroup=m_text, showlegend=False, marker_color=f"hsl({210 + 150 * i},60%,45%)"),
                          row=r + 1, col=c + 1)
    fig.update_yaxes(autorange="reversed")  # the first method on top, as in the tables
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=10), showlegend=False)
    return fig
