"""The embedding on Ray Data, for more machines than one (optional: ``pip install -e .[ray]``).

:func:`embed_ray` splits a folder's sorted images into shards and embeds each on a Ray actor
(which builds the model once) exactly as :func:`~lpips_core.space.embed` embeds that shard
(``embed --shard i/n``): the actor writes the shard's three files in a temporary folder of its
own node and sends their bytes back, and this process writes them into ``out`` (manifest last: a
shard is complete when its manifest exists). So only the images need to be readable on every
node; ``out`` is this machine's. A rerun keeps the complete shards already in ``out`` (their
count fixes the split) and embeds the others: an interrupted run resumes where it stopped.

:func:`build_pool_ray` builds a pool index (:func:`~lpips_core.space.build_pool`) the same way:
each task embeds and projects a slice of the pool and sends back only the projections.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from .. import files
from .embedder import embed, image_files
from .embedding import Embedding, open_embedding
from .euclidean import has_embedding

__all__ = ["POOL_SHARD_IMAGES", "SHARD_IMAGES", "build_pool_ray", "embed_ray", "ray_shards"]

SHARD_IMAGES = 256
"""Images per shard at most (a shard's files travel through Ray's object store: 256 images are
33 MB of φ for AlexNet at 64 px, 650 MB at 256 px)."""

_MANIFEST = re.compile(r"^embedding-(\d{5})-of-(\d{5})\.json$")
_SHARD_FILE_BYTES = 1 << 34  # what an actor's shard file may be when read back (16 GiB: a bound, not a budget)


def ray_shards(images: int, actors: int, present: dict[int, int]) -> int:
    """The shard count for ``images`` images: the count of the complete shards ``present``
    (``{shard: count}``) if any, else enough for :data:`SHARD_IMAGES` images a shard and two
    shards an actor, at most one per image.

    Raises:
        ValueError: ``present`` mixes shard counts.
    """
    counts = set(present.values())
    if len(counts) > 1:
        raise ValueError(f"the folder mixes shard counts {sorted(counts)}: not one embedding")
    if counts:
        return counts.pop()
    return max(1, min(images, max(-(-images // SHARD_IMAGES), 2 * max(1, int(actors)))))


def _present(out: Path) -> dict[int, int]:
    """``{shard: shard count}`` of the manifests in ``out`` (complete shards)."""
    if not out.is_dir():
        return {}
    return {int(m.group(1)): int(m.group(2)) for f in out.iterdir() if (m := _MANIFEST.match(f.name))}


def embed_ray(folder: str | os.PathLike[str], spec, out: str | os.PathLike[str], *, shards: int | None = None,
              concurrency: int | None = None, device: str | None = "cpu",
              progress: Callable[[int, int], None] | None = None) -> Embedding:
    """:func:`embed` of ``folder`` on Ray Data into ``out``, shard by shard; returns
    :func:`open_embedding` of ``out`` (the same rows as a single-process run, within float32
    rounding of the kernels: ~1e-7).

    Args:
        spec: the :class:`~lpips_core.spec.MetricSpec` (or its name), one with an embedding.
        shards: the shard count (default :func:`ray_shards`; the complete shards in ``out`` fix it).
        concurrency: actors (default one per CPU of the cluster, one per GPU with ``device="cuda"``).
        device: where each actor runs the model.
        progress: called with ``(images embedded, images)`` as shards arrive.

    Raises:
        ImportError: Ray is not installed (``pip install -e .[ray]``). ValueError: no embedding
            for ``spec``, a missing folder or one without images, ``shards`` against the shards in
            ``out``, an actor's failure (its first line).
    """
    from ..datasets.ray_backend import actor_errors, actor_resources, quiet_init, ray_module
    from ..spec import parse_spec

    ray = ray_module()
    spec = parse_spec(spec)
    if not has_embedding(spec):
        raise ValueError(f"{spec.name} has no embedding")
    names, _ = image_files(folder)  # a missing folder fails here, not in an actor
    if not names:
        raise ValueError(f"folder {str(folder)!r} has no images")
    out = Path(out)
    present = _present(out)
    if not ray.is_initialized():
        quiet_init(ray)
    n = shards or ray_shards(len(names), actor_resources(ray, device, concurrency, len(names))[0], present)
    if present and set(present.values()) != {n}:
        raise ValueError(f"{out} holds shards of {sorted(set(present.values()))}, not {n}: use another folder")
    todo = [i for i in range(n) if i not in present]
    out.mkdir(parents=True, exist_ok=True)
    total = len(names)
    done = sum((i + 1) * total // n - i * total // n for i in present)
    if progress:
        progress(done, total)
    if todo:
        actors, cpus, gpus = actor_resources(ray, device, concurrency, len(todo))
        ds = ray.data.from_items([{"shard": i} for i in todo], override_num_blocks=len(todo)).map_batches(
            _RayEmbedder, fn_constructor_kwargs=dict(spec=spec.name, folder=str(folder), shards=n, device=device,
                                                     threads=max(1, int(cpus))),
            batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=cpus, num_gpus=gpus,
            batch_format="numpy")
        with actor_errors(ray):
            for rec in ds.iter_rows():
                i = int(rec["shard"])
                for name, data in rec["files"]:  # the manifest last: the shard is complete when it exists
                    files.write_bytes(out / name, data)
                done += (i + 1) * total // n - i * total // n
                if progress:
                    progress(done, total)
    return open_embedding(out)


class _RayEmbedder:
    """A Ray actor: builds the model once; embeds each shard it is given in a temporary folder of
    its node (:func:`embed` with ``shard=(i, n)``) and returns the files' names and bytes, the
    manifest last."""

    def __init__(self, spec: str, folder: str, shards: int, device: str | None, threads: int = 1):
        import torch

        from ..spec import parse_spec

        torch.set_num_threads(max(1, int(threads)))
        self.spec = parse_spec(spec)
        self.model = self.spec.build(device=device)
        self.folder, self.shards = folder, shards

    def __call__(self, batch: dict) -> dict:
        shard_ids, payloads = [], []
        for i in batch["shard"]:
            tag = f"{int(i):05d}-of-{self.shards:05d}"
            with tempfile.TemporaryDirectory(prefix="lpips-ray-") as tmp:
                embed(self.model, self.folder, spec=self.spec, out=tmp, shard=(int(i), self.shards), threads=1)
                names = [f"phi-{tag}.npy", f"norms-{tag}.npy", f"embedding-{tag}.json"]
                payload = [(name, files.read_bytes(Path(tmp) / name, max_bytes=_SHARD_FILE_BYTES)) for name in names]
            shard_ids.append(int(i))
            payloads.append(payload)
        column = np.empty(len(payloads), dtype=object)
        for j, payload in enumerate(payloads):  # one list per row (not broadcast into a 2-d array)
            column[j] = payload
        return {"shard": np.array(shard_ids), "files": column}


POOL_SHARD_IMAGES = 1024
"""Images per task when a pool index is built on Ray (each returns only its projections:
``1024 × dim`` floats, 1 MiB at 256 dimensions)."""


def build_pool_ray(folder: str | os.PathLike[str], spec, out: str | os.PathLike[str], *, dim: int = 256,
                   projection: str = "pca", sample: int = 2048, seed: int = 0, factory: str | None = None,
                   concurrency: int | None = None, device: str | None = "cpu",
                   progress: Callable[[int, int], None] | None = None):
    """:func:`~lpips_core.space.build_pool` with the embedding and projection on Ray actors: each
    task embeds :data:`POOL_SHARD_IMAGES` images and sends back only their projections, names, file
    digests and skipped files; this process writes them in order, builds the FAISS index and the
    manifest (the same files as ``build_pool``: its rows within float32 rounding of the kernels).
    PCA is fitted here, on the seeded sample ``build_pool`` takes, and its axes go to the actors.

    Raises:
        ImportError: Ray or FAISS is not installed. ValueError: as ``build_pool``, or an actor's
            failure (its first line).
    """
    from ..datasets.ray_backend import actor_errors, actor_resources, quiet_init, ray_module
    from ..spec import parse_spec
    from .pool import PROJECTIONS, _PoolBuild, _start

    ray = ray_module()
    spec = parse_spec(spec)
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    faiss, names, out = _start(folder, out)
    model = spec.build(device=device) if projection == "pca" else None
    run = _PoolBuild(model, spec.name, Path(folder), names, out, dim, seed, 1 << 30, 2)
    if projection == "pca":
        run.fit_pca(sample)
    if not ray.is_initialized():
        quiet_init(ray)
    ranges = [(lo, min(len(names), lo + POOL_SHARD_IMAGES)) for lo in range(0, len(names), POOL_SHARD_IMAGES)]
    actors, cpus, gpus = actor_resources(ray, device, concurrency, len(ranges))
    proj = None if run.proj is None else {"mean": run.proj.mean, "axes": run.proj.axes, "dim": run.proj.dim}
    ds = ray.data.from_items([{"lo": lo, "hi": hi} for lo, hi in ranges], override_num_blocks=len(ranges)).map_batches(
        _RayProjector, fn_constructor_kwargs=dict(spec=spec.name, folder=str(folder), names=names, dim=dim, seed=seed,
                                                  pca=proj, device=device, threads=max(1, int(cpus))),
        batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=cpus, num_gpus=gpus,
        batch_format="numpy")
    with files.published(out / "proj.npy") as tmp, actor_errors(ray):
        _absorb_in_order(run, tmp, ds.iter_rows(), len(names), progress)
        run.finish_proj(tmp)
    return run.complete(faiss, factory, str(folder))


def _absorb_in_order(run, tmp: Path, rows, total: int, progress) -> None:
    """The actors' results (any order) appended to ``run`` in image order, held until their turn."""
    from .pool import Projection

    waiting: dict[int, dict] = {}
    next_lo = done = 0
    if progress:
        progress(0, total)
    for rec in rows:
        res = json.loads(str(rec["meta"]))
        res["proj"] = rec["proj"]
        waiting[res["lo"]] = res
        while next_lo in waiting:
            r = waiting.pop(next_lo)
            if r["count"]:
                run.check_same(r["head"], r["names"][0])
                if run.proj is None:
                    run.proj = Projection("random", r["dim"], run.seed)
                v = np.frombuffer(r["proj"], dtype=np.float32).reshape(r["count"], run.proj.dim)
                run.append(tmp, v, r["names"], [bytes.fromhex(d) for d in r["digests"]], r["skipped"])
            else:
                run.skipped += r["skipped"]
            done += r["hi"] - r["lo"]
            next_lo = r["hi"]
            if progress:
                progress(done, total)


class _RayProjector:
    """A Ray actor: builds the model once; embeds the images ``[lo, hi)`` of the pool's sorted
    names chunk by chunk and returns their projections (Gaussian of ``dim`` capped at φ's width,
    made from ``seed``; or the PCA ``mean`` and ``axes`` it was given), names, digests, skipped."""

    def __init__(self, spec: str, folder: str, names: list[str], dim: int, seed: int, pca: dict | None,
                 device: str | None, threads: int = 1):
        import torch

        from ..spec import parse_spec
        from .projection import Projection

        torch.set_num_threads(max(1, int(threads)))
        self.spec = parse_spec(spec)
        self.model = self.spec.build(device=device)
        self.folder, self.names, self.dim, self.seed = Path(folder), names, dim, seed
        self.proj = None if pca is None else Projection("pca", pca["dim"], seed, mean=pca["mean"], axes=pca["axes"])

    def __call__(self, batch: dict) -> dict:
        from .pool import _rows_for
        from .projection import Projection

        metas, projs = [], []
        for lo, hi in zip(batch["lo"], batch["hi"]):
            lo, hi = int(lo), int(hi)
            parts, meta = [], {"lo": lo, "hi": hi, "names": [], "digests": [], "skipped": [], "head": None}
            start, step = lo, 16
            while start < hi:
                chunk = self.names[start:min(hi, start + step)]
                emb = embed(self.model, [str(self.folder / n) for n in chunk], names=chunk, spec=self.spec, threads=1)
                if self.proj is None and len(emb):
                    self.proj = Projection("random", min(self.dim, emb.dim), self.seed)
                if len(emb):
                    parts.append(self.proj.apply(emb, memory_budget=1 << 29))
                    meta["head"] = meta["head"] or {k: emb.manifest[k] for k in (
                        "config", "input_size", "layout", "dim", "model", "device", "versions")}
                meta["names"] += emb.names
                meta["digests"] += [f["blake2b"] for f in emb.manifest["files"]]
                meta["skipped"] += emb.skipped
                start += len(chunk)
                step = _rows_for(1 << 30, emb.dim)
            meta.update(count=len(meta["names"]), dim=None if self.proj is None else self.proj.dim)
            metas.append(json.dumps(meta))
            projs.append(np.concatenate(parts).astype(np.float32).tobytes() if parts else b"")
        column = np.empty(len(projs), dtype=object)
        for j, p in enumerate(projs):
            column[j] = p
        return {"meta": np.array(metas, dtype=object), "proj": column}
