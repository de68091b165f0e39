"""A scored table's statistics: per metric ``n``, mean, sample standard deviation and the 95 %
Student t interval of the mean (:func:`mean_ci`), and a run's summary (:func:`summarize`).

Used by the scorer (:mod:`~lpips_core.datasets.score`), the shard merge
(:mod:`~lpips_core.datasets.store`), explain and the method comparison; it imports none of them.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

__all__ = ["mean_ci", "prepare", "summarize"]


def _finite_or_none(x: float):
    return float(x) if math.isfinite(x) else None


def prepare() -> None:
    """Import what :func:`mean_ci` needs (SciPy's statistics, about 0.5 s the first time), for a
    process that has the time now: the scorer while its lanes compute the first blocks, rather
    than after them, between an explain's rounds."""
    from scipy import stats  # noqa: F401


def mean_ci(values: Sequence[float] | np.ndarray) -> dict:
    """``{"n", "mean", "std", "ci95", "nonfinite"}`` of the finite values (float64, in order).

    ``std`` is the sample standard deviation (``ddof=1``); ``ci95`` is
    ``mean ± t.ppf(0.975, n − 1) · std / √n``. Undefined statistics (``std``, ``ci95`` for
    ``n < 2``; everything for ``n = 0``) are ``None``.
    """
    from scipy import stats

    vals = np.asarray(values, dtype=np.float64)
    finite = vals[np.isfinite(vals)]
    n = int(finite.size)
    mean = float(finite.mean()) if n else float("nan")
    std = float(finite.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n) if n > 1 else float("nan")
    return {
        "n": n,
        "mean": _finite_or_none(mean),
        "std": _finite_or_none(std),
        "ci95": [_finite_or_none(mean - half), _finite_or_none(mean + half)] if n > 1 else [None, None],
        "nonfinite": int(vals.size - n),
    }


def summarize(rows: Sequence[dict], names: Sequence[str]) -> dict:
    """``{"n", "skipped", "skipped_by_reason", "metrics": {name: mean_ci(...)}}`` over ``rows`` in order.

    ``n``: scored rows; ``skipped``: rows with an error, also counted by ``error_kind``. Each
    metric's statistics (:func:`mean_ci`) cover the scored rows' finite values.
    """
    ok = [r for r in rows if not r["error_kind"]]
    reasons = Counter(r["error_kind"] for r in rows if r["error_kind"])
    metrics = {name: mean_ci([np.nan if r.get(name) is None else r[name] for r in ok]) for name in names}
    return {"n": len(ok), "skipped": sum(reasons.values()), "skipped_by_reason": dict(sorted(reasons.items())),
            "metrics": metrics}
