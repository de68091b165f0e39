"""The README's pictures of the app, taken from the real server by the browser suite so they stay
current: each page in a 1280 × 800 window with the sidebar open, as a new visitor sees it.

A picture is replaced only when the page looks different (more than 0.5 % of its pixels changed),
so a run that changes nothing leaves ``docs/img/`` as it was. The README must show these files.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from PIL import Image

from .driver import REPO, AppPage

IMG = REPO / "docs" / "img"
#: (file, URL path, what must be on the page once drawn, the text scrolled to the top of the window
#: (None: the page's top))
SHOTS = [
    ("shift-vs-blur.png", "", "Verdict", None),
    ("distortion-lab.png", "distortion_lab", "Where the distance comes from", "Where the distance comes from"),
    ("conventions.png", "conventions", "LPIPS against the size", "Backbones"),
    ("debug-a-score.png", "debug_a_score", "Checks, in the same order", "What moves this score"),
]

#: Scrolls the innermost element whose text starts with the argument near the window's top.
_SCROLL_TO = """(text) => {
  const all = [...document.querySelectorAll('[data-testid="stMain"] *')]
    .filter(e => e.textContent.trim().startsWith(text));
  const el = all[all.length - 1];
  if (!el) return false;
  el.scrollIntoView({block: 'start'});
  for (let p = el.parentElement; p; p = p.parentElement) {  // a little of what is above it stays in view
    if (p.scrollTop > 0) { p.scrollTop -= 60; break; }
  }
  return true;
}"""


def _changed(old: bytes, new: bytes) -> bool:
    a = np.asarray(Image.open(io.BytesIO(old)).convert("RGB"), dtype=np.int16)
    b = np.asarray(Image.open(io.BytesIO(new)).convert("RGB"), dtype=np.int16)
    if a.shape != b.shape:
        return True
    return float((np.abs(a - b).max(axis=2) > 24).mean()) > 0.005


@pytest.mark.parametrize("name, path, text, top", SHOTS, ids=[s[0] for s in SHOTS])
def test_readme_screenshot(server, browser, name, path, text, top):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    try:
        ap = AppPage(context.new_page(), server)
        ap.open(path)
        ap.wait_until(lambda: text in ap.main_text(), f"{text!r} on the page")
        ap.settle(quiet_ms=1500)
        if top is not None:  # waited for: on a busy machine the part that holds it may still be running
            ap.wait_until(lambda: ap.page.evaluate(_SCROLL_TO, top), f"{top!r} on the page")
            ap.page.wait_for_timeout(800)  # charts drawn on scroll
        assert ap.exceptions() == [] and not any("error" in a.lower() for a in ap.alerts())
        png = ap.page.screenshot(full_page=False)
    finally:
        context.close()
    assert Image.open(io.BytesIO(png)).size == (1280, 800)
    IMG.mkdir(parents=True, exist_ok=True)
    dest = IMG / name
    if not dest.exists() or _changed(dest.read_bytes(), png):
        dest.write_bytes(png)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"docs/img/{name}" in readme, f"the README does not show docs/img/{name}"
