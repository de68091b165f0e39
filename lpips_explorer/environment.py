"""The environment variables the app and its lessons read: every one is read here, and listed in :data:`VARIABLES`.

=====================================  ===============================  ===========================================
variable                               default                          effect
=====================================  ===============================  ===========================================
``LPIPS_EXPLORER_SWEEP_CACHE``         ``~/.cache/lpips_explorer/       where Shift vs blur's sweeps are cached on
                                       sweeps``                         disk; ``off``: not at all
``LPIPS_EXPLORER_DATA``                ``data/`` in the checkout        the folder of the class study's SQLite file
``LPIPS_EXPLORER_HEAVY_JOBS``          one per two CPUs (at least 1)    heavy jobs (scoring a dataset, the loss
                                                                        lab) the server runs at once
``LPIPS_EXPLORER_SCRATCH``             ``<temp>/lpips-explorer``        where uploads are unpacked
``LPIPS_EXPLORER_SCRATCH_MB``          ``1024``                         all sessions' unpacked uploads together
``LPIPS_EXPLORER_SCRATCH_GRACE_S``     ``150``                          how long a session's folder outlives it
``LPIPS_EXPLORER_UPLOAD_MAX_MP``       ``100``                          the pixels one upload to the dataset page
                                                                        may hold in all, in megapixels
=====================================  ===============================  ===========================================

Each reader reads the environment when called. A value that is not a number where one is
expected falls back to the default (a server must start whatever its environment says). The
engine's variables are read in :mod:`lpips_core.environment`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from lpips_core.environment import Variable

__all__ = ["VARIABLES", "data_dir", "heavy_jobs", "scratch_budget_bytes", "scratch_grace_s", "scratch_root",
           "sweep_cache", "upload_max_pixels"]

#: The checkout's ``data/`` folder: the study database's default home.
REPO_DATA = Path(__file__).resolve().parents[1] / "data"

VARIABLES: tuple[Variable, ...] = (
    Variable("LPIPS_EXPLORER_SWEEP_CACHE", "~/.cache/lpips_explorer/sweeps",
             "where Shift vs blur's sweeps are cached on disk; off: not at all"),
    Variable("LPIPS_EXPLORER_DATA", "data/ in the checkout", "the folder of the class study's SQLite file"),
    Variable("LPIPS_EXPLORER_HEAVY_JOBS", "one per two CPUs, at least 1",
             "heavy jobs (scoring a dataset, the loss experiments) the server runs at once"),
    Variable("LPIPS_EXPLORER_SCRATCH", "<temp>/lpips-explorer", "where uploads are unpacked"),
    Variable("LPIPS_EXPLORER_SCRATCH_MB", "1024", "all sessions' unpacked uploads together, in MiB"),
    Variable("LPIPS_EXPLORER_SCRATCH_GRACE_S", "150", "how long a session's folder outlives the session, in seconds"),
    Variable("LPIPS_EXPLORER_UPLOAD_MAX_MP", "100",
             "the pixels one upload to the dataset page may hold in all, in megapixels"),
)


def _number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return float(default)


def sweep_cache() -> Path | None:
    """``$LPIPS_EXPLORER_SWEEP_CACHE``, else ``~/.cache/lpips_explorer/sweeps``; ``None`` when it is ``off``."""
    raw = os.environ.get("LPIPS_EXPLORER_SWEEP_CACHE", "")
    if raw.lower() == "off":
        return None
    return Path(raw) if raw else Path.home() / ".cache" / "lpips_explorer" / "sweeps"


def data_dir() -> Path:
    """``$LPIPS_EXPLORER_DATA``, else the checkout's ``data/``."""
    return Path(os.environ.get("LPIPS_EXPLORER_DATA") or REPO_DATA)


def heavy_jobs() -> int:
    """``$LPIPS_EXPLORER_HEAVY_JOBS`` (at least 1), else one per two CPUs, at least 1."""
    fallback = max(1, (os.cpu_count() or 1) // 2)
    text = os.environ.get("LPIPS_EXPLORER_HEAVY_JOBS", "")
    try:
        return max(1, int(text)) if text else fallback
    except ValueError:
        return fallback


def scratch_root() -> Path:
    """``$LPIPS_EXPLORER_SCRATCH``, else ``<temp>/lpips-explorer``."""
    return Path(os.environ.get("LPIPS_EXPLORER_SCRATCH") or Path(tempfile.gettempdir()) / "lpips-explorer")


def scratch_budget_bytes(default: int) -> int:
    """``$LPIPS_EXPLORER_SCRATCH_MB`` in bytes (at least 0), else ``default``."""
    return max(0, int(_number("LPIPS_EXPLORER_SCRATCH_MB", default / 2**20) * 2**20))


def scratch_grace_s(default: float) -> float:
    """``$LPIPS_EXPLORER_SCRATCH_GRACE_S`` (at least 0), else ``default``."""
    return max(0.0, _number("LPIPS_EXPLORER_SCRATCH_GRACE_S", default))


def upload_max_pixels(default_mp: float = 100) -> int:
    """``$LPIPS_EXPLORER_UPLOAD_MAX_MP`` megapixels as pixels (at least 0), else ``default_mp``."""
    return max(0, int(_number("LPIPS_EXPLORER_UPLOAD_MAX_MP", default_mp) * 1e6))
