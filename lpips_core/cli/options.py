"""The command line's one set of option validators and option builders, and its one-line parser.

Validators are ``argparse`` types: each turns the option's text into its value, or raises
``argparse.ArgumentTypeError`` with a one-line reason that :class:`OneLineParser` prints as
``error: argument --x: <reason> (see PROG --help)``, exit status 2. Builders add a group of
options to a subcommand's parser; the metric options are declared once
(:func:`add_metric_options`), each family of commands giving their wording (:class:`MetricWords`).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, Callable

from ..cells import one_line
from ..conventions import CONVENTIONS
from ..images import DEFAULT_MAX_SIDE
from ..metric_registry import METRICS, NET_LABELS
from ..weights import VERSIONS

MAX_SIZE: int = DEFAULT_MAX_SIDE
"""Largest side ``--size`` accepts, in pixels (2048, as :func:`lpips_core.images.load_image`)."""
DEFAULT_METRIC = "lpips"
"""The metric a command computes when ``--metric`` is not given."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, ``error: ...``, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {one_line(message)} (see {self.prog} --help)\n")


# --------------------------------------------------------------------------- validators
def _sides(text: str, *, hw: bool) -> int | tuple[int, int]:
    """``"N"`` → ``N``; with ``hw`` also ``"HxW"`` → ``(H, W)``; every side an integer in ``[1, MAX_SIZE]``."""
    try:
        parts = [int(p) for p in (text.lower().split("x") if hw else [text])]
    except ValueError:
        parts = []
    if len(parts) not in ((1, 2) if hw else (1,)):
        raise argparse.ArgumentTypeError(f"expected N or HxW, got {text!r}" if hw
                                         else f"expected a side in pixels, got {text!r}")
    if not all(1 <= p <= MAX_SIZE for p in parts):
        raise argparse.ArgumentTypeError(f"sides must be from 1 to {MAX_SIZE} px, got {text!r}")
    return parts[0] if len(parts) == 1 else (parts[0], parts[1])


def parse_size(text: str) -> int | tuple[int, int]:
    """``"N"`` → ``N``; ``"HxW"`` → ``(H, W)`` (``compare --size``); sides in ``[1, MAX_SIZE]``."""
    return _sides(text, hw=True)


def side(text: str) -> int:
    """One side in pixels, ``[1, MAX_SIZE]`` (the dataset and LPIPS-space commands' ``--size``)."""
    return _sides(text, hw=False)  # type: ignore[return-value]


def _checked(text: str, parse: Callable[[str], Any], ok: Callable[[Any], bool], expected: str) -> Any:
    """``parse(text)`` when it parses and passes ``ok``; else ``expected {expected}, got {text!r}``."""
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive(text: str) -> int:
    """An integer ``≥ 1``."""
    return _checked(text, int, lambda n: n >= 1, "a positive integer")


def workers(text: str) -> int:
    """A number of processes, an integer ``≥ 0`` (``--workers``, ``--lanes``)."""
    return _checked(text, int, lambda n: n >= 0, "a number of processes ≥ 0")


def shard(text: str) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)`` with ``0 ≤ i < n`` (a 0-based array task id, e.g. ``$SLURM_ARRAY_TASK_ID/10``)."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected i/n (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise argparse.ArgumentTypeError(f"shard i/n needs 0 ≤ i < n, got {text!r}")
    return i, n


def device(text: str) -> str:
    """A device that exists here (``auto``, ``cpu``, ``cuda``, ``cuda:N`` with ``N`` below the number
    of CUDA devices, ``mps``), returned as given."""
    import torch

    from ..devices import resolve_device

    try:
        dev = resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(
            f"device {text!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


def ray_address(text: str) -> str:
    """A Ray cluster's address: ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``, returned as given."""
    rest = text[len("ray://"):] if text.startswith("ray://") else text
    host, sep, port = rest.rpartition(":")
    if text != "auto" and not (sep and host and port.isdigit() and 0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(f"expected auto, HOST:PORT or ray://HOST:PORT, got {text!r}")
    return text


def finite(text: str) -> float:
    """A finite float (no ``nan``, ``inf``)."""
    return _checked(text, float, math.isfinite, "a finite number")


def strength(text: str) -> float:
    """A float in ``[0, 1e6]`` (``fit-lin --strength``)."""
    return _checked(text, float, lambda v: 0.0 <= v <= 1e6, "a number from 0 to 1e6")


# --------------------------------------------------------------------------- the metric options
@dataclass(frozen=True)
class MetricWords:
    """How one family of commands names, types and words its metric options; the options
    themselves (flags, defaults, choices) are declared once, in :func:`add_metric_options`."""

    metric_flag: str
    metric_help: str
    net_help: str
    convention_help: str
    grayscale_help: str
    size_help: str
    size_type: Callable[[str], object] = side
    metric_choices: tuple[str, ...] | None = None


COMPARE_WORDS = MetricWords(
    "--metric", "LPIPS (default), shift-tolerant LPIPS or DISTS", "backbone (default: alex; DISTS has vgg only)",
    "input range fed to the net (default: the metric's own: [-1,1], DISTS [0,1])", "feed the luma replicated to RGB",
    f"resize both to N×N (or HxW) first; sides from 1 to {MAX_SIZE} px", parse_size, tuple(METRICS))
"""``compare``: one metric by name, ``--size N`` or ``HxW``."""

DATASET_WORDS = MetricWords(
    "--metrics", "comma-separated specs: mse, psnr, ssim, lpips, stlpips, dists, or full names such as "
                 "lpips-vgg-0.0-baseline-[0,1]-gray@64 (default: lpips)",
    "backbone for the learned metrics that have it (default: each metric's own)",
    "input range fed to the networks (default: each metric's own)", "feed the networks the luma replicated to RGB",
    "resize both images to N x N before the networks (classic metrics stay native)")
"""``score``, ``diversity``: comma-separated specs."""

SPACE_WORDS = MetricWords(
    "--metric", "one spec with an embedding: lpips (default), stlpips, or a full name such as "
                "lpips-vgg-0.0-baseline-[-1,1]@256", "backbone (default alex)", "input range fed to the network",
    "feed the luma replicated to RGB", "resize every image to N x N first (needed when sizes differ)")
"""``neighbours``, ``embed``: one spec that has an embedding."""


def add_metric_options(p: argparse.ArgumentParser, words: MetricWords) -> None:
    """``--metric``/``--metrics``, ``--net``, ``--version``, ``--baseline``, ``--convention``,
    ``--grayscale``, ``--size``, in that order, worded by ``words``."""
    p.add_argument(words.metric_flag, default=DEFAULT_METRIC, choices=words.metric_choices, help=words.metric_help)
    p.add_argument("--net", default=None, choices=tuple(NET_LABELS), help=words.net_help)
    p.add_argument("--version", default=None, choices=VERSIONS, help="LPIPS weights version (default 0.1)")
    p.add_argument("--baseline", action="store_true", help="LPIPS uncalibrated: all channel weights 1")
    p.add_argument("--convention", default=None, choices=CONVENTIONS, help=words.convention_help)
    p.add_argument("--grayscale", action="store_true", help=words.grayscale_help)
    p.add_argument("--size", type=words.size_type, default=None, help=words.size_help)


def metric_specs(args: argparse.Namespace) -> tuple:
    """The :class:`~lpips_core.spec.MetricSpec` of each ``--metrics`` entry, the single options
    filling what an entry leaves out (raises ``ValueError`` on a bad spec)."""
    from ..spec import parse_specs

    return parse_specs(args.metrics, **_spec_options(args))


def metric_spec(args: argparse.Namespace, text: str | None = None):
    """The :class:`~lpips_core.spec.MetricSpec` of ``text`` (default ``--metric``), the single
    options filling what it leaves out (raises ``ValueError`` on a bad spec)."""
    from ..spec import parse_spec

    return parse_spec(text or args.metric, **_spec_options(args))


def _spec_options(args: argparse.Namespace) -> dict:
    return dict(net=args.net, version=args.version, lin=False if args.baseline else None,
                convention=args.convention, grayscale=args.grayscale, size=args.size)


# --------------------------------------------------------------------------- other option groups
_LANES_HELP = ("on a CPU, processes that each decode and score whole blocks on one thread "
               "(default: one per CPU, up to 8; 0: none")


def add_device(p: argparse.ArgumentParser, *, where_available: bool = False) -> None:
    """``--device``, checked by :func:`device`."""
    p.add_argument("--device", type=device, default=None,
                   help="cpu, cuda, cuda:N or mps" + (", where available" if where_available else "")
                        + " (default: auto)")


def add_json(p: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    p.add_argument("--json", action="store_true", help=help)


def add_lanes(p: argparse.ArgumentParser, *, capped: bool) -> None:
    """``--lanes`` (``capped``: the help says at most one per CPU)."""
    p.add_argument("--lanes", type=workers, default=None,
                   help=_LANES_HELP + ("; at most one per CPU)" if capped else ")"))


def add_pair_options(p: argparse.ArgumentParser, *, lanes: bool = True) -> None:
    """How pairs are scored: ``--mismatch``, ``--workers``, ``--lanes`` (when ``lanes``),
    ``--batch-size``, ``--device``, ``--json``."""
    p.add_argument("--mismatch", choices=("error", "resize", "crop"), default="error",
                   help="pairs of different sizes: an error row (default), resize each test image to its "
                        "reference's size, or center-crop both to their common size")
    p.add_argument("--workers", type=workers, default=None,
                   help="decoding processes when the networks run in the main process (default: CPUs − 1, 1 to 4; "
                        "0: decode in the main process, no lanes)")
    if lanes:
        add_lanes(p, capped=True)
    p.add_argument("--batch-size", type=positive, default=None,
                   help="pairs per block: decoded, batched and written together (default 16 on CPU, 64 on GPU)")
    add_device(p)
    add_json(p, "print one JSON object instead of the table")


def add_outputs(p: argparse.ArgumentParser) -> None:
    """A streamed table: ``--out``, ``--resume``, ``--shard``, ``--max-pixels``, ``--force``."""
    p.add_argument("--out", default=None, help="stream rows to FILE.csv or FILE.jsonl (+ FILE.manifest.json)")
    p.add_argument("--resume", action="store_true", help="continue --out: skip the pairs already there")
    p.add_argument("--shard", type=shard, default=None,
                   help="score only slice i of n (0-based; merge the n tables with `merge`)")
    p.add_argument("--max-pixels", type=positive, default=None,
                   help="pixel budget per image, read from its header before decoding: a larger image's pair "
                        "becomes an error row of kind too_large (default 16000000)")
    p.add_argument("--force", action="store_true",
                   help="--resume a table written with other package versions, weights or device (recorded)")


def add_folders(p: argparse.ArgumentParser) -> None:
    """The two positional folders, named by role: references first, test images second."""
    p.add_argument("reference", metavar="REFERENCE_DIR", help="references (ground truth), or one reference image")
    p.add_argument("test", metavar="TEST_DIR", help="test images (a method's outputs)")


def add_sample(p: argparse.ArgumentParser, what: str) -> None:
    """``--sample K`` (``what``: its help) and ``--seed``."""
    p.add_argument("--sample", type=positive, default=None, help=what)
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")


def add_memory(p: argparse.ArgumentParser) -> None:
    """``--memory-mb``: the Gram stage's memory budget."""
    p.add_argument("--memory-mb", type=positive, default=1024,
                   help="bytes the Gram stage may hold at once, in MiB (default 1024); embeddings larger than "
                        "this are streamed to disk")


def add_backend(p: argparse.ArgumentParser, what: str) -> None:
    """``--backend local|ray``, ``--address``, ``--actors``: where ``what`` runs (checked by
    :func:`backend_session`)."""
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help=f"where {what} runs: in this process (default) or on Ray actors through Ray Data, each "
                        "holding the model (pip install -e .[ray]; every node must read the images)")
    p.add_argument("--address", type=ray_address, default=None,
                   help="with --backend ray, the cluster to join: auto, HOST:PORT (the head's port) or "
                        "ray://HOST:PORT (default: $RAY_ADDRESS, the cluster `ray start` left on this machine, "
                        "else a new local one)")
    p.add_argument("--actors", type=positive, default=None,
                   help="with --backend ray, the actors (default: one per CPU of the cluster, one per GPU with "
                        "--device cuda)")


def backend_session(args: argparse.Namespace):
    """The context a command runs in: for ``--backend ray``, connected to the Ray cluster
    (:func:`lpips_core.datasets.ray_backend.ray_cluster`), else nothing.

    Raises:
        ValueError: ``--address`` or ``--actors`` without ``--backend ray``; no cluster at the
            address. ImportError: Ray is not installed.
    """
    import contextlib

    if getattr(args, "backend", "local") != "ray":
        if getattr(args, "address", None) is not None or getattr(args, "actors", None) is not None:
            raise ValueError("--address and --actors need --backend ray")
        return contextlib.nullcontext()
    from ..datasets.ray_backend import ray_cluster

    return ray_cluster(args.address)
