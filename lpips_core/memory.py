"""Giving freed memory back to the operating system (Linux with glibc only).

glibc's ``malloc`` keeps memory that a program has freed in its arenas (one per thread that
allocated, up to 8 per core) instead of returning it to the kernel; after a large inference —
activations of a 512 px image through VGG are hundreds of MB, freed when the call returns — the
process's resident set stays high although nothing uses that memory. :func:`release_unused`
asks glibc to return it (``malloc_trim(0)``). Elsewhere (macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

__all__ = ["release_unused"]

_lock = threading.Lock()
_trim = None
_looked = False


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
