"""benchmarks/machine.py: what a benchmark run records about its CPU (a plain file beside the
benchmark scripts, imported here by path)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("bench_machine", Path(__file__).resolve().parents[1] / "benchmarks"
                                               / "machine.py")
machine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(machine)

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512dq avx512_vnni
processor\t: 1
model name\t: other
flags\t\t: fpu
"""


def test_cpu_info_reads_the_first_processor_and_keeps_the_kernel_deciding_flags():
    assert machine.cpu_info(CPUINFO) == {"model": "AMD EPYC 7B13", "flags": ["avx2", "fma", "avx512f", "avx512_vnni"]}
    assert machine.cpu_info("flags\t: avx2 fma\n") == {"model": "", "flags": ["avx2", "fma"]}


def test_machine_info_has_the_fields_the_results_files_use():
    info = machine.machine_info(speed=False)
    assert {"cpus", "platform", "host", "load_avg_1m", "cpu"} <= set(info) and info["cpus"] >= 1
    assert info["host"] == machine.host_tag(info["cpu"])


def test_host_tag_names_cores_the_widest_vector_extension_and_the_cpu_family(monkeypatch):
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert machine.host_tag(machine.cpu_info(CPUINFO)) == "2core-avx512-epyc"
    assert machine.host_tag({"model": "Intel(R) Xeon(R) Processor", "flags": ["avx2", "avx512f", "amx_tile"]}) \
        == "2core-avx512-amx-xeon"
    assert machine.host_tag({"model": "AMD EPYC 7B13", "flags": ["avx2", "fma"]}) == "2core-avx2-epyc"


def test_speed_probe_times_a_python_loop_and_a_one_thread_matmul_and_restores_the_threads():
    import torch

    threads = torch.get_num_threads()
    speed = machine.speed_probe(loops=10_000, side=256, rounds=2)
    assert set(speed) == {"python_loop_s", "matmul_gflops_1thread"}
    assert 0 < speed["python_loop_s"] < 5 and speed["matmul_gflops_1thread"] > 0
    assert torch.get_num_threads() == threads


#: Burns ``sys.argv[1]`` CPU-seconds, says so on stdout, then waits to be killed.
BURN = """import sys, time
t = time.process_time()
while time.process_time() - t < float(sys.argv[1]):
    pass
print(1, flush=True)
time.sleep(60)
"""
#: Starts BURN as its own child, prints that child's pid once it has burned, then waits.
PARENT = """import subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", sys.argv[1], "0.4"], stdout=subprocess.PIPE)
g.stdout.readline()
print(g.pid, flush=True)
time.sleep(60)
"""


def test_cpu_seconds_counts_a_process_tree_once_and_skips_gone_processes():
    import os
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", PARENT, BURN], stdout=subprocess.PIPE, text=True)
    grandchild = None
    try:
        grandchild = int(child.stdout.readline())
        tree = machine.cpu_seconds([child.pid])  # the parent's own start-up plus the burner's 0.4 s
        assert tree >= 0.4
        assert machine.cpu_seconds([grandchild]) >= 0.4
        # named twice (itself, and as its parent's descendant), the burner is counted once
        assert machine.cpu_seconds([child.pid, grandchild]) < tree + 0.05
    finally:
        child.kill()
        child.wait()
        if grandchild is not None:
            os.kill(grandchild, signal.SIGKILL)
    # a process that has exited and been reaped counts nothing, and so does a pid that never existed
    assert machine.cpu_seconds([child.pid]) == 0.0
    assert machine.cpu_seconds([2 ** 22 + 12345]) == 0.0
    assert machine.cpu_seconds([os.getpid()]) > 0
