"""``python -m lpips_core explain REFERENCE_DIR TEST_DIR --reported X``: which configuration
reproduces a reported dataset mean (:func:`lpips_core.datasets.explain.explain`).

::

    python -m lpips_core explain REFERENCE_DIR TEST_DIR --reported 0.109 [--name "LPIPS (VGG)"] [--size 128] [--all]

The progress bar counts pair × configuration scores, with the configurations left.
"""

from __future__ import annotations

import argparse

from .options import add_folders, add_lanes, add_pair_options, add_sample, finite, positive, side
from .run import Bar, fmt, run_command, say
from .score import folder_pairs


def add_parser(subparsers) -> None:
    e = subparsers.add_parser("explain", help="which configuration reproduces a reported dataset mean")
    add_folders(e)
    e.add_argument("--reported", type=finite, required=True, help="the reported mean, e.g. 0.109")
    e.add_argument("--name", default=None, help='the metric as the paper wrote it, e.g. "LPIPS (VGG)": '
                   "the search is narrowed to what it says (backbone, version, baseline)")
    e.add_argument("--all", action="store_true", help="search every configuration on every pair (no race); "
                   "--name only marks matches")
    e.add_argument("--no-race", action="store_true", help="score every configuration of the search on every pair "
                   "(exact, slower); by default configurations that cannot reach --reported drop out as the pairs "
                   "come in, the first --top rows and the verdict staying those of the full search")
    e.add_argument("--nets", default=None, help="comma-separated backbones to try (default: what --name says, "
                   "else all available)")
    e.add_argument("--size", type=side, default=None, help="one more size to try besides native, 64 and 256")
    add_sample(e, "use a seeded random sample of K pairs")
    e.add_argument("--top", type=positive, default=10, help="how many configurations to show (default 10)")
    add_lanes(e, capped=False)
    add_pair_options(e, lanes=False)


def run(args: argparse.Namespace) -> int:
    """Execute ``explain``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (explain_command(a), print_explain))


def explain_command(args: argparse.Namespace) -> dict:
    """The search's result as ``--json`` prints it (:meth:`~lpips_core.datasets.explain.ExplainResult.to_json`,
    the first ``--top`` candidates)."""
    from ..datasets.explain import explain  # looked up at each call (tests swap in a smaller search)

    disc = folder_pairs(args)
    nets = None if args.nets is None else [n.strip() for n in args.nets.split(",") if n.strip()]
    bar = Bar("explain", unit="score")
    try:
        res = explain(disc, args.reported, name=args.name, use_name=not args.all, nets=nets, extra_size=args.size,
                      mismatch=args.mismatch, sample=args.sample, seed=args.seed, batch_size=args.batch_size,
                      workers=args.workers, lanes=args.lanes, device=args.device, progress=bar,
                      race=not (args.all or args.no_race), exact_rows=args.top, status=bar.status)
    finally:
        bar.close()
    return res.to_json(top=args.top)


def _print_search(out: dict) -> None:
    """The header: the reported value, what the name says, what was searched."""
    from ..datasets.explain import describe_hints

    say(f"reported {out['reported']:g}" + (f" ({out['name']})" if out["name"] else "") + f"; {out['pairs']} pairs")
    if out["name"]:
        how = "searched only that" if out["searched"].get("narrowed_by_name") else "used to mark matches (m)"
        say(f"the name says: {describe_hints(out['hints'])}; {how} (--all searches everything)")
    s = out["searched"]
    say(f"searched: {', '.join(s['nets'])} x v{'/'.join(s['versions'])} x "
        f"{'/'.join('lin' if x else 'baseline' for x in s['lin'])} x {'/'.join(s['conventions'])} x "
        f"{'colour/gray' if len(s['grayscale']) == 2 else ('gray' if s['grayscale'][0] else 'colour')} x "
        f"{'/'.join(s['sizes'])}; closest first")


def _print_candidates(out: dict) -> None:
    """One row per configuration, closest first, with the marks' legend."""
    cands = out["candidates"]
    width = max([len("configuration")] + [len(c["config"]) for c in cands])
    say(f"  {'configuration':<{width}}  {'mean':>10}  {'std':>10}  {'95% CI':>22}  {'|Δ|':>9}  {'z':>7}")
    for c in cands:
        lo, hi = c["ci95"]
        ci = f"[{fmt(lo)}, {fmt(hi)}]"
        z = "—" if c["z"] is None else f"{c['z']:.2f}"
        mark = ("*" if c["holds_reported"] else " " if c.get("complete", True) else "~") + \
            ("m" if c["matches_name"] else " ")
        dropped = "" if c.get("complete", True) else f"  (dropped after {c['n']} of {out['pairs']} pairs)"
        say(f"{mark}{c['config']:<{width}}  {fmt(c['mean']):>10}  {fmt(c['std']):>10}  {ci:>22}  "
            f"{c['distance']:>9.2g}  {z:>7}{dropped}")
        for other in c["same"][1:]:
            say(f"   = {other} (the same values on this data)")
    say("*: the 95% CI of the mean holds the reported value; m: matches the name; "
        "z: standard errors from the reported value"
        + ("; ~: dropped by the race (its values over the pairs it scored)"
           if any(not c.get("complete", True) for c in cands) else ""))


def print_explain(out: dict) -> None:
    """The search, the candidates, the verdict's sentence, how the race went, what was not tried or skipped."""
    _print_search(out)
    _print_candidates(out)
    say(out["sentence"])
    race = out.get("race") or {}
    if race.get("raced"):
        say(f"raced: {race['dropped']} of {race['configurations']} configurations dropped out"
            + (f" ({race['finished']} more sent back by the check and finished)" if race["finished"] else "")
            + f"; {race['passes']} of {race['passes_full']} pair passes run; the first {race['exact_rows']} rows "
            "and the verdict are the full search's (--no-race: every configuration on every pair)")
    if out["unavailable"]:
        say("not tried: " + "; ".join(f"{k} ({v})" for k, v in out["unavailable"].items()))
    if out["skipped"]:
        say("skipped: " + ", ".join(f"{k} {v}" for k, v in out["skipped"].items()))
