"""Two methods scored on the same pairs: the paired difference per metric, and who wins.

Given the rows of two :func:`~lpips_core.datasets.score.score_pairs` runs (reference vs method
A, reference vs method B), :func:`compare_methods` pairs the rows by ``key`` (rows with an
error or a non-finite value on either side are left out of that metric) and gives, per metric,
both means and the mean of the paired difference ``A − B`` with its 95 % Student t interval
(:func:`~lpips_core.datasets.summary.mean_ci`). The better method is the one with the lower mean
distance (MSE, LPIPS, ST-LPIPS, DISTS) or the higher mean similarity (PSNR, SSIM:
:attr:`~lpips_core.spec.MetricSpec.higher_is_better`); ``clear`` says whether the interval excludes 0.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..spec import parse_spec
from .summary import mean_ci

__all__ = ["compare_methods", "higher_is_better", "same_ranking"]


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the metric column ``name`` means a closer match (:attr:`MetricSpec.higher_is_better`)."""
    return parse_spec(name).higher_is_better


def _values(rows: Sequence[dict], name: str) -> dict[str, float]:
    out = {}
    for r in rows:
        v = r.get(name)
        if not r.get("error_kind") and v is not None and math.isfinite(v):
            out[r["key"]] = float(v)
    return out


def compare_methods(rows_a: Sequence[dict], rows_b: Sequence[dict], names: Sequence[str],
                    *, labels: tuple[str, str] = ("A", "B")) -> list[dict]:
    """Per metric: ``{"metric", "n", "mean_a", "mean_b", "diff", "ci95", "better", "clear", "higher_is_better"}``.

    ``diff`` is the mean of ``A − B`` over the keys both runs scored, ``ci95`` its Student t
    interval (``[None, None]`` for fewer than 2 pairs); ``better`` is a label of ``labels`` or
    ``"tie"``; ``clear``: the interval excludes 0.
    """
    out = []
    for name in names:
        va, vb = _values(rows_a, name), _values(rows_b, name)
        keys = sorted(set(va) & set(vb))
        a = [va[k] for k in keys]
        b = [vb[k] for k in keys]
        st = mean_ci([x - y for x, y in zip(a, b)])
        up = higher_is_better(name)
        diff = st["mean"]
        if diff is None or diff == 0:
            better = "tie"
        else:
            better = labels[0] if (diff > 0) == up else labels[1]
        lo, hi = st["ci95"]
        out.append({"metric": name, "n": st["n"], "mean_a": sum(a) / len(a) if a else None,
                    "mean_b": sum(b) / len(b) if b else None, "diff": diff, "ci95": [lo, hi],
                    "better": better, "clear": lo is not None and (lo > 0 or hi < 0), "higher_is_better": up})
    return out


def same_ranking(comparison: Sequence[dict]) -> bool:
    """Whether every metric of :func:`compare_methods` names the same better method."""
    return len({c["better"] for c in comparison}) <= 1
