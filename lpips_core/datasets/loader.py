"""Decoding pairs in worker processes: a ``torch.utils.data`` dataset of pairs, loaded in blocks.

Each item is one pair, decoded with :func:`lpips_core.images.load_image`, made the same size by
the mismatch policy and, if asked, measured by the classic metrics (all CPU work, so it runs in
the workers while the main process runs the networks). A pair that cannot be read becomes a
:class:`Decoded` with ``error`` set; nothing is raised. Batches are the scorer's *blocks*
(lists of pair indices, see :mod:`lpips_core.datasets.score`), given as the ``batch_sampler``.

A worker decodes a whole block and writes the pairs of each size, channels first, straight into
two shared-memory tensors ``(n, 3, H, W)`` (one for the references, one for the test images):
per block one copy of the pixels and two tensors to hand over, whatever the number of pairs.
The main process gets each pair's ``a``/``b`` as views of those, so a scorer takes a size
bucket's batch without stacking it again (:func:`stack_rows`).

Mismatch policies (``a`` is the reference, ``b`` the test image):

- ``"error"``: a pair whose sizes differ becomes an error row (``size-mismatch``);
- ``"resize"``: the test image is resized to its reference's size (antialiased bilinear in
  ``[0, 1]``, :func:`lpips_core.conventions.resize`);
- ``"crop"``: both are center-cropped to the common ``min(H) × min(W)`` (offsets rounded down).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterator, Literal, Sequence, get_args

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from ..conventions import resize
from ..images import DEFAULT_MAX_PIXELS, ImageLoadError, ImageTooLarge, load_image
from .pairs import Pair
from ..spec import CLASSIC

__all__ = ["MISMATCH_POLICIES", "Decoded", "PairDataset", "block_loader", "default_workers", "decode_pair",
           "stack_rows"]

Mismatch = Literal["error", "resize", "crop"]
MISMATCH_POLICIES: tuple[str, ...] = get_args(Mismatch)


@dataclass
class Decoded:
    """One decoded pair.

    Attributes:
        index: the pair's position in the sorted list of all pairs.
        pair: the :class:`~lpips_core.datasets.pairs.Pair`.
        a, b: the reference and the test image, ``(3, H, W)`` contiguous float32 tensors in
            ``[0, 1]`` of equal size (after the policy), or ``None`` when ``error`` is set. (From
            :func:`block_loader`: rows of the block's tensors of that size, see the module docstring.)
        reference_size, test_size: ``"HxW"`` of each file as decoded, before the policy (``""`` if unread).
        error_kind: ``""``, ``"unreadable"``, ``"too_large"`` (over the pixel budget, or out of
            memory), ``"size-mismatch"``, ``"too-small"`` or ``"failed"``.
        error: the message.
        classic: the classic metrics' values by name.
    """

    index: int
    pair: Pair
    a: torch.Tensor | None = None
    b: torch.Tensor | None = None
    reference_size: str = ""
    test_size: str = ""
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
    raise ValueError(f"sizes differ: reference {a.shape[0]}x{a.shape[1]}, test {b.shape[0]}x{b.shape[1]} "
                     "(mismatch policy 'error'; use resize or crop)")


def _decode_arrays(index: int, pair: Pair, mismatch: str, classic: Sequence[str], max_side: int | None,
                   max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[Decoded, np.ndarray | None, np.ndarray | None]:
    """:func:`decode_pair`'s work, leaving the images as ``(H, W, 3)`` arrays (``None`` on error)."""
    out = Decoded(index, pair)
    try:
        a = load_image(pair.reference, max_side=max_side, max_pixels=max_pixels).array
        out.reference_size = f"{a.shape[0]}x{a.shape[1]}"
        b = load_image(pair.test, max_side=max_side, max_pixels=max_pixels).array
        out.test_size = f"{b.shape[0]}x{b.shape[1]}"
    except ImageTooLarge as exc:
        out.error_kind, out.error = "too_large", " ".join(str(exc).split())
        return out, None, None
    except ImageLoadError as exc:
        out.error_kind, out.error = "unreadable", " ".join(str(exc).split())
        return out, None, None
    try:
        try:
            a, b = _match(a, b, mismatch)
        except ValueError as exc:
            out.error_kind, out.error = "size-mismatch", str(exc)
            return out, None, None
        try:
            out.classic = {name: CLASSIC[name](a, b) for name in classic}
        except ValueError as exc:  # e.g. SSIM's 11 px window
            out.error_kind, out.error = "too-small", str(exc)
            return out, None, None
    except MemoryError:
        out.error_kind, out.error = "too_large", (f"ran out of memory on the {out.reference_size} and {out.test_size} "
                                                  "images; downscale them or lower max_pixels (--max-pixels)")
        out.classic = {}
        return out, None, None
    return out, a, b


def decode_pair(index: int, pair: Pair, *, mismatch: str = "error", classic: Sequence[str] = (),
                max_side: int | None = None, max_pixels: int = DEFAULT_MAX_PIXELS) -> Decoded:
    """Read, match and measure one pair; failures are returned in ``error``, never raised."""
    out, a, b = _decode_arrays(index, pair, mismatch, classic, max_side, max_pixels)
    if a is not None:  # channels first, copied by NumPy (one pass, no thread pool)
        out.a, out.b = (torch.from_numpy(x.transpose(2, 0, 1).copy()) for x in (a, b))
    return out


@dataclass
class _Block:
    """A decoded block as it travels from a worker: the pairs without their images, and per size
    ``(positions in items, a's (n, 3, H, W), b's (n, 3, H, W))``."""

    items: list[Decoded]
    groups: list[tuple[list[int], torch.Tensor, torch.Tensor]]

    def unpack(self) -> list[Decoded]:
        """The items, each pair's ``a``/``b`` a view of its size's tensors."""
        for positions, a, b in self.groups:
            for row, k in enumerate(positions):
                self.items[k].a, self.items[k].b = a[row], b[row]
        return self.items


def _block_tensor(shape: tuple[int, ...], shared: bool = True) -> torch.Tensor:
    """An empty float32 tensor; in a worker (unless not ``shared``), in shared memory (so handing
    it over copies nothing)."""
    if not shared or get_worker_info() is None:
        return torch.empty(shape)
    storage = torch.empty(0)._typed_storage()._new_shared(math.prod(shape), device="cpu")
    return torch.empty(0).new(storage).resize_(shape)


def _decode_block(pairs, indices, mismatch, classic, max_side, max_pixels=DEFAULT_MAX_PIXELS, threads: int = 1,
                  shared: bool = True) -> _Block:
    def one(i: int):
        return _decode_arrays(i, pairs[i], mismatch, classic, max_side, max_pixels)

    if threads > 1 and len(indices) > 1:  # Pillow and NumPy release the GIL while they decode and convert
        with ThreadPoolExecutor(min(threads, len(indices))) as pool:
            decoded = list(pool.map(one, indices))
    else:
        decoded = [one(i) for i in indices]
    by_shape: dict[tuple, list[int]] = {}
    for k, (_, a, _) in enumerate(decoded):
        if a is not None:
            by_shape.setdefault(a.shape, []).append(k)
    groups = []
    for (h, w, c), positions in by_shape.items():
        ta, tb = _block_tensor((len(positions), c, h, w), shared), _block_tensor((len(positions), c, h, w), shared)
        na, nb = ta.numpy(), tb.numpy()
        for row, k in enumerate(positions):  # channels first, straight into the block's tensors
            _, a, b = decoded[k]
            na[row] = a.transpose(2, 0, 1)
            nb[row] = b.transpose(2, 0, 1)
        groups.append((positions, ta, tb))
    return _Block([d for d, _, _ in decoded], groups)


def stack_rows(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(tensors)``, without copying when they are consecutive rows of one contiguous
    tensor (as the pairs of a size in a block from :func:`block_loader` are)."""
    base = tensors[0]._base
    if base is not None and base.is_contiguous() and base.ndim == tensors[0].ndim + 1 and base.shape[0]:
        row = base[0].numel()
        first, rem = divmod(tensors[0].storage_offset() - base.storage_offset(), row)
        if (not rem and first + len(tensors) <= base.shape[0]
                and all(t._base is base and t.shape == base.shape[1:] and t.is_contiguous()
                        and t.storage_offset() == base.storage_offset() + (first + j) * row
                        for j, t in enumerate(tensors))):
            return base[first:first + len(tensors)]
    return torch.stack(list(tensors))


class PairDataset(Dataset):
    """``pairs[i]`` decoded by :func:`decode_pair` (item ``i`` is the pair of global index ``i``)."""

    def __init__(self, pairs: Sequence[Pair], *, mismatch: str = "error", classic: Sequence[str] = (),
                 max_side: int | None = None, max_pixels: int = DEFAULT_MAX_PIXELS):
        if mismatch not in MISMATCH_POLICIES:
            raise ValueError(f"mismatch must be one of {MISMATCH_POLICIES}, got {mismatch!r}")
        self.pairs, self.mismatch, self.classic, self.max_side = list(pairs), mismatch, tuple(classic), max_side
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> Decoded:
        return decode_pair(i, self.pairs[i], mismatch=self.mismatch, classic=self.classic, max_side=self.max_side,
                           max_pixels=self.max_pixels)

    def __getitems__(self, indices: Sequence[int]) -> _Block:
        """A whole block (what a ``DataLoader`` with a ``batch_sampler`` asks for), packed."""
        return _decode_block(self.pairs, indices, self.mismatch, self.classic, self.max_side, self.max_pixels)

    def decode_here(self, indices: Sequence[int]) -> list[Decoded]:
        """A block decoded for use in this process (in a worker too: no shared memory)."""
        return _decode_block(self.pairs, indices, self.mismatch, self.classic, self.max_side, self.max_pixels,
                             shared=False).unpack()

    def decode_threaded(self, indices: Sequence[int], threads: int) -> _Block:
        """:meth:`__getitems__` with the pairs decoded by ``threads`` threads."""
        return _decode_block(self.pairs, indices, self.mismatch, self.classic, self.max_side, self.max_pixels,
                             threads)


def _as_block(block: _Block) -> _Block:
    return block


def default_workers() -> int:
    """Decoding processes: one fewer than the CPUs (the main process runs the network), 1 to 4."""
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def block_loader(dataset: PairDataset, blocks: Sequence[Sequence[int]], *,
                 workers: int | None = None) -> Iterator[list[Decoded]]:
    """One ``list[Decoded]`` per block, in order, decoded by ``workers`` processes (``0``: in
    this process; ``None``: :func:`default_workers`) through a ``DataLoader``.

    The first block is decoded in this process, by one thread per CPU (up to 4), before the
    workers start; they then decode the next blocks while the network runs on the first. (The
    network would otherwise wait for a worker's start-up and a whole block decoded on one CPU.)
    """
    workers = default_workers() if workers is None else int(workers)
    if workers < 0:
        raise ValueError(f"workers must be ≥ 0, got {workers}")
    blocks = [list(b) for b in blocks]
    if workers == 0:
        return (dataset.__getitems__(b).unpack() for b in blocks)
    return _first_here(dataset, blocks, workers)


def _first_here(dataset: PairDataset, blocks: list[list[int]], workers: int) -> Iterator[list[Decoded]]:
    if not blocks:
        return
    first = dataset.decode_threaded(blocks[0], max(1, min(4, os.cpu_count() or 1)))
    rest = None
    if len(blocks) > 1:  # the workers fork after the decoding threads are gone
        rest = iter(DataLoader(dataset, batch_sampler=blocks[1:], num_workers=workers, collate_fn=_as_block,
                               prefetch_factor=2, persistent_workers=False))
    yield first.unpack()
    for block in rest or ():
        yield block.unpack()
