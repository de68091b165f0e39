"""Recall@k of the approximate LPIPS neighbour index against the exact search.

A pool of ``--pool`` images and ``--queries`` query images, all seeded crops of the sample photos
(overlapping crops of six photos: every query has close, graded neighbours, the hard case for a
projection), embedded once (AlexNet, v0.1, lin, ``--side`` px). The exact ``k`` nearest
(:func:`lpips_core.space.nearest`) are compared with :meth:`ApproximateIndex.search` for each
projection (PCA of a 2,048-image sample of the pool, or Gaussian random) and size, and each number
of re-ranked candidates (``oversample × k``). Recall is deterministic for a given seed (no timing involved); the search
times printed beside it are the machine's of the moment.

    python benchmarks/space_recall.py [--pool 1000] [--queries 200] [--side 128] [--k 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pool", type=int, default=1000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--side", type=int, default=128)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--dims", default="16,64,256")
    p.add_argument("--oversample", default="1,4")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from lpips_core import LPIPS, space
    from space_scaling import write_images

    model = LPIPS("alex", device="cpu")
    rows = []
    with tempfile.TemporaryDirectory(prefix="space-recall-") as tmp:
        write_images(Path(tmp) / "pool", args.pool, side=args.side, seed=1)
        write_images(Path(tmp) / "queries", args.queries, side=args.side, seed=2)
        t0 = time.perf_counter()
        pool = space.embed(model, Path(tmp) / "pool", spill=Path(tmp) / "pool-emb")
        queries = space.embed(model, Path(tmp) / "queries", spill=Path(tmp) / "q-emb")
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        exact = space.nearest(queries, pool, args.k)
        exact_s = time.perf_counter() - t0
        for method in ("pca", "random"):
            for dim in (int(d) for d in args.dims.split(",")):
                t0 = time.perf_counter()
                index = space.build_index(pool, dim=dim, method=method)
                build_s = time.perf_counter() - t0
                for over in (int(o) for o in args.oversample.split(",")):
                    index.oversample = over
                    t0 = time.perf_counter()
                    approx = index.search(queries, args.k)
                    rows.append({"method": method, "dim": dim, "oversample": over, "candidates": over * args.k,
                                 "recall": space.recall_at_k(approx, exact), "build_s": build_s,
                                 "search_s": time.perf_counter() - t0})
                    print(f"  {method} {dim}, {over * args.k} candidates: recall@{args.k} {rows[-1]['recall']:.3f}",
                          file=sys.stderr, flush=True)
        del pool, queries
    result = {"pool": args.pool, "queries": args.queries, "side": args.side, "k": args.k, "embed_s": embed_s,
              "exact_s": exact_s, "rows": rows}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pool {args.pool}, queries {args.queries}, {args.side} px, k {args.k}; exact search {exact_s:.1f} s")
        print(f"{'projection':>11}{'dim':>6}{'candidates':>12}{'recall@k':>10}{'search s':>10}")
        for r in rows:
            print(f"{r['method']:>11}{r['dim']:>6}{r['candidates']:>12}{r['recall']:>10.3f}{r['search_s']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
