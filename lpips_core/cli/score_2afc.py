"""``python -m lpips_core score-2afc DIR``: each metric's 2AFC score on a BAPPS-format folder.

::

    python -m lpips_core score-2afc DIR [--metrics lpips,lpips-vgg,ssim] [--lin-file lin.pth] [--json]

``DIR`` has ``ref/``, ``p0/``, ``p1/`` and ``judge/`` (:func:`lpips_core.twoafc.read_bapps`).
"""

from __future__ import annotations

import argparse

from ..metric_registry import NET_LABELS
from ..weights import VERSIONS
from .options import add_json
from .run import run_command


def add_parser(subparsers) -> None:
    s = subparsers.add_parser("score-2afc", help="each metric's 2AFC score on a BAPPS-format folder (ref, p0, p1, "
                                                 "judge)")
    s.add_argument("dir", help="the 2AFC folder")
    s.add_argument("--metrics", default="lpips-alex,lpips-vgg,lpips-alex-baseline,mse,ssim",
                   help="comma-separated specs (default: LPIPS alex and vgg, the alex baseline, MSE, SSIM)")
    s.add_argument("--lin-file", default=None, help="also score LPIPS with these lin weights (from fit-lin)")
    s.add_argument("--net", choices=tuple(NET_LABELS), default="alex", help="the --lin-file's backbone")
    s.add_argument("--version", choices=VERSIONS, default="0.1", help="the --lin-file's input scaling")
    add_json(s)


def run(args: argparse.Namespace) -> int:
    """Execute ``score-2afc``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (score_2afc_command(a), print_score), also=(TypeError,))


def _distances(spec, model, data) -> tuple[list[float], list[float]]:
    """Per triplet ``d(ref, p0)`` and ``d(ref, p1)``: a learned metric through
    :func:`lpips_core.sweeps.metric_many` (the reference through the network once), a classic one
    on the ``[0, 1]`` images."""
    from ..sweeps import metric_many
    from ..twoafc import _array

    d0, d1 = [], []
    for r, a, b in zip(data.ref, data.p0, data.p1):
        r, a, b = _array(r), _array(a), _array(b)
        if model is None:
            d0.append(spec.classic(r, a))
            d1.append(spec.classic(r, b))
        else:
            total = metric_many(model, r, [a, b], spec=spec).total
            d0.append(float(total[0]))
            d1.append(float(total[1]))
    return d0, d1


def score_2afc_command(args: argparse.Namespace) -> dict:
    """``score-2afc DIR``: ``{"dir", "triplets", "skipped", "skipped_count", "human_ceiling": {"score", "ci95"},
    "metrics": {name: {"score", "ci95"}}, "lin_file", "score"}``."""
    import numpy as np

    from .. import twoafc
    from ..model import LPIPS
    from ..spec import MetricSpec, parse_specs

    data = twoafc.read_bapps(args.dir)
    specs = list(parse_specs(args.metrics))
    entries = [(s.name, s, None) for s in specs]
    if args.lin_file:
        entries.append((f"lpips-{args.net}-{args.version}-lin-file", MetricSpec("lpips", net=args.net,
                                                                                version=args.version), args.lin_file))
    metrics = {}
    for name, spec, lin_file in entries:
        model = None
        if spec.learned:
            model = LPIPS(spec.net, spec.version, lin_path=lin_file) if lin_file else spec.build()
        d0, d1 = (np.asarray(v) for v in _distances(spec, model, data))
        if spec.higher_is_better:  # a similarity: larger is closer
            d0, d1 = -d0, -d1
        scores = twoafc.two_afc_scores(d0, d1, data.h)
        lo, hi = twoafc.bootstrap_ci(scores)
        metrics[name] = {"score": float(scores.mean()), "ci95": [lo, hi]}
    hc = twoafc.human_ceiling_scores(data.h)
    return {"dir": args.dir, "triplets": len(data), "skipped": data.skipped[:20], "skipped_count": len(data.skipped),
            "human_ceiling": {"score": float(hc.mean()), "ci95": list(twoafc.bootstrap_ci(hc))},
            "metrics": metrics, "lin_file": args.lin_file,
            "score": "per triplet h where the metric puts p1 closer, 1 − h where p0, 0.5 on a tie; the mean "
                     "over triplets (BAPPS' 2AFC score); ci95: percentile bootstrap over triplets"}


def print_score(out: dict) -> None:
    """Per metric its 2AFC score and bootstrap interval, then the human ceiling."""
    from ..cells import printable

    print(f"{out['triplets']} triplets in {printable(out['dir'])}"
          + (f"; {out['skipped_count']} incomplete left out" if out["skipped_count"] else ""))
    width = max([len("metric")] + [len(k) for k in out["metrics"]])
    print(f"{'metric':<{width}}  {'2AFC':>7}  95% CI")
    rows = list(out["metrics"].items()) + [("human ceiling", out["human_ceiling"])]
    for name, m in rows:
        lo, hi = m["ci95"]
        print(f"{name:<{width}}  {m['score']:>7.4f}  [{lo:.4f}, {hi:.4f}]")
