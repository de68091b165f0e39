"""Batch sizes by measurement (lpips_core.batching): the fastest per image is chosen, measured once
per host and case, kept in the table, and used by every batched path."""

from __future__ import annotations

import json
import os

import pytest
import torch

from lpips_core import LPIPS, batching
from lpips_core.caching import LRU


REAL_BUSY = batching._busy


class FakeClock:
    """``run(b)`` advances the clock by ``per_image[b] · b`` seconds; every run is recorded."""

    def __init__(self, per_image: dict[int, float]):
        self.per_image, self.now, self.runs = per_image, 0.0, []

    def __call__(self) -> float:
        return self.now

    def run(self, b: int) -> None:
        self.runs.append(b)
        self.now += self.per_image[b] * b


@pytest.fixture
def table(tmp_path, monkeypatch):
    path = tmp_path / "batch-table.json"
    monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", str(path))
    monkeypatch.setattr(batching, "_MEMO", LRU(256))
    monkeypatch.setattr(batching, "_busy", lambda: False)
    return path


def _entries(table):
    return json.loads(table.read_text())["entries"]


def test_measurements_on_a_busy_host_serve_busy_processes_until_an_idle_one_replaces_them(table, monkeypatch):
    monkeypatch.setattr(batching, "_busy", lambda: True)
    clock = FakeClock({1: 1.0, 2: 0.5})
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 2
    assert _entries(table) == {"k": {"seconds_per_image": {"1": 1.0, "2": 0.5}, "busy": True}}
    batching._MEMO.clear()  # another busy process (a second scoring lane): reads, does not measure
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 2 and len(clock.runs) == 5
    monkeypatch.setattr(batching, "_busy", lambda: False)
    batching._MEMO.clear()  # an idle process measures again and replaces the busy entry
    clock.per_image = {1: 0.5, 2: 0.75}
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 1 and len(clock.runs) == 10
    assert _entries(table) == {"k": {"seconds_per_image": {"1": 0.5, "2": 0.75}, "busy": False}}
    monkeypatch.setattr(batching, "_busy", lambda: True)
    batching._MEMO.clear()  # an idle entry serves busy processes too
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 1 and len(clock.runs) == 10
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (cpus + 0.5, 0.0, 0.0))
    assert REAL_BUSY()
    monkeypatch.setattr(os, "getloadavg", lambda: (cpus - 0.5, 9.0, 9.0))  # the last minute counts
    assert not REAL_BUSY()


def test_the_fastest_batch_per_image_is_chosen_and_kept(table):
    clock = FakeClock({1: 1.0, 2: 0.75, 4: 0.5, 8: 0.625, 16: 0.25})
    assert batching.fastest_batch("k", 8, clock.run, timer=clock) == 4  # 16 is over the cap
    assert clock.runs == [1, 1, 2, 4, 8, 1, 2, 4, 8]  # a warm-up, then two interleaved rounds
    assert batching.fastest_batch("k", 8, clock.run, timer=clock) == 4 and len(clock.runs) == 9  # this process
    assert _entries(table) == {"k": {"seconds_per_image": {"1": 1.0, "2": 0.75, "4": 0.5, "8": 0.625},
                                     "busy": False}}
    batching._MEMO.clear()  # a new process reads the table
    assert batching.fastest_batch("k", 4, clock.run, timer=clock) == 4 and len(clock.runs) == 9
    assert batching.fastest_batch("k", 16, clock.run, timer=clock) == 16  # only 16 is measured now
    assert clock.runs[9:] == [16, 16, 16]
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 2
    assert batching.fastest_batch("k", 1, clock.run, timer=clock) == 1 and len(clock.runs) == 12


def test_ties_go_to_the_smaller_batch_and_a_bad_table_is_measured_again(table):
    table.write_text("{not json")
    clock = FakeClock({1: 1.0, 2: 1.0})
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 1
    assert _entries(table) == {"k": {"seconds_per_image": {"1": 1.0, "2": 1.0}, "busy": False}}
    assert table.with_name("batch-table.json.lock").exists() == (batching.fcntl is not None)  # taken in turn
    table.write_text(json.dumps({"version": 1, "entries": {"k": {"seconds_per_image": {"1": 5.0, "2": 1.0}}}}))
    batching._MEMO.clear()
    assert batching.fastest_batch("k", 2, clock.run, timer=clock) == 1  # another version: ignored
    assert len(clock.runs) == 10


def test_the_table_path_and_switching_calibration_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE", str(tmp_path))
    monkeypatch.delenv("LPIPS_EXPLORER_BATCH_TABLE", raising=False)
    assert batching.table_path() == tmp_path / "batch-table.json" and batching.calibrated()
    monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", "off")
    assert batching.table_path() is None and not batching.calibrated()


def test_case_keys_name_the_host_the_threads_the_kernels_and_the_size():
    key = batching.case_key("lpips-vgg float32", 250, 260, threads=2, nnpack=False, layout="channels-last")
    assert key.startswith(batching.host_key()) and torch.__version__ in key
    assert key.endswith("| lpips-vgg float32 | channels-last | threads=2 | onednn | ~256px")
    same_bucket = batching.case_key("lpips-vgg float32", 256, 256, threads=2, nnpack=False, layout="channels-last")
    assert key == same_bucket
    assert "~362px" in batching.case_key("x", 362, 362, threads=1, nnpack=True, layout="nchw")
    assert "~861px" in batching.case_key("x", 750, 1000, threads=1, nnpack=True, layout="nchw")


def test_images_per_batch_measures_only_for_calls_that_can_use_a_batch(table, monkeypatch):
    """A single pair, a call that does not say how many images it runs, or calibration off: the
    memory rule. Otherwise the measured fastest, capped by the call's images and the memory cap."""
    model = LPIPS("vgg", device="cpu")
    seen = []

    def fake(key, cap, run, **kw):
        seen.append((key, cap))
        return cap

    monkeypatch.setattr(batching, "fastest_batch", fake)
    rule = model.images_per_batch(256, 256)
    assert rule == 1 and model.images_per_batch(256, 256, images=2) == 1 and not seen
    assert model.images_per_batch(256, 256, images=32) == 8  # 128 MB of first-stage activations
    assert model.images_per_batch(256, 256, images=6) == 6
    assert model.images_per_batch(1024, 1024, images=32) == 1  # one image already fills the cap
    assert [cap for _, cap in seen] == [8, 6]
    assert f"lpips-vgg float32 | channels-last | threads={torch.get_num_threads()}" in seen[0][0]
    monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", "off")
    assert model.images_per_batch(256, 256, images=32) == rule and len(seen) == 2


def test_every_batched_path_asks_for_the_images_it_runs(table, monkeypatch):
    """Pairs (both sides of each pair in one batch), one against many, and ``compare_batch`` pass
    how many images they run; the numbers do not depend on the batch chosen (1e-6)."""
    model = LPIPS("alex", device="cpu")
    asked = []
    real = type(model).images_per_batch

    def spy(h, w, *, images=None):
        asked.append(images)
        return 4

    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(5, 3, 64, 64, generator=gen) * 2 - 1, torch.rand(5, 3, 64, 64, generator=gen) * 2 - 1
    want = model(x, y)
    monkeypatch.setattr(model, "images_per_batch", spy)
    torch.testing.assert_close(model(x, y), want, atol=1e-6, rtol=0)
    torch.testing.assert_close(model(x[:1], y), model.compare_batch(x[:1], y).total, atol=1e-6, rtol=0)
    model.pair_channel_terms(x, y)
    assert asked == [10, 5, 5, 10]
    assert real(model, 64, 64, images=10) >= 1  # the real one, measured on this host
