"""Hostile input never reaches a traceback.

* ``python -m lpips_core compare``: every hostile argument (non-regular files, missing files,
  sizes, devices, usage errors) exits with status 2 within 10 s, with exactly one line on
  stderr, ``error: ...``, naming the problem, and nothing on stdout. The table runs in-process
  through ``main`` in the fast tier, and as real subprocesses (``timeout=10`` each, about 3 s
  of interpreter and torch start-up per case) in the full tier (``slow``); the FIFO case runs
  as a subprocess in both.
* The Distortion lab: the free-text kernel taps that once produced NaN images
  (``1e308, -1e308, 1e308``) and a 100,001-tap kernel each give a short message on the page,
  no exception, and the shared chain keeps its last good value.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from apptest_helpers import ok as _ok
from conftest import REPO, golden_dir

GOOD = str(golden_dir() / "ex_ref.png")


def _cli(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lpips_core", "compare", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=10)
    return proc, time.perf_counter() - start


def _assert_one_line(proc: subprocess.CompletedProcess, fragment: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert fragment in lines[0], lines[0]
    return lines[0]


# (id, extra arguments after A B, the fragment the one line must contain)
SIZES = [
    ("size-0", ["--size", "0"], "argument --size: sides must be from 1 to 2048 px, got '0'"),
    ("size-negative", ["--size", "-5"], "sides must be from 1 to 2048 px, got '-5'"),
    ("size-20000", ["--size", "20000"], "sides must be from 1 to 2048 px, got '20000'"),
    ("size-100000", ["--size", "100000"], "sides must be from 1 to 2048 px, got '100000'"),
    ("size-over-cap", ["--size", "2049"], "got '2049'"),
    ("size-pair-over-cap", ["--size", "64x4096"], "got '64x4096'"),
    ("size-pair-zero", ["--size", "64x0"], "got '64x0'"),
    ("size-3x", ["--size", "3x"], "argument --size: expected N or HxW, got '3x'"),
    ("size-x3", ["--size", "x3"], "expected N or HxW, got 'x3'"),
    ("size-3-parts", ["--size", "2x2x2"], "expected N or HxW, got '2x2x2'"),
    ("size-float", ["--size", "1e3"], "expected N or HxW, got '1e3'"),
    ("size-text", ["--size", "big"], "expected N or HxW, got 'big'"),
]
DEVICES = [
    ("device-meta", ["--device", "meta"], "device must be 'auto', 'cpu', 'cuda' or 'mps', got 'meta'"),
    ("device-garbage", ["--device", "garbage"], "got 'garbage'"),
    ("device-empty", ["--device", ""], "argument --device"),
    ("device-cuda-99", ["--device", "cuda:99"], "cuda:99"),
]
if not torch.cuda.is_available():  # where CUDA exists, plain "cuda" is a valid device
    DEVICES.append(("device-cuda", ["--device", "cuda"], "device 'cuda' requested but CUDA is not available here"))
_mps = getattr(torch.backends, "mps", None)
if _mps is None or not _mps.is_available():
    DEVICES.append(("device-mps", ["--device", "mps"], "device 'mps' requested but Apple MPS is not available here"))
USAGE = [
    ("unknown-metric", ["--metric", "psnr"], "argument --metric: invalid choice: 'psnr'"),
    ("unknown-option", ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("bad-convention", ["--convention", "[0,2]"], "argument --convention: invalid choice"),
]


DEVICE_FILES = [
    ("dev-zero-as-a", ["/dev/zero", GOOD], "'/dev/zero' is a character device, not an image file, so it was not read"),
    ("dev-zero-as-b", [GOOD, "/dev/zero"], "'/dev/zero' is a character device, not an image file"),
    ("dev-urandom", [GOOD, "/dev/urandom"], "'/dev/urandom' is a character device"),
    ("dev-null", ["/dev/null", GOOD], "'/dev/null' is a character device"),
    ("missing-b", [GOOD], "the following arguments are required: b"),
]
TABLE = [(cid, [GOOD, GOOD, *extra], fragment) for cid, extra, fragment in SIZES + DEVICES + USAGE] + DEVICE_FILES


@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_hostile_arguments_subprocess(args, fragment):
    proc, seconds = _cli(*args)
    _assert_one_line(proc, fragment)
    assert seconds < 10


def _main(args: list[str], capfd) -> subprocess.CompletedProcess:
    """``main(["compare", *args])`` in-process, as a CompletedProcess (usage errors exit 2)."""
    from lpips_core.__main__ import main

    try:
        code = main(["compare", *args])
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.parametrize("args, fragment", [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_hostile_arguments_in_process(args, fragment, capfd):
    """The same table through ``main``: usage errors leave by ``SystemExit(2)``, the rest return 2."""
    line = _assert_one_line(_main(args, capfd), fragment)
    if "argument" in line or "arguments" in line:
        assert line.endswith(" --help)")  # "(see python -m lpips_core compare --help)"


def test_fifo_does_not_block(tmp_path):
    """A named pipe with no writer would block ``open`` forever; it is refused from os.stat."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    proc, seconds = _cli(GOOD, str(fifo))  # subprocess.run's timeout=10 fails the test if it blocks
    _assert_one_line(proc, f"'{fifo}' is a named pipe (FIFO), not an image file")
    assert seconds < 10


def test_fifo_refused_before_the_other_image_is_read(tmp_path, capfd):
    """Both paths are checked up front, before any image is read or model built."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    _assert_one_line(_main([GOOD, str(fifo)], capfd), f"'{fifo}' is a named pipe (FIFO), not an image file")
    _assert_one_line(_main([str(tmp_path), str(fifo)], capfd), f"'{tmp_path}' is a directory, not an image file")


def test_directory_missing_and_empty_files(tmp_path, capfd):
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    for args, fragment in [
        ([str(tmp_path), GOOD], f"'{tmp_path}' is a directory, not an image file"),
        ([GOOD, str(tmp_path / "nope.png")], f"No such file: '{tmp_path / 'nope.png'}'"),
        ([GOOD, str(empty)], "is empty (0 bytes)"),
    ]:
        _assert_one_line(_main(args, capfd), fragment)


def test_unexpected_exception_is_one_line(monkeypatch, capfd):
    """Whatever goes wrong inside, main() prints one line and returns 2 (no traceback)."""
    from lpips_core.cli import compare, main

    def boom(args):
        raise RuntimeError("CUDA error: an illegal memory access\nwas encountered")

    monkeypatch.setattr(compare, "compare_command", boom)
    assert main(["compare", GOOD, GOOD]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err == "error: unexpected RuntimeError: CUDA error: an illegal memory access was encountered\n"

    def oom(args):
        raise MemoryError()

    monkeypatch.setattr(compare, "compare_command", oom)
    assert main(["compare", GOOD, GOOD]) == 2
    assert capfd.readouterr().err == "error: unexpected MemoryError\n"


# --------------------------------------------------------------------------- Distortion lab
def _kernel_step(kernel: tuple[float, ...]) -> dict:
    return {"id": 0, "name": "kernel_blur", "params": {"kernel": kernel, "boundary": "wrap"}}


def test_lab_extreme_kernel_taps_show_a_message(app):
    """The taps ``1e308, -1e308, 1e308`` typed into the lab: a message, no exception, no NaN.

    The chain is seeded with a 100,001-tap kernel (as if pasted into the field), so no metric
    runs before the text field is driven: each rerun is refused at once.
    """
    app.session_state["lab_steps"] = [_kernel_step((0.0,) * 100_001)]
    app.session_state["lab_next_id"] = 1
    app.switch_page("app_pages/distortion_lab.py")
    start = time.perf_counter()
    at = _ok(app.run())
    errors = [e.value for e in at.error]
    assert errors == ["This chain cannot be applied: kernel must have at most 63 taps; got 100001"], errors
    assert time.perf_counter() - start < 60  # was 183 s of server time

    _ok(at.text_input(key="lab_0_kernel").set_value("1e308, -1e308, 1e308").run())
    errors = [e.value.replace("\\", "") for e in at.error]  # the page escapes Markdown
    assert errors == ["This chain cannot be applied: kernel taps must lie in [-100, 100]; got (1e+308, -1e+308, 1e+308)"]
    assert "lab_chain" not in at.session_state  # no non-finite image was handed to the other pages
    assert not at.dataframe  # no metric table was computed from a bad image
