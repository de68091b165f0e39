"""Every page, machine-checked at 1024 × 768 with the sidebar open and on a phone (390 × 844), with its
default inputs and after its main action (issue 44): nothing cut, nothing scrolling sideways, no
two texts on top of each other, every chart's texts inside their chart.

For each page listed in ``app.py`` (:data:`~e2e.driver.PAGES`) a 1024 × 768 tab opens it, the page
is checked, its main action runs (the cheapest that draws its results: scoring and explaining
the demo set, a loss-lab experiment of two steps, the calibration run at its smallest settings,
a class study created…), every folded section is opened, the page is checked again, then the
same tab is narrowed to 390 × 844 and checked once more; a fresh 390 × 844 tab checks the default
view on a phone. Each check
(:data:`AUDIT_JS`, on the whole main area and the open sidebar, scrolled through first so that
what is drawn on view is drawn) fails on:

- text cut by its container: a text's line box reaching past an ancestor that clips it
  (``overflow`` other than ``visible``, or an ellipsis): labels, buttons, metric labels and
  values, chips, captions; in a data grid (drawn on a canvas, read back), a header or cell whose
  text runs into its column's border;
- anything scrolling sideways: the window, the main area, or any box in it, except a table's own
  frame (a data grid's viewport, an ``st.table``'s frame: a wide table shows the columns that
  matter first and the rest scroll inside the table, never the page) and a code block;
- two text boxes that overlap: HTML line boxes, and a Plotly chart's SVG texts, each the
  quadrilateral it covers on screen (a rotated tick label is not its upright bounding box);
- a Plotly chart's title, axis titles, tick labels, legend or annotations outside its chart or
  over another panel's plot area, and a legend entry under the chart's toolbar (which appears on
  hover, top right).

Each finding names the page, the size, the element and its text; all of them are written to
``test-output/e2e/every-page/findings.json`` and each page's screenshots (the whole main area) to
``test-output/e2e/every-page/<page>-<size>.png`` (after the action, unfolded; ``…-default.png``
as the page opens).
"""

from __future__ import annotations

import json
import os

import pytest

from .driver import GRID_CUTS_JS, OUT, PAGE_DONE_JS, PAGES, AppPage, slug, start_server

SHOTS = OUT / "every-page"
SIZES = {"1024x768": (1024, 768), "phone": (390, 844)}

#: Every finding on the page as ``{kind, element, what, text}``: ``kind`` is ``cut``, ``scroll``,
#: ``overlap``, ``chart`` or ``grid``; ``element`` the nearest keyed container or Streamlit test id.
AUDIT_JS = r"""() => {
""" + GRID_CUTS_JS + r"""
  const out = [];
  const app = document.querySelector("[data-testid='stApp']");
  const main = document.querySelector("[data-testid='stMain']");
  if (!app || !main) return [{kind: "page", element: "stMain", text: "no main area"}];
  const side = document.querySelector("[data-testid='stSidebar']");
  const sideOpen = side && side.getAttribute("aria-expanded") !== "false"
    && (r => r.width > 100 && r.right > 50)(side.getBoundingClientRect());
  const roots = [main, ...(sideOpen ? [side] : [])];
  const text = el => ((el && (el.innerText || el.textContent)) || "").replace(/\s+/g, " ").trim().slice(0, 90);
  const where = el => {
    const parts = [];
    for (let p = el; p && parts.length < 2; p = p.parentElement) {
      const id = p.getAttribute && p.getAttribute("data-testid");
      const key = p.className && typeof p.className === "string" && p.className.match(/st-key-[\w-]+/);
      if (key) parts.push(key[0]);
      else if (id) parts.push(id);
    }
    return (parts.length ? parts.join(" in ") : el.tagName.toLowerCase());
  };
  const say = (kind, el, what, t) => out.push({kind, element: where(el), what, text: t === undefined ? text(el) : t});
  // The boxes that may scroll sideways inside themselves: a table's own frame (a data grid's
  // viewport, an st.table's frame: the columns that matter first, the rest scrolled to) and a
  // code block. Anything else that scrolls sideways, the page included, is a finding.
  const mayScroll = el => el.matches(".dvn-scroller, pre, [data-testid='stCode'] *, [data-testid='stTable']")
    || (!!el.closest("[data-testid='stTable']") && !el.closest("table"));
  const insideGrid = el => !!el.closest("[data-testid='stDataFrame'], [data-testid='stCode'], pre");
  const shown = el => {
    if (!el.getClientRects().length || el.closest("details:not([open])")) return false;
    const s = getComputedStyle(el);
    return s.visibility !== "hidden" && s.opacity !== "0";
  };
  // --- the window and the main area never scroll sideways
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    say("scroll", document.documentElement, `the window scrolls sideways (${document.documentElement.scrollWidth} px in ${window.innerWidth})`, "");
  if (main.scrollWidth > main.clientWidth + 1)
    say("scroll", main, `the main area scrolls sideways (${main.scrollWidth} px in ${main.clientWidth})`, "");
  // --- every visible text node, its line boxes clipped to what its clipping ancestors show
  const lines = [];
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!n.textContent.trim() || !el || el.closest("svg, script, style, noscript, textarea, [data-testid='stIconMaterial']")) continue;
      if (!shown(el)) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (r.width < 1 || r.height < 1) continue;
        let box = {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
        let cut = null, freeX = false, freeY = false;  // free: past a box that scrolls on that axis
        for (let p = el; p && p !== document.body; p = p.parentElement) {
          const s = getComputedStyle(p);
          if (s.overflowX === "visible" && s.overflowY === "visible" && s.textOverflow !== "ellipsis") continue;
          const b = p.getBoundingClientRect();
          const inner = {left: b.left + p.clientLeft, top: b.top + p.clientTop};
          inner.right = inner.left + (p.clientWidth || b.width);
          inner.bottom = inner.top + (p.clientHeight || b.height);
          // what a box that scrolls holds beyond its edge is scrolled to, not cut (a sideways
          // scroll is a finding of its own, below)
          const scrollsX = s.overflowX === "auto" || s.overflowX === "scroll";
          const scrollsY = s.overflowY === "auto" || s.overflowY === "scroll";
          const clipX = !freeX && !scrollsX && !mayScroll(p), clipY = !freeY && !scrollsY && s.overflowY !== "visible";
          if (!cut && ((clipX && (box.right > inner.right + 1 || box.left < inner.left - 1))
                       || (clipY && (box.bottom > inner.bottom + 2 || box.top < inner.top - 2))))
            cut = p;
          if (clipX) box = {...box, left: Math.max(box.left, inner.left), right: Math.min(box.right, inner.right)};
          if (clipY) box = {...box, top: Math.max(box.top, inner.top), bottom: Math.min(box.bottom, inner.bottom)};
          freeX = freeX || scrollsX || mayScroll(p);
          freeY = freeY || scrollsY;
          if (box.right - box.left < 1 || box.bottom - box.top < 1) break;
        }
        if (box.right - box.left < 1 || box.bottom - box.top < 1) continue;  // not on screen (hidden by design)
        if (cut && !insideGrid(el)) say("cut", cut, "text cut by its container", n.textContent.trim().slice(0, 90));
        lines.push({box, node: n, el});
      }
    }
  }
  // --- a box that scrolls sideways (other than a table's own frame or a code block)
  for (const root of roots) for (const el of root.querySelectorAll("*")) {
    const s = getComputedStyle(el);
    if ((s.overflowX === "auto" || s.overflowX === "scroll") && el.scrollWidth > el.clientWidth + 1 && !mayScroll(el)
        && !insideGrid(el) && shown(el))
      say("scroll", el, `scrolls sideways (${el.scrollWidth} px in ${el.clientWidth})`);
  }
  // --- two text boxes that overlap
  const hit = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.3 * Math.min(a.bottom - a.top, b.bottom - b.top);
  for (let i = 0; i < lines.length; i++) for (let j = i + 1; j < lines.length; j++) {
    if (lines[i].node === lines[j].node) continue;
    if (hit(lines[i].box, lines[j].box))
      say("overlap", lines[i].el, "two texts overlap", `"${lines[i].node.textContent.trim().slice(0, 40)}" and "${lines[j].node.textContent.trim().slice(0, 40)}"`);
  }
  // --- a thin vertical rule (a dashed line at 1, an axis mark: a bordered box at most 2 px wide)
  // drawn through a text
  for (const root of roots) for (const el of root.querySelectorAll("div, span")) {
    const st = getComputedStyle(el);
    if (st.borderLeftStyle === "none" || parseFloat(st.borderLeftWidth) < 0.5 || el.textContent.trim()) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 2 || r.height < 8 || !shown(el)) continue;
    for (const {box, node} of lines)
      if (box.left < r.left - 0.5 && box.right > r.right + 0.5 && Math.min(box.bottom, r.bottom) - Math.max(box.top, r.top) > 2)
        say("overlap", node.parentElement, "a rule is drawn through this text", node.textContent.trim().slice(0, 90));
  }
  // --- Plotly: every text (titles, axis titles, tick labels, legend, annotations) as the quadrilateral
  // it covers on screen (its own box through its transform: a rotated tick label is not its
  // upright bounding rectangle), inside its chart, clear of the other texts and of the other
  // panels' plot areas; the legend inside the chart and clear of the toolbar shown on hover
  const corners = (b, m) => [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
    .map(([x, y]) => ({x: m.a * x + m.c * y + m.e, y: m.b * x + m.d * y + m.f}));
  const rectQuad = r => [{x: r.left, y: r.top}, {x: r.right, y: r.top}, {x: r.right, y: r.bottom}, {x: r.left, y: r.bottom}];
  // separating axes: two convex quadrilaterals overlap by more than `tol` px on every axis
  const meet = (p, q, tol) => {
    for (const poly of [p, q]) for (let i = 0; i < 4; i++) {
      const a = poly[i], b = poly[(i + 1) % 4], len = Math.hypot(b.x - a.x, b.y - a.y);
      if (!len) continue;
      const nx = (a.y - b.y) / len, ny = (b.x - a.x) / len;
      const proj = poly2 => poly2.map(v => v.x * nx + v.y * ny);
      const pa = proj(p), pb = proj(q);
      if (Math.min(Math.max(...pa), Math.max(...pb)) - Math.max(Math.min(...pa), Math.min(...pb)) <= tol) return false;
    }
    return true;
  };
  const inside = (quad, r) => quad.every(v => v.x >= r.left - 1 && v.x <= r.right + 1 && v.y >= r.top - 1 && v.y <= r.bottom + 1);
  const words = t => `"${t.textContent.trim().slice(0, 40)}"`;
  for (const chart of main.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")) {
    if (!shown(chart)) continue;
    const cr = chart.getBoundingClientRect();
    const name = ((chart.querySelector(".gtitle") || {}).textContent || "").slice(0, 50);
    const of = name ? ` in "${name}"` : "";
    const items = [];
    for (const t of chart.querySelectorAll("text")) {
      if (!t.textContent.trim() || !t.getClientRects().length || t.closest(".hoverlayer")) continue;
      const m = t.getScreenCTM(), b = t.getBBox();
      if (!m || b.width < 1) continue;
      const quad = corners(b, m);
      items.push({t, quad});
      if (!inside(quad, cr)) say("chart", t, `chart text outside its chart${of}`, t.textContent.trim().slice(0, 90));
    }
    for (let i = 0; i < items.length; i++) for (let j = i + 1; j < items.length; j++) {
      const a = items[i], b = items[j];
      if (a.t.contains(b.t) || b.t.contains(a.t)) continue;
      if (meet(a.quad, b.quad, 2)) say("overlap", a.t, `two chart texts overlap${of}`, `${words(a.t)} and ${words(b.t)}`);
    }
    const areas = [...chart.querySelectorAll(".draglayer > g")].map(g => {
      const d = g.querySelector(".nsewdrag");
      return d ? {id: g.getAttribute("class").split(" ")[0], r: d.getBoundingClientRect()} : null;
    }).filter(a => a && a.r.width > 1);
    if (areas.length > 1) for (const {t, quad} of items) {
      const title = t.closest("[class*='title']");
      const m = title && (title.getAttribute("class") || "").match(/g-([xy]\d*)title/);
      const sub = t.closest(".subplot");
      const own = m ? m[1] : sub ? sub.getAttribute("class").split(" ").find(c => /^x\d*y\d*$/.test(c)) : null;
      if (!own) continue;
      for (const a of areas) {
        const axes = a.id.match(/^(x\d*)(y\d*)$/);
        if (!axes || axes[0] === own || axes[1] === own || axes[2] === own) continue;
        if (meet(quad, rectQuad(a.r), 1)) say("chart", t, `chart text over another panel (${a.id})${of}`, t.textContent.trim());
      }
    }
    // the chart's own pictures (layout images: a map's thumbnails) side by side, not on top of each other
    const pics = [...chart.querySelectorAll(".layer-above .imagelayer image, .layer-below .imagelayer image")]
      .map(i => i.getBoundingClientRect()).filter(r => r.width > 1 && r.height > 1);
    let covered = 0;
    for (let i = 0; i < pics.length; i++) for (let j = i + 1; j < pics.length; j++)
      if (Math.min(pics[i].right, pics[j].right) - Math.max(pics[i].left, pics[j].left) > 2
          && Math.min(pics[i].bottom, pics[j].bottom) - Math.max(pics[i].top, pics[j].top) > 2) covered++;
    if (covered) say("chart", chart, `${covered} pair(s) of the chart's pictures cover each other${of}`, "");
    const legend = chart.querySelector(".legend");
    const bar = chart.querySelector(".modebar");
    if (legend && legend.getBoundingClientRect().width) {
      const r = legend.getBoundingClientRect();
      if (r.left < cr.left - 1 || r.right > cr.right + 1 || r.top < cr.top - 1 || r.bottom > cr.bottom + 1)
        say("chart", legend, `legend outside its chart${of}`);
      for (const {t, quad} of items)
        if (bar && t.closest(".legend") && meet(quad, rectQuad(bar.getBoundingClientRect()), 1))
          say("chart", t, `the chart's toolbar covers this legend entry on hover${of}`, t.textContent.trim());
    }
  }
  // --- data grids (drawn on a canvas): the pixels read back, the column borders found as
  // full-height lines of the grid's border colour; a column whose text (pixels darker than the
  // text threshold) runs into the 3 px next to its border is cut. A grid that scrolls sideways
  // may cut the last column it shows at its edge: that is the scroll, not a cut.
  for (const df of main.querySelectorAll("[data-testid='stDataFrame']")) {
    if (!shown(df)) continue;
    const scroller = df.querySelector(".dvn-scroller");
    const cuts = gridCuts(df, scroller && scroller.scrollWidth > scroller.clientWidth + 1);
    if (cuts === null) { say("grid", df, "data grid not drawn"); continue; }
    const heads = [...df.querySelectorAll("thead th, [role='columnheader']")].map(h => h.textContent.trim());
    for (const [c, width] of cuts)
      say("grid", df, `data grid column ${c + 1} (${width} px): its text reaches the border`, heads[c] || "");
  }
  // one line per finding
  const seen = new Set();
  return out.filter(f => { const k = JSON.stringify(f); if (seen.has(k)) return false; seen.add(k); return true; });
}"""

#: Scrolls the main area through (charts and grids are drawn when they come into view), then back.
SCROLL_THROUGH_JS = """async () => { const m = document.querySelector("[data-testid='stMain']");
  for (let y = 0; y <= m.scrollHeight; y += 400) { m.scrollTo(0, y); await new Promise(r => setTimeout(r, 80)); }
  m.scrollTo(0, 0); }"""
#: The main area's whole height (it scrolls inside the window).
MAIN_HEIGHT_JS = """() => { const m = document.querySelector("[data-testid='stMain']");
  const c = document.querySelector("[data-testid='stMainBlockContainer']");
  return Math.ceil(Math.max(m.scrollHeight, c ? c.getBoundingClientRect().height : 0)); }"""
SIDEBAR_OPEN_JS = """() => { const s = document.querySelector("[data-testid='stSidebar']");
  return !!s && s.getAttribute("aria-expanded") !== "false" && s.getBoundingClientRect().right > 50; }"""


def _done(ap: AppPage) -> None:
    """The page done, scrolled through so that what is drawn on view is drawn, done again."""
    ap.settle()
    ap.page.wait_for_function(PAGE_DONE_JS, polling=200)
    ap.page.evaluate(SCROLL_THROUGH_JS)
    ap.page.wait_for_function(PAGE_DONE_JS, polling=200)
    ap.page.wait_for_timeout(400)  # charts take their final width


def _resize(ap: AppPage, size: str) -> None:
    """The tab narrowed or widened to ``size``; the sidebar closed on a phone (where it would cover
    the page: Streamlit closes it itself, a moment after the resize, or its close button does)."""
    w, h = SIZES[size]
    want = size != "phone"
    ap.page.set_viewport_size({"width": w, "height": h})
    ap.page.wait_for_timeout(1500)  # Streamlit's own reaction to the new width comes first
    if ap.page.evaluate(SIDEBAR_OPEN_JS) != want:
        button = ap.page.locator("[data-testid='stSidebarCollapseButton'] button" if not want else
                                 "[data-testid='stExpandSidebarButton'], [data-testid='stSidebarCollapsedControl'] button")
        button.first.click(force=True)
    ap.wait_until(lambda: ap.page.evaluate(SIDEBAR_OPEN_JS) == want, f"the sidebar {'open' if want else 'closed'}",
                  timeout=30)
    ap.page.wait_for_timeout(600)


def _check(ap: AppPage, title: str, size: str, state: str, findings: list[dict]) -> None:
    """Check the page as it is (``state``: ``default`` or ``after``), screenshot it, add what is wrong."""
    _done(ap)
    found = ap.page.evaluate(AUDIT_JS)
    for f in found:
        findings.append({"page": title, "size": size, "state": state, **f})
    w, h = SIZES[size]
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = f"{slug(title)}-{size}" + ("-default" if state == "default" else "")
    ap.page.set_viewport_size({"width": w, "height": max(h, min(ap.page.evaluate(MAIN_HEIGHT_JS) + 120, 16_000))})
    ap.page.wait_for_timeout(500)
    ap.page.screenshot(path=str(SHOTS / f"{name}.png"))
    ap.page.set_viewport_size({"width": w, "height": h})
    ap.page.wait_for_timeout(300)


def _unfold(ap: AppPage, most: int = 30) -> None:
    """Open every folded section (expander) of the main area, one at a time, each run settled: what
    a reader may open is checked too."""
    closed = ap.page.locator("[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) > summary")
    for _ in range(most):
        if not closed.count():
            return
        closed.first.scroll_into_view_if_needed()
        closed.first.click()
        ap.page.wait_for_timeout(300)
        ap.settle()


# --------------------------------------------------------------------------- each page's main action
def _shift_vs_blur(ap: AppPage) -> None:
    ap.nudge_slider("Shift (px, to the right)")


def _distortion_lab(ap: AppPage) -> None:
    ap.rerun(lambda: ap.page.get_by_test_id("stMain").get_by_role("button", name="Add step").click())


def _debug_a_score(ap: AppPage) -> None:
    from test_diagnostics import debug_pair  # tests/ is on sys.path

    ref, test = debug_pair()
    inputs = ap.page.get_by_test_id("stMain").locator("input[type=file]")
    for i, (name, mime, data) in enumerate((("ref.png", "image/png", ref), ("test.jpg", "image/jpeg", test))):
        ap.rerun(lambda: inputs.nth(i).set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}]))
    ap.wait_until(lambda: ap.caption_with("Change: the score"), "the finished summary")


def _number(ap: AppPage, label: str, value: str, *, within=None) -> None:
    box = (within or ap.page.get_by_test_id("stMain")).get_by_role("spinbutton", name=label)
    box.fill(value)
    box.press("Enter")


def _calibration_lab(ap: AppPage) -> None:
    """The smallest run: one stand-in, 50 + 50 triplets, 50 fitting steps (and the real AlexNet)."""
    form = ap.page.get_by_test_id("stForm")
    _number(ap, "Stand-in nets", "1", within=form)
    _number(ap, "Fitting steps", "50", within=form)
    slider = form.get_by_test_id("stSlider").filter(has_text="Triplets").get_by_role("slider")
    slider.focus()
    slider.press("Home")
    ap.page.wait_for_timeout(300)
    ap.rerun(lambda: form.get_by_role("button", name="Run the experiment").click())
    ap.wait_until(lambda: "What the fit did" in ap.main_text(), "the experiment's results")


def _judge_it_yourself(ap: AppPage) -> None:
    """A study of two triplets, created; the lecturer link kept; the projector view."""
    _number(ap, "Triplets", "2")
    ap.page.wait_for_timeout(500)
    ap.settle()
    ap.rerun(lambda: ap.page.get_by_role("button", name="Create the study").click())
    ap.wait_until(lambda: "keep your lecturer link" in ap.main_text(), "the keep-the-link step")
    ap.rerun(lambda: ap.page.get_by_text("I have kept it").click())
    ap.page.wait_for_function("() => !!document.querySelector('img[data-qr]')", timeout=ap.timeout * 1000)


def _score_a_dataset(ap: AppPage) -> None:
    """Score the demo set, open each folder's diversity, explain a number under AlexNet alone."""
    main = ap.page.get_by_test_id("stMain")
    ap.rerun(lambda: main.get_by_role("button", name="Score", exact=True).click())
    ap.wait_until(lambda: "The 10 worst pairs" in ap.main_text(), "the scored demo set")
    # the wide per-pair grid shows the columns that matter first: which pair, then its numbers
    from lpips_core.datasets import parse_spec

    metrics = [parse_spec(m).name for m in ("mse", "psnr", "ssim", "lpips-alex")]
    # the grid's accessible table holds the columns it draws: the first ones, the rest scrolled to
    head = ap.wait_until(lambda: next((rows[0] for rows in ap.tables() if rows and "key" in rows[0]), None),
                         "the per-pair grid")
    assert head[:2 + len(metrics)] == ["method", "key", *metrics], head
    ap.rerun(lambda: main.get_by_text("Each folder's diversity").click())
    ap.wait_until(lambda: ap.page.locator(".st-key-ds_diversity_table table").count(), "the diversity table")
    written = main.get_by_label("Metric as the paper wrote it (optional)")
    written.fill("LPIPS (Alex)")
    written.press("Enter")
    ap.wait_until(lambda: ap.caption_with("The name says: backbone AlexNet"), "the name's reading")
    ap.page.wait_for_timeout(300)
    ap.settle()
    ap.rerun(lambda: main.get_by_role("button", name="Find the configuration").click())
    ap.wait_until(lambda: ap.page.locator(".st-key-ds_explain_table table").count(), "the explain table")


def _lpips_as_a_loss(ap: AppPage) -> None:
    """Both experiments, two steps per loss."""
    main = ap.page.get_by_test_id("stMain")
    for i, (steps, asked, done) in enumerate((("Steps per loss", "2 Adam steps for every loss", "MSE's result differs"),
                                              ("Steps per metric", "2 steps for every metric", "Source to target: RMS"))):
        settings = main.get_by_test_id("stExpander").filter(has_text="Settings").nth(i)
        settings.locator("summary").click()
        box = settings.get_by_role("spinbutton", name=steps)
        box.wait_for()
        box.fill("2")
        box.press("Enter")
        # the page's own line says the server has the new count (a rerun too quick to see is no wait)
        ap.wait_until(lambda: asked in ap.main_text(), f"the page to ask for {asked!r}")
        ap.settle()
        ap.rerun(lambda: main.get_by_role("button", name="Run", exact=True).nth(i).click())
        ap.wait_until(lambda: done in ap.main_text(), f"experiment {i + 1}'s result")


#: Page title → its main action (pages without one are checked as they open: their answer is
#: drawn from the defaults, e.g. Conventions, Inside a layer, LPIPS space).
ACTIONS = {
    "Shift vs blur": _shift_vs_blur,
    "Distortion lab": _distortion_lab,
    "Debug a score": _debug_a_score,
    "Calibration lab": _calibration_lab,
    "Judge it yourself": _judge_it_yourself,
    "Score a dataset": _score_a_dataset,
    "LPIPS as a loss": _lpips_as_a_loss,
}


# --------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def study_server(tmp_path_factory):
    """The app on a fresh, temporary study database (a created study never lands in ``data/``)."""
    folder = tmp_path_factory.mktemp("every-page-study")
    old = os.environ.get("LPIPS_EXPLORER_DATA")
    os.environ["LPIPS_EXPLORER_DATA"] = str(folder)
    try:
        srv = start_server(OUT / "server-every-page-study.log")
    finally:
        if old is None:
            del os.environ["LPIPS_EXPLORER_DATA"]
        else:
            os.environ["LPIPS_EXPLORER_DATA"] = old
    yield srv
    srv.stop()


def _record(findings: list[dict]) -> None:
    """Add this page's findings to ``findings.json`` (one list, page by page, for the whole run)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / "findings.json"
    pages = {f["page"] for f in findings}
    old = [] if not path.exists() else json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps([f for f in old if f["page"] not in pages] + findings, indent=1, ensure_ascii=False),
                    encoding="utf-8")


def visit(browser, server, title: str, path: str) -> list[dict]:
    """Every check of one page (see the module docstring); the findings, as dicts."""
    findings: list[dict] = []
    for size in ("1024x768", "phone"):
        w, h = SIZES[size]
        context = browser.new_context(viewport={"width": w, "height": h})
        try:
            ap = AppPage(context.new_page(), server)
            ap.open(path, check_frame=False)
            ap.wait_until(lambda: ap.title() == title or title == "Judge it yourself", f"the page {title!r}")
            assert ap.page.evaluate(SIDEBAR_OPEN_JS) == (size != "phone"), f"the sidebar at {size}"
            _check(ap, title, size, "default", findings)
            if size == "1024x768":
                if title in ACTIONS:
                    ACTIONS[title](ap)
                _unfold(ap)
                _check(ap, title, size, "after", findings)
                _resize(ap, "phone")
                _check(ap, title, "phone", "after", findings)
            ap.assert_alive()
        finally:
            context.close()
    return findings


@pytest.mark.parametrize("title, path", PAGES, ids=[slug(t) for t, _ in PAGES])
def test_nothing_cut_or_overlapping_at_1024_and_on_a_phone(request, browser, title, path):
    server = request.getfixturevalue("study_server" if title == "Judge it yourself" else "server")
    findings = visit(browser, server, title, path)
    _record(findings)
    lines = [f"{f['page']} · {f['size']} ({f['state']}) · {f['element']}: {f['what']}: {f['text']!r}" for f in findings]
    assert not lines, f"{len(lines)} finding(s); screenshots in {SHOTS}:\n" + "\n".join(lines)
    server.assert_healthy()
