"""``python -m lpips_core embed DIR OUT``: the LPIPS embeddings of a folder (or one shard of it),
written to disk for ``diversity`` and ``neighbours`` to reuse.

::

    python -m lpips_core embed DIR EMB_DIR --shard i/n                 # then diversity/neighbours EMB_DIR
"""

from __future__ import annotations

import argparse

from .options import SPACE_WORDS, add_device, add_json, add_metric_options, shard
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


def run(args: argparse.Namespace) -> int:
    """Execute ``embed``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (embed_command(a), print_embed), also=(TypeError,))


def embed_command(args: argparse.Namespace) -> dict:
    """Embed ``DIR`` (or ``--shard i/n`` of it) into ``OUT``: the shard's manifest, ``"files"`` as a count."""
    from .. import space

    spec = embedding_spec(args)
    model = build_model(spec, args.device)
    bar = Bar("embedding", unit="image")
    try:
        emb = space.embed(model, args.dir, spec=spec, out=args.out, shard=args.shard, progress=bar)
    finally:
        bar.close()
    m = dict(emb.manifest)
    m["files"] = len(m["files"])
    return m


def print_embed(out: dict) -> None:
    """One line: how many images of how many, the spec, the floats per image and the file."""
    from ..cells import printable

    i, n = out["shard"]
    print(f"{out['count']} images of {out['images_total']} (shard {i}/{n}) embedded as {out['config']['spec']}: "
          f"{out['dim']:,} floats each, {printable(out['phi']['file'])}"
          + (f"; {len(out['skipped'])} unreadable" if out["skipped"] else ""))
