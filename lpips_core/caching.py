"""The in-process caches of the engine: a content digest, a bounded LRU, a memo decorator, and the
models' reference-feature caches built on that LRU.

- :func:`content_digest`: what identifies an input by its content — arrays and tensors by their
  shape, dtype and bytes, ``bytes`` by their bytes, text and numbers by their ``repr``. Two
  inputs get the same digest only when they are equal to the bit (BLAKE2b, 128 bits by default:
  a collision is not a practical concern for a cache key).
- :class:`LRU`: a thread-safe mapping that keeps at most ``max_entries`` entries (and, with
  ``sizeof``, at most ``max_bytes``), dropping the least recently used first.
- :func:`memo`: a decorator keeping a function's results in an :class:`LRU` (the project's
  ``functools.lru_cache``).
- :class:`FeatureCache` and :class:`CachePool`: each model's cache of reference features, keyed
  by :func:`content_digest` of the input and bounded by bytes twice, per model and across every
  model of the process (:data:`SHARED_POOL`): one :class:`LRU` per model, one across models, one
  lock for all of them.

Disk caches are not here: the converted weights (:mod:`lpips_core.weights`) and the batch-size
table (:mod:`lpips_core.batching`) each keep their own files.

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

import functools
import hashlib
import sys
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar

import numpy as np

from . import environment

#: what a :class:`FeatureCache` holds: :class:`~lpips_core.protocol.Features` (any object with
#: ``nbytes``; named here without importing ``protocol``, which imports this module)
Features = Any

__all__ = ["CachePool", "DEFAULT_CACHE_MB", "DEFAULT_TOTAL_CACHE_MB", "FeatureCache", "LRU", "SHARED_POOL",
           "content_digest", "memo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Fn = TypeVar("Fn", bound=Callable[..., Any])


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
            A plain attribute: a new value holds from the next :meth:`put`.
        sizeof: ``value → bytes`` (required with ``max_bytes``).
        on_evict: ``(key, value) → None``, called for each entry dropped to keep within the
            bounds (not for :meth:`pop`, :meth:`clear` or a replaced key), with the lock held:
            where it touches another LRU, give both one ``threading.RLock`` (``lock``).
        lock: the lock guarding the entries (default: a lock of its own). LRUs whose bookkeeping
            must move together share one :class:`threading.RLock`.

    :meth:`get` and :meth:`get_or_compute` make an entry the most recent. :meth:`get_or_compute`
    computes outside the lock: two threads asking for the same new key may both compute it (the
    second result replaces the first).

    Raises:
        ValueError: ``max_entries < 1``, or ``max_bytes`` without ``sizeof``.
    """

    def __init__(self, max_entries: int, *, max_bytes: int | None = None,
                 sizeof: Callable[[V], int] | None = None, on_evict: Callable[[K, V], None] | None = None,
                 lock: Any = None):
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an int ≥ 1, got {max_entries!r}")
        if max_bytes is not None and sizeof is None:
            raise ValueError("max_bytes needs sizeof (value → bytes)")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._sizeof = sizeof
        self._on_evict = on_evict
        self._lock = threading.Lock() if lock is None else lock
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

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first (reading them makes none more recent)."""
        with self._lock:
            return [(k, v) for k, (v, _) in self._entries.items()]

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
                k, (v, n) = self._entries.popitem(last=False)
                self._bytes -= n
                if self._on_evict is not None:
                    self._on_evict(k, v)

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


#: Separates positional from keyword arguments in a :func:`memo` key.
_KEYWORDS = object()


def memo(maxsize: int) -> Callable[[Fn], Fn]:
    """A decorator that keeps a function's results in an :class:`LRU` of ``maxsize`` entries.

    The key is the call's arguments (hashable, as for ``functools.lru_cache``): positional, then
    keyword ones in call order, so ``f(1)`` and ``f(x=1)`` are two entries. An exception is not
    kept. Thread-safe; two threads calling with the same new arguments may both compute (the
    LRU's rule), which is fine for the pure functions it serves. ``f.cache_clear()`` empties it.

    Raises:
        ValueError: ``maxsize < 1``. TypeError (at call time): an unhashable argument.
    """
    def decorate(fn: Fn) -> Fn:
        lru: LRU[tuple, Any] = LRU(maxsize)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            key = (*args, _KEYWORDS, *kwargs.items()) if kwargs else args
            return lru.get_or_compute(key, lambda: fn(*args, **kwargs))

        call.cache_clear = lru.clear
        return call  # type: ignore[return-value]

    LRU(maxsize)  # validates maxsize when decorating, not at the first call
    return decorate


# ----------------------------------------------------------------------------- the models' feature caches
#: Default byte budget of each model's reference-feature cache, in MiB. Override per process with
#: the ``LPIPS_EXPLORER_CACHE_MB`` environment variable, per model with ``model.ref_cache.max_bytes``.
DEFAULT_CACHE_MB = 128
#: Default byte budget of all reference-feature caches of the process together, in MiB (a server
#: holds several models: AlexNet and VGG16 in two versions, the successors…). Override with the
#: ``LPIPS_EXPLORER_CACHE_TOTAL_MB`` environment variable; the least recently used entry of any
#: model goes first.
DEFAULT_TOTAL_CACHE_MB = 256
#: The entry bound of the feature caches' LRUs: none, the byte budgets bound them.
_UNBOUNDED = sys.maxsize


def cache_budget() -> int:
    """Each model's budget in bytes: ``LPIPS_EXPLORER_CACHE_MB`` (MiB), else :data:`DEFAULT_CACHE_MB`.

    Raises:
        ValueError: the variable is not a number of MiB ≥ 0.
    """
    return environment.cache_mb("LPIPS_EXPLORER_CACHE_MB", DEFAULT_CACHE_MB)


def total_cache_budget() -> int:
    """The process's budget in bytes: ``LPIPS_EXPLORER_CACHE_TOTAL_MB`` (MiB), else
    :data:`DEFAULT_TOTAL_CACHE_MB`.

    Raises:
        ValueError: the variable is not a number of MiB ≥ 0.
    """
    return environment.cache_mb("LPIPS_EXPLORER_CACHE_TOTAL_MB", DEFAULT_TOTAL_CACHE_MB)


class CachePool:
    """The budget every :class:`FeatureCache` of a process shares: one lock, one LRU across models.

    The pool's :class:`LRU` holds one entry per cached feature of any model, keyed by
    ``(id(cache), key)``, sized by its bytes; when the pool's bytes exceed ``max_bytes`` it drops
    the least recently used one, and that entry's cache drops its features. Every cache of the
    pool guards its own LRU with the pool's lock (a reentrant one), so all bookkeeping moves
    together and there is no lock order to get wrong.

    Args:
        max_bytes: the budget (default: ``LPIPS_EXPLORER_CACHE_TOTAL_MB``, else
            :data:`DEFAULT_TOTAL_CACHE_MB` MiB), read when the first cache joins.
    """

    def __init__(self, max_bytes: int | None = None):
        self._max_bytes = max_bytes
        self.lock = threading.RLock()
        self._order: LRU[tuple[int, str], tuple[weakref.ref, int]] = LRU(
            _UNBOUNDED, sizeof=lambda entry: entry[1], on_evict=self._evicted, lock=self.lock)
        #: Set (without the lock: a finalizer may run while it is held) when a cache of the pool
        #: dies; the next insertion forgets the dead cache's entries.
        self.stale = False

    @property
    def max_bytes(self) -> int:
        if self._max_bytes is None:
            self._max_bytes = total_cache_budget()
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._max_bytes = int(value)

    @property
    def nbytes(self) -> int:
        """Bytes held by the live caches of the pool."""
        return self._order.nbytes

    # the methods below run with ``self.lock`` held (by the cache calling them)
    def _touch(self, cache: "FeatureCache", key: str) -> None:
        self._order.get((id(cache), key))

    def _add(self, cache: "FeatureCache", key: str, size: int) -> None:
        """Count ``cache``'s new entry (replacing a stale one of a dead cache whose id was reused)."""
        self._order.max_bytes = self.max_bytes
        self._order.put((id(cache), key), (weakref.ref(cache), size))

    def _remove(self, cache: "FeatureCache", key: str) -> None:
        self._forget(id(cache), key)

    def _forget(self, ident: int, key: str) -> None:
        self._order.pop((ident, key))

    @staticmethod
    def _evicted(where: tuple[int, str], entry: tuple[weakref.ref, int]) -> None:
        owner = entry[0]()
        if owner is not None:
            owner._entries.pop(where[1])

    def _forget_dead(self) -> None:
        self.stale = False
        for where, (ref, _) in self._order.items():
            if ref() is None:
                self._order.pop(where)


#: The pool of every model's cache in this process (see :class:`CachePool`).
SHARED_POOL = CachePool()


def _mark_stale(pool: CachePool) -> None:
    pool.stale = True


class FeatureCache:
    """A thread-safe LRU of :class:`~lpips_core.protocol.Features` bounded by bytes, keyed by the
    content of an input.

    One instance lives on each model, which ``st.cache_resource`` shares across every session
    thread: all bookkeeping happens under one lock (the :class:`CachePool`'s, shared by every cache
    of the process); the network pass runs outside it (two threads asking for the same new key may
    both compute it; the second result replaces the first, equal). Two budgets hold: this cache's
    ``max_bytes`` and the pool's, across all models (the least recently used entry of any model is
    dropped first). An entry larger than either budget is returned but not kept.

    Args:
        max_bytes: this cache's budget (default: ``LPIPS_EXPLORER_CACHE_MB``, else
            :data:`DEFAULT_CACHE_MB` MiB).
        pool: the shared budget (default :data:`SHARED_POOL`).
    """

    def __init__(self, max_bytes: int | None = None, *, pool: CachePool | None = None):
        self.pool = SHARED_POOL if pool is None else pool
        self._lock = self.pool.lock
        pool, ident = self.pool, id(self)  # the eviction hook holds no reference to the cache itself
        self._entries: LRU[str, Features] = LRU(
            _UNBOUNDED, max_bytes=cache_budget() if max_bytes is None else int(max_bytes),
            sizeof=lambda feats: feats.nbytes, on_evict=lambda key, _: pool._forget(ident, key), lock=self._lock)
        self.hits = 0
        self.misses = 0
        weakref.finalize(self, _mark_stale, self.pool)

    @property
    def max_bytes(self) -> int:
        """This cache's budget in bytes (a new value holds from the next entry kept)."""
        return self._entries.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._entries.max_bytes = int(value)

    @staticmethod
    def key(x) -> str:
        """:func:`content_digest` of ``x`` (a tensor): its shape, dtype and values."""
        return content_digest(x)

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            for key in self._entries.keys():
                self.pool._remove(self, key)
            self._entries.clear()

    def _hit(self, key: str) -> Features | None:  # under the lock
        hit = self._entries.get(key)
        if hit is not None:
            self.pool._touch(self, key)
            self.hits += 1
        return hit

    def peek(self, key: str) -> Features | None:
        """The entry for ``key`` if there is one (counted as a hit and made the most recent), else
        ``None``; a miss is not counted and nothing is stored."""
        with self._lock:
            return self._hit(key)

    def get_or_compute(self, key: str, compute: Callable[[], Features]) -> Features:
        """The features under ``key``, else ``compute()`` (outside the lock), kept within both budgets."""
        with self._lock:
            hit = self._hit(key)
            if hit is not None:
                return hit
            self.misses += 1
        feats = compute()
        size = feats.nbytes
        with self._lock:
            if self.pool.stale:
                self.pool._forget_dead()
            if size > self.max_bytes or size > self.pool.max_bytes:
                return feats
            self.pool._remove(self, key)  # another thread's equal entry, replaced below
            self._entries.put(key, feats)  # over this cache's budget: its oldest go (and leave the pool)
            self.pool._add(self, key, size)  # over the pool's: the oldest of any cache go
        return feats
