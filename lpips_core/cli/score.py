"""``python -m lpips_core score REFERENCE_DIR TEST_DIR``: pairs of two folders matched by name (or one
reference image against a folder) under many metrics; a table streamed to ``--out`` and its summary.

::

    python -m lpips_core score REFERENCE_DIR TEST_DIR [--metrics lpips,ssim] [--out rows.csv] [--json] ...
    python -m lpips_core score REFERENCE.png TEST_DIR    # one reference against a folder
    python -m lpips_core score REFERENCE_DIR TEST_DIR --backend ray [--address HOST:PORT] --out rows.csv

The first folder holds the references (ground truth), the second the test images (a method's
outputs); the order matters (``--mismatch resize`` resizes each test image to its reference's
size). ``--backend ray`` scores the same blocks on Ray actors
(:func:`lpips_core.datasets.ray_backend.score_ray`): the same table and manifest, resumable on
either backend. :func:`score_command` and :func:`print_summary` also serve ``diversity --sample`` and
``merge``; :func:`folder_pairs` serves ``explain``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from .options import DATASET_WORDS, add_backend, add_folders, add_metric_options, add_outputs, add_pair_options, \
    backend_session, metric_specs
from .run import Bar, interrupted_message, metric_table, run_command, say


def add_parser(subparsers) -> None:
    s = subparsers.add_parser("score", help="score pairs of two folders matched by name (or one reference)")
    add_folders(s)
    add_metric_options(s, DATASET_WORDS)
    add_pair_options(s)
    add_outputs(s)
    add_backend(s, "the scoring")


def run(args: argparse.Namespace) -> int:
    """Execute ``score``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (score_command(a, folder_pairs), print_summary),
                       interrupted=interrupted_message(args))


def folder_pairs(args: argparse.Namespace):
    """The :class:`~lpips_core.datasets.pairs.Discovery` of ``REFERENCE_DIR TEST_DIR``: matched by
    name, or one reference image against every test image."""
    from ..datasets.pairs import match_folders, reference_pairs

    if Path(args.reference).is_file():
        return reference_pairs(args.reference, args.test)
    return match_folders(args.reference, args.test)


def score_command(args: argparse.Namespace, discover: Callable) -> dict:
    """Score the pairs ``discover(args)`` finds under ``--metrics``: the summary ``--json`` prints,
    ``{"n", "skipped", "skipped_by_reason", "metrics", "config", "versions"}``."""
    from ..datasets.score import score_pairs

    if args.resume and not args.out:
        raise ValueError("--resume needs --out FILE")
    specs = metric_specs(args)
    disc = discover(args)
    if not disc.pairs:
        rep = disc.report()
        raise ValueError(f"no pairs found ({rep['only_reference']} references without a test image, "
                         f"{rep['only_test']} test images without a reference, {rep['duplicates']} duplicate names)")
    with backend_session(args):
        bar = Bar(args.command, unit="pair")
        try:
            if args.backend == "ray":
                from ..datasets.ray_backend import score_ray

                res = score_ray(disc, specs, mismatch=args.mismatch, out=args.out, resume=args.resume,
                                shard=args.shard, batch_size=args.batch_size, concurrency=args.actors,
                                device=args.device, progress=bar, max_pixels=args.max_pixels, force=args.force)
            else:
                res = score_pairs(disc, specs, mismatch=args.mismatch, out=args.out, resume=args.resume,
                                  shard=args.shard, batch_size=args.batch_size, workers=args.workers,
                                  device=args.device, progress=bar, lanes=args.lanes, max_pixels=args.max_pixels,
                                  force=args.force)
        finally:
            bar.close()
    return res.to_json()


def print_summary(out: dict) -> None:
    """The summary table: per metric ``n``, mean, std and the 95 % interval of the mean; what was not paired."""
    skipped = ", ".join(f"{k} {v}" for k, v in out["skipped_by_reason"].items())
    say(f"scored {out['n']} pairs" + (f"; {out['skipped']} skipped ({skipped})" if out["skipped"] else "")
        + f"; size mismatch policy: {out['config']['mismatch']}")
    for line in metric_table(out["metrics"], "n", 6):
        say(line)
    say("std: sample standard deviation (ddof=1); CI: Student t")
    disc = out["config"].get("discovery") or {}
    what = {"only_reference": "references without a test image", "only_test": "test images without a reference",
            "duplicates": "duplicate names", "ignored": "non-image files"}
    left = {k: disc.get(k, 0) for k in what if disc.get(k)}
    if left:
        say("not paired: " + ", ".join(f"{v} {what[k]}" for k, v in left.items()) + " (see --json for the files)")
