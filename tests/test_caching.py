"""lpips_core.caching: the content digest every cache keys by, the bounded LRU, memo and the models' feature caches."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest
import torch

from lpips_core.caching import LRU, CachePool, FeatureCache, content_digest, memo


# --------------------------------------------------------------------------- content_digest
def test_digest_is_blake2b_of_framed_parts():
    """The recipe, spelled out: each part framed by its kind and length, then BLAKE2b (16 bytes)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    h = hashlib.blake2b(digest_size=16)
    h.update(b"a(2, 3)<f4:" + a.tobytes())
    h.update(b"b3:abc")
    h.update(b"r5:'txt'")
    assert content_digest(a, b"abc", "txt") == h.hexdigest()
    assert len(content_digest(b"x")) == 32 and len(content_digest(b"x", size=8)) == 16


def test_digest_changes_with_any_bit_shape_or_dtype_and_only_with_them():
    a = np.random.default_rng(0).random((4, 5, 3)).astype(np.float32)
    assert content_digest(a) == content_digest(a.copy()) == content_digest(np.asfortranarray(a))
    b = a.copy()
    b.view(np.uint32)[1, 2, 0] ^= 1  # one bit of one value
    assert content_digest(b) != content_digest(a)
    assert content_digest(a.reshape(5, 4, 3)) != content_digest(a)  # the same bytes, another shape
    assert content_digest(a.astype(np.float64)) != content_digest(a)
    assert content_digest(torch.from_numpy(a)) == content_digest(a)  # a tensor is its values
    assert content_digest(a[:, ::2]) == content_digest(np.ascontiguousarray(a[:, ::2]))  # a view, by value
    # framing: the parts' boundaries count
    assert content_digest("ab", "c") != content_digest("a", "bc")
    assert content_digest(b"ab", b"c") != content_digest(b"a", b"bc")
    assert content_digest(("a", 1)) != content_digest("a", 1) and content_digest(1) != content_digest("1")
    assert content_digest(np.zeros((0, 3))) != content_digest(np.zeros((3, 0)))


def test_digest_errors():
    with pytest.raises(TypeError, match="got dict"):
        content_digest({"a": 1})
    for size in (0, 65, True, 1.5):
        with pytest.raises(ValueError, match="size must be an int from 1 to 64"):
            content_digest(b"x", size=size)


def test_the_feature_cache_keys_by_the_content_digest():
    x = torch.rand(1, 3, 8, 8)
    assert FeatureCache.key(x) == content_digest(x) == FeatureCache.key(x.clone())
    assert FeatureCache.key(x) != FeatureCache.key(x.double())


# --------------------------------------------------------------------------- LRU
def test_lru_keeps_the_most_recent_entries():
    lru = LRU(3)
    for k in "abc":
        lru.put(k, k.upper())
    assert lru.get("a") == "A"  # now the most recent
    lru.put("d", "D")
    assert lru.keys() == ["c", "a", "d"] and "b" not in lru and len(lru) == 3
    lru.put("c", "C2")  # replacing makes it the most recent
    assert lru.keys() == ["a", "d", "c"] and lru.get("c") == "C2"
    assert lru.get("zz", 7) == 7 and lru.pop("a") == "A" and lru.pop("a", None) is None
    lru.put("n", None)
    assert "n" in lru and lru.get("n", "absent") is None  # None is a value like any other
    lru.update({"x": 1, "y": 2})
    assert lru.keys() == ["n", "x", "y"]  # "d" then "c" went first
    lru.clear()
    assert len(lru) == 0 and lru.nbytes == 0


def test_lru_bounded_by_bytes():
    lru = LRU(10, max_bytes=100, sizeof=len)
    lru.put("a", b"x" * 40)
    lru.put("b", b"x" * 40)
    assert lru.nbytes == 80
    lru.put("c", b"x" * 30)  # 110 > 100: the least recent goes
    assert lru.keys() == ["b", "c"] and lru.nbytes == 70
    lru.put("big", b"x" * 101)  # larger than the budget: not kept, nothing dropped
    assert lru.keys() == ["b", "c"] and lru.nbytes == 70
    lru.put("b", b"x")  # a replaced entry's bytes are given back
    assert lru.nbytes == 31


def test_lru_get_or_compute_computes_once_per_key():
    calls = []
    lru = LRU(2)
    assert lru.get_or_compute("k", lambda: calls.append(1) or "v") == "v"
    assert lru.get_or_compute("k", lambda: calls.append(1) or "w") == "v"
    assert calls == [1]


def test_lru_under_threads_stays_within_its_bound():
    lru = LRU(16)
    errors = []

    def work(t: int) -> None:
        try:
            for i in range(2000):
                key = (t * 7 + i) % 40
                if lru.get_or_compute(key, lambda: key * 2) != key * 2:
                    errors.append(key)
        except Exception as exc:  # noqa: BLE001 - any exception is the failure being tested for
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and len(lru) == 16


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_entries=0), "max_entries must be an int ≥ 1"),
    (dict(max_entries=True), "max_entries must be an int ≥ 1"),
    (dict(max_entries=2, max_bytes=10), "max_bytes needs sizeof"),
])
def test_lru_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LRU(**kwargs)


def test_lru_on_evict_sees_what_the_bounds_drop_and_nothing_else():
    dropped = []
    lru = LRU(2, on_evict=lambda k, v: dropped.append((k, v)))
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("a", 10)  # a replaced key is not an eviction
    lru.put("c", 3)  # over the bound: "b", the least recent, goes
    lru.pop("a")
    lru.clear()
    assert dropped == [("b", 2)]
    assert LRU(3).items() == [] and [k for k, _ in LRU(3).items()] == []


def test_lru_items_do_not_touch_the_order_and_lrus_may_share_a_lock():
    lock = threading.RLock()
    seen = LRU(4, lock=lock)
    lru = LRU(2, lock=lock, on_evict=lambda k, v: seen.put(k, v))  # the hook runs under the shared lock
    for k in "abc":
        lru.put(k, k.upper())
    assert lru.items() == [("b", "B"), ("c", "C")] and lru.keys() == ["b", "c"]
    assert seen.items() == [("a", "A")]


# --------------------------------------------------------------------------- memo
def test_memo_keeps_results_by_arguments_within_its_bound():
    calls = []

    @memo(2)
    def square(x, *, plus=0):
        """Squares."""
        calls.append((x, plus))
        return x * x + plus

    assert [square(2), square(2), square(3), square(2, plus=1), square(2, plus=1)] == [4, 4, 9, 5, 5]
    assert calls == [(2, 0), (3, 0), (2, 1)]
    square(2)  # pushed out by the third key: computed again
    assert calls[-1] == (2, 0) and square.__doc__ == "Squares." and square.__name__ == "square"
    square.cache_clear()
    square(3)
    assert calls[-1] == (3, 0)


def test_memo_keeps_no_exception_and_refuses_unhashable_arguments_and_bad_sizes():
    calls = []

    @memo(4)
    def flaky(x):
        calls.append(x)
        if len(calls) == 1:
            raise OSError("once")
        return x

    with pytest.raises(OSError):
        flaky(1)
    assert flaky(1) == 1 and flaky(1) == 1 and calls == [1, 1]
    with pytest.raises(TypeError):
        flaky([1])
    for bad in (0, None, True):
        with pytest.raises(ValueError, match="max_entries must be an int ≥ 1"):
            memo(bad)


def test_memo_separates_positional_from_keyword_arguments():
    @memo(8)
    def parts(*args, **kwargs):
        return args, kwargs

    assert parts(("k", 2)) == ((("k", 2),), {})
    assert parts(k=2) == ((), {"k": 2})


# --------------------------------------------------------------------------- the feature caches
class _Feats:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_a_feature_cache_is_freed_with_its_model_and_leaves_its_pool():
    """A replaced cache goes when its last reference does (no reference cycle keeps its features
    until a garbage collection), and the pool forgets its entries at the next insertion."""
    import gc
    import weakref

    pool = CachePool(max_bytes=100)
    kept = FeatureCache(max_bytes=100, pool=pool)
    gone = FeatureCache(max_bytes=100, pool=pool)
    gone.get_or_compute("a", lambda: _Feats(30))
    kept.get_or_compute("a", lambda: _Feats(30))
    assert pool.nbytes == 60
    ref = weakref.ref(gone)
    gc.disable()
    try:
        del gone
        assert ref() is None  # freed by its reference count alone
    finally:
        gc.enable()
    kept.get_or_compute("b", lambda: _Feats(30))
    assert pool.nbytes == kept.nbytes == 60 and len(kept) == 2


def test_feature_caches_keep_within_both_budgets():
    pool = CachePool(max_bytes=100)
    a, b = FeatureCache(max_bytes=50, pool=pool), FeatureCache(max_bytes=80, pool=pool)
    for k in "xyz":
        a.get_or_compute(k, lambda: _Feats(20))
    assert a.nbytes == 40 and len(a) == 2 and "x" not in a._entries  # its own budget: its oldest went
    b.get_or_compute("x", lambda: _Feats(70))  # the pool's budget: a's oldest goes first
    assert pool.nbytes == a.nbytes + b.nbytes == 90 and len(a) == 1
    assert b.get_or_compute("big", lambda: _Feats(90)).nbytes == 90 and "big" not in b._entries  # over b's own
    assert b.peek("x") is not None and b.hits == 1 and b.misses == 2
    b.clear()
    assert pool.nbytes == a.nbytes == 20 and len(b) == 0
    b.max_bytes = 10
    assert b.max_bytes == 10
