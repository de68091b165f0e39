"""Where a scoring lane's time goes on ``bench.py``'s dataset case, block by block, and the least
any scorer that reads the same PNG files could add to the floor.

``bench.py``'s ``dataset-{net}-256`` compares ours with its floor: the backbone passes over the
same blocks, on images already decoded and scaled. This script splits a lane's work on the same
128 pairs (blocks of 16, one torch thread, as in a lane) into:

- ``floor``: the backbone passes (``bench.floor_pairs`` on decoded, scaled images);
- ``score``: :meth:`lpips_core.datasets.Scorer.score_block` on the decoded block (the floor's
  passes plus the input mapping and the per-layer head);
- ``decode``: ``PairDataset.decode_here`` (read, check, decode with libspng, float conversion,
  channels-first copy);
- ``read``: the files' bytes alone;
- ``inflate``: zlib's ``decompress`` of each file's ``IDAT`` data alone, which every PNG decoder
  must do (libspng and Pillow both inflate with zlib), without unfiltering or conversion.

Each is the best of ``--repeat`` rounds, summed over the blocks. It prints ours
``(decode + score) / floor`` (what ``bench.py``'s ``ours / floor`` measures, less process
start-up) and the lower bound ``(floor + read + inflate) / floor``: no scorer that reads the files
and inflates them with zlib can get below it, however little its head and conversion cost.

    python benchmarks/dataset_budget.py [--net alex|vgg] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench import floor_pairs, scaled_inputs, write_dataset  # noqa: E402
from machine import machine_info  # noqa: E402

from lpips_core import LPIPS  # noqa: E402
from lpips_core.datasets import Scorer, match_folders  # noqa: E402
from lpips_core.datasets.loader import PairDataset  # noqa: E402
from lpips_core.datasets.score import default_block  # noqa: E402
from lpips_core.spec import MetricSpec  # noqa: E402


def idat(data: bytes) -> bytes:
    """The concatenated ``IDAT`` payload of a PNG file (the zlib stream of its pixels)."""
    pos, parts = 8, []
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            parts.append(data[pos + 8:pos + 8 + length])
        if kind == b"IEND":
            break
        pos += 12 + length
    return b"".join(parts)


def best(fn, repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn`` after one warm-up, in seconds."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def budget(net: str, repeat: int, root: Path) -> dict:
    torch.set_num_threads(1)  # as in a lane
    dir_a, dir_b = write_dataset(root)
    pairs = match_folders(dir_a, dir_b).pairs  # sorted by key, as score_pairs sorts them
    model = LPIPS(net, "0.1", True, device="cpu")
    scorer = Scorer([f"lpips-{net}"], device="cpu", models={MetricSpec("lpips", net, "0.1"): model})
    dataset = PairDataset(pairs)
    size = default_block(torch.device("cpu"))
    blocks = [list(range(i, min(i + size, len(pairs)))) for i in range(0, len(pairs), size)]
    files = [[p for i in b for p in (pairs[i].reference, pairs[i].test)] for b in blocks]
    streams = [[idat(Path(f).read_bytes()) for f in fs] for fs in files]
    decoded = [dataset.decode_here(b) for b in blocks]
    x_in, y_in = scaled_inputs(model, dir_a, dir_b, [p.reference_name for p in pairs])
    scaled = [(x_in[b[0]:b[-1] + 1], y_in[b[0]:b[-1] + 1]) for b in blocks]

    def floor():
        with torch.inference_mode():
            for x, y in scaled:
                floor_pairs(model, x, y)

    def score():
        with torch.inference_mode():
            for items in decoded:
                scorer.score_block(items)

    parts = {
        "floor": best(floor, repeat),
        "score": best(score, repeat),
        "decode": best(lambda: [dataset.decode_here(b) for b in blocks], repeat),
        "read": best(lambda: [Path(f).read_bytes() for fs in files for f in fs], repeat),
        "inflate": best(lambda: [zlib.decompress(s) for ss in streams for s in ss], repeat),
    }
    f = parts["floor"]
    return {
        "net": net,
        "pairs": len(pairs),
        "block": size,
        "repeat": repeat,
        "machine": machine_info(),
        "seconds": parts,
        "ms_per_block": {k: 1000 * v / len(blocks) for k, v in parts.items()},
        "ours_over_floor": (parts["decode"] + parts["score"]) / f,
        "head_and_input_over_floor": (parts["score"] - f) / f,
        "decode_over_floor": parts["decode"] / f,
        "lower_bound_over_floor": (f + parts["read"] + parts["inflate"]) / f,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", choices=("alex", "vgg"), default="alex")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        r = budget(args.net, args.repeat, Path(tmp))
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"{r['net']}: {r['pairs']} pairs in blocks of {r['block']}, one thread, best of {r['repeat']}")
    for k, ms in r["ms_per_block"].items():
        print(f"  {k:<8}{ms:8.1f} ms per block  {ms / r['ms_per_block']['floor']:6.3f}× the floor")
    print(f"  ours (decode + score) / floor      {r['ours_over_floor']:.3f}")
    print(f"  lower bound (floor + read + inflate) / floor  {r['lower_bound_over_floor']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
