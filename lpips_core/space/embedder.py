"""Images to an :class:`~lpips_core.space.embedding.Embedding`: :func:`embed`.

The images (a folder, file paths or arrays) are decoded on worker threads, identical pixels
found by a content digest, and each distinct image run through the model once, in blocks of
:meth:`~lpips_core.protocol.LearnedMetric.images_per_batch` images. φ is held in memory or
streamed to disk (``.npy`` float32 memmaps with a manifest, :mod:`lpips_core.space.embedding`),
optionally one shard ``i/n`` of the sorted files.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from .. import files
from .distances import DEFAULT_BUDGET
from .embedding import FORMAT, Embedding
from .euclidean import EmbeddingLayout, _phi, check_euclidean

if TYPE_CHECKING:
    from ..spec import MetricSpec

__all__ = ["embed", "image_files"]


def image_files(folder: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """The images under ``folder`` (recursive), as relative ``/``-paths sorted by name, and the other files.

    Raises:
        ValueError: the folder is missing, not a folder or unreadable.
    """
    from ..datasets.pairs import _check_dir, _walk

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
    from ..images import ImageLoadError, load_image, read_image_file

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
    from .. import metric_registry

    def one(batch: np.ndarray) -> torch.Tensor:
        return metric_registry.prepare_input(spec.metric, torch.from_numpy(batch.astype(np.float32, copy=False)),
                                             convention=spec.convention, size=spec.size,
                                             grayscale=spec.grayscale, device=device)

    if len({a.shape for a in arrays}) == 1:
        return one(np.stack([a.transpose(2, 0, 1) for a in arrays]))
    return torch.cat([one(a.transpose(2, 0, 1)[None]) for a in arrays])  # resized to spec.size one by one


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
            from ..images import check_image

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
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _write_npy_header(path: Path, shape: tuple[int, int], header_len: int) -> None:
    """Rewrite a float32 ``.npy`` file's header for ``shape``, keeping its length (rows were dropped)."""
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
    check_euclidean(model)
    spec = _spec_of(model, spec)
    items, source = _as_items(images, names)
    all_names = [it.name for it in items]
    lo, hi = _shard_rows(len(items), shard)
    if shard is not None and out is None:
        raise ValueError("a shard needs out (a folder the shards are written to)")
    shard = shard or (0, 1)
    tag = f"{shard[0]:05d}-of-{shard[1]:05d}"
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        _check_outputs(out_dir, tag)
    run = _Embedder(model, spec, items[lo:hi], tag, out_dir, spill=spill, memory_budget=memory_budget,
                    max_side=max_side)
    run.run(threads, progress)
    manifest = _manifest(run, source, all_names, shard, (lo, hi))
    if run.out_dir is not None:  # last: a shard is complete when its manifest exists
        files.write_bytes(run.out_dir / f"embedding-{tag}.json", json.dumps(manifest, indent=1).encode())
    return Embedding([it.name for it in run.rows_ok], [(0, run.dest)], run.norms_arr,
                     [it.content for it in run.rows_ok], run.layout, manifest, run.skipped)


def _spec_of(model, spec) -> MetricSpec:
    """The spec :func:`embed` prepares the images under: ``spec`` parsed (default: the model's own,
    :meth:`~lpips_core.spec.MetricSpec.of_model`), refused unless ``model`` is its model
    (:meth:`~lpips_core.spec.MetricSpec.check_model`).

    Raises:
        ValueError: a spec of another metric, network, version or head than the model's.
    """
    from .. import metric_registry
    from ..spec import MetricSpec, parse_spec

    try:
        return MetricSpec.for_model(model, spec)
    except TypeError:
        if spec is None:  # not a model of a registered metric
            raise
        info = metric_registry.METRICS[metric_registry.model_metric(model)]
        raise ValueError(f"spec {parse_spec(spec).name} does not describe the model ({info.label} {model.net}"
                         + (f" v{model.version}" if info.versions else "")
                         + (f", lin={model.lin}" if info.has_baseline else "") + ")") from None


class _Embedder:
    """One shard's run of :func:`embed`: its images decoded chunk by chunk (the next chunk's
    decoding overlapping this chunk's forward pass), each distinct image through the model once,
    its row written to ``dest``: an ``(N, D)`` float32 array, or a ``.npy`` memmap in ``out_dir``
    (``spill`` when the array would exceed ``memory_budget``) under a temporary name, published
    when every row is in. After :meth:`run`: ``rows_ok``, ``skipped``, ``dest`` (the rows
    written), ``norms_arr`` ``(rows,)`` float64, ``layout``, ``arrays`` (the manifest's file records)."""

    def __init__(self, model, spec: MetricSpec, items: list[_Item], tag: str, out_dir: Path | None, *,
                 spill: str | os.PathLike[str] | None, memory_budget: int, max_side: int | None):
        self.model, self.spec, self.items, self.tag = model, spec, items, tag
        self.out_dir, self.spill, self.memory_budget, self.max_side = out_dir, spill, memory_budget, max_side
        self.phi_path = None if out_dir is None else out_dir / f"phi-{tag}.npy"
        self.phi_tmp: Path | None = None
        self.rows_ok: list[_Item] = []
        self.skipped: list[dict] = []
        self.first_shape = None  # (the first readable image's (H, W), its name)
        self.layout: EmbeddingLayout | None = None
        self.dest = None
        self.header_len = 0
        self.write_at = 0
        self.seen: dict[str, int] = {}  # content digest → its row
        self.norms: list[float] = []
        self.per: int | None = None  # images per chunk, set by the first forward pass
        self.scales: dict = {}
        self.pool: ThreadPoolExecutor | None = None
        self.outputs = contextlib.ExitStack()  # the φ file, written to a temporary name, published on success
        self.norms_arr: np.ndarray | None = None
        self.arrays: dict = {"phi": None, "norms": None}

    def run(self, threads: int, progress: Callable[[int, int], None] | None) -> None:
        """Every image of the shard into ``dest``, then its files completed (φ published, norms written).

        Raises:
            ValueError: images of different sizes with ``spec.size`` unset, no readable image, an
                in-memory φ over the budget (the temporary φ is then removed, nothing published).
        """
        if progress:
            progress(0, len(self.items))
        self.pool = ThreadPoolExecutor(max(1, threads)) if threads > 1 else None
        try:
            self._embed_all(progress)
            self._finish()
        except BaseException:
            self.outputs.__exit__(*sys.exc_info())  # a failure: the temporary φ is removed, nothing published
            raise
        finally:
            if self.pool is not None:
                self.pool.shutdown()

    def _submit(self, start: int, step: int):
        """The next chunk, its decoding started in the pool (so it overlaps this chunk's pass)."""
        chunk = self.items[start:start + step]
        return chunk, ([self.pool.submit(_decode, it, self.max_side) for it in chunk] if self.pool else None)

    def _embed_all(self, progress: Callable[[int, int], None] | None) -> None:
        k = 0
        pending = self._submit(0, 1)  # one image first: its size sets the batch (images_per_batch)
        while pending[0]:
            chunk, futures = pending
            k += len(chunk)
            decoded = [f.result() for f in futures] if futures else [_decode(it, self.max_side) for it in chunk]
            if self.per is not None:
                pending = self._submit(k, self.per)
            good = self._readable(decoded)
            new = [it for it in good if it.content not in self.seen]
            vecs = None
            if new:
                x = _prepare(self.spec, [it.array for it in new], self.model.device)
                if self.per is None:
                    self.per = max(1, self.model.images_per_batch(x.shape[-2], x.shape[-1]))
                    pending = self._submit(k, self.per)
                vecs = self._forward(x)
            self._store(good, new, vecs)
            if self.per is None:  # nothing to run yet (unreadable or repeated images): the next one
                pending = self._submit(k, 1)
            if progress:
                progress(k, len(self.items))

    def _readable(self, decoded: list[_Item]) -> list[_Item]:
        """The decoded images that can be embedded; the unreadable ones go to ``skipped``.

        Raises:
            ValueError: an image of another size than the first when ``spec.size`` is unset.
        """
        good = []
        for it in decoded:
            if it.error:
                self.skipped.append({"name": it.name, "error": it.error})
                continue
            shape = it.array.shape[:2]
            if self.first_shape is None:
                self.first_shape = (shape, it.name)
            elif self.spec.size is None and shape != self.first_shape[0]:
                first, name = self.first_shape
                raise ValueError(
                    f"{it.name} is {shape[1]}×{shape[0]} px but {name} is {first[1]}×{first[0]} px: LPIPS "
                    "compares images of one size; pass a size (--size N) to resize them all")
            good.append(it)
        return good

    def _forward(self, x: torch.Tensor) -> np.ndarray:
        """φ of a prepared batch ``(n, 3, H, W)`` → ``(n, D)`` float32 (the first batch sets the
        layout and allocates ``dest``)."""
        with torch.inference_mode():
            vecs, layout = _phi(self.model, x, cache=self.scales)
        if self.layout is None:
            self.layout = layout
            self._allocate()
        return vecs.numpy()

    def _allocate(self) -> None:
        """``dest`` for the shard's rows once φ's width is known: an array within the memory budget,
        else a ``.npy`` memmap in ``out_dir`` (or ``spill``) under a temporary name.

        Raises:
            ValueError: φ in memory would exceed the budget and there is neither ``out`` nor ``spill``.
        """
        n, dim = len(self.items), self.layout.dim
        if self.out_dir is None and self.spill is not None and n * dim * 4 > self.memory_budget:
            self.out_dir = Path(self.spill)
            _check_outputs(self.out_dir, self.tag)
            self.phi_path = self.out_dir / f"phi-{self.tag}.npy"
        if self.out_dir is None:
            if n * dim * 4 > self.memory_budget and n > 1:
                raise ValueError(f"{n} embeddings of {dim:,} floats take {n * dim * 4 / 2**30:.1f} GiB, over the "
                                 f"memory budget of {self.memory_budget / 2**30:.1f} GiB: stream them to disk "
                                 "(out=/--embeddings DIR)")
            self.dest = np.empty((n, dim), dtype=np.float32)
        else:
            self.phi_tmp = self.outputs.enter_context(files.published(self.phi_path))
            self.dest = np.lib.format.open_memmap(self.phi_tmp, mode="w+", dtype=np.float32, shape=(n, dim))
            self.header_len = self.dest.offset

    def _store(self, good: list[_Item], new: list[_Item], vecs: np.ndarray | None) -> None:
        """One row per readable image, in order: its own φ (``vecs``, the rows of ``new``), or the
        row of an earlier image with the same pixels; its norm ``‖φ‖²`` summed in float64."""
        row_of_new = {it.content: j for j, it in enumerate(new)}
        dest = self.dest
        for it in good:
            if it.content in row_of_new and it.content not in self.seen:
                dest[self.write_at] = vecs[row_of_new[it.content]]
                self.seen[it.content] = self.write_at
            else:
                dest[self.write_at] = dest[self.seen[it.content]]
            row = dest[self.write_at].astype(np.float64)
            self.norms.append(float(np.dot(row, row)))
            self.rows_ok.append(it)
            it.array = None  # free the pixels
            self.write_at += 1

    def _finish(self) -> None:
        """The rows written: in memory, ``dest`` cut to them; on disk, φ's unused rows dropped, φ
        published under its final name (and re-opened read-only), the norms written.

        Raises:
            ValueError: no image could be read.
        """
        if self.layout is None:
            raise ValueError(f"no readable image ({len(self.skipped)} could not be read: "
                             f"{self.skipped[0]['error'] if self.skipped else ''})")
        self.norms_arr = np.asarray(self.norms, dtype=np.float64)
        if self.out_dir is None:
            self.dest = self.dest[:self.write_at]
            return
        rows, dim = self.write_at, self.layout.dim
        self.dest.flush()
        self.dest = None  # the memmap closed before its file is cut
        if rows < len(self.items):  # unreadable files: drop the unused rows
            _write_npy_header(self.phi_tmp, (rows, dim), self.header_len)
            os.truncate(self.phi_tmp, self.header_len + rows * dim * 4)
        self.arrays["phi"] = _array_record(self.phi_path.name, "float32", [rows, dim], _file_sha256(self.phi_tmp))
        self.outputs.close()  # φ under its final name
        norms_bytes = _npy_bytes(self.norms_arr)
        norms_path = self.out_dir / f"norms-{self.tag}.npy"
        files.write_bytes(norms_path, norms_bytes)
        self.arrays["norms"] = _array_record(norms_path.name, "float64", [rows],
                                             hashlib.sha256(norms_bytes).hexdigest())
        self.dest = np.load(self.phi_path, mmap_mode="r")


def _manifest(run: _Embedder, source: dict, names: Sequence[str], shard: tuple[int, int],
              rows: tuple[int, int]) -> dict:
    """What ``embedding-I-of-N.json`` records of a shard's run: format, configuration, input size,
    layout, the whole image list's size and digest (``names``), this shard and its rows, the files
    embedded and skipped, where they came from, the weights, device, package versions, and the
    records of the array files (``None`` in memory)."""
    from ..datasets.score import package_versions

    spec, model = run.spec, run.model
    size = run.first_shape[0] if spec.size is None else (
        (spec.size, spec.size) if isinstance(spec.size, int) else tuple(spec.size))
    return {
        "format": FORMAT,
        "config": _config(spec, model),
        "input_size": list(size),
        "layout": run.layout.to_json(),
        "dim": run.layout.dim,
        "images_total": len(names),
        "names_digest": _names_digest(names),
        "shard": list(shard),
        "rows": list(rows),
        "count": run.write_at,
        "files": [{"name": it.name, "bytes": it.nbytes, "blake2b": it.file_digest, "content": it.content}
                  for it in run.rows_ok],
        "skipped": run.skipped,
        "source": source,
        "model": _model_info(model),
        "device": str(model.device),
        "versions": package_versions(),
        **run.arrays,
    }
