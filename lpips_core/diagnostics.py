"""Why is this LPIPS score what it is? Checks on an image pair, each with its effect on the score.

Pure analysis behind the "Debug a score" page (no Streamlit). Given two images loaded by
:func:`lpips_core.images.load_image` and a model, :func:`diagnose` reports

* **size**: whether the two differ, and the LPIPS each way of matching them gives;
* **bit depth and value range**: what the files stored and what range the pixels span, and the
  score the same pair gets when fed in a wrong range convention;
* **alpha**: transparency composited on white (the loader's default) versus on black;
* **grayscale**: a gray image against a colour one, and the score of the pair in gray;
* **EXIF orientation**: the tag the loader applied, and the score had it been ignored;
* **misalignment**: a translation estimated by phase correlation
  (:func:`skimage.registration.phase_cross_correlation`, sub-pixel), and LPIPS before and
  after undoing it on the same central crop;
* **JPEG blockiness** (:func:`blockiness`), and for scale the scores of the reference itself
  re-encoded as JPEG at a few qualities;

and where the distance comes from (per-layer terms and the spatial map). :func:`build_report`
turns a :class:`Diagnosis` into a JSON-ready dict with the full configuration and library
versions. :func:`layer_breakdown` shows one pair layer by layer (features, per-position terms,
per-channel contributions) for the "Inside a layer" page.

Every LPIPS score goes through :func:`lpips_core.sweeps.lpips_many` (the reference image's
features are computed once per configuration and reused).
"""

from __future__ import annotations

import io
import json
import math
import platform
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import torch
from PIL import Image

from . import __version__ as _LPIPS_CORE_VERSION
from .conventions import RESIZE_METHODS, resize, to_input, to_tensor
from .distortions import jpeg, shift
from .images import LoadedImage, image_to_png_bytes, min_side_for
from .metrics import mse, psnr, ssim
from .model import LPIPS, layer_term_maps
from .sweeps import lpips_many

__all__ = [
    "Alignment",
    "Check",
    "Diagnosis",
    "ResizeOption",
    "blockiness",
    "build_report",
    "demo_pair",
    "diagnose",
    "estimate_shift",
    "image_facts",
    "LayerBreakdown",
    "layer_breakdown",
    "library_versions",
    "match_size",
    "report_json",
    "undo_exif",
]

Status = Literal["ok", "warning", "info"]
_LUMA = np.array([0.299, 0.587, 0.114])


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Check:
    """One check: what was found and what it does to the score.

    Attributes:
        name: e.g. ``"Size"``.
        status: ``"ok"`` (nothing to worry about), ``"warning"`` (it changes the score) or
            ``"info"``.
        finding: what the check found, one or two sentences.
        effect: what it does to the score, with the numbers.
        scores: the numbers behind ``effect`` (for the JSON report).
    """

    name: str
    status: Status
    finding: str
    effect: str
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ResizeOption:
    """One way of bringing the pair to a common size, and the LPIPS it gives."""

    label: str
    method: str
    size: tuple[int, int]
    lpips: float
    note: str


@dataclass(frozen=True)
class Alignment:
    """The estimated translation of the test image and LPIPS around undoing it.

    Attributes:
        dy, dx: the shift (pixels, down and right) that moves the test image onto the reference,
            as returned by phase correlation.
        crop: the border (pixels per side) removed from both images for the before/after scores,
            so that no extended border pixel is compared.
        lpips_before, lpips_after: LPIPS on that central crop, unaligned and aligned; ``nan`` when
            the crop would leave an image too small for the backbone.
    """

    dy: float
    dx: float
    crop: int
    lpips_before: float
    lpips_after: float


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
        checks: the checks in page order.
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


# --------------------------------------------------------------------------- small tools
def _luma(img: np.ndarray) -> np.ndarray:
    return np.asarray(img, dtype=np.float64) @ _LUMA


def _is_gray(img: np.ndarray, tol: float = 1.0 / 512) -> bool:
    a = np.asarray(img)
    return bool(np.abs(a[..., 0] - a[..., 1]).max() <= tol and np.abs(a[..., 1] - a[..., 2]).max() <= tol)


def match_size(img: np.ndarray, size: tuple[int, int], *, method: str = "bilinear") -> np.ndarray:
    """Resize ``(H, W, 3)`` in ``[0, 1]`` to ``size = (H', W')`` with the engine's resize.

    Uses :func:`lpips_core.conventions.resize` (antialiased bilinear by default), the same
    resampling the model's ``size`` option applies, so the numbers match what a user of the
    library would get. Returns float32 ``(H', W', 3)``; the image itself when the size agrees.
    """
    if method not in RESIZE_METHODS:
        raise ValueError(f"method must be one of {RESIZE_METHODS}, got {method!r}")
    if tuple(img.shape[:2]) == tuple(size):
        return img
    out = resize(to_tensor(img), tuple(size), method=method)[0].permute(1, 2, 0).clamp_(0, 1)
    return np.ascontiguousarray(out.numpy(), dtype=np.float32)


def image_facts(img: LoadedImage) -> dict[str, Any]:
    """The facts about one loaded file that can explain a score (JSON-ready).

    ``value_min``/``value_max`` are over the decoded ``[0, 1]`` array; ``levels`` is the number of
    distinct values in its first channel (256 at most for 8-bit data; fewer means a reduced or
    quantised range).
    """
    a = img.array
    return {
        "name": img.name,
        "format": img.format,
        "mode": img.mode,
        "stored_size_wh": list(img.original_size),
        "size_hw": list(img.size),
        "bit_depth": img.bit_depth,
        "value_min": float(a.min()),
        "value_max": float(a.max()),
        "levels": int(np.unique(a[..., 0]).size),
        "had_alpha": img.had_alpha,
        "was_grayscale": img.was_grayscale,
        "effectively_grayscale": _is_gray(a),
        "exif_orientation": img.exif_orientation,
        "n_frames": img.n_frames,
        "downscaled_from_hw": list(img.downscaled_from) if img.downscaled_from else None,
        "upscaled_from_hw": list(img.upscaled_from) if img.upscaled_from else None,
        "icc_profile": img.icc_profile,
        "notices": list(img.notices),
    }


def undo_exif(img: np.ndarray, orientation: int) -> np.ndarray:
    """The image as stored in the file, before its EXIF orientation ``orientation`` was applied.

    The loader applies Pillow's transpose for tags 2–8; this applies the inverse (tags 6 and 8
    are rotations by ±90° and invert each other; the other transposes are their own inverse).
    Tag 1 (or any other value) returns the image unchanged.
    """
    a = np.asarray(img)
    inverse = {
        2: lambda x: x[:, ::-1],
        3: lambda x: x[::-1, ::-1],
        4: lambda x: x[::-1],
        5: lambda x: x.transpose(1, 0, 2),
        6: lambda x: np.rot90(x, 1),      # applied: 90° clockwise; undo: counter-clockwise
        7: lambda x: np.rot90(x, 2).transpose(1, 0, 2),
        8: lambda x: np.rot90(x, -1),     # applied: 90° counter-clockwise; undo: clockwise
    }
    fn = inverse.get(int(orientation))
    return a if fn is None else np.ascontiguousarray(fn(a))


def estimate_shift(reference: np.ndarray, test: np.ndarray, *, upsample: int = 10) -> tuple[float, float]:
    """Translation between two same-size images by phase correlation, to ``1/upsample`` px.

    Returns:
        ``(dy, dx)``: shifting ``test`` by ``dy`` down and ``dx`` right best matches
        ``reference`` (:func:`skimage.registration.phase_cross_correlation` on the luma,
        ``normalization="phase"``, ``upsample_factor=upsample``).
    """
    from skimage.registration import phase_cross_correlation

    if reference.shape != test.shape:
        raise ValueError(f"estimate_shift needs equal shapes, got {reference.shape} and {test.shape}")
    moved, _, _ = phase_cross_correlation(_luma(reference), _luma(test), upsample_factor=upsample)
    return float(moved[0]), float(moved[1])


def blockiness(img: np.ndarray, *, block: int = 8) -> float:
    """How much stronger luma steps are across ``block``-pixel boundaries than elsewhere.

    Definition: with ``Y`` the BT.601 luma, take the mean absolute difference between
    horizontally adjacent pixels over the column pairs that straddle a block boundary
    (columns ``kB − 1`` and ``kB``, grid anchored at the top-left pixel as JPEG's is) and
    divide it by the same mean over all other adjacent column pairs; do the same for rows; the
    blockiness is the mean of the two ratios. About 1 for an image without a block grid; well
    above 1 (e.g. 1.5–3) for a strongly compressed JPEG. A flat image gives 1.

    Args:
        img: ``(H, W, 3)`` float in ``[0, 1]``, at least ``2 · block`` pixels per side.
        block: the block size (8 for JPEG).

    Raises:
        ValueError: an image too small for two blocks per side.
    """
    y = _luma(img)
    h, w = y.shape
    if min(h, w) < 2 * block:
        raise ValueError(f"blockiness needs at least {2 * block} pixels per side, got {h}×{w}")
    ratios = []
    for d in (np.abs(np.diff(y, axis=1)), np.abs(np.diff(y, axis=0)).T):
        idx = np.arange(d.shape[1])
        on = (idx + 1) % block == 0
        across, within = float(d[:, on].mean()), float(d[:, ~on].mean())
        ratios.append(1.0 if within == 0 and across == 0 else (across / within if within > 0 else float("inf")))
    return float(np.mean(ratios))


def demo_pair(reference: np.ndarray, *, dx: float = 3.0, dy: float = 2.0, quality: int = 30) -> tuple[bytes, bytes]:
    """Files for trying the checks without uploads: the reference as PNG, a test as JPEG.

    The test image is the reference shifted by ``(dx, dy)`` pixels (``"reflect"`` boundary) and
    saved as a baseline JPEG of ``quality`` (4:2:0), so the misalignment and blockiness checks
    have something to find. Both go through :func:`load_image` exactly like uploads.
    """
    moved = shift(np.asarray(reference, dtype=np.float32), dx, dy, boundary="reflect")
    buf = io.BytesIO()
    Image.fromarray(np.rint(moved * 255.0).astype(np.uint8)).save(buf, format="JPEG", quality=int(quality))
    return image_to_png_bytes(np.asarray(reference, dtype=np.float32)), buf.getvalue()


def _many(model: LPIPS, ref: np.ndarray, images: Sequence[np.ndarray], **opts) -> list[float]:
    return [float(v) for v in lpips_many(model, ref, list(images), **opts).total]


def _fmt(v: float) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.4f}"


def _ratio_text(value: float, base: float) -> str:
    if not (math.isfinite(value) and math.isfinite(base)) or base <= 0:
        return ""
    return f" (×{value / base:.2f})"


# --------------------------------------------------------------------------- inside the layers
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


# --------------------------------------------------------------------------- resize options
def resize_options(model: LPIPS, reference: np.ndarray, test: np.ndarray,
                   *, convention: str = "[-1,1]") -> list[ResizeOption]:
    """The LPIPS each way of bringing the pair to one size gives.

    Equal sizes: the native pair, and both resized to 64×64 (the BAPPS patch size the lin
    weights were fitted on) and 256×256. Different sizes: the test resized to the reference's
    size with each of :data:`RESIZE_METHODS`; the reference resized to the test's size; both
    resized to 256×256 (ignores the aspect ratio); and the central crop to the common size
    (no resampling; only meaningful when the two differ by a border).
    """
    h, w = reference.shape[:2]
    th, tw = test.shape[:2]
    opts = dict(convention=convention)
    out: list[ResizeOption] = []
    if (h, w) == (th, tw):
        native = _many(model, reference, [test], **opts)[0]
        out.append(ResizeOption("native size", "none", (h, w), native, "the pair as loaded"))
        for side in (64, 256):
            v = _many(model, reference, [test], size=side, **opts)[0]
            out.append(ResizeOption(f"both → {side}×{side}", "bilinear", (side, side), v,
                                    "the model's size option (antialiased bilinear)"))
        return out
    moved = [match_size(test, (h, w), method=m) for m in RESIZE_METHODS]
    for m, v in zip(RESIZE_METHODS, _many(model, reference, moved, **opts)):
        out.append(ResizeOption(f"test → reference size ({m})", m, (h, w), v,
                                "the reference stays untouched" if m == "bilinear" else f"{m} interpolation"))
    ref_small = match_size(reference, (th, tw))
    out.append(ResizeOption("reference → test size (bilinear)", "bilinear", (th, tw),
                            _many(model, ref_small, [test], **opts)[0], "the test stays untouched"))
    sq_ref, sq_test = match_size(reference, (256, 256)), match_size(test, (256, 256))
    out.append(ResizeOption("both → 256×256 (bilinear)", "bilinear", (256, 256),
                            _many(model, sq_ref, [sq_test], **opts)[0], "ignores the aspect ratio"))
    ch, cw = min(h, th), min(w, tw)
    if min(ch, cw) >= min_side_for(model.net):
        def crop(a):
            y0, x0 = (a.shape[0] - ch) // 2, (a.shape[1] - cw) // 2
            return np.ascontiguousarray(a[y0:y0 + ch, x0:x0 + cw])
        out.append(ResizeOption(f"central crop to {ch}×{cw}", "crop", (ch, cw),
                                _many(model, crop(reference), [crop(test)], **opts)[0],
                                "no resampling; valid only if the images differ by a border"))
    return out


# --------------------------------------------------------------------------- alignment
def alignment(model: LPIPS, reference: np.ndarray, test: np.ndarray, *, convention: str = "[-1,1]",
              upsample: int = 10) -> Alignment:
    """Estimate the test image's translation and score the central crop before and after undoing it.

    The test is moved by the estimated ``(dy, dx)`` with :func:`lpips_core.distortions.shift`
    (bilinear for fractions, ``"edge"`` boundary); both images then lose ``ceil(max |d|)`` pixels
    on every side, so the extended border never enters either score.
    """
    dy, dx = estimate_shift(reference, test, upsample=upsample)
    crop = int(math.ceil(max(abs(dy), abs(dx)) - 1e-9))
    h, w = reference.shape[:2]
    if min(h, w) - 2 * crop < min_side_for(model.net):
        return Alignment(dy, dx, crop, float("nan"), float("nan"))
    aligned = shift(np.asarray(test, dtype=np.float32), dx, dy, boundary="edge")

    def c(a):
        return np.ascontiguousarray(a[crop:h - crop, crop:w - crop])

    before, after = _many(model, c(reference), [c(test), c(aligned)], convention=convention)
    return Alignment(dy, dx, crop, before, after)


# --------------------------------------------------------------------------- the diagnosis
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
    """Run every check on a pair and compute where its distance comes from.

    Args:
        model: the LPIPS model whose score is being debugged.
        reference, test: the two files as loaded by :func:`load_image`.
        method: how the test is resized to the reference's size when they differ
            (one of :data:`RESIZE_METHODS`).
        convention: the range convention of the main score (``"[-1,1]"`` is correct).
        reference_on_black, test_on_black: the same files loaded with a black background
            (``load_image(..., background=(0, 0, 0))``), for images with alpha; ``None`` skips
            that comparison.

    Returns:
        A :class:`Diagnosis`.
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
    facts = {"reference": image_facts(reference), "test": image_facts(test)}
    checks: list[Check] = []

    # -- size
    options = resize_options(model, ref, test.array, convention=convention)
    if tuple(test.array.shape[:2]) != tuple(size):
        vals = [o.lpips for o in options]
        ar_ref, ar_test = size[1] / size[0], test.array.shape[1] / test.array.shape[0]
        aspect = (" Their aspect ratios differ too, so resizing also stretches the test image."
                  if abs(ar_ref - ar_test) > 0.01 else "")
        checks.append(Check(
            "Size", "warning",
            f"The reference is {size[0]}×{size[1]} px and the test {test.array.shape[0]}×{test.array.shape[1]} px "
            f"(H×W); LPIPS needs one size, so the test was resized to the reference's size ({method}).{aspect}",
            f"The way the sizes are matched moves the score between {_fmt(min(vals))} and {_fmt(max(vals))} "
            f"(see the table); this score uses {method}: {_fmt(score)}.",
            {o.label: o.lpips for o in options},
        ))
    else:
        checks.append(Check(
            "Size", "ok", f"Both images are {size[0]}×{size[1]} px (H×W): no resizing needed.",
            "Resizing both (as a model's size option does) would change the score: "
            + ", ".join(f"{o.label}: {_fmt(o.lpips)}" for o in options[1:]) + ".",
            {o.label: o.lpips for o in options},
        ))

    # -- bit depth and value range
    wrong = _many(model, ref, [tst], convention="[0,1]") + _many(model, ref, [tst], convention="[0,255]")
    deep = [n for n, f in facts.items() if f["bit_depth"] > 8]
    narrow = [n for n, f in facts.items() if f["value_max"] - f["value_min"] < 0.5]
    ranges = "; ".join(
        f"{n}: {f['bit_depth']}-bit {f['mode']}, values {f['value_min']:.3f}–{f['value_max']:.3f}, "
        f"{f['levels']} levels" for n, f in facts.items())
    effect = (f"The pixels reach the network as [−1, 1] (correct). Fed as [0, 1] the score would be "
              f"{_fmt(wrong[0])}{_ratio_text(wrong[0], score)}, fed as [0, 255] {_fmt(wrong[1])}"
              f"{_ratio_text(wrong[1], score)}, instead of {_fmt(score)}.")
    scores = {"[-1,1]": score, "[0,1]": wrong[0], "[0,255]": wrong[1]}
    status: Status = "ok"
    if deep:
        q8 = np.rint(tst.astype(np.float64) * 255.0) / 255.0
        v8 = _many(model, ref, [q8.astype(np.float32)], convention=convention)[0]
        effect += f" Rounding the test image to 8 bits gives {_fmt(v8)}."
        scores["test rounded to 8 bits"] = v8
        status = "info"
    if narrow:
        status = "warning"
        ranges += (f". The {' and '.join(narrow)} image spans less than half of the [0, 1] range "
                   "(very dark, washed out, or mis-scaled data)")
    checks.append(Check("Bit depth and value range", status, ranges + ".", effect, scores))

    # -- alpha
    alpha = [n for n, f in facts.items() if f["had_alpha"]]
    if alpha:
        finding = (f"The {' and '.join(alpha)} image has transparency; it was composited on white, "
                   "because LPIPS compares opaque RGB images.")
        scores = {"on white": score}
        if reference_on_black is not None or test_on_black is not None:
            rb = ref if reference_on_black is None else reference_on_black
            tb = tst if test_on_black is None else match_size(test_on_black, size, method=method)
            v = _many(model, rb, [tb], convention=convention)[0]
            scores["on black"] = v
            effect = f"On a black background the score would be {_fmt(v)} instead of {_fmt(score)}."
        else:
            effect = "The background colour under transparent pixels is part of what is compared."
        checks.append(Check("Alpha channel", "warning", finding, effect, scores))
    else:
        checks.append(Check("Alpha channel", "ok", "Neither image has transparency.", "No effect.", {}))

    # -- grayscale
    gray = {n: f["was_grayscale"] or f["effectively_grayscale"] for n, f in facts.items()}
    v_gray = _many(model, ref, [tst], convention=convention, grayscale=True)[0]
    scores = {"as loaded": score, "both in gray": v_gray}
    if gray["reference"] != gray["test"]:
        one = "reference" if gray["reference"] else "test"
        checks.append(Check(
            "Grayscale", "warning",
            f"The {one} image is grayscale, the other is in colour: every colour difference counts.",
            f"Comparing both in gray (luma replicated to RGB) gives {_fmt(v_gray)} instead of {_fmt(score)}.",
            scores))
    else:
        kind = "grayscale (replicated to three channels)" if gray["reference"] else "colour"
        checks.append(Check(
            "Grayscale", "ok" if not gray["reference"] else "info", f"Both images are {kind}.",
            f"For comparison, the pair in gray scores {_fmt(v_gray)}.", scores))

    # -- EXIF orientation
    rotated = {n: f["exif_orientation"] for n, f in facts.items() if f["exif_orientation"] not in (1, 0)}
    if rotated:
        r_raw = undo_exif(ref, rotated["reference"]) if "reference" in rotated else ref
        t_raw = undo_exif(test.array, rotated["test"]) if "test" in rotated else test.array
        r_raw = match_size(r_raw, size, method=method)
        t_raw = match_size(t_raw, size, method=method)
        v = _many(model, r_raw, [t_raw], convention=convention)[0]
        checks.append(Check(
            "EXIF orientation", "warning" if len(rotated) == 1 else "info",
            "Orientation tag applied: " + ", ".join(f"{n} tag {o}" for n, o in rotated.items())
            + ". The pixels were turned upright as the camera intended.",
            f"A loader that ignores the tag compares the stored pixels instead: {_fmt(v)} "
            f"instead of {_fmt(score)}.",
            {"tag applied": score, "tag ignored": v}))
    else:
        checks.append(Check("EXIF orientation", "ok", "Neither file carries a rotating EXIF orientation tag.",
                            "No effect.", {}))

    # -- misalignment
    try:
        align = alignment(model, ref, tst, convention=convention)
    except ValueError:
        align = None
    if align is None:
        checks.append(Check("Misalignment", "info", "The translation could not be estimated.", "Unknown.", {}))
    else:
        moved = math.hypot(align.dy, align.dx) >= 0.5
        if math.isfinite(align.lpips_before):
            effect = (f"On the central crop (minus {align.crop} px per side) LPIPS is {_fmt(align.lpips_before)} "
                      f"before and {_fmt(align.lpips_after)} after aligning.")
        else:
            effect = "The shift is too large to score a common crop with this backbone."
        checks.append(Check(
            "Misalignment", "warning" if moved else "ok",
            f"Phase correlation finds the test image's content offset by {-align.dy:+.1f} px vertically "
            f"(+ = down) and {-align.dx:+.1f} px horizontally (+ = right) from the reference's."
            + ("" if moved else " That is below half a pixel: aligned."),
            effect, {"dy": align.dy, "dx": align.dx, "before": align.lpips_before, "after": align.lpips_after}))

    # -- JPEG blockiness
    blocks: dict[str, float] = {}
    for name, a in (("reference", ref), ("test", tst)):
        try:
            blocks[name] = blockiness(a)
        except ValueError:
            blocks[name] = float("nan")
    blocky = [n for n, b in blocks.items() if math.isfinite(b) and b > 1.3]
    finding = (f"Blockiness (mean luma step across 8-px block boundaries ÷ mean step elsewhere; about 1 "
               f"without a block grid): reference {_fmt(blocks['reference'])}, test {_fmt(blocks['test'])}."
               + (f" The {' and '.join(blocky)} image shows a JPEG block grid." if blocky else ""))
    scores = dict(blocks)
    if blocky:
        qualities = (30, 60, 90)
        vals = _many(model, ref, [jpeg(ref, q) for q in qualities], convention=convention)
        scores.update({f"reference as JPEG q{q}": v for q, v in zip(qualities, vals)})
        closest = qualities[int(np.argmin([abs(v - score) for v in vals]))]
        effect = ("A block grid adds edges the reference does not have, and the early layers respond to edges. "
                  "For scale, the reference itself re-encoded as JPEG scores "
                  + ", ".join(f"{_fmt(v)} at quality {q}" for q, v in zip(qualities, vals))
                  + f"; this pair's {_fmt(score)} is closest to quality {closest}.")
    else:
        effect = "No block grid to speak of: no effect."
    checks.append(Check("JPEG blockiness", "warning" if blocky else "ok", finding, effect, scores))

    config = {
        "net": model.net, "version": model.version, "lin": model.lin, "convention": convention,
        "size": f"reference size {size[0]}×{size[1]} (H×W)", "resize_method": method,
        "weights": model.weights, "device": str(model.device),
    }
    return Diagnosis(
        reference=ref, test=tst, score=score, per_layer=result.per_layer[0].numpy(),
        layer_names=tuple(result.layer_names), spatial_map=layer_maps.sum(0), layer_maps=layer_maps,
        classic=classic, checks=checks, resize_options=options, alignment=align, blockiness=blocks,
        facts=facts, config=config,
    )


# --------------------------------------------------------------------------- the report
def library_versions(extra: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """Versions of everything that can change a score (``None`` for a package not installed).

    ``extra`` adds entries, e.g. the app adds ``{"streamlit": st.__version__}`` (this library
    never imports Streamlit).
    """
    import torchvision

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out = {
        "python": platform.python_version(),
        "lpips_core": _LPIPS_CORE_VERSION,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
        "pillow": dist("pillow"),
        "scikit-image": dist("scikit-image"),
        "lpips (reference package)": dist("lpips"),
    }
    out.update(dict(extra or {}))
    return out


def build_report(diagnosis: Diagnosis, *, versions: Mapping[str, str | None] | None = None,
                 extra_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready summary: scores, the full configuration, the checks and library versions."""
    d = diagnosis
    config = dict(d.config)
    config.update(dict(extra_config or {}))
    return {
        "lpips": d.score,
        "per_layer": dict(zip(d.layer_names, (float(v) for v in d.per_layer))),
        "classic": dict(d.classic),
        "configuration": config,
        "images": d.facts,
        "checks": [asdict(c) for c in d.checks],
        "resize_options": [asdict(o) for o in d.resize_options],
        "alignment": asdict(d.alignment) if d.alignment is not None else None,
        "blockiness": dict(d.blockiness),
        "versions": dict(versions) if versions is not None else library_versions(),
    }


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) or isinstance(obj, np.floating):
        v = float(obj)
        return v if math.isfinite(v) else ("inf" if v > 0 else "-inf" if v < 0 else "nan")
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def report_json(report: Mapping[str, Any]) -> str:
    """Strict JSON text (non-finite numbers become the strings ``"inf"``, ``"-inf"``, ``"nan"``)."""
    return json.dumps(_jsonable(report), indent=2, ensure_ascii=False, allow_nan=False)
