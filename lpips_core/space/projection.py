"""Projections of φ to a few dimensions, for the approximate index: seeded Gaussian axes or PCA.

:class:`Projection` maps ``(N, D)`` rows to ``(N, dim)`` coordinates column chunk by column chunk
within a byte budget; :func:`fit_projection` makes one for a pool (``"random"``: axes made from a
seed block by block, never stored; ``"pca"``: the leading axes of a sample, from its Gram matrix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .distances import DEFAULT_BUDGET, gram
from .embedding import Embedding, _check_int

__all__ = ["RANDOM_BLOCK_FLOATS", "Projection", "fit_projection"]

RANDOM_BLOCK_FLOATS = 1 << 23
"""Floats of one seeded block of the random projection's axes (32 MiB): a block is
``min(32768, RANDOM_BLOCK_FLOATS // dim)`` rows of ``dim`` floats (:func:`_random_block_rows`)."""


def _random_block_rows(dim: int) -> int:
    """Rows of φ per seeded block of the ``(D, dim)`` random axes: 32,768 up to 256 dimensions,
    fewer above, so that a block is at most :data:`RANDOM_BLOCK_FLOATS` floats whatever ``dim``.
    A function of ``dim`` only: the axes do not depend on the memory budget."""
    return max(1, min(1 << 15, RANDOM_BLOCK_FLOATS // max(1, int(dim))))


def _projection_chunk(seed: int, k0: int, k1: int, dim: int) -> torch.Tensor:
    """Rows ``[k0, k1)`` of the ``(D, dim)`` Gaussian projection ``N(0, 1/dim)``, made from ``seed``
    block by block (never held whole: ``D × dim`` floats are gigabytes for VGG16). ``k0`` starts
    a block of :func:`_random_block_rows` rows and ``k1 - k0`` is at most one block."""
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + k0)
    return torch.randn((k1 - k0, dim), generator=g).div_(math.sqrt(dim))


@dataclass
class Projection:
    """A linear map of φ to ``dim`` dimensions, ``(φ − mean) · axes``, applied column chunk by chunk.

    ``method="random"``: seeded Gaussian axes ``N(0, 1/dim)`` (Johnson–Lindenstrauss: squared
    distances kept in expectation), made block by block (at most 32 MiB each, from ``seed`` and
    ``dim`` only) and never stored. ``method="pca"``: the ``dim`` leading principal axes of a
    sample of the pool (from the eigenvectors of its centred Gram matrix, so no ``D × D``
    covariance is formed; the axes, ``D × dim`` float32, are kept): distances shrink to their part
    in the sample's principal subspace. ``chunk``: PCA's column chunk (the random projection's is
    its seed block).
    """

    method: str
    dim: int
    seed: int = 0
    chunk: int = 1 << 15
    mean: np.ndarray | None = None
    axes: np.ndarray | None = None

    def _axes(self, k0: int, k1: int) -> torch.Tensor:
        if self.method == "random":
            return _projection_chunk(self.seed, k0, k1, self.dim)
        return torch.from_numpy(self.axes[k0:k1])

    def plan(self, width: int, memory_budget: int = DEFAULT_BUDGET) -> tuple[int, int]:
        """Columns of φ per chunk and rows of φ per step that keep :meth:`apply` within
        ``memory_budget`` bytes for an embedding of ``width`` floats a row: the chunk's axes (random:
        one seeded block of ``_random_block_rows(dim) × dim`` floats, made on the fly; PCA: a view
        of the stored axes), the rows read (``rows × chunk``) and their product (``rows × dim``).

        Raises:
            ValueError: the budget cannot hold the chunk's axes and one row (the message names
                the budget that can).
        """
        memory_budget = _check_int("memory_budget", memory_budget, 1 << 20, "bytes, e.g. 1 << 30")
        if self.method == "random":
            chunk = min(width, _random_block_rows(self.dim))
            held = 4 * chunk * self.dim
        else:
            chunk, held = max(1, min(width, int(self.chunk))), 0
        per_row = 4 * (chunk + self.dim)
        rows = (memory_budget - held) // per_row
        if rows < 1:
            need = -(-(held + per_row) // (1 << 20))
            raise ValueError(f"a {self.method} projection to {self.dim:,} dimensions works on blocks of "
                             f"{chunk:,} × {self.dim:,} floats ({held / 2**20:.1f} MiB) plus a row, over the "
                             f"memory budget of {memory_budget / 2**20:.1f} MiB: raise the budget to at least "
                             f"{need:,} MiB (--memory-mb {need}) or project to fewer dimensions")
        return chunk, rows

    def apply(self, emb: Embedding, *, memory_budget: int = DEFAULT_BUDGET) -> np.ndarray:
        """``(N, dim)`` float32 coordinates of every row of ``emb``, column chunk by column chunk,
        the working memory within ``memory_budget`` (:meth:`plan`; the result's ``N × dim``
        floats come on top)."""
        n = len(emb)
        chunk, rows = self.plan(emb.dim, memory_budget)
        out = np.zeros((n, self.dim), dtype=np.float32)
        for k0 in range(0, emb.dim, chunk):
            k1 = min(emb.dim, k0 + chunk)
            r = self._axes(k0, k1)
            for i0 in range(0, n, rows):
                i1 = min(n, i0 + rows)
                x = torch.from_numpy(emb.rows(i0, i1, k0, k1))
                if self.mean is not None:
                    x -= torch.from_numpy(self.mean[k0:k1])
                out[i0:i1] += (x @ r).numpy()
            del r
        return out


def fit_projection(pool: Embedding, dim: int, *, method: str = "pca", sample: int = 2048, seed: int = 0,
                   memory_budget: int = DEFAULT_BUDGET) -> Projection:
    """A :class:`Projection` of ``pool``'s φ to ``dim`` dimensions (``"pca"`` fitted on ``sample``
    seeded rows, or ``"random"``).

    PCA without the ``D × D`` covariance: with ``X`` the sample's centred rows, ``X Xᵀ = U Λ Uᵀ``
    (an ``m × m`` eigenproblem, from the blocked Gram matrix) gives the principal axes
    ``V = Xᵀ U Λ^{-1/2}``, built column chunk by column chunk.

    The projection's ``dim`` is the one used: ``dim`` capped at the embedding's width
    (``pool.dim``), and for PCA at ``min(sample, len(pool)) − 1`` (the axes a centred sample spans).

    Raises:
        ValueError: an unknown method, ``dim`` or ``sample`` below 1, a PCA sample of fewer than
            2 images. TypeError: ``dim``, ``sample`` or ``seed`` not an integer.
    """
    if method not in ("pca", "random"):
        raise ValueError(f"method must be 'pca' or 'random', got {method!r}")
    dim = _used_dim(pool, dim, method, sample)
    seed = _check_int("seed", seed, 0, "the projection's seed, e.g. seed=0")
    if method == "random":
        return Projection("random", dim, seed)
    n = len(pool)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(sample, n), replace=False))
    sub = Embedding([pool.names[i] for i in rows], [(0, pool.take(rows))], pool.norms[rows],
                    [pool.content[i] for i in rows], pool.layout, pool.manifest)
    m = len(rows)
    g = gram(sub, memory_budget=memory_budget)
    h = np.eye(m) - 1.0 / m
    lam, u = np.linalg.eigh(h @ g @ h)
    keep = dim  # already min(dim, pool.dim, m - 1): _used_dim
    order = np.argsort(lam)[::-1][:keep]
    lam, u = np.clip(lam[order], 1e-30, None), u[:, order]
    w = torch.from_numpy((h @ u / np.sqrt(lam)).astype(np.float32))  # centring folded into the weights
    x = sub.blocks[0][1]
    mean = x.mean(0, dtype=np.float64).astype(np.float32)
    axes = np.zeros((pool.dim, keep), dtype=np.float32)
    for k0 in range(0, pool.dim, 1 << 15):
        k1 = min(pool.dim, k0 + (1 << 15))
        axes[k0:k1] = (torch.from_numpy(np.ascontiguousarray(x[:, k0:k1])).T @ w).numpy()
    return Projection("pca", keep, seed, mean=mean, axes=axes)


def _used_dim(pool: Embedding, dim: int, method: str, sample: int) -> int:
    """The projection's dimensions for ``dim`` asked: at most ``pool.dim`` (a wider projection
    adds nothing), for PCA at most ``min(sample, len(pool)) − 1`` (the axes a centred sample spans)."""
    dim = _check_int("dim", dim, 1, "the projection's dimensions, e.g. dim=256")
    used = min(dim, pool.dim)
    if method == "pca":
        sample = _check_int("sample", sample, 1, "the pool images PCA is fitted on, e.g. sample=2048")
        spans = min(sample, len(pool)) - 1
        if spans < 1:
            raise ValueError(f"PCA needs a sample of at least 2 images, got {min(sample, len(pool))} "
                             f"(pool of {len(pool)}, sample={sample}): use method='random' (--projection random)")
        used = min(used, spans)
    return used
