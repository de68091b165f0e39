"""The "LPIPS space" page's figures: the map of a set and a strip of images (pure Plotly builders)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..text import plotly_escape

__all__ = ["MAP_THUMBNAILS", "image_strip", "space_map"]

#: Up to this many points the map draws each image's thumbnail at its point (beyond, dots only).
MAP_THUMBNAILS = 120


def space_map(xy: np.ndarray, names: Sequence[str], *, thumbnails: Sequence[str] | None = None,
              groups: Sequence[str] | None = None, nearest: Sequence[tuple[str, float]] | None = None,
              highlight: int | None = None, height: int = 520) -> go.Figure:
    """The set laid out in the plane (e.g. by MDS of the LPIPS distances), one point per image.

    Args:
        xy: ``(N, 2)`` coordinates.
        names: the images' names (shown on hover). Names, groups and ``nearest``'s names are plain text
            (:func:`~lpips_explorer.text.plotly_escape`: a ``<b>`` in a file name shows as written).
        thumbnails: PNG data URIs drawn at the points (when ``N ≤`` :data:`MAP_THUMBNAILS`).
        groups: a label per image (e.g. its subfolder): one coloured trace per label.
        nearest: per image ``(name, distance)`` of its nearest other image (shown on hover).
        highlight: an image to ring (the current query).

    Returns:
        A figure with one ``go.Scatter`` per group (``customdata``: the image's row) and, with
        thumbnails, one layout image per point sized to 6 % of the larger span.
    """
    xy = np.asarray(xy, dtype=np.float64)
    n = len(names)
    if xy.shape != (n, 2):
        raise ValueError(f"xy must have shape ({n}, 2), got {xy.shape}")
    groups = list(groups) if groups is not None else [""] * n
    fig = go.Figure()
    for g in dict.fromkeys(groups):
        rows = [i for i in range(n) if groups[i] == g]
        text = [plotly_escape(names[i]) + ("" if nearest is None else
                                           f"<br>nearest: {plotly_escape(nearest[i][0])} ({nearest[i][1]:.4f})")
                for i in rows]
        fig.add_trace(go.Scatter(
            x=xy[rows, 0], y=xy[rows, 1], mode="markers", name=plotly_escape(g) if g else "images", customdata=rows,
            text=text,
            hovertemplate="%{text}<extra></extra>",
            marker=dict(size=34 if thumbnails is not None and n <= MAP_THUMBNAILS else 10, symbol="square",
                        line=dict(width=0)),
        ))
    span = float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1]), 1e-9))
    if thumbnails is not None and n <= MAP_THUMBNAILS:
        size = 0.05 * span  # a little under the square markers: each thumbnail gets its group's frame
        fig.update_layout(images=[dict(source=thumbnails[i], x=xy[i, 0], y=xy[i, 1], xref="x", yref="y",
                                       sizex=size, sizey=size, xanchor="center", yanchor="middle", layer="above")
                                  for i in range(n)])
    if highlight is not None:
        fig.add_trace(go.Scatter(x=[xy[highlight, 0]], y=[xy[highlight, 1]], mode="markers", name="query",
                                 hoverinfo="skip",
                                 marker=dict(size=34, color="rgba(0,0,0,0)", line=dict(width=3, color="#d62728"))))
    pad = 0.08 * span
    fig.update_xaxes(range=[xy[:, 0].min() - pad, xy[:, 0].max() + pad], showticklabels=False, zeroline=False,
                     title=None)
    fig.update_yaxes(range=[xy[:, 1].min() - pad, xy[:, 1].max() + pad], showticklabels=False, zeroline=False,
                     scaleanchor="x", title=None)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=36, b=10, autoexpand=False),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0.0), dragmode="pan")
    return fig


def image_strip(images: Sequence[str], titles: Sequence[str], *, hover: Sequence[str] | None = None,
                height: int = 200) -> go.Figure:
    """Images side by side with a short title each (e.g. a query, then its nearest images, nearest first).

    Args:
        images: PNG data URIs (see :func:`lpips_explorer.space_view.thumbnail`).
        titles: one per image, short (a strip of ten leaves each ~50 px at 1024 px).
        hover: one label per image shown on hover (e.g. its name); default: the title.

    Titles and hover labels are plain text (:func:`~lpips_explorer.text.plotly_escape`).
    """
    if len(images) != len(titles) or not images or (hover is not None and len(hover) != len(images)):
        raise ValueError(f"need one title (and hover label) per image and at least one image, got {len(images)}, "
                         f"{len(titles)} and {None if hover is None else len(hover)}")
    from plotly.subplots import make_subplots

    k = len(images)
    fig = make_subplots(rows=1, cols=k, subplot_titles=[plotly_escape(t) for t in titles], horizontal_spacing=0.02)
    for i, src in enumerate(images, start=1):
        label = plotly_escape((hover or titles)[i - 1])
        fig.add_trace(go.Image(source=src, name=label, hovertemplate=label.replace("%", "%%") + "<extra></extra>"),
                      row=1, col=i)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, showline=False, ticks="")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, showline=False, ticks="")
    fig.update_annotations(font_size=12)
    fig.update_layout(height=height, margin=dict(l=5, r=5, t=30, b=5, autoexpand=False), showlegend=False)
    return fig
