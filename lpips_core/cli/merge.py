"""``python -m lpips_core merge OUT SHARD...``: the tables of shards ``0..n-1`` as one table and
summary (:func:`lpips_core.datasets.store.merge_tables`).

::

    python -m lpips_core merge rows.csv rows.0.csv rows.1.csv rows.2.csv
"""

from __future__ import annotations

import argparse

from .options import add_json
from .run import interrupted_message, run_command
from .score import print_summary


def add_parser(subparsers) -> None:
    m = subparsers.add_parser("merge", help="merge the tables of shards 0..n-1 into one table and summary")
    m.add_argument("out", help="the merged FILE.csv or FILE.jsonl")
    m.add_argument("shards", nargs="+", help="the shard tables")
    add_json(m, "print one JSON object instead of the table")
    m.add_argument("--force", action="store_true",
                   help="merge shards of other package versions, weights or devices (recorded in the manifest)")


def run(args: argparse.Namespace) -> int:
    """Execute ``merge``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, lambda a: (merge_command(a), print_summary), interrupted=interrupted_message(args))


def merge_command(args: argparse.Namespace) -> dict:
    """The merged table's summary, as ``score --json`` prints one: ``{"n", ..., "config", "versions"}``."""
    from ..datasets.store import merge_tables

    m = merge_tables(args.shards, args.out, force=args.force)
    return {**m["summary"], "config": {**m["config"], **m["run"]}, "versions": m["versions"]}
