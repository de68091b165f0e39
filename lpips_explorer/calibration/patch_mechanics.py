"""The mechanics of Eq. 1 on one patch: the cosine identity, the quadrant map, the mechanics table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpips_explorer.distortions import block_dct, gaussian_blur, gaussian_noise, shift
from lpips_core.model import layer_term_maps
from lpips_explorer.synth import texture_patch
from lpips_explorer.calibration.common import _int, _mse, _to_net
from lpips_explorer.calibration.standin import StandInNet, standin_distance

__all__ = ["MECHANICS_COLUMNS", "MECHANICS_ROWS", "Mechanics", "MechanicsRow", "QuadrantCheck", "mechanics"]

#: Row labels of the mechanics table, in order (the reference example's labels).
MECHANICS_ROWS: tuple[str, ...] = ("noise s=0.05", "blur s=1.0", "block DCT q=0.2", "1-px shift")
#: Keys of a :class:`MechanicsRow`, with what each column means.
MECHANICS_COLUMNS: dict[str, str] = {
    "mse": "MSE of the images in [0, 1]",
    "minus1_1": "stand-in distance, inputs in [-1, 1] (correct)",
    "zero_one": "stand-in distance, inputs left in [0, 1]",
    "up2x": "stand-in distance, both images bilinearly upsampled 2x",
}


@dataclass(frozen=True)
class MechanicsRow:
    """One distortion of the mechanics table (see :data:`MECHANICS_COLUMNS`)."""

    mse: float
    minus1_1: float
    zero_one: float
    up2x: float

    def as_dict(self) -> dict[str, float]:
        return {"mse": self.mse, "minus1_1": self.minus1_1, "zero_one": self.zero_one, "up2x": self.up2x}


@dataclass(frozen=True, eq=False)
class QuadrantCheck:
    """Noise added to the top-left quadrant only, and where the spatial map puts the distance.

    Attributes:
        scalar: the stand-in distance (spatial means).
        map_mean: the mean of the ``(H, W)`` spatial map.
        share: the fraction of the map's sum inside the noised quadrant.
        map: ``(H, W)`` float32, the spatial map.
        image: ``(H, W, 3)`` float64, the patch with the noised quadrant.
        quadrant: ``(rows, cols)`` of the noised quadrant (``S // 2`` each).
    """

    scalar: float
    map_mean: float
    share: float
    map: np.ndarray
    image: np.ndarray
    quadrant: tuple[int, int]


@dataclass(frozen=True, eq=False)
class Mechanics:
    """The mechanics of Eq. 1 on one patch (see :func:`mechanics`).

    Attributes:
        cosine_gap: max over layer-3 positions of ``|Σ_c (â − b̂)² − (2 − 2 cos(a, b))|``, which
            is 0 up to float32 rounding (order 1e-7).
        quadrant: the quadrant-noise check.
        rows: :data:`MECHANICS_ROWS` → :class:`MechanicsRow`.
        patch: ``(S, S, 3)`` float64 reference patch in ``[0, 1]``.
        distorted: :data:`MECHANICS_ROWS` → the distorted patch.
        seed, net_seed: the NumPy stream's seed and the stand-in's seed.
    """

    cosine_gap: float
    quadrant: QuadrantCheck
    rows: dict[str, MechanicsRow]
    patch: np.ndarray
    distorted: dict[str, np.ndarray]
    seed: int
    net_seed: int

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: row.as_dict() for name, row in self.rows.items()}


def mechanics(*, seed: int = 0, net_seed: int = 0, size: int = 64) -> Mechanics:
    """The cosine identity, the quadrant-noise map and the mechanics table on one patch.

    Draws from ``numpy.random.default_rng(seed)`` in this order: the patch
    (:func:`lpips_explorer.synth.texture_patch`), noise σ = 0.1 over the whole patch (cosine check at
    layer 3), noise σ = 0.15 on the top-left ``size // 2`` square (quadrant check), noise
    σ = 0.05 (first table row). The other rows are the Gaussian blur σ = 1 (radius 6, reflected
    boundary), the 8 × 8 block DCT with uniform step 0.2 and the one-pixel shift to the right
    with the edge column repeated. Images are float64; the networks see float32.

    Args:
        seed: seed of the NumPy stream, ``>= 0``.
        net_seed: seed of the stand-in, ``>= 0``.
        size: side of the square patch, ``>= 16``.

    Returns:
        :class:`Mechanics`.
    """
    seed = _int(seed, "seed", lo=0)
    size = _int(size, "size", lo=16)
    rng = np.random.default_rng(seed)
    x = texture_patch(rng, size, dtype=np.float64)
    net = StandInNet(net_seed)
    tx = _to_net(x)

    # w = 1: Σ_c (â − b̂)² = 2 − 2 cos(a, b) at every position (checked at layer 3).
    noisy = gaussian_noise(x, 0.1, seed=rng)
    a, b = net.features(tx)[2], net.features(_to_net(noisy))[2]
    term = layer_term_maps([a], [b], None)[0][:, 0]
    cos = (a * b).sum(1)
    cosine_gap = float((term - (2 - 2 * cos)).abs().max())

    half = size // 2
    loc = x.copy()
    loc[:half, :half] = gaussian_noise(x[:half, :half], 0.15, seed=rng)
    tloc = _to_net(loc)
    dmap = standin_distance(net, tx, tloc, spatial=True)[0]
    quadrant = QuadrantCheck(
        scalar=float(standin_distance(net, tx, tloc)[0]),
        map_mean=float(dmap.mean()),
        share=float(dmap[:half, :half].sum() / dmap.sum()),
        map=dmap.numpy().copy(),
        image=loc,
        quadrant=(half, half),
    )

    distorted = {
        "noise s=0.05": gaussian_noise(x, 0.05, seed=rng),
        "blur s=1.0": gaussian_blur(x, 1.0, radius=6, boundary="reflect"),
        "block DCT q=0.2": block_dct(x, 0.2),
        "1-px shift": shift(x, 1, boundary="edge"),
    }
    rows = {}
    for name, d in distorted.items():
        rows[name] = MechanicsRow(
            mse=_mse(x, d),
            minus1_1=float(standin_distance(net, tx, _to_net(d))[0]),
            zero_one=float(standin_distance(net, _to_net(x, convention="[0,1]"),
                                            _to_net(d, convention="[0,1]"))[0]),
            up2x=float(standin_distance(net, _to_net(x, size=2 * size), _to_net(d, size=2 * size))[0]),
        )
    return Mechanics(cosine_gap, quadrant, rows, x, distorted, seed, net.seed)
