"""AppTest for the five teaching and debugging pages.

Each page renders in its default state without an exception, and moving a key widget changes a
displayed number to the value the library computes for the same images (recomputed here).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from lpips_core import LPIPS
from lpips_explorer import diagnostics, toy_layer
from lpips_explorer.distortions import chain, gaussian_blur, shift
from lpips_core.images import image_to_png_bytes, load_image, min_side_for
from lpips_core.sweeps import conventions_grid, lpips_many
from ui.models import device_name
from ui.text import md_escape
from apptest_helpers import frame as _frame, ok as _ok, row as _row


@pytest.fixture(scope="module")
def models():
    cache: dict = {}

    def get(net="alex", version="0.1", lin=True):
        key = (net, version, lin)
        if key not in cache:
            cache[key] = LPIPS(net, version, lin)
        return cache[key]

    return get


def _lpips(model, ref, img, **kw) -> float:
    return float(lpips_many(model, ref, [img], **kw).total[0])


# --------------------------------------------------------------------------- shift vs blur
def test_shift_vs_blur(app, models):
    for section in ("svb_open_numbers", "svb_open_stripes"):  # folded (and so not sent) by default
        app.session_state[section] = True
    at = _ok(app.run())  # the default page, with no input
    assert at.title[0].value == "Shift vs blur"
    stripes = _frame(at, "per-pixel squared error")
    assert list(stripes["MSE"]) == [0.5, 0.0625]
    assert any("**8×** closer" in m.value for m in at.markdown)

    ref = at.session_state["ref_image"]
    current = _frame(at, "metric")
    alex, vgg = models("alex"), models("vgg")
    assert at.slider(key="svb_shift").value == 1  # the lesson's one-pixel shift
    assert _row(current, "metric", "LPIPS · AlexNet")["shifted 1 px"] == pytest.approx(
        _lpips(alex, ref, shift(ref, 1, boundary="reflect")), rel=1e-5)

    _ok(at.slider(key="svb_shift").set_value(5).run())
    _ok(at.slider(key="svb_blur").set_value(0.75).run())  # off the curve's grid: one forward pass
    current = _frame(at, "metric")
    assert "shifted 5 px" in current.columns and "blurred σ = 0.75" in current.columns
    shifted, blurred = shift(ref, 5, boundary="reflect"), gaussian_blur(ref, 0.75)
    for label, model in (("LPIPS · AlexNet", alex), ("LPIPS · VGG16", vgg)):
        row = _row(current, "metric", label)
        assert row["shifted 5 px"] == pytest.approx(_lpips(model, ref, shifted), rel=1e-5)
        assert row["blurred σ = 0.75"] == pytest.approx(_lpips(model, ref, blurred), rel=1e-5)
    mse = _row(current, "metric", "MSE")
    assert mse["shifted 5 px"] == pytest.approx(float(np.mean((shifted.astype(float) - ref) ** 2)))
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict"))
    ratio = mse["shifted 5 px"] / mse["blurred σ = 0.75"]
    assert f"MSE calls the blurred copy {ratio:.1f}× closer" in verdict


# --------------------------------------------------------------------------- distortion lab
def test_distortion_lab(app, models):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/distortion_lab.py").run())
    ref = at.session_state["ref_image"]
    alex = models("alex")
    table = _frame(at, "note")
    assert _row(table, "metric", "LPIPS · AlexNet")["value"] == pytest.approx(
        _lpips(alex, ref, gaussian_blur(ref, 1.0)), rel=1e-5)
    _row(table, "metric", "LPIPS · SqueezeNet 1.1")  # listed, as a value or as unavailable

    _ok(at.slider(key="lab_0_sigma").set_value(2.5).run())
    table = _frame(at, "note")
    expected = gaussian_blur(ref, 2.5)
    want = _lpips(alex, ref, expected)
    assert _row(table, "metric", "LPIPS · AlexNet")["value"] == pytest.approx(want, rel=1e-5)
    # the headline above the images: the sidebar's backbone (AlexNet by default) and the pixel metrics
    assert [m.label for m in at.metric] == ["LPIPS · AlexNet", "MSE", "PSNR", "SSIM"]
    assert at.metric[0].value == f"{want:.4f}"
    mse = float(np.mean((expected.astype(float) - ref) ** 2))  # 0.0021 here: never "0.00"
    assert at.metric[1].value == f"{mse:.2g}" and float(at.metric[1].value) == pytest.approx(mse, rel=0.05)
    assert at.metric[3].value == f"{_row(table, 'metric', 'SSIM')['value']:.4f}"
    assert _row(table, "metric", "LPIPS · VGG16")["value"] == pytest.approx(
        _lpips(models("vgg"), ref, expected), rel=1e-5)

    # add a JPEG step: the chain, and so the numbers, follow
    at.selectbox(key="lab_add_name").set_value("jpeg")
    _ok(at.button(key="lab_add").click().run())
    steps = at.session_state["lab_chain"]
    assert [s[0] for s in steps] == ["gaussian_blur", "jpeg"]
    dist = chain(ref, steps)
    table = _frame(at, "note")
    assert _row(table, "metric", "LPIPS · AlexNet")["value"] == pytest.approx(_lpips(alex, ref, dist), rel=1e-5)
    assert _row(table, "metric", "MSE")["value"] == pytest.approx(float(np.mean((dist.astype(float) - ref) ** 2)),
                                                                  rel=1e-5)
    _ok(at.radio(key="lab_map_layer").set_value("relu3").run())
    _ok(at.slider(key="lab_opacity").set_value(0.2).run())


def test_distortion_lab_headline_follows_the_sidebar_backbone(app, models):
    """With VGG16 in the sidebar, the lab's headline is VGG16's LPIPS (computed first), and the map
    starts on VGG16; the table still has every backbone, in their usual order."""
    at = app
    at.session_state["net"] = "vgg"
    _ok(at.run())
    _ok(at.switch_page("app_pages/distortion_lab.py").run())
    ref = at.session_state["ref_image"]
    want = _lpips(models("vgg"), ref, gaussian_blur(ref, 1.0))
    assert at.metric[0].label == "LPIPS · VGG16"
    assert at.metric[0].value == f"{want:.4f}"
    table = _frame(at, "note")
    assert list(table["metric"][3:5]) == ["LPIPS · AlexNet", "LPIPS · VGG16"]
    assert _row(table, "metric", "LPIPS · VGG16")["value"] == pytest.approx(want, rel=1e-5)
    assert at.selectbox(key="lab_map_net").value == "lpips-vgg-0.1-lin-[-1,1]"


# --------------------------------------------------------------------------- conventions
def test_conventions(app, models):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/conventions.py").run())
    assert any("default distortion" in c.value for c in at.caption)
    ref = at.session_state["ref_image"]
    dist = gaussian_blur(ref, 1.5, boundary="reflect")
    table = _frame(at, "ratio_to_reference")
    assert set(table["backbone"]) == {"alex", "vgg"}

    _ok(at.multiselect(key="conv_nets").set_value(["alex"]).run())
    table = _frame(at, "ratio_to_reference")
    assert set(table["backbone"]) == {"alex"}
    cells = conventions_grid(ref, dist, get_model=lambda spec: models(spec.net, spec.version), nets=("alex",))
    assert len(table) == len(cells)
    native = f"native ({ref.shape[1]}×{ref.shape[0]} px)"  # the pixel size scored, width × height
    for c in cells:
        label = native if c.size_label == "native" else f"{c.size_label} px"
        row = table[(table["variant"] == c.variant) & (table["size"] == label)].iloc[0]
        assert row["lpips"] == pytest.approx(c.value, rel=1e-5)
        assert row["ratio_to_reference"] == pytest.approx(c.ratio, rel=1e-5)
    assert table[table["is_reference"]]["variant"].unique().tolist() == ["[-1,1]"]


# --------------------------------------------------------------------------- inside a layer
def test_inside_a_layer(app, models):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/inside_a_layer.py").run())
    toy = _frame(at, "weighted")
    assert _row(toy, "position", "bottom right")["weighted"] == pytest.approx(1.36)
    assert _row(toy, "position", "centre")["weighted"] == pytest.approx(0.344, abs=5e-4)
    assert _row(toy, "position", "mean of all nine = d_l")["weighted"] == pytest.approx(0.20, abs=5e-3)

    _ok(at.slider(key="ial_w2").set_value(0.5).run())
    toy = _frame(at, "weighted")
    expected = toy_layer.toy_layer((1.0, 0.5))
    assert _row(toy, "position", "bottom right")["weighted"] == pytest.approx(1.25)
    assert _row(toy, "position", "centre")["weighted"] == pytest.approx(float(expected.terms[1, 1]))

    ref = at.session_state["ref_image"]
    res = lpips_many(models("alex"), ref, [gaussian_blur(ref, 1.5, boundary="reflect")])
    _ok(at.selectbox(key="ial_layer").set_value("relu4").run())
    summary = _frame(at, "share of LPIPS")
    assert summary["layer"].iloc[0] == "relu4"
    assert summary["d_l"].iloc[0] == pytest.approx(float(res.per_layer[0, 3]), rel=1e-5)
    assert summary["LPIPS"].iloc[0] == pytest.approx(float(res.total[0]), rel=1e-5)
    _ok(at.selectbox(key="ial_channel").set_value(at.selectbox(key="ial_channel").options[3]).run())


# --------------------------------------------------------------------------- debug a score
def _debug_expected(model, ref_bytes: bytes, test_bytes: bytes, *, method="bilinear"):
    side, low = 256, min_side_for(model.net)
    r = load_image(io.BytesIO(ref_bytes), max_side=side, min_side=low)
    t = load_image(io.BytesIO(test_bytes), max_side=side, min_side=low)
    return diagnostics.diagnose(model, r, t, method=method)


def _metric(at, prefix: str) -> float:
    return float(next(m.value for m in at.metric if m.label.startswith(prefix)))


def test_debug_a_score_demo(app, models):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/debug_a_score.py").run())
    ref_png = image_to_png_bytes(at.session_state["ref_image"])
    base = load_image(io.BytesIO(ref_png), max_side=256, min_side=31).array
    alex = models("alex")
    expected = _debug_expected(alex, ref_png, diagnostics.demo_pair(base, dx=3.0, dy=2.0, quality=30)[1])
    assert _metric(at, "LPIPS") == pytest.approx(expected.score, abs=6e-5)

    _ok(at.slider(key="dbg_demo_quality").set_value(80).run())
    expected = _debug_expected(alex, ref_png, diagnostics.demo_pair(base, dx=3.0, dy=2.0, quality=80)[1])
    assert _metric(at, "LPIPS") == pytest.approx(expected.score, abs=6e-5)
    statuses = [m.value for m in at.markdown if "**Misalignment**" in m.value]
    assert statuses and "warning" in statuses[0]


def test_debug_a_score_uploads(app, models):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/debug_a_score.py").run())
    rng = np.random.default_rng(0)
    ref = gaussian_blur(rng.random((96, 128, 3)).astype(np.float32), 1.0)
    test = gaussian_blur(ref, 1.2)[8:88, 10:118]  # a smaller, cropped copy
    ref_png, test_png = image_to_png_bytes(ref), image_to_png_bytes(np.ascontiguousarray(test))

    at.file_uploader(key="dbg_ref_file").set_value(("ref.png", ref_png, "image/png"))
    _ok(at.file_uploader(key="dbg_test_file").set_value(("test <b>x</b>.png", test_png, "image/png")).run())
    expected = _debug_expected(models("alex"), ref_png, test_png)
    assert _metric(at, "LPIPS") == pytest.approx(expected.score, abs=6e-5)
    _ok(at.selectbox(key="dbg_method").set_value("area").run())
    expected = _debug_expected(models("alex"), ref_png, test_png, method="area")
    assert _metric(at, "LPIPS") == pytest.approx(expected.score, abs=6e-5)
    # the file name reaches Markdown only escaped
    assert not any("<b>" in m.value for m in list(at.markdown) + list(at.caption))
    assert any(r"test \<b\>x\<\/b\>\.png" in c.value for c in at.caption)

    # a corrupt test file: the loader's message, no traceback, the page stays alive
    _ok(at.file_uploader(key="dbg_test_file").set_value(("broken.png", test_png[:200], "image/png")).run())
    assert at.error and r"broken\.png" in at.error[0].value  # the loader's message, Markdown-escaped
    # a PDF renamed .png
    _ok(at.file_uploader(key="dbg_test_file").set_value(("doc.png", b"%PDF-1.7\n...", "image/png")).run())
    assert at.error and "PDF" in at.error[0].value


# --------------------------------------------------------------------------- configurations
PAGES = ["app_pages/shift_vs_blur.py", "app_pages/distortion_lab.py", "app_pages/conventions.py", "app_pages/inside_a_layer.py",
         "app_pages/debug_a_score.py"]


def test_pages_survive_an_unavailable_backbone(app):
    """SqueezeNet has no weights here: every page still renders, with the reason instead of a traceback."""
    from ui.models import availability

    if availability("lpips-squeeze")[0]:
        pytest.skip("SqueezeNet weights are available on this machine")
    at = _ok(app.run())
    _ok(at.selectbox(key="net").set_value("squeeze").run())
    for page in PAGES:
        _ok(at.switch_page(page).run())
    assert at.title[0].value == "Debug a score"
    assert any("unavailable" in w.value for w in at.warning)
    _ok(at.switch_page("app_pages/inside_a_layer.py").run())
    assert any("available backbone" in i.value for i in at.info)
    assert not at.error  # st.stop() went through the page's error boundary untouched


def test_baseline_version_00_numbers(app, models):
    """The sidebar's version and lin reach the numbers: v0.0 baseline in the lab and inside a layer."""
    at = app
    at.session_state["version"] = "0.0"
    at.session_state["lin"] = False
    _ok(at.run())
    _ok(at.switch_page("app_pages/distortion_lab.py").run())
    ref = at.session_state["ref_image"]
    base = models("alex", "0.0", False)
    table = _frame(at, "note")
    row = _row(table, "metric", "LPIPS · AlexNet")
    assert row["note"] == "v0.0, baseline"
    assert row["value"] == pytest.approx(_lpips(base, ref, gaussian_blur(ref, 1.0)), rel=1e-5)
    _ok(at.switch_page("app_pages/inside_a_layer.py").run())
    summary = _frame(at, "share of LPIPS")
    res = lpips_many(base, ref, [chain(ref, at.session_state["lab_chain"])])
    assert summary["d_l"].iloc[0] == pytest.approx(float(res.per_layer[0, 1]), rel=1e-5)


def _sidebar_defaults(at) -> tuple[str, str, bool]:
    """The defaults the sidebar's backbone, version and lin controls send to the browser."""
    net = at.selectbox(key="net")
    version = next(e for e in at.sidebar if getattr(e, "key", None) == "version")
    return net.options[net.proto.default], version.options[version.proto.default[0]], at.toggle(key="lin").proto.default


def test_sidebar_controls_default_to_the_sessions_values(app):
    """Each sidebar control's default (what a control the browser mounts afresh shows, and sends
    back with the next rerun) is the session's current value, not the widget's own default: a lin
    toggle defaulting to off once switched a Debug session to the uncalibrated baseline. The
    values themselves still follow the user's clicks; clearing the version keeps it."""
    at = app
    at.switch_page("app_pages/score_a_dataset.py")
    _ok(at.run())
    assert _sidebar_defaults(at) == ("AlexNet", "0.1", True)
    _ok(at.toggle(key="lin").set_value(False).run())
    _ok(at.selectbox(key="net").set_value("vgg").run())
    version = next(e for e in at.sidebar if getattr(e, "key", None) == "version")
    _ok(version.set_value("0.0").run())
    _ok(at.run())
    assert (at.session_state["net"], at.session_state["version"], at.session_state["lin"]) == ("vgg", "0.0", False)
    assert _sidebar_defaults(at) == ("VGG16", "0.0", False)
    # clicking the chosen version clears a segmented control: the session keeps its version,
    # with no error (setting it after the widget raised StreamlitWidgetAlreadyInstantiatedError)
    version = next(e for e in at.sidebar if getattr(e, "key", None) == "version")
    _ok(version.set_value(None).run())
    assert at.session_state["version"] == "0.0" and not at.error
    assert next(e for e in at.sidebar if getattr(e, "key", None) == "version").value == "0.0"
    _ok(at.toggle(key="lin").set_value(True).run())
    assert at.session_state["lin"] is True and _sidebar_defaults(at)[2] is True

    # the reference picker's controls too: a working size reset to its first option (128 px)
    # would change every number on every page
    assert at.select_slider(key="working_side").proto.default == [1]  # 256 px, the session's default
    _ok(at.select_slider(key="working_side").set_value(384).run())
    _ok(at.radio(key="ref_source").set_value("Synthetic").run())
    _ok(at.selectbox(key="ref_synth_kind").set_value("stripes").run())
    _ok(at.select_slider(key="ref_synth_size").set_value(96).run())
    _ok(at.number_input(key="ref_synth_period").set_value(5).run())
    _ok(at.run())
    assert at.select_slider(key="working_side").proto.default == [2]
    assert at.radio(key="ref_source").proto.default == 2
    assert at.selectbox(key="ref_synth_kind").proto.default == 1
    assert at.select_slider(key="ref_synth_size").proto.default == [1]
    assert at.number_input(key="ref_synth_period").proto.default == 5
    assert at.session_state["ref_name"] == "stripes (96 px, period 5)" and at.session_state["ref_image"].shape[:2] == (96, 96)


# --------------------------------------------------------------------------- uploads, names, errors
def _bmp(seed: int) -> bytes:
    """A random 96×128 image as BMP bytes: uncompressed, so every such file has the same size."""
    from PIL import Image

    buf = io.BytesIO()
    rng = np.random.default_rng(seed)
    Image.fromarray((rng.random((96, 128, 3)) * 255).astype(np.uint8)).save(buf, format="BMP")
    return buf.getvalue()


def test_two_uploads_with_the_same_name_and_size_give_two_references(app):
    """Uploads are keyed by their content: a second file with the same name and byte size is a
    new reference, and its Markdown-laden name is shown escaped in the sidebar and the lab."""
    first_bytes, second_bytes = _bmp(0), _bmp(1)
    assert len(first_bytes) == len(second_bytes) and first_bytes != second_bytes
    name = "[x](http://evil.example) *a_b*.bmp"
    at = app
    at.session_state["extra_metrics"] = []
    at.switch_page("app_pages/distortion_lab.py")
    _ok(at.run())
    _ok(at.radio(key="ref_source").set_value("Upload").run())
    for data in (first_bytes, second_bytes):
        _ok(at.file_uploader(key="ref_upload").set_value((name, data, "image/bmp")).run())
        want = load_image(io.BytesIO(data), max_side=256, min_side=64).array
        np.testing.assert_array_equal(at.session_state["ref_image"], want)
        assert at.session_state["ref_name"] == f"upload: {name}"
        # the lab's numbers follow the new reference
        table = _frame(at, "note")
        assert _row(table, "metric", "MSE")["value"] == pytest.approx(
            float(np.mean((gaussian_blur(want, 1.0).astype(np.float64) - want) ** 2)), rel=1e-5)
    assert not np.array_equal(load_image(io.BytesIO(first_bytes)).array, load_image(io.BytesIO(second_bytes)).array)

    shown = md_escape(f"upload: {name}")
    assert at.sidebar.image[0].captions == [shown]
    assert any(c.value.startswith(f"Reference: {shown} · 128×96 px (width×height)") for c in at.caption)
    assert "](http" not in shown and "\\[x\\]\\(http\u2060\\:\\/\\/evil\\.example\\)" in shown


def test_a_page_error_is_a_short_message_without_traceback(app, monkeypatch, caplog):
    """An unexpected exception in a page: a short st.error with the configuration, the traceback
    only in the server's log, never a path or a traceback on the page; the sidebar stays."""
    from lpips_explorer.figures import maps

    def boom(*args, **kwargs):
        raise RuntimeError("boom /secret/path")

    monkeypatch.setattr(maps, "abs_difference", boom)
    at = app
    at.session_state["extra_metrics"] = []
    at.switch_page("app_pages/distortion_lab.py")
    with caplog.at_level("ERROR", logger="lpips_explorer.ui"):
        _ok(at.run())
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("**Distortion lab stopped with an unexpected error** (RuntimeError).")
    assert (r"Configuration: LPIPS · AlexNet \(lpips\-alex\-0\.1\-lin\-\[\-1,1\]\), "
            f"device {device_name()}, " r"reference sample\: chelsea.") in message
    assert "secret" not in message and "Traceback" not in message and ".py" not in message
    assert at.title[0].value == "Distortion lab"  # what ran before the error stays
    assert at.selectbox(key="net").value == "alex"  # and so does the sidebar
    logged = [r for r in caplog.records if r.name == "lpips_explorer.ui" and r.exc_info]
    assert len(logged) == 1 and "Distortion lab raised RuntimeError" in logged[0].getMessage()
    assert "boom /secret/path" in caplog.text and "Traceback" in caplog.text
