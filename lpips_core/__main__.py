"""Command line: ``python -m lpips_core compare A B [options]``.

Images are read as 8-bit RGB and scaled ``x / 255`` before the range convention applies.
Errors (missing file, unreadable image, size mismatch, missing weights) exit with status 2 and
one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .conventions import CONVENTIONS, RESIZE_METHODS


def _parse_size(text: str) -> int | tuple[int, int]:
    try:
        if "x" in text.lower():
            h, w = text.lower().split("x")
            return int(h), int(w)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size takes N or HxW, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lpips_core", description="Exact LPIPS distances.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="LPIPS distance between two images")
    cmp.add_argument("a", help="reference image file")
    cmp.add_argument("b", help="distorted image file")
    cmp.add_argument("--metric", default="lpips", choices=("lpips", "stlpips", "dists"),
                     help="LPIPS (default), shift-tolerant LPIPS or DISTS")
    cmp.add_argument("--net", default=None, choices=("alex", "vgg", "squeeze"),
                     help="backbone (default: alex; DISTS has vgg only)")
    cmp.add_argument("--version", default="0.1", choices=("0.1", "0.0"), help="LPIPS weights version")
    cmp.add_argument("--baseline", action="store_true", help="LPIPS uncalibrated: all channel weights 1")
    cmp.add_argument("--convention", default=None, choices=CONVENTIONS,
                     help="input range fed to the net (default: the metric's own: [-1,1], DISTS [0,1])")
    cmp.add_argument("--grayscale", action="store_true", help="feed the luma replicated to RGB")
    cmp.add_argument("--size", type=_parse_size, default=None, help="resize both to N×N (or HxW) first")
    cmp.add_argument("--resize-method", default="bilinear", choices=RESIZE_METHODS)
    cmp.add_argument("--device", default=None, help="cpu, cuda, mps (default: auto)")
    cmp.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _read(path: str):
    from .images import load_image

    return load_image(path).array


def compare_command(args: argparse.Namespace) -> dict:
    from . import metric_registry as registry

    info = registry.METRICS[args.metric]
    if args.metric != "lpips" and (args.baseline or args.version != "0.1"):
        raise ValueError(f"--baseline and --version apply to --metric lpips only, not {args.metric}")
    net = args.net or info.default_net
    if net not in info.nets:
        raise ValueError(f"{info.label} has no {net!r} network; choose one of {', '.join(info.nets)}")
    convention = args.convention or registry.correct_convention(args.metric)

    a, b = _read(args.a), _read(args.b)
    if args.size is None and a.shape != b.shape:
        raise ValueError(
            f"the images differ in size ({a.shape[1]}×{a.shape[0]} and {b.shape[1]}×{b.shape[0]} px); "
            "pass --size N to resize both"
        )
    if args.metric == "lpips":
        from .model import LPIPS

        model = LPIPS(net, args.version, lin=not args.baseline, device=args.device)
    else:
        model = registry.build(args.metric, net, device=args.device)
    opts = dict(convention=convention, size=args.size, grayscale=args.grayscale, method=args.resize_method)
    x, y = registry.prepare_input(args.metric, a, **opts), registry.prepare_input(args.metric, b, **opts)
    out: dict = {"metric": args.metric}
    if args.metric == "dists":
        res = model.compare(x, y)
        out.update(
            distance=float(res.total[0]),
            per_layer=[float(v) for v in res.per_stage[0]],
            layers=list(res.stage_names),
            texture=[float(v) for v in res.texture[0]],
            structure=[float(v) for v in res.structure[0]],
        )
    else:
        res = model.compare(x, y, spatial=False)
        out.update(distance=float(res.total[0]), per_layer=[float(v) for v in res.per_layer[0]],
                   layers=list(res.layer_names))
    if args.metric == "lpips":
        out["lpips"] = out["distance"]
    out.update(
        net=net,
        version=args.version if args.metric == "lpips" else getattr(model, "version", None),
        lin=not args.baseline,
        convention=convention,
        size=[int(x.shape[-2]), int(x.shape[-1])],
        weights=model.weights,
        device=str(model.device),
    )
    return out


def _print_table(out: dict) -> None:
    names = {"lpips": "LPIPS", "stlpips": "ST-LPIPS", "dists": "DISTS"}
    kind = "" if out["metric"] == "dists" else (", lin" if out["lin"] else ", baseline")
    version = f", v{out['version']}" if out.get("version") else ""
    h, w = out["size"]
    print(f"{names[out['metric']]} {out['distance']:.6f}   ({out['net']}{version}{kind}, "
          f"input {out['convention']}, {h}×{w} px, {out['device']})")
    total = out["distance"] or 1.0
    print(f"  {'layer':<9}{'term':>10}{'share':>9}")
    for name, v in zip(out["layers"], out["per_layer"]):
        print(f"  {name:<9}{v:>10.6f}{100 * v / total:>8.1f}%")
    print(f"weights: {out['weights']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .weights import WeightsUnavailable

    try:
        out = compare_command(args)
    except (ValueError, OSError, WeightsUnavailable) as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
