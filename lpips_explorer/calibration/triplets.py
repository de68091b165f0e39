"""Toy 2AFC triplets whose answers are fixed by construction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lpips_explorer.distortions import block_dct, gaussian_noise, shift
from lpips_explorer.synth import texture_patch
from lpips_core.progress import report
from lpips_explorer.calibration.common import Progress, _int, _mse, _to_net

__all__ = ["DCT_STEPS", "KINDS", "Triplets", "make_triplets"]

#: The two kinds of "far" patch in the toy 2AFC.
KINDS: tuple[str, ...] = ("noise", "dct")
#: Block-DCT quantisation steps searched (ascending) for a DCT triplet.
DCT_STEPS: np.ndarray = np.linspace(0.02, 1, 50)


@dataclass(frozen=True, eq=False)
class Triplets:
    """Toy 2AFC triplets with answers fixed by construction.

    Attributes:
        ref, x0, x1: ``(N, S, S, 3)`` float64 in ``[0, 1]``.
        h: ``(N,)`` float64: 1 when ``x1`` is the closer patch (the shift), 0 when ``x0`` is.
        kind: ``(N,)`` str, ``"noise"`` or ``"dct"``: what the farther patch carries.
        ratio: ``(N,)`` the drawn target ratio MSE(far) / MSE(shift) in ``[0.5, 2)`` (the
            realised MSE of a DCT patch is at least the target; clipping can lower noise's).
        seed: the NumPy seed they came from.
    """

    ref: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    h: np.ndarray
    kind: np.ndarray
    ratio: np.ndarray
    seed: int

    def __len__(self) -> int:
        return len(self.h)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``ref, x0, x1`` as ``(N, 3, S, S)`` float32 network inputs in ``[-1, 1]``."""
        return _to_net(self.ref), _to_net(self.x0), _to_net(self.x1)


def _dct_far(x: np.ndarray, target: float) -> np.ndarray:
    """Block DCT with the smallest step of :data:`DCT_STEPS` whose MSE reaches ``target`` (else 1)."""
    for q in DCT_STEPS:
        far = block_dct(x, float(q))
        if _mse(x, far) >= target:
            return far
    return block_dct(x, 1.0)


def make_triplets(n: int, seed: int, *, size: int = 64, progress: Progress | None = None) -> Triplets:
    """Draw ``n`` triplets from ``numpy.random.default_rng(seed)``.

    Per triplet: a patch ``x`` (:func:`lpips_explorer.synth.texture_patch`); ``near`` = ``x`` shifted
    one pixel right, edge column repeated; a target MSE = MSE(x, near) · U(0.5, 2); a coin
    ``< 0.5`` for noise (σ = √target, clipped) else the block DCT of :func:`_dct_far`; a coin
    ``< 0.5`` to put the shift second (``h = 1``), else first (``h = 0``).

    Args:
        n: number of triplets, ``>= 1``.
        seed: ``>= 0``.
        size: patch side, ``>= 16``.
        progress: ``progress(done, total)`` in triplets drawn (:mod:`lpips_core.progress`).
    """
    n = _int(n, "n", lo=1)
    seed = _int(seed, "seed", lo=0)
    size = _int(size, "size", lo=16)
    rng = np.random.default_rng(seed)
    ref, x0, x1 = (np.empty((n, size, size, 3)) for _ in range(3))
    h, ratio = np.empty(n), np.empty(n)
    kind = np.empty(n, dtype="<U5")
    step = max(1, n // 50)
    for i in range(n):
        x = texture_patch(rng, size, dtype=np.float64)
        near = shift(x, 1, boundary="edge")
        ratio[i] = rng.uniform(0.5, 2)
        target = _mse(x, near) * ratio[i]
        if rng.random() < 0.5:
            kind[i], far = "noise", gaussian_noise(x, math.sqrt(target), seed=rng)
        else:
            kind[i], far = "dct", _dct_far(x, target)
        if rng.random() < 0.5:
            x0[i], x1[i], h[i] = far, near, 1.0
        else:
            x0[i], x1[i], h[i] = near, far, 0.0
        ref[i] = x
        if (i + 1) % step == 0 or i + 1 == n:
            report(progress, i + 1, n)
    return Triplets(ref, x0, x1, h, kind, ratio, seed)
