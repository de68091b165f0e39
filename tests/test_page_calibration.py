"""The "Calibration lab" page under AppTest: it renders, runs with small and with default settings,
and shows the numbers of :mod:`lpips_explorer.calibration` (golden values: see test_calibration.py).

The default-settings test does not run the full 2AFC again: the library's ``run_2afc`` is served
from the session's one run (:mod:`calibration_shared`) when the page asks for exactly the
article's settings, and the settings the page asked for are asserted."""

from __future__ import annotations

import numpy as np

from lpips_explorer import calibration as C
from lpips_core import weights

from calibration_shared import serving_article_2afc

PAGE = "app_pages/calibration_lab.py"


def _open(app):
    app.run()
    app.switch_page(PAGE)
    app.run()
    assert not app.exception
    return app


def _table(app, first_row: str):
    """The displayed dataframe whose first row is ``first_row``."""
    for df in app.dataframe:
        if len(df.value) and df.value.index[0] == first_row:
            return df.value
    raise AssertionError(f"no table starting with {first_row!r}")


def _progress(app) -> list[tuple[int, str]]:
    return [(p.proto.value, p.proto.text) for p in app.get("progress")]


def test_page_shows_the_mechanics_before_any_run(app):
    at = _open(app)
    mech = C.mechanics()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Share in the quadrant"] == f"{mech.quadrant.share:.2f}" == "0.83"
    assert metrics["Scalar distance"] == f"{mech.quadrant.scalar:.4f}"
    table = _table(at, "noise s=0.05")
    assert list(table.index) == list(C.MECHANICS_ROWS)
    expected = [[r.mse, r.minus1_1, r.zero_one, r.up2x] for r in mech.rows.values()]
    np.testing.assert_array_equal(table.to_numpy(), expected)
    assert any("Run the experiment" in i.value for i in at.info)
    assert _progress(at) == []  # nothing heavy runs until asked


def test_page_runs_small_settings_and_shows_the_module_values(app):
    at = _open(app)
    at.number_input(key="cal_n_nets").set_value(2)
    at.number_input(key="cal_first_seed").set_value(3)
    at.select_slider(key="cal_triplets").set_value(50)
    at.number_input(key="cal_steps").set_value(20)
    real = ["alex"] if weights.availability("alex")[0] else []
    at.multiselect(key="cal_real_nets").set_value(real)
    at.button(key="cal_run").click()
    at.run(timeout=300)
    assert not at.exception

    expected = C.run_2afc(net_seeds=(3, 4), n_train=50, n_test=50, steps=20).as_dict()
    table = _table(at, "L2")
    for label, acc in expected.items():
        assert table.loc[label, "all"] == acc["all"]
        assert table.loc[label, "noise"] == acc["noise"]
        assert table.loc[label, "DCT"] == acc["dct"]
    if real:
        assert "LPIPS AlexNet v0.1, lin" in table.index
    bars = _progress(at)
    assert bars and all(value == 100 for value, _ in bars) and "Toy 2AFC: computed" in bars[0][1]

    # a rerun (other stand-in's weights) takes the cached result: same bar, same numbers
    at.selectbox(key="cal_weights_net").set_value(4)
    at.run()
    assert not at.exception
    assert _progress(at)[0] == bars[0]
    assert _table(at, "L2").equals(table)


def test_page_default_settings_finish_with_a_progress_bar(app, monkeypatch):
    """The reference example's settings (5 nets, 600 + 600 triplets, 300 steps): about a minute on CPU."""
    calls = []
    monkeypatch.setattr(C, "run_2afc", serving_article_2afc(calls))
    at = _open(app)
    at.button(key="cal_run").click()
    at.run(timeout=900)
    assert not at.exception
    assert calls == [dict(net_seeds=C.DEFAULT_NET_SEEDS, n_train=600, n_test=600, train_seed=1, test_seed=2,
                          steps=300, lr=0.05, size=64, test=None)]
    bars = _progress(at)
    assert bars and bars[0][0] == 100 and "Toy 2AFC: computed" in bars[0][1]
    table = _table(at, "L2")
    assert len(table) >= 11
    # the article's printed rows (see test_calibration.py for all of them)
    assert [f"{v:.3f}" for v in table.loc["L2"]] == ["0.655", "0.690", "0.620"]
    assert [f"{v:.3f}" for v in table.loc["stand-in net 0, lin"]] == ["0.838", "0.870", "0.807"]
    assert [f"{v:.3f}" for v in table.loc["stand-in net 4, w = 1"]] == ["0.662", "0.663", "0.660"]


def test_unavailable_real_net_is_explained(app, monkeypatch):
    """A backbone without weights is not offered, and the page says why."""
    net, real = "vgg", weights.availability

    def fake(n):
        return (False, f"no {n} weights in this test") if n == net else real(n)

    monkeypatch.setattr(weights, "availability", fake)
    from ui import models

    models._availability.clear()
    try:
        at = _open(app)
        assert net not in at.multiselect(key="cal_real_nets").options
        assert any(f"no {net} weights in this test" in c.value for c in at.caption)
    finally:
        models._availability.clear()
