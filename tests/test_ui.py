"""The UI package's pure parts (``ui.text``, ``ui.choices``, ``ui.state``) and its error boundary.

The pure modules are tested without a Streamlit runtime; that they do not even import Streamlit
is checked in a fresh interpreter. Rendering of escaped text in a browser was checked by hand
against Streamlit 1.67 (every ASCII punctuation character, bare URLs, e-mail addresses,
``:material/…:`` icons and ``$…$`` math render literally, without links).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from lpips_core.spec import MetricSpec
from ui import choices, state
from ui.text import (
    WORD_JOINER,
    chain_key,
    chain_label,
    config_summary,
    fmt,
    md_escape,
    page_error_message,
    verdict,
)

REPO = Path(__file__).resolve().parents[1]


def test_pure_modules_do_not_import_streamlit():
    code = ("import sys; import ui.text, ui.state, ui.choices; "
            "ui.choices.default_extras('cpu'); print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- md_escape
@pytest.mark.parametrize("raw, escaped", [
    ("chelsea", "chelsea"),
    ("a_b*c*.png", r"a\_b\*c\*\.png"),
    ("[x](y)", r"\[x\]\(y\)"),
    ("<b>h</b>", r"\<b\>h\<\/b\>"),
    (":red[x] :material/home:", r"\:red\[x\] \:material\/home\:"),
    ("$x$ ~~s~~ # 1. | &amp;", r"\$x\$ \~\~s\~\~ \# 1\. \| \&amp;"),
    ("C:\\dir\\f.png", r"C\:\\dir\\f\.png"),
    ("naïve — ünïcode", "naïve — ünïcode"),
])
def test_md_escape(raw, escaped):
    assert md_escape(raw) == escaped


@pytest.mark.parametrize("raw, escaped", [
    ("see http://evil.example", f"see http{WORD_JOINER}\\:\\/\\/evil\\.example"),
    ("HTTPS://a.b", f"HTTPS{WORD_JOINER}\\:\\/\\/a\\.b"),
    ("www.a.org", f"www{WORD_JOINER}\\.a\\.org"),
    ("mail a@b.co", f"mail a{WORD_JOINER}@b\\.co"),
])
def test_md_escape_keeps_bare_urls_and_addresses_from_becoming_links(raw, escaped):
    assert md_escape(raw) == escaped
    assert md_escape(raw).replace(WORD_JOINER, "").replace("\\", "") == raw
    assert md_escape(raw, links=True) == escaped.replace(WORD_JOINER, "")  # the library's own messages


def test_md_escape_takes_any_object():
    assert md_escape(ValueError("bad (x)")) == r"bad \(x\)"
    assert md_escape(1.5) == r"1\.5"


# --------------------------------------------------------------------------- numbers, chains, verdicts
def test_fmt():
    assert fmt(math.inf) == "∞" and fmt(-math.inf) == "−∞"
    assert fmt(0.123456) == "0.1235" and fmt(31.0, 2) == "31.00"


def test_chain_label_and_key():
    steps = [("gaussian_blur", {"sigma": 1.5, "boundary": "reflect"}), ("jpeg", {"quality": 30, "seed": None})]
    assert chain_label(steps) == "gaussian_blur(sigma=1.5, boundary=reflect) → jpeg(quality=30)"
    assert chain_label([]) == "no distortion"
    assert chain_key(steps) == ('[["gaussian_blur", {"boundary": "reflect", "sigma": 1.5}], '
                                '["jpeg", {"quality": 30, "seed": null}]]')
    assert chain_key([("kernel_blur", {"taps": (0.25, 0.5, 0.25)})]) == '[["kernel_blur", {"taps": [0.25, 0.5, 0.25]}]]'


def test_verdict():
    assert verdict("MSE", 0.5, 0.0625) == "MSE calls the blurred copy 8.0× closer"
    assert verdict("LPIPS", 0.1, 0.3) == "LPIPS calls the shifted copy 3.0× closer"
    assert verdict("SSIM", 0.9, 0.8, higher_is_better=True) == "SSIM prefers the shifted copy (0.900 vs 0.800)"
    assert verdict("MSE", 0.0, 0.2) == "MSE calls the shifted copy identical to the reference"
    assert verdict("MSE", 0.2, 0.2) == "MSE calls both copies equally close"
    assert verdict("PSNR", math.inf, 30.0) == "PSNR cannot compare the copies"


# --------------------------------------------------------------------------- choices
def test_default_configuration_and_extra_metrics():
    """One default (LPIPS · AlexNet, v0.1, lin); the extra metrics are every other registered metric
    on each of its networks, ST-LPIPS · AlexNet alone on by default on a CPU."""
    assert choices.DEFAULT_SPEC.name == "lpips-alex-0.1-lin-[-1,1]"
    assert [s.name for s in choices.EXTRA_SPECS] == ["stlpips-alex-[-1,1]", "stlpips-vgg-[-1,1]", "dists-vgg-[0,1]"]
    assert [s.label for s in choices.EXTRA_SPECS] == ["ST-LPIPS · AlexNet", "ST-LPIPS · VGG16", "DISTS · VGG16"]
    assert choices.default_extras("cpu") == [choices.EXTRA_SPECS[0]]
    assert choices.default_extras("cuda") == list(choices.EXTRA_SPECS)


def test_upload_key_is_the_content():
    a, b = b"\x00" * 100 + b"a", b"\x00" * 100 + b"b"  # same name, same size, different bytes
    assert choices.upload_key(a, "x.png", 256) != choices.upload_key(b, "x.png", 256)
    assert choices.upload_key(a, "x.png", 256) == choices.upload_key(bytes(a), "x.png", 256)
    assert choices.upload_key(a, "x.png", 256) != choices.upload_key(a, "x.png", 512)
    assert choices.upload_key(a, "x.png", 256) != choices.upload_key(a, "y.png", 256)
    from lpips_core.caching import content_digest

    assert choices.upload_key(a, "x.png", 256) == f"{content_digest(a)}:256:x.png"
    with pytest.raises(TypeError, match="data must be bytes, got str"):
        choices.upload_key("text", "x.png", 256)


def test_state_keys_are_distinct_strings():
    keys = {name: value for name, value in vars(state).items() if name.isupper()}
    assert len(set(keys.values())) == len(keys)
    assert keys["REF_IMAGE"] == "ref_image" and keys["EXTRA_METRICS"] == "extra_metrics"  # what tests and e2e read


# --------------------------------------------------------------------------- error messages
def test_config_summary_and_error_message():
    raw = config_summary(MetricSpec("lpips"), "cpu", "upload: [x](y).png", escape=False)
    assert raw == "LPIPS · AlexNet (lpips-alex-0.1-lin-[-1,1]), device cpu, reference upload: [x](y).png"
    shown = config_summary(MetricSpec("lpips", net="vgg", version="0.0", lin=False), "cuda", "upload: [x](y).png")
    assert shown == (r"LPIPS · VGG16 \(v0\.0, baseline\) \(lpips\-vgg\-0\.0\-baseline\-\[\-1,1\]\), device cuda, "
                     r"reference upload\: \[x\]\(y\)\.png")
    msg = page_error_message("Distortion lab", RuntimeError("boom /secret/path"), shown)
    assert msg.startswith("**Distortion lab stopped with an unexpected error** (RuntimeError). Configuration: "
                          + shown + ".")
    assert "secret" not in msg


class _Recorder:
    def __init__(self):
        self.errors: list[str] = []

    def __call__(self, body, **kwargs):
        self.errors.append(body)


def test_error_boundary_lets_streamlit_control_flow_through(monkeypatch):
    from streamlit.errors import FragmentHandledException
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

    from ui import boundary

    shown = _Recorder()
    monkeypatch.setattr(boundary.st, "error", shown)
    for exc in (StopException(), RerunException(None), FragmentHandledException(ValueError("x"))):
        with pytest.raises(type(exc)):
            with boundary.error_boundary("A page"):
                raise exc
    assert shown.errors == []

    with boundary.error_boundary("A page"):
        raise KeyError("/srv/secret")
    assert len(shown.errors) == 1
    assert shown.errors[0].startswith("**A page stopped with an unexpected error** (KeyError).")
    assert "secret" not in shown.errors[0]

    with boundary.error_boundary("A page"):  # no exception: nothing shown
        pass
    assert len(shown.errors) == 1


# --------------------------------------------------------------------------- shipped configuration
def test_streamlit_config_hides_errors_and_watches_no_files():
    import ast
    import tomllib

    from streamlit.config import ShowErrorDetailsConfigOptions

    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == ShowErrorDetailsConfigOptions.NONE.value == "none"
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["runOnSave"] is False
    # visitors see the viewer's toolbar: no "Deploy" button (a value Streamlit accepts)
    from streamlit import config as st_config

    assert config["client"]["toolbarMode"] == "viewer"
    assert "viewer" in st_config._config_options_template["client.toolbarMode"].description

    # The favicon: a ":material/…:" icon makes the browser fetch an SVG from fonts.gstatic.com;
    # an emoji becomes an inline data: URL.
    calls = [node for node in ast.walk(ast.parse((REPO / "app.py").read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "set_page_config"]
    assert len(calls) == 1
    icon = next(k.value.value for k in calls[0].keywords if k.arg == "page_icon")
    assert not icon.startswith(":material")
