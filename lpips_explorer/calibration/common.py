"""Shared plumbing of the calibration lab: argument checks, threads, inputs."""

from __future__ import annotations

import contextlib
import math
import numbers
from typing import Iterator, Sequence

import numpy as np
import torch

from lpips_core.conventions import to_input
from lpips_core.progress import Progress
from lpips_explorer.synth import _check_int

__all__ = ["DEFAULT_THREADS", "Progress", "torch_threads"]

DEFAULT_THREADS = 4  # the reference example's torch.set_num_threads(4)


def _int(value, name: str, *, lo: int) -> int:
    """``value`` as an ``int >= lo`` (``TypeError`` for a non-integer, ``ValueError`` below ``lo``)."""
    return _check_int(value, name, lo)


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0; got {value!r}")
    return value


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count after.

    ``None`` leaves the count alone. The reference example sets 4 threads; the count does not
    change the results (1, 2 and 4 threads give bit-identical features, fitted weights and table
    cells: docs/performance.md, "Measurements behind the code's choices").
    """
    if n is None:
        yield
        return
    n = _int(n, "threads", lo=1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a - b) ** 2))


def _to_net(images: np.ndarray | Sequence[np.ndarray], *, convention: str = "[-1,1]",
            size: int | None = None) -> torch.Tensor:
    """``(H, W, 3)`` or ``(N, H, W, 3)`` float in ``[0, 1]`` → contiguous ``(N, 3, H', W')`` float32.

    The cast to float32 happens before the convention's arithmetic (``2x − 1`` in float32), as
    :func:`lpips_core.conventions.to_input` does it.
    """
    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ValueError(f"expected images (N, H, W, 3) or (H, W, 3); got shape {arr.shape}")
    x01 = torch.from_numpy(np.ascontiguousarray(arr.transpose(0, 3, 1, 2), dtype=np.float32))
    return to_input(x01, convention=convention, size=size).contiguous()
