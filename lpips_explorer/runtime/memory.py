"""Giving freed memory back to the operating system (Linux with glibc only).

glibc's ``malloc`` keeps memory that a program has freed in its arenas (one per thread that
allocated, up to 8 per core) instead of returning it to the kernel; after a large inference —
activations of a 512 px image through VGG are hundreds of MB, freed when the call returns — the
process's resident set stays high although nothing uses that memory. :func:`release_unused`
asks glibc to return it (``malloc_trim(0)``). Elsewhere (macOS, Windows, musl) it does nothing.

:func:`freeze_long_lived` is about time, not memory: Streamlit runs a full garbage collection
after every script run (``runner.postScriptGC``), which walks every tracked object — with torch,
torchvision, pandas and Plotly imported, hundreds of thousands of them, a cost added to every
slider step (docs/performance.md, "Measurements behind the code's choices"). Once the modules are
imported those objects live as long as
the server, so after a collection they are moved to the permanent generation (:func:`gc.freeze`)
and later collections only walk what the runs since have created.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading

__all__ = ["freeze_long_lived", "release_unused", "start_periodic_release"]

_lock = threading.Lock()
_trim = None
_looked = False
_modules_frozen = 0  # len(sys.modules) at the last freeze
_periodic: threading.Thread | None = None


def _malloc_trim():
    global _trim, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                fn = libc.malloc_trim
            except (OSError, AttributeError):  # not glibc (e.g. musl has no malloc_trim)
                fn = None
            if fn is not None:
                fn.argtypes = [ctypes.c_size_t]
                fn.restype = ctypes.c_int
                _trim = fn
    return _trim


def release_unused() -> bool:
    """Return the C heap's free pages to the OS (``malloc_trim(0)`` on glibc); ``True`` if any were released.

    Cheap enough to call after each large computation (a few ms: glibc walks its arenas' free
    lists). Does nothing and returns ``False`` where glibc is not the allocator.
    """
    with _lock:
        fn = _malloc_trim()
        return bool(fn(0)) if fn is not None else False


def freeze_long_lived() -> bool:
    """If modules were imported since the last call: collect garbage, then freeze every surviving
    object (:func:`gc.freeze`), so later full collections skip them. ``True`` when it froze.

    Call it after a script run (the run's own objects are garbage or refcount-owned by then). It
    does the full collection only while the set of imported modules grows, i.e. the first runs
    of a server; afterwards it costs a ``len``. Frozen objects are still freed by reference
    counting; only cyclic garbage among them would be kept, so it is called where none is left
    (right after the collection).
    """
    global _modules_frozen
    with _lock:
        n = len(sys.modules)
        if n == _modules_frozen:
            return False
        _modules_frozen = n
        gc.collect()
        gc.freeze()
        return True


def start_periodic_release(interval_s: float = 30.0) -> threading.Thread:
    """Call :func:`release_unused` every ``interval_s`` seconds in a daemon thread (one per process;
    later calls return the running thread).

    A script run trims when it ends, but memory freed outside a run — a closed session's state,
    its images, a cache entry dropped by another thread — would otherwise stay in glibc's arenas
    until some later run. Each trim takes milliseconds.
    """
    global _periodic
    if interval_s <= 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
    with _lock:
        if _periodic is None or not _periodic.is_alive():
            stop = threading.Event()

            def loop() -> None:
                while not stop.wait(interval_s):
                    release_unused()

            _periodic = threading.Thread(target=loop, name="lpips-release-unused", daemon=True)
            _periodic.stop = stop  # type: ignore[attr-defined]  # for tests: _periodic.stop.set()
            _periodic.start()
        return _periodic
