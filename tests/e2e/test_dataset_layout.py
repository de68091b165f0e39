"""Chromium: "Score a dataset" on the built-in demo set in a 1024 × 768 window with the sidebar
open: the summary, diversity and explain tables fit the main area (no column cut off, nothing to
scroll sideways), each folder's diversity is the library's, the explain table's first row is the
configuration that made the reported number, and the worst pairs' map titles (and their colour
bars' metric label) are whole and numbered in reading order."""

from __future__ import annotations

import pytest

from lpips_core import space
from lpips_core.datasets import match_folders, parse_spec, score_pairs
from lpips_explorer.demo_dataset import make_demo

LPIPS = parse_spec("lpips-alex")

# The table inside a keyed container: its right edge, each header cell's right edge, and every
# element inside that would scroll sideways (scrollWidth beyond clientWidth).
FIT_JS = """(key) => {
  const c = document.querySelector(`.st-key-${key}`);
  const t = c && c.querySelector('table');
  if (!t) return null;
  const main = document.querySelector("[data-testid='stMain']").getBoundingClientRect();
  return {container: c.getBoundingClientRect().right, main: main.right, window: window.innerWidth,
          table: t.getBoundingClientRect().right,
          heads: [...t.querySelectorAll('thead th')].map(th => [th.innerText.trim(), th.getBoundingClientRect().right]),
          scrolls: [...c.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1)
                     .map(e => e.tagName + '.' + e.className),
          rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.querySelectorAll('th, td')].map(x => x.innerText.trim()))};
}"""
TITLES_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart']")]
  .map(c => { const t = c.querySelector('.gtitle'), cb = c.querySelector('.cbtitle text'); if (!t) return null;
    const b = c.getBoundingClientRect();
    const inside = e => (r => r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1)(e.getBoundingClientRect());
    return {text: t.textContent, inside: inside(t), bar: cb ? cb.textContent : null, bar_inside: cb ? inside(cb) : null}; })
  .filter(x => x)"""
SIDEBAR_JS = """() => (r => [r.left, r.right])(document.querySelector("[data-testid='stSidebar']").getBoundingClientRect())"""


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    demo = make_demo(tmp_path_factory.mktemp("demo"))
    runs = {label: score_pairs(match_folders(demo.reference, folder), ["mse", LPIPS.name], workers=0)
            for label, folder in demo.methods.items()}
    model = LPIPS.build("cpu")
    diversity = {label: space.diversity(space.embed(model, folder, spec=LPIPS))
                 for label, folder in {"reference": demo.reference, **demo.methods}.items()}
    return runs, diversity


def _fits(got: dict, what: str) -> None:
    assert got["container"] <= got["main"] + 1 and got["main"] <= got["window"], (what, got)
    assert got["table"] <= got["container"] + 1, (what, "the table is wider than its container", got)
    cut = [h for h, right in got["heads"] if right > got["container"] + 1]
    assert not cut, (what, "columns cut off", cut, got)
    assert not got["scrolls"], (what, "scrolls sideways", got["scrolls"])


def test_tables_fit_a_1024_by_768_window(server, browser, expected):
    from .driver import OUT, AppPage

    expected, diversity = expected
    blur = expected["A-blur"].summary["metrics"][LPIPS.name]["mean"]
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        ap = AppPage(context.new_page(), server)
        ap.open("score_a_dataset")
        ap.wait_until(lambda: ap.title() == "Score a dataset", "the dataset page")
        left, right = ap.page.evaluate(SIDEBAR_JS)
        assert right - left > 200, "the sidebar is not open"
        main = ap.page.get_by_test_id("stMain")
        ap.rerun(lambda: main.get_by_role("button", name="Score", exact=True).click())
        summary = ap.wait_until(lambda: ap.page.evaluate(FIT_JS, "ds_summary"), "the summary table")
        _fits(summary, "summary")
        assert [h for h, _ in summary["heads"]] == ["method", "metric", "n", "mean", "std", "95% CI low",
                                                    "95% CI high"]
        assert "LPIPS · AlexNet" in [r[1] for r in summary["rows"]]  # the metric's whole label

        # the worst pairs' maps: numbered worst first, titles whole inside their charts
        worst = sorted(((r[LPIPS.name], label, r["key"]) for label, res in expected.items() for r in res.rows),
                       key=lambda t: -t[0])[:10]
        want = [f"{i}. {label} · {key} · {v:.4f}" for i, (v, label, key) in enumerate(worst, 1)]
        titles = ap.wait_until(lambda: (lambda t: t if len(t) == 10 else None)(ap.page.evaluate(TITLES_JS)),
                               "the ten maps")
        assert [t["text"] for t in titles] == want
        assert all(t["inside"] for t in titles), titles
        assert {(t["bar"], t["bar_inside"]) for t in titles} == {("LPIPS · AlexNet term", True)}, titles
        ap.page.get_by_test_id("stPlotlyChart").nth(1).scroll_into_view_if_needed()
        ap.page.wait_for_timeout(400)
        ap.page.screenshot(path=str(OUT / "score-a-dataset-maps-1024x768.png"))

        # each folder's diversity, opened: the library's numbers, in a table that fits
        ap.rerun(lambda: main.get_by_text("Each folder's diversity").click())
        div = ap.wait_until(lambda: ap.page.evaluate(FIT_JS, "ds_diversity_table"), "the diversity table")
        _fits(div, "diversity")
        assert [h for h, _ in div["heads"]] == ["folder", "images", "diversity", "95% CI low", "95% CI high"]
        assert [r[0] for r in div["rows"]] == list(diversity)
        for r, want in zip(div["rows"], diversity.values()):
            assert r[1] == "12"
            assert [float(x) for x in r[2:5]] == pytest.approx([want["mean"], *want["ci95"]], rel=1e-3)

        # explain the blur's LPIPS · AlexNet mean, written "LPIPS (Alex)"
        written = main.get_by_label("Metric as the paper wrote it (optional)")
        # (these two widgets rerun the explain fragment alone, often too fast for the run counter
        # to see: wait for what they change instead)
        written.fill("LPIPS (Alex)")
        written.press("Enter")
        ap.wait_until(lambda: ap.caption_with("The name says: backbone AlexNet"), "the name's reading")
        reported = main.get_by_label("Reported value")
        reported.fill(f"{blur:.4f}")
        reported.press("Enter")
        ap.wait_until(lambda: reported.input_value() == f"{blur:.4f}", "the reported value")
        ap.page.wait_for_timeout(300)
        ap.settle()
        ap.rerun(lambda: main.get_by_role("button", name="Find the configuration").click())
        table = ap.wait_until(lambda: ap.page.evaluate(FIT_JS, "ds_explain_table"), "the explain table")
        heads = [h for h, _ in table["heads"]]
        assert heads == ["★", "configuration", "mean", "95% CI", "z", "name", "same values"]
        first = dict(zip(heads, table["rows"][0]))
        assert first["configuration"] == "LPIPS · AlexNet" and first["★"] == "★" and first["name"] == "✓"
        assert abs(float(first["mean"]) - blur) < 1e-4
        ap.page.locator(".st-key-ds_explain_table").scroll_into_view_if_needed()
        ap.page.wait_for_timeout(400)
        ap.page.screenshot(path=str(OUT / "score-a-dataset-explain-1024x768.png"))
        _fits(table, "explain")
        ap.page.locator(".st-key-ds_summary").scroll_into_view_if_needed()
        ap.page.wait_for_timeout(400)
        ap.page.screenshot(path=str(OUT / "score-a-dataset-summary-1024x768.png"))
        ap.assert_alive()
    finally:
        context.close()
    server.assert_healthy()
