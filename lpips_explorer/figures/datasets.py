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


def distributions(table: pd.DataFrame, names: Sequence[str], *, per_row: int = 3) -> go.Figure:
    """One panel per metric (titled with its label), one box per method with every pair's point.

    Args:
        table: the per-pair rows with a ``method`` column (``error_kind`` empty where scored)
            and one column per metric name. The methods are folder names: plain text in the legend and
            axis (:func:`~lpips_explorer.text.plotly_escape`).
        names: the metric columns, in order.
        per_row: panels per row (their titles stay inside a laptop's page).
    """
    cols = max(1, min(per_row, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[parse_spec(n).label for n in names],
                        vertical_spacing=0.12 if rows > 1 else 0.0)
    methods = list(dict.fromkeys(table["method"]))
    for j, name in enumerate(names):
        r, c = divmod(j, cols)
        for i, m in enumerate(methods):
            m_text = plotly_escape(m)
            vals = table.loc[(table["method"] == m) & (table["error_kind"] == ""), name].astype(float)
            fig.add_trace(go.Box(y=vals[np.isfinite(vals)], name=m_text, boxpoints="all", jitter=0.4,
                                 legendgroup=m_text, showlegend=j == 0, marker_color=f"hsl({210 + 150 * i},60%,45%)"),
                          row=r + 1, col=c + 1)
    fig.update_layout(height=60 + 300 * rows, margin=dict(l=10, r=10, t=40, b=10), boxmode="group",
                      legend=dict(orientation="h", y=-0.08 if rows == 1 else -0.04))
    return fig
