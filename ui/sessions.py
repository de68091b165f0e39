"""What one server's sessions share: folders they own, and the slots for heavy jobs.

- :func:`scratch_folder` makes a folder owned by this session in the server's
  :class:`~lpips_explorer.runtime.scratch.ScratchRegistry` (within its byte budget);
  :func:`scratch_release` deletes one the session has replaced. A daemon thread
  (:func:`start_sweeper`, started with the first folder) deletes, every 30 s (a quarter of the
  grace period if shorter), the folders of sessions that Streamlit's runtime no longer has
  (closed tabs), once the registry's grace period has passed.
- :func:`heavy_job` holds one of the server's :func:`~lpips_explorer.runtime.jobs.heavy_jobs` slots for
  a ``with`` block; while every slot is taken it shows "Waiting for another job on this server
  to finish" (which is also where Streamlit stops a session that was closed or rerun).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import streamlit as st

from lpips_explorer.runtime import jobs, scratch

__all__ = ["heavy_job", "scratch_folder", "scratch_release", "scratch_settle", "session_id", "start_sweeper"]

_sweeper: threading.Thread | None = None
_sweeper_lock = threading.Lock()


def session_id() -> str:
    """This script run's session id (``"no-session"`` outside a Streamlit run)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def session_alive(session: str) -> bool:
    """Whether Streamlit's runtime still has ``session`` connected (``True`` when there is no
    runtime to ask, e.g. under ``AppTest``: nothing is deleted then)."""
    from streamlit import runtime

    if not runtime.exists():
        return True
    return runtime.get_instance().is_active_session(session)


def start_sweeper(interval_s: float | None = None) -> threading.Thread:
    """Sweep the registry every ``interval_s`` seconds (default: a quarter of its grace period,
    0.5 to 30 s) in a daemon thread (one per process)."""
    global _sweeper
    if interval_s is None:
        interval_s = max(0.5, min(30.0, scratch.registry().grace_s / 4))
    with _sweeper_lock:
        if _sweeper is None or not _sweeper.is_alive():
            stop = threading.Event()

            def loop() -> None:
                while not stop.wait(interval_s):
                    scratch.registry().sweep(session_alive)

            _sweeper = threading.Thread(target=loop, name="lpips-scratch-sweeper", daemon=True)
            _sweeper.stop = stop  # type: ignore[attr-defined]
            _sweeper.start()
        return _sweeper


def scratch_folder(kind: str, *, want: int, at_least: int | None = None) -> tuple[Path, int]:
    """A new folder owned by this session and its byte allowance
    (:meth:`~lpips_explorer.runtime.scratch.ScratchRegistry.new_folder`); sweeps ended sessions first.

    Raises:
        ScratchFull: the server's space is used up (the message is for the user).
    """
    reg = scratch.registry()
    start_sweeper()
    reg.sweep(session_alive)
    return reg.new_folder(session_id(), kind, want=want, at_least=at_least)


def scratch_settle(path: str | Path) -> int:
    """Record the bytes ``path`` holds now; returns them."""
    return scratch.registry().settle(path)


def scratch_release(path: str | Path) -> None:
    """Delete a folder this session no longer uses."""
    scratch.registry().release(path)


@contextmanager
def heavy_job(what: str) -> Iterator[None]:
    """Run the ``with`` block in one of the server's heavy-job slots, waiting (with a message)
    while every slot is taken.

    Raises:
        JobsBusy: no slot freed within 15 minutes.
    """
    box = st.empty()

    def waiting(seconds: float) -> bool:
        box.info(f"Waiting for another job on this server to finish ({seconds:.0f} s)… {what} starts as soon "
                 "as it has.", icon=":material/hourglass_top:")
        return True

    try:
        with jobs.heavy_jobs().slot(what, wait=waiting):
            box.empty()
            yield
    finally:
        box.empty()
