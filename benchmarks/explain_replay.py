"""Replays explain's race on recorded per-pair values: does a race ever change what must be exact?

The demo set's photos at 256 px (12 pairs per method, both methods) are scored once under every
configuration of a backbone's search (72 for AlexNet or VGG16: 2 versions x lin/baseline x 3
input ranges x colour/gray x native, 64, 256). Then :func:`lpips_core.datasets.explain.explain`
runs many times on those values, raced and in full (``race=False``), with its scorer's
``score_pairs`` answered from the recording, so each race is the real code on real numbers
without a network pass. A race is wrong when its first ``exact_rows`` rows, any row whose 95 %
interval holds the reported value, or the verdict differ from the full search's.

Reported values: each configuration's mean, random values between the smallest and largest
means, and values just inside and just outside each configuration's interval; scoring orders:
the seeds 0, 1, 2, ...

    python benchmarks/explain_replay.py [--nets alex,vgg] [--seeds 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from itertools import product
from pathlib import Path
from unittest import mock

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpips_core.datasets import explain as explain_module  # noqa: E402
from lpips_core.datasets import match_folders, score_pairs  # noqa: E402
from lpips_core.datasets.score import ScoreResult  # noqa: E402
from lpips_core.spec import MetricSpec  # noqa: E402
from lpips_explorer.demo_dataset import make_demo  # noqa: E402

TOP = explain_module.EXACT_ROWS


def _specs(net: str) -> list[MetricSpec]:
    return [MetricSpec("lpips", net, v, lin, c, g, s)
            for v, s, g, c, lin in product(("0.1", "0.0"), (None, 64, 256), (False, True),
                                           ("[-1,1]", "[0,1]", "[0,255]"), (True, False))]


def record(disc, net: str) -> dict[str, dict]:
    """Every pair's row (key → row) under every configuration of ``net``'s search."""
    names = [s.name for s in _specs(net)]
    return {row["key"]: row for row in score_pairs(disc, names).rows}


def _replaying(rows: dict[str, dict]):
    """A stand-in for ``score_pairs`` that answers from the recorded rows (active columns only)."""
    def fake(subset, *, scorer, **_):
        active = scorer.active
        out = []
        for pair in subset:
            row = dict(rows[pair.key])
            for name in scorer.names:
                if active is not None and name not in active:
                    row[name] = None
            out.append(row)
            if scorer.on_pass is not None:
                scorer.on_pass(1, len(active or scorer.names))
        return ScoreResult(out, {}, {}, {}, [])
    return fake


def _exact_part(ex) -> dict:
    js = ex.to_json()
    first = [(c["config"], c["mean"], c["std"], c["ci95"]) for c in js["candidates"][:TOP]]
    holding = sorted((c["config"], c["mean"]) for c in js["candidates"] if c["holds_reported"])
    return {"first": first, "holding": holding, "verdict": js["verdict"], "sentence": js["sentence"]}


def replay(disc, rows: dict[str, dict], net: str, seeds: int, rng: np.random.Generator) -> dict:
    """Races against full searches on the recorded values; counts the wrong ones and the work saved."""
    names = [s.name for s in _specs(net)]
    keys = sorted(rows)
    means = np.array([np.mean([rows[k][n] for k in keys]) for n in names])
    stds = np.array([np.std([rows[k][n] for k in keys], ddof=1) for n in names])
    half = 2.201 * stds / np.sqrt(len(keys))  # t(0.975, 11)
    values = list(means) + list(rng.uniform(means.min(), means.max(), 24)) \
        + list(means + 0.98 * half) + list(means + 1.02 * half)
    kw = dict(name=None, nets=(net,), sizes=(None, 64, 256), workers=0, lanes=0, exact_rows=TOP)
    out = {"races": 0, "wrong": 0, "wrong_cases": [], "scores": 0, "scores_full": 0, "finished": 0}
    with mock.patch.object(explain_module, "score_pairs", _replaying(rows)):
        for reported in values:
            full = _exact_part(explain_module.explain(disc, float(reported), race=False, **kw))
            for seed in range(seeds):
                ex = explain_module.explain(disc, float(reported), race=True, seed=seed, **kw)
                out["races"] += 1
                out["scores"] += ex.race["scores"]
                out["scores_full"] += ex.race["scores_full"]
                out["finished"] += ex.race["finished"]
                if _exact_part(ex) != full:
                    out["wrong"] += 1
                    out["wrong_cases"].append({"reported": float(reported), "seed": seed})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="alex,vgg")
    p.add_argument("--seeds", type=int, default=8, help="scoring orders per reported value")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        demo = make_demo(Path(tmp) / "demo", side=256, per_image=2)
        for net in args.nets.split(","):
            for method, folder in demo.methods.items():
                disc = match_folders(demo.reference, folder)
                rows = record(disc, net)
                r = replay(disc, rows, net, args.seeds, rng)
                result[f"{net}/{method}"] = r
                print(f"{net} {method}: {r['wrong']} of {r['races']} races wrong; scores "
                      f"{r['scores'] / r['scores_full']:.3f} of a full search's; {r['finished']} drops sent back",
                      file=sys.stderr, flush=True)
    total = {k: sum(r[k] for r in result.values()) for k in ("races", "wrong", "finished")}
    if args.json:
        print(json.dumps({"by_set": result, "total": total}))
    else:
        print(f"{total['wrong']} of {total['races']} races wrong; {total['finished']} drops sent back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
