"""Which configuration made this number? The dataset mean under every plausible LPIPS set-up.

Given pairs and a value a paper reports ("LPIPS 0.109"), :func:`explain` computes the mean LPIPS
of the pairs under every configuration a paper could plausibly have used —

    backbone (alex, vgg, squeeze where its weights are here) × version (0.1, 0.0)
    × lin weights or the uncalibrated baseline × input range ([-1,1], [0,1], [0,255])
    × colour or grayscale × size (native, 64, 256 and one the user names)

— and ranks them by ``|mean − reported|``, each with its spread (``std``, the 95 % CI of the mean,
how many standard errors it lies from the reported value and whether the CI holds it), so a
user sees whether a match is meaningful or just one of many configurations within the noise.

The work is the Conventions grid's (:func:`lpips_core.sweeps.conventions_grid`) batched over
pairs: per block of pairs, backbone, version and size, every image is resized once, the six
inputs (three ranges × colour/grayscale) of all pairs go through the network in one
:meth:`~lpips_core.model.LPIPSBase.pair_channel_terms` call, and lin and baseline both come
from those per-channel terms. So 24 configurations per backbone and size cost two passes
(v0.1 and v0.0) of six inputs per image.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from .. import metric_registry
from ..conventions import CONVENTIONS, apply_convention, parse_size, resize, to_gray
from ..protocol import resolve_device
from .loader import PairDataset, block_loader
from .pairs import Discovery, Pair
from .score import _sorted_pairs, default_block, mean_ci
from .specs import MetricSpec

__all__ = ["Candidate", "Explanation", "explain", "name_hints"]

DEFAULT_SIZES: tuple[int | None, ...] = (None, 64, 256)


@dataclass(frozen=True)
class Candidate:
    """One configuration and the dataset mean under it.

    Attributes:
        spec: the configuration as a :class:`~lpips_core.datasets.specs.MetricSpec`
            (``spec.name`` e.g. ``"lpips-vgg-0.1-lin-[0,1]@64"``; score it with ``score_pairs``).
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

    def to_json(self) -> dict:
        s = self.spec
        return {"config": s.name, "net": s.net, "version": s.version, "lin": s.lin, "convention": s.convention,
                "grayscale": s.grayscale, "size": "native" if s.size is None else s.size, "n": self.n,
                "mean": self.mean, "std": self.std, "ci95": list(self.ci95), "distance": self.distance,
                "z": self.z, "holds_reported": self.holds_reported, "matches_name": self.matches_name}


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` gives: candidates ranked closest first, and what was left out.

    Attributes:
        reported: the value searched for; name: the metric's written name, if given.
        hints: what the name says (``nets``, ``version``, ``lin``).
        candidates: ranked by ``distance`` (ties: those matching the name first).
        pairs: pairs decoded; skipped: pairs left out, by reason (``"too-small: <net> at <size>"``:
            left out of that backbone and size only).
        unavailable: backbones left out and why (e.g. SqueezeNet weights missing offline).
    """

    reported: float
    name: str | None
    hints: dict
    candidates: list[Candidate]
    pairs: int
    skipped: dict = field(default_factory=dict)
    unavailable: dict = field(default_factory=dict)

    def to_json(self, top: int | None = None) -> dict:
        return {"reported": self.reported, "name": self.name, "hints": self.hints, "pairs": self.pairs,
                "skipped": self.skipped, "unavailable": self.unavailable,
                "candidates": [c.to_json() for c in self.candidates[:top]]}


def name_hints(name: str | None) -> dict:
    """What a metric's written name says: ``{"nets": [...], "version": ..., "lin": ...}`` (absent: unknown).

    ``"LPIPS (VGG)"`` → ``{"nets": ["vgg"]}``; ``"LPIPS-Alex v0.0"`` → alex and version 0.0.
    """
    if not name:
        return {}
    text = name.lower()
    info = metric_registry.METRICS["lpips"]
    hints: dict = {}
    nets = [n for n in info.nets if n in text]
    if nets:
        hints["nets"] = nets
    versions = [v for v in info.versions if re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", text)]
    if len(versions) == 1:
        hints["version"] = versions[0]
    if "baseline" in text or "uncalibrated" in text:
        hints["lin"] = False
    return hints


def _matches(spec: MetricSpec, hints: dict) -> bool:
    return (spec.net in hints.get("nets", [spec.net]) and spec.version == hints.get("version", spec.version)
            and spec.lin == hints.get("lin", spec.lin))


def explain(
    pairs: Discovery | Sequence[Pair],
    reported: float,
    *,
    name: str | None = None,
    nets: Sequence[str] | None = None,
    versions: Sequence[str] | None = None,
    lins: Sequence[bool] = (True, False),
    conventions: Sequence[str] = CONVENTIONS,
    grayscale: Sequence[bool] = (False, True),
    sizes: Sequence[int | None] = DEFAULT_SIZES,
    extra_size: int | None = None,
    mismatch: str = "error",
    sample: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    workers: int | None = None,
    device: torch.device | str | None = None,
    models: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """Rank every configuration by how close its dataset mean comes to ``reported``.

    Args:
        pairs: a discovery or pairs (sorted by key).
        reported: the value to reproduce (a finite number).
        name: the metric as the paper wrote it (``"LPIPS (VGG)"``): candidates consistent with it
            are marked and win ties; nothing is filtered out.
        nets, versions: default: every LPIPS backbone and version of
            :data:`~lpips_core.metric_registry.METRICS`; backbones without weights are reported
            in ``unavailable`` and skipped.
        lins, conventions, grayscale: the variants to try (default: all).
        sizes: ``None`` (native) or sides ``n`` (``n × n``); ``extra_size`` adds one.
        mismatch: the size-mismatch policy (:mod:`~lpips_core.datasets.loader`).
        sample: use a seeded random sample of this many pairs (``numpy.random.default_rng(seed)``).
        batch_size, workers, device: as :func:`~lpips_core.datasets.score.score_pairs`.
        models: ``(net, version) → LPIPS`` with lin weights to reuse; others are built.
        progress: called with ``(pairs done, pairs)``.

    Raises:
        ValueError: a non-finite ``reported``, no pairs, bad options, or no backbone available.
    """
    reported = float(reported)
    if not math.isfinite(reported):
        raise ValueError(f"reported must be a finite number, got {reported!r}")
    info = metric_registry.METRICS["lpips"]
    nets = tuple(info.nets if nets is None else nets)
    versions = tuple(info.versions if versions is None else versions)
    sizes = tuple(dict.fromkeys([*sizes, *([extra_size] if extra_size is not None else [])]))
    bad = [c for c in conventions if c not in CONVENTIONS]
    if bad or not conventions:
        raise ValueError(f"conventions must be from {CONVENTIONS}, got {list(conventions)!r}")
    for s in sizes:  # validates nets/versions/sizes through the spec
        for n_ in nets:
            for v in versions:
                MetricSpec("lpips", n_, v, True, conventions[0], False, s)
    pairs, _ = _sorted_pairs(pairs)
    if sample is not None and sample < len(pairs):
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=int(sample), replace=False))
        pairs = [pairs[i] for i in keep]
    if not pairs:
        raise ValueError("explain needs at least one pair")
    dev = resolve_device(device)
    unavailable, models = {}, dict(models or {})
    for n_ in nets:
        ok, why = metric_registry.availability("lpips", n_)
        if not ok:
            unavailable[n_] = why
    usable = [n_ for n_ in nets if n_ not in unavailable]
    if not usable:
        raise ValueError(f"no backbone available: {unavailable}")
    for n_ in usable:
        for v in versions:
            if (n_, v) not in models:
                models[(n_, v)] = metric_registry.build("lpips", n_, version=v, device=dev)
    inputs = [(c, g) for g in grayscale for c in conventions]
    values: dict[tuple, list[float]] = {}
    skipped: dict[str, int] = {}
    block = default_block(dev) if batch_size is None else batch_size
    blocks = [list(range(k, min(k + block, len(pairs)))) for k in range(0, len(pairs), block)]
    done = 0
    if progress:
        progress(0, len(pairs))
    for items in block_loader(PairDataset(pairs, mismatch=mismatch), blocks, workers=workers):
        buckets: dict[tuple, list] = {}
        for d in items:
            if d.error_kind:
                skipped[d.error_kind] = skipped.get(d.error_kind, 0) + 1
            else:
                buckets.setdefault(tuple(d.a.shape), []).append(d)
        for ds in buckets.values():
            a01 = torch.stack([d.a for d in ds])
            b01 = torch.stack([d.b for d in ds])
            targets: dict[tuple[int, int], list] = {}  # sizes that give the same input are computed once
            for size in sizes:
                targets.setdefault(parse_size(size, tuple(a01.shape[-2:])), []).append(size)
            for target, same in targets.items():
                ra, rb = resize(a01, target), resize(b01, target)  # each image resized once per size
                for n_ in usable:
                    for v in versions:
                        _grid_block(models[(n_, v)], ra, rb, inputs, lins, same, values, skipped)
        done += len(items)
        if progress:
            progress(done, len(pairs))
    hints = name_hints(name)
    cands = []
    for (n_, v, lin, conv, gray, size), vals in values.items():
        spec = MetricSpec("lpips", n_, v, lin, conv, gray, size)
        st = mean_ci(vals)
        mean, std, lo, hi = st["mean"], st["std"], *st["ci95"]
        dist = abs(mean - reported) if mean is not None else math.inf
        sem = std / math.sqrt(st["n"]) if std else None
        cands.append(Candidate(spec, st["n"], mean, std, (lo, hi), dist,
                               (mean - reported) / sem if sem else None,
                               lo is not None and lo <= reported <= hi,
                               _matches(spec, hints) if hints else None))
    cands.sort(key=lambda c: (c.distance, not c.matches_name, c.spec.name))
    n_used = len(pairs) - sum(v for k, v in skipped.items() if not k.startswith("too-small"))
    return Explanation(reported, name, hints, cands, n_used, skipped, unavailable)


def _grid_block(model, ra, rb, inputs, lins, sizes, values, skipped) -> None:
    """All ``inputs`` × lin/baseline of one bucket through ``model`` in one channel-terms call;
    the values count for every size in ``sizes`` (they all give this input size)."""
    xs = torch.cat([apply_convention(to_gray(ra) if g else ra, c) for c, g in inputs])
    ys = torch.cat([apply_convention(to_gray(rb) if g else rb, c) for c, g in inputs])
    try:
        terms = model.pair_channel_terms(xs, ys)
    except ValueError:  # too small for this backbone at this size
        for size in sizes:
            key = f"too-small: {model.net} at {'native' if size is None else size}"
            skipped[key] = skipped.get(key, 0) + ra.shape[0]
        return
    n = ra.shape[0]
    totals = {True: sum(t @ w.cpu() for t, w in zip(terms, model.channel_weights)),
              False: sum(t.sum(1) for t in terms)}
    for lin in lins:
        per = totals[lin].view(len(inputs), n)
        for k, (c, g) in enumerate(inputs):
            vals = per[k].tolist()
            for size in sizes:
                values.setdefault((model.net, model.version, lin, c, g, size), []).extend(vals)
