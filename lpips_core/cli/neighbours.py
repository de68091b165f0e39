"""``python -m lpips_core neighbours QUERY_DIR POOL_DIR``: each query image's k nearest pool images
under LPIPS, exactly (or through a FAISS index, re-ranked exactly, with ``--approximate``).

::

    python -m lpips_core neighbours QUERY_DIR POOL_DIR --k 5 [--json]
    python -m lpips_core neighbours DIR DIR --k 3                      # dedup: self-matches left out
    python -m lpips_core neighbours QUERY_DIR --index INDEX_DIR --k 5 [--candidates 64]

Either folder may be an embedding folder written by ``embed``. With ``--index`` the pool is a pool
index written by ``embed --proj-dim``: each query's candidates come from its FAISS index and are
re-ranked exactly by re-embedding them from their files (:meth:`lpips_core.space.PoolIndex.search`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .options import DEFAULT_METRIC, SPACE_WORDS, add_backend, add_device, add_json, add_memory, add_metric_options, \
    backend_session, positive
from .run import Bar, run_command
from .space_common import build_model, embedding_spec, load_embedding, on_ray, versions


def add_parser(subparsers) -> None:
    n = subparsers.add_parser("neighbours", help="each query image's k nearest pool images under LPIPS, exactly")
    n.add_argument("query", help="folder of query images (or an embedding folder)")
    n.add_argument("pool", nargs="?", default=None,
                   help="folder of pool images (or an embedding folder); the same folder: dedup, self-matches left "
                        "out (not with --index)")
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
    add_backend(n, "the embedding of image folders")
    n.add_argument("--index", default=None,
                   help="search the pool index in this folder (written by embed --proj-dim) instead of a pool "
                        "folder: its candidates re-embedded from their files and re-ranked exactly")
    n.add_argument("--candidates", type=positive, default=None,
                   help="with --index, the candidates re-ranked exactly per query (default: 64, or 4 k if larger)")


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

    if (args.pool is None) == (args.index is None):
        raise ValueError("give a pool folder (POOL_DIR) or a pool index (--index DIR), one of them")
    if args.index is not None:
        return index_command(args)
    if args.candidates is not None:
        raise ValueError("--candidates needs --index")
    spec = embedding_spec(args)
    budget = args.memory_mb << 20
    need_model = not all(space.is_embedding_dir(f) for f in (args.query, args.pool)) and not on_ray(args)
    session = backend_session(args)
    model = build_model(spec, args.device) if need_model else None
    same = _same_folder(args.query, args.pool)
    with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp, session:
        pool = load_embedding(args.pool, spec, model, budget, Path(tmp) / "pool", what="pool", args=args)
        query = pool if same else load_embedding(args.query, spec, model, budget, Path(tmp) / "query",
                                                 what="queries", args=args)
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


def _metric_options_given(args: argparse.Namespace) -> bool:
    return (args.metric != DEFAULT_METRIC or any(getattr(args, k) for k in ("net", "version", "convention", "size"))
            or args.baseline or args.grayscale)


def index_command(args: argparse.Namespace) -> dict:
    """``neighbours QUERY_DIR --index DIR``: the same JSON object as against a pool folder; the
    distances are exact LPIPS of the candidates the index found (``config.method`` says how many)."""
    from .. import space
    from ..spec import parse_spec

    if args.approximate or args.backend == "ray":
        raise ValueError("--index searches its own FAISS index in this process: leave out --approximate and "
                         "--backend ray")
    backend_session(args)  # refuses --address or --actors without --backend ray
    pool = space.open_pool(args.index)
    spec = parse_spec(pool.spec_name)
    if _metric_options_given(args) and embedding_spec(args).name != spec.name:
        raise ValueError(f"{args.index} indexes {spec.name}, not {embedding_spec(args).name}: leave out the metric "
                         "options or give the index's")
    model = build_model(spec, args.device)
    same = _same_folder(args.query, str(pool.source))
    bar = Bar("neighbours", unit="query")
    try:
        found, qnames, skipped = pool.search(model, args.query, args.k, args.candidates, exclude_self=same,
                                             memory_budget=args.memory_mb << 20, progress=bar)
    finally:
        bar.close()
    cand = min(len(pool), (args.candidates or max(space.pool.DEFAULT_CANDIDATES, 4 * args.k)) + same)
    p, ix = pool.manifest["projection"], pool.manifest["index"]
    out = {"queries": found.to_json(qnames, pool.names),
           "config": {"metric": spec.name, "k": args.k, "query_dir": args.query, "index": args.index,
                      "pool_dir": str(pool.source), "exclude_self": same,
                      "method": f"pool index: FAISS {ix['factory']} over a {p['dim']}-d {p['method']} projection, "
                                f"{cand} candidates per query re-embedded from their files and re-ranked exactly",
                      "candidates": cand, "queries": len(qnames), "pool": len(pool),
                      "input_size": pool.manifest["input_size"], "dim": pool.manifest["dim"],
                      "order": "nearest first; equal distances (identical images) by name",
                      "skipped": {"queries": skipped[:20], "pool": pool.manifest["skipped"][:20]}},
           "versions": {**pool.manifest["versions"], "weights": {spec.name: pool.manifest["model"]["weights"]}}}
    k_used = int(found.indices.shape[1])
    if k_used != args.k:
        out["config"]["k_used"] = k_used
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
