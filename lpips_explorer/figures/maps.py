"""Where a distance comes from: spatial maps over the image, per-layer bars, and a map as PNG.

Pure builders (no Streamlit). The PNG path uses NumPy and Pillow only (Plotly's static export
needs kaleido, which the project does not depend on): :func:`colorize` maps values through the
same colour scale the interactive figure uses, so the download looks like the screen.
"""

from __future__ import annotations

import base64
import io
from typing import Mapping, Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from PIL import Image

from ..text import plotly_escape

__all__ = [
    "MAP_COLORSCALE",
    "plotly_scale",
    "abs_difference",
    "colorize",
    "dists_stage_bars",
    "map_overlay",
    "map_png",
    "per_layer_bars",
    "png_data_uri",
    "to_uint8",
]


def plotly_scale(name: str) -> list[list]:
    """A named Plotly colour scale as explicit ``[position, "rgb(r, g, b)"]`` stops.

    Figures pass these instead of the name or hex stops: the plotly.js bundled with Streamlit
    misreads some 6-digit hex stops (Inferno's first stop ``#000004`` is drawn pink/purple
    instead of black), while ``rgb(...)`` strings render as intended.
    """
    out = []
    for pos, colour in pc.get_colorscale(name):
        rgb = pc.hex_to_rgb(colour) if colour.startswith("#") else pc.unlabel_rgb(colour)
        out.append([float(pos), "rgb({}, {}, {})".format(*(int(round(c)) for c in rgb))])
    return out


#: Inferno (dark = no difference, bright = large), shared by the figures and the PNGs.
MAP_COLORSCALE = plotly_scale("Inferno")
#: A legend in one row (wrapped where the chart is narrow) at the bottom of the figure, below the
#: x-axis title, the margin growing to hold it: never under the toolbar that appears on hover at the
#: chart's top right, nor over the plot, its tick labels or its title, at any width.
LEGEND_BELOW = dict(orientation="h", yanchor="bottom", y=0, yref="container", x=0, xref="container", xanchor="left")
#: A fixed right margin (px) that holds the map's colour bar. Plotly's automatic margins
#: (``margin.autoexpand``) measure it and, when it pushes, draw the whole figure again: in Chromium
#: on a 2-core CPU a first draw took ~49 ms with them and ~29 ms without. The per-layer bars keep
#: them (:func:`per_layer_bars`): their legend and tick labels need a room no fixed margin fits at
#: every width (a phone wraps the legend and tilts the labels).
MAP_MARGIN_RIGHT = 100


def to_uint8(image: np.ndarray) -> np.ndarray:
    """``(H, W, 3)`` (or ``(H, W)``) float in ``[0, 1]`` → ``uint8`` ``(H, W, 3)``, rounded."""
    a = np.asarray(image, dtype=np.float64)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"expected an image (H, W, 3) or (H, W), got shape {a.shape}")
    return np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8)


def abs_difference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """``|a − b|`` scaled so its largest value is 1, and the gain used (1 for identical images).

    Args:
        a, b: ``(H, W, 3)`` float arrays in ``[0, 1]``, the same shape.

    Returns:
        ``(diff, gain)``: ``diff = min(1, gain · |a − b|)`` float32 ``(H, W, 3)``; ``gain`` is
        ``1 / max|a − b|`` (the factor to state beside the picture).
    """
    if np.shape(a) != np.shape(b):
        raise ValueError(f"a and b must have the same shape, got {np.shape(a)} and {np.shape(b)}")
    d = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    peak = float(d.max()) if d.size else 0.0
    gain = 1.0 / peak if peak > 0 else 1.0
    return np.clip(d * gain, 0.0, 1.0).astype(np.float32), gain


def _scale_rgb(colorscale: str | list) -> tuple[np.ndarray, np.ndarray]:
    """The colour scale's stops ``(K,)`` and colours ``(K, 3)`` in ``[0, 255]``."""
    stops = plotly_scale(colorscale) if isinstance(colorscale, str) else colorscale
    pos = np.array([s for s, _ in stops], dtype=np.float64)
    rgb = np.array([pc.unlabel_rgb(c) for _, c in stops], dtype=np.float64)
    return pos, rgb


def colorize(values: np.ndarray, *, vmin: float = 0.0, vmax: float | None = None,
             colorscale: str | list = MAP_COLORSCALE) -> np.ndarray:
    """Map a 2-D array to colours: ``(H, W)`` → ``uint8`` ``(H, W, 3)``.

    Values are scaled linearly from ``[vmin, vmax]`` (``vmax`` defaults to the maximum; a
    constant map is all ``vmin``'s colour) and clipped, then interpolated linearly between the
    colour scale's stops.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be a 2-D map, got shape {v.shape}")
    hi = float(np.nanmax(v)) if vmax is None else float(vmax)
    span = hi - vmin
    t = np.zeros_like(v) if span <= 0 else np.clip((v - vmin) / span, 0.0, 1.0)
    t = np.nan_to_num(t)
    pos, rgb = _scale_rgb(colorscale)
    out = np.stack([np.interp(t, pos, rgb[:, k]) for k in range(3)], axis=-1)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def png_data_uri(image: np.ndarray) -> str:
    """``image`` (``(H, W, 3)`` uint8, or float in ``[0, 1]``) as a ``data:image/png;base64,…`` URI
    (lossless: decoding it gives :func:`to_uint8` of the image back)."""
    buf = io.BytesIO()
    Image.fromarray(to_uint8(image) if image.dtype != np.uint8 else image).save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def map_png(values: np.ndarray, *, image: np.ndarray | None = None, opacity: float = 1.0,
            vmax: float | None = None, colorscale: str | list = MAP_COLORSCALE) -> bytes:
    """The map as PNG bytes: colourised, optionally blended over ``image`` with ``opacity``.

    Args:
        values: ``(H, W)`` map.
        image: ``(H, W, 3)`` float in ``[0, 1]`` under the map, or ``None`` for the map alone.
        opacity: the map's weight in ``[0, 1]`` when blended (``opacity · map + (1 − opacity) · image``).
    """
    if not 0.0 <= opacity <= 1.0:
        raise ValueError(f"opacity must lie in [0, 1], got {opacity!r}")
    rgb = colorize(values, vmax=vmax, colorscale=colorscale).astype(np.float64)
    if image is not None:
        base = to_uint8(image).astype(np.float64)
        if base.shape[:2] != rgb.shape[:2]:
            raise ValueError(f"image {base.shape[:2]} and map {rgb.shape[:2]} differ in size")
        rgb = opacity * rgb + (1.0 - opacity) * base
    buf = io.BytesIO()
    Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def map_overlay(
    image: np.ndarray,
    values: np.ndarray,
    *,
    opacity: float = 0.6,
    title: str = "",
    value_name: str = "LPIPS term",
    zmax: float | None = None,
    colorscale: str | list = MAP_COLORSCALE,
    height: int | None = None,
) -> go.Figure:
    """A spatial map over the image it describes, with the value under the cursor.

    Args:
        image: ``(H, W, 3)`` float in ``[0, 1]``.
        values: ``(H, W)`` map of the same size (e.g. ``MetricResult.spatial_map[0]``).
        opacity: the map's opacity in ``[0, 1]`` (0 shows the image alone).
        title: plain text (it may name a file: :func:`~lpips_explorer.text.plotly_escape` d).
        value_name: the hover label.
        zmax: the colour scale's top (default: the map's maximum).

    Returns:
        Two traces: ``go.Image`` (the image as a lossless PNG ``source``, see
        :func:`png_data_uri`) and ``go.Heatmap`` whose ``z`` is ``values`` (as float32, the
        library's precision: half the bytes of float64 to send), drawn with ``zsmooth="fast"``
        (one canvas pixel per cell, scaled by the browser). Given ``z`` pixels, or a heatmap
        without it, Plotly draws one rectangle per pixel or cell (65,536 at 256 px): measured at
        ~0.6 s of the browser's main thread per redraw in Chromium on a 2-core CPU.
    """
    if not 0.0 <= opacity <= 1.0:
        raise ValueError(f"opacity must lie in [0, 1], got {opacity!r}")
    v = np.asarray(values, dtype=np.float32)  # the library's maps are float32: sent as they are
    img = to_uint8(image)
    if v.shape != img.shape[:2]:
        raise ValueError(f"the map {v.shape} and the image {img.shape[:2]} differ in size")
    fig = go.Figure()
    fig.add_trace(go.Image(source=png_data_uri(img), hoverinfo="skip", name="image"))
    fig.add_trace(go.Heatmap(
        z=v, zsmooth="fast", opacity=opacity,
        colorscale=plotly_scale(colorscale) if isinstance(colorscale, str) else colorscale,
        zmin=0.0,
        zmax=float(v.max()) if zmax is None else float(zmax), name=value_name,
        colorbar=dict(title=dict(text=value_name, side="right")),
        hovertemplate="x %{x}, y %{y}<br>" + value_name + ": %{z:.4g}<extra></extra>",
    ))
    h, w = v.shape
    fig.update_xaxes(range=[-0.5, w - 0.5], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(range=[h - 0.5, -0.5], showticklabels=False, showgrid=False, zeroline=False,
                     scaleanchor="x")
    fig.update_layout(title=plotly_escape(title) if title else None,
                      height=height or int(min(640, max(260, 520 * h / max(w, 1)))),
                      margin=dict(l=10, r=MAP_MARGIN_RIGHT, t=40 if title else 10, b=10, autoexpand=False))
    return fig


def per_layer_bars(
    per_layer: Mapping[str, tuple[Sequence[str], Sequence[float]]],
    *,
    title: str = "",
) -> go.Figure:
    """Each backbone's distance as a stack of its layers' terms ``d_l``.

    Args:
        per_layer: backbone label → ``(layer names, d_l values)``; the values sum to the total.

    Returns:
        One stacked ``go.Bar`` trace per layer position (``"layer 1"``, …); trace ``k`` holds
        layer ``k`` of every backbone that has one (``x`` = backbone labels, ``y`` = its ``d_l``,
        ``customdata`` = the layer's name); each total written above its bar, inside the plot; the
        legend below it (the margins grow to hold it and the tick labels at any width).
    """
    if not per_layer:
        raise ValueError("per_layer_bars needs at least one backbone")
    depth = max(len(names) for names, _ in per_layer.values())
    fig = go.Figure()
    colours = pc.sample_colorscale(plotly_scale("Viridis"), [i / max(depth - 1, 1) for i in range(depth)])
    for k in range(depth):
        xs, ys, names = [], [], []
        for label, (layer_names, values) in per_layer.items():
            if len(layer_names) != len(values):
                raise ValueError(f"{label}: {len(layer_names)} layer names for {len(values)} values")
            if k < len(values):
                xs.append(label)
                ys.append(float(values[k]))
                names.append(layer_names[k])
        fig.add_trace(go.Bar(
            x=xs, y=ys, customdata=names, name=f"layer {k + 1}", marker_color=colours[k],
            hovertemplate="%{x} · %{customdata}: %{y:.4f}<extra></extra>",
        ))
    totals = {label: float(np.sum(values)) for label, (_, values) in per_layer.items()}
    for label, total in totals.items():
        fig.add_annotation(x=label, y=total, text=f"{total:.4f}", showarrow=False, yshift=10)
    top = max(totals.values(), default=0.0)
    fig.update_yaxes(range=[0, 1.2 * top] if top > 0 else None)  # room for the totals inside the plot
    fig.update_layout(barmode="stack", title=title or None, yaxis_title="LPIPS (sum of layer terms)",
                      margin=dict(l=10, r=10, t=40 if title else 10, b=10), height=380,
                      legend=dict(LEGEND_BELOW, title_text="layer (shallow → deep)", title_side="top",
                                  traceorder="normal"))
    return fig


def dists_stage_bars(
    stage_names: Sequence[str],
    texture: Sequence[float],
    structure: Sequence[float],
    *,
    label: str = "DISTS",
    title: str = "",
) -> go.Figure:
    """Where a DISTS distance comes from: per stage, its texture and structure terms stacked.

    Args:
        stage_names: the stages (``"input"``, ``"relu1_2"`` … ``"relu5_3"``).
        texture, structure: one term per stage (``MetricResult.components["texture"][i]``, ``["structure"][i]``);
            all of them together sum to the DISTS value.
        label: the metric's name in the axis title and hover.

    Returns:
        Two stacked ``go.Bar`` traces, ``"texture"`` then ``"structure"`` (``x`` = stage names,
        ``y`` = the terms), and one annotation per stage with its sum.

    Raises:
        ValueError: no stages, or lengths that differ.
    """
    if not len(stage_names):
        raise ValueError("dists_stage_bars needs at least one stage")
    if len(texture) != len(stage_names) or len(structure) != len(stage_names):
        raise ValueError(f"{len(stage_names)} stages, {len(texture)} texture and {len(structure)} structure terms")
    names = [str(n) for n in stage_names]
    tex = [float(v) for v in texture]
    struct = [float(v) for v in structure]
    fig = go.Figure()
    for name, values, colour in (("texture", tex, "#e0a100"), ("structure", struct, "#3b6fb6")):
        fig.add_trace(go.Bar(
            x=names, y=values, name=name, marker_color=colour,
            hovertemplate=f"{label} · %{{x}} · {name}: %{{y:.5f}}<extra></extra>",
        ))
    for name, t, s in zip(names, tex, struct):
        fig.add_annotation(x=name, y=t + s, text=f"{t + s:.4f}", showarrow=False, yshift=10)
    fig.update_layout(barmode="stack", title=title or None, yaxis_title=f"{label} (sum of all terms)",
                      xaxis_title="stage (shallow → deep)", margin=dict(l=10, r=10, t=40 if title else 20, b=10),
                      height=340, legend=dict(LEGEND_BELOW, title_text="term"))
    return fig
