"""Command line: ``python -m lpips_core compare A B [options]`` (and ``score``, ``diversity``, ``explain``,
``merge``, ``neighbours``, ``embed``, ``score-2afc``, ``fit-lin``).

Images are read as 8-bit RGB and scaled ``x / 255`` before the range convention applies.
Errors (missing file, unreadable image, size mismatch, missing weights) exit with status 2 and
one line on stderr, ``error: ...``, never a traceback. What can be checked is checked before
any image is read or any model is built: both paths must be regular files (a directory, FIFO,
device such as ``/dev/zero`` or socket is refused unread, see
:func:`lpips_core.images.check_file`); ``--size`` takes sides from 1 to :data:`MAX_SIZE`
(2048 px, the loader's own ``max_side``: a VGG16 forward pass at 2048 x 2048 already holds
gigabytes of activations); ``--device`` must exist on this machine (``cpu``, ``cuda[:N]``,
``mps``). Usage errors are one line too, and any unexpected failure still ends as one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .cells import one_line, printable
from .conventions import CONVENTIONS, RESIZE_METHODS
from .images import DEFAULT_MAX_SIDE
from .metric_registry import METRICS, NET_LABELS
from .weights import VERSIONS

MAX_SIZE: int = DEFAULT_MAX_SIDE
"""Largest side ``--size`` accepts, in pixels (2048, as :func:`lpips_core.images.load_image`)."""


class _OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, ``error: ...``, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {one_line(message)} (see {self.prog} --help)\n")


def _parse_size(text: str) -> int | tuple[int, int]:
    """``"N"`` → ``N``; ``"HxW"`` → ``(H, W)``; every side an integer in ``[1, MAX_SIZE]``."""
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"expected N or HxW, got {text!r}")
    if not all(1 <= p <= MAX_SIZE for p in parts):
        raise argparse.ArgumentTypeError(f"sides must be from 1 to {MAX_SIZE} px, got {text!r}")
    return parts[0] if len(parts) == 1 else (parts[0], parts[1])


def _parse_device(text: str) -> str:
    """A device that exists here (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``), else a usage error."""
    import torch

    from .protocol import resolve_device

    try:
        dev = resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(
            f"device {text!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m lpips_core", description="Exact LPIPS distances.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="LPIPS distance between two images")
    cmp.add_argument("a", help="reference image file")
    cmp.add_argument("b", help="distorted image file")
    cmp.add_argument("--metric", default="lpips", choices=tuple(METRICS),
                     help="LPIPS (default), shift-tolerant LPIPS or DISTS")
    cmp.add_argument("--net", default=None, choices=tuple(NET_LABELS),
                     help="backbone (default: alex; DISTS has vgg only)")
    cmp.add_argument("--version", default=None, choices=VERSIONS, help="LPIPS weights version (default 0.1)")
    cmp.add_argument("--baseline", action="store_true", help="LPIPS uncalibrated: all channel weights 1")
    cmp.add_argument("--convention", default=None, choices=CONVENTIONS,
                     help="input range fed to the net (default: the metric's own: [-1,1], DISTS [0,1])")
    cmp.add_argument("--grayscale", action="store_true", help="feed the luma replicated to RGB")
    cmp.add_argument("--size", type=_parse_size, default=None,
                     help=f"resize both to N×N (or HxW) first; sides from 1 to {MAX_SIZE} px")
    cmp.add_argument("--resize-method", default="bilinear", choices=RESIZE_METHODS)
    cmp.add_argument("--device", type=_parse_device, default=None,
                     help="cpu, cuda, cuda:N or mps, where available (default: auto)")
    cmp.add_argument("--json", action="store_true", help="print one JSON object")
    from .datasets.cli import add_parsers  # score, diversity, explain, merge

    add_parsers(sub)
    from .space_cli import add_parsers as add_space_parsers  # neighbours, embed

    add_space_parsers(sub)
    from .twoafc_cli import add_parsers as add_twoafc_parsers  # score-2afc, fit-lin

    add_twoafc_parsers(sub)
    return parser


def _read(path: str):
    """The image at ``path`` as ``(H, W, 3)`` float32 in ``[0, 1]`` (raises ``ImageLoadError``)."""
    from .images import load_image

    return load_image(path).array


def _fail(message: str) -> int:
    """One ``error: ...`` line on stderr (:func:`~lpips_core.cells.one_line`); returns 2."""
    print("error: " + one_line(message), file=sys.stderr)
    return 2


def compare_command(args: argparse.Namespace) -> dict:
    """``compare``'s result as a dict; the same computation as :func:`lpips_core.distance`."""
    from .api import compare_images, model_for
    from .spec import MetricSpec

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


def _print_table(out: dict) -> None:
    from .metric_registry import METRICS

    info = METRICS[out["metric"]]
    kind = (", lin" if out["lin"] else ", baseline") if info.has_baseline or info.per_layer else ""
    version = f", v{out['version']}" if out.get("version") else ""
    h, w = out["size"]
    print(f"{info.label} {out['distance']:.6f}   ({out['net']}{version}{kind}, "
          f"input {out['convention']}, {h}×{w} px, {out['device']})")
    total = out["distance"] or 1.0
    print(f"  {'layer':<9}{'term':>10}{'share':>9}")
    for name, v in zip(out["layers"], out["per_layer"]):
        print(f"  {name:<9}{v:>10.6f}{100 * v / total:>8.1f}%")
    print(f"weights: {printable(out['weights'])}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0, or 2 after one ``error: ...`` line on stderr).

    Usage errors (argparse, ``--size``, ``--device``) exit 2 from the parser with one line.
    """
    args = build_parser().parse_args(argv)
    from .datasets import cli as datasets_cli

    if args.command in datasets_cli.COMMANDS:
        return datasets_cli.run(args)
    from . import space_cli

    if args.command in space_cli.SPACE_COMMANDS:
        return space_cli.run(args)
    from . import twoafc_cli

    if args.command in twoafc_cli.TWOAFC_COMMANDS:
        return twoafc_cli.run(args)
    from .images import check_file
    from .weights import WeightsUnavailable

    try:
        for path in (args.a, args.b):
            check_file(path)  # both refused or accepted before anything is read or built
        out = compare_command(args)
        text = json.dumps(out) if args.json else None
    except (ValueError, OSError, WeightsUnavailable) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except Exception as exc:  # noqa: BLE001 - anything else still ends as one line, never a traceback
        return _fail(f"unexpected {type(exc).__name__}" + (f": {exc}" if str(exc) else ""))
    if text is not None:
        print(text)
    else:
        _print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
