"""A diagnosis as a JSON report, with the configuration and the library versions."""

from __future__ import annotations

import json
import math
import platform
from dataclasses import asdict
from importlib import metadata
from typing import Any, Mapping

import numpy as np
import torch

from lpips_core import __version__ as _LPIPS_CORE_VERSION
from lpips_explorer.diagnostics.diagnosis import Diagnosis

__all__ = ["build_report", "library_versions", "report_json"]


def library_versions(extra: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """Versions of everything that can change a score (``None`` for a package not installed).

    ``extra`` adds entries, e.g. the app adds ``{"streamlit": st.__version__}`` (this library
    never imports Streamlit).
    """
    import torchvision

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out = {
        "python": platform.python_version(),
        "lpips_core": _LPIPS_CORE_VERSION,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
        "pillow": dist("pillow"),
        "scikit-image": dist("scikit-image"),
        "lpips (reference package)": dist("lpips"),
    }
    out.update(dict(extra or {}))
    return out


def build_report(diagnosis: Diagnosis, *, versions: Mapping[str, str | None] | None = None,
                 extra_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready summary: scores, the full configuration, the checks (with ids) and library versions."""
    d = diagnosis
    config = dict(d.config)
    config.update(dict(extra_config or {}))
    return {
        "lpips": d.score,
        "per_layer": dict(zip(d.layer_names, (float(v) for v in d.per_layer))),
        "classic": dict(d.classic),
        "configuration": config,
        "images": d.facts,
        "native_size": dict(d.native_size),
        "ranking": [asdict(f) for f in d.ranking],
        "checks": [asdict(c) for c in d.checks],
        "resize_options": [asdict(o) for o in d.resize_options],
        "alignment": asdict(d.alignment) if d.alignment is not None else None,
        "blockiness": dict(d.blockiness),
        "versions": dict(versions) if versions is not None else library_versions(),
    }


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else ("inf" if v > 0 else "-inf" if v < 0 else "nan")
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def report_json(report: Mapping[str, Any]) -> str:
    """Strict JSON text (non-finite numbers become the strings ``"inf"``, ``"-inf"``, ``"nan"``)."""
    return json.dumps(_jsonable(report), indent=2, ensure_ascii=False, allow_nan=False)
