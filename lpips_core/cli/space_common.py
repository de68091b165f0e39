"""What the LPIPS-space commands (``embed``, ``neighbours``, ``diversity`` through the Gram matrix)
share: the metric spec from the options, its model, a folder as an embedding, the versions.

A folder argument may be an image folder (embedded on the fly) or an embedding folder written by
``embed`` (all its shards; :func:`lpips_core.space.is_embedding_dir`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import metric_spec
from .run import Bar


def embedding_spec(args: argparse.Namespace, text: str | None = None):
    """The ``--metric`` spec (or ``text``'s), which must have an embedding (LPIPS, ST-LPIPS), else ``ValueError``."""
    from ..space import has_embedding

    spec = metric_spec(args, text)
    if not has_embedding(spec):
        raise ValueError(f"{spec.name} has no embedding (it is not a squared Euclidean distance); "
                         "neighbours and the Gram path need LPIPS or ST-LPIPS — for DISTS or a classic metric "
                         "use `score QUERY.png POOL_DIR` (one query against a folder) or `diversity --sample K`")
    return spec


def build_model(spec, device):
    """The frozen model of ``spec`` on ``device``, built from ``spec.model_spec`` (the input options
    do not change the model)."""
    return spec.model_spec.build(device=device)


def load_embedding(folder: str, spec, model, budget: int, spill: Path | None, out: Path | None = None,
                   what: str = "images", args: argparse.Namespace | None = None):
    """The embedding of ``folder``: opened if it is an embedding folder (checked against ``spec``),
    else computed with ``model`` (in memory within ``budget`` bytes, or streamed to ``out``/``spill``),
    or with ``args.backend == "ray"`` on Ray actors into ``out`` (else ``spill``) in the session
    :func:`~.options.backend_session` opened."""
    from .. import space

    if space.is_embedding_dir(folder):
        emb = space.open_embedding(folder)
        if emb.spec_name != spec.name:
            raise ValueError(f"{folder} holds embeddings of {emb.spec_name}, not {spec.name}")
        return emb
    bar = Bar(f"embedding {what}", unit="image")
    try:
        if on_ray(args):
            from ..devices import resolve_device

            return space.embed_ray(folder, spec, out or spill, concurrency=args.actors,
                                   device=str(resolve_device(args.device)), progress=bar)
        return space.embed(model, folder, spec=spec, out=out, memory_budget=budget, spill=spill, progress=bar)
    finally:
        bar.close()


def on_ray(args: argparse.Namespace | None) -> bool:
    """Whether the command embeds on Ray (``--backend ray``)."""
    return args is not None and getattr(args, "backend", "local") == "ray"


def versions(emb) -> dict:
    """The package versions, and the weights of ``emb``'s spec: ``{package: version, "weights": {spec: source}}``."""
    from ..datasets.score import package_versions

    return {**package_versions(), "weights": {emb.spec_name: emb.manifest["model"]["weights"]}}
