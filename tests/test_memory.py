"""lpips_explorer.runtime.memory: the server's after-run housekeeping (malloc_trim, freezing long-lived objects)."""

from __future__ import annotations

import gc
import sys
import time
import types
import weakref

from lpips_explorer.runtime import memory


def test_freeze_long_lived_freezes_once_per_new_modules_and_makes_collections_cheap(monkeypatch):
    monkeypatch.setattr(memory, "_modules_frozen", 0)
    try:
        t0 = time.perf_counter()
        gc.collect()
        unfrozen = time.perf_counter() - t0
        assert memory.freeze_long_lived() is True
        assert gc.get_freeze_count() > 10_000  # this test process's modules and their objects
        assert memory.freeze_long_lived() is False  # nothing imported since: no collection
        monkeypatch.setitem(sys.modules, "lpips_test_fake_module", types.ModuleType("lpips_test_fake_module"))
        assert memory.freeze_long_lived() is True  # a new module: collect and freeze again
        t0 = time.perf_counter()
        gc.collect()
        frozen = time.perf_counter() - t0
        assert frozen < unfrozen  # the collection skips the frozen objects
        # a frozen object is still freed by reference counting
        class Blob:
            pass

        blob = Blob()
        gc.freeze()
        alive = weakref.ref(blob)
        del blob
        assert alive() is None
    finally:
        gc.unfreeze()


def test_release_unused_returns_a_bool():
    assert memory.release_unused() in (True, False)


def test_periodic_release_runs_in_one_daemon_thread(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "release_unused", lambda: calls.append(time.monotonic()) or True)
    monkeypatch.setattr(memory, "_periodic", None)
    t = memory.start_periodic_release(0.05)
    assert t.daemon and t.is_alive() and t.name == "lpips-release-unused"
    assert memory.start_periodic_release(0.05) is t  # one per process
    deadline = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(calls) >= 3
    t.stop.set()
    t.join(timeout=5)
    assert not t.is_alive()
    import pytest

    with pytest.raises(ValueError, match="interval_s"):
        memory.start_periodic_release(0)
