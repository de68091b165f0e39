"""AppTest for "Debug a score": two uploaded files scored as uploaded, the findings ranked.

The pair is :func:`test_diagnostics.debug_pair`: an RGBA PNG reference (168×256) and a resized
(126×192), shifted (4 px down, 6 px right) quality-60 JPEG of it. The page's numbers are
recomputed here with the library on the same bytes.
"""

from __future__ import annotations

import re

import pytest

from lpips_explorer.diagnostics import CHECKS, match_size
from lpips_core.images import load_image
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many
from apptest_helpers import ok as _ok, table as _table
from test_diagnostics import debug_pair


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


def _library_score(model, ref_bytes: bytes, test_bytes: bytes, max_side=None) -> float:
    opts = {} if max_side is None else {"max_side": max_side}
    r, t = load_image(ref_bytes, **opts).array, load_image(test_bytes, **opts).array
    return float(lpips_many(model, r, [match_size(t, r.shape[:2])]).total[0])


def _offset(finding: str) -> tuple[float, float]:
    found = re.search(r"offset by ([+-][\d.]+|0) px vertically .* and ([+-][\d.]+|0) px horizontally", finding)
    assert found, finding
    return float(found[1]), float(found[2])


def _summary(at):
    """The ranked summary (``st.table``, indexed by check name) and the misalignment check's finding."""
    return _table(at, "LPIPS what if"), next(m.value for m in at.markdown if "Phase correlation" in m.value)


NAMES = {spec.id: spec.name for spec in CHECKS}


def unescaped(markdown: str) -> str:
    """Markdown as read: the page escapes the finding (``ui.md_escape``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def test_debug_scores_uploads_as_uploaded_and_ranks_alpha_first(app, alex):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/debug_a_score.py").run())
    ref_png, test_jpg = debug_pair()
    at.file_uploader(key="dbg_ref_file").set_value(("ref.png", ref_png, "image/png"))
    _ok(at.file_uploader(key="dbg_test_file").set_value(("test.jpg", test_jpg, "image/jpeg")).run())

    summary, misaligned = _summary(at)
    assert summary.index[0] == NAMES["alpha"]
    assert list(summary.columns) == ["status", "what if", "LPIPS as is", "LPIPS what if", "change"]
    native = _library_score(alex, ref_png, test_jpg)  # native size: 256×168, the test resized to it
    assert summary["LPIPS as is"].iloc[0] == pytest.approx(native, abs=1e-6)
    assert float(next(m.value for m in at.metric if m.label.startswith("LPIPS"))) == pytest.approx(native, abs=6e-5)
    changes = summary["change"].dropna().abs().tolist()
    assert changes == sorted(changes, reverse=True)
    assert (summary["change"].dropna() == (summary["LPIPS what if"] - summary["LPIPS as is"]).dropna()).all()
    assert summary.loc[NAMES["jpeg_blockiness"], "status"] == "warning"
    assert _offset(unescaped(misaligned)) == pytest.approx((4, 6), abs=0.3)
    assert any("the test file 192×126 px" in c.value and "Scored with AlexNet, v0.1, lin, at 256×168 px "
               "(width×height)" in c.value for c in at.caption)

    # the working size, only when asked for: offsets stay in the files' pixels
    _ok(at.select_slider(key="working_side").set_value(128).run())
    _ok(at.radio(key="dbg_resolution").set_value("working").run())
    summary, misaligned = _summary(at)
    assert summary.loc[NAMES["resolution"], "LPIPS as is"] == pytest.approx(
        _library_score(alex, ref_png, test_jpg, max_side=128), abs=1e-6)
    assert summary.loc[NAMES["resolution"], "LPIPS what if"] == pytest.approx(native, abs=1e-6)
    assert _offset(unescaped(misaligned)) == pytest.approx((4, 6), abs=0.5)
    assert summary.loc[NAMES["jpeg_blockiness"], "status"] == "warning"
