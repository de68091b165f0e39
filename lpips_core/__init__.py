"""lpips_core: an exact LPIPS library (reference ``lpips`` 0.1.4 numbers) for LPIPS Explorer.

Pure library: PyTorch, NumPy, Pillow, scikit-image; never Streamlit. Every learned metric follows
one protocol (:mod:`lpips_core.protocol`); :mod:`lpips_core.metric_registry` builds them by name.

The names below load on first use (PEP 562), so ``python -m lpips_core`` can refuse a bad
argument before PyTorch is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LPIPS": "model",
    "LPIPSResult": "model",
    "Features": "protocol",
    "LearnedMetric": "protocol",
    "MetricResult": "protocol",
    "resolve_device": "protocol",
    "WeightsUnavailable": "weights",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lpips_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
