"""The diagnosis of one pair: its score, where the distance comes from, and every check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..conventions import RESIZE_METHODS
from ..images import LoadedImage
from ..metrics import mse, psnr, ssim
from ..model import LPIPS
from ..sweeps import lpips_many
from .checks import CHECKS, Check, PairContext, run_checks
from .measures import Alignment, ResizeOption
from .tools import match_size

__all__ = ["Diagnosis", "diagnose"]


@dataclass(frozen=True, eq=False)
class Diagnosis:
    """Everything :func:`diagnose` found about one pair.

    Attributes:
        reference, test: the two images as compared (``test`` brought to the reference's size).
        score: LPIPS of the pair under the model's configuration.
        per_layer, layer_names: the layer terms (they sum to ``score``).
        spatial_map: ``(H, W)`` the summed per-position map at the reference's size.
        layer_maps: ``(L, H, W)`` the per-layer maps.
        classic: ``{"mse", "psnr", "ssim"}`` (``ssim`` is ``nan`` for images under 11 px).
        checks: one :class:`Check` per entry of :data:`CHECKS`, in that order.
        resize_options: what each way of matching the sizes gives.
        alignment: the misalignment estimate, or ``None`` when it could not be computed.
        blockiness: ``{"reference": b, "test": b}`` (see :func:`blockiness`).
        facts: ``{"reference": {...}, "test": {...}}`` from :func:`image_facts`.
        config: net, version, lin, convention, resize method, weights source, device.
    """

    reference: np.ndarray
    test: np.ndarray
    score: float
    per_layer: np.ndarray
    layer_names: tuple[str, ...]
    spatial_map: np.ndarray
    layer_maps: np.ndarray
    classic: dict[str, float]
    checks: list[Check]
    resize_options: list[ResizeOption]
    alignment: Alignment | None
    blockiness: dict[str, float]
    facts: dict[str, dict[str, Any]]
    config: dict[str, Any]

    def check(self, check_id: str) -> Check:
        """The check with id ``check_id`` (see :data:`CHECK_IDS`).

        Raises:
            KeyError: no check has that id.
        """
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(f"no check with id {check_id!r}; ids: {[c.id for c in self.checks]}")


def diagnose(
    model: LPIPS,
    reference: LoadedImage,
    test: LoadedImage,
    *,
    method: str = "bilinear",
    convention: str = "[-1,1]",
    reference_on_black: np.ndarray | None = None,
    test_on_black: np.ndarray | None = None,
) -> Diagnosis:
    """Run every check of :data:`CHECKS` on a pair and compute where its distance comes from.

    Args:
        model: the LPIPS model whose score is being debugged.
        reference, test: the two files as loaded by :func:`load_image`.
        method: how the test is resized to the reference's size when they differ
            (one of :data:`RESIZE_METHODS`).
        convention: the range convention of the main score (``"[-1,1]"`` is correct).
        reference_on_black, test_on_black: ``(H, W, 3)`` the same files loaded with a black
            background (``load_image(..., background=(0, 0, 0))``), for images with alpha;
            ``None`` skips that comparison.

    Returns:
        A :class:`Diagnosis`.

    Raises:
        ValueError: ``method`` is not one of :data:`RESIZE_METHODS`.
    """
    if method not in RESIZE_METHODS:
        raise ValueError(f"method must be one of {RESIZE_METHODS}, got {method!r}")
    ref = reference.array
    size = ref.shape[:2]
    tst = match_size(test.array, size, method=method)
    result = lpips_many(model, ref, [tst], convention=convention, spatial=True)
    score = float(result.total[0])
    layer_maps = result.layer_maps[0].numpy()
    try:
        ssim_value = ssim(ref, tst)
    except ValueError:
        ssim_value = float("nan")
    classic = {"mse": mse(ref, tst), "psnr": psnr(ref, tst), "ssim": ssim_value}
    ctx = PairContext(model, reference, test, ref, tst, score, method, convention,
                      reference_on_black, test_on_black)
    checks = run_checks(ctx, CHECKS)
    config = {
        "net": model.net, "version": model.version, "lin": model.lin, "convention": convention,
        "size": f"reference size {size[0]}×{size[1]} (H×W)", "resize_method": method,
        "weights": model.weights, "device": str(model.device),
    }
    return Diagnosis(
        reference=ref, test=tst, score=score, per_layer=result.per_layer[0].numpy(),
        layer_names=tuple(result.layer_names), spatial_map=layer_maps.sum(0), layer_maps=layer_maps,
        classic=classic, checks=checks, resize_options=ctx.resize_options, alignment=ctx.alignment,
        blockiness=ctx.blockiness, facts=ctx.facts, config=config,
    )
