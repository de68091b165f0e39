"""One pair seen layer by layer (the "Inside a layer" page)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lpips_core.conventions import to_input
from lpips_core.model import LPIPS, layer_term_maps

__all__ = ["LayerBreakdown", "layer_breakdown"]


@dataclass(frozen=True, eq=False)
class LayerBreakdown:
    """One pair seen layer by layer, at each layer's native grid (CPU NumPy arrays).

    Attributes:
        layer_names: the ``L`` taps.
        total: the LPIPS value; ``per_layer`` ``(L,)`` its terms ``d_l``.
        features_ref, features_dist: per layer ``(C_l, H_l, W_l)``, the unit-normalised
            activations of the reference and the distorted image.
        term_maps: per layer ``(H_l, W_l)``, Eq. 1's per-position terms (mean = ``d_l``).
        contributions: per layer ``(C_l,)``, each channel's ``v_c · mean_{h,w} Δ_c²``
            (:meth:`LPIPS.channel_terms` times :attr:`LPIPS.channel_weights`, ``v = 1`` for the
            baseline); they sum to ``d_l``.
        weights: per layer ``(C_l,)`` the lin weights ``v``, or ``None`` for the baseline.
    """

    layer_names: tuple[str, ...]
    total: float
    per_layer: np.ndarray
    features_ref: list[np.ndarray]
    features_dist: list[np.ndarray]
    term_maps: list[np.ndarray]
    contributions: list[np.ndarray]
    weights: list[np.ndarray] | None


def layer_breakdown(model: LPIPS, reference: np.ndarray, distorted: np.ndarray, *,
                    convention: str = "[-1,1]") -> LayerBreakdown:
    """Features, per-position terms and per-channel contributions of one pair, every layer.

    The reference goes through :meth:`LPIPS.reference_features` (cached), the distorted image
    through one forward pass; ``total`` and ``per_layer`` come from
    :meth:`LPIPS.compare_features`, the maps from :func:`layer_term_maps`.

    Args:
        reference, distorted: ``(H, W, 3)`` float arrays in ``[0, 1]``, the same shape.

    Raises:
        ValueError: the two shapes differ.
    """
    if np.shape(reference) != np.shape(distorted):
        raise ValueError(f"the pair differs in shape: {np.shape(reference)} and {np.shape(distorted)}")
    fx = model.reference_features(to_input(reference, convention=convention))
    fy = model.features(to_input(distorted, convention=convention))
    res = model.compare_features(fx, fy, spatial=False)
    weights = model.channel_weights
    with torch.inference_mode():
        maps = [m[0, 0].cpu().numpy() for m in layer_term_maps(fx.maps, fy.maps, weights)]
    w_np = None if weights is None else [w.detach().cpu().numpy().ravel() for w in weights]
    terms = model.channel_terms(fx, fy)
    contributions = [t[0].numpy() * (1.0 if w_np is None else w_np[i]) for i, t in enumerate(terms)]
    return LayerBreakdown(
        layer_names=tuple(model.layer_names), total=float(res.total[0]), per_layer=res.per_layer[0].numpy(),
        features_ref=[m[0].cpu().numpy() for m in fx.maps], features_dist=[m[0].cpu().numpy() for m in fy.maps],
        term_maps=maps, contributions=contributions, weights=w_np,
    )
