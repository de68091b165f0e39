"""AppTest for the page "LPIPS as a loss" (issue 12; issue 35, item 5): both experiments with small budgets.

The page's numbers are compared with the library's, run here on the same inputs (the page is a
thin caller of :mod:`lpips_explorer.loss_lab`). Every loss takes the same number of steps and the
schedule is a function of the step number, so the page's run and the library's give the same
numbers whatever the machine's load (the time limit is not reached: the page says so). The page
states the budget (equal steps, or what the time limit left); Stop discards a run and says so.
"""

from __future__ import annotations

import numpy as np
import pytest

from lpips_core import LPIPS
from lpips_explorer import loss_lab as L
from apptest_helpers import frame, ok, row
from ui import state

PAGE = "app_pages/lpips_as_a_loss.py"


def _clean(at):
    ok(at)
    assert not at.error, [e.value for e in at.error]
    return at


def _open(app):
    at = _clean(app.run())
    return _clean(at.switch_page(PAGE).run())


def test_blur_experiment_runs_and_matches_the_library(app):
    at = _open(app)
    assert "Press **Run** to optimise" in " ".join(i.value for i in at.info)
    at.select_slider(key="lal_blur_size").set_value(64)
    at.slider(key="lal_blur_copies").set_value(3)
    at.number_input(key="lal_blur_steps").set_value(3)
    at.multiselect(key="lal_blur_losses").set_value(["LPIPS · AlexNet"])
    _clean(at.button(key="lal_blur_run").click().run())
    assert [s.value for s in at.success] == ["**Equal budgets:** every loss took the same **3 steps**."]
    assert not at.warning, [w.value for w in at.warning]
    df = frame(at, "sharpness")
    assert list(df["loss"]) == ["MSE", "LPIPS · AlexNet"]
    ref = at.session_state[state.REF_IMAGE]
    res = L.mse_blur_experiment(ref, {"LPIPS · AlexNet": LPIPS("alex")}, size=64, copies=3, max_shift=4, steps=3,
                                max_seconds=None)  # the same seeded run, from the session's reference
    for label in ("MSE", "LPIPS · AlexNet"):
        got, want = row(df, "loss", label), res.runs[label]
        assert got["steps"] == want.steps == 3
        # the same computation in the same process: equal to float32 rounding
        assert got["first loss"] == pytest.approx(want.losses[0], rel=1e-6)
        assert got["last loss"] == pytest.approx(want.losses[-1], rel=1e-6)
        assert got["sharpness"] == pytest.approx(want.sharpness, rel=1e-6)
    ids = [c.proto.id for c in at.get("plotly_chart")]
    assert any("lal_blur_curves" in i for i in ids) and any("lal_blur_sharpness" in i for i in ids)
    assert any("same number of Adam steps" in m.value for m in at.markdown)
    assert any("differs from the mean of the copies" in m.value for m in at.markdown)


def test_time_limit_is_stated_and_leaves_equal_steps(app):
    """1,000 steps asked with a 1 s limit: the page says how many steps every loss took, and the
    table shows the same count for each."""
    at = _open(app)
    at.select_slider(key="lal_blur_size").set_value(64)
    at.slider(key="lal_blur_copies").set_value(2)
    at.number_input(key="lal_blur_steps").set_value(1000)
    at.number_input(key="lal_blur_seconds").set_value(1.0)
    at.multiselect(key="lal_blur_losses").set_value(["LPIPS · AlexNet"])
    _clean(at.button(key="lal_blur_run").click().run())
    steps = set(frame(at, "sharpness")["steps"])
    assert len(steps) == 1 and steps.pop() < 1000
    k = int(frame(at, "sharpness")["steps"].iloc[0])
    warning = " ".join(w.value for w in at.warning)
    assert f"The time limit (1 s) stopped the experiment after **{k} of 1000 steps**. Every loss took the same " \
           f"{k} steps" in warning
    assert not at.success


def test_fooling_runs_and_stop_discards(app):
    at = _open(app)
    at.number_input(key="lal_fool_steps").set_value(2)
    at.select_slider(key="lal_fool_size").set_value(48)
    at.multiselect(key="lal_fool_metrics").set_value(["LPIPS · VGG16", "LPIPS · AlexNet"])
    _clean(at.button(key="lal_fool_run").click().run())
    assert [s.value for s in at.success] == ["**Equal budgets:** every metric took the same **2 steps**."]
    df = frame(at, "÷ ε")
    assert list(df["steps"]) == [2, 2]
    got = row(df, "metric", "LPIPS · AlexNet")
    assert got["metric's d"] <= 0.05 + 1e-9
    assert got["÷ ε"] == pytest.approx(got["RMS to source"] / 0.05, rel=1e-6)
    assert any("not the published E-LPIPS" in i.value for i in at.info)
    _clean(at.button(key="lal_fool_stop").click().run())
    assert any("Stopped" in i.value for i in at.info)
    # the finished run stays cached: the table is still there after Stop
    assert np.isfinite(frame(at, "÷ ε")["÷ ε"]).all()
