"""The pool index at scale: a memorisation screen of 1,000 queries against a pool of 100,000 images.

A pool of ``--n`` distinct 64 px images is generated (seeded: a third textures of oriented
gratings over smooth noise, a third shapes drawn on gradients, a third crops of the sample photos
at random scales, positions and flips; an image whose pixels repeat an earlier one's is drawn
again), and ``--queries`` queries: ``--exact`` byte copies of pool images, ``--near`` near copies
(a pool image with mild noise and a brightness shift, or re-encoded as JPEG at quality 90), the
rest new images from other seeds. Then, in one process (AlexNet, v0.1, lin, one CPU thread pool):

1. the queries are embedded (their full φ, kept for the exact search);
2. ``build_pool`` indexes the pool (``--dim``-d ``--proj`` projection, FAISS): its time is the
   build's, net of the exact search below, which runs on the side on each chunk of the pool's φ
   as the build computes it (``observe``): every query against every pool image, float32 GEMM
   ranking then the best 16 per chunk re-ranked in float64 from the rows, so the ground truth is
   the exact top 5 over the whole pool (no subset);
3. ``PoolIndex.search`` finds each query's ``--candidates`` in the index and re-ranks them
   exactly by re-embedding them from their files.

Reported: recall@5 of the search against the exact top 5 (ties by name), the rank of every
planted copy (must be 1, an exact copy at distance 0), the times (generation, query embedding,
build net of the exact search, the exact search, the search), the index's bytes on disk, and the
process's peak RSS (which includes the exact search's query embeddings). ``--probe-256`` also
times the embedding and the projection of 128 images at 256 px, the parts of the million-image
extrapolation in ``docs/lpips-space.md``.

    python benchmarks/space_pool.py [--n 100000] [--queries 1000] [--dim 256] [--proj pca]
        [--candidates 64] [--work DIR] [--out benchmarks/results/space-pool-HOST.json]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SIDE = 64
PER_FOLDER = 1000
_PHOTOS: list[np.ndarray] = []


# --------------------------------------------------------------------------- images
def _photos() -> list[np.ndarray]:
    """The sample photos as ``(H, W, 3)`` uint8 arrays (loaded once per process)."""
    if not _PHOTOS:
        from PIL import Image

        for p in sorted((REPO / "sample_images").glob("*.png")):
            _PHOTOS.append(np.asarray(Image.open(p).convert("RGB")))
    return _PHOTOS


def texture(rng: np.random.Generator) -> np.ndarray:
    """Oriented gratings over smooth noise, in a random palette: ``(SIDE, SIDE, 3)`` uint8."""
    from PIL import Image

    y, x = np.mgrid[0:SIDE, 0:SIDE] / SIDE
    out = np.zeros((SIDE, SIDE, 3))
    for _ in range(rng.integers(2, 6)):
        theta, freq, phase = rng.uniform(0, np.pi), rng.uniform(1, 14), rng.uniform(0, 2 * np.pi)
        wave = np.sin(2 * np.pi * freq * (x * np.cos(theta) + y * np.sin(theta)) + phase)
        out += wave[..., None] * rng.uniform(-1, 1, 3)
    small = rng.random((rng.integers(3, 12),) * 2 + (3,)) * 255
    noise = np.asarray(Image.fromarray(small.astype(np.uint8)).resize((SIDE, SIDE), Image.BICUBIC), dtype=float)
    img = 128 + 40 * out + (noise - 128) * rng.uniform(0.2, 0.8)
    return np.clip(img, 0, 255).astype(np.uint8)


def shapes(rng: np.random.Generator) -> np.ndarray:
    """One to six ellipses, rectangles or polygons on a linear gradient: ``(SIDE, SIDE, 3)`` uint8."""
    from PIL import Image, ImageDraw

    t = np.linspace(0, 1, SIDE)
    a, b = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    grad = a + (b - a) * (t[:, None, None] if rng.random() < 0.5 else t[None, :, None])
    im = Image.fromarray(np.broadcast_to(grad, (SIDE, SIDE, 3)).astype(np.uint8))
    draw = ImageDraw.Draw(im)
    for _ in range(rng.integers(1, 7)):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        pts = rng.uniform(-8, SIDE + 8, (rng.integers(3, 7), 2))
        kind = rng.integers(3)
        if kind == 2:
            draw.polygon([tuple(p) for p in pts], fill=colour)
        else:
            x0, y0 = pts[:, 0].min(), pts[:, 1].min()
            x1, y1 = max(x0 + 3, pts[:, 0].max()), max(y0 + 3, pts[:, 1].max())
            (draw.ellipse if kind == 0 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    return np.asarray(im)


def crop(rng: np.random.Generator) -> np.ndarray:
    """A crop of a sample photo at a random scale (24 to 256 px), position and flip, resized to SIDE."""
    from PIL import Image

    photo = _photos()[rng.integers(len(_photos()))]
    h, w = photo.shape[:2]
    side = int(rng.integers(24, min(256, h, w) + 1))
    top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
    c = photo[top:top + side, left:left + side]
    if rng.random() < 0.5:
        c = c[:, ::-1]
    return np.asarray(Image.fromarray(np.ascontiguousarray(c)).resize((SIDE, SIDE), Image.BILINEAR))


KINDS = (texture, shapes, crop)


def generated(seed: int) -> np.ndarray:
    """The image of ``seed``: its kind is ``seed % 3``."""
    return KINDS[seed % 3](np.random.default_rng(seed))


def _png(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _write_range(args: tuple[Path, int, int, int]) -> list[tuple[int, str]]:
    """Pool images ``lo … hi − 1`` (seed ``base + i``, or later seeds where pixels repeat in this
    range); returns each image's ``(index, pixel digest)``."""
    import hashlib

    root, lo, hi, base = args
    seen, out = set(), []
    for i in range(lo, hi):
        seed = base + i
        while True:
            arr = generated(seed)
            digest = hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest()
            if digest not in seen:
                break
            seed += 10_000_000  # another draw, outside every other image's seeds
        seen.add(digest)
        path = root / f"{i // PER_FOLDER:03d}" / f"{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_png(arr))
        out.append((i, digest))
    return out


def write_pool(root: Path, n: int, workers: int = 2) -> int:
    """``n`` distinct pool images under ``root`` (folders of 1,000); returns how many had to be
    drawn again across worker ranges (rewritten here)."""
    from multiprocessing import Pool

    step = -(-n // (workers * 8))
    jobs = [(root, lo, min(n, lo + step), 0) for lo in range(0, n, step)]
    with Pool(workers) as pool:
        results = [r for part in pool.map(_write_range, jobs) for r in part]
    seen, redrawn = set(), 0
    for i, digest in results:
        while digest in seen:  # a repeat across two ranges: redraw this one here
            redrawn += 1
            (_, digest), = _write_range((root, i, i + 1, 20_000_000 * redrawn))
        seen.add(digest)
    return redrawn


def write_queries(qdir: Path, pool: Path, n_pool: int, n: int, exact: int, near: int, seed: int = 1) -> dict:
    """``n`` queries in ``qdir``: ``exact`` byte copies and ``near`` near copies of seeded pool
    images, the rest new images; returns ``{query name: planted pool name}``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    qdir.mkdir(parents=True, exist_ok=True)
    picks = rng.choice(n_pool, size=exact + near, replace=False)
    planted = {}
    for j, i in enumerate(picks):
        name = f"{i // PER_FOLDER:03d}/{i:06d}.png"
        src = pool / name
        if j < exact:
            q = f"exact-{j:04d}.png"
            shutil.copyfile(src, qdir / q)
        else:
            arr = np.asarray(Image.open(src).convert("RGB"), dtype=float)
            q = f"near-{j:04d}.png"
            if j % 2:
                noisy = arr * rng.uniform(0.97, 1.03) + rng.normal(0, 3, arr.shape)
                (qdir / q).write_bytes(_png(np.clip(noisy, 0, 255).astype(np.uint8)))
            else:
                buf = io.BytesIO()
                Image.fromarray(arr.astype(np.uint8)).save(buf, format="JPEG", quality=90)
                (qdir / q).write_bytes(_png(np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))))
        planted[q] = name
    for j in range(n - exact - near):
        (qdir / f"new-{j:04d}.png").write_bytes(_png(generated(50_000_000 + j)))
    return planted


# --------------------------------------------------------------------------- the exact search on the side
class ExactSearch:
    """The exact ``k`` nearest pool rows of every query, fed the pool's φ chunk by chunk
    (:func:`lpips_core.space.build_pool`'s ``observe``): each chunk ranked by a float32 GEMM, its
    best ``keep`` per query re-ranked by ``‖φ_q − φ_p‖²`` in float64 from the rows (identical
    pixels: 0) and merged, ties by pool row."""

    def __init__(self, queries, k: int = 5, keep: int = 16):
        import torch

        self.q = torch.from_numpy(queries.rows(0, len(queries)))
        self.q_norms = torch.from_numpy(queries.norms).float()
        self.q_content = list(queries.content)
        self.k, self.keep = k, keep
        self.best_d = np.full((len(queries), 0), np.inf)
        self.best_i = np.zeros((len(queries), 0), dtype=np.int64)
        self.row = 0
        self.seconds = 0.0

    def __call__(self, emb) -> None:
        import torch

        t0 = time.perf_counter()
        p = torch.from_numpy(emb.rows(0, len(emb)))
        approx = (self.q_norms[:, None] + torch.from_numpy(emb.norms).float()[None] - 2 * self.q @ p.T).numpy()
        keep = min(self.keep, len(emb))
        top = np.argpartition(approx, keep - 1, axis=1)[:, :keep]
        exact = np.empty(top.shape)
        for r in range(len(top)):
            d = (p[top[r]].double() - self.q[r].double()).square_().sum(1).numpy()
            same = np.array([emb.content[j] == self.q_content[r] for j in top[r]])
            exact[r] = np.where(same, 0.0, d)
        d = np.concatenate([self.best_d, exact], 1)
        i = np.concatenate([self.best_i, top + self.row], 1)
        order = np.lexsort((i, d), axis=1)[:, :self.keep]
        self.best_d, self.best_i = np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)
        self.row += len(emb)
        self.seconds += time.perf_counter() - t0

    def neighbours(self):
        from lpips_core.space import Neighbours

        return Neighbours(self.best_i[:, :self.k].copy(), self.best_d[:, :self.k].copy())


# --------------------------------------------------------------------------- measuring
def rss_mib() -> float:
    """This process's peak resident set so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def probe_256(model, n: int = 128) -> dict:
    """Seconds per image to embed ``n`` 256 px images, and to project their φ to 256 dimensions
    (Gaussian, PCA): the per-image parts of the million-image extrapolation."""
    from lpips_core import space
    from PIL import Image

    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory(prefix="pool-256-") as tmp:
        for i in range(n):
            arr = np.asarray(Image.fromarray(crop(rng)).resize((256, 256), Image.BICUBIC))
            Image.fromarray(arr).save(Path(tmp) / f"{i:04d}.png")
        t0 = time.perf_counter()
        emb = space.embed(model, tmp, memory_budget=4 << 30)
        embed_s = (time.perf_counter() - t0) / n
        gauss = space.Projection("random", 256, 0)
        t0 = time.perf_counter()
        gauss.apply(emb)
        gauss_s = (time.perf_counter() - t0) / n
        pca = space.fit_projection(emb, min(256, n - 1), method="pca")
        t0 = time.perf_counter()
        pca.apply(emb)
        pca_s = (time.perf_counter() - t0) / n
    return {"images": n, "dim_phi": emb.dim, "embed_s_per_image": embed_s, "gaussian_projection_s_per_image": gauss_s,
            "pca_projection_s_per_image": pca_s, "phi_bytes_per_image": emb.dim * 4}


def run(args) -> dict:
    """Generate, build, search, measure: the result record."""
    from lpips_core import LPIPS, space
    from machine import host_tag, machine_info

    work = Path(args.work or tempfile.mkdtemp(prefix="space-pool-", dir="/tmp"))
    pool_dir, q_dir, idx_dir = work / "pool", work / "queries", work / "index"
    t0 = time.perf_counter()
    redrawn = write_pool(pool_dir, args.n)
    planted = write_queries(q_dir, pool_dir, args.n, args.queries, args.exact, args.near)
    gen_s = time.perf_counter() - t0
    model = LPIPS("alex", device="cpu")
    t0 = time.perf_counter()
    queries = space.embed(model, q_dir, spill=work / "q-emb")
    q_embed_s = time.perf_counter() - t0
    exact = ExactSearch(queries, k=args.k)
    t0 = time.perf_counter()
    pool = space.build_pool(model, pool_dir, idx_dir, dim=args.dim, projection=args.proj, observe=exact)
    build_s = time.perf_counter() - t0 - exact.seconds
    rss_build = rss_mib()
    t0 = time.perf_counter()
    found, qnames, _ = space.open_pool(idx_dir).search(model, q_dir, k=args.k, candidates=args.candidates)
    search_s = time.perf_counter() - t0
    truth = exact.neighbours()
    assert qnames == queries.names
    ranks = {}
    for q, name in planted.items():
        row = qnames.index(q)
        hits = [pool.names[int(j)] for j in found.indices[row]]
        ranks[q] = hits.index(name) + 1 if name in hits else None
    exact_zero = all(found.distances[qnames.index(q), 0] == 0.0 for q in planted if q.startswith("exact-"))
    truth_rank1 = sum(pool.names[int(truth.indices[qnames.index(q), 0])] == n for q, n in planted.items())
    record = {
        "machine": machine_info(speed=False), "host": host_tag(),
        "config": {"n": args.n, "queries": args.queries, "exact_copies": args.exact, "near_copies": args.near,
                   "side": SIDE, "metric": pool.spec_name, "dim": pool.projection.dim, "projection": args.proj,
                   "index": pool.manifest["index"], "candidates": args.candidates, "k": args.k,
                   "torch_threads": __import__("torch").get_num_threads()},
        "recall_at_5": space.recall_at_k(found, truth),
        "planted": {"copies": len(planted), "at_rank_1": sum(r == 1 for r in ranks.values()),
                    "missed": [q for q, r in ranks.items() if r != 1][:20], "exact_copies_at_distance_0": exact_zero,
                    "exact_search_puts_planted_first": truth_rank1},
        "seconds": {"generate": gen_s, "embed_queries": q_embed_s, "build": build_s, "exact_search": exact.seconds,
                    "search": search_s, "build_per_image": build_s / args.n, "search_per_query": search_s / args.queries},
        "disk_bytes": {f.name: f.stat().st_size for f in sorted(idx_dir.iterdir())},
        "pool_bytes_on_disk": sum(f.stat().st_size for f in pool_dir.rglob("*.png")),
        "peak_rss_mib": {"after_build": rss_build, "at_end": rss_mib()},
        "redrawn_duplicates": redrawn, "dim_phi": pool.layout.dim,
    }
    if args.probe_256:
        record["probe_256"] = probe_256(model)
    if not args.keep:
        del queries, pool
        shutil.rmtree(work, ignore_errors=True)
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="pool images")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--exact", type=int, default=100, help="queries that are byte copies of pool images")
    p.add_argument("--near", type=int, default=200, help="queries that are near copies of pool images")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--proj", choices=("gaussian", "pca"), default="pca")
    p.add_argument("--candidates", type=int, default=64)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--work", default=None, help="folder for the images and the index (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--probe-256", action="store_true", help="also time embedding and projecting 256 px images")
    p.add_argument("--out", default=None, help="write the record to this JSON file")
    args = p.parse_args(argv)
    record = run(args)
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
