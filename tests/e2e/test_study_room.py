"""Chromium on the real server: the class study in a real room (issue 41).

- **One tap is one answer**: on a phone (touch emulation) a double tap 50, 150 or 400 ms apart, a
  key held down with auto-repeat for a second, and a click in a stale second tab each store
  exactly one answer, for the triplet that was on screen (read back from the study database);
- **every phone sees the buttons**: at 360×640, 390×664, 393×727, 390×844 and 1024×768 the three
  patches and the three answer buttons are inside the window without scrolling, on a page that is
  nothing but the study (no sidebar, no page title);
- **a student stays one judge**: the back button, another page and back, and the bare link opened
  again in the same browser continue the same judge at the same triplet; a browser that keeps no
  cookie is counted apart in the lecturer's view ("joined twice?");
- **what each metric said and the class result fit a 390 px phone** (no table or chart text cut);
- **the key never reaches the projector**: a study created on the page shows the lecturer link on
  its own step; after "I have kept it" the projector view's text and address hold no key, also
  after a reload; the kept link opens the lecturer view again (creation takes well under 30 s).

The server is ``test_study.py``'s (its own ``streamlit run app.py`` on a temporary database).
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from lpips_explorer.study import access

from .driver import FIT_JS, OUT, AppPage, launch_options
from .test_study import _new_study, study_server  # noqa: F401  (the module's server fixture)

PHONE = {"is_mobile": True, "has_touch": True, "device_scale_factor": 3}
SIZES = [(360, 640), (390, 664), (393, 727), (390, 844), (1024, 768)]
ARMED_JS = "() => !!document.querySelector(\".st-key-study_answers[data-lx-answers='armed']\")"
STATE_JS = "() => (document.querySelector('.st-key-study_answers') || {dataset: {}}).dataset.lxAnswers || null"
SHOWN_JS = "() => { const e = document.querySelector('.lx-tri[data-triplet]'); return e ? +e.dataset.triplet : null; }"
#: The patches' and the answer buttons' boxes, and whether the page scrolls at all.
BOXES_JS = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return {x: r.left, y: r.top, right: r.right, bottom: r.bottom,
                                                                   w: r.width, h: r.height}; };
  const patches = [...document.querySelectorAll(".lx-tri img[data-patch]")].map(i => ({...box(i),
      patch: i.dataset.patch, rendering: getComputedStyle(i).imageRendering, natural: i.naturalWidth}));
  const buttons = [...document.querySelectorAll(".st-key-study_answers button")].map(box).filter(b => b.w > 0);
  const main = document.querySelector("[data-testid='stMain']");
  return {patches, buttons, scrolled: main ? main.scrollTop : 0};
}"""


@pytest.fixture(scope="module")
def room(study_server):
    """One 8-triplet study for the module (each test's student is a new judge on it)."""
    server, store = study_server
    return server, store, _new_study(store, 8, seed=21, reveal="end")


def _student(browser, server, path: str, w: int, h: int) -> AppPage:
    ctx = browser.new_context(viewport={"width": w, "height": h}, **(PHONE if w < 600 else {}))
    ap = AppPage(ctx.new_page(), server)
    ap.open(path, check_frame=False)
    _armed(ap)
    return ap


def _armed(ap: AppPage) -> None:
    ap.page.wait_for_function(ARMED_JS, timeout=ap.timeout * 1000, polling=50)


def _token(ap: AppPage) -> str:
    return parse_qs(urlsplit(ap.page.url).query)["p"][0]


def _shown(ap: AppPage) -> int | None:
    return ap.page.evaluate(SHOWN_JS)


def _next_shown(ap: AppPage, i: int) -> None:
    """Wait until triplet ``i + 1`` is on screen, then long enough for a second answer to have landed."""
    ap.wait_until(lambda: _shown(ap) == i + 1, f"triplet {i + 2} on screen")
    ap.page.wait_for_timeout(1500)
    ap.settle()


def _center(ap: AppPage, name: str) -> tuple[float, float]:
    b = ap.page.get_by_role("button", name=name).bounding_box()
    return b["x"] + b["width"] / 2, b["y"] + b["height"] / 2


@pytest.mark.parametrize("w,h", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_window_sees_the_triplet_and_the_buttons_without_scrolling(room, browser, w, h):
    server, store, study = room
    ap = _student(browser, server, f"?study={study.code}", w, h)
    try:
        ap.wait_until(lambda: all(p["natural"] for p in ap.page.evaluate(BOXES_JS)["patches"]), "loaded patches")
        ap.page.wait_for_timeout(300)
        got = ap.page.evaluate(BOXES_JS)
        ap.page.screenshot(path=str(OUT / f"study-room-{w}x{h}.png"))
        assert not ap.sidebar().count() and ap.title() is None, "a student's page is the study alone"
        assert len(got["patches"]) == 3 and len(got["buttons"]) == 3 and got["scrolled"] == 0, got
        for b in got["patches"] + got["buttons"]:
            assert b["x"] >= 0 and b["y"] >= 0 and b["right"] <= w and b["bottom"] <= h, (b, w, h)
        for p in got["patches"]:
            assert p["w"] >= 150 and abs(p["w"] - p["h"]) < 1 and p["rendering"] == "pixelated", p
        first, ref, second = got["patches"]
        if w < 600:  # a phone: the reference on top, the copies side by side below it
            assert ref["bottom"] <= min(first["y"], second["y"]) and first["right"] <= second["x"]
        else:
            assert first["right"] <= ref["x"] and ref["right"] <= second["x"] and abs(first["y"] - ref["y"]) < 1
        assert max(p["bottom"] for p in got["patches"]) <= min(b["y"] for b in got["buttons"])
        ap.assert_alive()
    finally:
        ap.page.context.close()


@pytest.mark.parametrize("gap_ms", [50, 150, 400])
def test_a_double_tap_stores_one_answer(room, browser, gap_ms):
    """Two taps ``gap_ms`` apart on "2 is closer": one answer, for the triplet on screen; between
    the taps the buttons take nothing (locked until the page draws again, then a moment's wait)."""
    server, store, study = room
    ap = _student(browser, server, f"?study={study.code}", 390, 664)
    try:
        pid, i = access.participant_id(_token(ap)), _shown(ap)
        x, y = _center(ap, "2 is closer")
        ap.page.touchscreen.tap(x, y)
        right_after = ap.page.evaluate(STATE_JS)
        ap.page.wait_for_timeout(gap_ms)
        at_second = ap.page.evaluate(STATE_JS)
        ap.page.touchscreen.tap(x, y)
        _next_shown(ap, i)
        assert store.answered(study, pid) == {i: 1}, (gap_ms, store.answered(study, pid))
        assert right_after in ("locked", "waiting") and at_second in ("locked", "waiting"), (right_after, at_second)
        ap.assert_alive()
    finally:
        ap.page.context.close()


def test_a_held_key_stores_one_answer(room, browser):
    """The key "1" held down for a second (the keyboard's auto-repeat: keydown events with
    ``repeat``): one answer, for the triplet on screen."""
    server, store, study = room
    ap = _student(browser, server, f"?study={study.code}", 1024, 768)
    try:
        pid, i = access.participant_id(_token(ap)), _shown(ap)
        ap.page.evaluate("() => document.activeElement && document.activeElement.blur()")
        ap.page.keyboard.down("1")
        t0, repeats = time.monotonic(), 0
        while time.monotonic() - t0 < 1.0:
            ap.page.wait_for_timeout(33)
            ap.page.keyboard.down("1")  # Playwright sends it with repeat=true while the key is down
            repeats += 1
        ap.page.keyboard.up("1")
        _next_shown(ap, i)
        assert repeats >= 20 and store.answered(study, pid) == {i: 0}, (repeats, store.answered(study, pid))
        ap.assert_alive()
    finally:
        ap.page.context.close()


def test_a_stale_tab_changes_nothing(room, browser):
    """Two tabs on one judge: the first answers; the second, still showing that triplet, is told it
    was answered already and moves on; the database keeps the first answer alone."""
    server, store, study = room
    a = _student(browser, server, f"?study={study.code}", 390, 664)
    try:
        token = _token(a)
        b = AppPage(a.page.context.new_page(), server)
        b.open(f"judge_it_yourself?study={study.code}&p={token}", check_frame=False)
        _armed(b)
        pid, i = access.participant_id(token), _shown(a)
        assert _shown(b) == i
        a.page.get_by_role("button", name="1 is closer").tap()
        _next_shown(a, i)
        b.page.get_by_role("button", name="2 is closer").tap()
        _next_shown(b, i)
        assert store.answered(study, pid) == {i: 0}
        assert f"Triplet {i + 1} was answered already" in b.main_text()
        b.page.screenshot(path=str(OUT / "study-room-stale-tab.png"))
        for ap in (a, b):
            ap.assert_alive()
    finally:
        a.page.context.close()


def test_back_another_page_and_the_bare_link_keep_the_judge(room, browser):
    server, store, study = room
    ap = _student(browser, server, f"?study={study.code}", 390, 664)
    try:
        token = _token(ap)
        pid, i = access.participant_id(token), _shown(ap)
        ap.page.get_by_role("button", name="2 is closer").tap()
        _next_shown(ap, i)
        ap.page.go_back()  # within the study's own history entries
        ap.page.wait_for_timeout(1500)
        ap.wait_until(lambda: _shown(ap) == i + 1, "the same triplet after the back button")
        ap.open("conventions", check_frame=False)  # another page of the app, then back to the study
        for _ in range(6):
            ap.page.go_back()
            ap.page.wait_for_timeout(1500)
            if "study=" in ap.page.url:
                break
        ap.page.wait_for_function("() => !!document.querySelector('.lx-tri[data-triplet]')", timeout=120_000)
        ap.wait_until(lambda: _shown(ap) == i + 1, "the same triplet after another page and back")
        assert parse_qs(urlsplit(ap.page.url).query).get("p", [token]) == [token]
        again = AppPage(ap.page.context.new_page(), server)  # the bare link again, in the same browser
        again.open(f"?study={study.code}", check_frame=False)
        _armed(again)
        assert _token(again) == token and _shown(again) == i + 1
        assert store.answered(study, pid) == {i: 1}
    finally:
        ap.page.context.close()


def test_what_each_metric_said_and_the_class_fit_a_phone_and_a_lost_cookie_is_counted(study_server, browser,
                                                                                       tmp_path):
    """Reveal after every answer and the released class chart at 390 px: nothing cut (driver.FIT_JS:
    tables, chart texts inside their chart). A browser that keeps no cookie (Chromium with cookies
    blocked in its settings) is counted apart in the lecturer's view."""
    server, store = study_server
    study = _new_study(store, 2, seed=22, reveal="each")
    profile = tmp_path / "profile"
    (profile / "Default").mkdir(parents=True)
    (profile / "Default" / "Preferences").write_text(
        '{"profile": {"default_content_setting_values": {"cookies": 2}}}')  # Chromium: block every cookie
    options = {k: v for k, v in launch_options().items() if k != "headless"}
    ctx = browser.browser_type.launch_persistent_context(str(profile), headless=True,
                                                         viewport={"width": 390, "height": 664}, **PHONE, **options)
    ap = AppPage(ctx.new_page(), server)
    try:
        ap.open(f"?study={study.code}", check_frame=False)
        _armed(ap)
        assert ctx.cookies() == []
        ap.page.get_by_role("button", name="1 is closer").tap()
        _next_shown(ap, 0)
        assert "you said 1 is closer" in ap.main_text()
        assert ap.page.evaluate(FIT_JS) == []
        _armed(ap)
        ap.page.get_by_role("button", name="2 is closer").tap()
        ap.wait_until(lambda: "answered all" in ap.main_text(), "the end of the study")
        store.release(study, study.lecturer_key)
        ap.page.wait_for_function("() => !!document.querySelector('[data-testid=stPlotlyChart] .main-svg')",
                                  timeout=120_000)
        ap.page.wait_for_timeout(1000)
        assert ap.page.evaluate(FIT_JS) == []
        chart = ap.page.locator("[data-testid='stPlotlyChart']")
        assert chart.bounding_box()["width"] <= 390
        chart.screenshot(path=str(OUT / "study-room-chart-390.png"))
        assert store.unkept(study) == 1
        lect = AppPage(browser.new_context(viewport={"width": 1024, "height": 768}).new_page(), server)
        try:
            lect.open(f"judge_it_yourself?study={study.code}&key={study.lecturer_key}", check_frame=False)
            lect.wait_until(lambda: "1 judge joined twice?" in lect.main_text(), "the judge counted apart")
        finally:
            lect.page.context.close()
    finally:
        ap.page.context.close()


def test_the_key_never_reaches_the_projector(study_server, browser):
    """Created on the page (1024×768, sidebar open): the lecturer link on its own step, then the
    projector view with no key in its text or its address; the kept link opens it again."""
    server, store = study_server
    lect = AppPage(browser.new_context(viewport={"width": 1024, "height": 768}).new_page(), server)
    try:
        lect.open("judge_it_yourself", check_frame=False)
        t0 = time.monotonic()
        lect.rerun(lambda: lect.page.get_by_role("button", name="Create the study").click())
        lect.wait_until(lambda: "keep your lecturer link" in lect.main_text(), "the keep-the-link step")
        took = time.monotonic() - t0
        assert took < 30, took
        link = lect.page.locator("[data-testid='stCode'] code").first.inner_text().replace("\n", "")
        key = re.search(r"key=([A-Za-z0-9_-]+)", link).group(1)
        code = re.search(r"study=([A-Z0-9]+)", link).group(1)
        assert key not in lect.page.url
        lect.rerun(lambda: lect.page.get_by_text("I have kept it").click())
        lect.page.wait_for_function("() => !!document.querySelector('img[data-qr]')", timeout=120_000)
        text = lect.page.evaluate("() => document.body.innerText")
        assert "lecturer view" in text and key not in text and key not in lect.page.url and "key=" not in lect.page.url
        bar = lect.sidebar().bounding_box()
        assert bar and bar["width"] > 200, "the lecturer's page keeps the app's sidebar"
        lect.page.screenshot(path=str(OUT / "study-room-projector-1024.png"))
        lect.page.reload(wait_until="domcontentloaded")  # F5 on the projector: the browser's session keeps the view
        lect.settle()
        lect.wait_until(lambda: "lecturer view" in lect.main_text(), "the lecturer view after a reload")
        assert key not in lect.page.url and key not in lect.page.evaluate("() => document.body.innerText")
        again = AppPage(browser.new_context(viewport={"width": 1024, "height": 768}).new_page(), server)
        try:
            again.open(f"judge_it_yourself?study={code}&key={key}", check_frame=False)
            again.wait_until(lambda: "lecturer view" in again.main_text(), "the kept link opens the lecturer view")
            assert key not in again.page.url and key not in again.page.evaluate("() => document.body.innerText")
        finally:
            again.page.context.close()
        made = store.study(code)
        assert made is not None and store.is_lecturer(made, key)
        server.assert_healthy()
    finally:
        lect.page.context.close()


def test_the_lecturer_fits_our_own_lpips_after_release(study_server, browser):
    """Issue 42 in the room: 20 simulated judges answer an 8-triplet study (seeded votes, 80 % for
    the second copy on odd triplets, 30 % on even ones), the lecturer releases the results and
    presses "Fit our own LPIPS" at 1024×768: the per-layer chart, the three cross-validated
    agreements with intervals and the human ceiling, and the weights' download are on the page."""
    import numpy as np

    server, store = study_server
    made = _new_study(store, 8, seed=42, reveal="end")
    study = store.study(made.code)
    rng = np.random.default_rng(0)
    for j in range(20):
        session = access.participant_id(access.new_token())
        for i in range(study.n_triplets):
            store.answer(study, session, i, int(rng.random() < (0.8 if i % 2 else 0.3)))
    store.release(study, made.lecturer_key, True)
    lect = AppPage(browser.new_context(viewport={"width": 1024, "height": 768}).new_page(), server)
    try:
        lect.open(f"judge_it_yourself?study={made.code}&key={made.lecturer_key}", check_frame=False)
        lect.wait_until(lambda: "lecturer view" in lect.main_text(), "the lecturer view")
        button = lect.page.get_by_role("button", name="Fit our own LPIPS")
        button.scroll_into_view_if_needed()
        t0 = time.monotonic()
        lect.rerun(lambda: button.click())
        lect.wait_until(lambda: "ours (cross-validated)" in lect.main_text(), "the fitted agreements", timeout=120)
        took = time.monotonic() - t0
        text = lect.main_text()
        for row in ("ours (cross-validated)", "published", "baseline (all weights 1)", "human ceiling"):
            assert row in text
        assert "8 triplets, 20 judges, 5-fold" in text and took < 30, took
        assert lect.page.locator(".js-plotly-plot .gtitle", has_text="Mean channel weight").count() == 1
        dl = lect.page.get_by_role("button", name="Our LPIPS weights (.pth)")
        assert dl.count() == 1
        dl.scroll_into_view_if_needed()
        lect.page.screenshot(path=str(OUT / "study-fit-ours-1024.png"))
        with lect.page.expect_download() as got:
            dl.click()
        path = got.value.path()
        import torch

        weights = torch.load(path, map_location="cpu", weights_only=True)
        assert [tuple(v.shape) for v in weights.values()] == [(1, c, 1, 1) for c in (64, 192, 384, 256, 256)]
        server.assert_healthy()
    finally:
        lect.page.context.close()
