"""A class of thirty on one server: the "Judge it yourself" study under a real lecture's load.

The real server (``streamlit run app.py`` from the repository, so with the shipped
``.streamlit/config.toml`` and the default SQLite database, in a temporary ``LPIPS_EXPLORER_DATA``)
and simulated people who speak Streamlit's own websocket protocol, as the browser's frontend does
(``/_stcore/stream``, ``BackMsg``/``ForwardMsg`` protobufs): thirty Chromium tabs do not fit on two
cores, and the browser's drawing happens on the students' own devices anyway, not on the server.
The server does exactly the work it does for a browser: every script run, every fragment rerun,
every auto-refresh.

- The **lecturer** creates the study beforehand (every triplet's images and every metric's values
  computed and stored, as the page does) and keeps the lecturer link open: its live view
  refreshes every few seconds (the client honours ``auto_rerun`` as the browser does). With
  ``--lecturer browser`` it is a real Chromium tab instead.
- **Students** (``--students``, 30) join the study by its link (``/?study=CODE``) at random times
  within ``--join-window`` seconds (10), and answer its ``--triplets`` (12) triplets, each after a
  human pause drawn uniformly from ``--pause`` (0.5 to 3 s), clicking one of the three answer
  buttons (copy 1 and copy 2 45 % each, "can't tell" 10 %). A finished student stays on the page
  (which checks every few seconds whether the results are out) until everyone has finished.
- **Habits** (issue 41): some students double-tap (``--double-tappers``, 6 by default: the same
  answer message sent again 50, 150 or 400 ms later, as a second tap that reaches the server before
  the page drew the next triplet, or a replayed message) and some hold the key down
  (``--key-holders``, 4: the message sent again every 33 ms, the keyboard's auto-repeat, until the
  next triplet is drawn). Of the Chromium students, the first double-taps (two real taps on the
  button) and the second holds the key for a second (``keydown`` with ``repeat``), through the
  page's own guard. Every one of those presses must store nothing: answers stored = answers meant
  (one per triplet per judge), with the choice meant for that triplet.
- Measured: for every answer, the time from the click leaving the client to the next triplet's
  images arriving (``answer_to_next_s``: p50, p95, max); the time from joining to the first
  triplet; the server process's CPU time and resident memory (psutil, sampled every 0.5 s);
  answers sent and acknowledged (the next triplet came) against the rows stored in the database,
  duplicates (a participant and triplet stored twice) and mismatches (a stored choice other than
  the one clicked).
- The **restart** run stops the server when half the class's answers are in (and every student
  has joined) and starts it again on the same port (SIGTERM; ``--restart-signal KILL`` for a crash): every row stored before the
  stop must still be there, and each student's client reconnects as the browser does, with the
  same address (its ``p=`` token), and continues where they were.

Results go to ``benchmarks/results/class-load-<host>.json`` (``--out``), ``<host>`` naming the
machine (:func:`host_label`, e.g. ``cpu-2core-avx512``; ``--host``), with
:func:`machine.machine_info`. Target (issue 31): p95 answer → next triplet ≤ 1 s with 30 students
on the 2-core CPU, stored = sent, no duplicates, nothing lost across the restart. The JSON's
``kept`` says per run whether every answer was kept (the part that holds on any machine, loaded or
not) and ``met`` whether the latency target was met as well; the exit status follows ``met``, or
``kept`` with ``--exit-status kept`` (the test suite's check, which runs beside other work).

    .venv/bin/python benchmarks/class_load.py                 # both runs: steady, then with a restart
    .venv/bin/python benchmarks/class_load.py --runs steady --students 10 --triplets 4   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from machine import host_tag, machine_info  # noqa: E402  (benchmarks/machine.py)
from e2e.driver import free_port, launch_options  # noqa: E402  (tests/e2e/driver.py)

RESULTS = REPO / "benchmarks" / "results"
LOGS = REPO / "test-output" / "class-load"
TARGET_P95_S = 1.0
STUDY_PATH = "judge_it_yourself"
TRIPLET_RE = re.compile(r'data-triplet="(\d+)"')
CHOICE_RE = re.compile(r"study_choice_(\d)_(\d+)$")  # choice, triplet
CHOICES, WEIGHTS = (0, 1, 2), (0.45, 0.45, 0.10)
MAX_RECONNECTS = 6
#: A double-tapper's second tap, after the first (s), by triplet (cycled); a held key's auto-repeat period (s).
TAP_GAPS, REPEAT_S, HOLD_S = (0.05, 0.15, 0.4), 0.033, 1.0
KEYS = {0: "1", 1: "2", 2: "0"}  # a choice's keyboard shortcut on the page


# --------------------------------------------------------------------------- small helpers
def host_label() -> str:
    """:func:`machine.host_tag` (``2core-avx512-epyc``), prefixed by the GPU's name when torch sees CUDA
    (the app then computes there)."""
    tag = host_tag()
    try:
        import torch

        if torch.cuda.is_available():
            return (re.sub(r"[^a-z0-9]+", "", torch.cuda.get_device_name(0).lower())[:16] or "gpu") + "-" + tag
    except Exception:  # no torch, no CUDA: a CPU host
        pass
    return tag


def percentiles(values: list[float]) -> dict:
    """``{n, p50, p95, max, mean}`` in seconds (nearest-rank percentiles; ``None`` for no values)."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None, "mean": None}
    v = sorted(values)

    def rank(p: float) -> float:
        return v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))]

    return {"n": len(v), "p50": round(rank(50), 4), "p95": round(rank(95), 4), "max": round(v[-1], 4),
            "mean": round(statistics.fmean(v), 4)}


# --------------------------------------------------------------------------- the server
@dataclass
class Server:
    port: int
    data: Path
    log: Path
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> float:
        """Start ``streamlit run app.py`` (the shipped config) on :attr:`port`; seconds until healthy."""
        exe = REPO / ".venv" / "bin" / "streamlit"
        cmd = ([str(exe)] if exe.exists() else [sys.executable, "-m", "streamlit"]) + [
            "run", "app.py", "--server.port", str(self.port), "--server.address", "127.0.0.1"]
        env = dict(os.environ, LPIPS_EXPLORER_DATA=str(self.data), PYTHONUNBUFFERED="1")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(self.log, "a") as log:
            log.write(f"\n$ {' '.join(cmd)}\n")
            log.flush()
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.starts += 1
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        return time.monotonic() - t0
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server did not become healthy in {timeout:.0f} s; see {self.log}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass


class Monitor:
    """The server's CPU seconds and resident memory, sampled every ``every`` seconds (across restarts)."""

    def __init__(self, server: Server, every: float = 0.5):
        self.server, self.every = server, every
        self.cpu_done = 0.0  # CPU seconds of server processes that have ended
        self.rss_peak = 0
        self.rss_last = 0
        self._pid = None
        self._cpu_pid = 0.0
        self._cpu0 = None

    def _read(self) -> tuple[float, int] | None:
        import psutil

        proc = self.server.proc
        if proc is None or proc.poll() is not None:
            return None
        try:
            p = psutil.Process(proc.pid)
            procs = [p, *p.children(recursive=True)]
            cpu = sum(q.cpu_times().user + q.cpu_times().system for q in procs)
            rss = sum(q.memory_info().rss for q in procs)
        except psutil.Error:
            return None
        if self._pid != proc.pid:
            self.cpu_done += self._cpu_pid
            self._pid, self._cpu_pid = proc.pid, 0.0
        self._cpu_pid = cpu
        return cpu, rss

    def cpu(self) -> float:
        self._read()
        return self.cpu_done + self._cpu_pid

    def start(self) -> None:
        self._cpu0 = self.cpu()
        self.rss_peak = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            got = self._read()
            if got is not None:
                self.rss_last = got[1]
                self.rss_peak = max(self.rss_peak, got[1])
            try:
                await asyncio.wait_for(stop.wait(), self.every)
            except asyncio.TimeoutError:
                pass

    def result(self, wall: float) -> dict:
        cpu = self.cpu() - (self._cpu0 or 0.0)
        return {"cpu_s": round(cpu, 2), "cpu_percent_of_one_core": round(100 * cpu / wall, 1) if wall else None,
                "rss_mb_peak": round(self.rss_peak / 2**20, 1), "rss_mb_end": round(self.rss_last / 2**20, 1)}


# --------------------------------------------------------------------------- a Streamlit client
class Client:
    """One browser tab, as far as the server can tell: a websocket to ``/_stcore/stream`` that sends
    ``rerun_script`` back-messages (the first visit, button clicks, fragment auto-reruns) and reads
    the forward-messages (the page's query string and script hash, the elements drawn)."""

    def __init__(self, server: Server, name: str):
        self.server, self.name = server, name
        self.ws = None
        self.connected = False
        self.qs = ""
        self.page_name = ""
        self.page_hash = ""
        self.shown: int | None = None
        self.shown_at = 0.0
        self.done = False
        self.closed_study = False
        self.errors = 0  # "press again" messages seen
        self.buttons: dict[int, tuple[str, str]] = {}  # choice → (widget id, fragment id)
        self.buttons_for: int | None = None  # the triplet those buttons answer
        self.metrics: dict[str, str] = {}  # st.metric label → value
        self.runs = 0
        self._auto: dict[str, float] = {}
        self._auto_tasks: dict[str, asyncio.Task] = {}
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None

    async def connect(self, qs: str, page_name: str, *, retry_for: float = 0.0) -> None:
        """Open the websocket and ask for the page (``?qs`` at ``/page_name``), retrying while the server is down."""
        import websockets

        t0 = time.monotonic()
        while True:
            try:
                self.ws = await websockets.connect(f"ws://127.0.0.1:{self.server.port}/_stcore/stream",
                                                   subprotocols=["streamlit"], max_size=None, open_timeout=10)
                break
            except (OSError, websockets.exceptions.WebSocketException, asyncio.TimeoutError):
                if time.monotonic() - t0 > retry_for:
                    raise
                await asyncio.sleep(0.5)
        self.connected = True
        self.qs, self.page_name, self.page_hash = qs, page_name, ""
        self._reader = asyncio.create_task(self._read())
        await self.rerun()

    async def close(self) -> None:
        for t in self._auto_tasks.values():
            t.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()

    async def rerun(self, *, fragment_id: str = "", trigger: str | None = None, auto: bool = False) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        rs = msg.rerun_script
        rs.query_string, rs.page_script_hash, rs.page_name = self.qs, self.page_hash, self.page_name
        rs.fragment_id, rs.is_auto_rerun = fragment_id, auto
        if trigger is not None:
            w = rs.widget_states.widgets.add()
            w.id, w.trigger_value = trigger, True
        await self.ws.send(msg.SerializeToString())

    async def click(self, choice: int) -> None:
        widget, fragment = self.buttons[choice]
        await self.rerun(fragment_id=fragment, trigger=widget)

    async def press_again(self, choice: int, habit: str, triplet: int, log: "StudentLog") -> None:
        """A habit's extra presses for the answer just sent: the very same message (the old
        triplet's button) again: once after a gap (a double tap), or every 33 ms until the next
        triplet is drawn (a held key's auto-repeat)."""
        widget, fragment = self.buttons[choice]
        try:
            if habit == "double-tap":
                await asyncio.sleep(TAP_GAPS[triplet % len(TAP_GAPS)])
                await self.rerun(fragment_id=fragment, trigger=widget)
                log.extra_presses += 1
            elif habit == "hold-key":
                t0 = time.monotonic()
                while self.connected and self.shown == triplet and not self.done and time.monotonic() - t0 < HOLD_S:
                    await asyncio.sleep(REPEAT_S)
                    if self.shown != triplet:
                        break
                    await self.rerun(fragment_id=fragment, trigger=widget)
                    log.extra_presses += 1
        except Exception:  # noqa: BLE001 - the connection went away: the student's loop notices
            pass

    async def wait(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate()`` holds (checked after every message); ``False`` on timeout."""
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return predicate()
        return True

    async def _auto_rerun(self, fragment_id: str) -> None:
        while self.connected and fragment_id in self._auto:
            await asyncio.sleep(self._auto[fragment_id])
            if self.connected and fragment_id in self._auto:
                try:
                    await self.rerun(fragment_id=fragment_id, auto=True)
                except Exception:  # the connection went away: the reader notices
                    return

    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            async for raw in self.ws:
                m = ForwardMsg()
                m.ParseFromString(raw)
                self._handle(m)
                self._changed.set()
        except Exception:  # the server went away
            pass
        self.connected = False
        for t in self._auto_tasks.values():
            t.cancel()
        self._auto_tasks.clear()
        self._auto.clear()
        self._changed.set()

    def _handle(self, m) -> None:
        kind = m.WhichOneof("type")
        if kind == "new_session":
            self.page_hash = m.new_session.page_script_hash
        elif kind == "page_info_changed":
            self.qs = m.page_info_changed.query_string
        elif kind == "script_finished":
            self.runs += 1
        elif kind == "auto_rerun":
            fid = m.auto_rerun.fragment_id
            self._auto[fid] = max(0.5, m.auto_rerun.interval)
            if fid not in self._auto_tasks or self._auto_tasks[fid].done():
                self._auto_tasks[fid] = asyncio.create_task(self._auto_rerun(fid))
        elif kind == "stop_auto_rerun":
            for fid in m.stop_auto_rerun.fragment_ids:
                self._auto.pop(fid, None)
        elif kind == "delta" and m.delta.WhichOneof("type") == "new_element":
            el = m.delta.new_element
            ek = el.WhichOneof("type")
            if ek == "html":
                hit = TRIPLET_RE.search(el.html.body)
                if hit and "lx-tri" in el.html.body and int(hit.group(1)) != self.shown:
                    self.shown, self.shown_at = int(hit.group(1)), time.monotonic()
            elif ek == "button":
                hit = CHOICE_RE.search(el.button.id)
                if hit:
                    self.buttons[int(hit.group(1))] = (el.button.id, m.delta.fragment_id)
                    self.buttons_for = int(hit.group(2))
            elif ek == "alert":
                body = el.alert.body
                if "answered all" in body:
                    self.done = True
                elif "press again" in body:
                    self.errors += 1
                elif "closed this study" in body:
                    self.closed_study = True
            elif ek == "metric":
                self.metrics[el.metric.label] = el.metric.body


# --------------------------------------------------------------------------- the class
@dataclass
class StudentLog:
    index: int
    kind: str = "protocol"  # or "browser"
    token: str | None = None
    join_s: float | None = None
    latencies: list[float] = field(default_factory=list)
    across_restart: list[float] = field(default_factory=list)
    answers: dict[int, int] = field(default_factory=dict)  # acknowledged: triplet → choice
    clicks: int = 0
    press_again: int = 0
    reconnects: int = 0
    no_reply: int = 0  # answers the server never acknowledged (the client then reconnects)
    reloads: int = 0  # a browser tab reloaded by its student (it showed errors after a restart)
    reload_reasons: list[str] = field(default_factory=list)  # what the tab showed before each reload
    failures: list[str] = field(default_factory=list)
    habit: str = "single"  # or "double-tap", "hold-key"
    extra_presses: int = 0  # presses after the first for one answer (a second tap, auto-repeats)


def intended(seed: int, student: int, triplet: int) -> int:
    """The choice a student makes for a triplet (the same on a second try)."""
    return random.Random(f"{seed}:{student}:{triplet}").choices(CHOICES, WEIGHTS)[0]


async def student(server: Server, code: str, log: StudentLog, args, state: dict) -> StudentLog:
    k = log.index
    rng = random.Random(f"{args.seed}:pause:{k}")
    await asyncio.sleep(state["join_at"][k])
    c = Client(server, f"student-{k}")
    t0 = time.monotonic()
    habits: list[asyncio.Task] = []
    try:
        await c.connect(f"study={code}", "")
        if not await c.wait(lambda: c.shown is not None or c.done, 120):
            log.failures.append("no triplet within 120 s of joining")
            return log
        log.join_s = c.shown_at - t0 if c.shown is not None else time.monotonic() - t0
        state["joined"].add(k)
        log.token = dict(p.split("=", 1) for p in c.qs.split("&") if "=" in p).get("p")
        while not c.done and not c.closed_study:
            i = c.shown
            await asyncio.sleep(rng.uniform(*args.pause))
            if not c.connected or i is None:
                await reconnect(c, log, state)
                continue
            choice = intended(args.seed, k, i)
            if not await c.wait(lambda: c.buttons_for == i or not c.connected, 30):
                log.failures.append(f"triplet {i}: its buttons never came")
                break
            if not c.connected:
                continue
            errors0, sent = c.errors, time.monotonic()
            try:
                await c.click(choice)
            except Exception:
                await reconnect(c, log, state)
                continue
            if log.habit != "single":
                habits.append(asyncio.create_task(c.press_again(choice, log.habit, i, log)))
            log.clicks += 1
            state["clicks"] += 1
            ok = await c.wait(lambda: c.shown != i or c.done or c.errors > errors0 or not c.connected, 60)
            if not c.connected:  # the server went away: did the answer arrive? the page will say
                await reconnect(c, log, state)
                if c.shown != i:
                    log.answers[i] = choice
                    log.across_restart.append(time.monotonic() - sent)
                    state["acknowledged"] += 1
                continue
            if not ok:  # what a person does when the page stops answering: reload it (the address keeps their place)
                log.no_reply += 1
                if log.no_reply > MAX_RECONNECTS:
                    log.failures.append(f"triplet {i}: no reply within 60 s, {log.no_reply} times")
                    break
                await reconnect(c, log, state)
                if c.shown != i:  # it had arrived: the page shows the next triplet
                    log.answers[i] = choice
                    log.latencies.append(time.monotonic() - sent)
                    state["acknowledged"] += 1
                continue
            if c.shown == i and not c.done:  # "press again": the database was busy
                log.press_again += 1
                continue
            at = c.shown_at if not c.done else time.monotonic()
            (log.across_restart if state["restart_window"](sent) else log.latencies).append(at - sent)
            log.answers[i] = choice
            state["acknowledged"] += 1
        _finished(state)
        while not state["everyone_done"].is_set():  # a finished student keeps the page open
            done = asyncio.create_task(state["everyone_done"].wait())
            gone = asyncio.create_task(c.wait(lambda: not c.connected, 3600))
            await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
            for t in (done, gone):
                t.cancel()
            if not c.connected and not state["everyone_done"].is_set():
                await reconnect(c, log, state)
    except Exception as exc:  # noqa: BLE001 - a student's failure is recorded, not raised
        log.failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        _finished(state, k)
        for t in habits:
            t.cancel()
        log.token = log.token or dict(p.split("=", 1) for p in c.qs.split("&") if "=" in p).get("p")
        await c.close()
    return log


SHOWN_JS = """() => { const e = document.querySelector("[data-triplet]");
  const done = document.body.innerText.includes("answered all");
  return {shown: e && e.querySelector("img[data-patch]") ? +e.dataset.triplet : null, done}; }"""
LABELS = {0: "1 is closer", 1: "2 is closer", 2: "Can't tell"}
#: The answer to triplet ``i`` went through: another triplet's images, "answered all" or "press again".
CHANGED_JS = """([i]) => { const e = document.querySelector("[data-triplet]"), t = document.body.innerText;
  return t.includes("answered all") || t.includes("press again")
         || (e && +e.dataset.triplet !== i && !!e.querySelector("img[data-patch]")); }"""
#: The tab shows Streamlit's "Failed to fetch dynamically imported module" (or another exception box):
#: seen after a server restart in a tab that had to load a script while the server was away.
#: Read in one call, so the record is what the test saw: the exception box's text, the words around
#: the import failure, or "" when the tab is fine.
BROKEN_JS = """() => { const e = document.querySelector("[data-testid='stException']");
  if (e) return e.innerText.slice(0, 200).replace(/\\s+/g, " ") || "an exception box";
  const t = document.body.innerText, at = t.indexOf("Failed to fetch dynamically imported module");
  return at < 0 ? "" : t.slice(at, at + 200).replace(/\\s+/g, " "); }"""
#: The answer buttons take a press (the page's guard, ui.study_client: not just pressed, not just drawn).
ARMED_JS = "() => !!document.querySelector(\".st-key-study_answers[data-lx-answers='armed']\")"


async def browser_press(page, choice: int, habit: str, triplet: int, log: StudentLog) -> asyncio.Task | None:
    """One answer in the tab, as the student's habit makes it: a click; a double tap (a second tap
    on the same spot 50, 150 or 400 ms later, whatever the page shows by then); or the key held
    down for a second (``keydown`` with ``repeat`` every 33 ms). The first press is made here; the
    habit's extra presses go on in the returned task (the answer is timed meanwhile)."""
    button = page.get_by_role("button", name=LABELS[choice])
    if habit == "hold-key":
        await page.evaluate("() => document.activeElement && document.activeElement.blur()")
        await page.keyboard.down(KEYS[choice])

        async def hold() -> None:
            t0 = time.monotonic()
            try:
                while time.monotonic() - t0 < HOLD_S:
                    await asyncio.sleep(REPEAT_S)
                    await page.keyboard.down(KEYS[choice])  # sent with repeat=true: the keyboard's auto-repeat
                    log.extra_presses += 1
                await page.keyboard.up(KEYS[choice])
            except Exception:  # noqa: BLE001 - the tab went away (a restart, the end): the loop notices
                pass

        return asyncio.create_task(hold())
    box = await button.bounding_box(timeout=60_000)
    await button.click(timeout=60_000)
    if habit != "double-tap" or not box:
        return None

    async def second_tap() -> None:
        await asyncio.sleep(TAP_GAPS[triplet % len(TAP_GAPS)])
        try:
            await page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            log.extra_presses += 1
        except Exception:  # noqa: BLE001 - the tab went away (a restart, the end): the loop notices
            pass

    return asyncio.create_task(second_tap())


#: The page is connected and its script idle (a click now would have been answered).
IDLE_JS = """() => { const a = document.querySelector("[data-testid='stApp']");
  return !!a && a.getAttribute("data-test-script-state") === "notRunning"
         && a.getAttribute("data-test-connection-state") === "CONNECTED"; }"""


async def browser_student(browser, server: Server, code: str, log: StudentLog, args, state: dict) -> StudentLog:
    """A student in a real Chromium tab (1024×768): opens the link, clicks the answers; the time is
    taken until the next triplet's images are in the page (``[data-triplet]`` changed)."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    k = log.index
    rng = random.Random(f"{args.seed}:pause:{k}")
    ctx = await browser.new_context(viewport={"width": 1024, "height": 768})
    habit_tasks: list[asyncio.Task] = []  # a habit's extra presses still going on (a held key, a second tap)
    try:
        page = await ctx.new_page()
        page.set_default_timeout(120_000)
        await asyncio.sleep(state["join_at"][k])
        t0 = time.monotonic()
        await page.goto(f"{server.url}/?study={code}", wait_until="domcontentloaded")
        for attempt in range(3):
            try:
                await page.wait_for_function("() => !!document.querySelector('[data-triplet] img[data-patch]')",
                                             polling=50, timeout=60_000)
                break
            except PlaywrightTimeout:
                broken = "" if attempt == 2 else await page.evaluate(BROKEN_JS)
                if not broken:
                    raise
                log.reloads += 1  # the server went away while the tab loaded its scripts: reload, as a person would
                log.reload_reasons.append(broken)
                await page.reload(wait_until="domcontentloaded")
        log.join_s = time.monotonic() - t0
        state["joined"].add(k)
        while True:
            for t in habit_tasks:  # the key let go, the second tap made: then the next answer
                await asyncio.wait_for(t, 30)
            habit_tasks.clear()
            now = await page.evaluate(SHOWN_JS)
            if now["done"]:
                break
            i = now["shown"]
            if i is None:  # between triplets (a reload, a rerun): wait for the page to show one
                await page.wait_for_function(f"() => ({SHOWN_JS})().shown !== null || ({SHOWN_JS})().done",
                                             polling=50, timeout=60_000)
                continue
            await asyncio.sleep(rng.uniform(*args.pause))
            choice = intended(args.seed, k, i)
            # a person presses once the buttons look ready (the page's guard: a moment after a new triplet)
            await page.wait_for_function(f"() => ({ARMED_JS})() || ({CHANGED_JS})([{i}])", polling=20,
                                         timeout=60_000)
            sent = time.monotonic()
            reloaded = False
            for attempt in range(8):  # a click the page ignored (sent while it reconnected) is made again
                extra = await browser_press(page, choice, log.habit if attempt == 0 else "single", i, log)
                if extra is not None:
                    habit_tasks.append(extra)
                log.clicks += 1
                state["clicks"] += 1
                try:
                    await page.wait_for_function(CHANGED_JS, arg=[i], polling=20, timeout=5_000)
                    break
                except PlaywrightTimeout:
                    broken = await page.evaluate(BROKEN_JS)
                    if broken:  # what a person does: reload (the address keeps their place)
                        log.reloads += 1
                        log.reload_reasons.append(broken)
                        await page.reload(wait_until="domcontentloaded")
                        await page.wait_for_function("() => !!document.querySelector('[data-triplet] img[data-patch]')"
                                                     " || document.body.innerText.includes('answered all')", polling=50)
                        reloaded = True
                        break
                    if attempt == 7:
                        await page.wait_for_function(CHANGED_JS, arg=[i], polling=20, timeout=60_000)
                        break
                    # still running (a slow answer, or the page's own rerun after a reconnect, which
                    # drops a click sent meanwhile): wait until it is idle, then look again
                    await page.wait_for_function(f"() => ({CHANGED_JS})([{i}]) || ({IDLE_JS})()", polling=50,
                                                 timeout=60_000)
                    if await page.evaluate(CHANGED_JS, [i]):
                        break
            if reloaded:  # the click may or may not have arrived: the page says where they are
                now = await page.evaluate(SHOWN_JS)
                if now["done"] or now["shown"] != i:
                    log.answers[i] = choice
                    log.across_restart.append(time.monotonic() - sent)
                    state["acknowledged"] += 1
                continue
            took = time.monotonic() - sent
            after = await page.evaluate(SHOWN_JS)
            if not after["done"] and after["shown"] == i:
                log.press_again += 1
                continue
            (log.across_restart if state["restart_window"](sent) else log.latencies).append(took)
            log.answers[i] = choice
            state["acknowledged"] += 1
        from urllib.parse import parse_qs, urlsplit

        log.token = parse_qs(urlsplit(page.url).query).get("p", [None])[0]
        _finished(state)
        await state["everyone_done"].wait()
    except Exception as exc:  # noqa: BLE001 - a student's failure is recorded, not raised
        where = ""
        try:  # what the tab showed: its connection and script state, the text; a screenshot
            where = await page.evaluate("""() => { const a = document.querySelector("[data-testid='stApp']");
              return [a && a.getAttribute("data-test-connection-state"), a && a.getAttribute("data-test-script-state"),
                      document.body.innerText.slice(0, 300)].join(" | "); }""")
            LOGS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(LOGS / f"browser-student-{k}-failed.png"))
        except Exception:  # the tab itself is gone
            pass
        log.failures.append(f"{type(exc).__name__}: {str(exc)[:200]} [{where}]")
    finally:
        _finished(state, k)
        for t in habit_tasks:
            t.cancel()
        try:
            await asyncio.wait_for(ctx.close(), 60)
        except Exception as exc:  # noqa: BLE001 - recorded
            log.failures.append(f"the tab did not close: {type(exc).__name__}")
    return log


def _finished(state: dict, k: int | None = None) -> None:
    """Count a student as finished once (their answers all in, or given up)."""
    if k is not None:
        state["joined"].add(k)
    task = asyncio.current_task()
    if getattr(task, "_class_load_finished", False):
        return
    task._class_load_finished = True
    state["finished"] += 1
    if state["finished"] >= state["students"]:
        state["all_answered"].set()


async def reconnect(c: Client, log: StudentLog, state: dict) -> None:
    """What the browser does when the server comes back: reconnect, ask for the same address."""
    log.reconnects += 1
    if log.reconnects > MAX_RECONNECTS:  # one restart needs one or two; more is a fault to report
        raise RuntimeError(f"gave up after {MAX_RECONNECTS} reconnects")
    await c.close()
    c.shown, c.buttons, c.buttons_for = None, {}, None
    await c.connect(c.qs, STUDY_PATH, retry_for=180)
    await c.wait(lambda: c.shown is not None or c.done or not c.connected, 120)


async def lecturer_ws(server: Server, code: str, key: str, state: dict) -> dict:
    """The lecturer link kept open (its live view auto-refreshes); reconnects after a restart."""
    c = Client(server, "lecturer")
    qs = f"study={code}&key={key}"
    await c.connect(qs, STUDY_PATH)
    await c.wait(lambda: "Answers" in c.metrics, 120)
    state["lecturer_open"].set()
    reconnects = 0

    async def keep_open() -> None:  # the browser reconnects by itself after a server restart
        nonlocal reconnects
        while True:
            await c.wait(lambda: not c.connected, 3600)
            reconnects += 1
            await c.close()
            await c.connect(qs, STUDY_PATH, retry_for=180)

    keeper = asyncio.create_task(keep_open())
    try:
        await state["everyone_done"].wait()
        # the live view catches up by itself (auto-refresh), then shows every stored answer
        t0 = time.monotonic()
        want = str(state["stored_final"]())
        await c.wait(lambda: c.metrics.get("Answers") == want, 20)
        return {"answers_shown": c.metrics.get("Answers"), "answers_stored": int(want),
                "students_shown": c.metrics.get("Students"), "caught_up_s": round(time.monotonic() - t0, 2),
                "script_runs": c.runs, "reconnects": reconnects}
    finally:
        keeper.cancel()
        await c.close()


async def lecturer_browser(server: Server, code: str, key: str, state: dict) -> dict:
    """The lecturer link in a real Chromium tab (1024×768)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**launch_options())
        try:
            page = await (await browser.new_context(viewport={"width": 1024, "height": 768})).new_page()
            await page.goto(f"{server.url}/{STUDY_PATH}?study={code}&key={key}", wait_until="domcontentloaded")
            await page.wait_for_selector("text=The class, live", timeout=180_000)
            state["lecturer_open"].set()
            await state["everyone_done"].wait()
            want = str(state["stored_final"]())
            t0 = time.monotonic()
            shown = None
            while time.monotonic() - t0 < 20:
                values = await page.locator("[data-testid='stMetricValue']").all_inner_texts()
                shown = values[1].strip() if len(values) > 1 else None
                if shown == want:
                    break
                await asyncio.sleep(0.5)
            LOGS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(LOGS / f"lecturer-{code}.png"))
            return {"answers_shown": shown, "caught_up_s": round(time.monotonic() - t0, 2)}
        finally:
            await browser.close()


def create_study(data: Path, n: int, seed: int):
    """The lecturer's study, made as the page makes it: every image and metric value computed now."""
    import sqlalchemy as sa

    from lpips_core.spec import standard_specs
    from lpips_explorer.study import prepare
    from lpips_explorer.study import store as S
    from lpips_explorer.study import triplets as T

    t0 = time.monotonic()
    specs = standard_specs()
    models = {s: s.build() for s in specs if s.learned and s.availability()[0]}
    families = ["shift-vs-blur", "noise-vs-blur", "jpeg-vs-noise"]
    recipes = T.make_recipes(n, families=families, seed=seed)
    done = prepare.prepare(recipes, specs, models)
    engine = sa.create_engine(S.sqlite_url(data))
    store = S.StudyStore(engine)
    study = store.create_study(recipes, families=families, seed=seed, reveal="each",
                               digests=[d.digest for d in done], pngs=[d.pngs for d in done],
                               distances=[d.distances for d in done])
    return store, study, round(time.monotonic() - t0, 2), len(models)


async def settle(monitor: Monitor, *, quiet: float = 0.15, span: float = 2.0, limit: float = 90.0) -> float:
    """Wait until the server has used under ``quiet`` of a core for ``span`` seconds (its background
    warm-up of the default models done), as before a lecture; returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        c0 = monitor.cpu()
        await asyncio.sleep(span)
        if monitor.cpu() - c0 < quiet * span:
            break
    return round(time.monotonic() - t0, 2)


def _task_error(task: asyncio.Task, otherwise: str) -> str:
    """What ended a task: its exception, or ``otherwise`` while it still runs."""
    if task.done() and not task.cancelled() and task.exception() is not None:
        return f"{type(task.exception()).__name__}: {task.exception()}"
    return otherwise


async def one_run(name: str, server: Server, monitor: Monitor, args) -> dict:
    from lpips_explorer.study import access

    store, study, prep_s, n_models = create_study(server.data, args.triplets, args.seed + len(name))
    n = args.triplets
    rng = random.Random(f"{args.seed}:{name}")
    state = {"join_at": sorted(rng.uniform(0, args.join_window) for _ in range(args.students)),
             "clicks": 0, "acknowledged": 0, "finished": 0, "joined": set(), "students": args.students,
             "all_answered": asyncio.Event(), "everyone_done": asyncio.Event(), "lecturer_open": asyncio.Event(),
             "restart_window": lambda t: False, "stored_final": lambda: store.counts(study)[1]}
    stop_monitor = asyncio.Event()
    restart: dict = {}
    lect_task = None
    if args.lecturer == "ws":
        lect_task = asyncio.create_task(lecturer_ws(server, study.code, study.lecturer_key, state))
    elif args.lecturer == "browser":
        lect_task = asyncio.create_task(lecturer_browser(server, study.code, study.lecturer_key, state))
    run_failures: list[str] = []
    if lect_task is not None:  # the lecturer's page is open before the class joins
        opened = asyncio.create_task(state["lecturer_open"].wait())
        await asyncio.wait({opened, lect_task}, timeout=240, return_when=asyncio.FIRST_COMPLETED)
        opened.cancel()
        if not state["lecturer_open"].is_set():
            run_failures.append("the lecturer's page did not open: " + _task_error(lect_task, "not within 240 s"))
    warm_s = await settle(monitor)
    monitor.start()
    mon = asyncio.create_task(monitor.run(stop_monitor))
    t0 = time.monotonic()
    n_browser = min(args.browser_students, args.students)
    pw = browser = None
    if n_browser:
        from playwright.async_api import async_playwright

        pw = await async_playwright().start()
        browser = await pw.chromium.launch(**launch_options())
    logs = [StudentLog(k, kind="browser" if k < n_browser else "protocol") for k in range(args.students)]
    habit_of = {}  # the first browser student double-taps, the second holds the key; then the protocol ones
    if n_browser and args.double_tappers:
        habit_of[0] = "double-tap"
    if n_browser > 1 and args.key_holders:
        habit_of[1] = "hold-key"
    protocol = [k for k in range(n_browser, args.students)]
    for k in protocol[:args.double_tappers]:
        habit_of[k] = "double-tap"
    for k in protocol[args.double_tappers:args.double_tappers + args.key_holders]:
        habit_of[k] = "hold-key"
    for log in logs:
        log.habit = habit_of.get(log.index, "single")
    tasks = [asyncio.create_task(browser_student(browser, server, study.code, log, args, state) if log.kind == "browser"
                                 else student(server, study.code, log, args, state)) for log in logs]

    async def restarter() -> None:
        half = args.students * n // 2
        # half the answers in, and everyone in the room (a tab still loading the app's scripts when
        # the server goes away shows "Failed to fetch dynamically imported module" until reloaded)
        while state["acknowledged"] < half or len(state["joined"]) < args.students:
            if state["all_answered"].is_set():  # the class finished (or gave up) before half its answers
                run_failures.append(f"no restart: {state['acknowledged']} of {half} answers before the class "
                                    f"finished, {len(state['joined'])} of {args.students} students joined")
                return
            await asyncio.sleep(0.05)
        before = {(j.session, j.triplet, j.choice) for j in store.judgements(study)}
        sig = signal.SIGKILL if args.restart_signal == "KILL" else signal.SIGTERM
        t_stop = time.monotonic()
        # an answer sent while the server was going down or down is timed "across the restart"
        state["restart_window"] = lambda t: t_stop <= t <= restart.get("up_at", math.inf)
        await asyncio.to_thread(server.stop, sig)
        stored_at_stop = {(j.session, j.triplet, j.choice) for j in store.judgements(study)}
        start_s = await asyncio.to_thread(server.start)
        restart.update({"at_answers_acknowledged": state["acknowledged"], "signal": args.restart_signal,
                        "stored_before_stop": len(before), "stored_at_stop": len(stored_at_stop),
                        "server_start_s": round(start_s, 2), "down_s": round(time.monotonic() - t_stop, 2),
                        "up_at": time.monotonic()})
        restart["_at_stop"] = stored_at_stop

    rtask = asyncio.create_task(restarter()) if name == "restart" else None
    try:  # every wait inside has its own limit; this one bounds the whole run whatever happens
        await asyncio.wait_for(state["all_answered"].wait(), args.deadline)
    except asyncio.TimeoutError:
        run_failures.append(f"the class had not finished after {args.deadline:.0f} s")
    state["everyone_done"].set()
    _, late = await asyncio.wait(tasks, timeout=60)
    for task in late:
        task.cancel()
    for log, task in zip(logs, tasks):
        if task in late:
            log.failures.append(f"still running at the deadline, {len(log.answers)} answers acknowledged")
        elif _task_error(task, ""):
            log.failures.append(_task_error(task, ""))
    wall = time.monotonic() - t0
    if browser is not None:
        try:  # a wedged Chromium must not hold the run: the figures are in already
            await asyncio.wait_for(browser.close(), 60)
            await asyncio.wait_for(pw.stop(), 60)
        except asyncio.TimeoutError:
            run_failures.append("Chromium did not close within 60 s")
    stop_monitor.set()
    await mon
    if rtask is not None:
        await asyncio.wait_for(rtask, 300)  # a stop takes ≤ 60 s, a start ≤ 120 s
    lect = None
    if lect_task is not None:
        await asyncio.wait({lect_task}, timeout=60)
        if lect_task.done() and lect_task.exception() is None:
            lect = lect_task.result()
        else:
            lect_task.cancel()
            run_failures.append("the lecturer's page: " + _task_error(lect_task, "no answer within 60 s"))

    # what the database holds against what the students did
    rows = store.judgements(study)
    stored = {(j.session, j.triplet): j.choice for j in rows}
    duplicates = len(rows) - len(stored)
    acknowledged = sum(len(log.answers) for log in logs)
    mismatched, missing, strangers = 0, 0, len(stored)
    per_student = []
    for log in logs:
        pid = access.participant_id(log.token) if log.token else None
        mine = {t: c for (s, t), c in stored.items() if s == pid}
        strangers -= len(mine)
        missing += sum(1 for t in log.answers if t not in mine)
        mismatched += sum(1 for t, c in mine.items() if c != intended(args.seed, log.index, t))
        per_student.append(len(mine))
    result = {
        "name": name,
        "students": args.students, "triplets": n, "study_prepare_s": prep_s, "learned_models": n_models,
        "server_settled_s": warm_s,
        "wall_s": round(wall, 2),
        "answers": {"clicks_sent": state["clicks"], "acknowledged": acknowledged, "stored": len(rows),
                    "expected": args.students * n, "duplicates": duplicates, "mismatched": mismatched,
                    "acknowledged_not_stored": missing, "stored_for_no_student": strangers,
                    "press_again": sum(log.press_again for log in logs),
                    "no_reply_reconnected": sum(log.no_reply for log in logs),
                    "students_complete": sum(1 for c in per_student if c == n)},
        "answer_to_next_s": percentiles([x for log in logs for x in log.latencies]),
        "answer_to_next_browser_s": percentiles([x for log in logs if log.kind == "browser" for x in log.latencies]),
        "browser_students": n_browser,
        "habits": {h: sum(1 for log in logs if log.habit == h) for h in ("double-tap", "hold-key")},
        "extra_presses_sent": sum(log.extra_presses for log in logs),
        "browser_tabs_reloaded": sum(log.reloads for log in logs),
        "browser_reload_reasons": sorted({r for log in logs for r in log.reload_reasons})[:5],
        "join_to_first_triplet_s": percentiles([log.join_s for log in logs if log.join_s is not None]),
        "server": monitor.result(wall),
        "failures": (run_failures + [f"student {log.index}: {f}" for log in logs for f in log.failures])[:20],
        "lecturer": lect,
    }
    if restart:
        at_stop = restart.pop("_at_stop")
        restart.pop("up_at", None)
        now = {(j.session, j.triplet, j.choice) for j in rows}
        restart["lost_after_restart"] = len(at_stop - now)
        restart["answers_across_restart_s"] = percentiles([x for log in logs for x in log.across_restart])
        restart["reconnects"] = sum(log.reconnects for log in logs)
        result["restart"] = restart
    return result


async def main_async(args) -> dict:
    data = Path(tempfile.mkdtemp(prefix="class-load-"))
    server = Server(free_port(), data, LOGS / "server.log")
    if server.log.exists():
        server.log.unlink()
    monitor = Monitor(server)
    out = {"benchmark": "class_load", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "host": args.host or host_label(), "machine": machine_info(),
           "config": {"students": args.students, "triplets": args.triplets, "join_window_s": args.join_window,
                      "pause_s": list(args.pause), "lecturer": args.lecturer, "seed": args.seed,
                      "browser_students": args.browser_students, "double_tappers": args.double_tappers,
                      "key_holders": args.key_holders,
                      "server": "streamlit run app.py (the shipped .streamlit/config.toml), SQLite in a temp folder"},
           "target_p95_s": TARGET_P95_S, "runs": []}
    try:
        out["server_start_s"] = round(await asyncio.to_thread(server.start), 2)
        for name in args.runs:
            print(f"class_load: run {name!r}: {args.students} students × {args.triplets} triplets …", flush=True)
            res = await one_run(name, server, monitor, args)
            out["runs"].append(res)
            _print(res)
    finally:
        server.stop()
    # nothing lost or doubled, every student finished: what the server must keep under any load
    out["kept"] = {r["name"]: bool(r["answers"]["stored"] == r["answers"]["acknowledged"] == r["answers"]["expected"]
                                   and r["answers"]["duplicates"] == 0 and r["answers"]["mismatched"] == 0
                                   and r["answers"]["acknowledged_not_stored"] == 0
                                   and r["answers"]["stored_for_no_student"] == 0
                                   and r.get("restart", {}).get("lost_after_restart", 0) == 0
                                   and not r["failures"])
                   for r in out["runs"]}
    # ... and the latency target on top (a figure of the machine it ran on, measured idle)
    out["met"] = {r["name"]: bool(out["kept"][r["name"]] and r["answer_to_next_s"]["p95"] is not None
                                  and r["answer_to_next_s"]["p95"] <= TARGET_P95_S)
                  for r in out["runs"]}
    return out


def _print(r: dict) -> None:
    a, lat, srv = r["answers"], r["answer_to_next_s"], r["server"]
    print(f"  answers: {a['clicks_sent']} clicks, {a['acknowledged']} acknowledged, {a['stored']} stored of "
          f"{a['expected']}; duplicates {a['duplicates']}, mismatched {a['mismatched']}, press-again {a['press_again']}, "
          f"no reply in 60 s {a['no_reply_reconnected']}")
    print(f"  habits: {r['habits']}, extra presses sent {r['extra_presses_sent']} (each must store nothing)")
    print(f"  answer → next triplet: p50 {lat['p50']} s, p95 {lat['p95']} s, max {lat['max']} s (n={lat['n']}); "
          f"join → first triplet p95 {r['join_to_first_triplet_s']['p95']} s")
    print(f"  server: {srv['cpu_s']} CPU-s over {r['wall_s']} s ({srv['cpu_percent_of_one_core']}% of a core), "
          f"RSS peak {srv['rss_mb_peak']} MB")
    if "restart" in r:
        x = r["restart"]
        print(f"  restart ({x['signal']}) after {x['at_answers_acknowledged']} answers: down {x['down_s']} s, "
              f"lost {x['lost_after_restart']}, answers across it p95 {x['answers_across_restart_s']['p95']} s")
    if r["browser_tabs_reloaded"]:
        print(f"  browser tabs reloaded by their student: {r['browser_tabs_reloaded']} "
              f"(they showed: {r['browser_reload_reasons']})")
    if r["failures"]:
        print("  failures:", *r["failures"][:8], sep="\n    ")
        print(f"  the server's log ({LOGS.relative_to(REPO) / 'server.log'}), its last lines:")
        print(*("    " + line for line in _log_tail(LOGS / "server.log", 30)), sep="\n")


def _log_tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return ["(no log)"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--triplets", type=int, default=12)
    ap.add_argument("--join-window", type=float, default=10.0, help="students join within this many seconds")
    ap.add_argument("--pause", type=float, nargs=2, default=(0.5, 3.0), metavar=("MIN", "MAX"),
                    help="a student's pause before each answer, uniform in [MIN, MAX] seconds")
    ap.add_argument("--runs", type=lambda s: [x for x in s.split(",") if x], default=["steady", "restart"],
                    help="comma-separated: steady, restart (default both)")
    ap.add_argument("--lecturer", choices=("ws", "browser", "none"), default="ws",
                    help="the lecturer's open live view: a protocol client (default), Chromium, or none")
    ap.add_argument("--browser-students", type=int, default=2,
                    help="how many of the students are real Chromium tabs (the rest speak the protocol)")
    ap.add_argument("--double-tappers", type=int, default=6,
                    help="protocol students who tap twice (the same message again 50/150/400 ms later); "
                         "the first Chromium student double-taps too (when this is > 0)")
    ap.add_argument("--key-holders", type=int, default=4,
                    help="protocol students who hold the key (the message again every 33 ms until the next "
                         "triplet); the second Chromium student holds the key for 1 s (when this is > 0)")
    ap.add_argument("--restart-signal", choices=("TERM", "KILL"), default="TERM")
    ap.add_argument("--deadline", type=float, default=900.0,
                    help="seconds a run may take before its unfinished students are stopped and reported (900)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--host", default=None, help="host label for the file name (default: host_label())")
    ap.add_argument("--out", type=Path, default=None,
                    help="the JSON file (default benchmarks/results/class-load-<host>.json)")
    ap.add_argument("--exit-status", choices=("target", "kept"), default="target",
                    help="what a 0 exit status says: every run met the target, latency included (default), "
                         "or every run kept every answer (stored = meant, none lost, every student done), "
                         "for a check that runs beside other work, where a latency is no figure")
    args = ap.parse_args(argv)
    bad = [r for r in args.runs if r not in ("steady", "restart")]
    if bad or not args.runs:
        ap.error(f"--runs takes steady and/or restart, got {args.runs}")
    if args.students < 1 or args.triplets < 1 or not 0 <= args.pause[0] <= args.pause[1]:
        ap.error("--students and --triplets must be >= 1 and --pause MIN <= MAX")
    out = asyncio.run(main_async(args))
    path = args.out or RESULTS / f"class-load-{out['host']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"class_load: wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}; "
          f"kept: {out['kept']}; met: {out['met']}")
    return 0 if all(out["met" if args.exit_status == "target" else "kept"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
