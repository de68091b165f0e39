"""The 2AFC subcommands of ``python -m lpips_core``: ``score-2afc`` and ``fit-lin``.

::

    python -m lpips_core score-2afc DIR [--metrics lpips,lpips-vgg,ssim] [--lin-file lin.pth] [--json]
    python -m lpips_core fit-lin DIR --out lin.pth [--net alex] [--per layer|channel]
                                     [--prior published|uniform] [--strength 0.1] [--folds 5] [--json]

``DIR`` is a BAPPS-format 2AFC folder (``ref/``, ``p0/``, ``p1/``, ``judge/``; see
:func:`lpips_core.twoafc.read_bapps`). Errors exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse

from .datasets.cli import _positive

__all__ = ["TWOAFC_COMMANDS", "add_parsers", "run"]

TWOAFC_COMMANDS: tuple[str, ...] = ("score-2afc", "fit-lin")


def _strength(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not (0.0 <= v <= 1e6):
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1e6, got {text!r}")
    return v


def add_parsers(subparsers) -> None:
    """Add ``score-2afc`` and ``fit-lin`` to the main parser's subparsers."""
    s = subparsers.add_parser("score-2afc", help="each metric's 2AFC score on a BAPPS-format folder (ref, p0, p1, "
                                                 "judge)")
    s.add_argument("dir", help="the 2AFC folder")
    s.add_argument("--metrics", default="lpips-alex,lpips-vgg,lpips-alex-baseline,mse,ssim",
                   help="comma-separated specs (default: LPIPS alex and vgg, the alex baseline, MSE, SSIM)")
    s.add_argument("--lin-file", default=None, help="also score LPIPS with these lin weights (from fit-lin)")
    s.add_argument("--net", choices=("alex", "vgg", "squeeze"), default="alex", help="the --lin-file's backbone")
    s.add_argument("--version", choices=("0.1", "0.0"), default="0.1", help="the --lin-file's input scaling")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    f = subparsers.add_parser("fit-lin", help="fit LPIPS lin weights to the human answers of a 2AFC folder")
    f.add_argument("dir", help="the 2AFC folder")
    f.add_argument("--out", required=True, help="the lin weights file to write (.pth, the reference's layout)")
    f.add_argument("--net", choices=("alex", "vgg", "squeeze"), default="alex", help="backbone (default alex)")
    f.add_argument("--version", choices=("0.1", "0.0"), default="0.1", help="input scaling and published weights")
    f.add_argument("--per", choices=("layer", "channel"), default="layer",
                   help="one weight per layer, scaling the prior's channel weights (default: holds on a few hundred "
                        "answers), or one per channel (the paper's, for thousands)")
    f.add_argument("--prior", choices=("published", "uniform"), default="published",
                   help="the weights the fit starts from and is pulled toward (default: the published ones)")
    f.add_argument("--strength", type=_strength, default=0.1,
                   help="the pull toward the prior, strength·‖w − w0‖²/‖w0‖² (default 0.1; 0: none)")
    f.add_argument("--folds", type=_positive, default=5, help="cross-validation folds (default 5)")
    f.add_argument("--size", type=_positive, default=None, help="resize every image to N x N first")
    f.add_argument("--seed", type=int, default=0, help="the folds' and bootstrap's seed (default 0)")
    f.add_argument("--json", action="store_true", help="print the report as one JSON object")


def _distances(spec, model, data) -> tuple[list[float], list[float]]:
    """Per triplet ``d(ref, p0)`` and ``d(ref, p1)``: a learned metric through
    :func:`lpips_core.sweeps.metric_many` (the reference through the network once), a classic one
    on the ``[0, 1]`` images."""
    from .sweeps import metric_many
    from .twoafc import _array

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


def run_score(args: argparse.Namespace) -> dict:
    """``score-2afc DIR``: ``{"triplets", "skipped", "human_ceiling", "metrics": {name: {"score", "ci95"}}}``."""
    import numpy as np

    from . import twoafc
    from .model import LPIPS
    from .spec import MetricSpec, parse_specs

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
    from .cells import printable

    print(f"{out['triplets']} triplets in {printable(out['dir'])}"
          + (f"; {out['skipped_count']} incomplete left out" if out["skipped_count"] else ""))
    width = max([len("metric")] + [len(k) for k in out["metrics"]])
    print(f"{'metric':<{width}}  {'2AFC':>7}  95% CI")
    rows = list(out["metrics"].items()) + [("human ceiling", out["human_ceiling"])]
    for name, m in rows:
        lo, hi = m["ci95"]
        print(f"{name:<{width}}  {m['score']:>7.4f}  [{lo:.4f}, {hi:.4f}]")


def run_fit(args: argparse.Namespace) -> dict:
    """``fit-lin DIR --out FILE``: fit, cross-validate, write the weights; the report as a dict."""
    import time

    import numpy as np

    from . import files, twoafc
    from .backbones import LAYER_NAMES
    from .model import LPIPS
    from .spec import MetricSpec
    from .weights import lin_weights

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
    from .cells import printable

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


def run(args: argparse.Namespace) -> int:
    """Execute ``score-2afc`` or ``fit-lin``; 0, or 2 after one ``error: ...`` line on stderr."""
    from .datasets.cli import run_command

    def command(args):
        if args.command == "score-2afc":
            return run_score(args), print_score
        return run_fit(args), print_fit

    return run_command(args, command, also=(TypeError,))
