"""``python -m lpips_core compare A B``: the distance between two images, its per-layer terms and
where the weights came from (the same computation as :func:`lpips_core.distance`).

Both paths must be regular files, checked before anything is read or built
(:func:`lpips_core.images.check_file`); images of different sizes need ``--size``.
"""

from __future__ import annotations

import argparse

from ..cells import printable
from ..conventions import RESIZE_METHODS
from .options import COMPARE_WORDS, add_device, add_json, add_metric_options
from .run import run_command


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare", help="LPIPS distance between two images")
    p.add_argument("a", help="reference image file")
    p.add_argument("b", help="distorted image file")
    add_metric_options(p, COMPARE_WORDS)
    p.add_argument("--resize-method", default="bilinear", choices=RESIZE_METHODS)
    add_device(p, where_available=True)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """Execute ``compare``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, _command)


def _command(args: argparse.Namespace):
    from ..images import check_file

    for path in (args.a, args.b):
        check_file(path)  # both refused or accepted before anything is read or built
    return compare_command(args), print_table


def _read(path: str):
    """The image at ``path`` as ``(H, W, 3)`` float32 in ``[0, 1]`` (raises ``ImageLoadError``)."""
    from ..images import load_image

    return load_image(path).array


def compare_command(args: argparse.Namespace) -> dict:
    """``compare``'s result as a dict: ``{"metric", "distance", <metric>, "per_layer", "layers", <components>,
    "net", "version", "lin", "convention", "size": [H, W], "weights", "device"}``."""
    from ..api import compare_images, model_for
    from ..spec import MetricSpec

    spec = MetricSpec(args.metric, net=args.net, version=args.version, lin=not args.baseline,
                      convention=args.convention, grayscale=args.grayscale, size=args.size)
    a, b = _read(args.a), _read(args.b)
    if args.size is None and a.shape != b.shape:
        raise ValueError(
            f"the images differ in size ({a.shape[1]}×{a.shape[0]} and {b.shape[1]}×{b.shape[0]} px, width×height); "
            "pass --size N to resize both"
        )
    model = model_for(spec, args.device)
    res = compare_images(spec, a, b, model=model, method=args.resize_method)
    h, w = (a.shape[0], a.shape[1]) if spec.size is None else \
        ((spec.size, spec.size) if isinstance(spec.size, int) else spec.size)
    out: dict = {
        "metric": args.metric,
        "distance": float(res),
        args.metric: float(res),
        "per_layer": [float(v) for v in res.per_layer[0]],
        "layers": list(res.layer_names),
    }
    out.update({name: [float(v) for v in part[0]] for name, part in res.components.items()})
    out.update(
        net=spec.net,
        version=model.version,
        lin=getattr(model, "lin", True),
        convention=spec.convention,
        size=[int(h), int(w)],
        weights=model.weights,
        device=str(model.device),
    )
    return out


def print_table(out: dict) -> None:
    """The distance, its configuration, and each layer's term and share of the total."""
    from ..metric_registry import METRICS

    info = METRICS[out["metric"]]
    kind = (", lin" if out["lin"] else ", baseline") if info.has_baseline or info.has_maps else ""
    version = f", v{out['version']}" if out.get("version") else ""
    h, w = out["size"]
    print(f"{info.label} {out['distance']:.6f}   ({out['net']}{version}{kind}, "
          f"input {out['convention']}, {h}×{w} px, {out['device']})")
    total = out["distance"] or 1.0
    print(f"  {'layer':<9}{'term':>10}{'share':>9}")
    for name, v in zip(out["layers"], out["per_layer"]):
        print(f"  {name:<9}{v:>10.6f}{100 * v / total:>8.1f}%")
    print(f"weights: {printable(out['weights'])}")
