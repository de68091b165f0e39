"""Chromium: "LPIPS space" on the demo set in a 1024 × 768 window with the sidebar open: the
diversity number equals the library's, the map draws all 36 images (points and thumbnails), the
strip shows the query's nearest images with the library's distances; clicking another query
changes the strip."""

from __future__ import annotations

import pytest

from lpips_core import LPIPS, space
from lpips_explorer.demo_dataset import make_demo

CHARTS_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart']")].map(c => ({
  points: c.querySelectorAll('.scatterlayer .trace .points path').length,
  images: c.querySelectorAll('.layer-above image, .imagelayer image, image').length,
  titles: [...c.querySelectorAll('.annotation-text')].map(a => a.textContent),
  box: (r => [r.top, r.bottom, r.left, r.right])(c.getBoundingClientRect())}))"""
METRICS_JS = """() => Object.fromEntries([...document.querySelectorAll("[data-testid='stMetric']")].map(m => [
  m.querySelector("[data-testid='stMetricLabel']").innerText.trim(),
  m.querySelector("[data-testid='stMetricValue']").innerText.trim()]))"""
TRUNCATED_JS = """() => [...document.querySelectorAll("[data-testid='stMetricValue'] div, [data-testid='stMetricLabel'] p")]
  .map(e => e.scrollWidth > e.clientWidth + 1 ? e.innerText : null)"""
SIDEBAR_JS = """() => (r => [r.left, r.right])(document.querySelector("[data-testid='stSidebar']").getBoundingClientRect())"""


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    make_demo(root)
    emb = space.embed(LPIPS("alex", device="cpu"), root)
    d = space.pairwise_distances(emb)
    return emb.names, space.jackknife_interval(d), space.nearest(emb, emb, 5)


def test_map_number_and_neighbours_of_the_demo_set(server, browser, expected):
    from .driver import OUT, AppPage

    names, stats, nn = expected
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        ap = AppPage(context.new_page(), server)
        ap.open("lpips_space")
        ap.wait_until(lambda: ap.title() == "LPIPS space", "the LPIPS space page")
        assert ap.finished >= 1, "the driver did not read the server's script-finished message (ap.rerun relies on it)"
        # both numbers: the page draws them one after the other, and a busy browser may be read between
        both = {"Diversity (mean LPIPS)", "95 % interval"}
        metrics = ap.wait_until(lambda: (lambda m: m if both <= set(m) else None)(ap.page.evaluate(METRICS_JS)),
                                "the diversity number and its interval")
        assert metrics["Diversity (mean LPIPS)"] == f"{stats['mean']:.4f}"
        lo, hi = stats["ci95"]
        assert metrics["95 % interval"] == f"{lo:.4f}–{hi:.4f}"
        assert ap.caption_with("Over all 630 pairs of 36 images")
        charts = ap.wait_until(lambda: (lambda c: c if len(c) >= 2 and c[0]["points"] >= 36 and c[1]["titles"]
                                        else None)(ap.page.evaluate(CHARTS_JS)), "the map and the strip drawn")
        assert charts[0]["points"] == 36 + 1  # every image, and the ring around the query
        assert charts[0]["images"] >= 36  # the thumbnails at their points
        assert charts[1]["titles"] == ["query"] + [f"{r} · {v:.4f}" for r, v in enumerate(nn.distances[0], 1)]
        assert ap.caption_with(" · ".join(f"{r}. {names[j]} ({v:.4f})"
                                          for r, (j, v) in enumerate(zip(nn.indices[0], nn.distances[0]), 1)))
        left, right = ap.page.evaluate(SIDEBAR_JS)
        assert right - left > 200, "the sidebar is not open"
        ap.page.wait_for_timeout(500)
        ap.page.screenshot(path=str(OUT / "lpips-space-1024x768.png"))  # what the window shows first
        for i, name in ((0, "map"), (1, "strip"), (2, "pairs")):  # the main area scrolls: one shot per part
            ap.page.get_by_test_id("stPlotlyChart").nth(i).scroll_into_view_if_needed()
            ap.page.wait_for_timeout(300)
            ap.page.screenshot(path=str(OUT / f"lpips-space-1024x768-{name}.png"))
        assert not [t for t in ap.page.evaluate(TRUNCATED_JS) if t], "a metric is cut off"

        # another query from the selectbox: the strip follows
        q = names.index("reference/chelsea-0.png")
        box = ap.page.get_by_test_id("stMain").get_by_test_id("stSelectbox").filter(has_text="Query")
        box.click()
        ap.page.keyboard.type("reference/chelsea-0.png")
        ap.rerun(lambda: ap.page.keyboard.press("Enter"))
        want = " · ".join(f"{r}. {names[j]} ({v:.4f})" for r, (j, v) in enumerate(zip(nn.indices[q], nn.distances[q]), 1))
        ap.wait_until(lambda: ap.caption_with(want), "the strip of the new query")
        ap.assert_alive()
    finally:
        context.close()
    server.assert_healthy()
