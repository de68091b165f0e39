"""How many images go through a backbone together on a CPU: the fastest batch, measured on this host.

Which batch size is fastest per image depends on the CPU, the thread count, the convolution
library and the image size, and the answers differ a lot between hosts: one host runs VGG16
fastest one image at a time, another runs a batch of 8 in well under the per-image time of a
batch of 1 (docs/performance.md, "Measurements behind the code's choices"). A constant cannot be
right on both, so a CPU call with at least
:data:`MIN_IMAGES` images (:meth:`~lpips_core.protocol.LearnedMetric.images_per_batch` with
``images=``) runs the backbone once on random inputs at each power-of-two batch size up to what
the call can use and :data:`CPU_CAP_BYTES` allows, twice in interleaved rounds, and uses the
fastest per image. Calls with fewer images (a single pair) keep the memory rule and pay nothing.

The measurements are kept per process and in a small JSON table (:func:`table_path`, default
``batch-table.json`` in the project cache, :func:`lpips_core.weights.cache_dir`) keyed by the
host (CPU model and flags, torch version and kernel capability, CPU count), the metric and
backbone, the thread count and kernel path (oneDNN or NNPACK, see
:func:`lpips_core.backbones.nnpack_conv`) and the image size (in half-octave buckets of pixel
count): one host calibrates each case once, and every later process, resumed run and scoring
lane batches the same way, so their numbers agree bit for bit; processes started together (the
lanes of one run) take turns through a lock file, so one measures and the others read. A
measurement taken while the host is busier than its CPU count (the load average) times the other
jobs as much as the batches: it is marked busy, serves only processes that find the host busy
too, and is measured again and replaced by the first that finds it idle. Delete the file to
measure again;
``LPIPS_EXPLORER_BATCH_TABLE=off`` keeps every batch on the memory rule, ``=PATH`` moves the table.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from . import environment
from .caching import LRU, memo

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None

__all__ = ["CANDIDATES", "CPU_CAP_BYTES", "MIN_IMAGES", "calibrated", "fastest_batch", "host_key", "table_path"]

#: Batch sizes tried (up to what a call can use and the memory cap allows).
CANDIDATES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
#: The most bytes a calibrated CPU batch may give its first stage (64 float32 channels at the
#: network's first stride): 8 VGG16 images at 256 px, 2 at 512 px, 1 at 1024 px.
CPU_CAP_BYTES = 128 << 20
#: Calls with fewer images keep the memory rule: for a single pair (two images) measuring would
#: cost more than any gain.
MIN_IMAGES = 4
_TABLE_VERSION = 2
_LOCK = threading.Lock()
#: This process's measurements, ``key → {batch: seconds per image}`` (a process meets a few cases:
#: its metrics × image sizes × thread counts).
_MEMO: LRU[str, dict[int, float]] = LRU(256)


def table_path() -> Path | None:
    """Where the measurements are kept (``None``: calibration is off, ``LPIPS_EXPLORER_BATCH_TABLE=off``)."""
    return environment.batch_table()


def calibrated() -> bool:
    """Whether batch sizes are measured (``LPIPS_EXPLORER_BATCH_TABLE`` is not ``off``)."""
    return table_path() is not None


@memo(1)
def host_key() -> str:
    """The host as far as kernel speed goes: CPU model and flags, torch version and CPU capability,
    CPU count (read once per process)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        model = platform.processor() or platform.machine()
    isa = "+".join(f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags)
    return (f"{model} [{isa}] torch {torch.__version__} {torch.backends.cpu.get_cpu_capability()} "
            f"{os.cpu_count()} cpus")


def _size_bucket(height: int, width: int) -> str:
    """Half-octave buckets of the pixel count, named by a square side (``256`` covers 216²–304²)."""
    return str(round(2 ** (round(2 * math.log2(height * width)) / 4)))


def case_key(label: str, height: int, width: int, *, threads: int, nnpack: bool, layout: str) -> str:
    """The table key of one case on this host."""
    return (f"{host_key()} | {label} | {layout} | threads={threads} | {'nnpack' if nnpack else 'onednn'} | "
            f"~{_size_bucket(height, width)}px")


class _Entry:
    """One case's measurements: seconds per image by batch size, and whether the host was busy."""

    __slots__ = ("times", "busy")

    def __init__(self, times: dict[int, float], busy: bool):
        self.times, self.busy = times, busy


def _read_table(path: Path) -> dict[str, _Entry]:
    from . import files

    try:
        data = json.loads(files.read_text(path, max_bytes=16 * 2**20))
    except (OSError, ValueError):  # UnsafeFile and UnicodeDecodeError are ValueErrors
        return {}
    if not isinstance(data, dict) or data.get("version") != _TABLE_VERSION or not isinstance(data.get("entries"), dict):
        return {}
    out = {}
    for key, entry in data["entries"].items():
        try:
            times = {int(b): float(t) for b, t in entry["seconds_per_image"].items()}
            if all(t > 0 for t in times.values()):
                out[key] = _Entry(times, bool(entry.get("busy", False)))
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return out


def _write_table(path: Path, key: str, times: dict[int, float], busy: bool) -> None:
    """Merge ``key``'s times into the file (re-read first: other processes write it too), atomically.
    Times measured on an idle host replace those measured on a busy one."""
    from . import files

    entries = _read_table(path)
    old = entries.get(key)
    if old is None or (old.busy and not busy):
        entries[key] = _Entry(dict(times), busy)
    else:
        old.times.update(times)
        old.busy = old.busy or busy
    body = {"version": _TABLE_VERSION,
            "entries": {k: {"seconds_per_image": {str(b): t for b, t in sorted(e.times.items())}, "busy": e.busy}
                        for k, e in sorted(entries.items())}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_bytes(path, (json.dumps(body, indent=1) + "\n").encode(), overwrite=True)
    except OSError:
        pass  # a read-only cache: this process keeps its own measurements


def _busy() -> bool:
    """Whether the host is busier than its CPUs (1-minute load average above the CPU count): a
    measurement then says as much about the other jobs as about the batch sizes."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return False


@contextlib.contextmanager
def _locked(path: Path | None):
    """Hold an exclusive lock beside the table (``fcntl``, where there is one), so that processes
    started together (scoring lanes) measure a case one at a time and then share the result."""
    if path is None or fcntl is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path.with_name(path.name + ".lock"), "a")
    except OSError:
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fastest_batch(key: str, cap: int, run: Callable[[int], object], *,
                  timer: Callable[[], float] = time.perf_counter) -> int:
    """The batch size of :data:`CANDIDATES` up to ``cap`` with the least time per image for ``key``.

    Uses this process's measurements, else the table's, and measures the candidates neither has:
    ``run(b)`` runs the backbone on ``b`` images; one warm-up run of the smallest, then two
    interleaved rounds over the candidates, each keeping its fastest time. Ties go to the smaller
    batch. A table entry measured while the host was busy (:func:`_busy`) serves only processes
    that find it busy too; an idle one measures again and replaces it.
    """
    cands = [b for b in CANDIDATES if b <= cap]
    if len(cands) < 2:
        return 1
    with _LOCK:
        times = _MEMO.get(key)
        if times is None or any(b not in times for b in cands):
            path = table_path()
            with _locked(path):
                busy = _busy()
                entry = _read_table(path).get(key) if path is not None else None
                times = dict(times or {})
                if entry is not None and (busy or not entry.busy):
                    times = {**entry.times, **times}
                missing = [b for b in cands if b not in times]
                if missing:
                    run(missing[0])  # warm-up: first-touch allocations, kernel selection
                    best = {b: math.inf for b in missing}
                    for _ in range(2):
                        for b in missing:
                            t0 = timer()
                            run(b)
                            best[b] = min(best[b], (timer() - t0) / b)
                    times.update(best)
                    if path is not None:
                        _write_table(path, key, best, busy)
            _MEMO.put(key, times)
    return min(cands, key=lambda b: (times[b], b))
