"""The command line, ``python -m lpips_core COMMAND ...``: :func:`main` and its parser.

Commands: ``compare`` (two images), ``score``, ``diversity``, ``explain``, ``merge`` (folders of
pairs), ``neighbours``, ``embed`` (the LPIPS space), ``score-2afc``, ``fit-lin`` (2AFC folders);
one module each, with ``add_parser(subparsers)`` and ``run(args)``. Validators and option builders
are in :mod:`.options`; how every command ends (the result as a table or one JSON object, a
failure as one line), the progress bar and the number format in :mod:`.run`; what the LPIPS-space
commands share in :mod:`.space_common`.

Images are read as 8-bit RGB and scaled ``x / 255`` before the range convention applies.
Errors (missing file, unreadable image, size mismatch, missing weights) exit with status 2 and
one line on stderr, ``error: ...``, never a traceback. What can be checked is checked before
any image is read or any model is built: ``compare``'s paths must be regular files (a directory,
FIFO, device such as ``/dev/zero`` or socket is refused unread, see
:func:`lpips_core.images.check_file`); ``--size`` takes sides from 1 to
:data:`~.options.MAX_SIZE` (2048 px, the loader's own ``max_side``: a VGG16 forward pass at
2048 x 2048 already holds gigabytes of activations); ``--device`` must exist on this machine
(``cpu``, ``cuda[:N]`` with ``N`` below the number of CUDA devices, ``mps``). Usage errors are one
line too, and any unexpected failure still ends as one line. A progress bar (tqdm) goes to stderr
when it is a terminal.

The library never imports this package: the command line sits on top of it.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from . import compare, diversity, embed, explain, fit_lin, merge, neighbours, score, score_2afc
from .options import OneLineParser

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS = {"compare": compare, "score": score, "diversity": diversity, "explain": explain, "merge": merge,
            "neighbours": neighbours, "embed": embed, "score-2afc": score_2afc, "fit-lin": fit_lin}
"""Each subcommand's module, in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (usage errors: one line, exit status 2)."""
    parser = OneLineParser(prog="python -m lpips_core", description="Exact LPIPS distances.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status: 0, or 2
    after one ``error: ...`` line on stderr. Usage errors leave from the parser by ``SystemExit(2)``."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args)
