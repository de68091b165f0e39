"""Figure builders: the traces are there and the plotted values are the library's."""

from __future__ import annotations

import base64
import io
import math
from html import escape as html_escape

import numpy as np
import plotly.graph_objects as go
import pytest
from PIL import Image

from lpips_core import metrics
from lpips_explorer import synth
from lpips_explorer.distortions import gaussian_blur, kernel_blur, shift
from lpips_explorer.figures import grids, layers, lessons, maps
from lpips_core.model import LPIPS
from lpips_core.spec import MetricSpec
from lpips_core.sweeps import GridCell
from lpips_explorer.toy_layer import toy_layer


def _traces(fig: go.Figure, kind: str) -> list:
    return [t for t in fig.data if t.type == kind]


# --------------------------------------------------------------------------- lessons
def test_pixel_grid_plots_the_stripes():
    ref = synth.stripes()
    copies = {"reference": ref, "shifted": shift(ref, 1, boundary="wrap"),
              "blurred": kernel_blur(ref, [0.25, 0.5, 0.25], boundary="wrap")}
    fig = lessons.pixel_grid(copies)
    heat = _traces(fig, "heatmap")
    assert [t.name for t in heat] == list(copies)
    for t, img in zip(heat, copies.values()):
        np.testing.assert_array_equal(np.asarray(t.z), img[:, :, 0])
    assert list(np.asarray(heat[2].z)[0]) == [0.25, 0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75]


def test_pixel_grid_errors():
    with pytest.raises(ValueError, match="at least one"):
        lessons.pixel_grid({})
    with pytest.raises(ValueError, match="must be"):
        lessons.pixel_grid({"x": np.zeros(4)})


def test_sweep_curves_values_and_gaps():
    img = synth.texture_patch(0, size=64)
    shifts = [0.0, 1.0, 2.0]
    mse = [metrics.mse(img, shift(img, s, boundary="reflect")) for s in shifts]
    psnr = [metrics.psnr(img, shift(img, s, boundary="reflect")) for s in shifts]
    sig = [0.0, 1.0]
    blur_mse = [metrics.mse(img, gaussian_blur(img, s)) for s in sig]
    fig = lessons.sweep_curves(
        {"shift": (shifts, {"MSE": mse, "PSNR (dB)": psnr, "LPIPS · AlexNet": [0.0, 0.1, 0.2]}),
         "blur": (sig, {"MSE": blur_mse})},
        markers={"shift": 1.0},
    )
    scat = {tuple(t.meta): t for t in _traces(fig, "scatter")}
    assert set(scat) == {("shift", "MSE"), ("shift", "PSNR (dB)"), ("shift", "LPIPS · AlexNet"), ("blur", "MSE")}
    np.testing.assert_allclose(scat[("shift", "MSE")].y, mse)
    np.testing.assert_allclose(scat[("blur", "MSE")].y, blur_mse)
    # PSNR of the identical image is inf: a gap, the rest exact
    assert math.isinf(psnr[0]) and scat[("shift", "PSNR (dB)")].y[0] is None
    np.testing.assert_allclose(scat[("shift", "PSNR (dB)")].y[1:], psnr[1:])
    assert scat[("shift", "LPIPS · AlexNet")].yaxis != scat[("shift", "MSE")].yaxis
    assert any(s.type == "line" for s in fig.layout.shapes)


def test_sweep_curves_errors():
    with pytest.raises(ValueError, match="matches none"):
        lessons.sweep_curves({"a": ([0, 1], {"bogus": [1, 2]})})
    with pytest.raises(ValueError, match="2 x values"):
        lessons.sweep_curves({"a": ([0, 1], {"MSE": [1, 2, 3]})})


# --------------------------------------------------------------------------- maps
def test_colorize_endpoints_and_png_roundtrip():
    v = np.array([[0.0, 0.5], [1.0, 2.0]])
    rgb = maps.colorize(v, vmax=1.0)
    assert rgb.dtype == np.uint8 and rgb.shape == (2, 2, 3)
    assert tuple(rgb[0, 0]) == (0, 0, 4)          # Inferno's first stop
    assert tuple(rgb[1, 0]) == (252, 255, 164)     # its last stop
    np.testing.assert_array_equal(rgb[1, 1], rgb[1, 0])  # clipped above vmax
    png = maps.map_png(v, vmax=1.0)
    back = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    np.testing.assert_array_equal(back, rgb)


def test_map_png_blends_with_the_image():
    v = np.ones((4, 5))
    img = np.zeros((4, 5, 3), np.float32)
    half = np.asarray(Image.open(io.BytesIO(maps.map_png(v, image=img, opacity=0.5))).convert("RGB"))
    full = maps.colorize(v).astype(float)
    np.testing.assert_allclose(half, np.rint(0.5 * full), atol=1)
    with pytest.raises(ValueError, match="opacity"):
        maps.map_png(v, opacity=1.5)
    with pytest.raises(ValueError, match="differ in size"):
        maps.map_png(v, image=np.zeros((3, 3, 3)))


def test_abs_difference_gain():
    a = np.zeros((2, 2, 3), np.float32)
    b = a.copy()
    b[0, 0, 0] = 0.25
    d, gain = maps.abs_difference(a, b)
    assert gain == pytest.approx(4.0) and d.max() == pytest.approx(1.0)
    d, gain = maps.abs_difference(a, a)
    assert gain == 1.0 and d.max() == 0


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


@pytest.fixture(scope="module")
def pair():
    ref = synth.texture_patch(3, size=64)
    return ref, gaussian_blur(ref, 1.2)


def test_map_overlay_holds_the_library_map(alex, pair):
    from lpips_core.sweeps import lpips_many

    ref, dist = pair
    res = lpips_many(alex, ref, [dist], spatial=True)
    values = res.spatial_map[0].numpy()
    fig = maps.map_overlay(dist, values, opacity=0.35, title="t")
    (img,), (heat,) = _traces(fig, "image"), _traces(fig, "heatmap")
    assert img.z is None and img.source.startswith("data:image/png;base64,")
    shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(img.source.split(",", 1)[1]))).convert("RGB"))
    np.testing.assert_array_equal(shown, maps.to_uint8(dist))  # lossless
    np.testing.assert_array_equal(np.asarray(heat.z), values)  # the library's float32 map, exactly
    assert heat.zsmooth == "fast"
    assert heat.opacity == 0.35
    assert "%{z" in heat.hovertemplate
    assert float(np.asarray(heat.z).mean()) == pytest.approx(float(res.total[0]), rel=1e-3)
    with pytest.raises(ValueError, match="differ in size"):
        maps.map_overlay(dist, values[:10])
    with pytest.raises(ValueError, match="opacity"):
        maps.map_overlay(dist, values, opacity=-0.1)


def test_per_layer_bars_stack_the_library_terms(alex, pair):
    from lpips_core.sweeps import lpips_many

    ref, dist = pair
    res = lpips_many(alex, ref, [dist])
    names, values = res.layer_names, res.per_layer[0].numpy()
    fig = maps.per_layer_bars({"AlexNet": (names, values), "Other": (("a", "b"), (0.1, 0.2))})
    bars = _traces(fig, "bar")
    assert fig.layout.barmode == "stack" and len(bars) == len(names)
    for k, bar in enumerate(bars):
        assert bar.x[0] == "AlexNet" and bar.customdata[0] == names[k]
        assert bar.y[0] == pytest.approx(float(values[k]))
    assert sum(b.y[0] for b in bars) == pytest.approx(float(res.total[0]), rel=1e-6)
    assert list(bars[2].x) == ["AlexNet"]  # "Other" has only two layers
    with pytest.raises(ValueError, match="layer names"):
        maps.per_layer_bars({"x": (("a",), (1.0, 2.0))})


# --------------------------------------------------------------------------- layers
def test_toy_arrows_draw_the_normalised_vectors():
    toy = toy_layer()
    fig = layers.toy_arrows(toy)
    by_name = {t.name: t for t in _traces(fig, "scatter")}
    for name, vecs in (("x̂ (reference)", toy.x_hat), ("ŷ (distorted)", toy.y_hat)):
        t = by_name[name]
        xs, ys = list(t.x), list(t.y)
        for k, (i, j) in enumerate((i, j) for i in range(3) for j in range(3)):
            ox, oy, ex, ey = xs[3 * k], ys[3 * k], xs[3 * k + 1], ys[3 * k + 1]
            assert (ex - ox, ey - oy) == pytest.approx(tuple(vecs[i, j]))
            assert xs[3 * k + 2] is None
    assert "unit circle" in by_name
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "1.360" in texts and "0.344" in texts and "2.000" in texts


def test_toy_terms_heatmaps():
    toy = toy_layer()
    fig = layers.toy_terms(toy)
    w, u = _traces(fig, "heatmap")
    np.testing.assert_array_equal(np.asarray(w.z), toy.terms)
    np.testing.assert_array_equal(np.asarray(u.z), toy.terms_unweighted)
    assert "0.200" in fig.layout.annotations[0].text


def test_heatmaps_row_shared_scale():
    a, b = np.arange(6.0).reshape(2, 3), -np.ones((2, 3))
    fig = layers.heatmaps_row({"a": a, "b": b})
    ha, hb = _traces(fig, "heatmap")
    np.testing.assert_array_equal(np.asarray(ha.z), a)
    assert ha.zmin == hb.zmin == -1 and ha.zmax == hb.zmax == 5
    with pytest.raises(ValueError, match="2-D"):
        layers.heatmaps_row({"a": np.zeros(3)})


def test_lin_weight_and_zero_share_bars(alex):
    w = alex.channel_weights[0].cpu().numpy()
    fig = layers.lin_weight_bars(w, layer_name="relu1", highlight=[3, 7])
    others, top = _traces(fig, "bar")
    assert (others.name, top.name) == (layers.OTHER_NAME, layers.HIGHLIGHT_NAME) and fig.layout.showlegend
    assert list(top.x) == [3, 7] and list(others.x) == [c for c in range(w.size) if c not in (3, 7)]
    np.testing.assert_allclose(np.asarray(top.y), w[[3, 7]])
    np.testing.assert_allclose(np.asarray(others.y), np.delete(w, [3, 7]))
    assert top.marker.color != others.marker.color and fig.layout.barmode == "overlay"  # no grouped offsets
    assert f"{(w == 0).mean():.1%}" in fig.layout.title.text
    (alone,) = _traces(layers.lin_weight_bars(w), "bar")  # nothing highlighted: one trace, no legend
    np.testing.assert_allclose(np.asarray(alone.y), w)
    assert not layers.lin_weight_bars(w).layout.showlegend
    shares = [float((x == 0).float().mean()) for x in alex.channel_weights]
    fig = layers.zero_share_bars(alex.layer_names, shares)
    np.testing.assert_allclose(_traces(fig, "bar")[0].y, shares)


def test_top_channel_bars():
    fig = layers.top_channel_bars([5, 2], [0.3, 0.1], total=0.5, layer_name="relu2")
    (bar,) = _traces(fig, "bar")
    assert list(bar.x) == [0.3, 0.1] and list(bar.y) == ["ch 5", "ch 2"]
    assert list(bar.customdata) == pytest.approx([0.6, 0.2])
    # each label ("60.0%") is drawn past its bar, unclipped, on an axis that leaves room for it
    assert list(bar.text) == ["60.0%", "20.0%"] and bar.cliponaxis is False
    assert tuple(fig.layout.xaxis.range) == pytest.approx((0, 0.3 * layers.TEXT_ROOM))
    with pytest.raises(ValueError):
        layers.top_channel_bars([1], [0.1, 0.2], total=1.0)


# --------------------------------------------------------------------------- grids
def _cells():
    out = []
    for net in ("alex", "vgg"):
        for size in ("native", "64×64"):
            base = 0.2 if net == "alex" else 0.4
            for variant, value in (("[-1,1]", base), ("[0,1]", base * 2), ("baseline", base / 2)):
                spec = MetricSpec("lpips", net=net, lin=variant != "baseline",
                                  convention="[0,1]" if variant == "[0,1]" else None)
                out.append(GridCell(spec, variant, size, value, base, value / base, f"note {variant}",
                                    variant == "[-1,1]"))
    return out


def test_conventions_heatmap_layout_and_values():
    cells = _cells()
    fig = grids.conventions_heatmap(cells, row_label=lambda spec: {"alex": "AlexNet", "vgg": "VGG16"}[spec.net])
    (heat,) = _traces(fig, "heatmap")
    assert list(heat.x) == ["native", "64×64"]
    assert list(heat.y)[0] == "AlexNet · [-1,1] ★" and list(heat.y)[1] == "AlexNet · [0,1]"
    # rows are the cells' row specs (the metric on a backbone); by default named by their label
    assert list(grids.conventions_heatmap(cells).data[0].y)[3] == "LPIPS · VGG16 · [-1,1] ★"
    z = np.asarray(heat.z, dtype=float)
    np.testing.assert_allclose(z[:, 0], [0.0, 1.0, -1.0, 0.0, 1.0, -1.0])
    assert heat.customdata[1][0][0] == pytest.approx(0.4) and heat.customdata[1][0][1] == pytest.approx(2.0)
    assert heat.text[0][0].startswith("ref") and heat.text[1][0].startswith("×2.00")
    with pytest.raises(ValueError):
        grids.conventions_heatmap([])


def test_conventions_heatmap_on_the_real_grid(alex):
    from lpips_core.sweeps import conventions_grid

    ref = synth.texture_patch(1, size=64)
    dist = gaussian_blur(ref, 1.0)
    m00 = LPIPS("alex", "0.0")
    cells = conventions_grid(ref, dist, get_model=lambda spec: {"0.1": alex, "0.0": m00}[spec.version], nets=("alex",),
                             sizes=(None, 64))
    fig = grids.conventions_heatmap(cells)
    (heat,) = _traces(fig, "heatmap")
    rows, cols = grids.grid_layout(cells)
    for c in cells:
        r, k = rows.index((c.row_spec, c.variant)), cols.index(c.size_label)
        assert heat.customdata[r][k][0] == pytest.approx(c.value)
        assert heat.z[r][k] == pytest.approx(math.log2(c.ratio))


def test_colour_scales_are_explicit_rgb():
    """Named scales become rgb() stops: Streamlit's bundled plotly.js misdraws some hex stops."""
    inferno = maps.plotly_scale("Inferno")
    assert inferno[0] == [0.0, "rgb(0, 0, 4)"] and inferno[-1] == [1.0, "rgb(252, 255, 164)"]
    assert maps.MAP_COLORSCALE == inferno
    toy = toy_layer()
    figs = [layers.toy_terms(toy), layers.heatmaps_row({"a": np.eye(3)}), lessons.pixel_grid({"a": np.eye(3)}),
            grids.conventions_heatmap(_cells()), maps.map_overlay(np.zeros((4, 4, 3)), np.eye(4))]
    for fig in figs:
        for trace in fig.data:
            if trace.type == "heatmap":
                assert all(str(c).startswith("rgb(") for _, c in trace.colorscale), fig.layout.title


# --------------------------------------------------------------------------- successor metrics (issue 8)
def test_sweep_curves_extra_rows_for_the_successors():
    xs = [0.0, 1.0, 2.0]
    series = {"MSE": [0.0, 0.1, 0.2], "LPIPS · AlexNet": [0.0, 0.2, 0.3], "ST-LPIPS · AlexNet": [0.0, 0.05, 0.1],
              "DISTS · VGG16": [0.0, 0.1, 0.15]}
    fig = lessons.sweep_curves({"shift": (xs, series)}, rows=lessons.METRIC_ROWS + lessons.EXTRA_ROWS)
    scat = {t.name: t for t in _traces(fig, "scatter")}
    for name, values in series.items():
        np.testing.assert_allclose(scat[name].y, values)
    axes = {name: t.yaxis for name, t in scat.items()}
    assert len(set(axes.values())) == 4  # ST-LPIPS and DISTS each have their own row, apart from LPIPS
    assert axes["ST-LPIPS · AlexNet"] != axes["LPIPS · AlexNet"]
    titles = [a.text for a in fig.layout.annotations]
    assert "ST-LPIPS ↓" in titles and "DISTS ↓" in titles
    assert fig.layout.height == 205 * 6
    # without rows=, the figure is the four standard rows as before, and a successor has no row
    assert lessons.sweep_curves({"shift": (xs, {"MSE": series["MSE"]})}).layout.height == 820
    with pytest.raises(ValueError, match="matches none"):
        lessons.sweep_curves({"shift": (xs, {"DISTS · VGG16": series["DISTS · VGG16"]})})


@pytest.fixture(scope="module")
def dists_model():
    from lpips_core import metric_registry

    ok, why = metric_registry.availability("dists")
    if not ok:
        pytest.skip(why)
    return metric_registry.build("dists")


def test_dists_stage_bars_stack_the_library_terms(dists_model, pair):
    from lpips_core.metric_registry import prepare_input

    ref, dist = pair
    res = dists_model.compare(prepare_input("dists", ref), prepare_input("dists", dist))
    fig = maps.dists_stage_bars(res.layer_names, res.components["texture"][0], res.components["structure"][0], title="DISTS")
    bars = _traces(fig, "bar")
    assert [b.name for b in bars] == ["texture", "structure"]
    assert fig.layout.barmode == "stack"
    for b in bars:
        assert list(b.x) == list(res.layer_names)
    np.testing.assert_allclose(bars[0].y, res.components["texture"][0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(bars[1].y, res.components["structure"][0].numpy(), rtol=1e-6)
    # every bar together is the DISTS value; each stage's label is its sum
    assert sum(bars[0].y) + sum(bars[1].y) == pytest.approx(float(res.total[0]), rel=1e-5)
    labels = [float(a.text) for a in fig.layout.annotations]
    np.testing.assert_allclose(labels, res.per_layer[0].numpy(), atol=5e-5)


def test_dists_stage_bars_errors():
    with pytest.raises(ValueError, match="at least one stage"):
        maps.dists_stage_bars([], [], [])
    with pytest.raises(ValueError, match="2 stages, 1 texture"):
        maps.dists_stage_bars(["input", "relu1_2"], [0.1], [0.1, 0.2])


def test_conventions_heatmap_names_the_value():
    cells = _cells()
    assert "LPIPS %{customdata[0]" in grids.conventions_heatmap(cells).data[0].hovertemplate
    hover = grids.conventions_heatmap(cells, value_name="distance").data[0].hovertemplate
    assert "distance %{customdata[0]" in hover and "LPIPS" not in hover


def test_size_curves_plot_the_reference_cells():
    fig = grids.size_curves(_cells(), row_label=lambda spec: {"alex": "AlexNet", "vgg": "VGG16"}[spec.net])
    assert [t.name for t in fig.data] == ["AlexNet", "VGG16"]
    assert list(fig.data[0].x) == ["native", "64×64"] and list(fig.data[1].y) == [0.4, 0.4]
    assert fig.layout.xaxis.type == "category"
    with pytest.raises(ValueError, match="reference cell"):
        grids.size_curves([c for c in _cells() if not c.is_reference])


def test_shift_blur_ratios_one_log_axis_and_highlight():
    """The answer's ratio bars (HTML): the ratios given, one log axis holding them, 1 and room for
    the labels, the highlight in red; each bar's number and tooltip in the HTML."""
    bars = lessons.shift_blur_ratios({"MSE": 4.0, "LPIPS · AlexNet": 0.25, "unchanged": float("nan")},
                                     highlight="LPIPS · AlexNet")
    assert bars.names == ("MSE", "LPIPS · AlexNet") and bars.ratios == (4.0, 0.25)
    assert bars.colours == (lessons.BAR_COLOUR, lessons.HIGHLIGHT_COLOUR)
    assert bars.lo == pytest.approx(math.log10(0.25) - 0.15) and bars.hi == pytest.approx(math.log10(4.0) + 0.45)
    assert bars.position(10 ** bars.lo) == pytest.approx(0) and bars.position(10 ** bars.hi) == pytest.approx(100)
    # under two decades: ticks at 1, 2 and 5 times powers of ten, inside the axis
    assert [t for _, t in bars.ticks] == ["0.2", "0.5", "1", "2", "5", "10"]
    html = bars.html
    assert html.count("data-ratio=") == 2 and 'data-metric="LPIPS · AlexNet" data-ratio="0.25"' in html
    assert "×4" in html and "×0.25" in html and 'title="MSE: shift ÷ blur = 4"' in html
    assert f"width:{bars.position(0.25):.3f}%;background:{lessons.HIGHLIGHT_COLOUR}" in html
    assert html.count(f"left:{bars.position(1.0):.3f}%;top:0;bottom:0;border-left:1px dashed") == 2  # the line at 1
    assert html_escape(lessons.RATIO_AXIS_TITLE) in html
    wide = lessons.shift_blur_ratios({"a": 0.5, "b": 0.001})
    assert wide.hi > 0 and [t for _, t in wide.ticks] == ["0.001", "0.01", "0.1", "1"]  # 1 stays in view
    assert "&lt;b&gt;" in lessons.shift_blur_ratios({"<b>": 2.0}).html  # names are escaped
    with pytest.raises(ValueError, match="positive finite"):
        lessons.shift_blur_ratios({"x": 0.0})


def test_shift_blur_ratio_labels_keep_clear_of_the_line_at_1():
    """A bar that ends just left of the dashed line at 1 (×0.62) has its label after the line, not
    across it; a bar far from the line, or past it, keeps its label right after the bar."""
    bars = lessons.shift_blur_ratios({"MSE": 1.6, "near": 0.62, "far": 0.013})
    one = bars.position(1.0)
    assert bars.position(0.62) < one < bars.position(0.62) + lessons.LABEL_ROOM
    assert bars.label_at(0.62) == one
    assert bars.label_at(0.013) == bars.position(0.013) and bars.label_at(1.6) == bars.position(1.6)
    assert f"left:calc({one:.3f}% + 0.3rem)" in bars.html  # the near bar's label, after the line


def test_block_mean_averages_blocks_and_edges():
    a = np.arange(5 * 6, dtype=float).reshape(5, 6)
    out = lessons.block_mean(a, 3)  # k = 2: blocks of 2×2, the last row holds one row of pixels
    assert out.shape == (3, 3)
    assert out[0, 0] == pytest.approx(np.mean(a[:2, :2])) and out[2, 1] == pytest.approx(np.mean(a[4, 2:4]))
    np.testing.assert_array_equal(lessons.block_mean(a, 6), a)
    assert lessons.block_mean(np.ones((2, 5, 6)), 3).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="max_side"):
        lessons.block_mean(a, 0)


def test_layer_maps_by_shift_one_colour_scale():
    maps_ = {"shift 1 px": np.stack([np.full((4, 4), 2.0), np.zeros((4, 4))]),
             "blur": np.stack([np.ones((4, 4)), np.full((4, 4), 0.5)])}
    fig = lessons.layer_maps_by_shift(maps_, ["relu1", "relu2"], max_side=2)
    heat = _traces(fig, "heatmap")
    assert len(heat) == 4 and {t.zmax for t in heat} == {2.0} and {t.zmin for t in heat} == {0.0}
    np.testing.assert_array_equal(np.asarray(heat[0].z), np.full((2, 2), 2.0))
    assert [t.showscale for t in heat] == [False, False, False, True]
    with pytest.raises(ValueError, match="L=3"):
        lessons.layer_maps_by_shift(maps_, ["a", "b", "c"])


def test_layer_ratio_curves_divide_by_the_blur():
    fig = lessons.layer_ratio_curves([1, 2], np.array([[0.2, 0.01], [0.4, 0.02]]), [0.1, 0.1], ["relu1", "relu5"])
    assert [t.name for t in fig.data] == ["relu1", "relu5"]
    np.testing.assert_allclose(fig.data[0].y, [2.0, 4.0]) and np.testing.assert_allclose(fig.data[1].y, [0.1, 0.2])
    assert fig.layout.yaxis.type == "log"
    with pytest.raises(ValueError, match="positive"):
        lessons.layer_ratio_curves([1], np.array([[0.1]]), [0.0], ["relu1"])


def test_sweep_curves_shared_y():
    cols = {"shift (px)": ([0, 1], {"MSE": [0.0, 0.1]}), "blur σ (px)": ([0, 1], {"MSE": [0.0, 0.01]})}
    assert lessons.sweep_curves(cols, rows=("MSE",), shared_y=True).layout.yaxis2.matches == "y"
    assert lessons.sweep_curves(cols, rows=("MSE",)).layout.yaxis2.matches is None
