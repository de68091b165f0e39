"""What the benchmarks record about the machine they ran on, so runs from different hosts are
not compared as if they were one.

The project's CPU host is a virtual machine whose processor has changed between stops (AVX2
only at earlier stops; AVX-512 at stop 23), and a convolution library picks its kernels by
instruction set: timings, and values in their last float32 bits, depend on it.
"""

from __future__ import annotations

import os
import platform

#: The instruction-set extensions that decide which convolution kernels oneDNN and NNPACK run.
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_info(cpuinfo: str | None = None) -> dict:
    """``{"model": ..., "flags": [...]}`` from ``/proc/cpuinfo`` (``cpuinfo``: its text, for tests);
    the flags are those of :data:`FLAGS` the first processor has. Empty where there is no
    ``/proc/cpuinfo`` (not Linux)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return {}
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "flags": [f for f in FLAGS if f in flags]}


def machine_info() -> dict:
    """The CPU count, platform, load and :func:`cpu_info`."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "cpu": cpu_info()}
