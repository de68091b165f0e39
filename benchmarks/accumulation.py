"""How each head's reduction over positions errs with the map's size, and what it costs.

For synthetic maps of 256², 512² and 1024² positions (64 channels, squared-difference-like
positive values spread over four decades) it prints, per reduction, the relative error of the
mean over positions against a float64 sum (the worst channel, and the mean over channels, signed)
and its median time on one thread:

- ``numpy plain mean``: ``arr.reshape(N, C, -1).mean(-1)``, what the NumPy head did; in the
  channels-last layout NumPy then adds the positions one after another into a float32
  accumulator per channel;
- ``numpy head``: :func:`lpips_core.model.np_position_mean` (float32 blocks of 256 positions,
  float64 across blocks; pairwise along the contiguous axis in NCHW);
- ``torch float32 sum``: ``t.mean((2, 3))``, the PyTorch heads (LPIPS, ST-LPIPS, DISTS), whose
  CPU kernel sums in cascade;
- ``torch float64 sum``: ``t.sum((2, 3), dtype=torch.float64)``, for the cost of the alternative.

Both layouts are measured: channels-last (oneDNN's output, the CPU models' default) and NCHW
(a scoring lane's NNPACK pass). ``--end-to-end`` also times the NumPy head inside a whole
``pair_channel_terms`` call (VGG16, 256 px pairs, one process) with the plain mean and with
:func:`np_position_mean`, in interleaved rounds.

    .venv/bin/python benchmarks/accumulation.py [--repeat 7] [--end-to-end] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpips_core import model as model_module  # noqa: E402
from lpips_core.model import np_position_mean  # noqa: E402

SIDES = (256, 512, 1024)
CHANNELS = 64


def _plain_mean(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1], -1).mean(-1)


REDUCTIONS = {
    "numpy plain mean": lambda t: _plain_mean(t.numpy()),
    "numpy head": lambda t: np_position_mean(t.numpy()),
    "torch float32 sum": lambda t: t.mean((2, 3)).numpy(),
    "torch float64 sum": lambda t: (t.sum((2, 3), dtype=torch.float64) / (t.shape[2] * t.shape[3])).numpy(),
}


def _median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def growth(repeat: int) -> list[dict]:
    rows = []
    gen = torch.Generator().manual_seed(0)
    for side in SIDES:
        base = torch.rand(1, CHANNELS, side, side, generator=gen).pow_(4).mul_(0.01)
        want = base.double().mean((2, 3)).numpy()
        for layout, t in (("channels-last", base.contiguous(memory_format=torch.channels_last)), ("nchw", base)):
            for name, fn in REDUCTIONS.items():
                rel = (np.asarray(fn(t), dtype=np.float64) - want) / want
                rows.append({"side": side, "layout": layout, "reduction": name,
                             "max_rel_error": float(np.abs(rel).max()), "mean_rel_error": float(rel.mean()),
                             "ms": 1e3 * _median_s(lambda: fn(t), repeat)})
    return rows


def end_to_end(repeat: int, pairs: int = 4) -> dict:
    """``pair_channel_terms`` of VGG16 on ``pairs`` pairs of 256 px (NumPy head, oneDNN,
    channels-last taps), with the plain mean and with :func:`np_position_mean`, interleaved."""
    from lpips_core import LPIPS, backbones

    backbones.USE_NNPACK = False
    model = LPIPS("vgg", device="cpu")
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(pairs, 3, 256, 256, generator=gen) * 2 - 1
    y = (x + 0.2 * torch.rand(pairs, 3, 256, 256, generator=gen)).clamp_(-1, 1)
    real = model_module.np_position_mean
    variants = {"plain mean": _plain_mean, "numpy head": real}
    times: dict[str, list[float]] = {k: [] for k in variants}
    values = {}
    try:
        for round_ in range(repeat + 1):
            for name, fn in variants.items():
                model_module.np_position_mean = fn
                t0 = time.perf_counter()
                terms = model.pair_channel_terms(x, y)
                if round_:
                    times[name].append(time.perf_counter() - t0)
                values[name] = sum(t.sum(1) for t in terms)
    finally:
        model_module.np_position_mean = real
    return {"case": f"vgg pair_channel_terms, {pairs} pairs of 256 px, {torch.get_num_threads()} threads",
            **{f"{k}_s": statistics.median(v) for k, v in times.items()},
            "max_abs_diff": float((values["plain mean"] - values["numpy head"]).abs().max())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--end-to-end", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = growth(args.repeat)
    finally:
        torch.set_num_threads(threads)
    e2e = end_to_end(args.repeat) if args.end_to_end else None
    if args.json:
        print(json.dumps({"growth": rows, "end_to_end": e2e}))
        return 0
    print(f"{'side':>6} {'layout':<14}{'reduction':<20}{'max rel err':>12}{'mean rel err':>14}{'ms':>9}")
    for r in rows:
        print(f"{r['side']:>6} {r['layout']:<14}{r['reduction']:<20}{r['max_rel_error']:>12.1e}"
              f"{r['mean_rel_error']:>14.1e}{r['ms']:>9.2f}")
    if e2e:
        print(json.dumps(e2e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
