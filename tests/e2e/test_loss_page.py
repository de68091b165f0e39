"""LPIPS as a loss in Chromium at 1024 × 768 with the sidebar open (issue 35, item 5).

A short blur experiment (every loss 4 steps) is run through the page's own controls; then:
the page states the equal budget; every image is shown at least 192 px wide at its natural size
(whole-pixel enlargement, so the browser does not resample the blur away); and no chart title
runs past its chart (the titles were cut at this width when two charts shared a row).
"""

from __future__ import annotations

from .driver import AppPage

#: Each shown image (in the main area): natural and rendered width, and its chart-free box.
IMAGES_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stImage'] img")].map(
  i => ({natural: i.naturalWidth, shown: Math.round(i.getBoundingClientRect().width), complete: i.complete}))"""
#: Each Plotly chart's title: its box and its chart's box (left, right).
TITLES_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(p => {
  const t = p.querySelector(".gtitle"); const c = p.getBoundingClientRect();
  const b = t ? t.getBoundingClientRect() : null;
  return {title: t ? t.textContent : null, left: b && b.left, right: b && b.right, chart_left: c.left,
          chart_right: c.right}; })"""


def test_blur_experiment_at_1024_by_768_equal_budget_large_images_whole_titles(server, browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        ap = AppPage(context.new_page(), server)
        ap.open("lpips_as_a_loss")
        sidebar = ap.sidebar().bounding_box()
        assert sidebar and sidebar["width"] > 200, f"the sidebar is not open: {sidebar}"
        main = ap.page.get_by_test_id("stMain")
        settings = main.get_by_test_id("stExpander").first
        settings.locator("summary").click()
        steps = settings.get_by_role("spinbutton", name="Steps per loss")
        steps.wait_for()
        steps.fill("4")
        steps.press("Enter")
        # the page's own line says the server has the new count (ap.rerun would miss a rerun too
        # quick for the browser to draw its running state)
        ap.wait_until(lambda: "4 Adam steps for every loss" in ap.main_text(), "the page to ask for 4 steps")
        ap.settle()
        ap.rerun(lambda: main.get_by_role("button", name="Run").first.click())
        ap.wait_until(lambda: "Equal budgets:" in ap.main_text(), "the result and its budget line")
        ap.wait_until(lambda: (lambda imgs: len(imgs) >= 8 and all(i["complete"] for i in imgs))(
            ap.page.evaluate(IMAGES_JS)), "the eight images, loaded")
        ap.page.wait_for_timeout(800)  # the charts' final size
        ap.screenshot("lpips-as-a-loss-1024x768")
        assert "every loss took the same 4 steps" in ap.main_text()
        images = ap.page.evaluate(IMAGES_JS)[:8]  # reference, start, mean, MSE and the four learned losses
        assert all(i["shown"] >= 192 and i["shown"] == i["natural"] for i in images), images
        titles = ap.page.evaluate(TITLES_JS)
        assert len(titles) == 2 and all(t["title"] for t in titles), titles
        cut = [t for t in titles if t["left"] < t["chart_left"] or t["right"] > t["chart_right"]]
        assert not cut, f"chart titles run past their charts: {cut}"
        ap.assert_alive()
    finally:
        context.close()
    server.assert_healthy()
