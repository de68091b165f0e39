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

**The race** (``race=True``, the default). Pairs are scored in a seeded random order, in rounds
(12 pairs: 6, 2, 2, 2); after each round a configuration whose running mean cannot reach the
reported value drops out, and a network pass stops when every configuration it serves has
dropped. The rows that must equal a full search's (``race=False``: every configuration on every
pair), value for value, are the first ``exact_rows`` of the ranking (what the CLI and the page
show) and every row whose 95 % interval holds the reported value (so the verdict and its
sentence too). The rounds are the full search's blocks as well, so a configuration scored on
every pair gets the same values in both, bit for bit.

How a configuration drops (:func:`race_drops`), after ``n`` of the ``N`` pairs, with running mean
``m`` and standard deviation ``s``:

1. where its final mean can still go: the running mean's Student t bound corrected for the pairs
   left, ``m ± t(RACE_LEVEL, n−1)·s·√((1 − n/N)/n)``;
2. widened by the final interval's half-width at the current spread, ``t(0.975, N−1)·s/√N``: if
   the reported value lies outside, its final interval cannot hold it;
3. and ``exact_rows`` other rows lie certainly closer to the value (their widest distance below
   this one's narrowest), so it cannot be among the first rows either (the closest ``exact_rows``
   rows never drop);
4. a pass stops only when every configuration it serves may drop; the others run to the end.

That is a bet on few pairs, not a proof (no rule on part of the pairs can be one: a single unseen
pair can move any mean and widen any interval). So once every pair is scored each drop is
checked (:func:`race_check`) against the nearest complete configurations, which track it pair by
pair (LPIPS configurations correlate at ρ ≈ 0.98 across pairs): a regression on the pairs both
scored predicts its mean and spread on the pairs it missed, and a drop stands only if that puts
it outside the first ``exact_rows`` rows and its interval away from the reported value; every
other dropped configuration (with its pass) is finished on the pairs it missed, in the same
blocks. Replayed on the per-pair values of the demo set's photos at 256 px (both methods,
AlexNet and VGG16; each configuration's mean, values between them and values just inside or
outside each interval as the reported number; random orders), no race changed a first row or
the verdict (docs/datasets.md has the counts). ``race=False`` (the CLI's ``--all``
or ``--no-race``) is the exact search. Rows that stay dropped come after the complete ones with
``complete=False`` and their statistics over the pairs they scored.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from itertools import product
from typing import Callable, Sequence

import numpy as np
import torch

from .. import metric_registry
from ..conventions import CONVENTIONS
from ..images import min_side_for
from ..metric_registry import NET_LABELS
from ..spec import MetricSpec
from .pairs import Discovery, Pair
from .score import Scorer, _sorted_pairs, check_lane_kind, default_block, default_lanes, mean_ci, score_pairs

__all__ = ["Candidate", "ExplainProgress", "Explanation", "explain", "name_hints", "parse_name", "race_check",
           "race_drops"]

DEFAULT_SIZES: tuple[int | None, ...] = (None, 64, 256)
#: Two configurations are one row when every pair's value agrees within this (float32 rounding
#: of the same computation reached by two routes, e.g. resizing to the native size).
SAME_VALUES_ATOL = 1e-6
#: The rows of the ranking a race computes on every pair (besides every row that holds the value):
#: the CLI's default ``--top`` and the page's table.
EXACT_ROWS = 10
#: A race's first decision comes after this many pairs (fewer pairs: no configuration drops).
RACE_FIRST = 6
#: Where a running mean can still go is taken as its one-sided ``RACE_LEVEL`` Student t bound each
#: way (the verdict's interval is 0.975; replayed on the demo set's values at 256 px, 0.975 dropped
#: a row that had to stay in 11 of 1,084 races, 0.995 in 1 of 2,168, 0.999 in none: docs/datasets.md).
RACE_LEVEL = 0.999
#: The check of a drop once every pair is scored: its predictions hold with probability 1 − this.
RACE_ALPHA = 0.05
#: The complete configurations that check a drop: the nearest by their options (Bonferroni over them).
RACE_ANCHORS = 3
#: Rough seconds of one network pass of a 256 px pair on one CPU core, per backbone: an explain
#: block holds as many pairs as keep one pass near :data:`PASS_TARGET_S` (the progress moves
#: after each pass), at least one.
PASS_SECONDS = {"alex": 0.02, "squeeze": 0.02, "vgg": 0.4}
PASS_TARGET_S = 0.5


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
        complete: scored on every pair; ``False``: dropped by the race after ``n`` pairs (its
            statistics are over those, ``holds_reported`` is ``False``: the race's check put its
            full-data interval away from the reported value).
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
    complete: bool = True

    def to_json(self) -> dict:
        s = self.spec
        return {"config": s.name, "label": s.label, "same": [x.name for x in (self.same or (s,))],
                "net": s.net, "version": s.version, "lin": s.lin, "convention": s.convention,
                "grayscale": s.grayscale, "size": _size_text(s.size), "n": self.n,
                "mean": self.mean, "std": self.std, "ci95": list(self.ci95), "distance": self.distance,
                "z": self.z, "holds_reported": self.holds_reported, "matches_name": self.matches_name,
                "complete": self.complete}


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
            with the same values on this data are one candidate. After a race the complete ones
            come first, then those it dropped (``complete=False``), each part ranked.
        pairs: pairs scored; skipped: pairs left out, by reason.
        unavailable: backbones left out and why (e.g. SqueezeNet weights missing offline).
        race: how the search ran (``raced``, ``exact_rows``, ``rounds``, ``configurations``,
            ``dropped``, ``finished``, ``scores``/``scores_full``: pair × configuration values
            computed against a full search's, ``passes``/``passes_full``: network passes per pair
            run against a full search's).
    """

    reported: float
    name: str | None
    hints: dict
    candidates: list[Candidate]
    pairs: int
    skipped: dict = field(default_factory=dict)
    unavailable: dict = field(default_factory=dict)
    searched: dict = field(default_factory=dict)
    race: dict = field(default_factory=dict)

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
                "race": self.race, "candidates": [c.to_json() for c in self.candidates[:top]]}


@dataclass(frozen=True)
class ExplainProgress:
    """Where an :func:`explain` run is (its ``status`` callback gets one at least once a second
    while it computes, and at every round).

    Attributes:
        done, total: pair × configuration values done of all (a configuration the race drops
            counts its remaining pairs as done; ``total`` grows if its check sends some back).
        pairs_done, pairs: pairs scored by the configurations still running, of all.
        left, configurations: configurations still being scored, of all.
    """

    done: int
    total: int
    pairs_done: int
    pairs: int
    left: int
    configurations: int

    @property
    def text(self) -> str:
        """``"812 of 864 pair × configuration scores; 22 of 72 configurations left; pair 8 of 12"``."""
        return (f"{self.done} of {self.total} pair × configuration scores; {self.left} of {self.configurations} "
                f"configurations left; {self.pairs_done} of {self.pairs} pairs")


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
    lanes: int | None = None, lane_kind: str = "process",
    device: torch.device | str | None = None,
    models: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    race: bool = True,
    exact_rows: int = EXACT_ROWS,
    status: Callable[[ExplainProgress], None] | None = None,
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
        batch_size, workers, lanes, lane_kind, device: as :func:`~lpips_core.datasets.score.score_pairs`.
        models: LPIPS models with lin weights to reuse (in this process), keyed by their
            :class:`~lpips_core.spec.MetricSpec` (``MetricSpec("lpips", net, version)``, any input
            options: the key is its ``model_spec``); others are built.
        progress: called with ``(done, total)`` pair × configuration values (see :class:`ExplainProgress`),
            at least once a second while the networks run.
        race: drop the configurations that cannot reach ``reported`` as the pairs come in (the
            module's docstring says what stays exact); ``False``: every configuration on every pair.
        exact_rows: the first rows a race computes on every pair (besides every row that holds
            the value): at least the rows that will be shown.
        status: called with an :class:`ExplainProgress` whenever ``progress`` is.

    Raises:
        ValueError: a non-finite ``reported``, no pairs, bad options, or no backbone available.
    """
    reported = float(reported)
    if not math.isfinite(reported):
        raise ValueError(f"reported must be a finite number, got {reported!r}")
    if isinstance(exact_rows, bool) or not isinstance(exact_rows, int) or exact_rows < 1:
        raise ValueError(f"exact_rows must be a positive integer, got {exact_rows!r}")
    hints = parse_name(name)
    narrow = hints if use_name else {}
    grid = _Grid.of(narrow, nets, versions, lins, conventions, grayscale, sizes, extra_size)
    pairs, _ = _sorted_pairs(pairs)
    if sample is not None and sample < len(pairs):
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=int(sample), replace=False))
        pairs = [pairs[i] for i in keep]
    if not pairs:
        raise ValueError("explain needs at least one pair")
    scorer = Scorer(grid.specs, device=device, models=_model_keys(models))
    search = _Search(pairs, scorer, reported, race=race, exact_rows=exact_rows, seed=seed, status=status,
                     mismatch=mismatch, batch_size=batch_size, workers=workers, lanes=lanes, lane_kind=lane_kind,
                     progress=progress)
    with scorer.shared_with_lanes() if search.lanes else contextlib.nullcontext():
        search.run()
        cands, keys = _rank(search, hints, exact_rows)
    return Explanation(reported, name, hints, cands, len(keys), dict(sorted(search.skipped.items())),
                       grid.unavailable, grid.searched(narrow), search.summary(exact_rows))


def _model_keys(models: dict | None) -> dict:
    """``models`` as :class:`Scorer` keeps them: under each key's ``model_spec``.

    Raises:
        TypeError: a key that is not a :class:`~lpips_core.spec.MetricSpec`.
    """
    out = {}
    for key, model in (models or {}).items():
        if not isinstance(key, MetricSpec):
            raise TypeError(f"explain's models must be keyed by MetricSpec, got {key!r}")
        out[key.model_spec] = model
    return out


@dataclass(frozen=True)
class _Grid:
    """The configurations an explain run searches, and the backbones left out (no weights here)."""

    nets: tuple
    versions: tuple
    lins: tuple
    conventions: tuple
    grayscale: tuple
    sizes: tuple
    specs: list
    unavailable: dict

    @classmethod
    def of(cls, narrow: dict, nets, versions, lins, conventions, grayscale, sizes, extra_size) -> "_Grid":
        """What to search: the options given, else what the name says (``narrow``), else everything.

        Raises:
            ValueError: an unknown input range, an empty option, or no backbone with weights here.
        """
        info = metric_registry.METRICS["lpips"]
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
        unavailable = {}
        for n_ in nets:
            ok, why = metric_registry.availability("lpips", n_)
            if not ok:
                unavailable[n_] = why
        specs = [s for s in specs if s.net not in unavailable]
        if not specs:
            raise ValueError(f"no backbone available: {unavailable}")
        return cls(nets, versions, lins, tuple(conventions), tuple(grayscale), sizes, specs, unavailable)

    def searched(self, narrow: dict) -> dict:
        """The ``searched`` record of an :class:`Explanation`."""
        return {"nets": [n_ for n_ in self.nets if n_ not in self.unavailable], "versions": list(self.versions),
                "lin": [bool(x) for x in self.lins], "conventions": list(self.conventions),
                "grayscale": [bool(g) for g in self.grayscale], "sizes": [_size_text(s) for s in self.sizes],
                "narrowed_by_name": bool(narrow) and any(k in narrow for k in ("nets", "version", "lin"))}


def _rank(search: "_Search", hints: dict, exact_rows: int) -> tuple[list[Candidate], list[str]]:
    """The ranked candidates after a search (complete ones first, then what the race dropped),
    each drop first checked and, where the check does not confirm it, finished; and the pairs scored."""
    specs = search.scorer.specs

    def ranked(keys):
        complete = [spec for spec in specs if spec.name not in search.dropped]
        return complete, _candidates(complete, {s.name: [search.values[s.name][k] for k in keys] for s in complete},
                                     search.reported, hints)

    keys = search.ok_keys()  # the pairs scored, in key order: every statistic sums in this order
    complete, cands = ranked(keys)
    kth = cands[exact_rows - 1].distance if len(cands) >= exact_rows else math.inf
    if search.race and search.dropped:
        finish = search.check(complete, keys, kth)
        if finish:
            search.finish(finish)
            keys = search.ok_keys()
            complete, cands = ranked(keys)
    left = [spec for spec in specs if spec.name in search.dropped]
    partial = _candidates(left, {s.name: [search.values[s.name][k] for k in keys if k in search.values[s.name]]
                                 for s in left}, search.reported, hints, complete=False)
    return cands + partial, keys


def _candidates(specs: list[MetricSpec], values: dict[str, list[float]], reported: float, hints: dict, *,
                complete: bool = True) -> list[Candidate]:
    """Ranked candidates of ``specs`` from their values (in key order), the configurations with the
    same values on the same pairs merged into one (in ``specs``' order, the first one's values)."""
    groups: list[tuple[np.ndarray, list[MetricSpec]]] = []
    for spec in specs:
        vals = np.array([np.nan if v is None else v for v in values[spec.name]], dtype=np.float64)
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
                               complete and lo is not None and lo <= reported <= hi,
                               any(_matches(s, hints) for s in members) if hints else None, tuple(members),
                               complete))
    cands.sort(key=lambda c: (c.distance, not c.matches_name, c.spec.name))
    return cands


# --------------------------------------------------------------------------- the race
def race_drops(values: np.ndarray, reported: float, pairs: int, *, exact_rows: int = EXACT_ROWS,
               families: Sequence | None = None) -> np.ndarray:
    """Which running configurations may drop after the pairs scored so far (the module's rule).

    Args:
        values: ``(C, n)``: each running configuration's values on the ``n`` pairs scored so far.
        reported: the value searched for.
        pairs: ``N``, the pairs there are (scored or not; an upper bound is safe).
        exact_rows: a configuration drops only when this many other rows lie certainly closer.
        families: each configuration's network pass; a configuration drops only with every
            configuration of its pass (default: each on its own).

    Returns:
        ``(C,)`` bools. Nothing drops with fewer than three pairs, a spread of zero, a value
        that is not finite, or no pairs left.
    """
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    c, n = x.shape
    out = np.zeros(c, dtype=bool)
    if n < 3 or n >= pairs or c == 0:
        return out
    finite = np.isfinite(x).all(axis=1)
    xf = np.where(finite[:, None], x, 0.0)
    mean = xf.mean(axis=1)
    std = xf.std(axis=1, ddof=1)
    left = 1.0 - n / pairs
    move = float(stats.t.ppf(RACE_LEVEL, n - 1)) * std * math.sqrt(left / n)  # where the final mean can go
    half = float(stats.t.ppf(0.975, pairs - 1)) * std / math.sqrt(pairs)  # the final interval's half-width
    dist = np.abs(mean - reported)
    near, far = np.maximum(dist - move, 0.0), dist + move
    row = _rows_of(xf, finite)
    may = finite & (std > 0) & (dist > move + half)
    reps = np.unique(row[finite & (std > 0)])  # a row without spread yet is certainly nowhere
    for i in np.flatnonzero(may):
        closer = reps[(reps != row[i]) & (far[reps] < near[i])]
        may[i] = closer.size >= exact_rows
    if families is None:
        return may
    fam = list(families)
    keep = {f for f, ok in zip(fam, may) if not ok}
    return np.array([ok and f not in keep for f, ok in zip(fam, may)], dtype=bool)


def _rows_of(x: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Each configuration's row: the index of the first with the same values (within
    :data:`SAME_VALUES_ATOL`); a configuration with a value that is not finite is its own row."""
    row = np.arange(x.shape[0])
    for i in range(x.shape[0]):
        if not finite[i]:
            continue
        for j in range(i):
            if row[j] == j and finite[j] and np.max(np.abs(x[j] - x[i]), initial=0.0) <= SAME_VALUES_ATOL:
                row[i] = j
                break
    return row


def race_check(partial: np.ndarray, scored: np.ndarray, complete: np.ndarray, reported: float, *, kth: float,
               alpha: float = RACE_ALPHA) -> bool:
    """Whether a dropped configuration may stay dropped, once the complete ones are known.

    Each given complete configuration in turn predicts the dropped one on the pairs it missed: a
    least-squares line through the pairs both scored gives the missed pairs' mean (a
    ``1 − alpha/(2A)`` Student t prediction interval, ``A`` the configurations given: Bonferroni)
    and bounds its final standard deviation (the squares of the scored pairs about the predicted
    mean, and of the missed pairs' predictions plus the prediction errors' norm, an F bound at
    ``1 − alpha/(2A)``). The drop stands if one of them puts the final
    mean's narrowest distance to ``reported`` beyond both the final interval's widest half-width
    (it cannot hold the value) and ``kth`` (it cannot be among the rows that must be exact).

    Args:
        partial: ``(n,)`` its values on the pairs it scored.
        scored: ``(n,)`` those pairs' indices among the ``N`` pairs.
        complete: ``(A, N)`` complete configurations' values on every pair (chosen without looking
            at the values: :meth:`_Search.check` takes the nearest configurations by their options).
        reported: the value searched for.
        kth: the distance of the last row that must be exact (``inf``: fewer complete rows).
        alpha: the probability that the intervals used fail.
    """
    from scipy import stats

    y = np.asarray(partial, dtype=np.float64)
    anchors = np.asarray(complete, dtype=np.float64)
    n, big_n = y.size, anchors.shape[1]
    m = big_n - n
    if m <= 0:
        return False
    anchors = anchors[np.isfinite(anchors).all(axis=1)]
    if n < 4 or not math.isfinite(kth) or not np.isfinite(y).all() or not len(anchors):
        return False
    rest = np.setdiff1d(np.arange(big_n), scored)
    a_n = len(anchors)
    t_mean = float(stats.t.ppf(1 - alpha / (4 * a_n), n - 2))
    f_spread = float(stats.f.ppf(1 - alpha / (2 * a_n), m, n - 2))
    half_t = float(stats.t.ppf(0.975, big_n - 1)) / math.sqrt(big_n)
    ybar = y.mean()
    for a in anchors:
        x, xr = a[scored], a[rest]
        xbar = x.mean()
        sxx = float(((x - xbar) ** 2).sum())
        if not sxx > 0:
            continue
        b = float(((x - xbar) * (y - ybar)).sum()) / sxx
        c0 = ybar - b * xbar
        se = math.sqrt(float(((y - c0 - b * x) ** 2).sum()) / (n - 2))
        pred = c0 + b * xr
        mean = (y.sum() + pred.sum()) / big_n
        move = (m / big_n) * t_mean * se * math.sqrt(1 / m + 1 / n + (xr.mean() - xbar) ** 2 / sxx)
        # the final std: the squares about any centre (here the predicted mean) bound (N − 1)·s²;
        # the scored pairs' are known, the missed pairs' are the predictions' plus the errors' norm
        errors = se * math.sqrt(float((1 + 1 / n + (xr - xbar) ** 2 / sxx).sum()) * f_spread)
        squares = float(((y - mean) ** 2).sum()) + (math.sqrt(float(((pred - mean) ** 2).sum())) + errors) ** 2
        half = half_t * math.sqrt(squares / (big_n - 1))
        near = max(abs(mean - reported) - move, 0.0)
        if near > half and near > kth:
            return True
    return False


def _passes(specs: list[MetricSpec], native: tuple[int, int] | None) -> int:
    """Network passes a pair of ``native`` size takes for ``specs``: one per pass key, a size equal
    to the native size sharing the native pass."""
    from ..conventions import parse_size

    keys = set()
    for s in specs:
        size = s.size
        if size is not None and native is not None and parse_size(size, native) == native:
            size = None
        keys.add(s.pass_key[:-1] + (size,))
    return len(keys)


def _options_apart(a: MetricSpec, b: MetricSpec) -> int:
    """How many options (backbone, version, head, input range, colour, size) two configurations differ in."""
    return sum(x != y for x, y in zip((a.net, a.version, a.lin, a.convention, a.grayscale, a.size),
                                      (b.net, b.version, b.lin, b.convention, b.grayscale, b.size)))


def _race_rounds(pairs: int, width: int) -> list[tuple[int, int]]:
    """The rounds (index ranges of the scoring order): the first of :data:`RACE_FIRST` pairs,
    then about a quarter more pairs each (at least two), each a multiple of ``width`` (the lanes)
    until the last: 12 pairs are scored as 6, 2, 2 and 2."""
    def up(k: int) -> int:
        return -(-k // width) * width

    bounds = [min(pairs, up(max(RACE_FIRST, width)))]
    while bounds[-1] < pairs:
        bounds.append(min(pairs, bounds[-1] + up(max(2, width, bounds[-1] // 4))))
    return list(zip([0, *bounds[:-1]], bounds))


class _LaneCounter:
    """``Scorer.on_pass`` in scoring lanes: each process adds to its own slot of a shared array."""

    def __init__(self, slots: int):
        import multiprocessing

        self.counts = multiprocessing.RawArray("q", slots)

    def __call__(self, pairs: int, specs: int) -> None:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        self.counts[0 if info is None else info.id + 1] += pairs * specs

    def total(self) -> int:
        return int(sum(self.counts))

    def reset(self) -> None:
        for i in range(len(self.counts)):
            self.counts[i] = 0


class _Search:
    """An explain run's rounds: which pairs, which configurations, the values so far, the progress."""

    def __init__(self, pairs: list[Pair], scorer: Scorer, reported: float, *, race: bool, exact_rows: int,
                 seed: int, mismatch: str, batch_size: int | None, workers: int | None, lanes: int | None,
                 lane_kind: str,
                 progress, status):
        self.pairs, self.scorer, self.reported = pairs, scorer, reported
        self.race, self.exact_rows, self.mismatch = race, exact_rows, mismatch
        self.workers, self.progress, self.status = workers, progress, status
        self.specs = list(scorer.specs)
        self.names = [s.name for s in self.specs]
        self.values: dict[str, dict[str, float | None]] = {name: {} for name in self.names}
        self.scored: list[str] = []  # the pairs scored (not errors), in scoring order
        self.skipped: dict[str, int] = {}
        self.dropped: dict[str, int] = {}  # name → the first round it missed
        self.finished = 0
        self._errors: set[str] = set()  # the pairs that are errors (under every configuration)
        n = len(pairs)
        self.order = np.random.default_rng([int(seed), 0x5241_4345]).permutation(n)
        device = scorer.device
        if lanes is not None and int(lanes) < 0:
            raise ValueError(f"lanes must be ≥ 0, got {lanes!r}")
        self.lanes = default_lanes(device, n, workers) if lanes is None else min(int(lanes), os.cpu_count() or 1)
        if device.type != "cpu" or self.lanes < 2:
            self.lanes = 0
        self.rounds = _race_rounds(n, max(self.lanes, 1))
        cap = default_block(device) if batch_size is None else batch_size
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.block = cap if device.type != "cpu" else min(cap, self._pairs_per_pass())
        self.min_side = {s.net: min_side_for(s.net) for s in self.specs if s.size is None and s.net}
        self.total = n * len(self.names)
        self.done = 0  # exact at round boundaries
        self.live = 0  # values reported by the passes of the round under way
        self.pairs_done = 0
        self.scores = 0
        self.passes = 0  # network passes per pair, all pairs together (a twin of native size: one)
        self.passes_full = 0
        self._shown = -1
        self._last = 0.0
        self._lock = threading.Lock()
        self.lane_kind = check_lane_kind(lane_kind)
        # process lanes count into shared memory, read by a ticker; thread lanes' passes are
        # reported in this thread (score_pairs relays them)
        self._counter = _LaneCounter(self.lanes + 1) if self.lanes and lane_kind == "process" else None

    def _pairs_per_pass(self) -> int:
        """Pairs in a block on a CPU: a pass of the costliest backbone on the largest input (the
        first round's reference headers, or a size searched) near :data:`PASS_TARGET_S` (read
        from the files, so a race and a full search cut the same blocks)."""
        from ..images import header_pixels

        lo, hi = self.rounds[0]
        pixels = max([header_pixels(self.pairs[i].reference) or 0 for i in self.order[lo:hi]]
                     + [h * w for s in self.specs if s.size is not None
                        for h, w in [(s.size, s.size) if isinstance(s.size, int) else s.size]] + [1])
        seconds = max(PASS_SECONDS.get(s.net, max(PASS_SECONDS.values())) for s in self.specs) * pixels / 256 ** 2
        return max(1, int(PASS_TARGET_S / seconds))

    # ----------------------------------------------------------------- progress
    def _emit(self, force: bool = False) -> None:
        if self.progress is None and self.status is None:
            return
        with self._lock:
            now = time.monotonic()
            done = min(max(self._shown, self.done + self.live), self.total)
            if not force and (done == self._shown or now - self._last < 0.2):
                return
            self._shown, self._last = done, now
            left = len(self.names) - len(self.dropped)
            if self.progress is not None:
                self.progress(done, self.total)
            if self.status is not None:
                self.status(ExplainProgress(done, self.total, self.pairs_done, len(self.pairs), left,
                                            len(self.names)))

    def _on_pass_here(self, pairs: int, specs: int) -> None:
        self.live += pairs * specs
        self._emit()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(0.25):
            self.live = self._counter.total()
            self._emit()

    # ----------------------------------------------------------------- rounds
    def _score(self, k: int, active: list[str], finishing: bool = False) -> None:
        """Score round ``k`` under the configurations ``active``; record values and errors."""
        lo, hi = self.rounds[k]
        subset = [self.pairs[i] for i in self.order[lo:hi]]
        width = max(self.lanes, 1)
        block = max(1, min(self.block, -(-len(subset) // width)))
        scorer = self.scorer
        scorer.active = None if len(active) == len(self.names) else frozenset(active)
        stop = ticker = None
        if self._counter is not None:
            self._counter.reset()
            scorer.on_pass = self._counter
            stop = threading.Event()
            ticker = threading.Thread(target=self._tick, args=(stop,), daemon=True)
            ticker.start()
        else:
            scorer.on_pass = self._on_pass_here
        try:
            res = score_pairs(subset, scorer=scorer, mismatch=self.mismatch, batch_size=block, workers=self.workers,
                              lanes=self.lanes, lane_kind=self.lane_kind)
        finally:
            scorer.active = scorer.on_pass = None
            if ticker is not None:
                stop.set()
                ticker.join()
        scored = set(self.scored)
        for row in res.rows:
            key = row["key"]
            kind = row["error_kind"] or self._too_small(row)
            if kind:
                if key in scored:  # ok before, an error under the configurations finished now
                    self.scored.remove(key)
                    scored.discard(key)
                    self.skipped[kind] = self.skipped.get(kind, 0) + 1
                elif key not in self._errors:
                    self._errors.add(key)
                    self.skipped[kind] = self.skipped.get(kind, 0) + 1
                continue
            if key not in scored:
                self.scored.append(key)
                scored.add(key)
            for name in active:
                self.values[name][key] = row[name]
        self.scores += len(subset) * len(active)
        running = [s for s in self.specs if s.name in set(active)]
        for row in res.rows:
            native = self._native(row)
            self.passes += _passes(running, native)
            if not finishing:
                self.passes_full += _passes(self.specs, native)
        self.done += len(subset) * len(active)
        self.live = 0

    def _native(self, row: dict) -> tuple[int, int] | None:
        """The size the networks see a pair at natively (after the mismatch policy), if it was read."""
        if not row["reference_size"]:
            return None
        h, w = (int(v) for v in row["reference_size"].split("x"))
        if self.mismatch == "crop" and row["test_size"]:
            th, tw = (int(v) for v in row["test_size"].split("x"))
            h, w = min(h, th), min(w, tw)
        return h, w

    def _too_small(self, row: dict) -> str:
        """``"too-small"`` when a native pass of the search would refuse the pair, run or not (a
        full search skips the pair; a race whose native passes of that backbone all dropped would
        not see it), else ``""``."""
        native = self._native(row)
        if native is None:
            return ""
        return "too-small" if any(min(native) < side for side in self.min_side.values()) else ""

    def run(self) -> None:
        """Every round; after each but the last, the race's drops."""
        self._emit(force=True)
        n = len(self.pairs)
        for k, (lo, hi) in enumerate(self.rounds):
            active = [name for name in self.names if name not in self.dropped]
            self._score(k, active)
            self.pairs_done = hi
            if self.race and hi < n:
                x = np.array([[np.nan if self.values[name][key] is None else self.values[name][key]
                               for key in self.scored] for name in active], dtype=np.float64).reshape(len(active), -1)
                by_name = dict(zip(self.names, self.specs))
                drop = race_drops(x, self.reported, n - len(self._errors), exact_rows=self.exact_rows,
                                  families=[by_name[name].pass_key for name in active])
                for name, gone in zip(active, drop):
                    if gone:
                        self.dropped[name] = k + 1
                        self.done += n - hi
            self._emit(force=True)

    def ok_keys(self) -> list[str]:
        """The pairs scored, in key order."""
        return sorted(self.scored)

    def check(self, complete: list[MetricSpec], keys: list[str], kth: float) -> list[str]:
        """The dropped configurations whose drop :func:`race_check` does not confirm (with the other
        configurations of their network passes)."""
        if not complete or not keys:
            return list(self.dropped)
        index = {k: i for i, k in enumerate(keys)}
        full = np.array([[np.nan if self.values[s.name][k] is None else self.values[s.name][k] for k in keys]
                         for s in complete], dtype=np.float64)
        reps = np.unique(_rows_of(np.nan_to_num(full), np.isfinite(full).all(axis=1)))
        by_name = dict(zip(self.names, self.specs))
        back = set()
        for name in self.dropped:
            spec = by_name[name]
            near = sorted(reps, key=lambda i: (_options_apart(spec, complete[i]), complete[i].name))[:RACE_ANCHORS]
            mine = [k for k in keys if k in self.values[name]]
            y = np.array([np.nan if self.values[name][k] is None else self.values[name][k] for k in mine])
            if not race_check(y, np.array([index[k] for k in mine], dtype=int), full[near], self.reported, kth=kth):
                back.add(spec.pass_key)
        return [name for name in self.dropped if by_name[name].pass_key in back]

    def finish(self, names: list[str]) -> None:
        """Score ``names`` on the rounds they missed (in those rounds' blocks), so they are complete."""
        missing = sum(len(self.pairs) - self.rounds[self.dropped[name] - 1][1] for name in names)
        self.total += missing
        for k in range(len(self.rounds)):
            active = [name for name in names if self.dropped[name] <= k]
            if active:
                self._score(k, active, finishing=True)
                self._emit(force=True)
        for name in names:
            del self.dropped[name]
        self.finished += len(names)
        self._emit(force=True)

    def summary(self, exact_rows: int) -> dict:
        n, c = len(self.pairs), len(self.names)
        return {"raced": self.race, "exact_rows": exact_rows, "rounds": [hi for _, hi in self.rounds],
                "lanes": self.lanes, "configurations": c, "dropped": len(self.dropped), "finished": self.finished,
                "scores": self.scores, "scores_full": n * c, "passes": self.passes, "passes_full": self.passes_full}


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
