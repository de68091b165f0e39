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
    assert {"cpus", "platform", "load_avg_1m", "cpu"} <= set(info) and info["cpus"] >= 1


def test_speed_probe_times_a_python_loop_and_a_one_thread_matmul_and_restores_the_threads():
    import torch

    threads = torch.get_num_threads()
    speed = machine.speed_probe(loops=10_000, side=256, rounds=2)
    assert set(speed) == {"python_loop_s", "matmul_gflops_1thread"}
    assert 0 < speed["python_loop_s"] < 5 and speed["matmul_gflops_1thread"] > 0
    assert torch.get_num_threads() == threads
