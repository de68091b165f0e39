"""The embedding on Ray Data, for more machines than one (optional: ``pip install -e .[ray]``).

:func:`embed_ray` embeds the shards of a folder on Ray actors, each of which builds the model
once, into a folder every worker can write, and returns :func:`~lpips_core.space.open_embedding`
of it (the same files as :func:`~lpips_core.space.embed` run shard by shard).
"""

from __future__ import annotations

import os

from .embedder import embed, image_files
from .embedding import Embedding, open_embedding
from .euclidean import has_embedding

__all__ = ["embed_ray"]


def embed_ray(folder: str | os.PathLike[str], spec, out: str | os.PathLike[str], *, shards: int = 4,
              concurrency: int = 2, num_cpus: float = 1, num_gpus: float = 0, device: str | None = "cpu",
              size_check: bool = True) -> Embedding:
    """:func:`embed` of ``folder`` on Ray Data: ``shards`` shards, each embedded by one of
    ``concurrency`` actors (which build the model once) into ``out`` (a folder every worker can
    write: a shared file system on a cluster); returns :func:`open_embedding` of ``out``.

    Raises:
        ImportError: Ray is not installed (``pip install -e .[ray]``).
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("embedding on Ray needs Ray Data: pip install -e .[ray]") from exc
    from ..spec import parse_spec

    spec = parse_spec(spec)
    if not has_embedding(spec):
        raise ValueError(f"{spec.name} has no embedding")
    image_files(folder)  # a missing folder fails here, not in an actor
    items = [{"shard": i} for i in range(int(shards))]
    ds = ray.data.from_items(items).map_batches(
        _RayEmbedder, fn_constructor_kwargs=dict(spec=spec.name, folder=str(folder), out=str(out), shards=int(shards),
                                                 device=device),
        batch_size=1, concurrency=concurrency, num_cpus=num_cpus, num_gpus=num_gpus, batch_format="numpy")
    ds.take_all()
    return open_embedding(out)


class _RayEmbedder:
    """A Ray actor: builds the model once, embeds the shards it is given into ``out``."""

    def __init__(self, spec: str, folder: str, out: str, shards: int, device: str | None):
        from ..spec import parse_spec

        self.spec = parse_spec(spec)
        self.model = self.spec.build(device=device)
        self.folder, self.out, self.shards = folder, out, shards

    def __call__(self, batch: dict) -> dict:
        for i in batch["shard"]:
            embed(self.model, self.folder, spec=self.spec, out=self.out, shard=(int(i), self.shards), threads=1)
        return {"shard": batch["shard"]}
