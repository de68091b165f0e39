"""LPIPS as ``‖φ(x) − φ(y)‖²``: which metrics have an embedding, and φ of a batch.

With non-negative channel weights ``w`` LPIPS is a squared Euclidean distance between two
embeddings, ``φ(x) = concat_l sqrt(w_{l,c} / (H_l W_l)) · f̂_{l,chw}(x)`` (see
:mod:`lpips_core.space`). :func:`has_embedding` answers from a spec, :func:`check_euclidean`
refuses a model whose weights are negative, :func:`phi` maps a batch ``(N, 3, H, W)`` to its
``(N, D)`` embeddings and their :class:`EmbeddingLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

__all__ = ["EmbeddingLayout", "check_euclidean", "has_embedding", "phi"]


def has_embedding(spec) -> bool:
    """Whether the metric of ``spec`` (a :class:`~lpips_core.spec.MetricSpec` or its
    name) is a squared Euclidean distance between per-image embeddings.

    True for LPIPS (every net, version, lin and baseline) and ST-LPIPS: both are LPIPS's recipe
    (:class:`~lpips_core.model.LPIPSBase`: unit-normalised taps, non-negative channel weights on
    the squared differences, spatial mean, sum over layers). False for DISTS and the classic
    metrics. Whether a built model's weights really are non-negative is checked by
    :func:`check_euclidean`.
    """
    from ..spec import parse_spec

    return parse_spec(spec).euclidean


def check_euclidean(model) -> None:
    """Refuse a model whose LPIPS is not ``‖φ(x) − φ(y)‖²``.

    Raises:
        TypeError: not an LPIPS-like model (:class:`~lpips_core.model.LPIPSBase`).
        ValueError: a channel weight is negative or not finite (the quadratic form is then not a
            squared distance: no embedding exists).
    """
    from ..model import LPIPSBase

    if not isinstance(model, LPIPSBase):
        raise TypeError(f"an embedding needs an LPIPS-like model (LPIPS, ST-LPIPS), got {type(model).__name__}; "
                        "DISTS is not a Euclidean distance: use the per-pair path")
    for name, w in zip(model.layer_names, model.channel_weights or ()):
        bad = ~torch.isfinite(w) | (w < 0)
        if bool(bad.any()):
            raise ValueError(f"the channel weights of layer {name} have {int(bad.sum())} negative or non-finite "
                             f"values (min {float(w.min()):.3g}): LPIPS with them is not a squared Euclidean "
                             "distance, so it has no embedding; use the per-pair path")


@dataclass(frozen=True)
class EmbeddingLayout:
    """Where each layer's terms lie in φ: per layer ``(name, C, H, W)``, its offset, the dimension."""

    layers: tuple[tuple[str, int, int, int], ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c * h * w for _, c, h, w in self.layers)

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.sizes)[:-1]]))

    @property
    def dim(self) -> int:
        return int(sum(self.sizes))

    def to_json(self) -> list:
        return [list(layer) for layer in self.layers]


def _scales(model, maps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per layer ``sqrt(w_c / (H W))`` as ``(C, 1, 1)`` (``w = 1`` for the baseline), float64 → model dtype."""
    weights = model.channel_weights
    out = []
    for i, m in enumerate(maps):
        hw = m.shape[-2] * m.shape[-1]
        w = torch.ones(m.shape[1], dtype=torch.float64) if weights is None else weights[i].detach().cpu().double()
        out.append((w / hw).sqrt().to(m.dtype).to(m.device).view(-1, 1, 1))
    return out


@torch.inference_mode()
def phi(model, x: torch.Tensor, *, out: torch.Tensor | None = None) -> tuple[torch.Tensor, EmbeddingLayout]:
    """The embeddings of a batch: ``x`` ``(N, 3, H, W)`` float, the model's input (its convention,
    e.g. ``[-1, 1]`` for LPIPS) → ``(N, D)`` float32 on the CPU, and their layout.

    ``‖phi(x)[i] − phi(y)[j]‖²`` equals ``model.compare(x[i:i+1], y[j:j+1]).total`` (float32
    rounding apart).

    Raises:
        TypeError, ValueError: see :func:`check_euclidean`, and the model's input checks.
    """
    check_euclidean(model)
    return _phi(model, x, out=out)


def _phi(model, x: torch.Tensor, *, out: torch.Tensor | None = None,
         cache: dict | None = None) -> tuple[torch.Tensor, EmbeddingLayout]:
    """:func:`phi` of a model already checked (``cache``: :func:`_scales` by map shapes, kept by the caller)."""
    feats = model.features(x)
    layout = EmbeddingLayout(tuple((name, int(m.shape[1]), int(m.shape[2]), int(m.shape[3]))
                                   for name, m in zip(model.layer_names, feats.maps)))
    n = feats.batch
    if out is None:
        out = torch.empty((n, layout.dim), dtype=torch.float32)
    elif tuple(out.shape) != (n, layout.dim):
        raise ValueError(f"out must have shape {(n, layout.dim)}, got {tuple(out.shape)}")
    key = tuple(tuple(m.shape[1:]) for m in feats.maps)
    scales = None if cache is None else cache.get(key)
    if scales is None:
        scales = [sc.cpu() for sc in _scales(model, feats.maps)]
        if cache is not None:
            cache[key] = scales
    for m, sc, off, size, (_, c, h, w) in zip(feats.maps, scales, layout.offsets, layout.sizes, layout.layers):
        torch.mul(m.cpu(), sc, out=out[:, off:off + size].view(n, c, h, w))  # one pass, into φ's rows
    return out, layout
