"""lpips_core: an exact LPIPS library (reference ``lpips`` 0.1.4 numbers) for LPIPS Explorer.

The metric engine: PyTorch, NumPy, Pillow, scikit-image; never Streamlit, Plotly or SQLAlchemy.
Every learned metric follows one protocol (:mod:`lpips_core.protocol`); a metric in a configuration
is a :class:`~lpips_core.spec.MetricSpec`; :func:`build` makes its model, :func:`distance` scores
two files or arrays in one call::

    from lpips_core import LPIPS, distance
    distance("a.png", "b.png")                      # LPIPS AlexNet v0.1 lin, as a float
    LPIPS("vgg")(x, y, normalize=True)              # (N,) distances of [0, 1] batches, differentiable

The names below load on first use (PEP 562), so ``python -m lpips_core`` can refuse a bad
argument before PyTorch is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "distance": "api",
    "LPIPS": "model",
    "STLPIPS": "stlpips",
    "DISTS": "dists",
    "ELPIPS": "elpips",
    "MetricSpec": "spec",
    "parse_spec": "spec",
    "build": "metric_registry",
    "prepare_input": "metric_registry",
    "load_image": "images",
    "to_input": "conventions",
    "Features": "protocol",
    "LearnedMetric": "protocol",
    "MetricResult": "protocol",
    "resolve_device": "devices",
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
