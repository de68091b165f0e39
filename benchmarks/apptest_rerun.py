"""How long the Distortion lab takes to answer one parameter change, against its floor.

Runs the real app headless (``streamlit.testing.v1.AppTest``) with the default reference (the
``chelsea`` sample at the 256 px working size) and the sidebar's AlexNet, opens the Distortion
lab, then moves the first step's blur sigma through several values and times each rerun. The
floor, measured in the same process: one bare backbone forward pass of the distorted image for
every network the lab evaluates (the reference's features are cached, so a parameter change
cannot cost less).

    python benchmarks/apptest_rerun.py [--json] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpips_explorer.distortions import gaussian_blur  # noqa: E402


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    cold = _timed(lambda: at.switch_page("app_pages/distortion_lab.py").run())
    if at.exception:
        raise SystemExit(f"the Distortion lab raised: {at.exception[0].value}")
    unchanged = _timed(at.run)
    sigmas = [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75][: args.repeat]
    reruns = [_timed(lambda s=s: at.slider(key="lab_0_sigma").set_value(s).run()) for s in sigmas]
    if at.exception:
        raise SystemExit(f"the Distortion lab raised: {at.exception[0].value}")

    # What the lab evaluated: the sidebar's metric on every available backbone plus the chosen extra metrics.
    from ui import state
    from ui.choices import DEFAULT_SPEC
    from ui.text import NET_LABELS
    from lpips_core.spec import parse_spec

    ref = at.session_state["ref_image"]
    evaluated = [s for s in (DEFAULT_SPEC.replace(net=n) for n in NET_LABELS) if s.availability()[0]]
    evaluated += [parse_spec(name) for name in at.session_state[state.EXTRA_METRICS]] \
        if state.EXTRA_METRICS in at.session_state else []
    dist = gaussian_blur(ref, sigmas[-1])
    floor_parts = {}
    with torch.inference_mode():
        for spec in evaluated:
            model = spec.build()
            x = spec.prepare(dist).to(model.device)
            model._stages(x)  # the network pass itself (input scaling and backbone), warmed once
            floor_parts[f"{spec.metric}-{spec.net}"] = statistics.median(_timed(lambda: model._stages(x))
                                                                         for _ in range(args.repeat))
    out = {
        "reference": f"{at.session_state['ref_name']} {ref.shape[0]}×{ref.shape[1]} px",
        "sidebar_net": at.session_state["net"],
        "evaluated": [f"{s.metric}-{s.net}" for s in evaluated],
        "cold_s": cold,
        "unchanged_rerun_s": unchanged,
        "rerun_s": statistics.median(reruns),
        "reruns_s": reruns,
        "floor_s": sum(floor_parts.values()),
        "floor_parts_s": floor_parts,
    }
    out["over_floor"] = out["rerun_s"] / out["floor_s"]
    if args.json:
        print(json.dumps(out))
    else:
        print(f"Distortion lab, {out['reference']}, evaluating {', '.join(out['evaluated'])}")
        print(f"  first render {cold:.2f} s · unchanged rerun {unchanged:.3f} s")
        print(f"  one parameter change: median {out['rerun_s']:.3f} s over {len(reruns)} "
              f"(floor {out['floor_s']:.3f} s = {', '.join(f'{k} {v:.3f}' for k, v in floor_parts.items())}; "
              f"{out['over_floor']:.2f}× the floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
