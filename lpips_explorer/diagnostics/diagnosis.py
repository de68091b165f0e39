"""The diagnosis of one pair: its score, where the distance comes from, and every check."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from lpips_core.conventions import RESIZE_METHODS
from lpips_core.images import LoadedImage, load_image, min_side_for
from lpips_core.metrics import mse, psnr, ssim
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many
from lpips_explorer.diagnostics.checks import CHECKS, Check, Finding, PairContext, rank_checks, run_checks
from lpips_explorer.diagnostics.measures import Alignment, ResizeOption
from lpips_explorer.diagnostics.tools import alpha_dropped, match_size
from lpips_explorer.text import size_hw

__all__ = ["NATIVE_MAX_SIDE", "SIZE_POLICY", "Diagnosis", "diagnose", "diagnose_files"]

#: Longer side (px) above which :func:`diagnose_files` downscales both files for native scoring
#: (Lanczos, with a notice), bounding the work on a CPU. A full diagnosis passes about 30 images of
#: the pair's size through the backbone (every check's counterfactuals; 29 for a 168×256 RGBA PNG
#: against a JPEG of another size), so its time is about 30 forward passes of one image, and a
#: pass grows with the pixel count (docs/performance.md, "Measurements behind the code's choices").
NATIVE_MAX_SIDE = 1024
#: How a pair of different sizes is scored (stated on the page and in the report).
SIZE_POLICY = "the test image is resized to the reference's size (the reference stays untouched)"


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
        ranking: one :class:`Finding` per check, the largest change of the score first.
        native_size: ``{"reference_hw", "test_hw"}`` the files' own sizes, ``"scored_hw"`` the size
            the pair was scored at, ``"resolution"`` (``"native"`` or ``"working"``), ``"max_side"``
            the cap applied, ``"downscaled"`` (whether the cap shrank a file) and ``"policy"``.
        pending: the ids of the checks not run yet (empty in a finished diagnosis; a partial one,
            passed to ``on_partial`` while :func:`diagnose` runs, has the score, maps and classic
            metrics and the checks done so far, ranked).
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
    ranking: list[Finding] = field(default_factory=list)
    native_size: dict[str, Any] = field(default_factory=dict)
    pending: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every check has run (``pending`` is empty)."""
        return not self.pending

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
    reference_alpha_dropped: np.ndarray | None = None,
    test_alpha_dropped: np.ndarray | None = None,
    originals: tuple[LoadedImage, LoadedImage] | None = None,
    other_size: tuple[str, np.ndarray, np.ndarray] | None = None,
    test_file: bytes | None = None,
    on_partial: Callable[[Diagnosis], None] | None = None,
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
        reference_alpha_dropped, test_alpha_dropped: ``(H, W, 3)`` the files' RGB with alpha
            ignored (:func:`~lpips_explorer.diagnostics.alpha_dropped`), ``None`` skips it.
        originals, other_size, test_file: see :class:`PairContext` (:func:`diagnose_files` fills them).
        on_partial: called with a partial :class:`Diagnosis` as soon as the pair is scored (no checks
            yet, every id ``pending``) and again after each check (the checks so far, ranked), so a
            caller can show the score while the counterfactuals are computed. Not called with the
            finished diagnosis, which is returned.

    Returns:
        A :class:`Diagnosis` (``complete``).

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
                      reference_on_black, test_on_black, reference_alpha_dropped, test_alpha_dropped,
                      originals, other_size, test_file)
    files = ctx.files
    config = {
        "net": model.net, "version": model.version, "lin": model.lin, "convention": convention,
        "size": f"reference size {size_hw(size, labelled=True)}", "resize_method": method,
        "weights": model.weights, "device": str(model.device),
    }
    partial = Diagnosis(
        reference=ref, test=tst, score=score, per_layer=result.per_layer[0].numpy(),
        layer_names=tuple(result.layer_names), spatial_map=layer_maps.sum(0), layer_maps=layer_maps,
        classic=classic, checks=[], resize_options=[], alignment=None, blockiness={}, facts=ctx.facts,
        config=config, ranking=[],
        native_size={"reference_hw": list(files[0].size), "test_hw": list(files[1].size),
                     "scored_hw": list(size), "policy": SIZE_POLICY},
        pending=tuple(spec.id for spec in CHECKS),
    )
    partial = _checks_in_turn(ctx, partial, on_partial)
    return replace(partial, resize_options=ctx.resize_options, alignment=ctx.alignment,
                   blockiness=ctx.blockiness, facts=ctx.facts)


def _checks_in_turn(ctx: PairContext, partial: Diagnosis,
                    on_partial: Callable[[Diagnosis], None] | None) -> Diagnosis:
    """Run the checks of :data:`CHECKS` one at a time on ``ctx``, from ``partial`` (the scored pair,
    no check yet): ``on_partial`` gets the diagnosis before each check; the one returned has every
    check, ranked, and nothing ``pending``."""
    checks: list[Check] = []
    for i, spec in enumerate(CHECKS):
        if on_partial is not None:
            on_partial(partial)
        checks += run_checks(ctx, (spec,))
        partial = replace(partial, checks=list(checks), ranking=rank_checks(checks, partial.score),
                          pending=tuple(s.id for s in CHECKS[i + 1:]))
    return partial


def _load(data: bytes, name: str, **opts) -> LoadedImage:
    src = io.BytesIO(data)
    src.name = name
    return load_image(src, **opts)


def diagnose_files(
    model: LPIPS,
    reference: bytes,
    test: bytes,
    *,
    reference_name: str = "",
    test_name: str = "",
    resolution: Literal["native", "working"] = "native",
    working_side: int = 256,
    max_side: int = NATIVE_MAX_SIDE,
    method: str = "bilinear",
    convention: str = "[-1,1]",
    on_partial: Callable[[Diagnosis], None] | None = None,
) -> Diagnosis:
    """Diagnose two files as uploaded: scored at their own resolution, every check on the originals.

    Each file is loaded with :func:`load_image` (white background, the backbone's minimum side):
    at ``resolution="native"`` with ``max_side`` as the longer-side cap (larger files are
    downscaled with the loader's notice), at ``"working"`` with ``working_side`` (the app's
    working size). When the sizes differ, :data:`SIZE_POLICY` applies (``method``). The file
    facts, blockiness and the shift's units come from the files decoded at full resolution; the
    counterfactuals load the same bytes with the alpha channel dropped, on black, and at the
    other resolution; a JPEG test's own tables re-encode the reference.

    Args:
        reference, test: the raw file bytes; ``reference_name``/``test_name`` label messages.
        resolution: ``"native"`` (default) or ``"working"``.
        working_side, max_side: longer-side limits (pixels, ``>= 1``).
        on_partial: as in :func:`diagnose` (the partial diagnoses carry the size facts already).

    Raises:
        ValueError: ``resolution`` or a side is invalid, or ``method`` unknown.
        lpips_core.images.ImageLoadError: a file the loader refuses.
    """
    if resolution not in ("native", "working"):
        raise ValueError(f"resolution must be 'native' or 'working', got {resolution!r}")
    for label, side in (("working_side", working_side), ("max_side", max_side)):
        if not isinstance(side, (int, np.integer)) or isinstance(side, bool) or side < 1:
            raise ValueError(f"{label} must be a positive int, got {side!r}")
    low = min_side_for(model.net)
    sides = {"native": int(max_side), "working": int(working_side)}
    side = sides[resolution]
    files = [(reference, reference_name), (test, test_name)]
    originals = tuple(_load(d, n, max_side=None) for d, n in files)
    r, t = (_load(d, n, max_side=side, min_side=low) for d, n in files)
    black = [_load(d, n, max_side=side, min_side=low, background=(0.0, 0.0, 0.0)).array if o.had_alpha else None
             for (d, n), o in zip(files, originals)]
    dropped = []
    for (d, n), o in zip(files, originals):
        try:
            raw = alpha_dropped(d) if o.had_alpha else None
            dropped.append(None if raw is None else _load(raw, n, max_side=side, min_side=low).array)
        except (OSError, ValueError):  # a mode Pillow cannot split: the check says what it can
            dropped.append(None)
    other = "working" if resolution == "native" else "native"
    other_label = "the working size" if other == "working" else "native size"
    r2, t2 = (_load(d, n, max_side=sides[other], min_side=low) for d, n in files)
    downscaled = bool(r.downscaled_from or t.downscaled_from)
    size_text = (f"{'native' if resolution == 'native' else 'working'} size, longer side capped at "
                 f"{side} px: scored at {size_hw(r.size, labelled=True)}; {SIZE_POLICY}")

    def finish(d: Diagnosis) -> Diagnosis:
        return replace(d, native_size={**d.native_size, "resolution": resolution, "max_side": side,
                                       "downscaled": downscaled},
                       config={**d.config, "size": size_text})

    return finish(diagnose(
        model, r, t, method=method, convention=convention, reference_on_black=black[0],
        test_on_black=black[1], reference_alpha_dropped=dropped[0], test_alpha_dropped=dropped[1],
        originals=originals, other_size=(other_label, r2.array, t2.array), test_file=test,
        on_partial=None if on_partial is None else (lambda p: on_partial(finish(p)))))
