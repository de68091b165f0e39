"""The environment variables the engine reads: every one is read here, and listed in :data:`VARIABLES`.

=================================  ===========================  ==============================================
variable                           default                      effect
=================================  ===========================  ==============================================
``LPIPS_EXPLORER_CACHE``           ``~/.cache/lpips_explorer``  the project cache (converted weights, the
                                                                batch-size table)
``LPIPS_EXPLORER_OFFLINE``         unset                        ``1``/``true``/``yes``: never try to download
                                                                torchvision's backbone weights
``LPIPS_EXPLORER_CACHE_MB``        ``128``                      each model's reference-feature cache (MiB)
``LPIPS_EXPLORER_CACHE_TOTAL_MB``  ``256``                      every model's feature caches together (MiB)
``LPIPS_EXPLORER_BATCH_TABLE``     in the project cache         ``off``: no measured batch sizes (the memory
                                                                rule only); a path: where the table is kept
``LPIPS_EXPLORER_NNPACK``          ``1``                        ``0``: never run convolutions on NNPACK
=================================  ===========================  ==============================================

Each reader reads the environment when called (a test or a server may set a variable before
the first use); :mod:`lpips_core.backbones` reads ``LPIPS_EXPLORER_NNPACK`` once, at import.
The app's own variables are read in :mod:`lpips_explorer.environment`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VARIABLES", "Variable", "batch_table", "cache_mb", "cache_root", "nnpack", "offline"]


@dataclass(frozen=True)
class Variable:
    """One environment variable: its ``name``, its ``default`` (as a person reads it) and its ``effect``."""

    name: str
    default: str
    effect: str


VARIABLES: tuple[Variable, ...] = (
    Variable("LPIPS_EXPLORER_CACHE", "~/.cache/lpips_explorer",
             "the project cache: converted weights and the batch-size table"),
    Variable("LPIPS_EXPLORER_OFFLINE", "unset",
             "1, true or yes: never try to download torchvision's backbone weights"),
    Variable("LPIPS_EXPLORER_CACHE_MB", "128", "each model's reference-feature cache, in MiB"),
    Variable("LPIPS_EXPLORER_CACHE_TOTAL_MB", "256", "every model's reference-feature caches together, in MiB"),
    Variable("LPIPS_EXPLORER_BATCH_TABLE", "batch-table.json in the project cache",
             "off: no measured batch sizes (the memory rule only); a path: where the table is kept"),
    Variable("LPIPS_EXPLORER_NNPACK", "1", "0: never run convolutions on NNPACK (read once, at import)"),
)


def _raw(name: str) -> str:
    return os.environ.get(name, "")


def cache_root() -> Path:
    """``$LPIPS_EXPLORER_CACHE``, else ``~/.cache/lpips_explorer``."""
    return Path(_raw("LPIPS_EXPLORER_CACHE") or Path.home() / ".cache" / "lpips_explorer")


def offline() -> bool:
    """``$LPIPS_EXPLORER_OFFLINE`` is ``1``, ``true`` or ``yes``."""
    return _raw("LPIPS_EXPLORER_OFFLINE") in ("1", "true", "yes")


def cache_mb(name: str, default_mb: int) -> int:
    """The budget in bytes that ``$name`` gives in MiB (``default_mb`` when unset).

    Raises:
        ValueError: not a number, or negative (the message names the variable and the value).
    """
    raw = os.environ.get(name)
    if raw is None:
        return default_mb << 20
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of MiB, got {raw!r}") from None
    if mb < 0:
        raise ValueError(f"{name} must be ≥ 0, got {raw!r}")
    return int(mb * (1 << 20))


def batch_table() -> Path | None:
    """Where the batch-size table is kept: ``$LPIPS_EXPLORER_BATCH_TABLE`` as a path, ``None`` when
    it is ``0``/``off``/``false``/``no``, else ``batch-table.json`` in :func:`cache_root`."""
    raw = _raw("LPIPS_EXPLORER_BATCH_TABLE")
    if raw.lower() in ("0", "off", "false", "no"):
        return None
    return Path(raw) if raw else cache_root() / "batch-table.json"


def nnpack() -> bool:
    """NNPACK may run convolutions unless ``$LPIPS_EXPLORER_NNPACK`` is ``0``."""
    return os.environ.get("LPIPS_EXPLORER_NNPACK", "1") != "0"
