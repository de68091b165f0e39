"""LPIPS space: every image through the network once, then all pairs, nearest neighbours, a map.

With non-negative channel weights ``w`` (every released LPIPS lin file, v0.0 and v0.1, and the
ST-LPIPS checkpoints; the baseline has ``w = 1``) LPIPS is a squared Euclidean distance between
two embeddings::

    d(x, y) = Σ_l 1/(H_l W_l) Σ_{h,w} Σ_c w_{l,c} (f̂_x − f̂_y)²  =  ‖φ(x) − φ(y)‖²
    φ(x)    = concat_l  sqrt(w_{l,c} / (H_l W_l)) · f̂_{l,chw}(x)      (f̂: unit-normalised over channels)

so a set of ``N`` images needs ``N`` forward passes, and every pairwise distance comes from one
Gram matrix, ``d_ij = ‖φ_i‖² + ‖φ_j‖² − 2⟨φ_i, φ_j⟩`` (a GEMM).

- :func:`has_embedding` (a function of a :class:`~lpips_core.spec.MetricSpec`):
  LPIPS (every net, version, lin and baseline) and ST-LPIPS have one; DISTS does not (its terms
  are ratios of means, variances and covariances of whole feature maps), nor do the classic
  metrics. :func:`check_euclidean` refuses at run time a model whose weights are negative.
- :func:`embed`: images (a folder, files or arrays) → an :class:`Embedding`, in blocks of
  :meth:`~lpips_core.protocol.LearnedMetric.images_per_batch` images, held in memory or streamed
  to disk (``.npy`` float32 memmaps with a manifest: configuration, size, package versions,
  weights provenance, file list and digests), optionally one shard ``i/n`` of the sorted files.
- :func:`gram` / :func:`pairwise_distances`: the blocked Gram matrix, float32 GEMMs over chunks
  of the embedding's columns accumulated in float64 (float64 GEMMs for small tiles), in tiles
  under a byte budget.
- :func:`nearest`: exact k nearest neighbours of queries in a pool, ties broken by pool order
  (sorted names), self-matches excluded when the query set is the pool.
- :func:`diversity`: the mean over all pairs with a jackknife interval over images.
- :func:`build_index`: an approximate index (FAISS over a PCA or a Gaussian random projection
  of φ) whose candidates are re-ranked exactly.
- :func:`build_pool` / :func:`open_pool`: a pool index that keeps only the projections and a FAISS
  index on disk, its candidates re-ranked exactly by re-embedding them from their files
  (:meth:`PoolIndex.search`): nearest neighbours against a pool too large for its embeddings.

Exact duplicates (the same decoded pixels) share one forward pass and get bitwise equal
distances (so ties between them are real ties, broken by name).

The modules: :mod:`.euclidean` (which metrics, φ), :mod:`.embedding` (the :class:`Embedding`,
its checked format on disk, :func:`open_embedding`), :mod:`.embedder` (:func:`embed`),
:mod:`.distances` (the Gram matrix, all pairs, diversity and its interval), :mod:`.neighbours`
(exact neighbours, the FAISS index), :mod:`.projection` (the index's projections of φ),
:mod:`.pool` (the pool index), :mod:`.ray` (:func:`embed_ray`, :func:`build_pool_ray`). Every public name is imported here.
"""

from __future__ import annotations

from .distances import DEFAULT_BUDGET, MAX_CHUNK, SMALL_TILE, diversity, gram, jackknife_interval, pairwise_distances
from .embedder import embed, image_files
from .embedding import FORMAT, MAX_MANIFEST_BYTES, Embedding, is_embedding_dir, open_embedding
from .euclidean import EmbeddingLayout, check_euclidean, has_embedding, phi
from .neighbours import ApproximateIndex, Neighbours, build_index, nearest, recall_at_k
from .projection import RANDOM_BLOCK_FLOATS, Projection, fit_projection
from .pool import POOL_FORMAT, PoolIndex, build_pool, is_pool_dir, open_pool, search_pool
from .ray import build_pool_ray, embed_ray

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_MANIFEST_BYTES",
    "Embedding",
    "EmbeddingLayout",
    "Neighbours",
    "POOL_FORMAT",
    "PoolIndex",
    "build_index",
    "build_pool",
    "build_pool_ray",
    "check_euclidean",
    "diversity",
    "embed",
    "embed_ray",
    "fit_projection",
    "gram",
    "has_embedding",
    "image_files",
    "is_pool_dir",
    "jackknife_interval",
    "nearest",
    "open_embedding",
    "open_pool",
    "pairwise_distances",
    "phi",
    "recall_at_k",
    "search_pool",
]
