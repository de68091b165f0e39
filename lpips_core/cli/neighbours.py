"""``python -m lpips_core neighbours QUERY_DIR POOL_DIR``: each query image's k nearest pool images
under LPIPS, exactly (or through a FAISS index, re-ranked exactly, with ``--approximate``).

::

    python -m lpips_core neighbours QUERY_DIR POOL_DIR --k 5 [--json]
    python -m lpips_core neighbours DIR DIR --k 3                      # dedup: self-matches left out

Either folder may be an embedding folder written by ``embed``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .options import SPACE_WORDS, add_device, add_json, add_memory, add_metric_options, positive
from .run import Bar, run_command
from .space_common import build_model, embedding_spec, load_embedding, versions


def add_parser(subparsers) -> None:
    n = subparsers.add_parser("neighbours", help="each query image's k nearest pool images under LPIPS, exactly")
    n.add_argument("query", help="folder of query images (or an embedding folder)")
    n.add_argument("pool", help="folder of pool images (or an embedding folder); the same folder: dedup, "
                                "self-matches left out")
    n.add_argument("--k", type=positive, default=5, help="neighbours per query (default 5)")
    add_metric_options(n, SPACE_WORDS)
    add_device(n)
    n.add_argument("--approximate", action="store_true",
                   help="search a FAISS index over a projection of the embeddings, then re-rank the "
                        "candidates exactly (needs pip install -e .[faiss])")
    n.add_argument("--proj-dim", type=positive, default=256, help="dimensions of the projection (default 256)")
    n.add_argument("--projection", choices=("random", "pca"), default="random",
                   help="a seeded Gaussian random projection (default) or PCA of a 2,048-image sample of the pool")
    n.add_argument("--oversample", type=positive, default=4, help="candidates re-ranked per neighbour (default 4)")
    add_memory(n)
    add_json(n)


def run(args: argparse.Namespace) -> int:
    """Execute ``neighbours``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (neighbours_command(a), print_neighbours), also=(TypeError,))


def _same_folder(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _search(args: argparse.Namespace, query, pool, same: bool, budget: int):
    """The neighbours of ``query`` in ``pool``, and how they were found (``method``, projection width used)."""
    from .. import space

    if args.approximate:
        index = space.build_index(pool, dim=args.proj_dim, method=args.projection, oversample=args.oversample,
                                  memory_budget=budget)
        found = index.search(query, args.k, exclude_self=same)
        k_used, proj_dim = int(found.indices.shape[1]), index.projection.dim
        method = (f"approximate: FAISS Flat over a {proj_dim}-d {args.projection} projection of the "
                  f"embeddings, {min(k_used * args.oversample, len(pool))} candidates re-ranked exactly")
        return found, method, proj_dim
    bar = Bar("neighbours", unit="tile")
    try:
        found = space.nearest(query, pool, args.k, exclude_self=same, memory_budget=budget, device=args.device,
                              progress=bar)
    finally:
        bar.close()
    return found, "exact", None


def neighbours_command(args: argparse.Namespace) -> dict:
    """``neighbours QUERY_DIR POOL_DIR``: ``{"queries": [{"query", "neighbours": [{"name", "distance"}]}],
    "config", "versions"}`` (names relative to their folder, nearest first)."""
    from .. import space

    spec = embedding_spec(args)
    budget = args.memory_mb << 20
    need_model = not all(space.is_embedding_dir(f) for f in (args.query, args.pool))
    model = build_model(spec, args.device) if need_model else None
    same = _same_folder(args.query, args.pool)
    with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp:
        pool = load_embedding(args.pool, spec, model, budget, Path(tmp) / "pool", what="pool")
        query = pool if same else load_embedding(args.query, spec, model, budget, Path(tmp) / "query",
                                                 what="queries")
        found, method, proj_dim = _search(args, query, pool, same, budget)
        out = {
            "queries": found.to_json(query.names, pool.names),
            "config": {"metric": spec.name, "k": args.k, "query_dir": args.query, "pool_dir": args.pool,
                       "exclude_self": same, "method": method, "queries": len(query), "pool": len(pool),
                       "input_size": pool.manifest["input_size"], "dim": pool.dim,
                       "order": "nearest first; equal distances (identical images) by name",
                       "skipped": {"queries": query.skipped[:20], "pool": pool.skipped[:20]}},
            "versions": versions(pool),
        }
        k_used = int(found.indices.shape[1])  # k capped at the pool size (less the self-match)
        if k_used != args.k:
            out["config"]["k_used"] = k_used
        if args.approximate:
            out["config"]["proj_dim"] = args.proj_dim
            if proj_dim != args.proj_dim:  # capped at the embedding's width (PCA: at the sample's span)
                out["config"]["proj_dim_used"] = proj_dim
        del pool, query, found  # their memmaps, before the temporary folder goes
    return out


def print_neighbours(out: dict) -> None:
    """Each query's name, then its neighbours' distances and names, nearest first."""
    from ..cells import printable

    c = out["config"]
    print(f"{c['metric']}: the {c.get('k_used', c['k'])} nearest of {c['pool']} pool images for each of "
          f"{c['queries']} queries" + (" (self-matches left out)" if c["exclude_self"] else "") + f"; {c['method']}")
    for q in out["queries"]:
        print(printable(q["query"]))  # a name's newline or escape sequence would forge rows or reach the terminal
        for n in q["neighbours"]:
            print(f"  {n['distance']:.6f}  {printable(n['name'])}")
