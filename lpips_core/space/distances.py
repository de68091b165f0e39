"""All pairs of an embedding: the blocked Gram matrix, the distance matrix, diversity.

``d_ij = ‖φ_i‖² + ‖φ_j‖² − 2⟨φ_i, φ_j⟩``: :func:`gram` and :func:`pairwise_distances` compute it
in tiles under a byte budget (float32 GEMMs over column chunks of φ accumulated in float64,
float64 GEMMs for small tiles); :func:`jackknife_interval` summarises a distance matrix with an
interval over images, and :func:`diversity` computes the same summary tile by tile without
holding the ``N × N`` matrix.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .embedding import Embedding

__all__ = ["DEFAULT_BUDGET", "MAX_CHUNK", "SMALL_TILE", "diversity", "gram", "jackknife_interval",
           "pairwise_distances"]

DEFAULT_BUDGET = 1 << 30
"""Default byte budget of the Gram and neighbour stages (1 GiB): the embedding rows read at once
plus the float64 tile they accumulate into."""

MAX_CHUNK = 4096
"""Columns of φ per float32 GEMM; chunks are summed in float64 (a float32 sum over the 0.6 M
columns of an AlexNet embedding would lose ~1e-6 of a distance to rounding)."""


def _device(device) -> torch.device:
    from ..devices import resolve_device

    return resolve_device(device) if device is not None else torch.device("cpu")


def _plan(n: int, m: int, dim: int, budget: int) -> tuple[int, int]:
    """Tile side (rows of each operand per tile) and column chunk under ``budget`` bytes."""
    if budget < (1 << 20):
        raise ValueError(f"the memory budget must be at least 1 MiB, got {budget} bytes")
    side = max(64, int(math.sqrt(budget / 4 / 8)))
    ti, tj = min(n, side), min(m, side)
    chunk = int((budget / 2) // (4 * (ti + tj)))
    chunk = max(256, min(dim, MAX_CHUNK, chunk - chunk % 256 if chunk > 256 else chunk))
    return side, chunk


SMALL_TILE = 256 * 256
"""Tiles of at most this many entries are computed as float64 GEMMs over long column chunks: their
arithmetic is small, and many short float32 GEMMs would cost more in per-call overhead."""


def _tile_gram(a: "Embedding", b: "Embedding", i0, i1, j0, j1, chunk, dev, sym: bool,
               budget: int = DEFAULT_BUDGET) -> torch.Tensor:
    """``⟨φ_i, φ_j⟩`` for ``i ∈ [i0, i1)``, ``j ∈ [j0, j1)``, accumulated in float64 (on ``dev``):
    float32 GEMMs over column chunks of ``chunk`` floats, or, for a small tile
    (:data:`SMALL_TILE`), float64 GEMMs over chunks as long as ``budget`` allows."""
    ti, tj = i1 - i0, j1 - j0
    dtype = torch.float32
    if ti * tj <= SMALL_TILE:
        dtype = torch.float64
        chunk = int(min(a.dim, max(chunk, (budget // 2) // (8 * (ti + (0 if sym else tj))))))
    acc = torch.zeros((ti, tj), dtype=torch.float64, device=dev)
    # float64 tiles convert the rows anyway: read them from a view, without a float32 copy first
    read = (lambda e, *r: e._view(*r)) if dtype == torch.float64 else (lambda e, *r: e.rows(*r))
    for k0 in range(0, a.dim, chunk):
        k1 = min(a.dim, k0 + chunk)
        x = torch.from_numpy(read(a, i0, i1, k0, k1)).to(dev, dtype)
        if sym:
            # a diagonal tile: the upper block triangle, mirrored below (half the FLOPs)
            step = 512
            for r0 in range(0, x.shape[0], step):
                r1 = min(x.shape[0], r0 + step)
                acc[r0:r1, r0:] += x[r0:r1] @ x[r0:].T
        else:
            y = torch.from_numpy(read(b, j0, j1, k0, k1)).to(dev, dtype)
            acc += x @ y.T
    if sym:
        step = 512
        for r0 in range(0, acc.shape[0], step):
            r1 = min(acc.shape[0], r0 + step)
            acc[r1:, r0:r1] = acc[r0:r1, r1:].T
    return acc


def _distance_tile(a, b, i0, i1, j0, j1, chunk, dev, sym, budget: int = DEFAULT_BUDGET) -> np.ndarray:
    g = _tile_gram(a, b, i0, i1, j0, j1, chunk, dev, sym, budget)
    na = torch.from_numpy(a.norms[i0:i1]).to(dev)
    nb = torch.from_numpy(b.norms[j0:j1]).to(dev)
    d = (na[:, None] + nb[None, :]).sub_(g, alpha=2).clamp_(min=0)
    return d.cpu().numpy()


def gram(a: Embedding, b: Embedding | None = None, *, memory_budget: int = DEFAULT_BUDGET,
         device=None) -> np.ndarray:
    """``⟨φ_i, φ_j⟩`` as an ``(len(a), len(b))`` float64 array (``b=None``: ``a`` with itself).

    Tiles of at most ``memory_budget / 4`` bytes each; within a tile float32 GEMMs over column
    chunks, accumulated in float64. Runs on ``device`` (default CPU; ``"cuda"`` on a GPU).
    """
    same = b is None or b is a
    b = a if b is None else b
    side, chunk = _plan(len(a), len(b), a.dim, memory_budget)
    dev = _device(device)
    out = np.empty((len(a), len(b)), dtype=np.float64)
    for i0 in range(0, len(a), side):
        i1 = min(len(a), i0 + side)
        for j0 in range(i0 if same else 0, len(b), side):
            j1 = min(len(b), j0 + side)
            g = _tile_gram(a, b, i0, i1, j0, j1, chunk, dev, same and i0 == j0, memory_budget).cpu().numpy()
            out[i0:i1, j0:j1] = g
            if same and j0 != i0:
                out[j0:j1, i0:i1] = g.T
    return out


def _unify(d: np.ndarray, can_rows: np.ndarray | None, can_cols: np.ndarray | None) -> None:
    """Give duplicate rows/columns (identical pixels) their canonical row/column's values."""
    if can_cols is not None:
        dup = np.nonzero(can_cols != np.arange(len(can_cols)))[0]
        if dup.size:
            d[:, dup] = d[:, can_cols[dup]]
    if can_rows is not None:
        dup = np.nonzero(can_rows != np.arange(len(can_rows)))[0]
        if dup.size:
            d[dup] = d[can_rows[dup]]


def pairwise_distances(emb: Embedding, *, memory_budget: int = DEFAULT_BUDGET, device=None,
                       out: np.ndarray | None = None) -> np.ndarray:
    """Every ``d(i, j) = ‖φ_i‖² + ‖φ_j‖² − 2⟨φ_i, φ_j⟩`` as an ``(N, N)`` float64 matrix: symmetric,
    zero on the diagonal and between identical images, never negative.

    Args:
        out: an ``(N, N)`` float64 array (e.g. a ``.npy`` memmap) to write into.
    """
    n = len(emb)
    side, chunk = _plan(n, n, emb.dim, memory_budget)
    dev = _device(device)
    d = np.empty((n, n), dtype=np.float64) if out is None else out
    for i0 in range(0, n, side):
        i1 = min(n, i0 + side)
        for j0 in range(i0, n, side):
            j1 = min(n, j0 + side)
            t = _distance_tile(emb, emb, i0, i1, j0, j1, chunk, dev, i0 == j0, memory_budget)
            d[i0:i1, j0:j1] = t
            if j0 != i0:
                d[j0:j1, i0:i1] = t.T
    can = emb.canonical()
    _unify(d, can, can)
    d[can[:, None] == can[None, :]] = 0.0  # the diagonal, and identical images
    return d


def _interval(n: int, total: float, row: np.ndarray, std: float | None, level: float) -> dict:
    """The summary of :func:`jackknife_interval` from the pair total, each image's row sum and the std."""
    from scipy import stats

    pairs = n * (n - 1) // 2
    mean = total / pairs
    se = half = None
    if n >= 3:
        loo = (total - row) / ((n - 1) * (n - 2) / 2)  # the mean over the pairs without image i
        se = float(math.sqrt((n - 1) / n * float(((loo - loo.mean()) ** 2).sum())))
        half = float(stats.t.ppf((1 + level) / 2, n - 1)) * se
    return {"images": n, "pairs": pairs, "mean": mean, "std": std, "se": se,
            "ci95": [None, None] if half is None else [mean - half, mean + half],
            "interval": f"jackknife over images (leave one image out), Student t with N − 1 df, level {level}"}


def jackknife_interval(d: np.ndarray, *, level: float = 0.95) -> dict:
    """Mean over the ``N (N − 1) / 2`` pairs of a distance matrix, with an interval over images.

    The mean over all pairs is a U-statistic of degree 2; its pairs share images, so they are not
    independent (a Student t over pairs treats 66 pairs of 12 images as 66 independent draws).
    The standard error is the jackknife over images (Arvesen 1969): ``U₋ᵢ``, the mean over the
    pairs without image ``i``, for each ``i``; ``se² = (N − 1)/N · Σ (U₋ᵢ − Ū)²``. The interval
    is ``mean ± t_{(1+level)/2}(N − 1) · se`` (``None`` below 3 images).

    Returns:
        ``{"images", "pairs", "mean", "std", "se", "ci95", "interval"}`` (``std``: the pair
        distances' sample standard deviation, ``ddof=1``; ``None`` where undefined).
    """
    d = np.asarray(d, dtype=np.float64)
    n = d.shape[0]
    if d.ndim != 2 or d.shape != (n, n):
        raise ValueError(f"expected a square distance matrix, got shape {d.shape}")
    if n < 2:
        raise ValueError(f"all pairs need at least 2 images, got {n}")
    vals = d[np.triu_indices(n, 1)]
    upper = np.triu(d, 1)
    row = upper.sum(1) + upper.sum(0)
    return _interval(n, float(vals.sum()), row, float(vals.std(ddof=1)) if vals.size > 1 else None, level)


def diversity(emb: Embedding, *, memory_budget: int = DEFAULT_BUDGET, device=None, level: float = 0.95,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """:func:`jackknife_interval` of every pair of ``emb``, tile by tile, never holding the
    ``N × N`` matrix: per image its row sum, and the pairs' count, mean and squared deviations
    merged across tiles (Chan et al.); memory ``O(N)`` plus one tile.

    Raises:
        ValueError: fewer than 2 images.
    """
    n = len(emb)
    if n < 2:
        raise ValueError(f"all pairs need at least 2 images, got {n}")
    side, chunk = _plan(n, n, emb.dim, memory_budget)
    dev = _device(device)
    content = np.array(emb.content)
    row = np.zeros(n)
    count, mean, m2 = 0, 0.0, 0.0
    tiles = [(i0, j0) for i0 in range(0, n, side) for j0 in range(i0, n, side)]
    if progress:
        progress(0, len(tiles))
    for done, (i0, j0) in enumerate(tiles, 1):
        i1, j1 = min(n, i0 + side), min(n, j0 + side)
        t = _distance_tile(emb, emb, i0, i1, j0, j1, chunk, dev, i0 == j0, memory_budget)
        t[content[i0:i1, None] == content[None, j0:j1]] = 0.0  # identical images
        if i0 == j0:
            mask = np.triu(np.ones(t.shape, dtype=bool), 1)
            t = np.where(mask, t, 0.0)
            vals = t[mask]
            row[i0:i1] += t.sum(1) + t.sum(0)
        else:
            vals = t.ravel()
            row[i0:i1] += t.sum(1)
            row[j0:j1] += t.sum(0)
        if vals.size:
            c, mu = vals.size, float(vals.mean())
            q = float(((vals - mu) ** 2).sum())
            delta = mu - mean
            tot = count + c
            mean += delta * c / tot
            m2 += q + delta * delta * count * c / tot
            count = tot
        if progress:
            progress(done, len(tiles))
    std = math.sqrt(m2 / (count - 1)) if count > 1 else None
    return _interval(n, float(row.sum()) / 2, row, std, level)
