"""Chromium on the real server: the class study as a lecturer and students meet it.

- the three patches fit (measured boxes: inside the window, not overlapping; question and answers
  visible without scrolling) at 1024×768 and on a phone (390×844: the reference on top, the two
  copies side by side below); a student's page is nothing but the study (no sidebar, no title;
  the other sizes and the one-tap-one-answer checks are in ``test_study_room.py``);
- ``/?study=CODE`` lands on the study, the page puts the participant's token in the address, and a
  reload continues where the student was, as the same judge;
- two students answer with the keyboard; the lecturer's link shows the class live, releases the
  results, and both students then see the chart.

The server is a second ``streamlit run app.py`` of its own, started with ``LPIPS_EXPLORER_DATA`` set
to a temporary folder, so the study's database is a fresh SQLite file (never the developer's ``data/``).
"""

from __future__ import annotations

import os
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa

from lpips_core.spec import MetricSpec, standard_specs
from lpips_explorer.study import access, scoring
from lpips_explorer.study import prepare as P
from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T

from .driver import OUT, AppPage, start_server

KEYS = {0: "1", 1: "2", 2: "0"}  # stored choice → the key that gives it
#: The answer buttons take a press (ui.study_client's guard: not just pressed, not just drawn).
ARMED_JS = "() => !!document.querySelector(\".st-key-study_answers[data-lx-answers='armed']\")"
#: The three patches on the page: every image in the main area until the answer buttons (the
#: selector also finds the images of a page that draws them with st.image).
PATCHES_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] img")].slice(0, 3).map(i => {
  const r = i.getBoundingClientRect();
  return {x: r.left, y: r.top, right: r.right, bottom: r.bottom, w: r.width, h: r.height,
          rendering: getComputedStyle(i).imageRendering, natural: i.naturalWidth};
})"""


def _new_study(store, n: int, seed: int, reveal: str = "end"):
    recipes = T.make_recipes(n, families=["shift-vs-blur"], seed=seed)
    alex = MetricSpec("lpips", net="alex")
    variants = [s for s in standard_specs() if not s.learned] + [alex]
    done = P.prepare(recipes, variants, {alex: alex.build()})
    return store.create_study(recipes, families=["shift-vs-blur"], seed=seed, reveal=reveal,
                              digests=[d.digest for d in done], pngs=[d.pngs for d in done],
                              distances=[d.distances for d in done])


@pytest.fixture(scope="module")
def study_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study-data")
    store = S.StudyStore(sa.create_engine(S.sqlite_url(folder)))
    old = os.environ.get("LPIPS_EXPLORER_DATA")
    os.environ["LPIPS_EXPLORER_DATA"] = str(folder)
    try:
        srv = start_server(OUT / "server-study.log")
    finally:
        if old is None:
            del os.environ["LPIPS_EXPLORER_DATA"]
        else:
            os.environ["LPIPS_EXPLORER_DATA"] = old
    yield srv, store
    srv.stop()


#: The study is on the page: a triplet to answer, the end of the study, or the lecturer's view.
ON_STUDY_JS = """() => !!document.querySelector(".lx-tri[data-triplet]") || document.body.innerText.includes(
  "answered all") || document.body.innerText.includes("lecturer view")"""


def _tab(browser, server, path: str, viewport: dict, **context) -> AppPage:
    ctx = browser.new_context(viewport=viewport, **context)
    ap = AppPage(ctx.new_page(), server)
    ap.open(path, check_frame=False)
    ap.page.wait_for_function(ON_STUDY_JS, timeout=ap.timeout * 1000, polling=100)
    return ap


def _overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["right"] - 0.5 and b["x"] < a["right"] - 0.5 and a["y"] < b["bottom"] - 0.5 \
        and b["y"] < a["bottom"] - 0.5


def _patches(ap: AppPage) -> list[dict]:
    ap.wait_until(lambda: len(ap.page.evaluate(PATCHES_JS)) == 3
                  and all(p["natural"] > 0 for p in ap.page.evaluate(PATCHES_JS)), "three loaded patches")
    ap.page.wait_for_timeout(300)  # layout settled after the images' sizes are known
    return ap.page.evaluate(PATCHES_JS)


@pytest.mark.parametrize("size", ["1024x768", "phone 390x844"])
def test_the_three_patches_fit_the_window(study_server, browser, size):
    """Measured in the browser: each patch inside the window, no two overlapping, drawn nearest
    neighbour (pixelated), at least 150 px; at 1024×768 the three side by side with the question and
    the answer buttons above the fold; on a phone the reference on top and the two copies side by
    side below it. A student's page has no sidebar and no page title."""
    server, store = study_server
    study = _new_study(store, 3, seed=8)
    phone = size.startswith("phone")
    vw, vh = (390, 844) if phone else (1024, 768)
    ap = _tab(browser, server, f"judge_it_yourself?study={study.code}", {"width": vw, "height": vh},
              **({"is_mobile": True, "has_touch": True, "device_scale_factor": 3} if phone else {}))
    try:
        boxes = _patches(ap)
        assert not ap.sidebar().count() and ap.title() is None, "a student's page is the study alone"
        ap.page.screenshot(path=str(OUT / f"study-layout-{'phone' if phone else '1024'}.png"))
        for b in boxes:
            assert b["x"] >= 0 and b["right"] <= vw and b["y"] >= 0 and b["bottom"] <= vh, (b, vw, vh)
            assert b["w"] >= 150 and abs(b["w"] - b["h"]) < 1, b
            assert b["rendering"] == "pixelated", b
        for i in range(3):
            for j in range(i + 1, 3):
                assert not _overlap(boxes[i], boxes[j]), (boxes[i], boxes[j])
        first, ref, second = boxes  # in document order: copy 1, the reference, copy 2
        if phone:
            assert ref["bottom"] <= min(first["y"], second["y"]), "the reference is above the copies"
            assert abs(first["y"] - second["y"]) < 1 and first["right"] <= second["x"], "copies side by side"
        else:
            assert abs(first["y"] - ref["y"]) < 1 and abs(ref["y"] - second["y"]) < 1, "side by side"
            assert first["right"] <= ref["x"] and ref["right"] <= second["x"]
            question = ap.page.get_by_text("Which copy is closer to the reference?").bounding_box()
            assert question and question["y"] >= 0 and question["y"] + question["height"] <= boxes[0]["y"]
            for name in ("1 is closer", "Can't tell", "2 is closer"):
                button = ap.page.get_by_role("button", name=name).bounding_box()
                assert button and button["y"] + button["height"] <= vh, (name, button)
        ap.assert_alive()
    finally:
        ap.page.context.close()


def _press(ap: AppPage, key: str, tries: int = 3) -> None:
    """Press an answer's key and wait for the rerun it causes. A press that changed nothing at all
    within 20 s (the script never started: the key arrived before the button's shortcut was
    registered) is repeated; one that started a run is never repeated (it would answer the next triplet)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(tries):
        ap.settle()
        # the page's answer guard (ui.study_client) takes a press once the triplet has been on screen a moment
        ap.page.wait_for_function(ARMED_JS, timeout=ap.timeout * 1000, polling=50)
        ap.page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no widget has focus
        before, pressed = ap.runs(), ap.page.evaluate("() => performance.now()")
        ap.page.keyboard.press(key)
        try:
            ap.page.wait_for_function("([n, t]) => (window.__stRuns || 0) > n || window.__stChanged > t",
                                      arg=[before, pressed], timeout=20_000, polling=100)
            break
        except PlaywrightTimeout:
            if attempt + 1 == tries:
                raise
    ap.page.wait_for_function("n => (window.__stRuns || 0) > n", arg=before, timeout=ap.timeout * 1000, polling=100)
    ap.settle()


def _answer(ap: AppPage, choices, n: int, *, start: int = 0) -> None:
    """Answer triplets ``start``… with ``choices`` by key. The run ``_press`` waits for can be the
    page's own watch (a fragment that reruns every ``WATCH_S`` s) rather than the answer's: when the
    page still shows the same triplet 30 s later, the press was lost (on a loaded host) and is made
    again, as a student would tap again. That cannot answer the next triplet: the server takes an
    answer only for the participant's current triplet, and this page still shows the old one."""
    for i, choice in list(enumerate(choices))[start:]:
        shown = f"Triplet {i + 1} of {n}"
        ap.wait_until(lambda: shown in ap.main_text(), f"triplet {i + 1}")
        ap.page.get_by_role("button", name="2 is closer").wait_for(state="visible")
        for attempt in range(3):
            _press(ap, KEYS[choice])
            deadline = time.monotonic() + 30
            while shown in ap.main_text() and time.monotonic() < deadline:
                ap.page.wait_for_timeout(200)
            if shown not in ap.main_text():
                break
    ap.wait_until(lambda: (f"{len(choices)} answered" in ap.main_text() or "answered all" in ap.main_text()),
                  f"answer {len(choices)} recorded")


def test_a_root_link_opens_the_study_and_a_reload_keeps_the_judge(study_server, browser):
    server, store = study_server
    study = _new_study(store, 4, seed=9)
    ap = _tab(browser, server, f"?study={study.code}", {"width": 1280, "height": 900})
    try:
        url = urlsplit(ap.page.url)
        assert url.path.rstrip("/").endswith("judge_it_yourself")  # "/?study=" landed on the study
        token = parse_qs(url.query)["p"][0]
        assert access.valid_token(token) and parse_qs(url.query)["study"] == [study.code]
        _answer(ap, [1, 0], 4)
        ap.page.reload(wait_until="domcontentloaded")  # a new session on the same address
        ap.settle()
        ap.wait_until(lambda: "Triplet 3 of 4 · 2 answered" in ap.main_text(), "progress kept after a reload")
        assert parse_qs(urlsplit(ap.page.url).query)["p"] == [token]
        _answer(ap, [1, 0, 2, 2], 4, start=2)
        ap.wait_until(lambda: "answered all 4" in ap.main_text(), "finished")
        rows = store.judgements(study)
        assert [(j.session, j.triplet, j.choice) for j in rows] == [
            (access.participant_id(token), i, c) for i, c in enumerate([1, 0, 2, 2])]
        assert store.counts(study) == (1, 4)
        ap.assert_alive()
        server.assert_healthy()
    finally:
        ap.page.context.close()


def test_two_students_and_the_lecturer_live(study_server, browser):
    server, store = study_server
    study = _new_study(store, 3, seed=8)
    a = _tab(browser, server, f"?study={study.code}", {"width": 1024, "height": 768})
    b = _tab(browser, server, f"?study={study.code.lower()}", {"width": 390, "height": 844})
    lect = _tab(browser, server, f"judge_it_yourself?study={study.code}&key={study.lecturer_key}",
                {"width": 1024, "height": 768})
    try:
        assert "lecturer view" in lect.main_text()
        lect.wait_until(lambda: lect.page.locator("img[data-qr]").count() == 1, "the QR code of the student link")
        _answer(a, [1, 1, 0], 3)
        a.wait_until(lambda: "appear here when your lecturer" in a.main_text(), "A waits for the results")
        _answer(b, [0, 2, 0], 3)
        # the lecturer's view follows the class by itself (an st.fragment rerun every few seconds)
        lect.wait_until(lambda: "2 judges, 6 answers" in lect.main_text(), "the live class result", timeout=120)
        assert lect.page.locator("[data-testid='stPlotlyChart']").count() == 1
        lect.page.screenshot(path=str(OUT / "study-lecturer-1024.png"), full_page=True)
        lect.rerun(lambda: lect.page.get_by_text("Show the class results to students").click())
        assert store.study(study.code).released
        for ap in (a, b):  # their pages notice the release by themselves
            ap.wait_until(lambda: ap.page.locator("[data-testid='stPlotlyChart']").count() == 1,
                          "the class chart on a student's page", timeout=120)
            ap.assert_alive()
        a.page.screenshot(path=str(OUT / "study-student-results-1024.png"), full_page=True)
        by_session: dict[str, list[int]] = {}
        for j in store.judgements(study):
            by_session.setdefault(j.session, []).append(j.choice)
            assert j.response_ms is not None and j.response_ms >= 0
        assert sorted(by_session.values()) == sorted([[1, 1, 0], [0, 2, 0]])
        server.assert_healthy()
    finally:
        for ap in (a, b, lect):
            ap.page.context.close()
