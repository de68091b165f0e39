"""The toy layer of the reference documents: 2 channels on a 3×3 grid, small enough to draw.

Each position holds a 2-vector per image, so every feature vector is an arrow in the plane. The
raw vectors below are our own choice (non-negative, as after a ReLU, with deliberately different
lengths so that the unit normalisation has something to remove); everything derived from them is
computed by the engine's own per-layer code, :func:`lpips_core.model.unit_normalize` and
:func:`lpips_core.model.layer_term_maps`, never re-derived here.

The numbers it shows (weights ``w = (1, 0.6)`` on the difference, Eq. 1's ``w ⊙ Δ``; the engine
applies ``v = w² = (1, 0.36)`` to the squared differences, the reference package's form):

* bottom right, directions 0° and 90° (channel 1 against channel 2): ``Δ = (1, −1)``, weighted
  term ``1 + 0.36 = 1.36``, unweighted ``2 − 2 cos 90° = 2``;
* centre, directions 30° and 70° (40° apart): weighted ``≈ 0.344``, unweighted
  ``2 − 2 cos 40° ≈ 0.468``;
* the seven other positions differ by 8°–9°; the mean of the nine weighted terms is
  ``d_l ≈ 0.20``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lpips_core.model import layer_term_maps, unit_normalize

__all__ = ["TOY_ANGLES", "TOY_LENGTHS", "TOY_WEIGHTS", "ToyLayer", "toy_layer"]

#: Per position ``(row, col)``: the directions (degrees from the channel-1 axis) of the reference
#: image's and the distorted image's feature vectors.
TOY_ANGLES: dict[tuple[int, int], tuple[float, float]] = {
    (0, 0): (20.0, 29.0),
    (0, 1): (45.0, 53.0),
    (0, 2): (62.0, 70.0),
    (1, 0): (12.0, 20.0),
    (1, 1): (30.0, 70.0),   # the centre: 40° apart
    (1, 2): (80.0, 72.0),
    (2, 0): (36.0, 45.0),
    (2, 1): (55.0, 47.0),
    (2, 2): (0.0, 90.0),    # bottom right: channel 1 against channel 2
}
#: Per position: the lengths of the two raw vectors (the normalisation removes them).
TOY_LENGTHS: dict[tuple[int, int], tuple[float, float]] = {
    (0, 0): (1.0, 0.7),
    (0, 1): (1.4, 1.2),
    (0, 2): (0.6, 0.9),
    (1, 0): (1.1, 1.5),
    (1, 1): (1.2, 0.8),
    (1, 2): (0.8, 1.0),
    (2, 0): (1.3, 0.9),
    (2, 1): (0.7, 1.1),
    (2, 2): (1.0, 1.0),
}
#: The toy layer's channel weights in Eq. 1's form (on the difference).
TOY_WEIGHTS: tuple[float, float] = (1.0, 0.6)


@dataclass(frozen=True, eq=False)
class ToyLayer:
    """The toy layer, every number computed by the engine.

    Attributes:
        x_raw, y_raw: ``(3, 3, 2)`` float64, the raw (non-negative) feature vectors per position.
        x_hat, y_hat: ``(3, 3, 2)``, the same after :func:`unit_normalize`.
        w: ``(2,)`` weights on the difference (Eq. 1's ``w ⊙ Δ``).
        v: ``(2,)`` the engine's weights on the squared differences, ``v = w²``.
        terms: ``(3, 3)`` per-position terms with ``v`` (:func:`layer_term_maps`).
        terms_unweighted: ``(3, 3)`` per-position terms with every channel weighted 1.
        angles: ``(3, 3)`` the angle between the two vectors at each position, degrees.
        d_l: the layer's value, the spatial mean of ``terms``.
        d_l_unweighted: the spatial mean of ``terms_unweighted``.
    """

    x_raw: np.ndarray
    y_raw: np.ndarray
    x_hat: np.ndarray
    y_hat: np.ndarray
    w: np.ndarray
    v: np.ndarray
    terms: np.ndarray
    terms_unweighted: np.ndarray
    angles: np.ndarray
    d_l: float
    d_l_unweighted: float


def _raw(which: int) -> np.ndarray:
    out = np.zeros((3, 3, 2))
    for (i, j), angles in TOY_ANGLES.items():
        a = math.radians(angles[which])
        length = TOY_LENGTHS[(i, j)][which]
        # Exact zeros on the axes (cos 90° is 6e-17 in floating point): a ReLU output is exactly 0.
        out[i, j] = [0.0 if angles[which] == 90 else length * math.cos(a),
                     0.0 if angles[which] == 0 else length * math.sin(a)]
    return out


def toy_layer(w: tuple[float, float] = TOY_WEIGHTS) -> ToyLayer:
    """Build the toy layer and run it through the engine's per-layer code.

    Args:
        w: the two channel weights on the difference (Eq. 1's form), non-negative; the engine
            receives ``v = w²``.

    Returns:
        A :class:`ToyLayer`.

    Raises:
        ValueError: ``w`` is not two finite non-negative numbers.

    Example:
        >>> toy = toy_layer()
        >>> round(float(toy.terms[2, 2]), 6), round(toy.d_l, 2)
        (1.36, 0.2)
    """
    w_arr = np.asarray(w, dtype=np.float64)
    if w_arr.shape != (2,) or not np.isfinite(w_arr).all() or (w_arr < 0).any():
        raise ValueError(f"w must be two finite non-negative weights, got {w!r}")
    x_raw, y_raw = _raw(0), _raw(1)
    # (3, 3, 2) -> (1, 2, 3, 3): the engine's (N, C, H, W) layout.
    fx = torch.from_numpy(x_raw).permute(2, 0, 1)[None]
    fy = torch.from_numpy(y_raw).permute(2, 0, 1)[None]
    hx, hy = unit_normalize(fx), unit_normalize(fy)
    v = torch.from_numpy(w_arr**2)
    weighted = layer_term_maps([hx], [hy], [v])[0][0, 0].numpy()
    unweighted = layer_term_maps([hx], [hy], None)[0][0, 0].numpy()
    x_hat = hx[0].permute(1, 2, 0).numpy()
    y_hat = hy[0].permute(1, 2, 0).numpy()
    cos = np.clip((x_hat * y_hat).sum(-1), -1.0, 1.0)
    return ToyLayer(
        x_raw=x_raw, y_raw=y_raw, x_hat=x_hat, y_hat=y_hat, w=w_arr, v=w_arr**2,
        terms=weighted, terms_unweighted=unweighted, angles=np.degrees(np.arccos(cos)),
        d_l=float(weighted.mean()), d_l_unweighted=float(unweighted.mean()),
    )
