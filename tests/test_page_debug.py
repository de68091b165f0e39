"""AppTest for "Debug a score": two uploaded files scored as uploaded, the findings ranked.

The pair is :func:`test_diagnostics.debug_pair`: an RGBA PNG reference (168×256) and a resized
(126×192), shifted (4 px down, 6 px right) quality-60 JPEG of it. The page's numbers are
recomputed here with the library on the same bytes.
"""

from __future__ import annotations

import re

import pytest

from lpips_explorer.diagnostics import match_size
from lpips_core.images import load_image
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many
from apptest_helpers import frame as _frame, ok as _ok, row as _row
from test_diagnostics import debug_pair


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


def _library_score(model, ref_bytes: bytes, test_bytes: bytes, max_side=None) -> float:
    opts = {} if max_side is None else {"max_side": max_side}
    r, t = load_image(ref_bytes, **opts).array, load_image(test_bytes, **opts).array
    return float(lpips_many(model, r, [match_size(t, r.shape[:2])]).total[0])


def _offset(finding: str) -> tuple[float, float]:
    found = re.search(r"offset by ([+-][\d.]+) px vertically .* and ([+-][\d.]+) px horizontally", finding)
    assert found, finding
    return float(found[1]), float(found[2])


def test_debug_scores_uploads_as_uploaded_and_ranks_alpha_first(app, alex):
    at = _ok(app.run())
    _ok(at.switch_page("app_pages/debug_a_score.py").run())
    ref_png, test_jpg = debug_pair()
    at.file_uploader(key="dbg_ref_file").set_value(("ref.png", ref_png, "image/png"))
    _ok(at.file_uploader(key="dbg_test_file").set_value(("test.jpg", test_jpg, "image/jpeg")).run())

    summary = _frame(at, "counterfactual score")
    assert summary["id"].iloc[0] == "alpha"
    native = _library_score(alex, ref_png, test_jpg)  # native size: 168×256, the test resized to it
    assert summary["score as is"].iloc[0] == pytest.approx(native, abs=1e-6)
    assert float(next(m.value for m in at.metric if m.label.startswith("LPIPS"))) == pytest.approx(native, abs=6e-5)
    changes = summary["change"].dropna().abs().tolist()
    assert changes == sorted(changes, reverse=True)
    assert _row(summary, "id", "jpeg_blockiness")["status"] == "warning"
    assert _offset(_row(summary, "id", "misalignment")["finding"]) == pytest.approx((4, 6), abs=0.3)
    assert any("the test file 126×192 px" in c.value and "Scored with AlexNet, v0.1, lin, at 168×256" in c.value
               for c in at.caption)

    # the working size, only when asked for: offsets stay in the files' pixels
    _ok(at.select_slider(key="working_side").set_value(128).run())
    _ok(at.radio(key="dbg_resolution").set_value("working").run())
    summary = _frame(at, "counterfactual score")
    assert _row(summary, "id", "resolution")["score as is"] == pytest.approx(
        _library_score(alex, ref_png, test_jpg, max_side=128), abs=1e-6)
    assert _row(summary, "id", "resolution")["counterfactual score"] == pytest.approx(native, abs=1e-6)
    assert _offset(_row(summary, "id", "misalignment")["finding"]) == pytest.approx((4, 6), abs=0.5)
    assert _row(summary, "id", "jpeg_blockiness")["status"] == "warning"
