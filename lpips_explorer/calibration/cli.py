"""``python -m lpips_explorer.calibration``: the mechanics table and the toy 2AFC as text or JSON.

Every argument is checked before any work starts. A bad one (a non-number, a value outside its
range) ends the run with exit status 2 and a single line on stderr starting with ``error:``,
never a traceback; so does a failure during the run. The ranges:

* ``--nets``: 1 to :data:`MAX_NETS` stand-ins (the time grows with each, and with the triplets);
* ``--triplets``: 1 to :data:`MAX_TRIPLETS` training and test triplets each (memory grows by
  about 1.6 MB per triplet; about 4 GB at the cap);
* ``--steps``: 0 to :data:`MAX_STEPS` Adam steps of the lin fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Mapping, Sequence

from lpips_core.spec import MetricSpec
from lpips_core.weights import WeightsUnavailable
from lpips_explorer.calibration.patch_mechanics import Mechanics, mechanics
from lpips_explorer.calibration.real import REAL_NETS, RealLPIPSResult, real_lpips_2afc
from lpips_explorer.calibration.triplets import make_triplets
from lpips_explorer.calibration.twoafc import DEFAULT_NET_SEEDS, Accuracy, TwoAFCResult, run_2afc

__all__ = ["MAX_NETS", "MAX_STEPS", "MAX_TRIPLETS", "build_parser", "main", "payload"]

#: Most stand-in networks one run may ask for.
MAX_NETS = 32
#: Most training (and test) triplets one run may ask for: about 4 GB of memory.
MAX_TRIPLETS = 2_000
#: Most Adam steps of the lin fit.
MAX_STEPS = 10_000
#: The reference example's triplets (training and test each) and fitting steps.
DEFAULT_TRIPLETS = 600
DEFAULT_STEPS = 300
#: Seed of the test triplets (:func:`run_2afc`'s default), drawn here once for ``--real``.
TEST_SEED = 2
#: Exit status of a refused argument or a failed run.
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (``error: …``) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see --help)\n")


def _bounded(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number from {lo} to {hi:,}; got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo} to {hi:,}; got {value:,}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser (ranges checked while parsing)."""
    parser = _Parser(
        prog="python -m lpips_explorer.calibration",
        description="Random-feature stand-in for LPIPS: mechanics table and toy 2AFC with fitted 'lin' weights "
                    "(the reference example's settings unless changed).",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--nets", type=_bounded(1, MAX_NETS), default=len(DEFAULT_NET_SEEDS),
                        help=f"number of stand-ins, seeds 0..n-1 (1 to {MAX_NETS}; default %(default)s)")
    parser.add_argument("--triplets", type=_bounded(1, MAX_TRIPLETS), default=DEFAULT_TRIPLETS,
                        help=f"training and test triplets each (1 to {MAX_TRIPLETS:,}, about 1.6 MB of memory "
                             "each; default %(default)s)")
    parser.add_argument("--steps", type=_bounded(0, MAX_STEPS), default=DEFAULT_STEPS,
                        help=f"Adam steps of the lin fit (0 to {MAX_STEPS:,}; default %(default)s)")
    parser.add_argument("--real", action="store_true",
                        help="also score the test triplets with the real AlexNet and VGG16 LPIPS (if available)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def _format_tables(mech: Mechanics, afc: TwoAFCResult, real: Mapping[str, RealLPIPSResult] | None) -> str:
    q = mech.quadrant
    size = mech.patch.shape[0]
    lines = [
        f"w = 1, layer 3: max |sum_c (a-b)^2 - (2 - 2 cos)| = {mech.cosine_gap:.1e}",
        f"noise in the top-left quadrant only: scalar {q.scalar:.4f}, mean of spatial map {q.map_mean:.4f}, "
        f"share of the map in that quadrant {q.share:.2f}",
        "",
        f"{'distortion':16s} {'MSE':>8s} {'[-1,1]':>8s} {'[0,1]':>8s} {f'{2 * size}x{2 * size}':>8s}",
    ]
    for name, row in mech.rows.items():
        lines.append(f"{name:16s} {row.mse:8.5f} {row.minus1_1:8.4f} {row.zero_one:8.4f} {row.up2x:8.4f}")
    rows: dict[str, Accuracy | None] = dict(afc.rows())
    for res in (real or {}).values():
        rows.update(res.rows() if res.available else {f"{res.label}: unavailable ({res.note})": None})
    width = max([26] + [len(name) for name, acc in rows.items() if acc is not None])
    title = f"2AFC on {afc.settings['n_test']} test triplets"
    lines += ["", f"{title:{width}s} {'all':>6s} {'noise':>6s} {'DCT':>6s}"]
    for name, acc in rows.items():
        lines.append(name if acc is None else f"{name:{width}s} {acc.all:6.3f} {acc.noise:6.3f} {acc.dct:6.3f}")
    return "\n".join(lines)


def payload(mech: Mechanics, afc: TwoAFCResult, real: Mapping[str, RealLPIPSResult] | None) -> dict[str, Any]:
    """The ``--json`` object: ``mechanics``, ``twoafc``, ``checks`` and, with ``real``, ``real_lpips``."""
    out: dict[str, Any] = {
        "mechanics": mech.as_dict(),
        "twoafc": afc.as_dict(),
        "checks": {
            "cosine_gap": mech.cosine_gap,
            "quadrant": {"scalar": mech.quadrant.scalar, "map_mean": mech.quadrant.map_mean,
                         "share": mech.quadrant.share},
        },
    }
    if real is not None:
        out["real_lpips"] = {
            net: ({"baseline": r.baseline.as_dict(), "lin": r.lin.as_dict() if r.lin else None, "note": r.note}
                  if r.available else {"unavailable": r.note})
            for net, r in real.items()
        }
    return out


def _real_models(nets: Sequence[str]) -> tuple[dict[MetricSpec, Any], dict[str, RealLPIPSResult]]:
    """The LPIPS models of ``nets`` (v0.1, lin), built here, and a result for each whose weights
    are unavailable (the reason in its note)."""
    models, unavailable = {}, {}
    for net in nets:
        spec = MetricSpec("lpips", net=net)
        try:
            models[spec] = spec.build()
        except WeightsUnavailable as exc:
            unavailable[net] = RealLPIPSResult(net, spec.version, None, None, str(exc))
    return models, unavailable


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    args = build_parser().parse_args(argv)
    shown = False

    def progress(what: str):
        def show(done: float, total: float) -> None:
            nonlocal shown
            if not args.quiet:
                shown = True
                print(f"\r[{done / total if total else 1.0:6.1%}] {what:40.40s}", end="", file=sys.stderr, flush=True)
        return show

    try:
        mech = mechanics()
        test = make_triplets(args.triplets, TEST_SEED) if args.real else None
        afc = run_2afc(net_seeds=tuple(range(args.nets)), n_train=args.triplets, n_test=args.triplets,
                       steps=args.steps, test=test, progress=progress("toy 2AFC"))
        real = None
        if test is not None:
            models, real = _real_models(REAL_NETS)
            real.update(real_lpips_2afc(test, models, progress=progress("real LPIPS")))
            real = {net: real[net] for net in REAL_NETS}
    except (ValueError, TypeError, RuntimeError, MemoryError, OSError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(("\n" if shown else "") + f"error: {type(exc).__name__}: {message}", file=sys.stderr)
        return EXIT_USAGE
    if shown:
        print(file=sys.stderr)
    print(json.dumps(payload(mech, afc, real)) if args.json else _format_tables(mech, afc, real))
    return 0
