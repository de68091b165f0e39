"""Decoding pairs in worker processes: a ``torch.utils.data`` dataset of pairs, loaded in blocks.

Each item is one pair, decoded with :func:`lpips_core.images.load_image`, made the same size by
the mismatch policy and, if asked, measured by the classic metrics (all CPU work, so it runs in
the workers while the main process runs the networks). A pair that cannot be read becomes a
:class:`Decoded` with ``error`` set; nothing is raised. Batches are the scorer's *blocks*
(lists of pair indices, see :mod:`lpips_core.datasets.score`), given as the ``batch_sampler``.

Mismatch policies (``a`` is the reference, ``b`` the test image):

- ``"error"``: a pair whose sizes differ becomes an error row (``size-mismatch``);
- ``"resize"``: ``b`` is resized to ``a``'s size (antialiased bilinear in ``[0, 1]``,
  :func:`lpips_core.conventions.resize`);
- ``"crop"``: both are center-cropped to the common ``min(H) × min(W)`` (offsets rounded down).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal, Sequence, get_args

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from ..conventions import resize
from ..images import ImageLoadError, load_image
from .pairs import Pair
from .specs import CLASSIC

__all__ = ["MISMATCH_POLICIES", "Decoded", "PairDataset", "block_loader", "default_workers", "decode_pair"]

Mismatch = Literal["error", "resize", "crop"]
MISMATCH_POLICIES: tuple[str, ...] = get_args(Mismatch)


@dataclass
class Decoded:
    """One decoded pair.

    Attributes:
        index: the pair's position in the sorted list of all pairs.
        pair: the :class:`~lpips_core.datasets.pairs.Pair`.
        a, b: ``(3, H, W)`` contiguous float32 tensors in ``[0, 1]`` of equal size (after the
            policy), or ``None`` when ``error`` is set. (Tensors travel from the workers through
            shared memory; the transposition to channels-first is done there too.)
        a_size, b_size: ``"HxW"`` of each file as decoded, before the policy (``""`` if unread).
        error_kind: ``""``, ``"unreadable"``, ``"size-mismatch"``, ``"too-small"`` or ``"failed"``.
        error: the message.
        classic: the classic metrics' values by name.
    """

    index: int
    pair: Pair
    a: torch.Tensor | None = None
    b: torch.Tensor | None = None
    a_size: str = ""
    b_size: str = ""
    error_kind: str = ""
    error: str = ""
    classic: dict[str, float] = field(default_factory=dict)


def _center_crop(img: np.ndarray, h: int, w: int) -> np.ndarray:
    top, left = (img.shape[0] - h) // 2, (img.shape[1] - w) // 2
    return np.ascontiguousarray(img[top:top + h, left:left + w])


def _match(a: np.ndarray, b: np.ndarray, mismatch: str) -> tuple[np.ndarray, np.ndarray]:
    if a.shape == b.shape:
        return a, b
    if mismatch == "resize":
        t = torch.from_numpy(b).permute(2, 0, 1)[None]
        return a, resize(t, a.shape[:2]).clamp_(0, 1)[0].permute(1, 2, 0).contiguous().numpy()
    if mismatch == "crop":
        h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
        return _center_crop(a, h, w), _center_crop(b, h, w)
    raise ValueError(f"sizes differ: {a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]} "
                     "(mismatch policy 'error'; use resize or crop)")


def decode_pair(index: int, pair: Pair, *, mismatch: str = "error", classic: Sequence[str] = (),
                max_side: int | None = None) -> Decoded:
    """Read, match and measure one pair; failures are returned in ``error``, never raised."""
    out = Decoded(index, pair)
    try:
        a = load_image(pair.a, max_side=max_side).array
        out.a_size = f"{a.shape[0]}x{a.shape[1]}"
        b = load_image(pair.b, max_side=max_side).array
        out.b_size = f"{b.shape[0]}x{b.shape[1]}"
    except ImageLoadError as exc:
        out.error_kind, out.error = "unreadable", " ".join(str(exc).split())
        return out
    try:
        a, b = _match(a, b, mismatch)
    except ValueError as exc:
        out.error_kind, out.error = "size-mismatch", str(exc)
        return out
    try:
        out.classic = {name: CLASSIC[name](a, b) for name in classic}
    except ValueError as exc:  # e.g. SSIM's 11 px window
        out.error_kind, out.error = "too-small", str(exc)
        return out
    out.a, out.b = (torch.from_numpy(x).permute(2, 0, 1).contiguous() for x in (a, b))
    return out


class PairDataset(Dataset):
    """``pairs[i]`` decoded by :func:`decode_pair` (item ``i`` is the pair of global index ``i``)."""

    def __init__(self, pairs: Sequence[Pair], *, mismatch: str = "error", classic: Sequence[str] = (),
                 max_side: int | None = None):
        if mismatch not in MISMATCH_POLICIES:
            raise ValueError(f"mismatch must be one of {MISMATCH_POLICIES}, got {mismatch!r}")
        self.pairs, self.mismatch, self.classic, self.max_side = list(pairs), mismatch, tuple(classic), max_side

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> Decoded:
        return decode_pair(i, self.pairs[i], mismatch=self.mismatch, classic=self.classic, max_side=self.max_side)


def _as_list(items: list) -> list:
    return items


def default_workers() -> int:
    """Decoding processes: one fewer than the CPUs (the main process runs the network), 1 to 4."""
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def block_loader(dataset: PairDataset, blocks: Sequence[Sequence[int]], *, workers: int | None = None) -> DataLoader:
    """A ``DataLoader`` yielding one ``list[Decoded]`` per block, in order, decoded by ``workers``
    processes (``0``: in this process; ``None``: :func:`default_workers`)."""
    workers = default_workers() if workers is None else int(workers)
    if workers < 0:
        raise ValueError(f"workers must be ≥ 0, got {workers}")
    return DataLoader(dataset, batch_sampler=[list(b) for b in blocks], num_workers=workers,
                      collate_fn=_as_list, prefetch_factor=2 if workers else None,
                      persistent_workers=False)
