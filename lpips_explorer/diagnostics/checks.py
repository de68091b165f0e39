"""The checks of the "Debug a score" page: one function per check, registered in :data:`CHECKS`.

Each check reads a :class:`PairContext` (the two loaded files, the pair as scored, the model and
its configuration) and returns an :class:`Outcome`: a status, what it found, what that does to
the score with the numbers, and the *counterfactuals*: the LPIPS the pair would get had the
thing the check looks at been otherwise (alpha on black, the EXIF tag ignored, the shift undone,
…). :func:`run_checks` runs the registry in order and turns each outcome into a :class:`Check`
that carries the check's stable :attr:`Check.id` (match checks by id, never by display text)
and :attr:`Check.delta`, the largest change of the score among the counterfactuals, so checks
can be ranked by how much they move the score.

Every threshold a check applies is a named module-level constant below.

Adding a check: write ``def check_x(ctx: PairContext) -> Outcome`` and append
``CheckSpec("x", "Display name", check_x)`` to :data:`CHECKS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Callable, Literal, Sequence

import numpy as np

from lpips_explorer.distortions import jpeg
from lpips_core.images import LoadedImage
from lpips_core.model import LPIPS
from lpips_explorer.diagnostics.measures import Alignment, ResizeOption, alignment, resize_options
from lpips_explorer.text import signed, size_hw, size_text
from lpips_explorer.diagnostics.tools import _U8_MAX, blockiness, encode_like, fmt, image_facts, lpips_values, match_size, ratio_text, undo_exif

__all__ = [
    "ASPECT_TOLERANCE",
    "BLOCKINESS_THRESHOLD",
    "CHECKS",
    "CHECK_IDS",
    "Check",
    "CheckId",
    "CheckSpec",
    "EIGHT_BIT",
    "Finding",
    "JPEG_SCALE_QUALITIES",
    "MISALIGNMENT_PX",
    "NARROW_RANGE",
    "Outcome",
    "PairContext",
    "Status",
    "UPRIGHT_EXIF_TAGS",
    "WRONG_CONVENTIONS",
    "check_alpha",
    "check_bit_depth",
    "check_exif_orientation",
    "check_grayscale",
    "check_jpeg_blockiness",
    "check_misalignment",
    "check_resolution",
    "check_size",
    "rank_checks",
    "run_checks",
]

Status = Literal["ok", "warning", "info"]
CheckId = Literal["size", "resolution", "bit_depth", "alpha", "grayscale", "exif_orientation", "misalignment",
                  "jpeg_blockiness"]

# --------------------------------------------------------------------------- thresholds
#: Difference of the aspect ratios (W / H) above which resizing the test also stretches it.
ASPECT_TOLERANCE = 0.01
#: Bits per channel above which a file counts as deep (the check then rounds it to 8 bits).
EIGHT_BIT = 8
#: Span ``max − min`` of the ``[0, 1]`` values under which an image is called narrow.
NARROW_RANGE = 0.5
#: The input conventions a pair is also scored in, to show what a range mistake does.
WRONG_CONVENTIONS: tuple[str, ...] = ("[0,1]", "[0,255]")
#: EXIF orientation tags that leave the pixels as stored (0: no tag, 1: upright).
UPRIGHT_EXIF_TAGS: tuple[int, ...] = (0, 1)
#: Length (pixels) of the estimated translation from which a pair counts as misaligned.
MISALIGNMENT_PX = 0.5
#: :func:`~lpips_explorer.diagnostics.blockiness` above which an image shows a JPEG block grid
#: (an image without one scores about 1; a quality-60 JPEG about 1.35).
BLOCKINESS_THRESHOLD = 1.3
#: JPEG qualities the reference is re-encoded at to put a blocky pair's score on a scale.
JPEG_SCALE_QUALITIES: tuple[int, ...] = (30, 60, 90)


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Outcome:
    """What one check function returns.

    Attributes:
        status: ``"ok"`` (nothing to worry about), ``"warning"`` (it changes the score) or ``"info"``.
        finding: what the check found, one or two sentences.
        effect: what it does to the score, with the numbers.
        scores: the numbers behind ``effect`` (for the JSON report).
        counterfactuals: label → the LPIPS of the pair had the checked property been otherwise
            (a subset of the numbers in ``scores``); empty when the check computed none.
        baseline: what the counterfactuals are compared with; ``None`` means the pair's score
            (a check scoring a crop gives the crop's own score).
    """

    status: Status
    finding: str
    effect: str
    scores: dict[str, float] = field(default_factory=dict)
    counterfactuals: dict[str, float] = field(default_factory=dict)
    baseline: float | None = None


@dataclass(frozen=True, kw_only=True)
class Check(Outcome):
    """One check's result: its :class:`Outcome` with the check's id and name, and the score change.

    Attributes:
        id: the check's stable id (:data:`CHECK_IDS`), e.g. ``"size"``; the display name may change.
        name: the display name, e.g. ``"Size"``.
        delta: the largest ``|counterfactual − baseline|`` (LPIPS units, ``>= 0``), ``None`` when
            the check has no finite counterfactual: how much this check's property moves the score.
        status, finding, effect, scores, counterfactuals, baseline: see :class:`Outcome`.
    """

    id: CheckId
    name: str
    delta: float | None = None


@dataclass(frozen=True, eq=False)
class PairContext:
    """Everything a check may read about one pair; derived measures are computed once, on demand.

    Attributes:
        model: the LPIPS model whose score is being debugged.
        reference, test: the two files as loaded by :func:`lpips_core.images.load_image`.
        ref: ``(H, W, 3)`` float in ``[0, 1]``, the reference as scored.
        tst: ``(H, W, 3)``, the test brought to the reference's size with ``method``.
        score: LPIPS of ``(ref, tst)`` under ``convention``.
        method: the resize method; ``convention``: the range convention of ``score``.
        reference_on_black, test_on_black: the files composited on black (``None``: not loaded).
        reference_alpha_dropped, test_alpha_dropped: the files' RGB channels with the alpha channel
            ignored, at the size of ``reference``/``test`` (``None``: not loaded).
        originals: the two files decoded at their full resolution, before any resampling (the
            file facts, blockiness and shift units come from these); ``None``: ``reference``/``test``.
        other_size: ``(label, reference, test)`` the pair loaded at the other resolution (native
            size when scoring at the working size and vice versa), ``None``: not compared.
        test_file: the test file's bytes (its JPEG tables are reused to re-encode the reference).
    """

    model: LPIPS
    reference: LoadedImage
    test: LoadedImage
    ref: np.ndarray
    tst: np.ndarray
    score: float
    method: str
    convention: str
    reference_on_black: np.ndarray | None = None
    test_on_black: np.ndarray | None = None
    reference_alpha_dropped: np.ndarray | None = None
    test_alpha_dropped: np.ndarray | None = None
    originals: tuple[LoadedImage, LoadedImage] | None = None
    other_size: tuple[str, np.ndarray, np.ndarray] | None = None
    test_file: bytes | None = None

    @property
    def files(self) -> tuple[LoadedImage, LoadedImage]:
        """The two files at full resolution (:attr:`originals`, else the loaded pair)."""
        return self.originals if self.originals is not None else (self.reference, self.test)

    @property
    def file_scale(self) -> float:
        """Reference-file pixels per scored pixel (1 when the pair is scored at the file's own size)."""
        return self.files[0].size[1] / self.size[1]

    @property
    def size(self) -> tuple[int, int]:
        """``(H, W)`` of the pair as scored."""
        return tuple(self.ref.shape[:2])

    def lpips(self, ref: np.ndarray, images: Sequence[np.ndarray], **opts) -> list[float]:
        """LPIPS of ``ref`` against each image, in the pair's convention unless ``opts`` says otherwise."""
        opts.setdefault("convention", self.convention)
        return lpips_values(self.model, ref, images, **opts)

    @cached_property
    def facts(self) -> dict[str, dict[str, Any]]:
        """``{"reference": ..., "test": ...}`` from :func:`~lpips_explorer.diagnostics.image_facts`."""
        ref, test = self.files
        return {"reference": image_facts(ref), "test": image_facts(test)}

    @cached_property
    def resize_options(self) -> list[ResizeOption]:
        """:func:`~lpips_explorer.diagnostics.resize_options` of the reference and the test as loaded."""
        return resize_options(self.model, self.ref, self.test.array, convention=self.convention)

    @cached_property
    def alignment(self) -> Alignment | None:
        """:func:`~lpips_explorer.diagnostics.alignment` of the pair; ``None`` when it cannot be estimated."""
        try:
            return alignment(self.model, self.ref, self.tst, convention=self.convention)
        except ValueError:
            return None

    @cached_property
    def blockiness(self) -> dict[str, float]:
        """``{"reference": b, "test": b}`` on the files as decoded (before any resampling, so the
        JPEG grid is where the encoder put it), ``nan`` for an image too small to measure."""
        out = {}
        for name, a in zip(("reference", "test"), (f.array for f in self.files)):
            try:
                out[name] = blockiness(a)
            except ValueError:
                out[name] = float("nan")
        return out


# --------------------------------------------------------------------------- the checks
def check_size(ctx: PairContext) -> Outcome:
    """Whether the sizes differ, and the LPIPS each way of matching them gives."""
    (h, w), (th, tw) = ctx.size, ctx.test.array.shape[:2]
    options = ctx.resize_options
    scores = {o.label: o.lpips for o in options}
    if (th, tw) != (h, w):
        vals = [o.lpips for o in options]
        aspect = (" Their aspect ratios differ too, so resizing also stretches the test image."
                  if abs(w / h - tw / th) > ASPECT_TOLERANCE else "")
        return Outcome(
            "warning",
            f"The reference is {size_text(w, h, labelled=True)} and the test {size_text(tw, th)}; LPIPS needs "
            f"one size, so the test was resized to the reference's size ({ctx.method}).{aspect}",
            f"The way the sizes are matched moves the score between {fmt(min(vals))} and {fmt(max(vals))} "
            f"(see the table); this score uses {ctx.method}: {fmt(ctx.score)}.",
            scores, scores)
    resized = {o.label: o.lpips for o in options[1:]}
    return Outcome(
        "ok", f"Both images are {size_text(w, h, labelled=True)}: no resizing needed.",
        "Resizing both (as a model's size option does) would change the score: "
        + ", ".join(f"{label}: {fmt(v)}" for label, v in resized.items()) + ".",
        scores, resized)


def _stored(facts: dict[str, Any]) -> str:
    """``"8-bit RGBA (composited on white)"``: what the file stored, and that its transparency was
    flattened (the values below are the composite's)."""
    return f"{facts['bit_depth']}-bit {facts['mode']}" + (" (composited on white)" if facts["had_alpha"] else "")


def _levels(facts: dict[str, Any]) -> str:
    """``"212 of 256 red levels"`` (:func:`~lpips_explorer.diagnostics.image_facts`' ``levels``)."""
    possible = facts["levels_possible"]
    return (f"{facts['levels']:,} of {possible:,} red levels" if possible is not None
            else f"{facts['levels']:,} distinct red values")


def check_bit_depth(ctx: PairContext) -> Outcome:
    """What the files stored, the range the pixels span, and the score in a wrong range convention."""
    facts, score = ctx.facts, ctx.score
    wrong = [ctx.lpips(ctx.ref, [ctx.tst], convention=c)[0] for c in WRONG_CONVENTIONS]
    deep = [n for n, f in facts.items() if f["bit_depth"] > EIGHT_BIT]
    narrow = [n for n, f in facts.items() if f["value_max"] - f["value_min"] < NARROW_RANGE]
    ranges = "; ".join(f"{n}: {_stored(f)}, values {f['value_min']:.3f}–{f['value_max']:.3f}, {_levels(f)}"
                       for n, f in facts.items())
    effect = (f"The pixels reach the network as [−1, 1] (correct). Fed as [0, 1] the score would be "
              f"{fmt(wrong[0])}{ratio_text(wrong[0], score)}, fed as [0, 255] {fmt(wrong[1])}"
              f"{ratio_text(wrong[1], score)}, instead of {fmt(score)}.")
    scores = {"[-1,1]": score, **dict(zip(WRONG_CONVENTIONS, wrong))}
    counterfactuals: dict[str, float] = {}
    status: Status = "ok"
    if deep:
        q8 = np.rint(ctx.tst.astype(np.float64) * _U8_MAX) / _U8_MAX
        v8 = ctx.lpips(ctx.ref, [q8.astype(np.float32)])[0]
        effect += f" Rounding the test image to 8 bits gives {fmt(v8)}."
        scores["test rounded to 8 bits"] = counterfactuals["test rounded to 8 bits"] = v8
        status = "info"
    if narrow:
        status = "warning"
        ranges += (f". The {' and '.join(narrow)} image spans less than half of the [0, 1] range "
                   "(very dark, washed out, or mis-scaled data)")
    return Outcome(status, ranges + ".", effect, scores, counterfactuals)


def check_alpha(ctx: PairContext) -> Outcome:
    """Transparency: composited on white (the loader's default) against alpha dropped and on black."""
    alpha = [n for n, f in ctx.facts.items() if f["had_alpha"]]
    if not alpha:
        return Outcome("ok", "Neither image has transparency.", "No effect.")
    finding = (f"The {' and '.join(alpha)} image has transparency; it was composited on white, "
               "because LPIPS compares opaque RGB images.")
    scores = {"on white": ctx.score}
    variants = {"alpha dropped": (ctx.reference_alpha_dropped, ctx.test_alpha_dropped),
                "on black": (ctx.reference_on_black, ctx.test_on_black)}
    counterfactuals: dict[str, float] = {}
    for label, (r, t) in variants.items():
        if r is None and t is None:
            continue
        r = ctx.ref if r is None else match_size(r, ctx.size)
        t = ctx.tst if t is None else match_size(t, ctx.size, method=ctx.method)
        counterfactuals[label] = ctx.lpips(r, [t])[0]
    if not counterfactuals:
        return Outcome("warning", finding,
                       "The background colour under transparent pixels is part of what is compared.", scores)
    scores.update(counterfactuals)
    names = {"alpha dropped": "with the alpha channel dropped (the hidden RGB values compared)",
             "on black": "composited on black"}
    effect = ("; ".join(f"{names[k]} the score would be {fmt(v)}" for k, v in counterfactuals.items())
              + f"; on white (as scored) it is {fmt(ctx.score)}.")
    effect = effect[0].upper() + effect[1:]
    return Outcome("warning", finding, effect, scores, counterfactuals)


def check_resolution(ctx: PairContext) -> Outcome:
    """The pair at its own (native) size against the app's working size."""
    (h, w), (fh, fw) = ctx.size, ctx.files[0].size
    here = ("the files' own size" if (h, w) == (fh, fw)
            else f"{size_text(w, h, labelled=True)} (the reference file is {size_text(fw, fh)})")
    if ctx.other_size is None:
        return Outcome("info", f"Scored at {here}.", "No other resolution was compared.")
    label, r, t = ctx.other_size
    if r.shape[:2] == (h, w):
        return Outcome("ok", f"Scored at {here}; {label} is the same size.", "No effect.",
                       {label: ctx.score})
    v = ctx.lpips(r, [match_size(t, r.shape[:2], method=ctx.method)])[0]
    return Outcome(
        "info" if (h, w) == (fh, fw) else "warning",
        f"Scored at {here}. LPIPS depends on the resolution: the network's receptive fields cover "
        f"more of the picture at a smaller size.",
        f"At {label} ({size_hw(r.shape[:2])}) the same files score {fmt(v)} instead of {fmt(ctx.score)}"
        f"{ratio_text(v, ctx.score)}.", {"as scored": ctx.score, label: v}, {label: v})


def check_grayscale(ctx: PairContext) -> Outcome:
    """A gray image against a colour one, and the score of the pair in gray."""
    gray = {n: f["was_grayscale"] or f["effectively_grayscale"] for n, f in ctx.facts.items()}
    v_gray = ctx.lpips(ctx.ref, [ctx.tst], grayscale=True)[0]
    scores = {"as loaded": ctx.score, "both in gray": v_gray}
    if gray["reference"] != gray["test"]:
        one = "reference" if gray["reference"] else "test"
        return Outcome(
            "warning", f"The {one} image is grayscale, the other is in colour: every colour difference counts.",
            f"Comparing both in gray (luma replicated to RGB) gives {fmt(v_gray)} instead of {fmt(ctx.score)}.",
            scores, {"both in gray": v_gray})
    kind = "grayscale (replicated to three channels)" if gray["reference"] else "colour"
    return Outcome("ok" if not gray["reference"] else "info", f"Both images are {kind}.",
                   f"For comparison, the pair in gray scores {fmt(v_gray)}.", scores)


def check_exif_orientation(ctx: PairContext) -> Outcome:
    """The EXIF orientation tag the loader applied, and the score had it been ignored."""
    rotated = {n: f["exif_orientation"] for n, f in ctx.facts.items()
               if f["exif_orientation"] not in UPRIGHT_EXIF_TAGS}
    if not rotated:
        return Outcome("ok", "Neither file carries a rotating EXIF orientation tag.", "No effect.")
    r_raw = undo_exif(ctx.ref, rotated["reference"]) if "reference" in rotated else ctx.ref
    t_raw = undo_exif(ctx.test.array, rotated["test"]) if "test" in rotated else ctx.test.array
    r_raw = match_size(r_raw, ctx.size, method=ctx.method)
    t_raw = match_size(t_raw, ctx.size, method=ctx.method)
    v = ctx.lpips(r_raw, [t_raw])[0]
    return Outcome(
        "warning" if len(rotated) == 1 else "info",
        "Orientation tag applied: " + ", ".join(f"{n} tag {o}" for n, o in rotated.items())
        + ". The pixels were turned upright as the camera intended.",
        f"A loader that ignores the tag compares the stored pixels instead: {fmt(v)} instead of {fmt(ctx.score)}.",
        {"tag applied": ctx.score, "tag ignored": v}, {"tag ignored": v})


def check_misalignment(ctx: PairContext) -> Outcome:
    """A translation by phase correlation, and LPIPS before and after undoing it on a central crop."""
    align = ctx.alignment
    if align is None:
        return Outcome("info", "The translation could not be estimated.", "Unknown.")
    k = ctx.file_scale  # reference-file pixels per scored pixel
    dy, dx = align.dy * k, align.dx * k
    moved = math.hypot(dy, dx) >= MISALIGNMENT_PX
    if math.isfinite(align.lpips_before):
        effect = (f"On the central crop (minus {align.crop} px per side) LPIPS is {fmt(align.lpips_before)} "
                  f"before and {fmt(align.lpips_after)} after aligning.")
    else:
        effect = "The shift is too large to score a common crop with this backbone."
    return Outcome(
        "warning" if moved else "ok",
        f"Phase correlation finds the test image's content offset by {signed(-dy, unit='px')} vertically "
        f"(+ = down) and {signed(-dx, unit='px')} horizontally (+ = right) from the reference's, in the "
        "reference file's pixels." + ("" if moved else " That is below half a pixel: aligned."),
        effect, {"dy": dy, "dx": dx, "dy_scored_px": align.dy, "dx_scored_px": align.dx,
                 "before": align.lpips_before, "after": align.lpips_after},
        {"aligned (central crop)": align.lpips_after}, baseline=align.lpips_before)


def check_jpeg_blockiness(ctx: PairContext) -> Outcome:
    """JPEG block-grid strength of each image, and the reference re-encoded as JPEG for scale."""
    blocks = ctx.blockiness
    blocky = [n for n, b in blocks.items() if math.isfinite(b) and b > BLOCKINESS_THRESHOLD]
    finding = (f"Blockiness (mean luma step across 8-px block boundaries ÷ mean step elsewhere; about 1 "
               f"without a block grid): reference {fmt(blocks['reference'])}, test {fmt(blocks['test'])}."
               + (f" The {' and '.join(blocky)} image shows a JPEG block grid." if blocky else ""))
    scores = dict(blocks)
    if not blocky:
        return Outcome("ok", finding, "No block grid to speak of: no effect.", scores)
    qualities = JPEG_SCALE_QUALITIES
    vals = ctx.lpips(ctx.ref, [jpeg(ctx.ref, q) for q in qualities])
    scores.update({f"reference as JPEG q{q}": v for q, v in zip(qualities, vals)})
    closest = qualities[int(np.argmin([abs(v - ctx.score) for v in vals]))]
    effect = ("A block grid adds edges the reference does not have, and the early layers respond to edges. "
              "For scale, the reference itself re-encoded as JPEG scores "
              + ", ".join(f"{fmt(v)} at quality {q}" for q, v in zip(qualities, vals))
              + f"; this pair's {fmt(ctx.score)} is closest to quality {closest}.")
    counterfactuals: dict[str, float] = {}
    try:
        like = encode_like(ctx.ref, ctx.test_file) if ctx.test_file is not None else None
    except (OSError, ValueError):  # a JPEG whose tables Pillow cannot reuse: no such counterfactual
        like = None
    if like is not None:
        v = ctx.lpips(like, [ctx.tst])[0]
        scores["reference re-encoded like the test"] = counterfactuals["reference re-encoded like the test"] = v
        effect += (f" Re-encoding the reference with the test file's own JPEG tables (so both carry the same "
                   f"compression) gives {fmt(v)} instead of {fmt(ctx.score)}.")
    return Outcome("warning", finding, effect, scores, counterfactuals)


# --------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class CheckSpec:
    """One registered check: its stable id, its display name and the function that runs it."""

    id: CheckId
    name: str
    run: Callable[[PairContext], Outcome]


#: Every check, in page order.
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("size", "Size", check_size),
    CheckSpec("resolution", "Resolution", check_resolution),
    CheckSpec("bit_depth", "Bit depth and value range", check_bit_depth),
    CheckSpec("alpha", "Alpha channel", check_alpha),
    CheckSpec("grayscale", "Grayscale", check_grayscale),
    CheckSpec("exif_orientation", "EXIF orientation", check_exif_orientation),
    CheckSpec("misalignment", "Misalignment", check_misalignment),
    CheckSpec("jpeg_blockiness", "JPEG blockiness", check_jpeg_blockiness),
)
#: The ids of :data:`CHECKS`, in order.
CHECK_IDS: tuple[str, ...] = tuple(spec.id for spec in CHECKS)


def _delta(outcome: Outcome, score: float) -> float | None:
    base = score if outcome.baseline is None else outcome.baseline
    changes = [abs(v - base) for v in outcome.counterfactuals.values() if math.isfinite(v) and math.isfinite(base)]
    return max(changes) if changes else None


@dataclass(frozen=True)
class Finding:
    """One row of the ranked summary: a check and the counterfactual that moves the score most.

    Attributes:
        check_id: the check's stable id; ``name``: its display name; ``status``: its status.
        finding: the check's finding (one or two sentences).
        counterfactual: the label of the counterfactual with the largest ``|change|``, ``None`` when
            the check computed none.
        as_is: the score the counterfactual is compared with (the pair's score, or a crop's own).
        score: the counterfactual score (``None`` without one).
        change: ``score − as_is`` (LPIPS units, signed; ``None`` without a counterfactual).
    """

    check_id: CheckId
    name: str
    status: Status
    finding: str
    counterfactual: str | None
    as_is: float
    score: float | None
    change: float | None


def rank_checks(checks: Sequence[Check], score: float) -> list[Finding]:
    """One :class:`Finding` per check, ranked by ``|change|`` largest first; checks without a finite
    counterfactual follow, in registry order (the sort is stable)."""
    rows = []
    for c in checks:
        base = score if c.baseline is None else c.baseline
        finite = {k: v for k, v in c.counterfactuals.items() if math.isfinite(v)}
        if finite and math.isfinite(base):
            label = max(finite, key=lambda k: abs(finite[k] - base))
            rows.append(Finding(c.id, c.name, c.status, c.finding, label, base, finite[label], finite[label] - base))
        else:
            rows.append(Finding(c.id, c.name, c.status, c.finding, None, base, None, None))
    return sorted(rows, key=lambda f: -abs(f.change) if f.change is not None else math.inf)


def run_checks(ctx: PairContext, checks: Sequence[CheckSpec] = CHECKS) -> list[Check]:
    """Run ``checks`` in order on one pair: one :class:`Check` each, carrying its spec's id and name."""
    out = []
    for spec in checks:
        o = spec.run(ctx)
        out.append(Check(**{f.name: getattr(o, f.name) for f in fields(Outcome)},
                         id=spec.id, name=spec.name, delta=_delta(o, ctx.score)))
    return out
