"""Which configuration made this number? The dataset mean under every plausible LPIPS set-up.

Given pairs and a value a paper reports ("LPIPS 0.109"), :func:`explain` computes the mean LPIPS
of the pairs under every configuration a paper could plausibly have used —

    backbone (alex, vgg, squeeze where its weights are here) × version (0.1, 0.0)
    × lin weights or the uncalibrated baseline × input range ([-1,1], [0,1], [0,255])
    × colour or grayscale × size (native, 64, 256 and one the user names)

— narrowed by what the paper's name for the metric says (:func:`parse_name`: "LPIPS (VGG)" means
VGG16, "LPIPS v0.0" version 0.0, "uncalibrated" the baseline), and ranks them by
``|mean − reported|``, each with its spread (``std``, the 95 % CI of the mean, how many standard
errors it lies from the reported value and whether the CI holds it). Configurations that give
the same number for every pair of this data (e.g. ``@256`` on 256 px images and ``native``) are
one row listing them all. The :attr:`Explanation.verdict` says whether the data tells the
candidates apart: ``"one"`` configuration's interval holds the reported value, ``"several"`` do
(this data cannot tell them apart), or ``"none"`` does.

The work is the dataset scorer's (:func:`~lpips_core.datasets.score.score_pairs`: on a CPU in
lanes, one process per core): per image, one network pass per backbone × version × input range ×
colour × size, from which both the lin and the baseline distance come; a size that equals an
image's native size is not computed twice.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import product
from typing import Callable, Sequence

import numpy as np
import torch

from .. import metric_registry
from ..conventions import CONVENTIONS
from ..metric_registry import NET_LABELS
from ..spec import MetricSpec
from .pairs import Discovery, Pair
from .score import Scorer, _sorted_pairs, mean_ci, score_pairs

__all__ = ["Candidate", "Explanation", "explain", "name_hints", "parse_name"]

DEFAULT_SIZES: tuple[int | None, ...] = (None, 64, 256)
#: Two configurations are one row when every pair's value agrees within this (float32 rounding
#: of the same computation reached by two routes, e.g. resizing to the native size).
SAME_VALUES_ATOL = 1e-6


@dataclass(frozen=True)
class Candidate:
    """One configuration (or several that give the same numbers here) and the dataset mean under it.

    Attributes:
        spec: the configuration as a :class:`~lpips_core.spec.MetricSpec` (``spec.name`` e.g.
            ``"lpips-vgg-0.1-lin-[0,1]@64"``; score it with ``score_pairs``); the first of ``same``.
        same: every configuration with the same per-pair values on this data (``spec`` first).
        n, mean, std, ci95: over the pairs scored under it (``std`` with ``ddof=1``, Student t CI).
        distance: ``|mean − reported|``.
        z: ``(mean − reported) / (std / √n)``: standard errors from the reported value.
        holds_reported: the CI contains the reported value.
        matches_name: consistent with what the metric's written name says (``None``: no name).
    """

    spec: MetricSpec
    n: int
    mean: float | None
    std: float | None
    ci95: tuple[float | None, float | None]
    distance: float
    z: float | None
    holds_reported: bool
    matches_name: bool | None
    same: tuple[MetricSpec, ...] = ()

    def to_json(self) -> dict:
        s = self.spec
        return {"config": s.name, "label": s.label, "same": [x.name for x in (self.same or (s,))],
                "net": s.net, "version": s.version, "lin": s.lin, "convention": s.convention,
                "grayscale": s.grayscale, "size": _size_text(s.size), "n": self.n,
                "mean": self.mean, "std": self.std, "ci95": list(self.ci95), "distance": self.distance,
                "z": self.z, "holds_reported": self.holds_reported, "matches_name": self.matches_name}


def _size_text(size) -> str:
    """The size column as one type (text): ``"native"``, ``"64"``, ``"96x64"`` (width x height)."""
    if size is None:
        return "native"
    return str(size) if isinstance(size, int) else f"{size[1]}x{size[0]}"


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` gives: candidates ranked closest first, and what was left out.

    Attributes:
        reported: the value searched for; name: the metric's written name, if given.
        hints: what the name says (:func:`parse_name`); ``searched``: the backbones, versions and
            heads actually tried (narrowed by the name unless told otherwise).
        candidates: ranked by ``distance`` (ties: those matching the name first); configurations
            with the same values on this data are one candidate.
        pairs: pairs scored; skipped: pairs left out, by reason.
        unavailable: backbones left out and why (e.g. SqueezeNet weights missing offline).
    """

    reported: float
    name: str | None
    hints: dict
    candidates: list[Candidate]
    pairs: int
    skipped: dict = field(default_factory=dict)
    unavailable: dict = field(default_factory=dict)
    searched: dict = field(default_factory=dict)

    @property
    def holding(self) -> list[Candidate]:
        """The candidates whose 95 % interval holds the reported value."""
        return [c for c in self.candidates if c.holds_reported]

    @property
    def verdict(self) -> str:
        """``"one"``, ``"several"`` or ``"none"``: how many candidates' intervals hold the reported value."""
        k = len(self.holding)
        return "none" if k == 0 else "one" if k == 1 else "several"

    @property
    def sentence(self) -> str:
        """The verdict in plain words."""
        k = len(self.holding)
        if k == 0:
            best = self.candidates[0] if self.candidates else None
            near = f"; the closest, {best.spec.name}, is {best.distance:.3g} away" if best else ""
            return f"No configuration's 95% interval holds {self.reported:g}{near}: this data does not reproduce it."
        if k == 1:
            c = self.holding[0]
            return f"One configuration's 95% interval holds {self.reported:g}: {c.spec.name}."
        return (f"{k} configurations' 95% intervals hold {self.reported:g}: this data cannot tell them apart "
                f"(more pairs narrow the intervals).")

    def to_json(self, top: int | None = None) -> dict:
        return {"reported": self.reported, "name": self.name, "hints": self.hints, "searched": self.searched,
                "pairs": self.pairs, "verdict": self.verdict, "sentence": self.sentence,
                "holding": len(self.holding), "skipped": self.skipped, "unavailable": self.unavailable,
                "candidates": [c.to_json() for c in self.candidates[:top]]}


def parse_name(name: str | None) -> dict:
    """What a metric's written name says, and which words said it.

    Returns ``{"nets": [...], "version": ..., "lin": ..., "words": {part: word}}`` with only what the
    name says (``{}`` for no name): ``"LPIPS (VGG)"`` → VGG16; ``"LPIPS-Alex v0.0"`` → AlexNet and
    version 0.0; ``"baseline"``/``"uncalibrated"`` → the baseline, ``"lin"``/``"linear"`` → lin.
    """
    if not name:
        return {}
    text = name.lower()
    info = metric_registry.METRICS["lpips"]
    hints: dict = {}
    words: dict = {}
    aliases = {"alex": ("alexnet", "alex"), "vgg": ("vgg16", "vgg-16", "vgg"), "squeeze": ("squeezenet", "squeeze")}
    nets = []
    for net in info.nets:
        for word in aliases.get(net, (net,)):
            m = re.search(re.escape(word), text)
            if m:
                nets.append(net)
                words[net] = name[m.start():m.end()]
                break
    if nets:
        hints["nets"] = nets
    versions = []
    for v in info.versions:
        m = re.search(rf"(?<![\d.])v?{re.escape(v)}(?![\d])", text)
        if m:
            versions.append(v)
            words[f"v{v}"] = name[m.start():m.end()]
    if len(versions) == 1:
        hints["version"] = versions[0]
    m = re.search(r"baseline|uncalibrated|no lin|w/o lin", text)
    if m:
        hints["lin"] = False
        words["baseline"] = name[m.start():m.end()]
    elif re.search(r"\blin(ear)?\b", text):
        hints["lin"] = True
        words["lin"] = "lin"
    if words:
        hints["words"] = words
    return hints


def name_hints(name: str | None) -> dict:
    """:func:`parse_name` without the ``words`` it was read from."""
    return {k: v for k, v in parse_name(name).items() if k != "words"}


def _matches(spec: MetricSpec, hints: dict) -> bool:
    return (spec.net in hints.get("nets", [spec.net]) and spec.version == hints.get("version", spec.version)
            and spec.lin == hints.get("lin", spec.lin))


def explain(
    pairs: Discovery | Sequence[Pair],
    reported: float,
    *,
    name: str | None = None,
    use_name: bool = True,
    nets: Sequence[str] | None = None,
    versions: Sequence[str] | None = None,
    lins: Sequence[bool] | None = None,
    conventions: Sequence[str] = CONVENTIONS,
    grayscale: Sequence[bool] = (False, True),
    sizes: Sequence[int | None] = DEFAULT_SIZES,
    extra_size: int | None = None,
    mismatch: str = "error",
    sample: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    workers: int | None = None,
    lanes: int | None = None,
    device: torch.device | str | None = None,
    models: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """Rank every configuration by how close its dataset mean comes to ``reported``.

    Args:
        pairs: a discovery or pairs (sorted by key).
        reported: the value to reproduce (a finite number).
        name: the metric as the paper wrote it (``"LPIPS (VGG)"``): with ``use_name`` it narrows
            the search to what it says (backbone, version, lin/baseline) where ``nets``,
            ``versions`` and ``lins`` are not given; candidates consistent with it win ties.
        use_name: ``False``: search everything, the name only marks candidates.
        nets, versions, lins: what to try (default: what the name says, else every LPIPS
            backbone, version and head); backbones without weights are reported in
            ``unavailable`` and skipped.
        conventions, grayscale: the input variants to try (default: all).
        sizes: ``None`` (native) or sides ``n`` (``n × n``); ``extra_size`` adds one.
        mismatch: the size-mismatch policy (:mod:`~lpips_core.datasets.loader`).
        sample: use a seeded random sample of this many pairs (``numpy.random.default_rng(seed)``).
        batch_size, workers, lanes, device: as :func:`~lpips_core.datasets.score.score_pairs`.
        models: ``(net, version) → LPIPS`` with lin weights to reuse (in this process); others are built.
        progress: called with ``(pairs done, pairs)``.

    Raises:
        ValueError: a non-finite ``reported``, no pairs, bad options, or no backbone available.
    """
    reported = float(reported)
    if not math.isfinite(reported):
        raise ValueError(f"reported must be a finite number, got {reported!r}")
    info = metric_registry.METRICS["lpips"]
    hints = parse_name(name)
    narrow = hints if use_name else {}
    nets = tuple(nets if nets is not None else narrow.get("nets", info.nets))
    versions = tuple(versions if versions is not None else
                     ((narrow["version"],) if "version" in narrow else info.versions))
    lins = tuple(lins if lins is not None else ((narrow["lin"],) if "lin" in narrow else (True, False)))
    sizes = tuple(dict.fromkeys([*sizes, *([extra_size] if extra_size is not None else [])]))
    bad = [c for c in conventions if c not in CONVENTIONS]
    if bad or not conventions:
        raise ValueError(f"conventions must be from {CONVENTIONS}, got {list(conventions)!r}")
    if not lins or not grayscale or not sizes:
        raise ValueError("lins, grayscale and sizes must not be empty")
    specs = [MetricSpec("lpips", n_, v, lin, c, g, s)  # validates nets, versions and sizes
             for n_, v, s, g, c, lin in product(nets, versions, sizes, grayscale, conventions, lins)]
    pairs, _ = _sorted_pairs(pairs)
    if sample is not None and sample < len(pairs):
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=int(sample), replace=False))
        pairs = [pairs[i] for i in keep]
    if not pairs:
        raise ValueError("explain needs at least one pair")
    unavailable = {}
    for n_ in nets:
        ok, why = metric_registry.availability("lpips", n_)
        if not ok:
            unavailable[n_] = why
    specs = [s for s in specs if s.net not in unavailable]
    if not specs:
        raise ValueError(f"no backbone available: {unavailable}")
    built = {("lpips", net, v): m for (net, v), m in (models or {}).items()}
    scorer = Scorer(specs, device=device, models=built)
    result = score_pairs(pairs, scorer=scorer, mismatch=mismatch, batch_size=batch_size, workers=workers,
                         lanes=lanes, progress=progress)
    ok_rows = [r for r in result.rows if not r["error_kind"]]
    skipped = dict(result.summary["skipped_by_reason"])
    groups: list[tuple[np.ndarray, list[MetricSpec]]] = []
    for spec in scorer.specs:
        vals = np.array([np.nan if r.get(spec.name) is None else r[spec.name] for r in ok_rows], dtype=np.float64)
        for known, members in groups:
            if known.shape == vals.shape and np.array_equal(np.isnan(known), np.isnan(vals)) and \
                    np.nanmax(np.abs(known - vals), initial=0.0) <= SAME_VALUES_ATOL:
                members.append(spec)
                break
        else:
            groups.append((vals, [spec]))
    cands = []
    for vals, members in groups:
        members.sort(key=_preference)
        spec = members[0]
        st = mean_ci(vals)
        mean, std, lo, hi = st["mean"], st["std"], *st["ci95"]
        dist = abs(mean - reported) if mean is not None else math.inf
        sem = std / math.sqrt(st["n"]) if std else None
        cands.append(Candidate(spec, st["n"], mean, std, (lo, hi), dist,
                               (mean - reported) / sem if sem else None,
                               lo is not None and lo <= reported <= hi,
                               any(_matches(s, hints) for s in members) if hints else None, tuple(members)))
    cands.sort(key=lambda c: (c.distance, not c.matches_name, c.spec.name))
    searched = {"nets": [n_ for n_ in nets if n_ not in unavailable], "versions": list(versions),
                "lin": [bool(x) for x in lins], "conventions": list(conventions),
                "grayscale": [bool(g) for g in grayscale], "sizes": [_size_text(s) for s in sizes],
                "narrowed_by_name": bool(narrow) and any(k in narrow for k in ("nets", "version", "lin"))}
    return Explanation(reported, name, hints, cands, len(ok_rows), skipped, unavailable, searched)


def _preference(spec: MetricSpec) -> tuple:
    """Which of equal configurations names the row: the native size, colour, the metric's own range first."""
    return (spec.size is not None, spec.grayscale, spec.convention != "[-1,1]", spec.name)


def describe_hints(hints: dict) -> str:
    """What the name was read as, for people: ``"backbone VGG16 (from 'VGG')"``."""
    if not hints:
        return "nothing"
    words = hints.get("words", {})
    parts = []
    if "nets" in hints:
        parts.append("backbone " + " or ".join(f"{NET_LABELS[n]} (from '{words.get(n, n)}')" for n in hints["nets"]))
    if "version" in hints:
        parts.append(f"version {hints['version']} (from '{words.get('v' + hints['version'], hints['version'])}')")
    if "lin" in hints:
        parts.append("the uncalibrated baseline" if not hints["lin"] else "lin weights")
    return ", ".join(parts) or "nothing"
