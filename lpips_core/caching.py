"""The two caching helpers every cache of the project uses: a content digest and a bounded LRU.

- :func:`content_digest`: what identifies an input by its content — arrays and tensors by their
  shape, dtype and bytes, ``bytes`` by their bytes, text and numbers by their ``repr``. Two
  inputs get the same digest only when they are equal to the bit (BLAKE2b, 128 bits by default:
  a collision is not a practical concern for a cache key).
- :class:`LRU`: a thread-safe mapping that keeps at most ``max_entries`` entries (and, with
  ``sizeof``, at most ``max_bytes``), dropping the least recently used first.

The model's feature cache (:class:`lpips_core.protocol.FeatureCache`) keys its entries with
:func:`content_digest`; it keeps its own byte-bounded bookkeeping because its budget is shared
by every model of the process (:class:`~lpips_core.protocol.CachePool`).

Example:
    >>> import numpy as np
    >>> a = np.zeros((2, 2), np.float32)
    >>> content_digest(a) == content_digest(a.copy()), content_digest(a) == content_digest(a.astype(np.float64))
    (True, False)
    >>> lru = LRU(max_entries=2)
    >>> lru.put("x", 1); lru.put("y", 2); lru.get("x"); lru.put("z", 3)
    1
    >>> sorted(lru.keys())
    ['x', 'z']
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar

import numpy as np

__all__ = ["LRU", "content_digest"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _feed(h, part: Any) -> None:
    if isinstance(part, (bytes, bytearray, memoryview)):
        data = memoryview(part).cast("B")
        h.update(b"b%d:" % data.nbytes)
        h.update(data)
        return
    if isinstance(part, np.ndarray) or type(part).__module__.startswith("torch"):
        if not isinstance(part, np.ndarray):  # a torch tensor: its values, on the CPU
            part = part.detach().cpu().contiguous().numpy()
        a = np.ascontiguousarray(part)
        h.update(f"a{a.shape}{a.dtype.str}:".encode())
        h.update(memoryview(a).cast("B") if a.size else b"")
        return
    if isinstance(part, (tuple, list)):
        h.update(b"(%d:" % len(part))
        for p in part:
            _feed(h, p)
        h.update(b")")
        return
    if part is None or isinstance(part, (str, int, float, bool)):
        text = repr(part).encode()
        h.update(b"r%d:" % len(text))
        h.update(text)
        return
    raise TypeError(f"content_digest takes arrays, tensors, bytes, text, numbers and tuples of them; "
                    f"got {type(part).__name__}")


def content_digest(*parts: Any, size: int = 16) -> str:
    """A hex BLAKE2b digest of ``parts`` (``2 * size`` hex digits) that changes with any bit of them.

    Args:
        parts: NumPy arrays and torch tensors (their shape, dtype and values: a float32 and a
            float64 copy of an image differ), ``bytes``-like objects, ``str``, numbers, ``None``,
            and tuples or lists of these. Each part is framed by its kind and length, so
            ``("ab", "c")`` and ``("a", "bc")`` differ.
        size: digest bytes, 1 to 64.

    Raises:
        TypeError: a part of another type. ValueError: ``size`` out of range.
    """
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 64:
        raise ValueError(f"size must be an int from 1 to 64, got {size!r}")
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        _feed(h, part)
    return h.hexdigest()


class LRU(Generic[K, V]):
    """A thread-safe mapping bounded by entries (and optionally bytes); the least recently used goes first.

    Args:
        max_entries: the most entries kept (at least 1).
        max_bytes: with ``sizeof``, the most bytes kept; an entry larger than that is not kept.
        sizeof: ``value → bytes`` (required with ``max_bytes``).

    :meth:`get` and :meth:`get_or_compute` make an entry the most recent. :meth:`get_or_compute`
    computes outside the lock: two threads asking for the same new key may both compute it (the
    second result replaces the first).

    Raises:
        ValueError: ``max_entries < 1``, or ``max_bytes`` without ``sizeof``.
    """

    def __init__(self, max_entries: int, *, max_bytes: int | None = None,
                 sizeof: Callable[[V], int] | None = None):
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an int ≥ 1, got {max_entries!r}")
        if max_bytes is not None and sizeof is None:
            raise ValueError("max_bytes needs sizeof (value → bytes)")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._sizeof = sizeof
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    @property
    def nbytes(self) -> int:
        """The bytes held (0 without ``sizeof``)."""
        with self._lock:
            return self._bytes

    def get(self, key: K, default: Any = None) -> V | Any:
        """The value of ``key`` (now the most recent), else ``default``."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return default
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the most recent entry, dropping the least recent ones
        over the bounds."""
        size = int(self._sizeof(value)) if self._sizeof is not None else 0
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if self.max_bytes is not None and size > self.max_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or (
                    self.max_bytes is not None and self._bytes > self.max_bytes):
                _, (_, n) = self._entries.popitem(last=False)
                self._bytes -= n

    def update(self, items: dict[K, V]) -> None:
        """:meth:`put` each item, in order."""
        for key, value in items.items():
            self.put(key, value)

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The value of ``key``, computed by ``compute()`` and kept when absent."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0]
        value = compute()
        self.put(key, value)
        return value

    def pop(self, key: K, default: Any = None) -> V | Any:
        """Remove ``key`` and return its value (``default`` when absent)."""
        with self._lock:
            hit = self._entries.pop(key, None)
            if hit is None:
                return default
            self._bytes -= hit[1]
            return hit[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
