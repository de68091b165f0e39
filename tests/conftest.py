"""Test tiers, and shared fixtures: the golden example images, devices, a Streamlit ``AppTest``.

Tiers (markers registered in ``pyproject.toml``):

- default ``pytest``: the fast tier, unit and library tests (parity with the reference packages
  included); the tests marked below are *deselected*, not skipped.
- ``pytest --full``: everything (what the README's test command and ``.ci/run`` run).

Marks are applied by location: ``tests/e2e/*`` → ``e2e`` (Chromium, the load test); tests using
the ``app`` fixture or in ``test_page*.py`` → ``apptest``. An explicit ``@pytest.mark.slow`` marks
long library experiments, and the costly members of a family whose representative stays in the
fast tier: VGG16 twins of AlexNet checks (parity, gradients, the contract), and CLI subprocess
tests beside one end-to-end run per CLI or an in-process twin through ``main``. ``-m`` still
selects within what is collected (``pytest --full -m apptest``). The oracles live in
:mod:`lpips_core.testing`.

The fast tier runs torch on one intra-op thread, in-process and in the CLIs its tests start
(``OMP_NUM_THREADS=1``), unless ``OMP_NUM_THREADS`` is already set: its tensors are small, and on
the shared 2-core machine two OpenMP threads per process spin against the other jobs (measured
under load: AlexNet at 64 px 11 ms a pair on one thread, 59 ms on two; ``test_model``,
``test_stlpips`` and ``test_contract`` together 31 s against 69–75 s). ``--full`` keeps torch's
default, so the app, the CLIs and the browser tests' server run as deployed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
FULL_TIER = ("apptest", "e2e", "slow")  # run only with --full
_DROPPED = pytest.StashKey[int]()


# --------------------------------------------------------------------------- tiers
def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="run the full suite: also AppTest page tests, Chromium e2e and slow tests")


def pytest_configure(config):
    """Fast tier: one torch thread (see the module docstring); the full tier keeps the default.

    Both tiers make this process's NNPACK pool for one thread before any test runs: PyTorch
    makes it once, for the thread count of NNPACK's first call, and which test came first would
    otherwise decide which tests may use NNPACK (:func:`lpips_core.backbones.nnpack_pool`). The
    two-thread path (the app's server) is tested in fresh processes (``test_nnpack.py``) and runs
    in the browser tests' server.
    """
    from lpips_core.backbones import nnpack_pool

    nnpack_pool(1)
    if config.getoption("--full") or "OMP_NUM_THREADS" in os.environ:
        return
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the CLI subprocesses
    torch.set_num_threads(1)


def _tier(item) -> str | None:
    """The full-tier marker an item gets by where it lives, or ``None``."""
    path = Path(str(item.path))
    if REPO / "tests" / "e2e" in path.parents:
        return "e2e"
    if path.name.startswith("test_page") or "app" in getattr(item, "fixturenames", ()):
        return "apptest"
    return None


def pytest_collection_modifyitems(config, items):
    """Mark items by location; without ``--full``, deselect every full-tier item."""
    for item in items:
        tier = _tier(item)
        if tier is not None:
            item.add_marker(tier)
    if config.getoption("--full"):
        return
    keep, drop = [], []
    for item in items:
        (drop if any(item.get_closest_marker(m) for m in FULL_TIER) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        config.stash[_DROPPED] = len(drop)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say what the fast tier left out, so a deselection never reads as a pass."""
    dropped = config.stash.get(_DROPPED, 0)
    if dropped:
        terminalreporter.write_line(f"fast tier: {dropped} full-tier tests ({', '.join(FULL_TIER)}) "
                                    "deselected; run `pytest --full` for everything")


def golden_dir() -> Path:
    """``tests/data`` (the reference repository's example images and their licence; override with
    ``LPIPS_GOLDEN_DIR``)."""
    return Path(os.environ.get("LPIPS_GOLDEN_DIR", REPO / "tests" / "data"))


@pytest.fixture(scope="session")
def golden() -> dict[str, np.ndarray]:
    """The reference repository's three 64×64 examples as float arrays in [0, 1].

    Missing files fail the tests that use them: they are CI's test data, not optional.
    """
    from PIL import Image

    d = golden_dir()
    out = {}
    for name in ("ex_ref", "ex_p0", "ex_p1"):
        path = d / f"{name}.png"
        if not path.is_file():
            pytest.fail(f"golden image {path} is missing (tests/data holds them in the repository; LPIPS_GOLDEN_DIR overrides)")
        out[name] = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
    return out


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


@pytest.fixture
def one_thread():
    """The test runs on one torch thread (a scoring lane's count: NNPACK and the kept Winograd
    kernels), then the thread count is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- Streamlit AppTest
@pytest.fixture
def app():
    """A fresh ``AppTest`` of ``app.py`` (not yet run), with a timeout fit for CPU inference."""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(REPO / "app.py"), default_timeout=180)
