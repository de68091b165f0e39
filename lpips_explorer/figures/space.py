"""The "LPIPS space" page's figures: the map of a set and a strip of images (pure Plotly builders)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ..text import distance_text, plotly_escape
from .maps import LEGEND_BELOW

#: The groups' colours (Plotly's first ten), and the query's frame.
_GROUP_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                  "#aec7e8")
QUERY_COLOUR = "#d62728"

__all__ = ["MAP_THUMBNAILS", "THUMB_SIDE", "diversity_scale", "image_strip", "space_map", "spread"]

#: Up to this many points the map draws each image's thumbnail at its point (beyond, dots only).
MAP_THUMBNAILS = 120
#: A thumbnail's side on the map, as a share of the map's larger span.
THUMB_SIDE = 0.08


def spread(xy: np.ndarray, side: float, *, iterations: int = 400) -> np.ndarray:
    """Places near ``xy`` at which squares of ``side`` (centred there) do not overlap: the map's
    thumbnails side by side instead of on top of each other in a cluster.

    Each overlapping pair is pushed apart along the axis where it overlaps less, each by half of
    that overlap (relaxed, so that a crowded point moves smoothly); coincident points part in a
    fixed direction by their order. Deterministic; a point that overlaps nothing stays exactly
    where it is.

    Args:
        xy: ``(N, 2)`` coordinates. side: the squares' side, in the same units (> 0).

    Returns:
        ``(N, 2)`` positions (after ``iterations`` rounds at most: a set too crowded to part in
        that many may keep some overlap).
    """
    p = np.array(xy, dtype=np.float64, copy=True)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"xy must have shape (N, 2), got {p.shape}")
    if not side > 0:
        raise ValueError(f"side must be positive, got {side!r}")
    n = len(p)
    order = np.sign(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(np.float64)  # i after j: +1
    for _ in range(iterations):
        d = p[:, None, :] - p[None, :, :]
        over = side - np.abs(d)
        hit = (over[..., 0] > 1e-9 * side) & (over[..., 1] > 1e-9 * side)
        np.fill_diagonal(hit, False)
        if not hit.any():
            break
        axis = np.argmin(over, axis=-1)  # part along the axis that needs the smaller move
        push = np.zeros_like(d)
        for a in (0, 1):
            sign = np.where(d[..., a] != 0, np.sign(d[..., a]), order)
            push[..., a] = np.where(hit & (axis == a), sign * over[..., a] / 2, 0.0)
        p += 0.6 * push.sum(axis=1)
    return p


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
        highlight: an image to mark (the current query).

    Returns:
        A figure with one ``go.Scatter`` per group (``customdata``: the image's row) and a
        ``"query"`` trace last. With thumbnails, each image is a layout image of side
        :data:`THUMB_SIDE` × the larger span framed in its group's colour (a shape), placed by
        :func:`spread` so that no two cover each other; a thumbnail moved off its point is tied
        to it by a thin line ending in a dot there. The points (hover, click) sit at the
        thumbnails. The legend is below the map (the toolbar that appears on hover is at its top).
    """
    xy = np.asarray(xy, dtype=np.float64)
    n = len(names)
    if xy.shape != (n, 2):
        raise ValueError(f"xy must have shape ({n}, 2), got {xy.shape}")
    groups = list(groups) if groups is not None else [""] * n
    span = float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1]), 1e-9))
    thumbs = thumbnails is not None and n <= MAP_THUMBNAILS
    side = THUMB_SIDE * span
    at = spread(xy, 1.2 * side) if thumbs else xy  # a gap of a fifth of a thumbnail between frames
    fig = go.Figure()
    colours = {}
    for k, g in enumerate(dict.fromkeys(groups)):
        rows = [i for i in range(n) if groups[i] == g]
        colours[g] = _GROUP_COLOURS[k % len(_GROUP_COLOURS)]
        text = [plotly_escape(names[i]) + ("" if nearest is None else
                                           f"<br>nearest: {plotly_escape(nearest[i][0])} ({distance_text(nearest[i][1])})")
                for i in rows]
        fig.add_trace(go.Scatter(
            x=at[rows, 0], y=at[rows, 1], mode="markers", name=plotly_escape(g) if g else "images", customdata=rows,
            text=text, hovertemplate="%{text}<extra></extra>",
            marker=dict(size=10, symbol="square", color=colours[g], line=dict(width=0)),
        ))
    if thumbs:
        _thumbnail_layer(fig, xy, at, side, thumbnails, [colours[g] for g in groups], span)
    if highlight is not None:
        fig.add_trace(go.Scatter(x=[at[highlight, 0]], y=[at[highlight, 1]], mode="markers", name="query",
                                 hoverinfo="skip",
                                 marker=dict(size=12, symbol="square-open", color=QUERY_COLOUR, line=dict(width=3))))
        if thumbs:
            r = 0.68 * side
            fig.add_shape(type="rect", x0=at[highlight, 0] - r, x1=at[highlight, 0] + r, y0=at[highlight, 1] - r,
                          y1=at[highlight, 1] + r, line=dict(color=QUERY_COLOUR, width=3), layer="above")
    reach = side / 2 + 0.08 * span if thumbs else 0.08 * span
    lo, hi = np.minimum(xy.min(0), at.min(0)) - reach, np.maximum(xy.max(0), at.max(0)) + reach
    fig.update_xaxes(range=[lo[0], hi[0]], showticklabels=False, zeroline=False, title=None)
    fig.update_yaxes(range=[lo[1], hi[1]], showticklabels=False, zeroline=False, scaleanchor="x", title=None)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), dragmode="pan",
                      legend=dict(LEGEND_BELOW, itemsizing="constant"))
    return fig


def _thumbnail_layer(fig: go.Figure, xy: np.ndarray, at: np.ndarray, side: float, thumbnails: Sequence[str],
                     colours: Sequence[str], span: float) -> None:
    """Each thumbnail at ``at`` (``(N, 2)``) in a frame of its colour; one moved off its point
    ``xy`` gets a thin line to it and a dot there (shapes under the traces)."""
    frame = 0.56 * side
    images, shapes = [], []
    for i, src in enumerate(thumbnails):
        (x, y), (px, py) = at[i], xy[i]
        images.append(dict(source=src, x=x, y=y, xref="x", yref="y", sizex=side, sizey=side, xanchor="center",
                           yanchor="middle", layer="above"))
        shapes.append(dict(type="rect", x0=x - frame, x1=x + frame, y0=y - frame, y1=y + frame, layer="below",
                           fillcolor=colours[i], line=dict(width=0)))
        if np.hypot(x - px, y - py) > 0.25 * side:
            dot = 0.008 * span
            shapes.append(dict(type="line", x0=px, y0=py, x1=x, y1=y, layer="below",
                               line=dict(color="rgba(60,60,60,0.55)", width=1)))
            shapes.append(dict(type="circle", x0=px - dot, x1=px + dot, y0=py - dot, y1=py + dot, layer="below",
                               fillcolor="rgba(60,60,60,0.8)", line=dict(width=0)))
    fig.update_layout(images=images, shapes=shapes)


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


def diversity_scale(points: Mapping[str, float], *, this: str) -> str:
    """A set's diversity among reference points, as HTML (for ``st.html``): one row per point,
    smallest first, each a label, a bar on one linear axis from 0 and the value.

    Plain HTML and CSS, like the Shift-vs-blur page's answer: a grid whose three columns (label,
    bar, number) never overlap at any width, and no chart to load.

    Args:
        points: label → diversity (e.g. ``{"one image, faint noise": 0.0014, …, "this set": 0.7614}``);
            labels are plain text (HTML-escaped).
        this: the label of the set the page shows, drawn bold in :data:`QUERY_COLOUR` (the others grey).

    Returns:
        The HTML; each row carries ``data-label`` and ``data-value`` (the value as given); the numbers
        are :func:`~lpips_explorer.text.distance_text` (the page's own number, to the last digit).
    """
    import html as _html

    if this not in points:
        raise ValueError(f"{this!r} is not among the points {list(points)}")
    top = max(max(points.values()), 1e-12)
    rows = []
    for label in sorted(points, key=lambda k: points[k]):
        value, mine = float(points[label]), label == this
        colour, weight = (QUERY_COLOUR, "font-weight:600;") if mine else ("#9aa5b1", "")
        name = _html.escape(label)
        rows.append(
            f'<div style="text-align:right;padding-right:0.5rem;{weight}">{name}</div>'
            f'<div data-label="{name}" data-value="{value!r}" style="height:1.1rem;background:#f0f2f6;'
            f'border-radius:2px"><div style="height:100%;width:{100 * max(value, 0) / top:.2f}%;'
            f'background:{colour};border-radius:2px"></div></div>'
            f'<div style="padding-left:0.5rem;font-variant-numeric:tabular-nums;{weight}">{distance_text(value)}</div>')
    return ('<div class="sp-diversity-scale" style="display:grid;grid-template-columns:max-content minmax(3rem,1fr) '
            'max-content;align-items:center;row-gap:0.3rem;font-size:0.875rem;line-height:1.2;padding:0.25rem 0">'
            + "".join(rows) + "</div>")
