"""AppTest for the successor metrics on the pages (issue 8): ST-LPIPS (alex, vgg) and DISTS (vgg).

They join Shift vs blur's table and curves, the Distortion lab's metrics table, CSV, per-layer
view and (DISTS) stage bars, and the Conventions page. Every number is checked against
``metric_registry.build`` + ``prepare_input`` on the same images, recomputed here. The reference
is brought to 128 px (the sidebar's smallest working size) so VGG-sized successors stay quick.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
import streamlit

from lpips_core import metric_registry
from lpips_core.spec import parse_spec
from lpips_explorer.distortions import chain, gaussian_blur, shift
from apptest_helpers import frame as _frame, ok as _ok, row as _row

#: The extra metrics' spec names, as the pickers hold them: ST-LPIPS · AlexNet, ST-LPIPS · VGG16, DISTS · VGG16.
ST_ALEX, ST_VGG, DISTS = (parse_spec(s).name for s in ("stlpips-alex", "stlpips-vgg", "dists-vgg"))
ALL = [ST_ALEX, ST_VGG, DISTS]
LABELS = {ST_ALEX: "ST-LPIPS · AlexNet", ST_VGG: "ST-LPIPS · VGG16", DISTS: "DISTS · VGG16"}
SPLIT = {ST_ALEX: ("stlpips", "alex"), ST_VGG: ("stlpips", "vgg"), DISTS: ("dists", "vgg")}


@pytest.fixture(scope="module", autouse=True)
def _weights_here():
    for metric, net in SPLIT.values():
        ok, why = metric_registry.availability(metric, net)
        if not ok:
            pytest.skip(why)


@pytest.fixture(scope="module")
def metric_model():
    cache: dict = {}

    def get(sid: str):
        if sid not in cache:
            cache[sid] = metric_registry.build(*SPLIT[sid])
        return cache[sid]

    return get


def _distance(model, sid: str, ref, img, **kw) -> float:
    """The model on the pair as ``prepare_input`` feeds it; through ``compare``, which takes the
    network input as given (a wrong convention on purpose, as the Conventions page feeds it)."""
    metric = SPLIT[sid][0]
    x = metric_registry.prepare_input(metric, ref, **kw)
    y = metric_registry.prepare_input(metric, img, **kw)
    return float(model.compare(x, y).total[0])


def _chart(at, key_part: str) -> dict:
    """The Plotly spec of the chart whose element id holds ``key_part`` (its key)."""
    for el in at.get("plotly_chart"):
        if key_part in el.proto.id:
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart with key {key_part!r}: {[el.proto.id for el in at.get('plotly_chart')]}")


def _start(app, successors=None):
    app.session_state["svb_open_numbers"] = True  # the folded table, opened
    app.session_state["working_side"] = 128
    if successors is not None:
        app.session_state["extra_metrics"] = successors
    return _ok(app.run())


# --------------------------------------------------------------------------- shift vs blur
def test_default_successors_follow_the_device(app):
    from ui.choices import default_extras
    from ui.models import device_name

    at = _start(app)
    want = [s.name for s in default_extras(device_name())]
    assert at.multiselect(key="svb_successors").value == want
    assert want == ([ST_ALEX] if device_name() == "cpu" else ALL)
    assert any("by default" in c.value for c in at.caption)
    table = _frame(at, "metric")
    assert [LABELS[s] for s in want] == [m for m in table["metric"] if m in LABELS.values()]


def test_shift_vs_blur_successors(app, metric_model):
    app.session_state["svb_open_curves"] = True  # the curves' section, folded by default in the presentation view
    at = _start(app, [ST_ALEX])
    _ok(at.multiselect(key="svb_successors").set_value(ALL).run())
    _ok(at.slider(key="svb_shift").set_value(2).run())  # the default is the lesson's 1 px
    assert at.session_state["extra_metrics"] == ALL
    ref = at.session_state["ref_image"]
    table = _frame(at, "metric")
    shifted, blurred = shift(ref, 2, boundary="reflect"), gaussian_blur(ref, 1.5)
    for sid in ALL:
        row = _row(table, "metric", LABELS[sid])
        assert row["shifted 2 px"] == pytest.approx(_distance(metric_model(sid), sid, ref, shifted), rel=1e-5)
        assert row["blurred σ = 1.5"] == pytest.approx(_distance(metric_model(sid), sid, ref, blurred), rel=1e-5)
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict"))
    assert "ST-LPIPS · AlexNet calls the" in verdict and "DISTS · VGG16 calls the" in verdict
    share = next(m.value for m in at.markdown if m.value.startswith("**The shift as a share"))
    st_row = _row(table, "metric", "ST-LPIPS · AlexNet")
    assert f"ST-LPIPS · AlexNet {st_row['shifted 2 px'] / st_row['blurred σ = 1.5']:.0%}" in share

    # the curves: a row per successor, each point the library's value
    spec = _chart(at, "svb_curves")
    traces = {tuple(t["meta"]): t for t in spec["data"]}
    dists_shift = traces[("shift (px)", "DISTS · VGG16")]
    assert dists_shift["y"][0] == 0.0  # the unchanged image, no forward pass
    assert dists_shift["y"][5] == pytest.approx(
        _distance(metric_model(DISTS), DISTS, ref, shift(ref, 5, boundary="reflect")), rel=1e-5)
    st_blur = traces[("blur σ (px)", "ST-LPIPS · VGG16")]
    assert st_blur["x"][4] == 2.0
    assert st_blur["y"][4] == pytest.approx(
        _distance(metric_model(ST_VGG), ST_VGG, ref, gaussian_blur(ref, 2.0)), rel=1e-5)
    row_titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert "ST-LPIPS ↓" in row_titles and "DISTS ↓" in row_titles

    # off the curve's grid: one pass, still the library's number
    _ok(at.slider(key="svb_blur").set_value(0.75).run())
    row = _row(_frame(at, "metric"), "metric", "DISTS · VGG16")
    assert row["blurred σ = 0.75"] == pytest.approx(
        _distance(metric_model(DISTS), DISTS, ref, gaussian_blur(ref, 0.75)), rel=1e-5)

    # none: the page is as before, without successor rows or rows in the curves
    _ok(at.multiselect(key="svb_successors").set_value([]).run())
    assert not set(LABELS.values()) & set(_frame(at, "metric")["metric"])
    assert "ST-LPIPS ↓" not in [a["text"] for a in _chart(at, "svb_curves")["layout"]["annotations"]]


# --------------------------------------------------------------------------- distortion lab
def test_distortion_lab_successors(app, metric_model, monkeypatch):
    downloads: dict[str, object] = {}
    original = streamlit.download_button

    def recording(label, data, *args, **kwargs):
        downloads[kwargs.get("key")] = data
        return original(label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    at = _start(app, [ST_ALEX])
    _ok(at.switch_page("app_pages/distortion_lab.py").run())
    assert at.multiselect(key="lab_successors").value == [ST_ALEX]  # the choice followed the user
    _ok(at.multiselect(key="lab_successors").set_value(ALL).run())
    _ok(at.slider(key="lab_0_sigma").set_value(2.0).run())
    ref = at.session_state["ref_image"]
    dist = chain(ref, at.session_state["lab_chain"]).astype(np.float32)
    table = _frame(at, "note")
    want = {sid: _distance(metric_model(sid), sid, ref, dist) for sid in ALL}
    for sid in ALL:
        assert _row(table, "metric", LABELS[sid])["value"] == pytest.approx(want[sid], rel=1e-5)
    assert _row(table, "metric", "DISTS · VGG16")["note"] == "inputs in [0,1]"
    _row(table, "metric", "LPIPS · AlexNet")  # LPIPS rows stay

    # the CSV holds the same rows
    csv = pd.read_csv(io.StringIO(downloads["lab_csv"]))
    for sid in ALL:
        assert _row(csv, "metric", LABELS[sid])["value"] == pytest.approx(want[sid], rel=1e-5)

    # ST-LPIPS joins the per-layer bars with its five layer terms
    st_alex = metric_model(ST_ALEX).compare(metric_registry.prepare_input("stlpips", ref),
                                                   metric_registry.prepare_input("stlpips", dist))
    bars = _chart(at, "lab_layers_fig")["data"]
    for k, trace in enumerate(bars):
        y = dict(zip(trace["x"], trace["y"]))
        assert y["ST-LPIPS · AlexNet"] == pytest.approx(float(st_alex.per_layer[0, k]), rel=1e-5)
    # DISTS: texture and structure per stage
    dists = metric_model(DISTS).compare(metric_registry.prepare_input("dists", ref),
                                              metric_registry.prepare_input("dists", dist))
    stages = _chart(at, "lab_dists_vgg_fig")["data"]
    assert [t["name"] for t in stages] == ["texture", "structure"]
    np.testing.assert_allclose(stages[0]["y"], dists.components["texture"][0].numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(stages[1]["y"], dists.components["structure"][0].numpy(), rtol=1e-5, atol=1e-8)

    # ST-LPIPS's spatial map (summed over layers): the library's, its mean close to the ST-LPIPS value
    assert at.selectbox(key="lab_map_net").options == ["LPIPS · AlexNet", "LPIPS · VGG16", "ST-LPIPS · AlexNet",
                                                       "ST-LPIPS · VGG16"]
    _ok(at.selectbox(key="lab_map_net").set_value(ST_ALEX).run())
    title = _chart(at, "lab_map_fig")["layout"]["title"]["text"]
    assert title.startswith("ST-LPIPS · AlexNet, summed: mean ") and "= ST-LPIPS" in title
    assert title.split("mean ")[1].split()[0] == f"{float(st_alex.spatial_map[0].mean()):.4f}"
    assert float(st_alex.spatial_map[0].mean()) == pytest.approx(float(st_alex.total[0]), rel=1e-3)
    _ok(at.radio(key="lab_map_layer").set_value("relu2").run())
    # the map PNG is encoded on click (a callable), at the image's size
    png = downloads["lab_png"]()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    assert Image.open(io.BytesIO(png)).size == (dist.shape[1], dist.shape[0])


# --------------------------------------------------------------------------- conventions
def test_conventions_successors(app, metric_model):
    at = _start(app, [DISTS])
    _ok(at.switch_page("app_pages/conventions.py").run())
    expect = _frame(at, "expects")
    assert _row(expect, "metric", "ST-LPIPS · AlexNet")["expects"] == "[-1,1]"
    assert _row(expect, "metric", "DISTS · VGG16")["expects"] == "[0,1]"
    _ok(at.multiselect(key="conv_successors").set_value([ST_ALEX, DISTS]).run())
    ref = at.session_state["ref_image"]
    dist = gaussian_blur(ref, 1.5, boundary="reflect")  # the default pair (the lab not opened)
    table = _frame(at, "ratio_to_correct")
    assert set(table["metric"]) == {"ST-LPIPS · AlexNet", "DISTS · VGG16"}
    assert len(table) == 2 * 3 * 3  # metrics × conventions × sizes (native, 64, 256)
    for sid in (ST_ALEX, DISTS):
        metric = SPLIT[sid][0]
        correct = metric_registry.correct_convention(metric)
        for size, label in ((None, f"native ({ref.shape[1]}×{ref.shape[0]} px)"), (64, "64×64 px"), (256, "256×256 px")):
            rows = table[(table["metric"] == LABELS[sid]) & (table["size"] == label)]
            base = _distance(metric_model(sid), sid, ref, dist, size=size)
            for _, row in rows.iterrows():
                value = _distance(metric_model(sid), sid, ref, dist, convention=row["convention"], size=size)
                assert row["value"] == pytest.approx(value, rel=1e-5), (sid, label, row["convention"])
                assert row["ratio_to_correct"] == pytest.approx(value / base, rel=1e-5)
                assert row["is_correct"] == (row["convention"] == correct)
                assert row["what_it_models"] == metric_registry.convention_note(metric, row["convention"])
    assert _chart(at, "conv_succ_heatmap")["data"][0]["hovertemplate"].count("distance") == 1
    # the LPIPS grid is still there
    assert set(_frame(at, "ratio_to_reference")["backbone"]) == {"alex", "vgg"}


# --------------------------------------------------------------------------- missing weights
@pytest.fixture
def no_stlpips_checkpoint(monkeypatch):
    """ST-LPIPS's checkpoint "not installed": the page must say why and how to fix it."""
    from ui import models
    from lpips_core import stlpips

    monkeypatch.setattr(stlpips, "checkpoint_path", lambda net: None)
    models._availability.clear()
    models._load.clear()
    yield
    models._availability.clear()  # the next test sees the real weights again
    models._load.clear()


def test_a_missing_checkpoint_is_a_message_not_a_traceback(app, no_stlpips_checkpoint):
    at = _start(app, [ST_ALEX])
    warning = next(w.value for w in at.warning if "ST-LPIPS · AlexNet is unavailable" in w.value)
    assert "pip install \\-\\-no\\-deps stlpips\\-pytorch==0\\.0\\.2" in warning  # the fix, Markdown-escaped
    assert "ST-LPIPS · AlexNet" not in set(_frame(at, "metric")["metric"])
    _row(_frame(at, "metric"), "metric", "LPIPS · AlexNet")  # everything else keeps working
    assert "ST-LPIPS · AlexNet (unavailable)" in at.multiselect(key="svb_successors").options
    _ok(at.switch_page("app_pages/distortion_lab.py").run())
    row = _row(_frame(at, "note"), "metric", "ST-LPIPS · AlexNet")
    assert np.isnan(row["value"]) and row["note"] == "unavailable (no weights)"
    _ok(at.switch_page("app_pages/conventions.py").run())
    assert any("ST-LPIPS · AlexNet is unavailable" in w.value for w in at.warning)
