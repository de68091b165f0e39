"""AppTest of the "Judge it yourself" page on a temporary SQLite database (LPIPS_EXPLORER_DATA)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from lpips_core import metrics
from lpips_explorer.study import scoring
from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T
from apptest_helpers import frame, ok, row

PAGE = "app_pages/judge_it_yourself.py"
APP = Path(__file__).resolve().parents[1] / "app.py"


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A 5-triplet shift-vs-blur study (metrics after every answer) in a database of its own."""
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    recipes = T.make_recipes(5, families=["shift-vs-blur", "noise-vs-blur"], seed=4)
    return store, store.create_study(recipes, families=["shift-vs-blur", "noise-vs-blur"], seed=4), recipes


def _open(app, code):
    app.query_params["study"] = code
    at = ok(app.run())
    return ok(at.switch_page(PAGE).run())


def _answer_all(at, choices, recipes, code, *, start=0):
    """Answer triplets ``start``… with ``choices``, checking each shown triplet is the recipe's pixels."""
    for i, choice in list(enumerate(choices))[start:]:
        shown = at.session_state["study_shown"]
        assert shown[:2] == (code, i) and shown[3] == T.render(recipes[i]).digest()
        assert any(f"Triplet {i + 1} of 5" in c.value for c in at.caption)
        ok(at.button(key=f"study_choice_{choice}").click().run())
    return at


def _mse_score(recipes, judgements):
    """The class's MSE agreement, recomputed here from the recipes and the answers."""
    trip = [T.render(r) for r in recipes]
    fr = scoring.judge_fractions([t for _, t, _ in judgements], [c for _, _, c in judgements])
    idx = sorted(fr)
    d0 = [metrics.mse(trip[i].ref, trip[i].p0) for i in idx]
    d1 = [metrics.mse(trip[i].ref, trip[i].p1) for i in idx]
    return scoring.two_afc(d0, d1, [fr[i][0] for i in idx])


def test_two_students_answer_one_study_and_see_pooled_results(app, study):
    from streamlit.testing.v1 import AppTest

    store, st_, recipes = study
    a_choices = [1, 0, 2, 1, 1]
    at = _open(app, st_.code)
    assert any(f"Study {st_.code}" in s.value for s in at.subheader)
    ok(at.button(key=f"study_choice_{a_choices[0]}").click().run())
    # the reveal after the first answer: the metrics' values for that triplet
    reveal = frame(at, "agrees with you")
    t0 = T.render(recipes[0])
    mse_row = row(reveal, "metric", "MSE")
    assert mse_row["copy 1"] == pytest.approx(metrics.mse(t0.ref, t0.p0), rel=1e-12)
    assert mse_row["copy 2"] == pytest.approx(metrics.mse(t0.ref, t0.p1), rel=1e-12)
    assert mse_row["agrees with you"] == ("yes" if (mse_row["copy 1"] > mse_row["copy 2"]) == (a_choices[0] == 1) else "no")
    assert {"LPIPS · AlexNet", "LPIPS · VGG16 (baseline)", "ST-LPIPS · AlexNet", "DISTS · VGG16"} <= set(reveal["metric"])
    _answer_all(at, a_choices, recipes, st_.code, start=1)
    assert any("answered all 5" in s.value for s in at.success)
    res = frame(at, "class")
    a_session = at.session_state["study_session"]
    judged = [(j.session, j.triplet, j.choice) for j in store.judgements(st_)]
    assert judged == [(a_session, i, c) for i, c in enumerate(a_choices)]
    assert row(res, "metric", "MSE")["class"] == pytest.approx(_mse_score(recipes, judged), abs=1e-12)
    assert row(res, "metric", "MSE")["you"] == row(res, "metric", "MSE")["class"]
    assert any("Class: 1 judge," in c.value for c in at.caption)

    # a second student, another session, the same code: the same triplets, then the pooled results
    other = AppTest.from_file(str(APP), default_timeout=180)
    b = _open(other, st_.code.lower())
    assert b.session_state["study_session"] != a_session
    b_choices = [0, 0, 1, 1, 2]
    _answer_all(b, b_choices, recipes, st_.code)
    judged = [(j.session, j.triplet, j.choice) for j in store.judgements(st_)]
    assert len(judged) == 10 and len({s for s, _, _ in judged}) == 2
    res = frame(b, "class")
    assert row(res, "metric", "MSE")["class"] == pytest.approx(_mse_score(recipes, judged), abs=1e-12)
    mine = [(s, t, c) for s, t, c in judged if s == b.session_state["study_session"]]
    assert row(res, "metric", "MSE")["you"] == pytest.approx(_mse_score(recipes, mine), abs=1e-12)
    fr = scoring.judge_fractions([t for _, t, _ in judged], [c for _, _, c in judged])
    assert row(res, "metric", "Human ceiling")["class"] == pytest.approx(
        scoring.human_ceiling([fr[i][0] for i in sorted(fr)]), abs=1e-12)
    assert any("Class: 2 judges, 10 judgements" in c.value for c in b.caption)
    assert {"LPIPS · AlexNet", "LPIPS · AlexNet (baseline)", "LPIPS · VGG16", "ST-LPIPS · VGG16",
            "DISTS · VGG16", "PSNR", "SSIM"} <= set(res["metric"])
    # the first student, on a rerun, sees the pooled class too
    ok(at.run())
    assert any("Class: 2 judges, 10 judgements" in c.value for c in at.caption)


def test_a_lecturer_creates_a_study_and_an_unknown_code_says_so(app, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    at = ok(app.run())
    ok(at.switch_page(PAGE).run())
    at.number_input(key="study_n").set_value(3)
    at.number_input(key="study_seed").set_value(12)
    at.multiselect(key="study_families").set_value(["blur", "jpeg-vs-noise"])
    at.toggle(key="study_reveal_each").set_value(False)
    ok(at.button(key="study_create").click().run())
    code = at.query_params["study"]
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    made = store.study(code)
    assert (made.n_triplets, made.seed, made.reveal, made.families) == (3, 12, "end", ("blur", "jpeg-vs-noise"))
    want = [r.to_json() for r in T.make_recipes(3, families=["blur", "jpeg-vs-noise"], seed=12)]
    assert [r.recipe for r in store.triplets(made)] == want
    assert at.session_state["study_shown"][:2] == (code, 0)
    ok(at.button(key="study_choice_1").click().run())
    assert not [d for d in at.dataframe if "agrees with you" in d.value.columns]  # reveal only at the end
    ok(at.button(key="study_leave").click().run())
    at.query_params["study"] = "NOSUCH"
    ok(at.run())
    assert any("No study has the code NOSUCH" in e.value for e in at.error)
