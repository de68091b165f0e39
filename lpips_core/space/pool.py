"""A pool index that does not hold the pool's embeddings: projections, a FAISS index, exact re-rank.

A full embedding is ``D`` floats an image (AlexNet: 31,872 at 64 px, about 650,000 at 256 px),
so a million images' φ is terabytes. :func:`build_pool` keeps only a ``dim``-dimensional
projection of each φ (:class:`~lpips_core.space.projection.Projection`: seeded Gaussian axes, or
PCA fitted on a seeded sample of the pool) and a FAISS index over them, with a digest of each
file; :meth:`PoolIndex.search` finds each query's ``candidates`` nearest projections in the index
and re-ranks them exactly by re-embedding the candidate images from their files: the distances it
reports are exact LPIPS ``‖φ_q − φ_p‖²`` (float64), identical pixels exactly 0.

On disk (a folder, checked by :func:`open_pool` before a number comes out of it): ``pool.json``,
the manifest in format :data:`POOL_FORMAT` (configuration, input size, layout, projection, index,
file names, skipped files, weights, versions, and the records of the array files: name, dtype,
shape, SHA-256), ``proj.npy`` ``(N, dim)`` float32, ``digests.npy`` ``(N, 16)`` uint8 (the
BLAKE2b-128 of each file's bytes: a candidate whose file changed since is refused, never
silently re-ranked), ``index.faiss``, and for PCA ``pca-mean.npy`` ``(D,)`` and ``pca-axes.npy``
``(D, dim)`` float32. The manifest is written last: a pool is complete when it exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from .. import files
from .distances import DEFAULT_BUDGET
from .embedder import _write_npy_header, embed, image_files
from .embedding import Embedding, _check_int, _nat, _spec_layout_problem
from .euclidean import EmbeddingLayout
from .neighbours import Neighbours, _check_factory, _faiss_call
from .projection import Projection, fit_projection

__all__ = ["DEFAULT_CANDIDATES", "IVF_NPROBE", "POOL_FORMAT", "PROJECTIONS", "PoolIndex", "build_pool", "default_factory",
           "is_pool_dir", "open_pool"]

POOL_FORMAT = "lpips-space-pool/1"
MANIFEST = "pool.json"
PROJECTIONS = ("gaussian", "pca")
DEFAULT_CANDIDATES = 64
"""Candidates re-ranked exactly per query by default (``neighbours --index --candidates``): with a
256-d PCA projection of 64 px AlexNet embeddings they held every exact top 5 of 300 queries in a
pool of 10,000 (32 held 99.7 %; a Gaussian projection needs about twice the candidates), see
``docs/lpips-space.md``."""

IVF_NPROBE = 32
"""Inverted lists probed per query when the index is an ``IVF…`` factory given to :func:`build_pool`."""

_MAX_MANIFEST = 512 * 2**20  # a million names and the skipped list, with room
_MAX_ARRAY = 1 << 40  # the byte cap of an array file read back (its size is checked exactly against its shape)


def default_factory(n: int) -> tuple[str, int]:
    """``(FAISS factory, nprobe)`` for a pool of ``n`` images: ``Flat``, exact over the projections,
    whatever ``n``. The index's search is never what a query waits for: a ``Flat`` search of 1,000
    queries over 1,000,000 projections of 256 dimensions takes seconds, re-embedding their
    candidates takes hours (``docs/lpips-space.md``), and an inverted file (``IVF…``) would only
    lose candidates."""
    return "Flat", 0


def is_pool_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a pool index's manifest (``pool.json``)."""
    return (Path(path) / MANIFEST).is_file()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with files.open_regular(path, max_bytes=_MAX_ARRAY) as fh:  # a file this build just wrote
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _record(path: Path, dtype: str, shape: Sequence[int]) -> dict:
    return {"file": path.name, "dtype": dtype, "shape": [int(s) for s in shape], "sha256": _sha256(path)}


@dataclass
class PoolIndex:
    """A pool index opened from its folder (:func:`open_pool`) or just built (:func:`build_pool`).

    Attributes:
        root: its folder. manifest: ``pool.json``. names: the indexed images, relative to the
        pool's folder (``manifest["source"]["dir"]``), in row order (sorted). digests: ``(N, 16)``
        uint8, each file's BLAKE2b-128. projection: the map of φ to the index's space. index: the
        FAISS index (``ntotal == N``). layout: φ's layout (its width ``D``).
    """

    root: Path
    manifest: dict
    names: list[str]
    digests: np.ndarray
    projection: Projection
    index: object
    layout: EmbeddingLayout

    def __len__(self) -> int:
        return len(self.names)

    @property
    def spec_name(self) -> str:
        return self.manifest["config"]["spec"]

    @property
    def source(self) -> Path:
        return Path(self.manifest["source"]["dir"])

    def search(self, model, queries, k: int = 5, candidates: int | None = None, *,
               names: Sequence[str] | None = None, exclude_self: bool = False,
               memory_budget: int = DEFAULT_BUDGET, threads: int = 2,
               progress: Callable[[int, int], None] | None = None) -> tuple[Neighbours, list[str], list[dict]]:
        """The ``k`` nearest pool images of each query: ``candidates`` per query from the index,
        re-embedded from their files and re-ranked by their exact LPIPS (float64; ties by pool
        row, i.e. name). See :func:`search_pool`."""
        return search_pool(self, model, queries, k, candidates, names=names, exclude_self=exclude_self,
                           memory_budget=memory_budget, threads=threads, progress=progress)


# --------------------------------------------------------------------------- building
def build_pool(model, folder: str | os.PathLike[str], out: str | os.PathLike[str], *, spec=None, dim: int = 256,
               projection: str = "pca", sample: int = 2048, seed: int = 0, factory: str | None = None,
               memory_budget: int = DEFAULT_BUDGET, threads: int = 2,
               progress: Callable[[int, int], None] | None = None,
               observe: Callable[[Embedding], None] | None = None) -> PoolIndex:
    """Index the images of ``folder`` into the new folder ``out`` without keeping their embeddings.

    The images (sorted) are embedded chunk by chunk (each chunk's φ within ``memory_budget``),
    each chunk projected to ``dim`` dimensions and written to ``proj.npy``; then the FAISS index
    is built over the projections, and the manifest written last.

    Args:
        model, spec: as :func:`~lpips_core.space.embed` (one input size: set ``spec``'s size
            when the images differ).
        dim: the projection's dimensions, capped at φ's width (and for PCA at ``sample − 1``).
        projection: ``"pca"`` (fitted on ``sample`` seeded images of the pool; its mean and axes
            stored: the default, it needs about half the candidates for the same recall) or
            ``"gaussian"`` (seeded axes, never stored).
        factory: a FAISS factory string (:func:`~lpips_core.space.build_index`'s subset;
            an ``IVF…`` one probes :data:`IVF_NPROBE` lists); default :func:`default_factory`.
        progress: called with ``(images done, images)``.
        observe: called with each chunk's in-memory :class:`Embedding` (e.g. to compute exact
            distances to a few queries on the side, as the benchmark does).

    Raises:
        ValueError: a missing folder or one without readable images, an existing pool in ``out``,
            images of different sizes without ``spec.size``, a bad ``dim``, ``projection`` or
            ``factory``. ImportError: FAISS is not installed.
    """
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    dim = _check_int("dim", dim, 1, "the projection's dimensions, e.g. dim=256")
    sample = _check_int("sample", sample, 2, "the images PCA is fitted on, e.g. sample=2048")
    memory_budget = _check_int("memory_budget", memory_budget, 1 << 24, "bytes, e.g. 1 << 30")
    faiss, all_files, out = _start(folder, out)
    run = _PoolBuild(model, spec, Path(folder), all_files, out, dim, seed, memory_budget, threads)
    if projection == "pca":
        run.fit_pca(sample)
    run.project_all(progress, observe)
    return run.complete(faiss, factory, str(folder))


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ImportError("the pool index needs FAISS: pip install -e .[faiss] (faiss-cpu)") from exc
    return faiss


def _start(folder, out) -> tuple:
    """What a pool build (here or on Ray) needs first: FAISS, the folder's images (none: an
    error) and the output folder, made and checked by :func:`_check_new`."""
    faiss = _faiss()
    names, _ = image_files(folder)
    if not names:
        raise ValueError(f"folder {str(folder)!r} has no images")
    out = Path(out)
    _check_new(out)
    return faiss, names, out


def _check_new(out: Path) -> None:
    """Make ``out`` and refuse to build over anything a pool writes there."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, "proj.npy", "digests.npy", "index.faiss", "pca-mean.npy", "pca-axes.npy"):
        files.check_output(out / name, hint="remove it or choose another folder")


class _PoolBuild:
    """One run of :func:`build_pool`: the projection, the rows written to ``proj.npy`` (a memmap
    under a temporary name, published when complete), the names, digests and skipped files."""

    def __init__(self, model, spec, folder: Path, all_files: list[str], out: Path, dim: int, seed: int,
                 memory_budget: int, threads: int):
        self.model, self.spec, self.folder, self.all_files, self.out = model, spec, folder, all_files, out
        self.dim, self.seed, self.budget, self.threads = dim, seed, memory_budget, threads
        self.proj: Projection | None = None
        self.layout: EmbeddingLayout | None = None
        self.first: dict | None = None  # the first chunk's manifest: configuration, size, model, versions
        self.names: list[str] = []
        self.digests: list[bytes] = []
        self.skipped: list[dict] = []
        self.rows = 0
        self.pca_sample = 0
        self.digest_array: np.ndarray | None = None
        self.dest = None  # proj.npy's memmap while the rows are written
        self.header = 0

    def _embed(self, names: Sequence[str], spill: str | None = None) -> Embedding:
        emb = embed(self.model, [str(self.folder / n) for n in names], names=list(names), spec=self.spec,
                    threads=self.threads, memory_budget=self.budget, spill=spill)
        self.check_same(emb.manifest, emb.names[0] if emb.names else "an image")
        return emb

    def check_same(self, m: dict, name: str) -> None:
        """Every chunk embedded under the first one's configuration, input size and layout
        (``m``: the chunk's manifest; ``name``: its first image, for the message)."""
        if self.first is None:
            self.first = {k: m[k] for k in ("config", "input_size", "layout", "dim", "model", "device", "versions")}
            self.layout = EmbeddingLayout(tuple(tuple(x) for x in m["layout"]))
            self.spec = m["config"]["spec"]
            return
        for key in ("config", "input_size", "layout"):
            if m[key] != self.first[key]:
                raise ValueError(f"{name} is embedded with {key} {m[key]}, the pool's first images with "
                                 f"{self.first[key]}: LPIPS compares images of one size; pass a size (--size N) "
                                 "to resize them all")

    def append(self, tmp: Path, v: np.ndarray, names: list[str], digests: list[bytes], skipped: list[dict]) -> None:
        """A chunk's projections ``(rows, dim)`` after the rows written (``proj.npy``'s memmap at
        ``tmp`` made for every image on the first call), its names, file digests and skipped files."""
        if self.dest is None:
            self.dest = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32,
                                                  shape=(len(self.all_files), self.proj.dim))
            self.header = self.dest.offset
        self.dest[self.rows:self.rows + len(v)] = v
        self.rows += len(v)
        self.names += names
        self.digests += digests
        self.skipped += skipped

    def fit_pca(self, sample: int) -> None:
        """PCA axes from a seeded sample of the pool (its φ spilled to a temporary folder when over
        the budget; the fit holds at most the budget's worth of rows)."""
        n = len(self.all_files)
        rows = np.sort(np.random.default_rng(self.seed).choice(n, size=min(sample, n), replace=False))
        with tempfile.TemporaryDirectory(prefix="lpips-pool-") as tmp:
            emb = self._embed([self.all_files[i] for i in rows], spill=tmp)
            fit = max(2, min(len(emb), self.budget // (4 * emb.dim)))
            self.proj = fit_projection(emb, min(self.dim, fit - 1, emb.dim), method="pca", sample=fit,
                                       seed=self.seed, memory_budget=self.budget)
            self.pca_sample = fit
            del emb  # its memmap, before the folder goes

    def project_all(self, progress, observe) -> None:
        """Every image embedded chunk by chunk and projected into ``proj.npy`` (unreadable ones skipped)."""
        n = len(self.all_files)
        if progress:
            progress(0, n)
        with files.published(self.out / "proj.npy") as tmp:
            start, step = 0, 16  # a first chunk sets φ's width, which sets the next chunks' size
            while start < n:
                emb = self._embed(self.all_files[start:start + step])
                if self.proj is None:
                    self.proj = Projection("random", min(self.dim, emb.dim), self.seed)
                v = self.proj.apply(emb, memory_budget=max(1 << 20, self.budget // 2))
                self.append(tmp, v, emb.names, [bytes.fromhex(f["blake2b"]) for f in emb.manifest["files"]],
                            emb.skipped)
                if observe:
                    observe(emb)
                start += step
                step = _rows_for(self.budget, emb.dim)
                if progress:
                    progress(min(start, n), n)
                del emb
            self.finish_proj(tmp)

    def finish_proj(self, tmp: Path) -> None:
        """``proj.npy`` cut to the rows written (unreadable images dropped).

        Raises:
            ValueError: no image could be read.
        """
        if self.rows == 0 or self.dest is None:
            raise ValueError(f"no readable image in {str(self.folder)!r}"
                             + (f" ({self.skipped[0]['error']})" if self.skipped else ""))
        self.dest.flush()
        self.dest = None  # the memmap closed before its file is cut
        if self.rows < len(self.all_files):
            _write_npy_header(tmp, (self.rows, self.proj.dim), self.header)
            os.truncate(tmp, self.header + self.rows * self.proj.dim * 4)

    def complete(self, faiss, factory: str | None, source: str) -> PoolIndex:
        """After every row is in ``proj.npy``: the FAISS index (``factory``, default
        :func:`default_factory`), the other arrays, then the manifest (last); the pool index.

        Raises:
            ValueError: ``factory`` outside the accepted subset for these rows.
        """
        factory, nprobe = default_factory(self.rows) if factory is None else (
            factory, IVF_NPROBE if factory.startswith("IVF") else 0)
        _check_factory(factory, self.proj.dim, self.rows)
        index = self.write_index(faiss, factory, nprobe)
        manifest = self.manifest(factory, nprobe, source)
        files.write_bytes(self.out / MANIFEST, json.dumps(manifest, indent=1).encode())
        return PoolIndex(self.out, manifest, self.names, self.digest_array, self.proj, index, self.layout)

    def write_index(self, faiss, factory: str, nprobe: int):
        """The FAISS index over ``proj.npy`` (trained on a seeded sample when it needs training),
        written to ``index.faiss``; the digests and the PCA arrays written beside it."""
        self.digest_array = np.frombuffer(b"".join(self.digests), np.uint8).reshape(-1, 16)
        files.save_npy(self.out / "digests.npy", self.digest_array)
        if self.proj.method == "pca":
            files.save_npy(self.out / "pca-mean.npy", self.proj.mean)
            files.save_npy(self.out / "pca-axes.npy", self.proj.axes)
        v = np.load(self.out / "proj.npy", mmap_mode="r")  # the file this build just published
        index = _faiss_call("index_factory", faiss.index_factory, self.proj.dim, factory)
        if not index.is_trained:
            pick = np.sort(np.random.default_rng(self.seed).choice(len(v), size=min(len(v), 100_000), replace=False))
            _faiss_call("train", index.train, np.ascontiguousarray(v[pick]))
        for i0 in range(0, len(v), 65536):
            _faiss_call("add", index.add, np.ascontiguousarray(v[i0:i0 + 65536]))
        if nprobe:
            index.nprobe = nprobe
        with files.published(self.out / "index.faiss") as tmp:
            faiss.write_index(index, str(tmp))
        return index

    def manifest(self, factory: str, nprobe: int, source: str) -> dict:
        """What ``pool.json`` records (see the module's docstring)."""
        out, first = self.out, self.first
        arrays = {"proj": _record(out / "proj.npy", "float32", (self.rows, self.proj.dim)),
                  "digests": _record(out / "digests.npy", "uint8", (self.rows, 16)),
                  "index": {"file": "index.faiss", "sha256": _sha256(out / "index.faiss")}}
        if self.proj.method == "pca":
            arrays["pca_mean"] = _record(out / "pca-mean.npy", "float32", (self.layout.dim,))
            arrays["pca_axes"] = _record(out / "pca-axes.npy", "float32", (self.layout.dim, self.proj.dim))
        return {
            "format": POOL_FORMAT, "config": first["config"], "input_size": first["input_size"],
            "layout": first["layout"], "dim": first["dim"],
            "projection": {"method": "gaussian" if self.proj.method == "random" else "pca", "dim": self.proj.dim,
                           "seed": self.seed, "sample": self.pca_sample or None},
            "index": {"factory": factory, "nprobe": nprobe, "metric": "L2 over the projections"},
            "count": self.rows, "images_total": len(self.all_files), "names": self.names, "skipped": self.skipped,
            "source": {"dir": source}, "model": first["model"], "device": first["device"],
            "versions": first["versions"], "arrays": arrays,
        }


# --------------------------------------------------------------------------- searching
def _rows_for(budget: int, width: int) -> int:
    """Images per chunk whose φ takes at most an eighth of ``budget`` (the query chunk, the
    candidate chunk and their float64 rows fit together)."""
    return max(1, min(8192, budget // (8 * 4 * max(1, width))))


def _as_list(queries, names: Sequence[str] | None) -> tuple[list, list[str] | None]:
    """Queries as a list to cut into chunks: a folder's images (paths, names relative to it), or
    the given paths or arrays with ``names``."""
    if isinstance(queries, (str, os.PathLike)):
        found, _ = image_files(queries)
        if not found:
            raise ValueError(f"folder {str(queries)!r} has no images")
        return [str(Path(queries) / f) for f in found], found
    queries = list(queries)
    if not queries:
        raise ValueError("no query images given")
    return queries, None if names is None else list(names)


def search_pool(pool: PoolIndex, model, queries, k: int = 5, candidates: int | None = None, *,
                names: Sequence[str] | None = None, exclude_self: bool = False, memory_budget: int = DEFAULT_BUDGET,
                threads: int = 2, progress: Callable[[int, int], None] | None = None
                ) -> tuple[Neighbours, list[str], list[dict]]:
    """The ``k`` nearest pool images of each query, by exact LPIPS among its index candidates.

    The queries (a folder, file paths or ``(H, W, 3)`` arrays, as :func:`~lpips_core.space.embed`)
    are embedded chunk by chunk under the pool's spec and projected; FAISS gives each its
    ``candidates`` nearest projections; the chunk's candidates are re-embedded from their files
    (each file's digest checked against the one indexed) and ranked by ``‖φ_q − φ_p‖²`` summed in
    float64 (identical pixels: exactly 0), ties by pool row. Memory: about ``memory_budget``.

    Args:
        k: neighbours per query (``≥ 1``), capped at ``candidates`` and the pool size.
        candidates: re-ranked per query (default ``max(DEFAULT_CANDIDATES, 4 k)``).
        exclude_self: leave out the pool image of the query's own name (the queries are the pool).

    Returns:
        ``(Neighbours, query names, skipped queries)``: rows are pool rows (:attr:`PoolIndex.names`),
        ``(Q, k)``, for the readable queries in order.

    Raises:
        ValueError: a model that is not the pool's spec's, queries of another input size, a
            candidate file missing or changed since the index was built, bad ``k``/``candidates``.
    """
    k = _check_int("k", k, 1, "the neighbours per query, e.g. k=5")
    cand_n = max(DEFAULT_CANDIDATES, 4 * k) if candidates is None else _check_int(
        "candidates", candidates, 1, "the candidates re-ranked per query, e.g. 32")
    cand_n = min(cand_n + bool(exclude_self), len(pool))
    k = min(k, cand_n)
    items, item_names = _as_list(queries, names)
    found_d, found_i, qnames, skipped = [], [], [], []
    row_of = {n: j for j, n in enumerate(pool.names)} if exclude_self else None
    step = 16  # the first chunk; then by φ's width
    done = 0
    if progress:
        progress(0, len(items))
    while done < len(items):
        chunk = items[done:done + step]
        emb = embed(model, chunk, names=None if item_names is None else item_names[done:done + step],
                    spec=pool.spec_name, threads=threads, memory_budget=memory_budget)
        _check_query(pool, emb)
        d, i = _rerank_chunk(pool, model, emb, cand_n, k, row_of, memory_budget, threads)
        found_d.append(d), found_i.append(i), qnames.extend(emb.names), skipped.extend(emb.skipped)
        done += len(chunk)
        step = _rows_for(memory_budget, emb.dim)
        if progress:
            progress(done, len(items))
    if not qnames:
        raise ValueError(f"no readable query image ({skipped[0]['error'] if skipped else ''})")
    return Neighbours(np.concatenate(found_i), np.concatenate(found_d)), qnames, skipped


def _check_query(pool: PoolIndex, emb: Embedding) -> None:
    """Queries embedded as the pool was: one configuration, input size and layout.

    Raises:
        ValueError: they differ (the message names what).
    """
    for key in ("config", "input_size", "layout"):
        if emb.manifest[key] != pool.manifest[key]:
            raise ValueError(f"the queries are embedded with {key} {emb.manifest[key]}, the pool with "
                             f"{pool.manifest[key]}: resize the queries to the pool's size (--size)")


def _rerank_chunk(pool: PoolIndex, model, emb: Embedding, cand_n: int, k: int, row_of: dict | None,
                  budget: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """One query chunk: its index candidates re-embedded and ranked exactly → ``(nq, k)``
    float64 distances and int64 pool rows (``inf``/``-1`` where fewer are found)."""
    vq = np.ascontiguousarray(pool.projection.apply(emb, memory_budget=max(1 << 20, budget // 2)), dtype=np.float32)
    _, cand = _faiss_call("search", pool.index.search, vq, cand_n)
    if row_of is not None:  # exclude_self: a query's own name is not its neighbour
        own = np.array([row_of.get(n, -2) for n in emb.names])
        cand = np.where(cand == own[:, None], -1, cand)
    exact = np.full(cand.shape, np.inf)
    wanted = np.unique(cand[cand >= 0])
    phi_q = emb.rows(0, len(emb))
    step = _rows_for(budget, emb.dim)
    for c0 in range(0, len(wanted), step):
        rows = wanted[c0:c0 + step]
        got = _embed_candidates(pool, model, rows, threads, budget)
        phi_c = got.rows(0, len(got))
        at = {int(j): r for r, j in enumerate(rows)}
        for q in range(len(emb)):
            slots = [s for s, j in enumerate(cand[q]) if int(j) in at]
            if not slots:
                continue
            pos = [at[int(cand[q, s])] for s in slots]
            x = torch.from_numpy(phi_q[q]).double()
            d = torch.from_numpy(phi_c[pos]).double().sub_(x).square_().sum(1).numpy()
            same = np.array([got.content[p] == emb.content[q] for p in pos])
            exact[q, slots] = np.where(same, 0.0, d)
    dist = np.full((len(emb), k), np.inf)
    ind = np.full((len(emb), k), -1, dtype=np.int64)
    for q in range(len(emb)):
        ok = cand[q] >= 0
        order = np.lexsort((cand[q][ok], exact[q][ok]))[:k]
        dist[q, :order.size], ind[q, :order.size] = exact[q][ok][order], cand[q][ok][order]
    return dist, ind


def _embed_candidates(pool: PoolIndex, model, rows: np.ndarray, threads: int, budget: int) -> Embedding:
    """φ of the pool images at ``rows``, re-read from their files, each file's digest checked.

    Raises:
        ValueError: a file missing, unreadable, or changed since the index was built.
    """
    names = [pool.names[int(j)] for j in rows]
    emb = embed(model, [str(pool.source / n) for n in names], names=names, spec=pool.spec_name, threads=threads,
                memory_budget=budget)
    if emb.skipped:
        raise ValueError(f"pool image {emb.skipped[0]['error']}: the pool changed since it was indexed; "
                         "index it again")
    for j, rec in zip(rows, emb.manifest["files"]):
        if bytes.fromhex(rec["blake2b"]) != pool.digests[int(j)].tobytes():
            raise ValueError(f"pool image {rec['name']!r} changed since it was indexed (its bytes are not the ones "
                             "indexed): index the pool again")
    return emb


# --------------------------------------------------------------------------- opening
def open_pool(path: str | os.PathLike[str]) -> PoolIndex:
    """The pool index in folder ``path``, every file checked before a number comes out of it.

    Read through :mod:`lpips_core.files` (regular files only, size-capped): the manifest's shape
    (format, layout and width, projection, index, counts, names: unique relative paths inside the
    pool's folder); each array file named in it (a plain name in the folder), its dtype, shape and
    SHA-256, the projections and PCA arrays finite; the FAISS index's SHA-256, size and width.

    Raises:
        ValueError: no manifest, or any check above, in one line naming the file and the check.
        ImportError: FAISS is not installed.
    """
    root = Path(path)
    mf = root / MANIFEST
    if not mf.exists():
        raise ValueError(f"{str(path)!r} holds no pool index ({MANIFEST}): build one with embed --proj-dim D")
    try:
        m = json.loads(files.read_text(mf, max_bytes=_MAX_MANIFEST))
    except files.UnsafeFile as exc:
        raise ValueError(f"the pool manifest {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{mf} is not a JSON manifest ({str(exc)[:80]})") from None
    problem = _pool_problem(m)
    if problem:
        raise ValueError(f"{mf} is not a valid pool manifest: {problem}")
    count, dim, width = m["count"], m["projection"]["dim"], m["dim"]
    arrays = m["arrays"]
    _check_array(root, arrays["proj"], "float32", [count, dim], finite=True)
    digests = _load_small(root, arrays["digests"], "uint8", [count, 16])
    mean = axes = None
    if m["projection"]["method"] == "pca":
        mean = _load_small(root, arrays["pca_mean"], "float32", [width])
        axes = _load_small(root, arrays["pca_axes"], "float32", [width, dim])
        if not (np.isfinite(mean).all() and np.isfinite(axes).all()):
            raise ValueError(f"{root}: the PCA mean or axes hold a value that is not finite")
    proj = Projection("random" if mean is None else "pca", dim, m["projection"]["seed"], mean=mean, axes=axes)
    index = _load_index(root, arrays["index"], count, dim, m["index"]["nprobe"])
    layout = EmbeddingLayout(tuple(tuple(x) for x in m["layout"]))
    return PoolIndex(root, m, list(m["names"]), digests, proj, index, layout)


def _pool_problem(m) -> str | None:
    """What is wrong with a pool manifest's shape, or ``None``."""
    if not isinstance(m, dict):
        return "it is not a JSON object"
    if m.get("format") != POOL_FORMAT:
        return f"format {str(m.get('format'))[:40]!r} is not {POOL_FORMAT!r}"
    problem = _spec_layout_problem(m)
    if problem:
        return problem
    if m.get("dim") != sum(c * h * w for _, c, h, w in m["layout"]):
        return "dim is not the width its layout gives"
    p, ix = m.get("projection"), m.get("index")
    if not (isinstance(p, dict) and p.get("method") in PROJECTIONS and _nat(p.get("dim")) and 1 <= p["dim"] <= m["dim"]
            and _nat(p.get("seed"))):
        return "projection is not {method: gaussian|pca, dim: 1…D, seed}"
    if not (isinstance(ix, dict) and isinstance(ix.get("factory"), str) and _nat(ix.get("nprobe"))):
        return "index is not {factory, nprobe}"
    count, names = m.get("count"), m.get("names")
    if not (_nat(count) and count >= 1 and isinstance(names, list) and len(names) == count
            and all(isinstance(n, str) for n in names)):
        return "count is not the number of names"
    if len(set(names)) != count:
        return "a name appears twice"
    bad = next((n for n in names if _escapes(n)), None)
    if bad is not None:
        return f"name {bad[:60]!r} is not a relative path inside the pool's folder"
    if not (isinstance(m.get("source"), dict) and isinstance(m["source"].get("dir"), str)):
        return "source.dir is missing"
    try:
        _check_factory(ix["factory"], p["dim"], count)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return _arrays_problem(m.get("arrays"), p["method"])


def _escapes(name: str) -> bool:
    """Whether ``name`` would leave the pool's folder (absolute, ``..``, empty parts) or hold a NUL."""
    parts = name.split("/")
    return not name or name.startswith("/") or "\x00" in name or any(x in ("", ".", "..") for x in parts)


def _arrays_problem(arrays, method: str) -> str | None:
    keys = ["proj", "digests", "index"] + (["pca_mean", "pca_axes"] if method == "pca" else [])
    if not isinstance(arrays, dict):
        return "arrays is missing"
    names = {"proj": "proj.npy", "digests": "digests.npy", "index": "index.faiss", "pca_mean": "pca-mean.npy",
             "pca_axes": "pca-axes.npy"}
    for key in keys:
        rec = arrays.get(key)
        if not isinstance(rec, dict) or rec.get("file") != names[key]:
            return f"arrays.{key} does not name {names[key]} (the pool's files live in its folder)"
        if not (isinstance(rec.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", rec["sha256"])):
            return f"arrays.{key}.sha256 is not a SHA-256 digest"
    return None


def _check_array(root: Path, rec: dict, dtype: str, shape: list[int], *, finite: bool = False) -> None:
    """A ``.npy`` file of the pool, read in one pass: its header (``dtype``, C order, ``shape``),
    its size, its SHA-256 against ``rec``, and (``finite``) every value finite.

    Raises:
        ValueError: any of them, naming the file.
    """
    where = root / rec["file"]
    if rec.get("dtype") != dtype or rec.get("shape") != shape:
        raise ValueError(f"{root / MANIFEST}: {rec['file']} is recorded as {rec.get('dtype')} {rec.get('shape')}, "
                         f"its counts give {dtype} {shape}")
    n_bytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    try:
        fh = files.open_regular(where, max_bytes=n_bytes + 4096)
    except (files.UnsafeFile, OSError) as exc:
        raise ValueError(f"the pool's array file {where} cannot be read ({exc})") from None
    with fh:
        try:
            version = np.lib.format.read_magic(fh)
            head = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            got_shape, fortran, got_dtype = head(fh)
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{where} is not a .npy array ({str(exc)[:80]})") from None
        if got_dtype != np.dtype(dtype) or fortran or list(got_shape) != shape:
            raise ValueError(f"{where} holds {got_dtype} {got_shape}, its manifest says {dtype} {shape}")
        offset = fh.tell()
        if os.fstat(fh.fileno()).st_size != offset + n_bytes:
            raise ValueError(f"{where} is not the header and the {shape} array its manifest says")
        fh.seek(0)
        h = hashlib.sha256(fh.read(offset))
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            h.update(chunk)
            if finite and not np.isfinite(np.frombuffer(chunk[:len(chunk) // 4 * 4], np.float32)).all():
                raise ValueError(f"{where} holds a value that is not finite")
    if h.hexdigest() != rec["sha256"]:
        raise ValueError(f"{where}: its SHA-256 is not the one its manifest records (the file was changed)")


def _load_small(root: Path, rec: dict, dtype: str, shape: list[int]) -> np.ndarray:
    """A checked array file (:func:`_check_array`) loaded through the reader."""
    import io

    _check_array(root, rec, dtype, shape)
    data = files.read_bytes(root / rec["file"], max_bytes=int(np.prod(shape)) * np.dtype(dtype).itemsize + 4096)
    if hashlib.sha256(data).hexdigest() != rec["sha256"]:  # changed between the check and the read
        raise ValueError(f"{root / rec['file']}: its SHA-256 is not the one its manifest records")
    return np.load(io.BytesIO(data), allow_pickle=False)


def _load_index(root: Path, rec: dict, count: int, dim: int, nprobe: int):
    """The FAISS index, read through the reader, its SHA-256, size and width checked."""
    faiss = _faiss()
    where = root / rec["file"]
    try:
        data = files.read_bytes(where, max_bytes=count * (dim * 4 + 64) + (1 << 26))
    except (files.UnsafeFile, OSError) as exc:
        raise ValueError(f"the pool's index file {where} cannot be read ({exc})") from None
    if hashlib.sha256(data).hexdigest() != rec["sha256"]:
        raise ValueError(f"{where}: its SHA-256 is not the one its manifest records (the file was changed)")
    index = _faiss_call("read", faiss.deserialize_index, np.frombuffer(data, dtype=np.uint8))
    if index.ntotal != count or index.d != dim:
        raise ValueError(f"{where} indexes {index.ntotal} vectors of {index.d} dimensions, its manifest says "
                         f"{count} of {dim}")
    if nprobe:
        faiss.extract_index_ivf(index).nprobe = nprobe
    return index
