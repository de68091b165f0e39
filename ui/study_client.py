"""The class study's student page in the browser: one tap is one answer, and the browser keeps the judge.

One ``st.components.v2`` component (inline JavaScript in the app's own page: no iframe, nothing
fetched), mounted once on the student's page by ``app_pages/judge_it_yourself.py``:

- **The answer buttons' guard.** Listeners in the capture phase (they run before Streamlit's own):
  a key held down (``keydown`` with ``repeat``) never answers; after a press (a click, a tap or a
  key) the three buttons take nothing more until the page has drawn again (the triplet block's
  ``data-draw`` changed; at most :data:`UNLOCK_MS`, should a reply never come); a newly shown
  triplet's buttons take answers only after :data:`MIN_LOOK_MS` (the second tap of a double tap,
  arriving just after the next triplet appeared, is not an answer to it). While the buttons take
  nothing their row carries ``aria-disabled="true"`` and ``data-lx-answers="locked"`` or
  ``"waiting"`` (``"armed"`` otherwise), and looks disabled. The server keeps its own rule: an
  answer counts only for the participant's current triplet (:meth:`StudyStore.answer`).
- **The judge's cookie.** ``lx_p_<CODE>`` = the participant token, first-party, ``SameSite=Lax``,
  :data:`KEEP_DAYS` days: the same browser opening the bare link again continues as the same
  judge (the server reads it from ``st.context.cookies``). Nothing is sent back: a browser that
  keeps no cookie at all is known to the server from the cookies its connection carried (none).
- **The lecturer's key**, on the lecturer's page: ``lx_k_<CODE>``, a session cookie (gone when the
  browser closes), so that a reload of the projector view or a server restart keeps the lecturer
  view while the key stays off the screen and out of the address (:func:`keep_lecturer`).
"""

from __future__ import annotations

import streamlit as st

__all__ = ["COOKIE_PREFIX", "KEEP_DAYS", "KEY_PREFIX", "MIN_LOOK_MS", "UNLOCK_MS", "cookie_name", "keep_lecturer",
           "key_cookie_name", "mount", "student_frame"]

#: The cookie that keeps a participant's token for a study: ``lx_p_`` + the study code.
COOKIE_PREFIX = "lx_p_"
#: How long the browser keeps it (days).
KEEP_DAYS = 14
#: The session cookie that keeps the lecturer's key for a study: ``lx_k_`` + the study code.
KEY_PREFIX = "lx_k_"
#: A newly shown triplet's buttons take answers after this many ms.
MIN_LOOK_MS = 500
#: After a press, the buttons take answers again when the page has drawn again, or after this many ms.
UNLOCK_MS = 4000

_JS = r"""
function install() {
  const g = {shown: null, armedAt: 0, locked: null, minMs: 500, unlockMs: 4000, timer: null};
  const row = () => document.querySelector(".st-key-study_answers");
  const block = () => document.querySelector(".lx-tri[data-draw]");
  const armed = () => !g.locked && performance.now() >= g.armedAt;
  const later = ms => { clearTimeout(g.timer); g.timer = setTimeout(refresh, Math.max(0, ms) + 5); };
  function refresh() {
    const b = block(), now = performance.now();
    if (b) {
      const id = b.dataset.triplet, draw = b.dataset.draw;
      if (id !== g.shown) { g.shown = id; g.armedAt = now + g.minMs; g.locked = null; }
      if (g.locked && draw !== g.locked.draw) g.locked = null;
    }
    if (g.locked && now - g.locked.at > g.unlockMs) g.locked = null;
    const r = row();
    if (r) {
      const state = g.locked ? "locked" : now < g.armedAt ? "waiting" : "armed";
      if (r.dataset.lxAnswers !== state) {
        r.dataset.lxAnswers = state;
        r.setAttribute("aria-disabled", state === "armed" ? "false" : "true");
      }
    }
    if (g.locked) later(g.unlockMs - (now - g.locked.at));
    else if (now < g.armedAt) later(g.armedAt - now);
  }
  function lock() {
    const b = block();
    g.locked = {at: performance.now(), draw: b ? b.dataset.draw : null};
    refresh();
  }
  function stop(e) { e.preventDefault(); e.stopImmediatePropagation(); }
  window.addEventListener("keydown", e => {
    if (!row() || !["0", "1", "2"].includes(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName || ""))) return;
    refresh();
    if (e.repeat || !armed()) return stop(e);
    lock();
  }, true);
  window.addEventListener("click", e => {
    const t = e.target && e.target.closest ? e.target.closest(".st-key-study_answers button") : null;
    if (!t) return;
    refresh();
    if (!armed()) return stop(e);
    lock();
  }, true);
  new MutationObserver(refresh).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                         attributeFilter: ["data-draw"]});
  g.refresh = refresh;
  return g;
}

export default function (component) {
  const { data } = component;
  const g = window.__lxStudy || (window.__lxStudy = install());
  if (!data) return;
  g.minMs = data.min_ms; g.unlockMs = data.unlock_ms;
  g.refresh();
  if (!data.cookie || !data.token) return;
  try {
    document.cookie = data.cookie + "=" + data.token + "; path=/" + (data.max_age ? "; max-age=" + data.max_age : "") +
                      "; SameSite=Lax" + (location.protocol === "https:" ? "; Secure" : "");
  } catch (err) { /* a browser that keeps nothing: the server knows it from the cookies it gets */ }
}
"""

_CSS = """
/* the answer buttons while they take nothing (after a press, and for a moment after a new triplet) */
.st-key-study_answers[aria-disabled="true"] button { opacity: 0.45; cursor: wait; }
"""  # several lines: Streamlit reads a one-line string with [ ] as a file name

_component = st.components.v2.component("lpips_explorer.study_client", js=_JS, css=_CSS, isolate_styles=False)


def cookie_name(code: str) -> str:
    """The cookie that keeps a participant's token for study ``code``."""
    return COOKIE_PREFIX + code


def key_cookie_name(code: str) -> str:
    """The session cookie that keeps the lecturer's key for study ``code``."""
    return KEY_PREFIX + code


def keep_lecturer(code: str, key: str) -> None:
    """Keep the lecturer's key in a session cookie (never on the page, never in the address)."""
    _component(key="study_keeper", height=0,
                data={"cookie": key_cookie_name(code), "token": key, "max_age": None,
                      "min_ms": MIN_LOOK_MS, "unlock_ms": UNLOCK_MS})


def mount(code: str, token: str) -> None:
    """Mount the answer buttons' guard and keep ``token`` in this browser's cookie for study ``code``."""
    _component(key="study_client", height=0,
               data={"cookie": cookie_name(code), "token": token, "max_age": KEEP_DAYS * 86400,
                     "min_ms": MIN_LOOK_MS, "unlock_ms": UNLOCK_MS})


#: The student's frame: the page's margins made small (the study is all there is on a phone).
FRAME_CSS = """<style>
[data-testid="stMainBlockContainer"]{padding-top:3.75rem;padding-bottom:2rem;
  padding-left:max(0.75rem, env(safe-area-inset-left));padding-right:max(0.75rem, env(safe-area-inset-right))}
</style>"""


def student_frame() -> None:
    """Draw the student's frame (``app.py``, for a study link): small page margins."""
    st.html(FRAME_CSS)
