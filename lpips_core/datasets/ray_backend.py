"""The scorer on Ray Data, for more machines than one (optional: ``pip install -e .[ray]``).

``ray.data.from_items(blocks).map_batches(RayScorer, concurrency=N, ...)``: each of ``N`` actors
builds the models once (:class:`RayScorer`'s constructor) and scores whole blocks, decoding
them itself. Items are the scorer's blocks (consecutive pairs in key order, see
:mod:`lpips_core.datasets.score`) rather than single pairs, so every pair goes through the
networks in the same batch as in a single-process run and the tables agree. Ray is started
locally if no cluster is connected (``ray.init()`` first to use one).

Example:
    >>> import ray; ray.init(num_cpus=2)                            # doctest: +SKIP
    >>> res = score_ray(match_folders("out", "gt"), "lpips,ssim", concurrency=2)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from .loader import MISMATCH_POLICIES, decode_pair
from .pairs import Discovery, Pair, pairs_digest
from .score import ScoreResult, Scorer, default_block, package_versions, summarize
from ..spec import MetricSpec, parse_specs
from .store import BASE_COLUMNS, final_rows

__all__ = ["RayScorer", "score_ray"]


class RayScorer:
    """A Ray actor's callable: holds a :class:`~lpips_core.datasets.score.Scorer` (its models) and
    turns a batch of blocks (``{"pairs": JSON lists of pairs}``) into ``{"rows": JSON lists of rows}``."""

    def __init__(self, metrics: Sequence[str], mismatch: str = "error", device: str | None = "cpu",
                 max_side: int | None = None):
        self.scorer = Scorer(list(metrics), device=device)
        self.scorer.build_all()
        self.mismatch, self.max_side = mismatch, max_side

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = []
        for text in batch["pairs"]:
            items = [decode_pair(i, Pair(*rest), mismatch=self.mismatch, classic=self.scorer.classic,
                                 max_side=self.max_side) for i, *rest in json.loads(str(text))]
            out.append(json.dumps(self.scorer.score_block(items)))
        return {"rows": np.array(out, dtype=object)}


def score_ray(
    pairs: Discovery | Sequence[Pair],
    metrics: Sequence[MetricSpec | str] | str = ("lpips",),
    *,
    mismatch: str = "error",
    batch_size: int | None = None,
    concurrency: int = 2,
    num_cpus: float = 1,
    num_gpus: float = 0,
    device: str | None = "cpu",
    max_side: int | None = None,
) -> ScoreResult:
    """:func:`~lpips_core.datasets.score.score_pairs` on Ray Data with ``concurrency`` model-holding actors.

    Args:
        pairs, metrics, mismatch, batch_size, max_side: as ``score_pairs``.
        concurrency: actors (each builds the models once).
        num_cpus, num_gpus: resources per actor (``num_gpus=1`` with ``device="cuda"`` on a GPU cluster).

    Raises:
        ImportError: Ray is not installed (``pip install -e .[ray]``). ValueError: bad options.
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the Ray backend needs Ray Data: pip install -e .[ray]") from exc
    from .score import _sorted_pairs

    pairs, report = _sorted_pairs(pairs)
    names = [s.name for s in parse_specs(metrics)]
    if mismatch not in MISMATCH_POLICIES:
        raise ValueError(f"mismatch must be one of {MISMATCH_POLICIES}, got {mismatch!r}")
    import torch

    block = default_block(torch.device(device or "cpu")) if batch_size is None else int(batch_size)
    if block < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    items = [{"block": k // block, "pairs": json.dumps([[i, p.key, p.reference, p.test, p.reference_name, p.test_name]
                                                        for i, p in enumerate(pairs[k:k + block], k)])}
             for k in range(0, len(pairs), block)]
    rows: list[dict] = []
    if items:
        ds = ray.data.from_items(items).map_batches(
            RayScorer, fn_constructor_kwargs=dict(metrics=names, mismatch=mismatch, device=device, max_side=max_side),
            batch_size=1, concurrency=concurrency, num_cpus=num_cpus, num_gpus=num_gpus, batch_format="numpy")
        for rec in ds.take_all():
            rows.extend(json.loads(str(rec["rows"])))
    rows = final_rows(rows)
    config = {"metrics": names, "mismatch": mismatch, "batch_size": block, "max_side": max_side,
              "pairs_total": len(pairs), "pairs_digest": pairs_digest(pairs), "backend": "ray",
              "concurrency": concurrency, "discovery": report}
    return ScoreResult(rows, summarize(rows, names), config, {**package_versions(), "ray": ray.__version__},
                       BASE_COLUMNS + tuple(names))
