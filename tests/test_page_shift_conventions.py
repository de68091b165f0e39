"""AppTest: Shift vs blur's presentation view (default 1 px, one shared-axis ratio chart, the sidebar's
backbone in the verdict, the per-layer "why") and Conventions with an uploaded test image.

Every number is compared with the library's own value for the same input.
"""

from __future__ import annotations

import base64
import html
import json
import re

import numpy as np
import pytest

from lpips_core import LPIPS
from lpips_core.conventions import resize, to_tensor
from lpips_explorer.distortions import gaussian_blur, shift
from lpips_explorer.figures.lessons import HIGHLIGHT_COLOUR, block_mean
from lpips_explorer.figures.maps import abs_difference
from lpips_core.images import image_to_png_bytes, load_image
from lpips_core.sweeps import conventions_grid, lpips_many
from ui.text import md_escape
from apptest_helpers import frame, ok, row


@pytest.fixture(scope="module")
def models():
    cache: dict = {}

    def get(net="alex", version="0.1"):
        if (net, version) not in cache:
            cache[net, version] = LPIPS(net, version)
        return cache[net, version]

    return get


def _chart(at, key: str) -> dict:
    for el in at.get("plotly_chart"):
        if key in el.proto.id:
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart {key!r}: {[el.proto.id for el in at.get('plotly_chart')]}")


def _ratio_bars(at) -> tuple[dict[str, float], dict[str, str]]:
    """The answer's HTML ratio bars: metric → ratio and metric → bar colour."""
    body = next(h.proto.body for h in at.get("html") if "svb-ratio-bars" in h.proto.body)
    bars = re.findall(r'data-metric="([^"]+)" data-ratio="([^"]+)".*?background:(#[0-9a-f]{6})', body)
    names = [html.unescape(n) for n, _, _ in bars]
    return dict(zip(names, (float(r) for _, r, _ in bars))), dict(zip(names, (c for _, _, c in bars)))


def _array(v) -> np.ndarray:
    """A Plotly JSON array: a list, or a typed array ``{"dtype", "bdata", "shape"}``."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(n) for n in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v, dtype=np.float64)


def _start(app, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", str(tmp_path / "sweeps"))  # computed here, not read back
    app.session_state["working_side"] = 128
    app.session_state["svb_open_numbers"] = True  # the folded table, opened
    app.session_state["extra_metrics"] = []
    return ok(app.run())


def test_shift_vs_blur_presentation_view(app, models, tmp_path, monkeypatch):
    at = _start(app, tmp_path, monkeypatch)
    assert at.toggle(key="svb_present").value is True
    assert at.slider(key="svb_shift").value == 1 and at.slider(key="svb_blur").value == 1.5
    ref = at.session_state["ref_image"]
    shifted, blurred = shift(ref, 1, boundary="reflect"), gaussian_blur(ref, 1.5)

    # the numbers are the library's
    table = frame(at, "metric")
    want = {}
    for label, net in (("LPIPS · AlexNet", "alex"), ("LPIPS · VGG16", "vgg")):
        res = lpips_many(models(net), ref, [shifted, blurred])
        want[label] = (float(res.total[0]), float(res.total[1]))
        r = row(table, "metric", label)
        assert (r["shifted 1 px"], r["blurred σ = 1.5"]) == pytest.approx(want[label], rel=1e-5)
    mse = row(table, "metric", "MSE")
    assert mse["shifted 1 px"] == pytest.approx(float(np.mean((shifted.astype(float) - ref) ** 2)), rel=1e-6)

    # the one screen: three images and the two |difference| images, with their gains
    captions = [c for im in at.main.image for c in im.captions]
    gain_s, gain_b = abs_difference(shifted, ref)[1], abs_difference(blurred, ref)[1]
    assert captions == ["reference", "shifted 1 px", "blurred σ = 1.5",
                        f"|shifted − ref| ×{gain_s:.1f}", f"|blurred − ref| ×{gain_b:.1f}"]

    # ONE chart of the shift-to-blur ratios on one log axis (HTML bars), the sidebar's backbone in red
    ratios, colours = _ratio_bars(at)
    assert ratios["MSE"] == pytest.approx(mse["shifted 1 px"] / mse["blurred σ = 1.5"], rel=1e-6)
    for label, (d_s, d_b) in want.items():
        assert ratios[label] == pytest.approx(d_s / d_b, rel=1e-5)
    assert colours["LPIPS · AlexNet"] == HIGHLIGHT_COLOUR and colours["LPIPS · VGG16"] == colours["MSE"] != HIGHLIGHT_COLOUR
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict at a 1 px shift"))
    assert "**LPIPS · AlexNet calls the" in verdict and "(the sidebar's backbone)**" in verdict
    assert [e.label for e in at.main.expander][:2] == ["The numbers", "Why deep features forgive a shift"]
    # folded sections send no chart (the browser would draw them on every step); opening one does
    # ... and the presentation view sends no Plotly chart at all: a new visitor's browser need not load
    # Plotly's bundle to draw the answer
    assert not at.get("plotly_chart")
    assert at.session_state["svb_open_why"] is False
    for key in ("svb_open_why", "svb_open_curves", "svb_open_stripes"):
        at.session_state[key] = True
    ok(at.run())

    # why: each layer's map for a growing shift, the library's spatial terms, block-averaged
    res = lpips_many(models("alex"), ref, [shift(ref, v, boundary="reflect") for v in (1, 8)], spatial=True)
    maps = _chart(at, "svb_why_maps")
    layers = len(res.layer_names)
    assert len(maps["data"]) == 5 * layers  # shifts 1, 2, 4, 8 px and the blur, every layer
    for k, (trace_row, res_row) in enumerate(((0, 0), (3, 1))):
        for layer in (0, layers - 1):
            z = _array(maps["data"][trace_row * layers + layer]["z"])
            expected = block_mean(res.layer_maps[res_row, layer].double().numpy(), 48)
            np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-7)
    ratio = _chart(at, "svb_why_ratio")
    first = ratio["data"][0]
    blur_res = lpips_many(models("alex"), ref, [blurred])
    assert _array(first["y"])[0] == pytest.approx(float(res.per_layer[0, 0] / blur_res.per_layer[0, 0]), rel=1e-4)

    # the curves share one y-axis per row between the shift and the blur
    curves = _chart(at, "svb_curves")
    assert curves["layout"]["yaxis2"]["matches"] == "y"

    # the sidebar's backbone drives the highlight
    ok(at.selectbox(key="net").set_value("vgg").run())
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict"))
    assert "**LPIPS · VGG16 calls the" in verdict and "**LPIPS · AlexNet" not in verdict
    _, colours = _ratio_bars(at)
    assert colours["LPIPS · VGG16"] == HIGHLIGHT_COLOUR != colours["LPIPS · AlexNet"]

    # the full view: the same sections as subheaders, nothing folded
    ok(at.toggle(key="svb_present").set_value(False).run())
    assert not at.main.expander
    assert "Why deep features forgive a shift" in [h.value for h in at.subheader]
    assert list(tmp_path.joinpath("sweeps").glob("*.npz"))  # the sweeps went to the disk cache


def test_conventions_with_an_uploaded_test_image(app, models, tmp_path, monkeypatch):
    at = _start(app, tmp_path, monkeypatch)
    ok(at.switch_page("app_pages/conventions.py").run())
    ref = at.session_state["ref_image"]
    h, w = ref.shape[:2]
    native = f"native ({w}×{h} px)"
    assert any(f"\"native\" below is this size, {w}×{h}" in c.value for c in at.caption)
    ok(at.multiselect(key="conv_nets").set_value(["alex"]).run())

    rng = np.random.default_rng(3)
    mine = np.clip(np.kron(rng.random((20, 30, 3)), np.ones((5, 5, 1))), 0, 1).astype(np.float32)  # 100×150 px
    png = image_to_png_bytes(mine)
    ok(at.file_uploader(key="conv_test_file").set_value(("mine.png", png, "image/png")).run())
    assert any(c.value.startswith(f"The test image is 150×100 px (width×height); it was resized to the reference's "
                                  f"{w}×{h} px")
               for c in at.caption)
    assert any(f"against {md_escape('upload: mine.png')}" in c.value for c in at.caption)
    dist = resize(to_tensor(load_image(png).array), (h, w))[0].permute(1, 2, 0).numpy()

    table = frame(at, "ratio_to_reference")
    cells = conventions_grid(ref, dist, get_model=lambda spec: models(spec.net, spec.version), nets=("alex",))
    assert len(table) == len(cells) and native in set(table["size"]) and "native" not in set(table["size"])
    for c in cells:
        label = native if c.size_label == "native" else f"{c.size_label} px"
        r = table[(table["variant"] == c.variant) & (table["size"] == label)].iloc[0]
        assert r["lpips"] == pytest.approx(c.value, rel=1e-5)
        assert r["ratio_to_reference"] == pytest.approx(c.ratio, rel=1e-5)

    # LPIPS against size, per backbone: the reference convention's cells
    sizes = _chart(at, "conv_size_chart")
    assert [t["name"] for t in sizes["data"]] == ["AlexNet"]
    refs = [c for c in cells if c.is_reference]
    assert sizes["data"][0]["x"] == [native if c.size_label == "native" else f"{c.size_label} px" for c in refs]
    np.testing.assert_allclose(_array(sizes["data"][0]["y"]), [c.value for c in refs], rtol=1e-5)
