"""Driving the Streamlit app in Chromium: the server process, waiting for reruns, reading the DOM.

Everything here is plain functions and small classes; ``conftest.py`` turns them into fixtures.
The selectors are Streamlit's own ``data-testid`` attributes and visible text (labels, titles),
checked against Streamlit 1.67's DOM:

- ``[data-testid='stApp']`` carries ``data-test-script-state``: ``initial``, ``running``,
  ``rerunRequested``, ``notRunning`` (Streamlit's own e2e suite waits for ``notRunning``).
- ``st.dataframe`` draws on a canvas (glide-data-grid), but keeps an accessible ``<table>``
  whose cells hold the raw values (full precision, before the column's display format).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "test-output" / "e2e"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

def app_pages(app_file: Path | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What ``app.py`` declares, read from its source (it cannot be imported outside Streamlit).

    Returns ``(navigation, linkable)``: the ``st.Page`` entries of its ``PAGES`` list in order as
    ``(title, public URL path)`` (``""`` for the default page, which Streamlit serves at the root
    only), and every ``(title, path)`` a URL can open directly: each non-default page's
    ``url_path`` and each hidden alias (e.g. ``shift_vs_blur`` for the default page).
    """
    import ast

    tree = ast.parse((app_file or REPO / "app.py").read_text())

    def page(call: ast.Call) -> dict[str, Any]:
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("title", "url_path", "default",
                                                                                     "visibility")}
        kw["file"] = ast.literal_eval(call.args[0]) if call.args else None
        return kw

    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "Page"]
    listed = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "PAGES" for t in n.targets))
    nav_calls = [c for c in listed.elts if isinstance(c, ast.Call)]
    nav = [(p["title"], "" if p.get("default") else p.get("url_path", Path(p["file"]).stem))
           for p in map(page, nav_calls)]
    linkable = [(p["title"], p.get("url_path", Path(p["file"]).stem)) for p in map(page, calls)
                if not p.get("default")]
    return nav, linkable


#: The navigation, in order: (title, URL path), derived from app.py. The first is the default page.
#: LINKABLE: every (title, URL path) a link can open (the default page under its alias too).
PAGES, LINKABLE = app_pages()

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
#: The first metric value on the page (Debug a score's LPIPS), or ``null``.
FIRST_METRIC_JS = """() => { const v = document.querySelector("[data-testid='stMain'] [data-testid='stMetricValue']");
  return v ? v.innerText.trim() : null; }"""
#: The server's line for each model really built (:func:`ui.models._load`): the model's spec name and device.
LOAD_LINE = re.compile(r"lpips-explorer: loaded model (\S+) device=(\S+)")

#: Injected before any page script: counts finished script runs (every change of the app's
#: script state into ``notRunning``) and remembers when the state last changed, so a test can
#: wait for "the rerun my click caused has finished" instead of racing a stale ``notRunning``.
RUN_COUNTER_JS = """
(() => {
  window.__stRuns = 0;
  window.__stState = null;
  window.__stChanged = performance.now();
  const look = () => {
    const app = document.querySelector("[data-testid='stApp']");
    const state = app ? app.getAttribute("data-test-script-state") : null;
    if (state !== window.__stState) {
      if (state === "notRunning" && window.__stState !== null) window.__stRuns += 1;
      window.__stState = state;
      window.__stChanged = performance.now();
    }
  };
  new MutationObserver(look).observe(document, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["data-test-script-state"],
  });
})();
"""

#: True once the script has been ``notRunning`` for ``quiet`` ms (Streamlit may chain reruns).
SETTLED_JS = """quiet => {
  const app = document.querySelector("[data-testid='stApp']");
  return !!app && app.getAttribute("data-test-script-state") === "notRunning"
         && window.__stState === "notRunning" && performance.now() - window.__stChanged > quiet;
}"""

#: Every ``st.dataframe`` on the page as rows of cell texts (header row first).
TABLES_JS = """() => [...document.querySelectorAll("[data-testid='stDataFrame']")].map(
  df => [...df.querySelectorAll("tr")].map(tr => [...tr.children].map(c => c.textContent.trim())))"""

#: The visible text of the navigation links (without the Material icon names).
NAV_JS = """() => [...document.querySelectorAll("[data-testid='stSidebarNav'] a")].map(a => {
  const spans = [...a.querySelectorAll("span")].filter(s => !s.querySelector("span")
      && s.getAttribute("data-testid") !== "stIconMaterial");
  return (spans.length ? spans[spans.length - 1].textContent : a.textContent).trim();
})"""


#: True once the page is done: its first run finished and nothing is left to draw or replace: no
#: running indicator, spinner, skeleton (an element whose code is still loading) or stale element
#: (one the last run did not draw again), every image shown loaded, every Plotly chart drawn and
#: every data grid painted (what a closed expander holds is not drawn, and not waited for).
PAGE_DONE_JS = r"""() => {
  const app = document.querySelector("[data-testid='stApp']");
  const main = document.querySelector("[data-testid='stMain']");
  if (!app || !main || app.getAttribute("data-test-script-state") !== "notRunning" || !(window.__stRuns > 0)) return false;
  if (document.querySelector("[data-testid='stStatusWidgetRunningIcon'], [data-testid='stSpinner'], " +
                             "[data-testid='stSkeleton'], [data-stale='true']")) return false;
  const shown = e => e.getClientRects().length && !e.closest("details:not([open])");
  if ([...app.querySelectorAll("img")].filter(shown).some(i => !i.complete || !i.naturalWidth)) return false;
  if ([...main.querySelectorAll("[data-testid='stPlotlyChart']")].filter(shown).some(c => !c.querySelector(".main-svg")))
    return false;
  return ![...main.querySelectorAll("[data-testid='stDataFrame']")].filter(shown)
    .some(d => !(d.querySelector("canvas") || {}).width);
}"""

#: A JavaScript function ``gridCuts(df, skipLast)`` for the two page scans (:data:`FIT_JS` here and
#: the every-page audit): the columns of an ``st.dataframe`` (glide-data-grid draws on a canvas)
#: whose text reaches a column border, as ``[[column index, width in CSS px], …]``, or ``null``
#: when the grid is not drawn. The canvas is read back, the column borders found as full-height
#: lines of the grid's border colour, and a column whose text (pixels darker than the text
#: threshold) runs into the 3 px next to its border is cut (text that fits keeps them clear).
#: ``skipLast``: leave out the last column shown (a grid that scrolls sideways cuts it at its edge:
#: that is the scroll, not a cut).
GRID_CUTS_JS = r"""
const gridCuts = (df, skipLast) => {
  const canvas = df.querySelector("canvas");
  if (!canvas || !canvas.width) return null;
  const g = canvas.getContext("2d"), W = canvas.width, H = canvas.height, k = W / canvas.clientWidth;
  const px = g.getImageData(0, 0, W, H).data;
  const css = getComputedStyle(df.querySelector(".stDataFrameGlideDataEditor") || df);
  const border = (css.getPropertyValue("--gdg-border-color") || "#E8E5E2").trim();
  const [br, bg, bb] = [1, 3, 5].map(i => parseInt(border.slice(i, i + 2), 16));
  const near = (i, r, gg, b) => Math.abs(px[i] - r) < 8 && Math.abs(px[i + 1] - gg) < 8 && Math.abs(px[i + 2] - b) < 8;
  const edges = [-1];
  for (let x = 0; x < W; x++) {
    let n = 0;
    for (let y = 0; y < H; y++) if (near(4 * (y * W + x), br, bg, bb)) n++;
    if (n > 0.8 * H && x - edges[edges.length - 1] > 1) edges.push(x);
  }
  edges.push(W);
  const padding = Math.max(2, Math.round(3 * k));
  const cuts = [];
  for (let c = 0; c + 1 < edges.length; c++) {
    if (skipLast && c === edges.length - 2) continue;
    const x0 = edges[c] + 1, x1 = edges[c + 1] - 1;
    let lo = Infinity, hi = -Infinity;
    for (let y = 0; y < H; y++) for (let x = x0; x <= x1; x++) {
      const i = 4 * (y * W + x);
      if (0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2] < 170) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
    }
    if (hi >= x1 - padding || (lo <= x0 + padding && lo !== Infinity)) cuts.push([c, Math.round((x1 - x0) / k)]);
  }
  return cuts;
};"""

#: What is cut in the main area: for every table (``st.table``), data grid (``st.dataframe``),
#: metric and Plotly chart, a line saying what does not fit. ``[]`` when everything shows whole.
#: - an element wider than the main column, or reaching past its right edge;
#: - ``st.table``: the table wider than its frame, or a cell whose content overflows it;
#: - ``st.dataframe``: a grid that scrolls sideways, or a column whose text reaches its border
#:   (:data:`GRID_CUTS_JS`);
#: - ``st.metric``: a value or label cut by its ellipsis (``scrollWidth > clientWidth``);
#: - a Plotly chart: a text (title, annotation, bar label) outside the chart's box.
FIT_JS = r"""() => {
""" + GRID_CUTS_JS + r"""
  const out = [];
  const main = document.querySelector("[data-testid='stMainBlockContainer']");
  if (!main) return ["no main block container"];
  const box = main.getBoundingClientRect();
  const pad = parseFloat(getComputedStyle(main).paddingRight) || 0;
  const right = box.right - pad + 1;
  const say = (el, what) => out.push(`${what}: "${(el.innerText || el.textContent || "").trim().slice(0, 80)}"`);
  // what shows: not in a closed expander (whose content Streamlit keeps in the page, undrawn)
  const all = sel => [...main.querySelectorAll(sel)].filter(e => e.getClientRects().length
                                                          && !e.closest("details:not([open])"));
  for (const el of all("[data-testid='stTable'], [data-testid='stDataFrame'], [data-testid='stMetric'], " +
                       "[data-testid='stPlotlyChart']")) {
    const r = el.getBoundingClientRect();
    if (r.right > right) say(el, `${el.dataset.testid} reaches ${Math.round(r.right - right)} px past the page`);
  }
  for (const t of all("[data-testid='stTable']")) {
    const table = t.querySelector("table"), frame = table.parentElement;
    if (table.scrollWidth > frame.clientWidth + 1)
      say(t, `table ${table.scrollWidth} px wide in a ${frame.clientWidth} px frame`);
    for (const c of table.querySelectorAll("th, td"))
      if (c.scrollWidth > c.clientWidth + 1) say(c, `table cell overflows (${c.scrollWidth} > ${c.clientWidth} px)`);
  }
  for (const df of all("[data-testid='stDataFrame']")) {
    const s = df.querySelector(".dvn-scroller");
    if (s && s.scrollWidth > s.clientWidth + 1)
      say(df, `data grid scrolls sideways (${s.scrollWidth} px of columns in ${s.clientWidth} px)`);
    const cuts = gridCuts(df, false);
    if (cuts === null) { say(df, "data grid not drawn"); continue; }
    for (const [c, width] of cuts) say(df, `data grid column ${c + 1} (${width} px): its text reaches the border`);
  }
  for (const m of all("[data-testid='stMetricValue'] > div, [data-testid='stMetricLabel'] [data-testid='stMarkdownContainer']"))
    if (m.scrollWidth > m.clientWidth + 1) say(m, `metric cut (${m.scrollWidth} > ${m.clientWidth} px)`);
  for (const chart of all("[data-testid='stPlotlyChart'] .js-plotly-plot")) {
    const cr = chart.getBoundingClientRect();
    for (const t of chart.querySelectorAll("text")) {
      if (!t.textContent.trim() || !t.getClientRects().length) continue;
      const r = t.getBoundingClientRect();
      if (r.width && (r.left < cr.left - 1 || r.right > cr.right + 1 || r.top < cr.top - 1 || r.bottom > cr.bottom + 1))
        say(t, `chart text outside its chart (${Math.round(r.left - cr.left)}..${Math.round(r.right - cr.left)} px ` +
               `of ${Math.round(cr.width)})`);
    }
  }
  return out;
}"""


def require_chromium() -> None:
    """Fail (never skip) when the browser is missing: CI installs it with ``scripts/setup.sh --test``."""
    import pytest

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium is missing: {CHROMIUM} does not exist or is not executable. The browser tests "
            "need Debian's chromium: run `bash scripts/setup.sh --test` (it installs it when missing) "
            "or `sudo apt-get install chromium`. Never `playwright install`.",
            pytrace=False,
        )
    try:
        import playwright  # noqa: F401
    except ImportError as exc:  # pragma: no cover - setup.sh --test installs it
        pytest.fail(f"The playwright package is missing ({exc}): run `bash scripts/setup.sh --test`.",
                    pytrace=False)


def launch_options() -> dict[str, Any]:
    return {"executable_path": CHROMIUM, "headless": True, "args": list(CHROMIUM_ARGS)}


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# --------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running ``streamlit run app.py`` in its own process group, logging to ``log_path``."""

    port: int
    log_path: Path
    proc: subprocess.Popen = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def page_url(self, path: str) -> str:
        return f"{self.url}/{path}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def model_loads(self) -> Counter:
        """How many times each ``(model spec name, device)`` was really built, from the log."""
        return Counter(LOAD_LINE.findall(self.log()))

    def assert_healthy(self) -> None:
        """The process is alive and its log holds no traceback."""
        log = self.log()
        assert self.proc.poll() is None, f"the server exited ({self.proc.returncode}); log:\n{log[-4000:]}"
        assert "Traceback" not in log, f"the server log ({self.log_path}) holds an exception:\n{log[-6000:]}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
            except ProcessLookupError:
                pass


def _health(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as resp:
            return resp.read().decode(errors="replace").strip()
    except (urllib.error.URLError, OSError):
        return None


def start_server(log_path: Path, *, timeout: float = 90.0, attempts: int = 3) -> Server:
    """Start the real app on a free loopback port and wait until ``/_stcore/health`` says ``ok``.

    Retries on another port if the chosen one was taken in the meantime; fails with the log's
    tail if the process dies or stays unhealthy for ``timeout`` seconds.
    """
    import pytest

    streamlit = REPO / ".venv" / "bin" / "streamlit"
    exe = [str(streamlit)] if streamlit.exists() else [sys.executable, "-m", "streamlit"]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(attempts):
        port = free_port()
        # No file watcher: the checkout is edited while tests run (a change must not rerun or
        # reload the app under a test), and watching .venv overflows inotify on a busy machine.
        cmd = exe + ["run", "app.py", "--server.headless", "true", "--server.port", str(port),
                     "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
                     "--server.fileWatcherType", "none"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log_path, "w") as log:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        server = Server(port, log_path, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if _health(server.url) == "ok":
                return server
            time.sleep(0.5)
        server.stop()
        log = server.log()
        if proc.returncode not in (None, 0) and "is already in use" in log and attempt + 1 < attempts:
            continue
        pytest.fail(f"`streamlit run app.py` did not become healthy on port {port} within {timeout:.0f} s "
                    f"(exit status {proc.returncode}); log {log_path}:\n{log[-4000:]}", pytrace=False)
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- a page (sync API)
def _script_finished(payload: bytes) -> bool:
    """Whether a websocket frame from the server is Streamlit's ``script_finished`` message."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    try:
        msg.ParseFromString(payload)
    except Exception:  # noqa: BLE001  (not a ForwardMsg: not ours to count)
        return False
    return msg.WhichOneof("type") == "script_finished"


class AppPage:
    """One browser tab on the app, with the waits a Streamlit rerun needs.

    ``timeout`` (seconds) bounds every wait: LPIPS on a 2-core CPU is slow and other test runs
    may share the machine.
    """

    def __init__(self, page, server: Server, *, timeout: float = 240.0):
        self.page = page
        self.server = server
        self.timeout = timeout
        page.add_init_script(RUN_COUNTER_JS)
        page.set_default_timeout(timeout * 1000)
        # the server's "script finished" messages to this tab (a whole run or a fragment's): a run
        # too quick for the browser to draw its running state is still counted (see rerun)
        self.finished = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)) and _script_finished(bytes(payload)):
            self.finished += 1

    # -- waiting
    def runs(self) -> int:
        return int(self.page.evaluate("() => window.__stRuns || 0"))

    def settle(self, *, timeout: float | None = None, quiet_ms: int = 600) -> None:
        """Wait until the script is not running and has stayed so for ``quiet_ms``."""
        self.page.wait_for_function(SETTLED_JS, arg=quiet_ms, timeout=(timeout or self.timeout) * 1000,
                                    polling=100)

    def rerun(self, action: Callable[[], Any], *, timeout: float | None = None) -> None:
        """Do ``action`` (a widget change) and wait for the rerun it causes to finish: the page's
        script state seen going back to not running, or the server's "script finished" message
        (a rerun quicker than the browser draws shows only the latter)."""
        before, finished = self.runs(), self.finished
        action()
        self.wait_until(lambda: self.runs() > before or self.finished > finished, "the rerun", timeout=timeout)
        self.settle(timeout=timeout)

    def wait_until(self, predicate: Callable[[], Any], what: str, *, timeout: float | None = None) -> Any:
        """Poll ``predicate`` (Python side) until it returns something truthy."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout or self.timeout:.0f} s waiting for {what}")
            self.page.wait_for_timeout(250)

    # -- navigation
    def open(self, path: str = "", *, check_frame: bool = True) -> None:
        """Load ``path`` in this tab (a new session) and wait for its first run to finish."""
        self.page.goto(self.server.page_url(path), wait_until="domcontentloaded")
        self.settle()
        if check_frame:
            problem = self.frame_problem()
            assert problem is None, problem

    def nav_titles(self) -> list[str]:
        return self.page.evaluate(NAV_JS)

    def go(self, title: str, *, timeout: float | None = None) -> None:
        """Click ``title`` in the sidebar navigation and wait for that page's run to finish."""
        link = self.page.get_by_test_id("stSidebarNav").locator("a").filter(has_text=title)
        self.rerun(lambda: link.click(), timeout=timeout)
        self.wait_until(lambda: self.title() == title, f"the page title to become {title!r}", timeout=timeout)
        self.settle(timeout=timeout)

    # -- reading
    def frame_problem(self) -> str | None:
        """``None`` when ``app.py`` drew the frame (its six-page navigation and the shared sidebar),
        else what is wrong: e.g. Streamlit's old ``pages/`` folder mode, which runs a page file
        without ``app.py`` when the first visit to a fresh server is a link straight to a page."""
        want = [t for t, _ in PAGES]
        try:
            self.wait_until(lambda: self.nav_titles() == want
                            and self.sidebar().get_by_test_id("stWidgetLabel").filter(has_text="Backbone").count(),
                            "the app frame", timeout=10)
        except AssertionError:
            return (f"{self.page.url} did not get app.py's frame: navigation {self.nav_titles()} (expected {want}), "
                    f"sidebar 'Backbone' control present: "
                    f"{bool(self.sidebar().get_by_test_id('stWidgetLabel').filter(has_text='Backbone').count())}. "
                    "With a pages/ folder beside app.py, Streamlit runs the page file alone (its pages-folder "
                    "mode) until some session has run app.py's st.navigation.")
        return None

    def title(self) -> str | None:
        # one read in the page: a rerun can take the heading between a count and a read
        text = self.page.evaluate("() => { const h = document.querySelector(\"[data-testid='stMain'] h1\");"
                                  " return h ? h.innerText : null; }")
        return text.strip() if text is not None else None

    def main_text(self) -> str:
        return self.page.get_by_test_id("stMain").inner_text()

    def sidebar(self):
        return self.page.get_by_test_id("stSidebar")

    def exceptions(self) -> list[str]:
        return [e.inner_text() for e in self.page.get_by_test_id("stException").all()]

    def assert_alive(self) -> None:
        """No exception box on the page and the websocket still connected."""
        assert not self.exceptions(), f"the page shows an exception:\n{self.exceptions()}"
        state = self.page.get_by_test_id("stApp").get_attribute("data-test-connection-state")
        assert state in (None, "CONNECTED"), f"the app lost its server connection ({state})"

    def tables(self) -> list[list[list[str]]]:
        return self.page.evaluate(TABLES_JS)

    def table(self, row_label: str) -> dict[str, list[str]]:
        """The ``st.dataframe`` with a row whose first cell is ``row_label``: ``{first cell: other cells}``
        (the header row under its own first cell)."""
        for rows in self.tables():
            if any(r and r[0] == row_label for r in rows):
                return {r[0]: r[1:] for r in rows if r}
        return {}

    def number(self, row_label: str, column: int = 0) -> float | None:
        """A number from the table holding ``row_label``; ``None`` while it is not there (yet)."""
        row = self.table(row_label).get(row_label)
        if not row or len(row) <= column:
            return None
        try:
            return float(row[column])
        except ValueError:
            return None

    def caption_with(self, text: str) -> str | None:
        for c in self.page.get_by_test_id("stCaptionContainer").all():
            t = c.inner_text()
            if text in t:
                return t
        return None

    # -- widgets
    def nudge_slider(self, label: str, key: str = "ArrowRight", *, within=None) -> None:
        """Focus the slider labelled ``label`` and press ``key`` (one step); waits for the rerun."""
        scope = within if within is not None else self.page.get_by_test_id("stMain")
        slider = scope.get_by_test_id("stSlider").filter(
            has=self.page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True))
        thumb = slider.get_by_role("slider")
        thumb.focus()
        self.rerun(lambda: thumb.press(key))

    def choose_radio(self, option: str, *, within=None, group: str | None = None, tries: int = 3) -> None:
        """Click the radio option labelled ``option`` (in the main area unless ``within``; in the
        radio group whose text holds ``group``, if given) and wait for the rerun it causes.

        If no rerun finishes within 30 s and the option is still not selected, the click is taken
        as lost and repeated (once seen in CI: a click right after a page's first run changed
        nothing for 240 s); a click on an option already selected changes nothing."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        scope = within if within is not None else self.page.get_by_test_id("stMain")
        radios = scope.get_by_test_id("stRadio")
        if group is not None:
            radios = radios.filter(has_text=group)
        label = radios.get_by_text(option, exact=True)
        selected = radios.get_by_role("radio", name=option, exact=True)
        for attempt in range(tries):
            before = self.runs()
            label.click()
            try:
                self.page.wait_for_function("n => (window.__stRuns || 0) > n", arg=before, timeout=30_000,
                                            polling=100)
                break
            except PlaywrightTimeout:
                if selected.is_checked() or attempt + 1 == tries:
                    break
        self.wait_until(lambda: selected.is_checked(), f"the radio option {option!r} to be selected")
        self.settle()

    def toggle_checked(self, label: str, *, within=None) -> bool:
        """Whether the toggle whose label starts with ``label`` is on (main area unless ``within``)."""
        scope = within if within is not None else self.page.get_by_test_id("stMain")
        return scope.get_by_test_id("stCheckbox").filter(has_text=label).locator("input").first.is_checked()

    def set_toggle(self, label: str, on: bool, *, within=None) -> None:
        """Switch the toggle whose label starts with ``label`` on or off (waits for the rerun); in the
        main area unless ``within`` (e.g. :meth:`sidebar`)."""
        scope = within if within is not None else self.page.get_by_test_id("stMain")
        box = scope.get_by_test_id("stCheckbox").filter(has_text=label)
        if box.locator("input").first.is_checked() != on:
            self.rerun(lambda: box.locator("label").first.click())

    def reference_expander(self):
        """The sidebar's "Reference image" expander, opened."""
        exp = self.sidebar().get_by_test_id("stExpander").filter(has_text="Reference image")
        details = exp.locator("details")
        if details.get_attribute("open") is None:
            exp.locator("summary").click()
        self.wait_until(lambda: details.get_attribute("open") is not None, "the reference expander to open")
        return exp

    def choose_upload_source(self):
        exp = self.reference_expander()
        if not exp.locator("input[type=file]").count():
            self.choose_radio("Upload", within=exp, group="Source")
        exp.locator("input[type=file]").wait_for(state="attached")
        return exp

    def upload_reference(self, name: str, data: bytes, mime: str = "image/png") -> None:
        """Upload ``data`` as ``name`` through the sidebar's reference uploader; waits for the rerun."""
        exp = self.choose_upload_source()
        file_input = exp.locator("input[type=file]")
        self.rerun(lambda: file_input.set_input_files(files=[{"name": name, "mimeType": mime, "buffer": data}]))

    def alerts(self, scope=None) -> list[str]:
        scope = scope if scope is not None else self.page
        return [a.inner_text().strip() for a in scope.get_by_test_id("stAlert").all()]

    def screenshot(self, name: str) -> Path:
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def close_enough(shown: float, expected: float, decimals: int) -> bool:
    """Agreement at the displayed precision: within half a unit of the last shown decimal."""
    return math.isfinite(shown) and abs(shown - expected) <= 0.5 * 10.0 ** -decimals
