"""How every subcommand ends, and what they share in their output.

- :func:`run_command`: the one failure path: a result printed as one JSON object (``--json``) or
  by the command's printer, exit status 0; any failure one ``error: ...`` line on stderr, status 2,
  never a traceback.
- :class:`Bar`: the one progress bar (tqdm on stderr, shown only when stderr is a terminal).
- :func:`fmt`: the one number format of the tables; :func:`say`: a table line with names escaped.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from ..cells import number, one_line, printable


def fail(message: str) -> int:
    """One ``error: ...`` line on stderr (:func:`~lpips_core.cells.one_line`: whitespace runs as one
    space, escape sequences in a file name shown escaped); returns 2."""
    print("error: " + one_line(message), file=sys.stderr)
    return 2


def run_command(args: argparse.Namespace, command: Callable, *, also: tuple = (),
                interrupted: str = "interrupted") -> int:
    """The one way a subcommand ends: ``command(args)`` gives ``(result, printer)``; the result is
    printed as one JSON object (``--json``) or by ``printer(result)``; 0. A failure is one
    ``error: ...`` line on stderr and 2, never a traceback: the library's refusals (``ValueError``,
    ``OSError``, missing weights, a missing optional package, and the types in ``also``) in their
    own words, Ctrl-C as ``interrupted``, anything else as "unexpected" with its type."""
    from ..weights import WeightsUnavailable

    try:
        out, printer = command(args)
        text = json.dumps(out) if args.json else None
    except (ValueError, OSError, WeightsUnavailable, ImportError, *also) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail(interrupted)
    except Exception as exc:  # noqa: BLE001 - anything else still ends as one line, never a traceback
        return fail(f"unexpected {type(exc).__name__}" + (f": {exc}" if str(exc) else ""))
    if text is not None:
        print(text)
    else:
        printer(out)
    return 0


def interrupted_message(args: argparse.Namespace) -> str:
    """What Ctrl-C says for a command that writes a table: where the rows so far are, when ``--out`` is set."""
    out = getattr(args, "out", None)
    return "interrupted" + (f"; rows so far are in {out}: rerun with --resume" if out else "")


class Bar:
    """A tqdm bar on stderr, shown only when stderr is a terminal; called as a progress callback
    ``bar(done, total)`` (:mod:`lpips_core.progress`)."""

    def __init__(self, desc: str, unit: str):
        from tqdm import tqdm

        self._bar = tqdm(desc=desc, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True, leave=False)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.reset(total=total)
        self._bar.update(done - self._bar.n)

    def status(self, state) -> None:
        """Explain's :class:`~lpips_core.datasets.explain.ExplainProgress`: configurations and pairs as the postfix."""
        self._bar.set_postfix_str(f"{state.left}/{state.configurations} configurations left, "
                                  f"{state.pairs_done}/{state.pairs} pairs", refresh=False)

    def close(self) -> None:
        self._bar.close()


def fmt(v) -> str:
    """A number in a table: 6 significant digits (:func:`~lpips_core.cells.number`), ``—`` for none."""
    return number(v, 6, significant=True, short_exponent=False)


def metric_table(metrics: dict, count: str, count_width: int) -> list[str]:
    """Per metric (``{name: {"n", "mean", "std", "ci95"}}``) the count (headed ``count``), mean, std
    and the 95 % interval of the mean, as aligned lines, the header first."""
    width = max([len("metric")] + [len(k) for k in metrics])
    lines = [f"{'metric':<{width}}  {count:>{count_width}}  {'mean':>10}  {'std':>10}  95% CI of the mean"]
    for name, s in metrics.items():
        lo, hi = s["ci95"]
        lines.append(f"{name:<{width}}  {s['n']:>{count_width}}  {fmt(s['mean']):>10}  {fmt(s['std']):>10}  "
                     f"[{fmt(lo)}, {fmt(hi)}]")
    return lines


def say(line: str) -> None:
    """Print one line of a text summary: names and paths in it shown by :func:`~lpips_core.cells.printable`."""
    print(printable(line))
