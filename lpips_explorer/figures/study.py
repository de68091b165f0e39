"""The class study's result to project: each metric's agreement with the class, and the human ceiling.

Pure builder (no Streamlit): the ``"class"`` block of
:func:`lpips_explorer.study.scoring.summarize` in, ``go.Figure`` out. The plotted numbers are the
summary's, unrounded (hover shows three decimals).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import plotly.graph_objects as go

from lpips_core.spec import CLASSIC

__all__ = ["agreement_chart", "lin_weights_chart"]
_LEARNED, _CLASSIC, _BAND, _CEILING = "#1f77b4", "#8c8c8c", "rgba(44,160,44,0.18)", "#2ca02c"
_ROW_PX, _TOP, _BOTTOM, _LEFT = 26, 56, 48, 190


def agreement_chart(block: Mapping[str, Any], *, n_judges: int | None = None, title: str | None = None,
                    compact: bool = False) -> go.Figure:
    """Horizontal dots with bootstrap intervals: each metric's 2AFC agreement with the class.

    Args:
        block: ``summarize(...)["class"]``: ``metrics`` (``{key, label, score, low, high, n}``) and
            ``ceiling`` (the same keys).
        n_judges: for the title (``"… (12 judges)"``).
        title: replaces the default title.
        compact: for a phone (a column of about 360 px): each metric's name inside the chart, above
            its dot (no left margin for the names), shorter texts, 40 px a row.

    The metrics are sorted best first (top); learned metrics blue dots, MSE/PSNR/SSIM grey
    diamonds (no legend: the page says so). The human ceiling is a green band (its bootstrap
    interval) with a line at its value; chance (0.5) a dotted line. The x axis spans ``[min(0.3, lowest), 1]``. The height grows with the number of
    metrics (26 px a row), margins are fixed.

    Raises:
        ValueError: ``block`` has no metrics.
    """
    metrics = [m for m in block.get("metrics", []) if math.isfinite(m["score"])]
    if not metrics:
        raise ValueError("the class block has no scored metric")
    metrics = sorted(metrics, key=lambda m: (-m["score"], m["label"]))
    labels = [m["label"] for m in metrics]
    fig = go.Figure()
    _add_dots(fig, metrics)
    ceiling = block.get("ceiling")
    lowest = min(m["low"] if math.isfinite(m["low"]) else m["score"] for m in metrics)
    if ceiling is not None and math.isfinite(ceiling["score"]):
        lo, hi = ceiling["low"], ceiling["high"]
        if math.isfinite(lo) and math.isfinite(hi):
            fig.add_vrect(x0=lo, x1=hi, fillcolor=_BAND, line_width=0, layer="below")
        fig.add_vline(x=ceiling["score"], line_color=_CEILING, line_width=2)
        fig.add_annotation(x=ceiling["score"], y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                           xanchor="left" if ceiling["score"] < 0.75 else "right",
                           text=f"{'ceiling' if compact else 'human ceiling'} {ceiling['score']:.2f}",
                           font=dict(color=_CEILING, size=12 if compact else 13))
        lowest = min(lowest, lo if math.isfinite(lo) else ceiling["score"])
    fig.add_vline(x=0.5, line_dash="dot", line_color="grey", line_width=1)
    fig.add_annotation(x=0.5, y=1.0, yref="paper", yanchor="bottom", xanchor="right", showarrow=False,
                       text="chance", font=dict(color="grey", size=12))
    x0 = min(0.3, math.floor(lowest * 20) / 20)
    if title is None:
        title = "Agreement with the class (2AFC)" + ("" if n_judges is None else
                                                     f" · {n_judges} judge{'s' * (n_judges != 1)}")
    if compact:
        for m in metrics:  # the name above its dot, inside the plot
            fig.add_annotation(x=x0, y=m["label"], xref="x", yref="y", xanchor="left", yanchor="bottom", yshift=4,
                               showarrow=False, text=m["label"], font=dict(size=12, color="#333"))
        fig.update_layout(
            title=dict(text=title.replace(" (2AFC)", ""), x=0, xanchor="left", font=dict(size=15)),
            height=_TOP + _BOTTOM + 40 * len(metrics),
            margin=dict(l=8, r=8, t=_TOP, b=_BOTTOM, autoexpand=False),
            xaxis=dict(range=[x0, 1.0], title=dict(text="share of the class it agrees with", font=dict(size=12)),
                       tickformat=".0%", gridcolor="rgba(128,128,128,0.2)", zeroline=False, tickfont=dict(size=11)),
            yaxis=dict(categoryorder="array", categoryarray=labels[::-1], automargin=False, showticklabels=False,
                       range=[-0.6, len(labels) - 0.1]),
            showlegend=False, font=dict(size=12), plot_bgcolor="white",
        )
        return fig
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=17)),
        height=_TOP + _BOTTOM + _ROW_PX * len(metrics),
        margin=dict(l=_LEFT, r=16, t=_TOP, b=_BOTTOM, autoexpand=False),
        xaxis=dict(range=[x0, 1.0], title="share of the class the metric agrees with", tickformat=".0%",
                   gridcolor="rgba(128,128,128,0.2)", zeroline=False),
        yaxis=dict(categoryorder="array", categoryarray=labels[::-1], automargin=False, tickfont=dict(size=13)),
        showlegend=False, font=dict(size=13), plot_bgcolor="white",
    )
    return fig


def _add_dots(fig: go.Figure, metrics: list[Mapping[str, Any]]) -> None:
    """Add ``metrics`` (``{key, label, score, low, high, n}``, best first) to ``fig`` as dots with
    their bootstrap intervals: one trace of learned metrics (blue circles), then one of the pixel
    metrics (grey diamonds), each only when it has a metric."""
    for classic in (False, True):
        ms = [m for m in metrics if (m["key"] in CLASSIC) == classic]  # the pixel metrics in grey
        if not ms:
            continue
        fig.add_trace(go.Scatter(
            x=[m["score"] for m in ms], y=[m["label"] for m in ms], mode="markers",
            name="pixel metrics" if classic else "learned metrics",
            marker=dict(size=11, color=_CLASSIC if classic else _LEARNED, symbol="diamond" if classic else "circle"),
            error_x=dict(type="data", symmetric=False, thickness=2, width=5,
                         array=[m["high"] - m["score"] for m in ms], arrayminus=[m["score"] - m["low"] for m in ms]),
            customdata=[[m["low"], m["high"], m["n"]] for m in ms],
            hovertemplate="%{y}: %{x:.3f}<br>95% interval %{customdata[0]:.3f}–%{customdata[1]:.3f}"
                          "<br>%{customdata[2]} triplets<extra></extra>",
        ))


def lin_weights_chart(layers: list[Mapping[str, Any]], *, net: str = "alex") -> go.Figure:
    """The class's fitted lin weights beside the published ones: per layer the mean channel weight
    (``layers``: ``[{"layer", "published", "fitted"}]``, as :func:`lpips_explorer.study.fit.fit_class` gives)."""
    names = [str(x["layer"]) for x in layers]
    fig = go.Figure([
        go.Bar(name="published (the paper's)", x=names, y=[x["published"] for x in layers], marker_color="#9aa5b1"),
        go.Bar(name="ours (fitted to this class)", x=names, y=[x["fitted"] for x in layers], marker_color="#d62728"),
    ])
    fig.update_layout(barmode="group", height=300, margin=dict(l=50, r=10, t=40, b=40),
                      title=dict(text=f"Mean channel weight per layer ({net})", font=dict(size=14)),
                      yaxis_title="mean weight", legend=dict(orientation="h", y=-0.25, x=0))
    return fig
