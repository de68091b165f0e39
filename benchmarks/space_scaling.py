"""How ``diversity DIR`` through the Gram matrix scales with the number of images (AlexNet, 256 px).

For each ``N`` a fresh process embeds ``N`` distinct 256 px images (seeded crops of the sample
photos, some mirrored) with :func:`lpips_core.space.embed` (streamed to a temporary folder once
φ passes the 1 GiB budget, as the CLI does), computes all ``N (N − 1) / 2`` distances with
:func:`lpips_core.space.pairwise_distances` and the jackknife interval, and reports its wall time
(embedding and Gram separately) and peak resident memory (``ru_maxrss``, the whole process:
PyTorch and the model included).

The reference's time is **extrapolated, not measured** beyond the pairs timed here: its
``lpips_1dir_allpairs.py`` loop costs one image decode plus one forward per pair, so its time for
``N`` images is that measured per-pair cost times ``N (N − 1) / 2``.

It ends with what a 1,000,000-image pool needs (:func:`plan`): bytes, FLOPs, and times at the
rates measured in this run (CPU) and at published GPU FP32 peaks (lower bounds, labelled so).

    python benchmarks/space_scaling.py [--sizes 48,250,500,1000,2000] [--ref-pairs 24] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SIDE = 256

_RUNNER = r"""
import json, resource, sys, tempfile, time
sys.path.insert(0, {repo!r})
import torch
from lpips_core import LPIPS, space
folder, budget, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = LPIPS("alex", device=device)
t0 = time.perf_counter()
with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp:
    emb = space.embed(model, folder, memory_budget=budget, spill=tmp)
    t1 = time.perf_counter()
    stats = space.diversity(emb, memory_budget=budget, device=device)
    t2 = time.perf_counter()
    out = dict(n=len(emb), dim=emb.dim, phi_bytes=emb.nbytes, embed_s=t1 - t0, gram_s=t2 - t1, total_s=t2 - t0,
               mean=stats["mean"], ci95=stats["ci95"], streamed=emb.manifest["phi"] is not None,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               threads=torch.get_num_threads())
    del emb
print(json.dumps(out))
"""


def write_images(root: Path, n: int, side: int = SIDE, seed: int = 0) -> list[Path]:
    """``n`` distinct ``side`` px PNGs: seeded crops of the sample photos at 2 × ``side``, every
    other one mirrored."""
    from PIL import Image

    from lpips_core.conventions import to_input
    from lpips_core.images import load_image

    photos = sorted((REPO / "sample_images").glob("*.png"))
    big = [to_input(load_image(p).array, convention="[0,1]", size=2 * side)[0].permute(1, 2, 0).numpy()
           for p in photos]
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        top, left = rng.integers(0, side, size=2)
        crop = big[i % len(big)][top:top + side, left:left + side]
        if (i // len(big)) % 2:
            crop = crop[:, ::-1]
        path = root / f"{i:05d}.png"
        Image.fromarray(np.round(crop * 255).astype(np.uint8)).save(path)
        paths.append(path)
    return paths


def subset(paths: list[Path], n: int, root: Path) -> Path:
    """A folder of the first ``n`` images (hard links)."""
    root.mkdir(parents=True, exist_ok=True)
    for p in paths[:n]:
        os.link(p, root / p.name)
    return root


def reference_pair_seconds(paths: list[Path], pairs: int) -> float:
    """Seconds per pair of the reference's all-pairs loop (load the second image, one forward),
    over ``pairs`` pairs after one warm-up pair."""
    import lpips
    import torch
    from PIL import Image

    from lpips_core.testing import reference_lpips

    ref = reference_lpips("alex", "0.1", True)

    def load(p):
        return lpips.im2tensor(np.asarray(Image.open(p).convert("RGB")))

    img0 = load(paths[0])
    with torch.no_grad():
        ref(img0, load(paths[1]))
        t0 = time.perf_counter()
        for p in paths[1:pairs + 1]:
            ref(img0, load(p))
        return (time.perf_counter() - t0) / pairs


#: Published peak rates (NVIDIA's H100 SXM5 and A100 SXM4 80 GB datasheets), FLOP/s: FP32 on the
#: CUDA cores, which the float32 Gram GEMMs use (TF32 tensor cores would round the products to 10
#: mantissa bits, ~1e-3 of a distance: not exact enough).
GPU_FP32 = {"H100 SXM (published FP32 peak)": 67e12, "A100 SXM (published FP32 peak)": 19.5e12}


def forward_macs(net: str, side: int) -> int:
    """Multiply-accumulates of the backbone's convolutions up to the last tap, for one ``side`` px image."""
    import torch
    from torch import nn

    from lpips_core import LPIPS

    model = LPIPS(net, device="cpu")
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        total += out[0].numel() * (mod.in_channels // mod.groups) * mod.kernel_size[0] * mod.kernel_size[1]

    handles = [m.register_forward_hook(hook) for m in model.backbone.modules() if isinstance(m, nn.Conv2d)]
    with torch.inference_mode():
        model.features(torch.zeros(1, 3, side, side))
    for h in handles:
        h.remove()
    return total


def plan(n: int, *, embed_per_s: float | None, gram_flops: float | None, side: int = SIDE, queries: int = 10_000) -> dict:
    """What a pool of ``n`` images needs (AlexNet and VGG16 at ``side`` px): bytes, FLOPs, and time
    at the given measured CPU rates and at the published GPU FP32 peaks."""
    import torch

    from lpips_core import LPIPS, space

    out = {}
    for net in ("alex", "vgg"):
        dim = space.phi(LPIPS(net, device="cpu"), torch.zeros(1, 3, side, side))[1].dim
        embed_flops = 2 * forward_macs(net, side) * n
        pairs_flops = 2 * (n * (n - 1) // 2) * dim
        query_flops = 2 * queries * n * dim
        row = {"dim": dim, "phi_bytes": 4 * dim * n, "norms_bytes": 8 * n, "embed_flops": embed_flops,
               "allpairs_flops": pairs_flops, f"neighbours_{queries}_queries_flops": query_flops,
               "pca64_projection_flops": 2 * n * dim * 64}
        if net == "alex" and embed_per_s:
            row["cpu_embed_s (measured rate)"] = n / embed_per_s
        if gram_flops:
            row["cpu_allpairs_s (measured GEMM rate)"] = pairs_flops / gram_flops
        for gpu, rate in GPU_FP32.items():
            row[f"{gpu}: embed_s lower bound"] = embed_flops / rate
            row[f"{gpu}: allpairs_s lower bound"] = pairs_flops / rate
            row[f"{gpu}: neighbours_s lower bound"] = query_flops / rate
        out[net] = row
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="48,250,500,1000,2000")
    p.add_argument("--ref-pairs", type=int, default=24, help="reference pairs timed for the extrapolation")
    p.add_argument("--memory-mb", type=int, default=1024)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    from machine import machine_info  # benchmarks/machine.py

    rows = []
    with tempfile.TemporaryDirectory(prefix="space-scaling-") as tmp:
        paths = write_images(Path(tmp) / "all", max(sizes))
        per_pair = reference_pair_seconds(paths, args.ref_pairs)
        print(f"reference: {per_pair * 1e3:.1f} ms per pair (measured over {args.ref_pairs} pairs)", file=sys.stderr)
        for n in sizes:
            folder = subset(paths, n, Path(tmp) / f"n{n}")
            proc = subprocess.run([sys.executable, "-c", _RUNNER.format(repo=str(REPO)), str(folder),
                                   str(args.memory_mb << 20), args.device], capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"N={n}: {proc.stderr.strip().splitlines()[-1]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            pairs = n * (n - 1) // 2
            r.update(pairs=pairs, reference_extrapolated_s=per_pair * pairs,
                     speedup_extrapolated=per_pair * pairs / r["total_s"])
            rows.append(r)
            print(f"  N={n}: {r['total_s']:.1f} s (embed {r['embed_s']:.1f}, Gram {r['gram_s']:.1f}), peak "
                  f"{r['peak_rss_mb']:.0f} MiB; reference extrapolated {r['reference_extrapolated_s']:.0f} s",
                  file=sys.stderr, flush=True)
    big = rows[-1]
    rates = {"embed_images_per_s": big["n"] / big["embed_s"],
             "gram_flops_per_s": 2 * big["pairs"] * big["dim"] / big["gram_s"]}
    result = {"net": "alex", "side": SIDE, "memory_budget_mb": args.memory_mb, "device": args.device,
              "reference_per_pair_s": per_pair, "reference_pairs_timed": args.ref_pairs,
              "reference": "extrapolated: measured per-pair cost × N (N − 1) / 2",
              "machine": machine_info(), "rows": rows, "measured_rates": rates,
              "plan_1M": plan(1_000_000, embed_per_s=rates["embed_images_per_s"], gram_flops=rates["gram_flops_per_s"])}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{'N':>6}{'pairs':>10}{'ours s':>9}{'embed s':>9}{'Gram s':>8}{'peak MiB':>10}{'φ GiB':>7}"
              f"{'ref s (extrap.)':>17}{'speedup':>9}")
        for r in rows:
            print(f"{r['n']:>6}{r['pairs']:>10}{r['total_s']:>9.1f}{r['embed_s']:>9.1f}{r['gram_s']:>8.1f}"
                  f"{r['peak_rss_mb']:>10.0f}{r['phi_bytes'] / 2**30:>7.2f}{r['reference_extrapolated_s']:>17.0f}"
                  f"{r['speedup_extrapolated']:>9.0f}")
        print(f"measured here: {rates['embed_images_per_s']:.1f} images/s embedded, "
              f"{rates['gram_flops_per_s'] / 1e9:.1f} GFLOP/s in the Gram stage (N = {big['n']})")
        print("a 1,000,000-image pool:")
        for net, row in result["plan_1M"].items():
            print(f"  {net}: " + "; ".join(f"{k} {v:.3g}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
