"""``python -m lpips_core diversity DIR``: the mean distance over all pairs of images in one folder.

::

    python -m lpips_core diversity DIR [--metrics lpips] [--matrix D.npy] [--json]   # the Gram matrix
    python -m lpips_core diversity DIR --sample 1000 --seed 0   # pairs one by one (any metric)

It goes through the Gram matrix (every pair from one forward pass per image) when every metric
has an embedding (LPIPS, ST-LPIPS: :func:`lpips_core.space.has_embedding`) and none of
``--sample``, ``--out``, ``--resume`` or ``--shard`` is given; otherwise it scores pairs one by
one, as ``score`` does. ``DIR`` may also be an embedding folder written by ``embed``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .options import DATASET_WORDS, add_backend, add_memory, add_metric_options, add_outputs, add_pair_options, \
    add_sample, backend_session, metric_specs
from .run import Bar, interrupted_message, metric_table, run_command
from .score import print_summary, score_command
from .space_common import build_model, load_embedding, on_ray, versions


def add_parser(subparsers) -> None:
    d = subparsers.add_parser("diversity", help="mean distance over all pairs of images in one folder")
    d.add_argument("dir", help="the folder")
    add_sample(d, "score a seeded random sample of K pairs")
    add_metric_options(d, DATASET_WORDS)
    add_pair_options(d)
    add_outputs(d)
    d.add_argument("--matrix", default=None, help="write the N×N distance matrix to FILE.npy (float64, rows and "
                                                  "columns in sorted name order; needs one metric with an embedding)")
    d.add_argument("--embeddings", default=None,
                   help="keep the embeddings in this folder (reuse it as DIR later); default: a temporary folder")
    add_memory(d)
    add_backend(d, "the scoring or the embedding")


def run(args: argparse.Namespace) -> int:
    """Execute ``diversity``; 0, or 2 after one ``error: ...`` line on stderr."""
    return run_command(args, _command, interrupted=interrupted_message(args))


def _command(args: argparse.Namespace):
    if uses_gram(args):
        return gram_diversity(args), print_diversity
    return score_command(args, _all_pairs), print_summary


# --------------------------------------------------------------------------- pairs one by one
#: A rough cost of one pair at 256 px on one CPU core, per metric, in seconds (for the
#: message that refuses a diversity run that is too large; anything unlisted counts as VGG).
_PAIR_SECONDS = {"mse": 0.0005, "psnr": 0.0005, "ssim": 0.004, "alex": 0.012, "squeeze": 0.012, "vgg": 0.08}


def _pair_seconds(args: argparse.Namespace) -> float:
    try:
        specs = metric_specs(args)
    except ValueError:
        return _PAIR_SECONDS["vgg"]
    return sum(_PAIR_SECONDS.get(s.net if s.learned else s.metric, _PAIR_SECONDS["vgg"]) for s in specs)


def _all_pairs(args: argparse.Namespace):
    """All pairs of ``DIR`` (or ``--sample K`` of them), refused past
    :data:`~lpips_core.datasets.pairs.MAX_ALL_PAIRS`."""
    from ..datasets.pairs import MAX_ALL_PAIRS, all_pairs

    return all_pairs(args.dir, sample=args.sample, seed=args.seed, max_pairs=MAX_ALL_PAIRS,
                     per_pair_seconds=_pair_seconds(args))


# --------------------------------------------------------------------------- the Gram path
def uses_gram(args: argparse.Namespace) -> bool:
    """Whether ``diversity`` goes through embeddings: every metric has one, and no per-pair option is set."""
    from ..space import has_embedding

    per_pair = args.sample is not None or args.out or args.resume or args.shard is not None
    gram = not per_pair and all(has_embedding(s) for s in metric_specs(args))
    if not gram and (args.matrix or args.embeddings):
        raise ValueError("--matrix and --embeddings need every metric to have an embedding (LPIPS, ST-LPIPS) and "
                         "no --sample, --out, --resume or --shard")
    return gram


def _check_outputs(args: argparse.Namespace, specs) -> None:
    """Refuse ``--matrix``/``--embeddings`` with several metrics and a bad ``--matrix`` path, before any work."""
    from .. import files

    if (args.matrix or args.embeddings) and len(specs) != 1:
        raise ValueError("--matrix and --embeddings take one metric")
    if args.matrix and not str(args.matrix).endswith(".npy"):
        raise ValueError(f"--matrix must end in .npy, got {args.matrix!r}")
    if args.matrix:
        files.check_output(args.matrix)  # an existing file, a link or a FIFO is refused


def _all_pairs_stats(args: argparse.Namespace, spec, model, budget: int) -> tuple[dict, list, dict]:
    """One metric over all pairs of ``DIR``: its statistics (:func:`lpips_core.space.diversity`), the
    images left out (unreadable) and the versions of what computed them."""
    from .. import files, space

    with tempfile.TemporaryDirectory(prefix="lpips-space-") as tmp:
        out = Path(args.embeddings) if args.embeddings else None
        emb = load_embedding(args.dir, spec, model, budget, Path(tmp) / "emb", out, args=args)
        if len(emb) < 2:
            raise ValueError(f"{args.dir} has {len(emb)} readable image(s); all pairs need at least 2")
        if args.matrix:
            d = space.pairwise_distances(emb, memory_budget=budget, device=args.device)
            st = space.jackknife_interval(d)
            files.save_npy(args.matrix, d)  # a temporary file, renamed into place when whole
        else:  # tile by tile: memory O(N), whatever N
            bar = Bar("all pairs", unit="tile")
            try:
                st = space.diversity(emb, memory_budget=budget, device=args.device, progress=bar)
            finally:
                bar.close()
        result = st, emb.skipped, versions(emb)
        del emb  # its memmap, before the temporary folder goes
    return result


def gram_diversity(args: argparse.Namespace) -> dict:
    """``diversity DIR`` through the Gram matrix: the JSON object ``--json`` prints,
    ``{"n", "skipped", "skipped_by_reason", "metrics": {name: {"n", "mean", "std", "ci95", "nonfinite",
    "se"}}, "config", "versions"}``."""
    from .. import space

    specs = metric_specs(args)
    _check_outputs(args, specs)
    budget = args.memory_mb << 20
    models: dict = {}  # one model per model_spec: specs that differ only in their input share it
    metrics: dict = {}
    all_versions: dict = {}
    skipped: list[dict] = []
    images = pairs = 0
    with backend_session(args):
        for spec in specs:
            model = None
            if not space.is_embedding_dir(args.dir) and not on_ray(args):
                if spec.model_spec not in models:
                    models[spec.model_spec] = build_model(spec, args.device)
                model = models[spec.model_spec]
            st, skipped, v = _all_pairs_stats(args, spec, model, budget)
            all_versions.update({k: x for k, x in v.items() if k != "weights"})
            all_versions.setdefault("weights", {}).update(v["weights"])
            images, pairs = st["images"], st["pairs"]
            metrics[spec.name] = {"n": pairs, "mean": st["mean"], "std": st["std"], "ci95": st["ci95"],
                                  "nonfinite": 0, "se": st["se"]}
    config = {"method": "gram", "dir": args.dir, "images": images, "pairs": pairs, "metrics": list(metrics),
              "std": "sample standard deviation of the pair distances (ddof=1)",
              "ci95": "jackknife over images (leave one image out), Student t with N - 1 df: pairs share images, "
                      "so they are not independent",
              "matrix": args.matrix, "skipped_images": skipped[:20]}
    return {"n": pairs, "skipped": len(skipped), "skipped_by_reason": {"unreadable": len(skipped)} if skipped else {},
            "metrics": metrics, "config": config, "versions": all_versions}


def print_diversity(out: dict) -> None:
    """The Gram path's table: per metric the number of pairs, mean, std and the jackknife interval."""
    from ..cells import printable

    c = out["config"]
    print(f"{c['images']} images, all {c['pairs']} pairs through the Gram matrix"
          + (f"; {out['skipped']} unreadable image(s) left out" if out["skipped"] else ""))
    for line in metric_table(out["metrics"], "pairs", 8):
        print(line)
    print("std: of the pair distances (ddof=1); CI: jackknife over images (pairs share images)")
    if c.get("matrix"):
        print(f"matrix: {printable(c['matrix'])}")
