"""Nothing cut at a laptop's width with the sidebar open, and nothing fetched that is gone (issue 35).

At 1024 × 768 and 1280 × 900, each with the sidebar open, the Debug a score summary, the Distortion
lab's headline and metrics table and Inside a layer's charts fit their column: ``FIT_JS`` (driver)
finds no element wider than the main column, no table cell overflowing, no data-grid column whose
text reaches its border (read back from the grid's canvas), no metric cut by its ellipsis and no
chart text outside its chart. The numbers themselves are checked too: the Debug summary shows
each check's change, the lab's headline MSE its significant digits.

Replacing Debug's test upload (several times, quickly) logs no failed request, and the pair's
images travel in the page (PNG data URLs), so no run can leave the browser asking for a media file
a later run removed. A new session on the default page loads no Plotly: its answer is drawn
without the 4.7 MB bundle that kept the page busy after the verdict.
"""

from __future__ import annotations

import re

import pytest

from . import expected
from .driver import FIT_JS, PAGE_DONE_JS, AppPage

SIZES = [(1024, 768), (1280, 900)]


def _open(browser, server, path: str, size: tuple[int, int]) -> AppPage:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    ap = AppPage(context.new_page(), server)
    ap.open(path)
    assert ap.sidebar().bounding_box()["width"] > 200, "the sidebar is not open"
    return ap


def _done(ap: AppPage) -> None:
    """The page done (every element drawn), then scrolled through so lazily drawn parts are drawn."""
    ap.page.wait_for_function(PAGE_DONE_JS, polling=100)
    ap.page.evaluate("""async () => { const m = document.querySelector("[data-testid='stMain']");
      for (let y = 0; y <= m.scrollHeight; y += 400) { m.scrollTo(0, y); await new Promise(r => setTimeout(r, 60)); }
      m.scrollTo(0, 0); }""")
    ap.page.wait_for_function(PAGE_DONE_JS, polling=100)


def _fits(ap: AppPage, what: str) -> None:
    problems = ap.page.evaluate(FIT_JS)
    shot = ap.screenshot(what)
    assert problems == [], f"{what}: cut or overflowing ({shot}):\n" + "\n".join(problems)


def _debug_pair() -> tuple[bytes, bytes]:
    """An RGBA PNG reference and a smaller, shifted JPEG test (every check has something to say,
    the size table has all its rows)."""
    from test_diagnostics import debug_pair  # tests/ is on sys.path

    return debug_pair()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_debug_summary_fits_and_shows_every_change(server, browser, size):
    ap = _open(browser, server, "debug_a_score", size)
    try:
        ref, test = _debug_pair()
        inputs = ap.page.get_by_test_id("stMain").locator("input[type=file]")
        for i, (name, mime, data) in enumerate((("ref.png", "image/png", ref), ("test.jpg", "image/jpeg", test))):
            ap.rerun(lambda: inputs.nth(i).set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}]))
        ap.wait_until(lambda: ap.caption_with("Change: the score"), "the finished summary")
        _done(ap)
        _fits(ap, f"debug-summary-{size[0]}")
        rows = ap.page.evaluate("""() => { const t = document.querySelector("[data-testid='stTable'] table");
          return [...t.querySelectorAll("tr")].map(r => [...r.children].map(c => c.innerText.trim())); }""")
        assert rows[0] == ["check", "status", "what if", "LPIPS as is", "LPIPS what if", "change"], rows[0]
        body = {r[0]: r[1:] for r in rows[1:]}
        assert body["Alpha channel"][0] == "warning" and body["Alpha channel"][1] in ("on black", "alpha dropped")
        number = re.compile(r"^([+-]\d\.\d{4}|0)$")
        moved = {name for name, r in body.items() if r[4] != "—"}
        assert moved == {"Alpha channel", "Size", "JPEG blockiness", "Misalignment"}, body
        assert all(number.match(body[name][4]) for name in moved), body
        assert all(float(r[3]) - float(r[2]) == pytest.approx(float(r[4]), abs=1.5e-4)
                   for r in body.values() if r[4] != "—")
        assert "-0.0 px" not in ap.main_text() and "+0.0 px" not in ap.main_text()
        assert "of 256 red levels" in ap.main_text()
        ap.assert_alive()
    finally:
        ap.page.context.close()
    server.assert_healthy()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_lab_headline_and_table_fit(server, browser, size):
    from lpips_core import metrics

    ap = _open(browser, server, "distortion_lab", size)
    try:
        ap.wait_until(lambda: ap.number("LPIPS · AlexNet"), "the lab's table")
        _done(ap)
        _fits(ap, f"lab-{size[0]}")
        headline = ap.page.evaluate("""() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stMetric']")]
          .map(m => [m.querySelector("[data-testid='stMetricLabel']").innerText.trim(),
                     m.querySelector("[data-testid='stMetricValue']").innerText.trim()])""")
        shown = dict(headline)
        ref = expected.sample_reference()
        mse = metrics.mse(ref, expected.lab_distorted(ref))
        assert shown["MSE"] == f"{mse:.2g}" and float(shown["MSE"]) > 0, shown  # 0.00058, never 0.00
        ap.assert_alive()
    finally:
        ap.page.context.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inside_a_layer_charts_and_tables_fit(server, browser, size):
    ap = _open(browser, server, "inside_a_layer", size)
    try:
        _done(ap)
        _fits(ap, f"inside-a-layer-{size[0]}")
        text = ap.main_text()
        assert "AlexNet (AlexNet" not in text and "Model: LPIPS · AlexNet, v0.1, lin (sidebar)" in text
        assert "None" not in ap.table("mean of all nine = d_l").get("mean of all nine = d_l", [])
        ap.assert_alive()
    finally:
        ap.page.context.close()


def test_replacing_debugs_test_upload_fetches_nothing_that_is_gone(app_page, server):
    """The console showed ``404 /media/<id>.jpg`` ("Image source error") after a replaced upload:
    Streamlit removes a media file when a later run no longer draws it, and the browser still
    mounted an element of a superseded run. The pair's images are now data URLs."""
    from lpips_explorer import synth
    from lpips_explorer.distortions import gaussian_blur, shift

    ap = app_page
    failed: list[str] = []
    ap.page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 and "/media/" in r.url
               else None)
    ap.page.on("console", lambda m: failed.append(m.text) if "Image source error" in m.text else None)
    ap.open("debug_a_score")
    ref = synth.texture_patch(4, size=160)
    inputs = ap.page.get_by_test_id("stMain").locator("input[type=file]")
    ap.rerun(lambda: inputs.nth(0).set_input_files(files=[{"name": "ref.png", "mimeType": "image/png",
                                                             "buffer": expected.png_bytes(ref)}]))
    tests = [expected.png_bytes(gaussian_blur(shift(ref, dx, 1.0), 0.8)) for dx in (1.0, 2.0, 3.0, 4.0)]
    ap.rerun(lambda: inputs.nth(1).set_input_files(files=[{"name": "t0.png", "mimeType": "image/png",
                                                             "buffer": tests[0]}]))
    for i, data in enumerate(tests[1:], 1):  # replaced while the previous pair is still being scored
        inputs.nth(1).set_input_files(files=[{"name": f"t{i}.png", "mimeType": "image/png", "buffer": data}])
        ap.page.wait_for_timeout(400)
    ap.wait_until(lambda: "t3.png" in ap.main_text() and ap.caption_with("Change: the score"), "the last pair")
    ap.settle(quiet_ms=1500)
    sources = ap.page.evaluate("""() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stImage'] img")]
      .map(i => i.src.slice(0, 22))""")
    assert sources == ["data:image/png;base64,"] * 2, sources
    assert failed == [], failed
    ap.assert_alive()
    server.assert_healthy()


def test_a_new_session_on_the_default_page_loads_no_plotly(browser, server):
    """The answer's chart is HTML: a first-time visitor's browser does not fetch (and spend seconds
    evaluating) Plotly's bundle before the page is done."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        ap = AppPage(context.new_page(), server)
        scripts: list[str] = []
        ap.page.on("request", lambda r: scripts.append(r.url.rsplit("/", 1)[-1]) if r.url.endswith(".js") else None)
        ap.open("")
        ap.page.wait_for_function(PAGE_DONE_JS, polling=100)
        assert ap.page.locator(".st-key-svb_ratio [data-ratio]").count() >= 4
        assert not [s for s in scripts if s.startswith("PlotlyChart")], scripts
        ap.assert_alive()
    finally:
        context.close()
