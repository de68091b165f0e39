"""A limit on the heavy jobs one server runs at once, shared by all its sessions.

Scoring an uploaded dataset, explaining a reported number and the LPIPS-as-a-loss experiments
each keep the CPU (or GPU) busy for seconds to minutes. Every session of a Streamlit server is a
thread of one process, so two visitors starting such a job at once would halve each other's
speed and double the memory. :class:`JobSlots` is a counting semaphore with a polite wait: a job
that finds every slot taken calls ``wait(seconds waited)`` every ``poll`` seconds (the page
shows "waiting for another job" there, which is also where Streamlit can stop a session that
was closed or rerun) until a slot frees or ``timeout`` passes.

:func:`heavy_jobs` is the server's one set of slots: ``$LPIPS_EXPLORER_HEAVY_JOBS`` of them,
by default one per two CPUs (at least one). No Streamlit here (:mod:`ui.sessions` adds the
message).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from lpips_explorer import environment

__all__ = ["JobSlots", "JobsBusy", "default_slots", "heavy_jobs", "lanes_per_job", "server_scoring"]


class JobsBusy(RuntimeError):
    """No slot freed within the timeout (or the waiter gave up); the message says so in words."""


def default_slots() -> int:
    """``$LPIPS_EXPLORER_HEAVY_JOBS`` if set (at least 1), else one per two CPUs, at least 1."""
    return environment.heavy_jobs()


class JobSlots:
    """``n`` slots for heavy jobs (``n >= 1``)."""

    def __init__(self, n: int):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        self.n = n
        self._sem = threading.BoundedSemaphore(n)
        self._lock = threading.Lock()
        self._running: list[str] = []

    def running(self) -> list[str]:
        """What holds a slot now (the names given to :meth:`slot`)."""
        with self._lock:
            return list(self._running)

    @contextmanager
    def slot(self, name: str, *, wait: Callable[[float], object] | None = None, timeout: float = 900.0,
             poll: float = 0.5) -> Iterator[None]:
        """Hold one slot for the ``with`` block; wait for one if all are taken.

        Args:
            name: what runs (shown to others by :meth:`running`).
            wait: called with the seconds waited so far, before the first wait and every ``poll``
                seconds; returning ``False`` (or raising) gives up.
            timeout: give up after this many seconds.

        Raises:
            JobsBusy: no slot within ``timeout``, or ``wait`` returned ``False``.
        """
        if not self._sem.acquire(blocking=False):
            start = time.monotonic()
            while True:
                waited = time.monotonic() - start
                if waited >= timeout:
                    raise JobsBusy(f"The server was busy with other jobs for {waited:.0f} s; try again later.")
                if wait is not None and wait(waited) is False:
                    raise JobsBusy("Stopped while waiting for another job to finish.")
                if self._sem.acquire(timeout=min(poll, max(0.0, timeout - waited))):
                    break
        with self._lock:
            self._running.append(name)
        try:
            yield
        finally:
            with self._lock:
                self._running.remove(name)
            self._sem.release()


_slots: JobSlots | None = None
_slots_lock = threading.Lock()


def heavy_jobs() -> JobSlots:
    """The server's slots for heavy jobs (:func:`default_slots` of them, made on first use)."""
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = JobSlots(default_slots())
        return _slots


def lanes_per_job() -> int:
    """The scoring lanes (threads of the server, one torch thread each:
    :func:`lpips_core.datasets.score.score_pairs` with ``lane_kind="thread"``) a heavy job runs
    on a CPU: the server's CPUs shared among its slots, up to 8. One means none: the job runs on
    the calling thread, on torch's threads."""
    return max(1, min(8, (os.cpu_count() or 1) // heavy_jobs().n))


def server_scoring() -> dict:
    """How a heavy job scores pairs in the server (the options of
    :func:`lpips_core.datasets.score.score_pairs` and :func:`~lpips_core.datasets.explain.explain`):
    nothing forked (no decoding workers, lanes that are threads), :func:`lanes_per_job` lanes."""
    return {"workers": 0, "lanes": lanes_per_job(), "lane_kind": "thread"}
