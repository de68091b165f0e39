"""What "LPIPS as a loss" costs at its CPU defaults: each loss's time per step, and each experiment's
wall time with every loss on the same number of steps.

The defaults (:func:`lpips_explorer.loss_lab.defaults`) are sized so that each experiment finishes
within 60 s on the project's 2-core CPU with every loss (every attacked metric) on the same
number of steps. This script measures, in the process's default torch threads (the app's server
runs so):

- ``blur_step``: per loss of "Why MSE training blurs" (MSE, LPIPS-AlexNet, LPIPS-VGG16,
  ST-LPIPS-AlexNet, DISTS), one Adam step's forward and backward at the default size against the
  default number of copies, best of ``--repeat`` after one warm-up step; ``blur_setup``: the
  features of the fixed copies.
- ``fooling_step``: per metric of "Fooling the metric" (LPIPS-VGG16, LPIPS-AlexNet, ELPIPS on
  VGG16), one step's distance and gradient at the default size, best of ``--repeat``.
- ``blur_wall`` and ``fooling_wall``: each experiment run whole at the defaults (no time limit),
  with the steps each loss took, its loss at the first and last step and its sharpness (blur),
  or its ratio (fooling).

Results go to ``benchmarks/results/loss_lab-<host>.json`` (``--out``) and a table is printed.

    .venv/bin/python benchmarks/loss_lab.py [--repeat 5] [--image chelsea] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import host_tag, machine_info  # noqa: E402  (benchmarks/machine.py)

from lpips_core import LPIPS, metric_registry  # noqa: E402
from lpips_core.elpips import ELPIPS  # noqa: E402
from lpips_core.images import load_image  # noqa: E402
from lpips_explorer import loss_lab  # noqa: E402

SAMPLES = HERE.parent / "sample_images"


def _best(fn, repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def blur_costs(image, models: dict, d: dict, repeat: int) -> dict:
    """Set-up and best step time per loss at the blur experiment's settings ``d``."""
    _, stack, _ = loss_lab.shifted_copies(image, size=d["size"], copies=d["copies"], max_shift=d["max_shift"], seed=0)
    targets = torch.from_numpy(stack).permute(0, 3, 1, 2).contiguous()
    x = targets[:1].clone().requires_grad_(True)
    out = {"MSE": {"setup_s": 0.0, "step_s": _best(lambda: ((x - targets) ** 2).mean().backward(), repeat)}}
    for label, model in models.items():
        t0 = time.perf_counter()
        loss = loss_lab._distance_to(model, targets)
        setup = time.perf_counter() - t0
        out[label] = {"setup_s": setup, "step_s": _best(lambda: loss(x).mean().backward(), repeat)}
    return out


def fooling_costs(source, models: dict, d: dict, repeat: int) -> dict:
    """Best step time (distance and gradient) per metric at the fooling experiment's settings ``d``."""
    src = loss_lab._square(source, d["size"])
    out = {}
    for label, model in models.items():
        dist = loss_lab._distance_to(model, src)
        x = (src * 0.9 + 0.05).clone()

        def step():
            xg = x.clone().requires_grad_(True)
            torch.autograd.grad(dist(xg).mean(), xg)
        out[label] = {"step_s": _best(step, repeat)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--image", default="chelsea", help="sample image (the app's default reference)")
    ap.add_argument("--target", default="coffee", help="the fooling experiment's target sample")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    image = load_image(SAMPLES / f"{args.image}.png", max_side=256).array
    target = load_image(SAMPLES / f"{args.target}.png", max_side=256).array
    d = loss_lab.defaults("cpu")
    vgg = LPIPS("vgg")
    blur_models = {"LPIPS · AlexNet": LPIPS("alex"), "LPIPS · VGG16": vgg,
                   "ST-LPIPS · AlexNet": metric_registry.build("stlpips", "alex"),
                   "DISTS · VGG16": metric_registry.build("dists")}
    fool_models = {"LPIPS · VGG16": vgg, "LPIPS · AlexNet": blur_models["LPIPS · AlexNet"],
                   "ELPIPS": ELPIPS(vgg, seed=0)}
    result = {"machine": machine_info(), "threads": torch.get_num_threads(), "defaults": d,
              "blur_step": blur_costs(image, blur_models, d["blur"], args.repeat),
              "fooling_step": fooling_costs(image, fool_models, d["fooling"], args.repeat)}

    t0 = time.perf_counter()
    blur = loss_lab.mse_blur_experiment(image, blur_models, **{**d["blur"], "max_seconds": None})
    result["blur_wall"] = {"seconds": time.perf_counter() - t0, "runs": {
        k: {"steps": r.steps, "first": r.losses[0], "last": r.losses[-1], "sharpness": r.sharpness}
        for k, r in blur.runs.items()}}
    t0 = time.perf_counter()
    fool = loss_lab.fooling_experiment(image, target, fool_models, **{**d["fooling"], "max_seconds": None})
    result["fooling_wall"] = {"seconds": time.perf_counter() - t0, "runs": {
        k: {"steps": r.steps, "ratio": r.ratio, "distance": r.distance} for k, r in fool.runs.items()}}

    print(f"host {result['machine']['host']}, {result['threads']} torch threads")
    print(f"blur at {d['blur']['size']} px, {d['blur']['copies']} copies, {d['blur']['steps']} steps per loss:")
    for k, c in result["blur_step"].items():
        r = result["blur_wall"]["runs"][k]
        print(f"  {k:20s} set-up {c['setup_s']:6.2f} s  step {c['step_s'] * 1000:7.1f} ms  "
              f"loss {r['first']:.4f} -> {r['last']:.4f} ({r['last'] / r['first']:.3f})  "
              f"sharpness {r['sharpness']:.3g}")
    print(f"  whole experiment: {result['blur_wall']['seconds']:.1f} s")
    print(f"fooling at {d['fooling']['size']} px, {d['fooling']['steps']} steps per metric:")
    for k, c in result["fooling_step"].items():
        r = result["fooling_wall"]["runs"][k]
        print(f"  {k:20s} step {c['step_s'] * 1000:7.1f} ms  ratio {r['ratio']:.2f}")
    print(f"  whole experiment: {result['fooling_wall']['seconds']:.1f} s")
    out = args.out or HERE / "results" / f"loss_lab-{result['machine']['host']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
