"""How much memory the real server keeps after a class has used it (issue 15).

The scenario: start ``streamlit run app.py`` as the README does, then ``--sessions`` browser
sessions (Chromium contexts), one after another, each

1. opens the app (Shift vs blur) with the working size 512 px (``?side=512``) and uploads its own
   distinct 512 px reference (a seeded crop of a sample photo, flipped and tinted per session),
2. visits Shift vs blur, the Distortion lab and Conventions, waiting for each page's run to finish.

Every session stays open until the last one has finished (so all of them hold their state at
once), then all are closed and the server idles for ``--settle`` seconds. The server's resident
set (its process and any children, from psutil) is sampled every 0.5 s throughout: ``peak`` is
the largest sample, ``end`` the last one after the settle, ``after_first_page`` the sample when
the first session's first page had finished. Results go to ``benchmarks/results/memory-<host>.json`` (:func:`machine.host_tag`).

    .venv/bin/python benchmarks/memory.py [--sessions 10] [--settle 180] [--out PATH]

Needs Chromium at /usr/bin/chromium and playwright (``scripts/setup.sh --test``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.driver import AppPage, launch_options, start_server  # noqa: E402
from machine import host_tag  # noqa: E402  (benchmarks/machine.py)

SIDE = 512
PAGES_VISITED = ("Shift vs blur", "Distortion lab", "Conventions")
GB = 1e9


def reference_png(seed: int, side: int = SIDE) -> bytes:
    """A distinct ``side``×``side`` PNG per seed: a random crop of a sample photo, flipped and tinted."""
    rng = np.random.default_rng(seed)
    photos = sorted((REPO / "sample_images").glob("*.png"))
    img = Image.open(photos[seed % len(photos)]).convert("RGB")
    scale = side * rng.uniform(1.0, 1.5) / min(img.size)
    img = img.resize((max(side, round(img.width * scale)), max(side, round(img.height * scale))),
                     Image.BILINEAR)
    x0 = int(rng.integers(0, img.width - side + 1))
    y0 = int(rng.integers(0, img.height - side + 1))
    arr = np.asarray(img.crop((x0, y0, x0 + side, y0 + side)), dtype=np.float32)
    if rng.random() < 0.5:
        arr = arr[:, ::-1]
    arr = np.clip(arr * rng.uniform(0.85, 1.15, size=3), 0, 255)
    buf = io.BytesIO()
    Image.fromarray(arr.astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its children (0 once it is gone)."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class Sampler(threading.Thread):
    """Samples :func:`tree_rss` every ``interval`` seconds; ``mark(label)`` records a labelled sample."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.t0 = time.monotonic()
        self.samples: list[tuple[float, int]] = []
        self.marks: list[dict] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.monotonic() - self.t0, tree_rss(self.pid)))
            self._halt.wait(self.interval)

    def mark(self, label: str) -> int:
        rss = tree_rss(self.pid)
        self.marks.append({"t_s": round(time.monotonic() - self.t0, 1), "step": label, "rss_gb": round(rss / GB, 3)})
        print(f"  {self.marks[-1]['t_s']:7.1f} s  {rss / GB:6.2f} GB  {label}", flush=True)
        return rss

    def stop(self) -> None:
        self._halt.set()
        self.join()

    @property
    def peak(self) -> int:
        return max((r for _, r in self.samples), default=0)


def budgets() -> dict:
    """The memory settings in force for the server (it inherits this process's environment)."""
    from lpips_core import caching

    env = {k: os.environ[k] for k in sorted(os.environ)
           if k.startswith(("LPIPS_EXPLORER_", "MALLOC_", "LD_PRELOAD"))}
    return {"reference_cache_mb_per_model": caching.cache_budget() / (1 << 20),
            "reference_cache_mb_all_models": caching.total_cache_budget() / (1 << 20),
            "default_cache_mb": caching.DEFAULT_CACHE_MB, "env": env}


def one_session(browser, server, index: int, sampler: Sampler, timeout: float):
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    app = AppPage(context.new_page(), server, timeout=timeout)
    app.open(f"?side={SIDE}", check_frame=False)  # the link's working size: uploads are brought to 512 px, not 256
    sampler.mark(f"session {index}: opened Shift vs blur")
    app.upload_reference(f"reference-{index}.png", reference_png(index))
    app.assert_alive()
    sampler.mark(f"session {index}: uploaded its {SIDE} px reference")
    for title in PAGES_VISITED:
        if app.title() != title:
            app.go(title)
        app.settle(quiet_ms=1500)
        app.assert_alive()
        sampler.mark(f"session {index}: {title} done")
    return context


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=10, help="browser sessions (default 10)")
    ap.add_argument("--settle", type=float, default=180.0, help="seconds to idle after closing all (default 180)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds any one page may take (default 600)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / f"memory-{host_tag()}.json")
    args = ap.parse_args(argv)
    if args.sessions < 1 or args.settle < 0:
        ap.error("--sessions must be ≥ 1 and --settle ≥ 0")

    from playwright.sync_api import sync_playwright

    log_path = REPO / "test-output" / f"memory-server-{os.getpid()}.log"
    server = start_server(log_path, timeout=240)
    sampler = Sampler(server.proc.pid)
    sampler.start()
    started = time.monotonic()
    try:
        sampler.mark("server healthy")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(**launch_options())
            contexts = []
            for i in range(args.sessions):
                contexts.append(one_session(browser, server, i, sampler, args.timeout))
                if i == 0:
                    after_first = next(m["rss_gb"] for m in sampler.marks if m["step"].endswith("opened Shift vs blur"))
            for c in contexts:
                c.close()
            browser.close()
        sampler.mark("all sessions closed")
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline:
            time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
            sampler.mark(f"idle {args.settle - max(0.0, deadline - time.monotonic()):.0f} s after closing")
        end = sampler.mark("end")
        server.assert_healthy()
    finally:
        sampler.stop()
        server.stop()

    result = {
        "scenario": f"{args.sessions} sessions, each its own {SIDE} px upload, visiting {', '.join(PAGES_VISITED)}; "
                    f"all closed, then {args.settle:.0f} s idle",
        "sessions": args.sessions, "settle_s": args.settle,
        "peak_gb": round(sampler.peak / GB, 3), "end_gb": round(end / GB, 3),
        "after_first_page_gb": after_first,
        "wall_s": round(time.monotonic() - started, 1),
        "budgets": budgets(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "steps": sampler.marks,
        "samples": [[round(t, 1), round(r / GB, 3)] for t, r in sampler.samples[::4]],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'sessions':>9} {'after 1st page':>15} {'peak':>8} {'end':>8}\n"
          f"{args.sessions:>9} {after_first:>12.2f} GB {result['peak_gb']:>5.2f} GB {result['end_gb']:>5.2f} GB"
          f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
