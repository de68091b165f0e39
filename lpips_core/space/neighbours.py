"""Nearest neighbours in an embedding: exact (:func:`nearest`) and approximate (:func:`build_index`).

:func:`nearest` ranks a pool's distinct images by the blocked Gram matrix and re-ranks the best
by their exact ``‖φ_q − φ_p‖²`` in float64, ties by pool row (sorted name). :func:`build_index`
indexes a projection of φ (:mod:`lpips_core.space.projection`) with FAISS, its factory string
checked against the grammar it accepts before FAISS sees it; :meth:`ApproximateIndex.search`
re-ranks its candidates exactly, and :func:`recall_at_k` compares it with :func:`nearest`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from .distances import DEFAULT_BUDGET, SMALL_TILE, _device, _distance_tile, _plan
from .embedding import Embedding, _check_int
from .projection import Projection, fit_projection, _used_dim

__all__ = ["ApproximateIndex", "Neighbours", "build_index", "nearest", "recall_at_k"]


@dataclass(frozen=True)
class Neighbours:
    """The ``k`` nearest pool rows of each query, nearest first (ties: lower pool row first).

    Attributes:
        indices: ``(Q, k)`` int64 pool rows, ``k`` at most the pool size (``-1`` where fewer
            rows are found: the self-match's slot when it is left out, an approximate index's
            misses).
        distances: ``(Q, k)`` float64 (``inf`` where ``indices`` is ``-1``).
    """

    indices: np.ndarray
    distances: np.ndarray

    def to_json(self, query_names: Sequence[str], pool_names: Sequence[str]) -> list[dict]:
        """``[{"query": NAME, "neighbours": [{"name": NAME, "distance": D}, …]}, …]``."""
        out = []
        for q, (idx, dist) in enumerate(zip(self.indices, self.distances)):
            out.append({"query": query_names[q],
                        "neighbours": [{"name": pool_names[int(j)], "distance": float(v)}
                                       for j, v in zip(idx, dist) if j >= 0]})
        return out


def _select(dist: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest ``(dist, idx)`` of each row in lexicographic order (ties by index)."""
    q, m = dist.shape
    if m <= k:
        order = np.lexsort((idx, dist), axis=-1)
        return np.take_along_axis(dist, order, -1), np.take_along_axis(idx, order, -1)
    kth = np.partition(dist, k - 1, axis=1)[:, k - 1:k]
    mask = dist <= kth
    counts = mask.sum(1)
    out_d = np.empty((q, k)), np.empty((q, k), dtype=np.int64)
    simple = counts == k
    if simple.any():
        sd = dist[simple][mask[simple]].reshape(-1, k)
        si = idx[simple][mask[simple]].reshape(-1, k)
        order = np.lexsort((si, sd), axis=-1)
        out_d[0][simple] = np.take_along_axis(sd, order, -1)
        out_d[1][simple] = np.take_along_axis(si, order, -1)
    for r in np.nonzero(~simple)[0]:  # ties at the k-th value
        sel = np.nonzero(mask[r])[0]
        order = np.lexsort((idx[r, sel], dist[r, sel]))[:k]
        out_d[0][r] = dist[r, sel][order]
        out_d[1][r] = idx[r, sel][order]
    return out_d


def _exact_many(a: Embedding, i: int, b: Embedding, cols: Sequence[int]) -> list[float]:
    """``‖φ_i − φ_j‖²`` for each ``j`` in ``cols``, summed in float64 straight from the rows, in one
    pass over the candidates (identical pixels: exactly 0)."""
    if not cols:
        return []
    x = torch.from_numpy(a.rows(i, i + 1)[0]).double()
    y = torch.from_numpy(b.take(cols)).double()
    d = y.sub_(x).square_().sum(1).tolist()
    return [0.0 if a.content[i] == b.content[j] else v for j, v in zip(cols, d)]


def nearest(queries: Embedding, pool: Embedding, k: int = 5, *, exclude_self: bool | None = None,
            memory_budget: int = DEFAULT_BUDGET, device=None, margin: int = 4,
            progress: Callable[[int, int], None] | None = None) -> Neighbours:
    """Exact ``k`` nearest pool images of each query under LPIPS.

    The blocked Gram matrix ranks the pool's distinct images (identical pixels count once); the
    ``k + margin`` best of each query, with every copy of them, are then re-ranked by their exact
    ``‖φ_q − φ_p‖²`` summed in float64 (the float32 Gram's rounding, ~1e-7, cannot reorder
    them; small tiles are float64 GEMMs already and keep their values), and sorted by
    ``(distance, pool row)``: ties (identical images) go by sorted name.

    Args:
        k: neighbours per query (``≥ 1``), capped at the pool size: a larger ``k`` gives the
            whole pool, sorted, at the cost of ``k`` = the pool size.
        exclude_self: leave out pool row ``i`` for query ``i`` (dedup within one folder: a copy
            of an image under another name is still found, at distance 0); default: when
            ``queries is pool``.
        memory_budget: bytes for a tile and the rows it reads (the pool is read in tiles).
        margin: extra candidates re-ranked per query.
        progress: called with ``(tiles done, tiles)``.
    """
    k = _check_int("k", k, 1, "the neighbours per query, e.g. k=5; a k above the pool size gives the whole pool")
    margin = _check_int("margin", margin, 0, "extra candidates re-ranked per query, e.g. margin=4")
    queries.compatible(pool)
    exclude = (queries is pool) if exclude_self is None else bool(exclude_self)
    if exclude and len(queries) != len(pool):
        raise ValueError("exclude_self needs the query set to be the pool")
    nq, npool = len(queries), len(pool)
    k = min(k, max(1, npool - exclude))  # the whole pool (less the self-match) at most: no (Q, k) arrays beyond it
    side, chunk = _plan(nq, npool, queries.dim, memory_budget)
    dev = _device(device)
    can_p = pool.canonical()
    want = min(k + margin + (1 if exclude else 0), npool)
    cand_d, cand = _candidates(queries, pool, can_p, want, side, chunk, dev, memory_budget, progress)
    # small tiles were float64 GEMMs: their distances are already exact; float32 ones are re-ranked
    small = min(nq, side) * min(npool, side) <= SMALL_TILE
    return _rerank(queries, pool, can_p, cand_d, cand, k, exclude, small)


def _candidates(queries: Embedding, pool: Embedding, can_p: np.ndarray, want: int, side: int, chunk: int, dev,
                memory_budget: int, progress: Callable[[int, int], None] | None) -> tuple[np.ndarray, np.ndarray]:
    """The ``want`` (``≤ len(pool)``) nearest distinct pool images of each query, tile by tile of
    the blocked Gram matrix: ``(Q, want)`` float64 distances and int64 pool rows, each a canonical
    row of ``can_p`` (:meth:`Embedding.canonical`; ``-1`` and ``inf`` where a query has fewer)."""
    nq, npool = len(queries), len(pool)
    tiles = -(-nq // side) * -(-npool // side)
    done = 0
    if progress:
        progress(0, tiles)
    parts = []
    for i0 in range(0, nq, side):
        i1 = min(nq, i0 + side)
        bd, bi = np.full((i1 - i0, 0), np.inf), np.zeros((i1 - i0, 0), dtype=np.int64)
        for j0 in range(0, npool, side):
            j1 = min(npool, j0 + side)
            t = _distance_tile(queries, pool, i0, i1, j0, j1, chunk, dev, False, memory_budget)
            t[:, can_p[j0:j1] != np.arange(j0, j1)] = np.inf  # copies: ranked through their first row
            idx = np.broadcast_to(np.arange(j0, j1), t.shape)
            bd, bi = _select(np.concatenate([bd, t], 1), np.concatenate([bi, idx], 1), want)
            bi = np.where(np.isfinite(bd), bi, -1)
            done += 1
            if progress:
                progress(done, tiles)
        parts.append((bd, bi))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _rerank(queries: Embedding, pool: Embedding, can_p: np.ndarray, cand_d: np.ndarray, cand: np.ndarray, k: int,
            exclude: bool, small: bool) -> Neighbours:
    """The ``k`` nearest of each query among its candidates (:func:`_candidates`) and every copy
    of them (the pool rows sharing a canonical row), sorted by ``(distance, pool row)``: the
    exact ``‖φ_q − φ_p‖²`` in float64, or the candidates' own distances when ``small`` (float64
    tiles already); identical pixels at exactly 0. ``exclude``: pool row ``q`` is left out for query ``q``."""
    copies: dict[int, list[int]] = {}
    for j, c in enumerate(can_p.tolist()):
        copies.setdefault(c, []).append(j)
    nq = len(queries)
    dist = np.full((nq, k), np.inf)
    ind = np.full((nq, k), -1, dtype=np.int64)
    for q in range(nq):
        keep = cand[q] >= 0
        cs = cand[q][keep].tolist()
        if small:
            exact = [0.0 if queries.content[q] == pool.content[c] else float(v)
                     for c, v in zip(cs, cand_d[q][keep])]
        else:
            exact = _exact_many(queries, q, pool, cs)
        rows, values = [], []
        for c, v in zip(cs, exact):
            for j in copies[c]:
                if not (exclude and j == q):
                    rows.append(j)
                    values.append(v)
        if not rows:
            continue
        r, v = np.asarray(rows, dtype=np.int64), np.asarray(values)
        order = np.lexsort((r, v))[:k]
        dist[q, :order.size], ind[q, :order.size] = v[order], r[order]
    return Neighbours(ind, dist)


@dataclass
class ApproximateIndex:
    """A FAISS index over a projection of φ, re-ranked exactly (see :func:`build_index`)."""

    pool: Embedding
    index: object
    projection: Projection
    oversample: int
    memory_budget: int = DEFAULT_BUDGET

    def search(self, queries: Embedding, k: int = 5, *, exclude_self: bool | None = None,
               rerank: bool = True) -> Neighbours:
        """The ``k`` nearest pool rows of each query: the index's ``k · oversample`` candidates,
        re-ranked by their exact LPIPS ``‖φ_q − φ_p‖²`` (float64; ties by pool row) unless
        ``rerank=False`` (then in the index's order, with its projected distances).

        ``k`` (``≥ 1``) is capped at the pool size, and the candidates at the pool: a larger ``k``
        gives every pool row the index finds, sorted.

        Raises:
            ValueError: ``k`` or ``oversample`` below 1, ``exclude_self`` with queries that are not
                the pool, FAISS refusing the search (its first line). TypeError: ``k`` not an integer.
        """
        k = _check_int("k", k, 1, "the neighbours per query, e.g. k=5; a k above the pool size gives the whole pool")
        oversample = _check_int("oversample", self.oversample, 1, "candidates re-ranked per neighbour, e.g. 4")
        queries.compatible(self.pool)
        exclude = (queries is self.pool) if exclude_self is None else bool(exclude_self)
        if exclude and len(queries) != len(self.pool):
            raise ValueError("exclude_self needs the query set to be the pool")
        k = min(k, max(1, len(self.pool) - exclude))  # the whole pool (less the self-match) at most
        cand_k = min(len(self.pool), k * oversample + (1 if exclude else 0))
        vq = np.ascontiguousarray(self.projection.apply(queries, memory_budget=self.memory_budget), dtype=np.float32)
        pd, cand = _faiss_call("search", self.index.search, vq, cand_k)
        nq = len(queries)
        dist = np.full((nq, k), np.inf)
        ind = np.full((nq, k), -1, dtype=np.int64)
        for q in range(nq):
            keep = [(j, v) for j, v in zip(cand[q], pd[q]) if j >= 0 and not (exclude and j == q)]
            if not keep:
                continue
            c = np.array([j for j, _ in keep], dtype=np.int64)
            if rerank:
                dv = np.array(_exact_many(queries, q, self.pool, [int(j) for j in c]))
            else:
                dv = np.array([float(v) for _, v in keep])
            order = np.lexsort((c, dv))[:k]
            dist[q, :order.size], ind[q, :order.size] = dv[order], c[order]
        return Neighbours(ind, dist)


def build_index(pool: Embedding, *, dim: int = 256, method: str = "random", factory: str = "Flat", sample: int = 2048,
                seed: int = 0, oversample: int = 4, memory_budget: int = DEFAULT_BUDGET) -> ApproximateIndex:
    """An approximate nearest-neighbour index of ``pool`` (needs ``faiss-cpu``: ``pip install -e .[faiss]``).

    φ is projected to ``dim`` dimensions (:func:`fit_projection`: a Gaussian random projection,
    or PCA of a ``sample`` of the pool), indexed by ``faiss.index_factory(d, factory)``; a search
    re-ranks ``k · oversample`` candidates by their exact LPIPS. ``d``, the dimensions used
    (``index.projection.dim``), is ``dim`` capped at the embedding's width ``pool.dim``, and for
    PCA at ``min(sample, len(pool)) − 1``. The projection's working memory stays within
    ``memory_budget`` (:meth:`Projection.plan`).

    ``factory`` is checked before FAISS sees it (FAISS aborts the process on some strings, e.g.
    ``"HNSW0"``); this subset is accepted, with ``N = len(pool)`` and ``d`` as above:

    - ``Flat``: exact in the projected space;
    - ``HNSW<M>`` or ``HNSW<M>,Flat``: a graph of ``M`` links per node, ``2 ≤ M ≤ 256``;
    - ``IVF<n>,Flat``: ``n`` inverted lists, ``1 ≤ n ≤ N`` (k-means needs a training point per list);
    - ``PQ<m>``, ``PQ<m>x<b>``, ``IVF<n>,PQ<m>``, ``IVF<n>,PQ<m>x<b>``: product quantisation into
      ``m`` codes of ``b`` bits (default 8), ``m`` dividing ``d``, ``1 ≤ b ≤ 16``, and
      ``N ≥ 2^b`` training points (and ``1 ≤ n ≤ N``).

    Numbers are plain ASCII digits; no spaces. A string FAISS still refuses (e.g. a 1- or 2-bit
    code on a SIMD path that needs 8 centroids, a 16-bit plain ``PQ``'s polysemous training) is a
    ``ValueError`` with FAISS's first line, from building or searching.

    Raises:
        ImportError: FAISS is not installed. ValueError: bad sizes, method or factory (the
            message says what is accepted). TypeError: an argument of the wrong type.
    """
    if not isinstance(factory, str):
        raise TypeError(f"factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32', "
                        f"got {type(factory).__name__}")
    oversample = _check_int("oversample", oversample, 1, "candidates re-ranked per neighbour, e.g. oversample=4")
    if method not in ("pca", "random"):
        raise ValueError(f"method must be 'pca' or 'random', got {method!r}")
    if len(pool) < 1:
        raise ValueError("the pool has no image: nothing to index")
    used = _used_dim(pool, dim, method, sample)
    factory = _check_factory(factory, used, len(pool))
    try:
        import faiss
    except ImportError as exc:
        raise ImportError("the approximate index needs FAISS: pip install -e .[faiss] (faiss-cpu)") from exc
    proj = fit_projection(pool, dim, method=method, sample=sample, seed=seed, memory_budget=memory_budget)
    v = np.ascontiguousarray(proj.apply(pool, memory_budget=memory_budget), dtype=np.float32)
    index = _faiss_call("index_factory", faiss.index_factory, proj.dim, factory)
    if not index.is_trained:
        _faiss_call("train", index.train, v)
    _faiss_call("add", index.add, v)
    return ApproximateIndex(pool, index, proj, oversample, memory_budget)


_FACTORY = re.compile(r"(?:Flat|HNSW(?P<M>[0-9]{1,6})(?:,Flat)?|IVF(?P<n>[0-9]{1,12}),Flat"
                      r"|(?:IVF(?P<pn>[0-9]{1,12}),)?PQ(?P<m>[0-9]{1,9})(?:x(?P<b>[0-9]{1,3}))?)")
_GRAMMAR = ("Flat, HNSW<M> or HNSW<M>,Flat (2 ≤ M ≤ 256), IVF<n>,Flat (1 ≤ n ≤ the pool size), or PQ<m>, "
            "PQ<m>x<b>, IVF<n>,PQ<m>[x<b>] (m divides the dimensions, 1 ≤ b ≤ 16, at least 2^b pool images)")


def _check_factory(factory: str, dim: int, n: int) -> str:
    """``factory`` if :func:`build_index` accepts it for ``n`` vectors of ``dim`` dimensions (the
    subset its docstring lists), before FAISS sees it.

    Raises:
        TypeError: not a string. ValueError: outside the subset, or a parameter out of range for
            ``dim`` and ``n`` (one line: what is accepted, or the parameter's range).
    """
    if not isinstance(factory, str):
        raise TypeError(f"factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32', "
                        f"got {type(factory).__name__}")
    m = _FACTORY.fullmatch(factory)
    if m is None:
        shown = factory if len(factory) <= 60 else factory[:57] + "..."
        raise ValueError(f"unsupported FAISS factory {shown!r}: use {_GRAMMAR}")

    def bad(what: str) -> ValueError:
        return ValueError(f"FAISS factory {factory!r}: {what}")

    if m["M"] is not None and not 2 <= int(m["M"]) <= 256:
        raise bad(f"HNSW needs 2 ≤ M ≤ 256 links per node, got {int(m['M'])}; e.g. HNSW32")
    lists = m["n"] if m["n"] is not None else m["pn"]
    if lists is not None and not 1 <= int(lists) <= n:
        raise bad(f"IVF needs 1 ≤ n ≤ {n:,} lists (k-means trains on the pool's {n:,} vectors), got {int(lists)}; "
                  f"e.g. IVF{max(1, min(n, round(math.sqrt(n))))},Flat")
    if m["m"] is not None:
        codes, bits = int(m["m"]), 8 if m["b"] is None else int(m["b"])
        if codes < 1 or dim % codes:
            divisors = [c for c in range(1, min(dim, 64) + 1) if dim % c == 0]
            raise bad(f"PQ needs m to divide the {dim:,} dimensions of the projection, got m={codes}; "
                      f"e.g. {', '.join(str(c) for c in divisors[-4:])}")
        if not 1 <= bits <= 16:
            raise bad(f"PQ needs 1 ≤ b ≤ 16 bits per code, got {bits}; e.g. PQ{codes}x8")
        if n < 2 ** bits:
            fits = n.bit_length() - 1  # the most bits n training points allow
            raise bad(f"PQ with {bits}-bit codes trains 2^{bits} = {2 ** bits:,} centroids, which needs at least "
                      f"as many pool images, got {n:,}; use "
                      + (f"fewer bits (PQ{codes}x{fits}) or Flat" if fits >= 1 else "Flat"))
    return factory


def _faiss_call(what: str, fn, *args):
    """``fn(*args)``, a FAISS ``RuntimeError`` (a failed check in its C++) as a ``ValueError`` with its first line."""
    try:
        return fn(*args)
    except RuntimeError as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ValueError(f"FAISS refused the index ({what}): {first}") from exc


def recall_at_k(approx: Neighbours, exact: Neighbours) -> float:
    """The share of the exact ``k`` nearest neighbours that the approximate search found."""
    k = exact.indices.shape[1]
    hit = total = 0
    for a, e in zip(approx.indices, exact.indices):
        want = {int(j) for j in e if j >= 0}
        hit += len(want & {int(j) for j in a[:k] if j >= 0})
        total += len(want)
    return hit / total if total else float("nan")
