"""The dataset subcommands of ``python -m lpips_core``: ``score``, ``diversity``, ``explain``, ``merge``.

::

    python -m lpips_core score REFERENCE_DIR TEST_DIR [--metrics lpips,ssim] [--out rows.csv] [--json] ...
    python -m lpips_core score REFERENCE.png TEST_DIR    # one reference against a folder
    python -m lpips_core diversity DIR [--matrix D.npy]     # LPIPS/ST-LPIPS: all pairs via the Gram matrix
    python -m lpips_core diversity DIR --sample 1000 --seed 0   # pairs one by one (any metric)
    python -m lpips_core explain REFERENCE_DIR TEST_DIR --reported 0.109 [--name "LPIPS (VGG)"] [--size 128] [--all]
    python -m lpips_core merge rows.csv rows.0.csv rows.1.csv rows.2.csv

The first folder holds the references (ground truth), the second the test images (a method's
outputs); the order matters (``--mismatch resize`` resizes each test image to its reference's
size). A progress bar (tqdm: pairs/s; explain: pair × configuration scores, with the configurations
left) goes to stderr when it is a terminal; the summary table to
stdout, or one JSON object with ``--json``. Every error — bad arguments, an unreadable folder,
missing weights — exits with status 2 and one line on stderr, ``error: ...``.
:func:`add_parsers` registers the subcommands on the main parser's subparsers; :func:`run`
executes a parsed command and returns the exit status.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cells import one_line, printable
from ..conventions import CONVENTIONS
from ..images import DEFAULT_MAX_SIDE
from ..metric_registry import NET_LABELS
from ..weights import VERSIONS

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS: tuple[str, ...] = ("score", "diversity", "explain", "merge")


def _size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a side in pixels, got {text!r}") from None
    if not 1 <= n <= DEFAULT_MAX_SIDE:
        raise argparse.ArgumentTypeError(f"sides must be from 1 to {DEFAULT_MAX_SIDE} px, got {text!r}")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a number of processes ≥ 0, got {text!r}")
    return n


def _shard(text: str) -> tuple[int, int]:
    """``"i/n"`` with ``0 ≤ i < n`` (a 0-based array task id, e.g. ``$SLURM_ARRAY_TASK_ID/10``)."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected i/n (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise argparse.ArgumentTypeError(f"shard i/n needs 0 ≤ i < n, got {text!r}")
    return i, n


def _device(text: str) -> str:
    from ..protocol import resolve_device

    try:
        resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _reported(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def _common(p: argparse.ArgumentParser, *, metrics: bool = True) -> None:
    """Options every command has (``metrics``: the metric options, and ``--lanes``: score, diversity)."""
    if metrics:
        p.add_argument("--metrics", default="lpips",
                       help="comma-separated specs: mse, psnr, ssim, lpips, stlpips, dists, or full names such "
                            "as lpips-vgg-0.0-baseline-[0,1]-gray@64 (default: lpips)")
        p.add_argument("--net", choices=tuple(NET_LABELS), default=None,
                       help="backbone for the learned metrics that have it (default: each metric's own)")
        p.add_argument("--version", choices=VERSIONS, default=None, help="LPIPS weights version (default 0.1)")
        p.add_argument("--baseline", action="store_true", help="LPIPS uncalibrated: all channel weights 1")
        p.add_argument("--convention", choices=CONVENTIONS, default=None,
                       help="input range fed to the networks (default: each metric's own)")
        p.add_argument("--grayscale", action="store_true", help="feed the networks the luma replicated to RGB")
        p.add_argument("--size", type=_size, default=None,
                       help="resize both images to N x N before the networks (classic metrics stay native)")
    p.add_argument("--mismatch", choices=("error", "resize", "crop"), default="error",
                   help="pairs of different sizes: an error row (default), resize each test image to its "
                        "reference's size, or center-crop both to their common size")
    p.add_argument("--workers", type=_workers, default=None,
                   help="decoding processes when the networks run in the main process (default: CPUs − 1, 1 to 4; "
                        "0: decode in the main process, no lanes)")
    if metrics:
        p.add_argument("--lanes", type=_workers, default=None,
                       help="on a CPU, processes that each decode and score whole blocks on one thread "
                            "(default: one per CPU, up to 8; 0: none; at most one per CPU)")
    p.add_argument("--batch-size", type=_positive, default=None,
                   help="pairs per block: decoded, batched and written together (default 16 on CPU, 64 on GPU)")
    p.add_argument("--device", type=_device, default=None, help="cpu, cuda, cuda:N or mps (default: auto)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="stream rows to FILE.csv or FILE.jsonl (+ FILE.manifest.json)")
    p.add_argument("--resume", action="store_true", help="continue --out: skip the pairs already there")
    p.add_argument("--shard", type=_shard, default=None,
                   help="score only slice i of n (0-based; merge the n tables with `merge`)")
    p.add_argument("--max-pixels", type=_positive, default=None,
                   help="pixel budget per image, read from its header before decoding: a larger image's pair "
                        "becomes an error row of kind too_large (default 16000000)")
    p.add_argument("--force", action="store_true",
                   help="--resume a table written with other package versions, weights or device (recorded)")


def _folders(p: argparse.ArgumentParser) -> None:
    """The two positional folders, named by role: references first, test images second."""
    p.add_argument("reference", metavar="REFERENCE_DIR", help="references (ground truth), or one reference image")
    p.add_argument("test", metavar="TEST_DIR", help="test images (a method's outputs)")


def add_parsers(subparsers) -> None:
    """Add ``score``, ``diversity``, ``explain`` and ``merge`` to the main parser's subparsers."""
    s = subparsers.add_parser("score", help="score pairs of two folders matched by name (or one reference)")
    _folders(s)
    _common(s)
    _outputs(s)
    d = subparsers.add_parser("diversity", help="mean distance over all pairs of images in one folder")
    d.add_argument("dir", help="the folder")
    d.add_argument("--sample", type=_positive, default=None, help="score a seeded random sample of K pairs")
    d.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    _common(d)
    _outputs(d)
    _space_options(d)
    e = subparsers.add_parser("explain", help="which configuration reproduces a reported dataset mean")
    _folders(e)
    e.add_argument("--reported", type=_reported, required=True, help="the reported mean, e.g. 0.109")
    e.add_argument("--name", default=None, help='the metric as the paper wrote it, e.g. "LPIPS (VGG)": '
                   "the search is narrowed to what it says (backbone, version, baseline)")
    e.add_argument("--all", action="store_true", help="search every configuration on every pair (no race); "
                   "--name only marks matches")
    e.add_argument("--no-race", action="store_true", help="score every configuration of the search on every pair "
                   "(exact, slower); by default configurations that cannot reach --reported drop out as the pairs "
                   "come in, the first --top rows and the verdict staying those of the full search")
    e.add_argument("--nets", default=None, help="comma-separated backbones to try (default: what --name says, "
                   "else all available)")
    e.add_argument("--size", type=_size, default=None, help="one more size to try besides native, 64 and 256")
    e.add_argument("--sample", type=_positive, default=None, help="use a seeded random sample of K pairs")
    e.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    e.add_argument("--top", type=_positive, default=10, help="how many configurations to show (default 10)")
    e.add_argument("--lanes", type=_workers, default=None,
                   help="on a CPU, processes that each decode and score whole blocks on one thread "
                        "(default: one per CPU, up to 8; 0: none)")
    _common(e, metrics=False)
    m = subparsers.add_parser("merge", help="merge the tables of shards 0..n-1 into one table and summary")
    m.add_argument("out", help="the merged FILE.csv or FILE.jsonl")
    m.add_argument("shards", nargs="+", help="the shard tables")
    m.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    m.add_argument("--force", action="store_true",
                   help="merge shards of other package versions, weights or devices (recorded in the manifest)")


# --------------------------------------------------------------------------- LPIPS space (lpips_core.space_cli)
def _space_options(d: argparse.ArgumentParser) -> None:
    """``diversity``'s Gram-path options (``--matrix``, ``--embeddings``, ``--memory-mb``)."""
    from ..space_cli import add_diversity_options

    add_diversity_options(d)


def _space_gram(args) -> bool:
    """``diversity`` through the Gram matrix: every metric has an embedding and no per-pair option is set."""
    from ..space_cli import uses_gram

    return uses_gram(args)


def _space_diversity(args):
    from ..space_cli import print_diversity, run_diversity

    return run_diversity(args), print_diversity


# --------------------------------------------------------------------------- running
def _fail(message: str) -> int:
    """One ``error: ...`` line on stderr (:func:`~lpips_core.cells.one_line`: whitespace runs as one
    space, escape sequences in a file name shown escaped); returns 2."""
    print("error: " + one_line(message), file=sys.stderr)
    return 2


def _say(line: str) -> None:
    """Print one line of a text summary: names and paths in it shown by :func:`~lpips_core.cells.printable`."""
    print(printable(line))


class _Bar:
    """A tqdm bar on stderr (pairs/s), shown only when stderr is a terminal."""

    def __init__(self, desc: str, unit: str = "pair"):
        from tqdm import tqdm

        self._bar = tqdm(desc=desc, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True, leave=False)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.reset(total=total)
            self._bar.update(done)
        else:
            self._bar.update(done - self._bar.n)

    def status(self, state) -> None:
        """Explain's :class:`~lpips_core.datasets.explain.ExplainProgress`: configurations and pairs as the postfix."""
        self._bar.set_postfix_str(f"{state.left}/{state.configurations} configurations left, "
                                  f"{state.pairs_done}/{state.pairs} pairs", refresh=False)

    def close(self) -> None:
        self._bar.close()


def _discover(args):
    from .pairs import all_pairs, match_folders, reference_pairs

    if args.command == "diversity":
        from .pairs import MAX_ALL_PAIRS

        return all_pairs(args.dir, sample=args.sample, seed=args.seed, max_pairs=MAX_ALL_PAIRS,
                         per_pair_seconds=_pair_seconds(args))
    if Path(args.reference).is_file():
        return reference_pairs(args.reference, args.test)
    return match_folders(args.reference, args.test)


#: A rough cost of one pair at 256 px on one CPU core, per metric, in seconds (for the
#: message that refuses a diversity run that is too large; anything unlisted counts as VGG).
_PAIR_SECONDS = {"mse": 0.0005, "psnr": 0.0005, "ssim": 0.004, "alex": 0.012, "squeeze": 0.012, "vgg": 0.08}


def _pair_seconds(args) -> float:
    try:
        specs = _specs(args)
    except ValueError:
        return _PAIR_SECONDS["vgg"]
    return sum(_PAIR_SECONDS.get(s.net if s.learned else s.metric, _PAIR_SECONDS["vgg"]) for s in specs)


def _specs(args):
    from ..spec import parse_specs

    return parse_specs(args.metrics, net=args.net, version=args.version, lin=False if args.baseline else None,
                       convention=args.convention, grayscale=args.grayscale, size=args.size)


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.6g}"


def _print_summary(out: dict) -> None:
    skipped = ", ".join(f"{k} {v}" for k, v in out["skipped_by_reason"].items())
    _say(f"scored {out['n']} pairs" + (f"; {out['skipped']} skipped ({skipped})" if out["skipped"] else "")
          + f"; size mismatch policy: {out['config']['mismatch']}")
    width = max([len("metric")] + [len(k) for k in out["metrics"]])
    _say(f"{'metric':<{width}}  {'n':>6}  {'mean':>10}  {'std':>10}  95% CI of the mean")
    for name, s in out["metrics"].items():
        lo, hi = s["ci95"]
        _say(f"{name:<{width}}  {s['n']:>6}  {_fmt(s['mean']):>10}  {_fmt(s['std']):>10}  [{_fmt(lo)}, {_fmt(hi)}]")
    _say("std: sample standard deviation (ddof=1); CI: Student t")
    disc = out["config"].get("discovery") or {}
    what = {"only_reference": "references without a test image", "only_test": "test images without a reference",
            "duplicates": "duplicate names", "ignored": "non-image files"}
    left = {k: disc.get(k, 0) for k in what if disc.get(k)}
    if left:
        _say("not paired: " + ", ".join(f"{v} {what[k]}" for k, v in left.items()) + " (see --json for the files)")


def _score(args) -> dict:
    from .score import score_pairs

    if args.resume and not args.out:
        raise ValueError("--resume needs --out FILE")
    specs = _specs(args)
    disc = _discover(args)
    if not disc.pairs:
        rep = disc.report()
        raise ValueError(f"no pairs found ({rep['only_reference']} references without a test image, "
                         f"{rep['only_test']} test images without a reference, {rep['duplicates']} duplicate names)")
    bar = _Bar(args.command)
    try:
        res = score_pairs(disc, specs, mismatch=args.mismatch, out=args.out, resume=args.resume, shard=args.shard,
                          batch_size=args.batch_size, workers=args.workers, device=args.device, progress=bar,
                          lanes=args.lanes, max_pixels=args.max_pixels, force=args.force)
    finally:
        bar.close()
    return res.to_json()


def _explain(args) -> dict:
    from .explain import explain

    disc = _discover(args)
    nets = None if args.nets is None else [n.strip() for n in args.nets.split(",") if n.strip()]
    bar = _Bar("explain", unit="score")
    try:
        res = explain(disc, args.reported, name=args.name, use_name=not args.all, nets=nets, extra_size=args.size,
                      mismatch=args.mismatch, sample=args.sample, seed=args.seed, batch_size=args.batch_size,
                      workers=args.workers, lanes=args.lanes, device=args.device, progress=bar,
                      race=not (args.all or args.no_race), exact_rows=args.top, status=bar.status)
    finally:
        bar.close()
    return res.to_json(top=args.top)


def _print_explain(out: dict) -> None:
    from .explain import describe_hints

    _say(f"reported {out['reported']:g}" + (f" ({out['name']})" if out["name"] else "")
          + f"; {out['pairs']} pairs")
    if out["name"]:
        how = "searched only that" if out["searched"].get("narrowed_by_name") else "used to mark matches (m)"
        _say(f"the name says: {describe_hints(out['hints'])}; {how} (--all searches everything)")
    s = out["searched"]
    _say(f"searched: {', '.join(s['nets'])} x v{'/'.join(s['versions'])} x "
          f"{'/'.join('lin' if x else 'baseline' for x in s['lin'])} x {'/'.join(s['conventions'])} x "
          f"{'colour/gray' if len(s['grayscale']) == 2 else ('gray' if s['grayscale'][0] else 'colour')} x "
          f"{'/'.join(s['sizes'])}; closest first")
    cands = out["candidates"]
    width = max([len("configuration")] + [len(c["config"]) for c in cands])
    _say(f"  {'configuration':<{width}}  {'mean':>10}  {'std':>10}  {'95% CI':>22}  {'|Δ|':>9}  {'z':>7}")
    for c in cands:
        lo, hi = c["ci95"]
        ci = f"[{_fmt(lo)}, {_fmt(hi)}]"
        z = "—" if c["z"] is None else f"{c['z']:.2f}"
        mark = ("*" if c["holds_reported"] else " " if c.get("complete", True) else "~") + \
            ("m" if c["matches_name"] else " ")
        dropped = "" if c.get("complete", True) else f"  (dropped after {c['n']} of {out['pairs']} pairs)"
        _say(f"{mark}{c['config']:<{width}}  {_fmt(c['mean']):>10}  {_fmt(c['std']):>10}  {ci:>22}  "
              f"{c['distance']:>9.2g}  {z:>7}{dropped}")
        for other in c["same"][1:]:
            _say(f"   = {other} (the same values on this data)")
    _say("*: the 95% CI of the mean holds the reported value; m: matches the name; "
          "z: standard errors from the reported value"
          + ("; ~: dropped by the race (its values over the pairs it scored)"
             if any(not c.get("complete", True) for c in cands) else ""))
    _say(out["sentence"])
    race = out.get("race") or {}
    if race.get("raced"):
        _say(f"raced: {race['dropped']} of {race['configurations']} configurations dropped out"
             + (f" ({race['finished']} more sent back by the check and finished)" if race["finished"] else "")
             + f"; {race['passes']} of {race['passes_full']} pair passes run; the first {race['exact_rows']} rows "
             "and the verdict are the full search's (--no-race: every configuration on every pair)")
    if out["unavailable"]:
        _say("not tried: " + "; ".join(f"{k} ({v})" for k, v in out["unavailable"].items()))
    if out["skipped"]:
        _say("skipped: " + ", ".join(f"{k} {v}" for k, v in out["skipped"].items()))


def run(args: argparse.Namespace) -> int:
    """Execute a parsed dataset subcommand; 0, or 2 after one ``error: ...`` line on stderr."""
    hint = f"; rows so far are in {args.out}: rerun with --resume" if getattr(args, "out", None) else ""
    return run_command(args, _dataset_command, interrupted="interrupted" + hint)


def _dataset_command(args: argparse.Namespace):
    if args.command == "merge":
        from .store import merge_tables

        m = merge_tables(args.shards, args.out, force=args.force)
        return {**m["summary"], "config": {**m["config"], **m["run"]}, "versions": m["versions"]}, _print_summary
    if args.command == "explain":
        return _explain(args), _print_explain
    if args.command == "diversity" and _space_gram(args):
        return _space_diversity(args)
    return _score(args), _print_summary


def run_command(args: argparse.Namespace, command, *, also: tuple = (), interrupted: str = "interrupted") -> int:
    """The one way a subcommand ends: ``command(args)`` gives ``(result, printer)``; the result is
    printed as one JSON object (``--json``) or by ``printer``; 0. A failure is one ``error: ...``
    line on stderr and 2, never a traceback: the library's refusals (``ValueError``, ``OSError``,
    missing weights, a missing optional package, and the types in ``also``) in their own words,
    anything else as "unexpected"."""
    from ..weights import WeightsUnavailable

    try:
        out, printer = command(args)
        text = json.dumps(out) if args.json else None
    except (ValueError, OSError, WeightsUnavailable, ImportError, *also) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return _fail(interrupted)
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return _fail(f"unexpected {type(exc).__name__}: {exc}")
    if text is not None:
        print(text)
    else:
        printer(out)
    return 0
