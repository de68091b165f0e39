"""The LPIPS-space subcommands of ``python -m lpips_core``: ``embed``, ``neighbours``, and
``diversity`` through the Gram matrix.

::

    python -m lpips_core diversity DIR [--metrics lpips] [--matrix D.npy] [--json]
    python -m lpips_core neighbours QUERY_DIR POOL_DIR --k 5 [--json]
    python -m lpips_core neighbours DIR DIR --k 3                      # dedup: self-matches left out
    python -m lpips_core embed DIR EMB_DIR --shard i/n                 # then diversity/neighbours EMB_DIR

``diversity`` takes this path when every metric has an embedding (LPIPS, ST-LPIPS:
:func:`lpips_core.space.has_embedding`) and none of ``--sample``, ``--out``, ``--resume`` or
``--shard`` is given; otherwise it scores pairs one by one (:mod:`lpips_core.datasets.cli`).
A folder argument may also be an embedding folder written by ``embed`` (all its shards).
Errors exit with status 2 and one line on stderr, ``error: ...``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .datasets.cli import _positive

__all__ = ["SPACE_COMMANDS", "add_diversity_options", "add_parsers", "print_diversity", "run", "run_diversity",
           "uses_gram"]

SPACE_COMMANDS: tuple[str, ...] = ("neighbours", "embed")


def _memory(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory-mb", type=_positive, default=1024,
                   help="bytes the Gram stage may hold at once, in MiB (default 1024); embeddings larger than "
                        "this are streamed to disk")


def add_diversity_options(d: argparse.ArgumentParser) -> None:
    """``--matrix``, ``--embeddings`` and ``--memory-mb`` on the ``diversity`` parser."""
    d.add_argument("--matrix", default=None, help="write the N×N distance matrix to FILE.npy (float64, rows and "
                                                  "columns in sorted name order; needs one metric with an embedding)")
    d.add_argument("--embeddings", default=None,
                   help="keep the embeddings in this folder (reuse it as DIR later); default: a temporary folder")
    _memory(d)


def _metric_options(p: argparse.ArgumentParser) -> None:
    from .conventions import CONVENTIONS
    from .datasets.cli import _device, _size

    p.add_argument("--metric", default="lpips",
                   help="one spec with an embedding: lpips (default), stlpips, or a full name such as "
                        "lpips-vgg-0.0-baseline-[-1,1]@256")
    p.add_argument("--net", choices=("alex", "vgg", "squeeze"), default=None, help="backbone (default alex)")
    p.add_argument("--version", choices=("0.1", "0.0"), default=None, help="LPIPS weights version (default 0.1)")
    p.add_argument("--baseline", action="store_true", help="LPIPS uncalibrated: all channel weights 1")
    p.add_argument("--convention", choices=CONVENTIONS, default=None, help="input range fed to the network")
    p.add_argument("--grayscale", action="store_true", help="feed the luma replicated to RGB")
    p.add_argument("--size", type=_size, default=None, help="resize every image to N x N first (needed when sizes "
                                                            "differ)")
    p.add_argument("--device", type=_device, default=None, help="cpu, cuda, cuda:N or mps (default: auto)")


def add_parsers(subparsers) -> None:
    """Add ``neighbours`` and ``embed`` to the main parser's subparsers."""
    from .datasets.cli import _shard

    n = subparsers.add_parser("neighbours", help="each query image's k nearest pool images under LPIPS, exactly")
    n.add_argument("query", help="folder of query images (or an embedding folder)")
    n.add_argument("pool", help="folder of pool images (or an embedding folder); the same folder: dedup, "
                                "self-matches left out")
    n.add_argument("--k", type=_positive, default=5, help="neighbours per query (default 5)")
    _metric_options(n)
    n.add_argument("--approximate", action="store_true",
                   help="search a FAISS index over a projection of the embeddings, then re-rank the "
                        "candidates exactly (needs pip install -e .[faiss])")
    n.add_argument("--proj-dim", type=_positive, default=256, help="dimensions of the projection (default 256)")
    n.add_argument("--projection", choices=("random", "pca"), default="random",
                   help="a seeded Gaussian random projection (default) or PCA of a 2,048-image sample of the pool")
    n.add_argument("--oversample", type=_positive, default=4, help="candidates re-ranked per neighbour (default 4)")
    _memory(n)
    n.add_argument("--json", action="store_true", help="print one JSON object")
    e = subparsers.add_parser("embed", help="write the LPIPS embeddings of a folder (or one shard of it) to disk")
    e.add_argument("dir", help="folder of images")
    e.add_argument("out", help="folder to write phi-I-of-N.npy, norms-I-of-N.npy and embedding-I-of-N.json to")
    e.add_argument("--shard", type=_shard, default=None, help="embed only slice i of n of the sorted images")
    _metric_options(e)
    e.add_argument("--json", action="store_true", help="print the shard's manifest as one JSON object")


# --------------------------------------------------------------------------- helpers
class _Bar:
    def __init__(self, desc: str, unit: str = "image"):
        from tqdm import tqdm

        self._bar = tqdm(desc=desc, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True, leave=False)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.reset(total=total)
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        self._bar.close()


def _spec(args, text: str | None = None):
    from .spec import parse_spec
    from .space import has_embedding

    spec = parse_spec(text or args.metric, net=args.net, version=args.version,
                      lin=False if args.baseline else None, convention=args.convention, grayscale=args.grayscale,
                      size=args.size)
    if not has_embedding(spec):
        raise ValueError(f"{spec.name} has no embedding (it is not a squared Euclidean distance); "
                         "neighbours and the Gram path need LPIPS or ST-LPIPS — for DISTS or a classic metric "
                         "use `score QUERY.png POOL_DIR` (one query against a folder) or `diversity --sample K`")
    return spec


def _model(spec, device):
    from . import metric_registry

    return metric_registry.build(spec.metric, spec.net, version=spec.version, lin=spec.lin, device=device)


def _load(folder: str, spec, model, budget: int, spill: Path | None, out: Path | None = None, what: str = "images"):
    """The embedding of ``folder``: opened if it is an embedding folder (checked against ``spec``),
    else computed (in memory, or streamed to ``out``/``spill``)."""
    from . import space

    if space.is_embedding_dir(folder):
        emb = space.open_embedding(folder)
        if emb.spec_name != spec.name:
            raise ValueError(f"{folder} holds embeddings of {emb.spec_name}, not {spec.name}")
        return emb
    bar = _Bar(f"embedding {what}")
    try:
        return space.embed(model, folder, spec=spec, out=out, memory_budget=budget, spill=spill, progress=bar)
    finally:
        bar.close()


def _versions(emb) -> dict:
    from .datasets.score import package_versions

    return {**package_versions(), "weights": {emb.spec_name: emb.manifest["model"]["weights"]}}


# --------------------------------------------------------------------------- diversity
def uses_gram(args: argparse.Namespace) -> bool:
    """Whether ``diversity`` goes through embeddings: every metric has one, and no per-pair option is set."""
    from .datasets.cli import _specs
    from .space import has_embedding

    per_pair = args.sample is not None or args.out or args.resume or args.shard is not None
    gram = not per_pair and all(has_embedding(s) for s in _specs(args))
    if not gram and (args.matrix or args.embeddings):
        raise ValueError("--matrix and --embeddings need every metric to have an embedding (LPIPS, ST-LPIPS) and "
                         "no --sample, --out, --resume or --shard")
    return gram


def run_diversity(args: argparse.Namespace) -> dict:
    """``diversity DIR`` through the Gram matrix: the JSON object ``--json`` prints."""
    from . import files, space
    from .datasets.cli import _specs

    specs = _specs(args)
    if (args.matrix or args.embeddings) and len(specs) != 1:
        raise ValueError("--matrix and --embeddings take one metric")
    if args.matrix and not str(args.matrix).endswith(".npy"):
        raise ValueError(f"--matrix must end in .npy, got {args.matrix!r}")
    if args.matrix:
        files.check_output(args.matrix)  # before any work: an existing file, a link or a FIFO is refused
    budget = args.memory_mb << 20
    metrics: dict = {}
    versions: dict = {}
    skipped: list[dict] = []
    images = pairs = 0
    for spec in specs:
        model = None if space.is_embedding_dir(args.dir) else _model(spec, args.device)
        with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp:
            out = Path(args.embeddings) if args.embeddings else None
            emb = _load(args.dir, spec, model, budget, Path(tmp), out)
            if len(emb) < 2:
                raise ValueError(f"{args.dir} has {len(emb)} readable image(s); all pairs need at least 2")
            if args.matrix:
                d = space.pairwise_distances(emb, memory_budget=budget, device=args.device)
                st = space.jackknife_interval(d)
                files.save_npy(args.matrix, d)  # a temporary file, renamed into place when whole
            else:  # tile by tile: memory O(N), whatever N
                bar = _Bar("all pairs", unit="tile")
                try:
                    st = space.diversity(emb, memory_budget=budget, device=args.device, progress=bar)
                finally:
                    bar.close()
            skipped = emb.skipped
            v = _versions(emb)
            versions.update({k: x for k, x in v.items() if k != "weights"})
            versions.setdefault("weights", {}).update(v["weights"])
            del emb  # its memmap, before the temporary folder goes
        images, pairs = st["images"], st["pairs"]
        metrics[spec.name] = {"n": pairs, "mean": st["mean"], "std": st["std"], "ci95": st["ci95"],
                              "nonfinite": 0, "se": st["se"]}
    config = {"method": "gram", "dir": args.dir, "images": images, "pairs": pairs, "metrics": list(metrics),
              "std": "sample standard deviation of the pair distances (ddof=1)",
              "ci95": "jackknife over images (leave one image out), Student t with N - 1 df: pairs share images, "
                      "so they are not independent",
              "matrix": args.matrix, "skipped_images": skipped[:20]}
    return {"n": pairs, "skipped": len(skipped), "skipped_by_reason": {"unreadable": len(skipped)} if skipped else {},
            "metrics": metrics, "config": config, "versions": versions}


def print_diversity(out: dict) -> None:
    from .cells import printable
    from .datasets.cli import _fmt

    c = out["config"]
    print(f"{c['images']} images, all {c['pairs']} pairs through the Gram matrix"
          + (f"; {out['skipped']} unreadable image(s) left out" if out["skipped"] else ""))
    width = max([len("metric")] + [len(k) for k in out["metrics"]])
    print(f"{'metric':<{width}}  {'pairs':>8}  {'mean':>10}  {'std':>10}  95% CI of the mean")
    for name, s in out["metrics"].items():
        lo, hi = s["ci95"]
        print(f"{name:<{width}}  {s['n']:>8}  {_fmt(s['mean']):>10}  {_fmt(s['std']):>10}  [{_fmt(lo)}, {_fmt(hi)}]")
    print("std: of the pair distances (ddof=1); CI: jackknife over images (pairs share images)")
    if c.get("matrix"):
        print(f"matrix: {printable(c['matrix'])}")


# --------------------------------------------------------------------------- neighbours, embed
def _same_folder(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def run_neighbours(args: argparse.Namespace) -> dict:
    """``neighbours QUERY_DIR POOL_DIR``: ``{"queries": [{"query", "neighbours": [{"name", "distance"}]}],
    "config", "versions"}`` (names relative to their folder, nearest first)."""
    from . import space

    spec = _spec(args)
    budget = args.memory_mb << 20
    both = [args.query, args.pool]
    need_model = not all(space.is_embedding_dir(f) for f in both)
    model = _model(spec, args.device) if need_model else None
    same = _same_folder(args.query, args.pool)
    with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp:
        pool = _load(args.pool, spec, model, budget, Path(tmp) / "pool", what="pool")
        query = pool if same else _load(args.query, spec, model, budget, Path(tmp) / "query", what="queries")
        method = "exact"
        if args.approximate:
            index = space.build_index(pool, dim=args.proj_dim, method=args.projection, oversample=args.oversample,
                                      memory_budget=budget)
            found = index.search(query, args.k, exclude_self=same)
            k_used, proj_dim = int(found.indices.shape[1]), index.projection.dim
            method = (f"approximate: FAISS Flat over a {proj_dim}-d {args.projection} projection of the "
                      f"embeddings, {min(k_used * args.oversample, len(pool))} candidates re-ranked exactly")
        else:
            bar = _Bar("neighbours", unit="tile")
            try:
                found = space.nearest(query, pool, args.k, exclude_self=same, memory_budget=budget,
                                      device=args.device, progress=bar)
            finally:
                bar.close()
        out = {
            "queries": found.to_json(query.names, pool.names),
            "config": {"metric": spec.name, "k": args.k, "query_dir": args.query, "pool_dir": args.pool,
                       "exclude_self": same, "method": method, "queries": len(query), "pool": len(pool),
                       "input_size": pool.manifest["input_size"], "dim": pool.dim,
                       "order": "nearest first; equal distances (identical images) by name",
                       "skipped": {"queries": query.skipped[:20], "pool": pool.skipped[:20]}},
            "versions": _versions(pool),
        }
        k_used = int(found.indices.shape[1])  # k capped at the pool size (less the self-match)
        if k_used != args.k:
            out["config"]["k_used"] = k_used
        if args.approximate:
            out["config"]["proj_dim"] = args.proj_dim
            if proj_dim != args.proj_dim:  # capped at the embedding's width (PCA: at the sample's span)
                out["config"]["proj_dim_used"] = proj_dim
        del pool, query, found
    return out


def print_neighbours(out: dict) -> None:
    from .cells import printable

    c = out["config"]
    print(f"{c['metric']}: the {c.get('k_used', c['k'])} nearest of {c['pool']} pool images for each of {c['queries']} queries"
          + (" (self-matches left out)" if c["exclude_self"] else "") + f"; {c['method']}")
    for q in out["queries"]:
        print(printable(q["query"]))  # a name's newline or escape sequence would forge rows or reach the terminal
        for n in q["neighbours"]:
            print(f"  {n['distance']:.6f}  {printable(n['name'])}")


def run_embed(args: argparse.Namespace) -> dict:
    from . import space

    spec = _spec(args)
    model = _model(spec, args.device)
    bar = _Bar("embedding")
    try:
        emb = space.embed(model, args.dir, spec=spec, out=args.out, shard=args.shard, progress=bar)
    finally:
        bar.close()
    m = dict(emb.manifest)
    m["files"] = len(m["files"])
    return m


def print_embed(out: dict) -> None:
    from .cells import printable

    i, n = out["shard"]
    print(f"{out['count']} images of {out['images_total']} (shard {i}/{n}) embedded as {out['config']['spec']}: "
          f"{out['dim']:,} floats each, {printable(out['phi']['file'])}"
          + (f"; {len(out['skipped'])} unreadable" if out["skipped"] else ""))


def run(args: argparse.Namespace) -> int:
    """Execute ``neighbours`` or ``embed``; 0, or 2 after one ``error: ...`` line on stderr."""
    from .datasets.cli import run_command

    def command(args):
        if args.command == "neighbours":
            return run_neighbours(args), print_neighbours
        return run_embed(args), print_embed

    return run_command(args, command, also=(TypeError,))
