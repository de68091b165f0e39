"""Chromium: two students join one study with ?study=CODE, answer with the keyboard, and both see the pooled results.

The server is a second ``streamlit run app.py`` of its own, started with ``LPIPS_EXPLORER_DATA`` set
to a temporary folder, so the study's database is a fresh SQLite file (never the developer's ``data/``).
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T

from .driver import OUT, AppPage, start_server

KEYS = {0: "1", 1: "2", 2: "0"}  # stored choice → the key that gives it


@pytest.fixture(scope="module")
def study_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study-data")
    store = S.StudyStore(sa.create_engine(S.sqlite_url(folder)))
    recipes = T.make_recipes(3, families=["shift-vs-blur"], seed=8)
    study = store.create_study(recipes, families=["shift-vs-blur"], seed=8, reveal="end")
    old = os.environ.get("LPIPS_EXPLORER_DATA")
    os.environ["LPIPS_EXPLORER_DATA"] = str(folder)
    try:
        srv = start_server(OUT / "server-study.log")
    finally:
        if old is None:
            del os.environ["LPIPS_EXPLORER_DATA"]
        else:
            os.environ["LPIPS_EXPLORER_DATA"] = old
    yield srv, store, study
    srv.stop()


def _student(browser, server, code) -> AppPage:
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    ap = AppPage(context.new_page(), server)
    ap.open(f"judge_it_yourself?study={code}", check_frame=False)
    ap.wait_until(lambda: ap.title() == "Judge it yourself", "the study page")
    return ap


def _answer(ap: AppPage, choices) -> None:
    for i, choice in enumerate(choices):
        ap.wait_until(lambda: f"Triplet {i + 1} of {len(choices)}" in ap.main_text(), f"triplet {i + 1}")
        ap.page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no widget has focus
        ap.rerun(lambda: ap.page.keyboard.press(KEYS[choice]))
        ap.wait_until(lambda: f"{i + 1} of {len(choices)} answered" in ap.main_text(), f"answer {i + 1} recorded")


def test_two_students_answer_with_the_keyboard_and_see_both(study_server, browser):
    server, store, study = study_server
    a = _student(browser, server, study.code)
    b = _student(browser, server, study.code.lower())
    try:
        _answer(a, [1, 1, 0])
        a.wait_until(lambda: a.caption_with("Class: 1 judge,"), "student A's results (one judge)", timeout=600)
        _answer(b, [0, 2, 0])
        b.wait_until(lambda: b.caption_with("Class: 2 judges, 6 judgements"), "student B's pooled results",
                     timeout=600)
        a.rerun(lambda: a.page.get_by_role("button", name="Refresh the class results").click())
        a.wait_until(lambda: a.caption_with("Class: 2 judges, 6 judgements"), "student A's pooled results")
        for ap in (a, b):
            assert ap.table("MSE") and ap.table("Human ceiling") and ap.table("LPIPS · AlexNet")
            ap.assert_alive()
        rows = store.judgements(study)
        by_session: dict[str, list[int]] = {}
        for j in rows:
            by_session.setdefault(j.session, []).append(j.choice)
            assert j.response_ms is not None and j.response_ms >= 0
        assert sorted(by_session.values()) == sorted([[1, 1, 0], [0, 2, 0]])
        server.assert_healthy()
    finally:
        a.screenshot("study-student-a")
        b.screenshot("study-student-b")
        a.page.context.close()
        b.page.context.close()
