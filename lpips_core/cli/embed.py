"""``python -m lpips_core embed DIR OUT``: the LPIPS embeddings of a folder (or one shard of it),
written to disk for ``diversity`` and ``neighbours`` to reuse.

::

    python -m lpips_core embed DIR EMB_DIR --shard i/n                 # then diversity/neighbours EMB_DIR
    python -m lpips_core embed DIR EMB_DIR --backend ray [--address HOST:PORT]   # every shard, on Ray actors

    python -m lpips_core embed POOL_DIR INDEX_DIR --proj-dim 256 [--proj gaussian]  # a pool index, no embeddings

With ``--backend ray`` the folder is split into shards (:func:`lpips_core.space.ray.ray_shards`)
embedded on Ray actors, each shard's files the ones ``embed --shard i/n`` writes; a rerun keeps
the complete shards and embeds the rest. With ``--proj-dim D`` only a ``D``-dimensional
projection of each embedding and a FAISS index over them are written
(:func:`lpips_core.space.build_pool`), for ``neighbours QUERIES --index INDEX_DIR``.
"""

from __future__ import annotations

import argparse

from .options import SPACE_WORDS, add_backend, add_device, add_json, add_metric_options, backend_session, positive, \
    shard
from .run import Bar, run_command
from .space_common import build_model, embedding_spec


def add_parser(subparsers) -> None:
    e = subparsers.add_parser("embed", help="write the LPIPS embeddings of a folder (or one shard of it) to disk")
    e.add_argument("dir", help="folder of images")
    e.add_argument("out", help="folder to write phi-I-of-N.npy, norms-I-of-N.npy and embedding-I-of-N.json to")
    e.add_argument("--shard", type=shard, default=None, help="embed only slice i of n of the sorted images")
    add_metric_options(e, SPACE_WORDS)
    add_device(e)
    add_json(e, "print the shard's manifest as one JSON object")
    add_backend(e, "the embedding")
    e.add_argument("--proj-dim", type=positive, default=None,
                   help="write a pool index instead: only a D-dimensional projection of each embedding and a FAISS "
                        "index over them, for neighbours QUERIES --index OUT (needs pip install -e .[faiss])")
    e.add_argument("--proj", choices=("pca", "gaussian"), default="pca",
                   help="with --proj-dim, the projection: PCA of a 2,048-image sample of the pool (default) or "
                        "seeded Gaussian axes (about twice the candidates for the same recall)")


def run(args: argparse.Namespace) -> int:
    """Execute ``embed``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (embed_command(a), print_embed), also=(TypeError,))


def embed_command(args: argparse.Namespace) -> dict:
    """Embed ``DIR`` (or ``--shard i/n`` of it) into ``OUT``: the shard's manifest, ``"files"`` as a count."""
    from .. import space

    spec = embedding_spec(args)
    session = backend_session(args)  # refuses --address or --actors without --backend ray
    if args.proj_dim is not None:
        return _embed_pool(args, spec, session)
    if args.backend == "ray":
        return _embed_ray(args, spec, session)
    model = build_model(spec, args.device)
    bar = Bar("embedding", unit="image")
    try:
        emb = space.embed(model, args.dir, spec=spec, out=args.out, shard=args.shard, progress=bar)
    finally:
        bar.close()
    m = dict(emb.manifest)
    m["files"] = len(m["files"])
    return m


def _embed_pool(args: argparse.Namespace, spec, session) -> dict:
    """A pool index of ``DIR`` in ``OUT`` (:func:`lpips_core.space.build_pool`, or on Ray
    :func:`lpips_core.space.ray.build_pool_ray`): what its manifest says but the names (``"names"``
    as a count), and the bytes on disk."""
    from .. import space
    from ..devices import resolve_device

    if args.shard is not None:
        raise ValueError("--proj-dim builds one pool index of the whole folder: leave out --shard")
    with session:
        bar = Bar("indexing", unit="image")
        try:
            if args.backend == "ray":
                from ..space.ray import build_pool_ray

                pool = build_pool_ray(args.dir, spec, args.out, dim=args.proj_dim, projection=args.proj,
                                      concurrency=args.actors, device=str(resolve_device(args.device)), progress=bar)
            else:
                pool = space.build_pool(build_model(spec, args.device), args.dir, args.out, spec=spec,
                                        dim=args.proj_dim, projection=args.proj, progress=bar)
        finally:
            bar.close()
    m = {k: v for k, v in pool.manifest.items() if k not in ("names", "arrays")}
    m.update(names=len(pool), folder=str(pool.root), disk_bytes=sum(f.stat().st_size for f in pool.root.iterdir()))
    return m


def _embed_ray(args: argparse.Namespace, spec, session) -> dict:
    """Every shard of ``DIR`` on Ray actors into ``OUT``: the joined embedding's manifest
    (``"shards"``, ``"count"``, ``"skipped"``), ``"files"`` as a count."""
    from .. import space
    from ..devices import resolve_device

    if args.shard is not None:
        raise ValueError("--shard i/n splits the work by hand (one process per slice, e.g. a SLURM array); "
                         "--backend ray splits it itself: give one of them")
    with session:
        bar = Bar("embedding", unit="image")
        try:
            emb = space.embed_ray(args.dir, spec, args.out, concurrency=args.actors,
                                  device=str(resolve_device(args.device)), progress=bar)
        finally:
            bar.close()
    m = dict(emb.manifest)
    m.update(files=len(emb), skipped=emb.skipped, backend="ray")
    del emb  # its memmaps
    return m


def print_embed(out: dict) -> None:
    """One line: how many images of how many, the spec, the floats per image and the file."""
    from ..cells import printable

    unreadable = f"; {len(out['skipped'])} unreadable" if out["skipped"] else ""
    if "projection" in out:  # --proj-dim: a pool index
        p = out["projection"]
        print(f"{out['count']} images of {out['images_total']} indexed as {out['config']['spec']}: a {p['dim']}-d "
              f"{p['method']} projection of {out['dim']:,} floats, FAISS {out['index']['factory']}, "
              f"{out['disk_bytes'] / 2**20:.1f} MiB in {printable(out['folder'])}" + unreadable)
        return
    if "shards" in out:  # --backend ray: every shard
        print(f"{out['count']} images of {out['images_total']} ({out['shards']} shards, on Ray) embedded as "
              f"{out['config']['spec']}: {out['dim']:,} floats each, in {printable(out['folder'])}" + unreadable)
        return
    i, n = out["shard"]
    print(f"{out['count']} images of {out['images_total']} (shard {i}/{n}) embedded as {out['config']['spec']}: "
          f"{out['dim']:,} floats each, {printable(out['phi']['file'])}" + unreadable)
