"""``python -m lpips_core fit-lin DIR --out FILE``: fit LPIPS lin weights to the human answers of a
BAPPS-format 2AFC folder, cross-validate them, write them in the reference's layout.

::

    python -m lpips_core fit-lin DIR --out lin.pth [--net alex] [--per layer|channel]
                                     [--prior published|uniform] [--strength 0.1] [--folds 5] [--json]
"""

from __future__ import annotations

import argparse

from ..metric_registry import NET_LABELS
from ..weights import VERSIONS
from .options import add_json, positive, strength
from .run import run_command


def add_parser(subparsers) -> None:
    f = subparsers.add_parser("fit-lin", help="fit LPIPS lin weights to the human answers of a 2AFC folder")
    f.add_argument("dir", help="the 2AFC folder")
    f.add_argument("--out", required=True, help="the lin weights file to write (.pth, the reference's layout)")
    f.add_argument("--net", choices=tuple(NET_LABELS), default="alex", help="backbone (default alex)")
    f.add_argument("--version", choices=VERSIONS, default="0.1", help="input scaling and published weights")
    f.add_argument("--per", choices=("layer", "channel"), default="layer",
                   help="one weight per layer, scaling the prior's channel weights (default: holds on a few hundred "
                        "answers), or one per channel (the paper's, for thousands)")
    f.add_argument("--prior", choices=("published", "uniform"), default="published",
                   help="the weights the fit starts from and is pulled toward (default: the published ones)")
    f.add_argument("--strength", type=strength, default=0.1,
                   help="the pull toward the prior, strength·‖w − w0‖²/‖w0‖² (default 0.1; 0: none)")
    f.add_argument("--folds", type=positive, default=5, help="cross-validation folds (default 5)")
    f.add_argument("--size", type=positive, default=None, help="resize every image to N x N first")
    f.add_argument("--seed", type=int, default=0, help="the folds' and bootstrap's seed (default 0)")
    add_json(f, "print the report as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Execute ``fit-lin``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (fit_command(a), print_fit), also=(TypeError,))


def fit_command(args: argparse.Namespace) -> dict:
    """Fit, cross-validate, write the weights to ``--out`` (refused if it exists, before any work); the report."""
    import time

    import numpy as np

    from .. import files, twoafc
    from ..backbones import LAYER_NAMES
    from ..model import LPIPS
    from ..spec import MetricSpec
    from ..weights import lin_weights

    files.check_output(args.out)  # before any work
    data = twoafc.read_bapps(args.dir)
    if args.folds > len(data):
        raise ValueError(f"--folds {args.folds} needs at least {args.folds} triplets; the folder has {len(data)}")
    spec = MetricSpec("lpips", net=args.net, version=args.version, size=args.size)
    model = LPIPS(args.net, args.version, lin=False)
    start = time.perf_counter()
    t0, t1, sizes = twoafc.channel_terms(model, data, spec=spec)
    terms_s = time.perf_counter() - start
    published = np.concatenate([w.numpy().astype(np.float64) for w in lin_weights(args.net, args.version)])
    options = {"per": args.per, "prior": args.prior, "strength": args.strength}
    cv = twoafc.cross_validate(t0, t1, data.h, sizes, published=published, folds=min(args.folds, len(data)),
                               seed=args.seed, **options) if args.folds >= 2 else None
    fit = twoafc.fit_lin(t0, t1, data.h, sizes, published=published, seed=args.seed, **options)
    twoafc.save_lin(args.out, fit.weights)
    layers = []
    for name, w, p in zip(LAYER_NAMES[args.net], fit.weights, np.split(published, np.cumsum(sizes)[:-1])):
        layers.append({"layer": name, "channels": int(w.size), "fitted_sum": float(w.sum()),
                       "published_sum": float(p.sum()), "fitted_zero": int((w == 0).sum())})
    return {"weights_file": args.out, "net": args.net, "version": args.version, "dir": args.dir,
            "triplets": len(data), "skipped": data.skipped[:20], "skipped_count": len(data.skipped),
            "settings": fit.settings, "cross_validation": cv, "layers": layers,
            "seconds": {"features": round(terms_s, 3), "fit": round(fit.seconds, 3),
                        "total": round(time.perf_counter() - start, 3)},
            "use": f"LPIPS('{args.net}', '{args.version}', lin_path='{args.out}'), or score-2afc DIR --lin-file "
                   f"{args.out} --net {args.net}"}


def print_fit(out: dict) -> None:
    """What was fitted and where it went, then the cross-validated 2AFC scores and the verdict."""
    from ..cells import printable

    print(f"fitted {out['settings']['per']} weights of LPIPS {out['net']} v{out['version']} on {out['triplets']} "
          f"triplets (prior {out['settings']['prior']}, strength {out['settings']['strength']:g}) in "
          f"{out['seconds']['total']:.1f} s: {printable(out['weights_file'])}")
    cv = out["cross_validation"]
    if cv:
        print(f"{cv['folds']}-fold cross-validated 2AFC (95% bootstrap CI over triplets):")
        for key, label in (("fitted", "fitted"), ("published", "published lin"), ("baseline", "baseline (w = 1)"),
                           ("human_ceiling", "human ceiling")):
            lo, hi = cv[key]["ci95"]
            print(f"  {label:<17} {cv[key]['score']:.4f}  [{lo:.4f}, {hi:.4f}]")
        lo, hi = cv["fitted_minus_published"]["ci95"]
        print(f"  fitted − published {cv['fitted_minus_published']['score']:+.4f}  [{lo:+.4f}, {hi:+.4f}]: "
              f"{cv['verdict']}")
