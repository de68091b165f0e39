"""The pairs that drive a dataset's score, and where in each test image their distance comes from.

:func:`worst_rows` picks the ``k`` worst scored rows of one or more runs (the highest distance,
or the lowest similarity), worst first. :func:`worst_maps` decodes each of those pairs again,
exactly as the scorer did (:func:`~lpips_core.datasets.loader.decode_pair`, the same mismatch
policy), prepares both images under the spec (input range, colour, size) and compares them with
spatial maps: a :class:`PairMap` per pair. A map is the reference's ``spatial=True`` output, each
layer's per-position terms upsampled (bilinear) to the input size and summed, so its mean is the
pair's score up to that interpolation (within about 0.1 %). It takes the model it needs (the
caller's cached one) and never builds one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..conventions import resize
from ..images import DEFAULT_MAX_PIXELS
from ..spec import MetricSpec, parse_spec
from .loader import MISMATCH_POLICIES, decode_pair
from .pairs import Discovery, Pair

__all__ = ["PairMap", "spatial_map", "worst_maps", "worst_rows"]


@dataclass(frozen=True)
class PairMap:
    """One pair's spatial distance.

    Attributes:
        label: the run (method) the pair belongs to.
        key: the pair's key.
        value: the pair's score in the run's table.
        total: the score computed again beside the map (equal to ``value`` within float32 rounding).
        image: the test image at the map's size, ``(H, W, 3)`` float32 in ``[0, 1]``.
        map: ``(H, W)`` float32, the layer maps upsampled to the input size and summed (the
            reference's ``spatial=True``); its mean is ``total`` up to the upsampling.
    """

    label: str
    key: str
    value: float
    total: float
    image: np.ndarray
    map: np.ndarray


def worst_rows(runs: Mapping[str, Sequence[dict]], metric: str | MetricSpec, *, k: int = 10) -> list[tuple[str, dict]]:
    """The ``k`` worst scored rows over every run, worst first: ``[(label, row), …]``.

    Worst is the highest value of a distance and the lowest of a similarity
    (:attr:`~lpips_core.spec.MetricSpec.higher_is_better`); rows with an error or without a
    finite value are left out. Ties go by the runs' order, then by key.

    Raises:
        ValueError: ``k`` is not a positive integer.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    spec = parse_spec(metric)
    sign = 1.0 if spec.higher_is_better else -1.0
    found = []
    for order, (label, rows) in enumerate(runs.items()):
        for r in rows:
            v = r.get(spec.name)
            if r.get("error_kind") or v is None or not np.isfinite(v):
                continue
            found.append((sign * float(v), order, r["key"], label, r))
    found.sort(key=lambda t: t[:3])
    return [(label, r) for *_, label, r in found[:k]]


def _map_spec(model, spec: str | MetricSpec) -> MetricSpec:
    """``spec`` checked to have spatial maps and to be ``model``'s (:meth:`MetricSpec.for_model`)."""
    spec = parse_spec(spec)
    if not spec.has_maps:
        raise ValueError(f"{spec.label} has no spatial map" + (
            "" if spec.learned else ": it is computed on the images directly"))
    return MetricSpec.for_model(model, spec)


def spatial_map(model, spec: str | MetricSpec, pair: Pair, *, mismatch: str = "error",
                max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[np.ndarray, np.ndarray, float]:
    """``(test image, map, total)`` of one pair, decoded and prepared as the scorer does.

    Args:
        model: the spec's model (metric, net, version and lin weights as ``spec`` says).
        spec: a learned metric with spatial maps (LPIPS, ST-LPIPS).
        pair: the pair; ``mismatch``, ``max_pixels``: as the run that scored it.

    Returns:
        the test image ``(H, W, 3)`` float32 in ``[0, 1]`` at the map's size, the map ``(H, W)``
        float32 and the pair's score.

    Raises:
        ValueError: the pair cannot be decoded (the message says why), or a spec without maps.
        TypeError: a model of another configuration, or not a model of a registered metric.
    """
    spec = _map_spec(model, spec)
    if mismatch not in MISMATCH_POLICIES:
        raise ValueError(f"mismatch must be one of {MISMATCH_POLICIES}, got {mismatch!r}")
    d = decode_pair(0, pair, mismatch=mismatch, max_pixels=max_pixels)
    if d.error_kind:
        raise ValueError(f"{pair.key}: {d.error}")
    x = spec.prepare(d.a[None], device=model.device)
    y = spec.prepare(d.b[None], device=model.device)
    res = model.compare(x, y, spatial=True)
    m = res.spatial_map[0].float().cpu().numpy()
    img = d.b[None] if tuple(d.b.shape[-2:]) == m.shape else resize(d.b[None], m.shape).clamp_(0, 1)
    return img[0].permute(1, 2, 0).contiguous().numpy(), m, float(res.total[0])


def worst_maps(model, spec: str | MetricSpec, runs: Mapping[str, tuple[Discovery | Sequence[Pair], Sequence[dict]]],
               *, k: int = 10, mismatch: str = "error", max_pixels: int = DEFAULT_MAX_PIXELS) -> list[PairMap]:
    """The spatial maps of the ``k`` worst pairs under ``spec`` over every run, worst first.

    Args:
        model: the spec's model (see :func:`spatial_map`); the caller's, never built here.
        spec: the learned metric whose maps are drawn (its values are in the rows).
        runs: ``label → (the pairs or their discovery, the rows scored from them)`` (rows as
            :func:`~lpips_core.datasets.score.score_pairs` gives them).
        k: how many pairs (:func:`worst_rows`).
        mismatch, max_pixels: the run's size-mismatch policy and pixel budget.

    Raises:
        ValueError: see :func:`spatial_map` and :func:`worst_rows`; a row whose key is not
            among its run's pairs.
    """
    spec = _map_spec(model, spec)
    by_key = {}
    for label, (pairs, _) in runs.items():
        for p in (pairs.pairs if isinstance(pairs, Discovery) else pairs):
            by_key[(label, p.key)] = p
    out = []
    for label, row in worst_rows({label: rows for label, (_, rows) in runs.items()}, spec, k=k):
        pair = by_key.get((label, row["key"]))
        if pair is None:
            raise ValueError(f"run {label!r} has a row for {row['key']!r} but no such pair")
        image, m, total = spatial_map(model, spec, pair, mismatch=mismatch, max_pixels=max_pixels)
        out.append(PairMap(label, row["key"], float(row[spec.name]), total, image, m))
    return out
