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

Exact duplicates (the same decoded pixels) share one forward pass and get bitwise equal
distances (so ties between them are real ties, broken by name).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from . import files

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_MANIFEST_BYTES",
    "Embedding",
    "EmbeddingLayout",
    "Neighbours",
    "build_index",
    "check_euclidean",
    "diversity",
    "embed",
    "embed_ray",
    "fit_projection",
    "gram",
    "has_embedding",
    "image_files",
    "jackknife_interval",
    "nearest",
    "open_embedding",
    "pairwise_distances",
    "phi",
    "recall_at_k",
]

DEFAULT_BUDGET = 1 << 30
"""Default byte budget of the Gram and neighbour stages (1 GiB): the embedding rows read at once
plus the float64 tile they accumulate into."""

MAX_CHUNK = 4096
"""Columns of φ per float32 GEMM; chunks are summed in float64 (a float32 sum over the 0.6 M
columns of an AlexNet embedding would lose ~1e-6 of a distance to rounding)."""

FORMAT = "lpips-space-embedding/2"
_MANIFEST = re.compile(r"^embedding-(\d{5})-of-(\d{5})\.json$")


# --------------------------------------------------------------------------- which metrics
def has_embedding(spec) -> bool:
    """Whether the metric of ``spec`` (a :class:`~lpips_core.spec.MetricSpec` or its
    name) is a squared Euclidean distance between per-image embeddings.

    True for LPIPS (every net, version, lin and baseline) and ST-LPIPS: both are LPIPS's recipe
    (:class:`~lpips_core.model.LPIPSBase`: unit-normalised taps, non-negative channel weights on
    the squared differences, spatial mean, sum over layers). False for DISTS and the classic
    metrics. Whether a built model's weights really are non-negative is checked by
    :func:`check_euclidean`.
    """
    from .spec import parse_spec

    return parse_spec(spec).euclidean


def check_euclidean(model) -> None:
    """Refuse a model whose LPIPS is not ``‖φ(x) − φ(y)‖²``.

    Raises:
        TypeError: not an LPIPS-like model (:class:`~lpips_core.model.LPIPSBase`).
        ValueError: a channel weight is negative or not finite (the quadratic form is then not a
            squared distance: no embedding exists).
    """
    from .model import LPIPSBase

    if not isinstance(model, LPIPSBase):
        raise TypeError(f"an embedding needs an LPIPS-like model (LPIPS, ST-LPIPS), got {type(model).__name__}; "
                        "DISTS is not a Euclidean distance: use the per-pair path")
    for name, w in zip(model.layer_names, model.channel_weights or ()):
        bad = ~torch.isfinite(w) | (w < 0)
        if bool(bad.any()):
            raise ValueError(f"the channel weights of layer {name} have {int(bad.sum())} negative or non-finite "
                             f"values (min {float(w.min()):.3g}): LPIPS with them is not a squared Euclidean "
                             "distance, so it has no embedding; use the per-pair path")


# --------------------------------------------------------------------------- φ
@dataclass(frozen=True)
class EmbeddingLayout:
    """Where each layer's terms lie in φ: per layer ``(name, C, H, W)``, its offset, the dimension."""

    layers: tuple[tuple[str, int, int, int], ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c * h * w for _, c, h, w in self.layers)

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.sizes)[:-1]]))

    @property
    def dim(self) -> int:
        return int(sum(self.sizes))

    def to_json(self) -> list:
        return [list(layer) for layer in self.layers]


def _scales(model, maps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per layer ``sqrt(w_c / (H W))`` as ``(C, 1, 1)`` (``w = 1`` for the baseline), float64 → model dtype."""
    weights = model.channel_weights
    out = []
    for i, m in enumerate(maps):
        hw = m.shape[-2] * m.shape[-1]
        w = torch.ones(m.shape[1], dtype=torch.float64) if weights is None else weights[i].detach().cpu().double()
        out.append((w / hw).sqrt().to(m.dtype).to(m.device).view(-1, 1, 1))
    return out


@torch.inference_mode()
def phi(model, x: torch.Tensor, *, out: torch.Tensor | None = None) -> tuple[torch.Tensor, EmbeddingLayout]:
    """The embeddings of a batch: ``x`` ``(N, 3, H, W)`` float, the model's input (its convention,
    e.g. ``[-1, 1]`` for LPIPS) → ``(N, D)`` float32 on the CPU, and their layout.

    ``‖phi(x)[i] − phi(y)[j]‖²`` equals ``model.compare(x[i:i+1], y[j:j+1]).total`` (float32
    rounding apart).

    Raises:
        TypeError, ValueError: see :func:`check_euclidean`, and the model's input checks.
    """
    check_euclidean(model)
    return _phi(model, x, out=out)


def _phi(model, x: torch.Tensor, *, out: torch.Tensor | None = None,
         cache: dict | None = None) -> tuple[torch.Tensor, EmbeddingLayout]:
    """:func:`phi` of a model already checked (``cache``: :func:`_scales` by map shapes, kept by the caller)."""
    feats = model.features(x)
    layout = EmbeddingLayout(tuple((name, int(m.shape[1]), int(m.shape[2]), int(m.shape[3]))
                                   for name, m in zip(model.layer_names, feats.maps)))
    n = feats.batch
    if out is None:
        out = torch.empty((n, layout.dim), dtype=torch.float32)
    elif tuple(out.shape) != (n, layout.dim):
        raise ValueError(f"out must have shape {(n, layout.dim)}, got {tuple(out.shape)}")
    key = tuple(tuple(m.shape[1:]) for m in feats.maps)
    scales = None if cache is None else cache.get(key)
    if scales is None:
        scales = [sc.cpu() for sc in _scales(model, feats.maps)]
        if cache is not None:
            cache[key] = scales
    for m, sc, off, size, (_, c, h, w) in zip(feats.maps, scales, layout.offsets, layout.sizes, layout.layers):
        torch.mul(m.cpu(), sc, out=out[:, off:off + size].view(n, c, h, w))  # one pass, into φ's rows
    return out, layout


# --------------------------------------------------------------------------- images
def image_files(folder: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """The images under ``folder`` (recursive), as relative ``/``-paths sorted by name, and the other files.

    Raises:
        ValueError: the folder is missing, not a folder or unreadable.
    """
    from .datasets.pairs import _check_dir, _walk

    return _walk(_check_dir(folder, "folder"))


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class _Item:
    name: str
    path: str | None
    array: np.ndarray | None = None
    file_digest: str = ""
    content: str = ""
    nbytes: int = 0
    error: str = ""


def _decode(item: _Item, max_side: int | None) -> _Item:
    from .images import ImageLoadError, load_image, read_image_file

    if item.array is None:
        try:
            data = read_image_file(item.path)  # the one reader: no FIFO, device or oversized file is read
            item.nbytes, item.file_digest = len(data), _digest(data)
            item.array = load_image(data, max_side=max_side).array
        except (ImageLoadError, OSError) as exc:
            item.error = f"{item.name}: " + " ".join(str(exc).split())
            return item
    item.content = _digest(np.ascontiguousarray(item.array, dtype=np.float32).tobytes()
                           + repr(item.array.shape).encode())
    return item


def _prepare(spec, arrays: list[np.ndarray], device) -> torch.Tensor:
    from . import metric_registry

    def one(batch: np.ndarray) -> torch.Tensor:
        return metric_registry.prepare_input(spec.metric, torch.from_numpy(batch.astype(np.float32, copy=False)),
                                             convention=spec.convention, size=spec.size,
                                             grayscale=spec.grayscale, device=device)

    if len({a.shape for a in arrays}) == 1:
        return one(np.stack([a.transpose(2, 0, 1) for a in arrays]))
    return torch.cat([one(a.transpose(2, 0, 1)[None]) for a in arrays])  # resized to spec.size one by one


# --------------------------------------------------------------------------- the embedding
@dataclass
class Embedding:
    """φ of a set of images, in memory or in ``.npy`` memmaps (one block per shard), and what made it.

    Attributes:
        names: the images' names (relative to their folder, sorted), one per row.
        blocks: ``(first row, array (rows, D) float32)`` per shard, in row order.
        norms: ``(N,)`` float64, ``‖φ_i‖²`` accumulated in float64 from the stored float32 rows.
        content: per row a digest of the decoded image (equal digests: identical pixels).
        layout: :class:`EmbeddingLayout`.
        manifest: configuration, input size, versions, weights, files and digests, skipped files.
        skipped: ``[{"name", "error"}]`` for files that could not be read (no row).
    """

    names: list[str]
    blocks: list[tuple[int, np.ndarray]]
    norms: np.ndarray
    content: list[str]
    layout: EmbeddingLayout
    manifest: dict
    skipped: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def dim(self) -> int:
        return self.layout.dim

    @property
    def nbytes(self) -> int:
        return len(self.names) * self.dim * 4

    @property
    def spec_name(self) -> str:
        return self.manifest["config"]["spec"]

    def rows(self, i0: int, i1: int, k0: int = 0, k1: int | None = None) -> np.ndarray:
        """Rows ``[i0, i1)``, columns ``[k0, k1)`` as one C-contiguous float32 array (read from disk)."""
        k1 = self.dim if k1 is None else k1
        out = np.empty((i1 - i0, k1 - k0), dtype=np.float32)
        for start, arr in self.blocks:
            lo, hi = max(i0, start), min(i1, start + arr.shape[0])
            if lo < hi:
                out[lo - i0:hi - i0] = arr[lo - start:hi - start, k0:k1]
        return out

    def _view(self, i0: int, i1: int, k0: int, k1: int) -> np.ndarray:
        """Rows ``[i0, i1)``, columns ``[k0, k1)``: a (strided) view when one in-memory block holds
        them, else :meth:`rows`'s copy. For a reader that converts anyway (a float64 GEMM)."""
        for start, arr in self.blocks:
            if type(arr) is np.ndarray and start <= i0 and i1 <= start + arr.shape[0]:
                return arr[i0 - start:i1 - start, k0:k1]
        return self.rows(i0, i1, k0, k1)

    def take(self, indices: Sequence[int]) -> np.ndarray:
        """Whole rows at ``indices`` ``(len, D)`` float32."""
        out = np.empty((len(indices), self.dim), dtype=np.float32)
        for r, i in enumerate(indices):
            out[r] = self.rows(int(i), int(i) + 1)[0]
        return out

    def canonical(self) -> np.ndarray:
        """Per row the first row with the same decoded pixels (itself when unique)."""
        first: dict[str, int] = {}
        return np.array([first.setdefault(c, i) for i, c in enumerate(self.content)], dtype=np.int64)

    def compatible(self, other: "Embedding") -> None:
        """Raise ``ValueError`` unless ``other`` was made under the same configuration and input size."""
        a, b = self.manifest, other.manifest
        for key in ("config", "input_size", "layout"):
            if a.get(key) != b.get(key):
                raise ValueError(f"the embeddings differ in {key}: {a.get(key)} and {b.get(key)}; "
                                 "compare images embedded under one configuration and size")


def _model_info(model) -> dict:
    info = {"weights": model.weights}
    if model.channel_weights is not None:
        h = hashlib.sha256()
        for w in model.channel_weights:
            h.update(w.detach().cpu().float().numpy().tobytes())
        info["channel_weights_sha256"] = h.hexdigest()
    return info


def _config(spec, model) -> dict:
    return {"spec": spec.name, "metric": spec.metric, "net": spec.net, "version": spec.version, "lin": spec.lin,
            "convention": spec.convention, "grayscale": spec.grayscale,
            "size": list(spec.size) if isinstance(spec.size, tuple) else spec.size,
            "model_version": model.version}


def _as_items(images, names: Sequence[str] | None) -> tuple[list[_Item], dict]:
    """Images → items and a source description. ``images``: a folder, file paths, or ``(H, W, 3)`` arrays."""
    if isinstance(images, (str, os.PathLike)):
        root = Path(images)
        files, other = image_files(root)
        if not files:
            raise ValueError(f"folder {str(images)!r} has no images")
        return [_Item(f, str(root / f)) for f in files], {"dir": str(images), "ignored": other[:20],
                                                          "ignored_count": len(other)}
    images = list(images)
    if not images:
        raise ValueError("no images given")
    if names is not None and len(names) != len(images):
        raise ValueError(f"{len(names)} names for {len(images)} images")
    items = []
    for i, im in enumerate(images):
        name = names[i] if names is not None else None
        if isinstance(im, np.ndarray):
            from .images import check_image

            items.append(_Item(name or f"{i:06d}", None, check_image(im, name=f"image {i}")))
        elif isinstance(im, (str, os.PathLike)):
            items.append(_Item(name or Path(im).name, str(im)))
        else:
            raise TypeError(f"images must be a folder, file paths or (H, W, 3) arrays, got {type(im).__name__}")
    keys = [it.name for it in items]
    if len(set(keys)) != len(keys):
        raise ValueError("image names must be unique")
    return items, {"files": "given"}


def _shard_rows(n: int, shard: tuple[int, int] | None) -> tuple[int, int]:
    if shard is None:
        return 0, n
    i, k = shard
    if not (isinstance(i, int) and isinstance(k, int) and k >= 1 and 0 <= i < k):
        raise ValueError(f"shard must be (i, n) with 0 ≤ i < n, got {shard!r}")
    return i * n // k, (i + 1) * n // k


def _names_digest(names: Sequence[str]) -> str:
    h = hashlib.sha256()
    for n in names:
        h.update(n.encode("utf-8", "surrogateescape") + b"\n")
    return h.hexdigest()


def _check_outputs(folder: Path, tag: str) -> None:
    """Make ``folder`` and refuse to write shard ``tag`` over anything already there (an existing
    file, a symbolic link, a FIFO: :func:`lpips_core.files.check_output`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (f"embedding-{tag}.json", f"phi-{tag}.npy", f"norms-{tag}.npy"):
        files.check_output(folder / name, hint="remove it or choose another folder")


def _array_record(name: str, dtype: str, shape: list[int], sha256: str) -> dict:
    """What a manifest records of one array file: its name in the folder, dtype, shape, SHA-256."""
    return {"file": name, "dtype": dtype, "shape": shape, "sha256": sha256}


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:  # a file this process just wrote (its temporary name)
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _write_npy_header(path: Path, shape: tuple[int, int], header_len: int) -> None:
    """Rewrite a float32 ``.npy`` file's header for ``shape``, keeping its length (rows were dropped)."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    head = buf.getvalue()
    if len(head) > header_len:  # pragma: no cover - fewer rows never need a longer header
        raise ValueError("cannot shrink the .npy header")
    head = head[:-1] + b" " * (header_len - len(head)) + b"\n"
    hl = header_len - 10  # magic (6) + version (2) + length (2)
    head = head[:8] + hl.to_bytes(2, "little") + head[10:]
    with open(path, "r+b") as fh:
        fh.write(head)


def embed(
    model,
    images,
    *,
    spec=None,
    names: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    shard: tuple[int, int] | None = None,
    max_side: int | None = None,
    memory_budget: int = DEFAULT_BUDGET,
    spill: str | os.PathLike[str] | None = None,
    threads: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> Embedding:
    """φ of every image, in blocks of ``model.images_per_batch`` images, one forward pass per
    distinct image.

    Args:
        model: an LPIPS-like model (:func:`check_euclidean`).
        images: a folder (its images, recursively, sorted by relative name), file paths, or
            ``(H, W, 3)`` float arrays in ``[0, 1]``.
        spec: the :class:`~lpips_core.spec.MetricSpec` (or name) whose input
            convention, grayscale and size prepare each image; default: the model's metric,
            net, version and lin, its own convention, native size.
        names: names of the images when given as paths or arrays (default: file names or indices).
        out: a folder to stream φ to (``phi-I-of-N.npy`` float32, ``norms-I-of-N.npy`` float64,
            ``embedding-I-of-N.json``); ``None`` keeps φ in memory (above ``memory_budget``:
            streamed to ``spill`` if given, else refused).
        spill: a folder for φ when ``out`` is ``None`` and φ would exceed ``memory_budget``.
        shard: ``(i, n)``: embed only the ``i``-th of ``n`` contiguous slices of the sorted images
            (needs ``out``; :func:`open_embedding` joins the shards).
        max_side: downscale images whose longer side exceeds it on load (default: none).
        threads: decoding threads.
        progress: called with ``(images done, images of this shard)``.

    Returns:
        :class:`Embedding` (of this shard).

    Raises:
        ValueError: images of different sizes with ``spec.size`` unset, no readable image, a
            shard without ``out``, an existing ``out`` shard, an in-memory φ over the budget.
        TypeError: see :func:`check_euclidean`.
    """
    from . import metric_registry
    from .datasets.score import package_versions
    from .spec import MetricSpec, parse_spec

    check_euclidean(model)
    info = metric_registry.METRICS[metric_registry.model_metric(model)]
    own = {"version": model.version if info.versions else None, "lin": model.lin if info.has_baseline else True}
    spec = parse_spec(MetricSpec(info.name, net=model.net, **own) if spec is None else spec)
    if (spec.metric, spec.net, spec.version, spec.lin) != (info.name, model.net, own["version"], own["lin"]):
        raise ValueError(f"spec {spec.name} does not describe the model ({info.label} {model.net}"
                         + (f" v{model.version}" if info.versions else "")
                         + (f", lin={model.lin}" if info.has_baseline else "") + ")")
    items, source = _as_items(images, names)
    all_names = [it.name for it in items]
    n_total = len(items)
    lo, hi = _shard_rows(n_total, shard)
    if shard is not None and out is None:
        raise ValueError("a shard needs out (a folder the shards are written to)")
    shard = shard or (0, 1)
    items = items[lo:hi]
    tag = f"{shard[0]:05d}-of-{shard[1]:05d}"
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        _check_outputs(out_dir, tag)

    done = 0
    if progress:
        progress(0, len(items))
    rows_ok: list[_Item] = []
    skipped: list[dict] = []
    first_shape = None
    layout = None
    dest = None
    header_len = 0
    write_at = 0
    seen: dict[str, int] = {}
    norms: list[float] = []
    phi_path = None if out_dir is None else out_dir / f"phi-{tag}.npy"
    per = None
    scales: dict = {}
    pool = ThreadPoolExecutor(max(1, threads)) if threads > 1 else None
    outputs = contextlib.ExitStack()  # the φ file, written to a temporary name, published on success

    def submit(start: int, step: int):
        """The next chunk, its decoding started in the pool (so it overlaps this chunk's pass)."""
        chunk = items[start:start + step]
        return chunk, ([pool.submit(_decode, it, max_side) for it in chunk] if pool else None)

    try:
        k = 0
        pending = submit(0, 1)  # one image first: its size sets the batch (images_per_batch)
        while pending[0]:
            chunk, futures = pending
            k += len(chunk)
            decoded = [f.result() for f in futures] if futures else [_decode(it, max_side) for it in chunk]
            if per is not None:
                pending = submit(k, per)
            good = []
            for it in decoded:
                if it.error:
                    skipped.append({"name": it.name, "error": it.error})
                    continue
                shape = it.array.shape[:2]
                if first_shape is None:
                    first_shape = (shape, it.name)
                elif spec.size is None and shape != first_shape[0]:
                    raise ValueError(
                        f"{it.name} is {shape[1]}×{shape[0]} px but {first_shape[1]} is "
                        f"{first_shape[0][1]}×{first_shape[0][0]} px: LPIPS compares images of one size; "
                        "pass a size (--size N) to resize them all")
                good.append(it)
            new = [it for it in good if it.content not in seen]
            if new:
                x = _prepare(spec, [it.array for it in new], model.device)
                if per is None:
                    per = max(1, model.images_per_batch(x.shape[-2], x.shape[-1]))
                    pending = submit(k, per)
                with torch.inference_mode():
                    vecs, layout_now = _phi(model, x, cache=scales)
                if layout is None:
                    layout = layout_now
                    if out_dir is None and spill is not None and len(items) * layout.dim * 4 > memory_budget:
                        out_dir = Path(spill)
                        _check_outputs(out_dir, tag)
                        phi_path = out_dir / f"phi-{tag}.npy"
                    if out_dir is None:
                        if len(items) * layout.dim * 4 > memory_budget and len(items) > 1:
                            raise ValueError(
                                f"{len(items)} embeddings of {layout.dim:,} floats take "
                                f"{len(items) * layout.dim * 4 / 2**30:.1f} GiB, over the memory budget of "
                                f"{memory_budget / 2**30:.1f} GiB: stream them to disk (out=/--embeddings DIR)")
                        dest = np.empty((len(items), layout.dim), dtype=np.float32)
                    else:
                        phi_tmp = outputs.enter_context(files.published(phi_path))
                        dest = np.lib.format.open_memmap(phi_tmp, mode="w+", dtype=np.float32,
                                                         shape=(len(items), layout.dim))
                        header_len = dest.offset
                vecs = vecs.numpy()
            row_of_new = {it.content: j for j, it in enumerate(new)}
            for it in good:
                if it.content in row_of_new and it.content not in seen:
                    v = vecs[row_of_new[it.content]]
                    dest[write_at] = v
                    seen[it.content] = write_at
                else:
                    dest[write_at] = dest[seen[it.content]]
                norms.append(float(np.dot(dest[write_at].astype(np.float64), dest[write_at].astype(np.float64))))
                rows_ok.append(it)
                it.array = None  # free the pixels
                write_at += 1
            done += len(chunk)
            if per is None:  # nothing to run yet (unreadable or repeated images): the next one
                pending = submit(k, 1)
            if progress:
                progress(done, len(items))
        if layout is None:
            raise ValueError(f"no readable image ({len(skipped)} could not be read: "
                             f"{skipped[0]['error'] if skipped else ''})")
        norms_arr = np.asarray(norms, dtype=np.float64)
        arrays = {"phi": None, "norms": None}
        if out_dir is not None:
            dest.flush()
            del dest
            if write_at < hi - lo:  # unreadable files: drop the unused rows
                _write_npy_header(phi_tmp, (write_at, layout.dim), header_len)
                os.truncate(phi_tmp, header_len + write_at * layout.dim * 4)
            arrays["phi"] = _array_record(phi_path.name, "float32", [write_at, layout.dim], _file_sha256(phi_tmp))
            outputs.close()  # φ under its final name
            norms_bytes = _npy_bytes(norms_arr)
            norms_path = out_dir / f"norms-{tag}.npy"
            files.write_bytes(norms_path, norms_bytes)
            arrays["norms"] = _array_record(norms_path.name, "float64", [write_at],
                                            hashlib.sha256(norms_bytes).hexdigest())
            dest = np.load(phi_path, mmap_mode="r")
        else:
            dest = dest[:write_at]
    except BaseException:
        outputs.__exit__(*sys.exc_info())  # a failure: the temporary φ is removed, nothing published
        raise
    finally:
        if pool is not None:
            pool.shutdown()
    size = first_shape[0] if spec.size is None else (
        (spec.size, spec.size) if isinstance(spec.size, int) else tuple(spec.size))
    manifest = {
        "format": FORMAT,
        "config": _config(spec, model),
        "input_size": list(size),
        "layout": layout.to_json(),
        "dim": layout.dim,
        "images_total": n_total,
        "names_digest": _names_digest(all_names),
        "shard": list(shard),
        "rows": [lo, hi],
        "count": write_at,
        "files": [{"name": it.name, "bytes": it.nbytes, "blake2b": it.file_digest, "content": it.content}
                  for it in rows_ok],
        "skipped": skipped,
        "source": source,
        "model": _model_info(model),
        "device": str(model.device),
        "versions": package_versions(),
        **arrays,
    }
    if out_dir is not None:  # last: a shard is complete when its manifest exists
        files.write_bytes(out_dir / f"embedding-{tag}.json", json.dumps(manifest, indent=1).encode())
    return Embedding([it.name for it in rows_ok], [(0, dest)], norms_arr, [it.content for it in rows_ok], layout,
                     manifest, skipped)


def is_embedding_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding embedding manifests (``embedding-I-of-N.json``)."""
    p = Path(path)
    return p.is_dir() and any(_MANIFEST.match(f.name) for f in p.iterdir())


MAX_MANIFEST_BYTES = 256 * 2**20
"""Largest embedding manifest read (256 MiB: about a million images' file records)."""

_SHARED_KEYS = ("format", "config", "input_size", "layout", "dim", "names_digest", "images_total", "model",
                "versions")
"""What every shard of one embedding must agree on (configuration, size, weights, package versions)."""


def open_embedding(path: str | os.PathLike[str]) -> Embedding:
    """The embedding in folder ``path``: all its shards, joined in row order (memmaps, read lazily).

    Every file is read through :mod:`lpips_core.files` (regular files only, size-capped) and
    checked before a number comes out of it: each manifest's shape and counts; each array file
    named in it (a plain name inside the folder), its dtype, shape and SHA-256; every φ value
    finite; every norm finite, ``≥ 0`` and equal to its row's ``‖φ‖²``; rows with one content
    digest (identical pixels) bitwise equal; the shards of one configuration, size, weights and
    package versions, tiling the image list.

    Raises:
        ValueError: no manifest, a missing shard, or any check above, in one line naming the
            file and the check.
    """
    root = Path(path)
    found = sorted((int(m.group(1)), int(m.group(2)), f) for f in root.iterdir() if (m := _MANIFEST.match(f.name)))
    if not found:
        raise ValueError(f"{str(path)!r} holds no embedding (embedding-I-of-N.json files)")
    counts = {n for _, n, _ in found}
    if len(counts) != 1:
        raise ValueError(f"{str(path)!r} mixes shard counts {sorted(counts)}")
    n_shards = counts.pop()
    have = [i for i, _, _ in found]
    missing = sorted(set(range(n_shards)) - set(have))
    if missing:
        raise ValueError(f"{str(path)!r} lacks shard(s) {missing} of {n_shards}: run embed --shard i/{n_shards} "
                         "for each")
    if len(have) != len(set(have)) or max(have) >= n_shards:
        raise ValueError(f"{str(path)!r} holds shards outside 0…{n_shards - 1} or twice")
    manifests = [_read_manifest(f, i, n_shards) for i, _, f in found]
    first = manifests[0]
    for (_, _, f), m in zip(found[1:], manifests[1:]):
        for key in _SHARED_KEYS:
            if m.get(key) != first.get(key):
                raise ValueError(f"the shards in {str(path)!r} differ in {key} ({f.name} against {found[0][2].name}): "
                                 "not one embedding; embed every shard with one configuration and one install")
    total = first["images_total"]
    names, content, blocks, norms, skipped = [], [], [], [], []
    for (i, _, f), m in zip(found, manifests):
        lo, hi = m["rows"]
        if [lo, hi] != [i * total // n_shards, (i + 1) * total // n_shards]:
            raise ValueError(f"{f}: rows {m['rows']} are not slice {i} of {n_shards} of {total} images")
        arr, norm = _load_arrays(root, f, m)
        blocks.append((len(names), arr))
        names += [x["name"] for x in m["files"]]
        content += [x["content"] for x in m["files"]]
        norms.append(norm)
        skipped += m["skipped"]
    if len(set(names)) != len(names):
        raise ValueError(f"{str(path)!r}: an image name appears in more than one row")
    manifest = {k: v for k, v in first.items() if k not in ("files", "rows", "shard", "count", "phi", "norms",
                                                             "skipped")}
    manifest.update(shards=n_shards, count=len(names), folder=str(root))
    layout = EmbeddingLayout(tuple(tuple(x) for x in first["layout"]))
    return Embedding(names, blocks, np.concatenate(norms), content, layout, manifest, skipped)


def _nat(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _read_manifest(f: Path, shard: int, n_shards: int) -> dict:
    """One shard's manifest, read through the one reader and checked to have the shape
    :func:`embed` writes (counts agreeing with each other and with the file's name)."""
    try:
        m = json.loads(files.read_text(f, max_bytes=MAX_MANIFEST_BYTES))
    except files.UnsafeFile as exc:
        raise ValueError(f"the embedding manifest {exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{f} is not UTF-8 text: not an embedding manifest") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{f} is not JSON ({str(exc)[:80]})") from None
    except OSError as exc:
        raise ValueError(f"{f} cannot be read ({exc.strerror or type(exc).__name__})") from None
    problem = _manifest_problem(m, shard, n_shards)
    if problem:
        raise ValueError(f"{f} is not a valid embedding manifest: {problem}")
    return m


def _manifest_problem(m, shard: int, n_shards: int) -> str | None:
    if not isinstance(m, dict):
        return "it is not a JSON object"
    if m.get("format") != FORMAT:
        if isinstance(m.get("format"), str) and m["format"].startswith("lpips-space-embedding/"):
            return f"its format is {m['format']!r}, this version reads {FORMAT!r}: embed the images again"
        return f"format {str(m.get('format'))[:40]!r} is not {FORMAT!r}"
    if not isinstance(m.get("config"), dict) or not isinstance(m["config"].get("spec"), str):
        return "config.spec is missing"
    layout = m.get("layout")
    if not (isinstance(layout, list) and layout and all(
            isinstance(x, list) and len(x) == 4 and isinstance(x[0], str) and all(_nat(v) and v > 0 for v in x[1:])
            for x in layout)):
        return "layout is not a list of [name, C, H, W]"
    dim = sum(c * h * w for _, c, h, w in layout)
    if m.get("dim") != dim:
        return f"dim is {str(m.get('dim'))[:20]}, its layout gives {dim}"
    if m.get("shard") != [shard, n_shards]:
        return f"shard is {str(m.get('shard'))[:40]}, its file name says [{shard}, {n_shards}]"
    total, rows, count = m.get("images_total"), m.get("rows"), m.get("count")
    if not _nat(total) or not (isinstance(rows, list) and len(rows) == 2 and all(_nat(v) for v in rows)
                               and rows[0] <= rows[1] <= total):
        return "images_total or rows is not a count"
    if not _nat(count):
        return "count is not a count"
    fl, sk = m.get("files"), m.get("skipped")
    if not isinstance(fl, list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                           and isinstance(x.get("content"), str) for x in fl):
        return "files is not a list of {name, content}"
    if not isinstance(sk, list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in sk):
        return "skipped is not a list of {name, error}"
    if len(fl) != count:
        return f"files lists {len(fl)} images, count says {count}"
    if count + len(sk) != rows[1] - rows[0]:
        return (f"{count} rows and {len(sk)} skipped images do not make the {rows[1] - rows[0]} images of rows "
                f"{rows}")
    if not isinstance(m.get("names_digest"), str) or not isinstance(m.get("input_size"), list):
        return "names_digest or input_size is missing"
    tag = f"{shard:05d}-of-{n_shards:05d}"
    for key, name, dtype, shape in (("phi", f"phi-{tag}.npy", "float32", [count, dim]),
                                    ("norms", f"norms-{tag}.npy", "float64", [count])):
        rec = m.get(key)
        if not isinstance(rec, dict):
            return f"{key} is not a record of its array file"
        if rec.get("file") != name:
            return f"{key}.file is {str(rec.get('file'))[:60]!r}, not {name!r} (array files live in the folder)"
        if rec.get("dtype") != dtype:
            return f"{key}.dtype is {str(rec.get('dtype'))[:20]!r}, not {dtype!r}"
        if rec.get("shape") != shape:
            return f"{key}.shape is {str(rec.get('shape'))[:40]}, the manifest's counts give {shape}"
        if not (isinstance(rec.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", rec["sha256"])):
            return f"{key}.sha256 is not a SHA-256 digest"
    return None


def _load_arrays(root: Path, manifest_file: Path, m: dict) -> tuple[np.ndarray, np.ndarray]:
    """A shard's φ (a read-only memmap) and norms, read through the one reader and checked against
    the manifest (dtype, shape, SHA-256) and each other, in one pass over φ."""
    count, dim = m["phi"]["shape"]
    phi_file, norms_file = root / m["phi"]["file"], root / m["norms"]["file"]
    where = f"{phi_file}"
    try:
        norms_bytes = files.read_bytes(norms_file, max_bytes=count * 8 + 4096)
        fh = files.open_regular(phi_file, max_bytes=count * dim * 4 + 4096)
    except files.UnsafeFile as exc:
        raise ValueError(f"the embedding's array file {exc}") from None
    except OSError as exc:
        raise ValueError(f"the embedding's array file {exc.filename} cannot be read "
                         f"({exc.strerror or type(exc).__name__})") from None
    if hashlib.sha256(norms_bytes).hexdigest() != m["norms"]["sha256"]:
        raise ValueError(f"{norms_file}: its SHA-256 is not the one its manifest records (the file was changed)")
    import io

    try:
        stored = np.load(io.BytesIO(norms_bytes), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{norms_file} is not a .npy array ({str(exc)[:80]})") from None
    if stored.dtype != np.float64 or stored.shape != (count,):
        raise ValueError(f"{norms_file} holds {stored.dtype} {stored.shape}, its manifest says float64 ({count},)")
    if not np.isfinite(stored).all() or (stored < 0).any():
        raise ValueError(f"{norms_file}: a norm is negative or not finite (a squared length is ≥ 0)")
    with fh:
        try:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f".npy format version {version}")
            shape, fortran, dtype = read_header(fh)
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{where} is not a .npy array ({str(exc)[:80]})") from None
        if dtype != np.dtype("<f4") or fortran or tuple(shape) != (count, dim):
            raise ValueError(f"{where} holds {dtype} {shape}{' (Fortran order)' if fortran else ''}, its manifest "
                             f"says float32 {(count, dim)}")
        offset = fh.tell()
        if os.fstat(fh.fileno()).st_size != offset + count * dim * 4:
            raise ValueError(f"{where} is {os.fstat(fh.fileno()).st_size:,} bytes, not the header and {count} rows "
                             "its manifest says")
        fh.seek(0)
        h = hashlib.sha256(fh.read(offset))
        norms = np.empty(count, dtype=np.float64)
        row_digest: list[bytes] = []
        rows = max(1, (32 << 20) // max(1, dim * 4))
        for r0 in range(0, count, rows):
            r1 = min(count, r0 + rows)
            buf = fh.read((r1 - r0) * dim * 4)
            h.update(buf)
            x = np.frombuffer(buf, dtype="<f4").reshape(r1 - r0, dim)
            if not np.isfinite(x).all():
                bad = r0 + int(np.nonzero(~np.isfinite(x).all(1))[0][0])
                raise ValueError(f"{where}: row {bad} ({m['files'][bad]['name']!r}) holds a value that is not finite")
            x64 = x.astype(np.float64)
            norms[r0:r1] = np.einsum("ij,ij->i", x64, x64)
            row_digest += [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in x]
        if h.hexdigest() != m["phi"]["sha256"]:
            raise ValueError(f"{where}: its SHA-256 is not the one its manifest records (the file was changed)")
        if not np.allclose(stored, norms, rtol=1e-9, atol=1e-12):
            bad = int(np.nonzero(~np.isclose(stored, norms, rtol=1e-9, atol=1e-12))[0][0])
            raise ValueError(f"{norms_file}: norm {bad} is {float(stored[bad])!r}, but ‖φ‖² of its row is "
                             f"{float(norms[bad])!r}")
        first: dict[str, bytes] = {}
        for i, rec in enumerate(m["files"]):
            if first.setdefault(rec["content"], row_digest[i]) != row_digest[i]:
                raise ValueError(f"{manifest_file}: {rec['name']!r} has the content digest of an earlier image but "
                                 "other embedding values (identical pixels give identical rows)")
        arr = np.memmap(fh, dtype=np.float32, mode="r", offset=offset, shape=(count, dim))
    return arr, stored


# --------------------------------------------------------------------------- Gram and distances
def _device(device) -> torch.device:
    from .protocol import resolve_device

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


# --------------------------------------------------------------------------- neighbours
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


def _check_int(name: str, value, minimum: int, what: str) -> int:
    """``value`` as an ``int`` ``≥ minimum``, else one line naming the argument and what it is.

    Raises:
        TypeError: not an integer. ValueError: a bool, or below ``minimum``.
    """
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer ≥ {minimum} ({what}), got {value!r}")
    if isinstance(value, (bool, np.bool_)) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum} ({what}), got {value!r}")
    return int(value)


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
    copies: dict[int, list[int]] = {}
    for j, c in enumerate(can_p.tolist()):
        copies.setdefault(c, []).append(j)
    want = k + margin + (1 if exclude else 0)
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
            bd, bi = _select(np.concatenate([bd, t], 1), np.concatenate([bi, idx], 1), min(want, npool))
            bi = np.where(np.isfinite(bd), bi, -1)
            done += 1
            if progress:
                progress(done, tiles)
        parts.append((bd, bi))
    cand = np.concatenate([p[1] for p in parts])
    cand_d = np.concatenate([p[0] for p in parts])
    # small tiles were float64 GEMMs: their distances are already exact; float32 ones are re-ranked
    small = min(nq, side) * min(npool, side) <= SMALL_TILE
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


# --------------------------------------------------------------------------- diversity
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


# --------------------------------------------------------------------------- approximate index
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


# --------------------------------------------------------------------------- Ray
def embed_ray(folder: str | os.PathLike[str], spec, out: str | os.PathLike[str], *, shards: int = 4,
              concurrency: int = 2, num_cpus: float = 1, num_gpus: float = 0, device: str | None = "cpu",
              size_check: bool = True) -> Embedding:
    """:func:`embed` of ``folder`` on Ray Data: ``shards`` shards, each embedded by one of
    ``concurrency`` actors (which build the model once) into ``out`` (a folder every worker can
    write: a shared file system on a cluster); returns :func:`open_embedding` of ``out``.

    Raises:
        ImportError: Ray is not installed (``pip install -e .[ray]``).
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("embedding on Ray needs Ray Data: pip install -e .[ray]") from exc
    from .spec import parse_spec

    spec = parse_spec(spec)
    if not has_embedding(spec):
        raise ValueError(f"{spec.name} has no embedding")
    image_files(folder)  # a missing folder fails here, not in an actor
    items = [{"shard": i} for i in range(int(shards))]
    ds = ray.data.from_items(items).map_batches(
        _RayEmbedder, fn_constructor_kwargs=dict(spec=spec.name, folder=str(folder), out=str(out), shards=int(shards),
                                                 device=device),
        batch_size=1, concurrency=concurrency, num_cpus=num_cpus, num_gpus=num_gpus, batch_format="numpy")
    ds.take_all()
    return open_embedding(out)


class _RayEmbedder:
    """A Ray actor: builds the model once, embeds the shards it is given into ``out``."""

    def __init__(self, spec: str, folder: str, out: str, shards: int, device: str | None):
        from . import metric_registry
        from .spec import parse_spec

        self.spec = parse_spec(spec)
        self.model = metric_registry.build(self.spec.metric, self.spec.net, version=self.spec.version,
                                           lin=self.spec.lin, device=device)
        self.folder, self.out, self.shards = folder, out, shards

    def __call__(self, batch: dict) -> dict:
        for i in batch["shard"]:
            embed(self.model, self.folder, spec=self.spec, out=self.out, shard=(int(i), self.shards), threads=1)
        return {"shard": batch["shard"]}
