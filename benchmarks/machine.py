"""What the benchmarks record about the machine they ran on, so runs from different hosts are
not compared as if they were one.

The project's CPU host is a virtual machine whose processor is not always the same (AMD EPYC with
AVX2 only, AMD EPYC with AVX-512, Intel Xeon with AVX-512 and AMX have all been seen), and a
convolution library picks its kernels by instruction set: timings, and values in their last
float32 bits, depend on it. Result files are named by what they measure and :func:`host_tag`.
"""

from __future__ import annotations

import math
import os
import platform
import time

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


def speed_probe(loops: int = 1_000_000, side: int = 1024, rounds: int = 3) -> dict:
    """How fast this host is at two fixed pieces of work, best of ``rounds`` (about a second):
    ``python_loop_s``, a ``loops``-iteration Python loop (the interpreter: page scripts, rows);
    ``matmul_gflops_1thread``, a float32 ``side``³ matrix product in torch on one thread (the
    kernels the networks run on). The same model name and flags have hidden hosts of very
    different speed (a Python loop and the backbones have been seen 3–4× slower on one EPYC host
    than on another with the same name), so absolute timings from two runs compare only where
    these do."""
    best_loop = math.inf
    for _ in range(rounds):
        t0, total = time.perf_counter(), 0
        for i in range(loops):
            total += i
        best_loop = min(best_loop, time.perf_counter() - t0)
    import torch  # here, so that reading the CPU's name needs no torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.rand(side, side)
        best_mm = math.inf
        for _ in range(rounds):
            t0 = time.perf_counter()
            a @ a
            best_mm = min(best_mm, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return {"python_loop_s": round(best_loop, 4), "matmul_gflops_1thread": round(2 * side ** 3 / best_mm / 1e9, 2)}


def cpu_seconds(pids) -> float:
    """User + system CPU seconds used so far by the processes ``pids`` and all their descendants
    (each counted once; a process already exited and reaped when they are read counts nothing).

    Beside a wall-clock timing this says where the work went: on two cores, 0.8 s of wall time
    holds at most 1.6 CPU-seconds, shared by the app's server and the browser that draws it."""
    import psutil

    seen: set[int] = set()
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in procs:
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
    return total


def host_tag(info: dict | None = None) -> str:
    """A short name for the host, for result file names: cores, the widest vector extension and the
    CPU family, e.g. ``"2core-avx512-epyc"``, ``"2core-avx512-amx-xeon"``, ``"2core-avx2-epyc"``."""
    cpu = cpu_info() if info is None else info
    flags = set(cpu.get("flags", ()))
    isa = "avx512-amx" if "amx_tile" in flags else "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags \
        else "x86" if flags else platform.machine().lower() or "cpu"
    model = cpu.get("model", "").lower()
    family = next((f for f in ("epyc", "xeon", "ryzen", "core") if f in model), "")
    return "-".join(p for p in (f"{os.cpu_count()}core", isa, family) if p)


def machine_info(speed: bool = True) -> dict:
    """The CPU count, platform, load, :func:`cpu_info` and (``speed``) :func:`speed_probe`."""
    cpu = cpu_info()
    info = {"cpus": os.cpu_count(), "platform": platform.platform(), "host": host_tag(cpu),
            "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "cpu": cpu}
    if speed:
        info["speed"] = speed_probe()
    return info
