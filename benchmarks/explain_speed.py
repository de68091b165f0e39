"""How long explain takes on 12 pairs of 256 px: the number a paper would report, searched under
every configuration its name allows, raced and in full.

The pairs are the demo set's photos at 256 px against their blur (12 pairs); the reported value
is their mean under LPIPS · VGG16 (v0.1, lin, [-1,1]), the configuration a paper most likely used,
and the name is "LPIPS (VGG)" (72 configurations: 24 VGG16 passes per image) or
"LPIPS (AlexNet)". Run it on an idle machine: wall time on a CPU is shared with whatever else runs.

``--way`` picks how the pairs are scored: ``cli`` (the command's default: lanes that are forked
processes), ``app`` (the app's page: lanes that are threads of its server process, as many as
:func:`lpips_explorer.runtime.jobs.server_scoring` sets) or ``one-process`` (no lanes: one process
on torch's threads, how the page ran before its lanes).

``--side 96`` is the page's own case: its built-in demo set is 96 px, and the page's default sizes
(native, 64, 256) are explain's.

    python benchmarks/explain_speed.py [--nets vgg,alex] [--way cli,app] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpips_core.datasets import match_folders, parse_spec, score_pairs  # noqa: E402
from lpips_core.datasets.explain import explain  # noqa: E402
from lpips_explorer.demo_dataset import make_demo  # noqa: E402
from machine import machine_info  # noqa: E402  (benchmarks/machine.py, beside this file)

NAMES = {"vgg": "LPIPS (VGG)", "alex": "LPIPS (AlexNet)"}


def _ways() -> dict[str, dict]:
    from lpips_explorer.runtime.jobs import server_scoring

    return {"cli": {}, "app": server_scoring(), "one-process": dict(workers=0)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="vgg,alex")
    p.add_argument("--way", default="cli", help="comma-separated: cli, app, one-process (see above)")
    p.add_argument("--side", type=int, default=256, help="the demo set's image side (256; the page's set: 96)")
    p.add_argument("--sizes", default=None,
                   help="comma-separated sizes to search, 'native' for the images' own (default: explain's)")
    p.add_argument("--repeat", type=int, default=1, help="runs per mode (median)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    ways = _ways()
    chosen = [w for w in args.way.split(",") if w]
    if not chosen or any(w not in ways for w in chosen):
        p.error(f"--way takes {', '.join(ways)}, got {args.way!r}")
    sizes = None if args.sizes is None else [None if v == "native" else int(v) for v in args.sizes.split(",") if v]
    search = {} if sizes is None else {"sizes": sizes}
    out = {"machine": machine_info(), "side": args.side, "sizes": args.sizes, "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        demo = make_demo(Path(tmp) / "demo", side=args.side, per_image=2)
        disc = match_folders(demo.reference, demo.methods["A-blur"])
        for net in args.nets.split(","):
            spec = parse_spec(f"lpips-{net}").name
            reported = score_pairs(disc, [spec]).summary["metrics"][spec]["mean"]
            for way in chosen:
                for race in (True, False):
                    times, ex = [], None
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        ex = explain(disc, reported, name=NAMES[net], race=race, **search, **ways[way])
                        times.append(time.perf_counter() - t0)
                    case = {"net": net, "name": NAMES[net], "way": way, "pairs": ex.pairs, "reported": reported,
                            "raced": race, "seconds": statistics.median(times), "runs": times,
                            "verdict": ex.verdict, "first": ex.candidates[0].spec.name, "race": ex.race}
                    out["cases"].append(case)
                    print(f"{NAMES[net]} {way} {'raced' if race else 'full'}: {case['seconds']:.1f} s "
                          f"(runs {', '.join(f'{t:.1f}' for t in times)}; passes {ex.race['passes']} of "
                          f"{ex.race['passes_full']}), first {case['first']}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
