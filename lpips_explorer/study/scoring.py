"""Scoring a 2AFC study: each metric's agreement with the judges, the human ceiling, bootstrap intervals.

The convention is BAPPS' (Zhang et al., CVPR 2018, the reference package's 2AFC score):

- per triplet, ``h`` = the fraction of the judges who called the **second** copy (``p1``) closer
  to the reference. A "can't tell" answer counts as half a vote for each side (our choice, the
  natural reading of "no preference"; BAPPS itself had no such option);
- a metric prefers the copy it puts closer (a smaller distance; a larger PSNR or SSIM). It scores
  ``h`` for the triplet when it prefers ``p1``, ``1 − h`` when it prefers ``p0`` and ``0.5`` on an
  exact tie;
- its 2AFC score is the mean over the triplets that have at least one judgement.

The human ceiling is the mean over triplets of ``p² + (1 − p)²`` (``p = h``): the expected
agreement of a judge drawn from the class with the class's own vote fractions. With a single
judge every triplet scores 1, so it means something only with several judges per triplet.

Intervals are percentile bootstraps over triplets (resampled with replacement, a seeded
``numpy.random.default_rng``): the same scores and seed always give the same interval.

Metrics. A study scores :func:`lpips_core.spec.standard_specs`: MSE, PSNR and SSIM, then every
network of every metric of :data:`lpips_core.metric_registry.METRICS` (calibrated, and the
uncalibrated baseline where the metric has one), so a metric added to the registry is scored
without a change here. Values are stored and reported under each spec's name
(:attr:`~lpips_core.spec.MetricSpec.name`); a study stored under the short keys of earlier
versions (``"lpips-alex"``, ``"lpips-alex-baseline"``, ``"dists-vgg"``) reads back under the
same names (:func:`stored_key`). :func:`triplet_distances` computes them for one triplet.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from lpips_core import twoafc
from lpips_core.spec import MetricSpec, parse_spec
from lpips_core.sweeps import metric_many

__all__ = [
    "CANT_TELL",
    "CHOICES",
    "bootstrap_ci",
    "human_ceiling",
    "human_ceiling_scores",
    "judge_fractions",
    "prefers",
    "score_metric",
    "stored_distances",
    "stored_key",
    "study_distances",
    "summarize",
    "triplet_distances",
    "two_afc",
    "two_afc_scores",
]

#: The stored choices: 0 = the first copy (key 1) is closer, 1 = the second (key 2), 2 = can't tell (key 0).
CANT_TELL = 2
CHOICES = (0, 1, CANT_TELL)


# --------------------------------------------------------------------------- the scoring itself
def _vector(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one value per triplet), got shape {a.shape}")
    return a


def judge_fractions(triplets: Iterable[int], choices: Iterable[int]) -> dict[int, tuple[float, int]]:
    """Per triplet: ``(h, n)``, ``h`` the fraction calling the second copy closer (can't tell = ½ each side), ``n`` judges.

    Args:
        triplets: the triplet index of each judgement.
        choices: each judgement's choice, one of :data:`CHOICES`.

    Raises:
        ValueError: a choice outside :data:`CHOICES`, or lengths that differ.
    """
    t, c = list(triplets), list(choices)
    if len(t) != len(c):
        raise ValueError(f"{len(t)} triplet indices but {len(c)} choices")
    votes: dict[int, list[float]] = {}
    for i, ch in zip(t, c):
        if ch not in CHOICES:
            raise ValueError(f"choice must be one of {CHOICES}, got {ch!r}")
        v = votes.setdefault(int(i), [0.0, 0])
        v[0] += {0: 0.0, 1: 1.0, CANT_TELL: 0.5}[int(ch)]
        v[1] += 1
    return {i: (s / n, n) for i, (s, n) in sorted(votes.items())}


def prefers(d0: Any, d1: Any, *, higher_is_closer: bool = False) -> np.ndarray:
    """Which copy a metric puts closer: ``0``, ``1``, or ``-1`` on an exact tie (int array, one per triplet)."""
    a, b = _vector(d0, "d0"), _vector(d1, "d1")
    if a.shape != b.shape:
        raise ValueError(f"d0 and d1 must have the same length, got {a.shape} and {b.shape}")
    if higher_is_closer:
        a, b = -a, -b
    return np.where(a < b, 0, np.where(b < a, 1, -1))


def two_afc_scores(d0: Any, d1: Any, h: Any, *, higher_is_closer: bool = False) -> np.ndarray:
    """Per-triplet 2AFC scores in ``[0, 1]``: ``h`` where the metric prefers ``p1``, ``1 − h`` for ``p0``, 0.5 on a tie.

    Args:
        d0, d1: ``(T,)`` the metric's value for each copy (a distance, or a similarity with
            ``higher_is_closer=True``).
        h: ``(T,)`` fraction of judges calling ``p1`` closer, in ``[0, 1]``.

    Raises:
        ValueError: lengths differ, or ``h`` outside ``[0, 1]``.
    """
    hh = _vector(h, "h")
    if np.any(~np.isfinite(hh)) or np.any((hh < 0) | (hh > 1)):
        raise ValueError(f"h must be in [0, 1], got min {np.nanmin(hh) if hh.size else None} and max "
                         f"{np.nanmax(hh) if hh.size else None}")
    pref = prefers(d0, d1, higher_is_closer=higher_is_closer)
    if pref.shape != hh.shape:
        raise ValueError(f"{pref.size} metric values but {hh.size} judge fractions")
    return np.where(pref == 1, hh, np.where(pref == 0, 1.0 - hh, 0.5))


def two_afc(d0: Any, d1: Any, h: Any, *, higher_is_closer: bool = False) -> float:
    """The 2AFC score: the mean of :func:`two_afc_scores` (``nan`` for no triplets)."""
    s = two_afc_scores(d0, d1, h, higher_is_closer=higher_is_closer)
    return float(s.mean()) if s.size else float("nan")


def human_ceiling_scores(h: Any) -> np.ndarray:
    """Per triplet ``p² + (1 − p)²`` for ``p = h`` in ``[0, 1]``."""
    p = _vector(h, "h")
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"h must be in [0, 1], got {p.min()}..{p.max()}")
    return p * p + (1.0 - p) * (1.0 - p)


def human_ceiling(h: Any) -> float:
    """The human ceiling: the mean of ``p² + (1 − p)²`` over triplets (``nan`` for none)."""
    s = human_ceiling_scores(h)
    return float(s.mean()) if s.size else float("nan")


def bootstrap_ci(scores: Any, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-triplet ``scores`` (triplets resampled with replacement).

    Seeded: the same ``scores``, ``n_boot``, ``seed`` and ``level`` always give the same interval.

    Returns:
        ``(low, high)``; ``(nan, nan)`` for no scores.

    Raises:
        ValueError: ``n_boot < 1``, ``level`` outside ``(0, 1)``.
    """
    s = _vector(scores, "scores")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return twoafc.bootstrap_ci(s, n_boot=int(n_boot), seed=seed, level=level)


# --------------------------------------------------------------------------- which metrics
def stored_key(key: str) -> str:
    """The spec name a stored metric key stands for (``"lpips-alex"`` → ``"lpips-alex-0.1-lin-[-1,1]"``,
    ``"dists-vgg"`` → ``"dists-vgg-[0,1]"``, ``"mse"`` → ``"mse"``); a key that names no spec is kept as it is."""
    try:
        return parse_spec(key).name
    except ValueError:
        return key


def triplet_distances(ref: np.ndarray, p0: np.ndarray, p1: np.ndarray, specs: Sequence[MetricSpec],
                      models: Mapping[MetricSpec, Any]) -> dict[str, tuple[float, float]]:
    """``spec name → (value for p0, value for p1)`` for each spec; a learned one needs ``models[spec]``.

    A learned spec whose model is missing or ``None`` is left out (unavailable weights).

    Args:
        ref, p0, p1: ``(H, W, 3)`` float images in ``[0, 1]``, the same shape (H, W ≥ 11).
        models: ``spec → model`` (:meth:`MetricSpec.build`, or the app's cached getter).
    """
    out: dict[str, tuple[float, float]] = {}
    for spec in specs:
        if not spec.learned:
            out[spec.name] = (spec.classic(ref, p0), spec.classic(ref, p1))
            continue
        model = models.get(spec)
        if model is None:
            continue
        total = metric_many(model, ref, [p0, p1], spec=spec).total
        d = np.asarray(total.detach().cpu(), dtype=np.float64)
        out[spec.name] = (float(d[0]), float(d[1]))
    return out


def stored_distances(rows: Sequence[Mapping[str, tuple[float, float]] | None]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``spec name → (d0, d1)`` over a study's triplets from each triplet's stored ``{name: (d0, d1)}``
    (:attr:`lpips_explorer.study.store.TripletRow.distances`, read under :func:`stored_key`); only
    names every triplet has.

    Raises:
        ValueError: a triplet has no stored values (``None``).
    """
    rows = list(rows)
    if any(r is None for r in rows):
        raise ValueError(f"triplet(s) {[i for i, r in enumerate(rows) if r is None]} have no stored metric values")
    if not rows:
        return {}
    keys = [k for k in rows[0] if all(k in r for r in rows)]
    return {k: (np.array([r[k][0] for r in rows], dtype=np.float64), np.array([r[k][1] for r in rows], dtype=np.float64))
            for k in keys}


def score_metric(d0: Any, d1: Any, h: Any, *, higher_is_closer: bool = False, n_boot: int = 2000,
                 seed: int = 0) -> dict[str, float]:
    """``{"score", "low", "high", "n"}``: the 2AFC score with its seeded bootstrap 95% interval over ``n`` triplets."""
    s = two_afc_scores(d0, d1, h, higher_is_closer=higher_is_closer)
    lo, hi = bootstrap_ci(s, n_boot=n_boot, seed=seed)
    return {"score": float(s.mean()) if s.size else float("nan"), "low": lo, "high": hi, "n": int(s.size)}


def study_distances(triplets: Sequence[Any], specs: Sequence[MetricSpec],
                    models: Mapping[MetricSpec, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``spec name → (d0, d1)``, each ``(T,)``, for many triplets at once (learned metrics in a few batches).

    Args:
        triplets: objects with ``ref``, ``p0``, ``p1`` (``(H, W, 3)`` float in ``[0, 1]``, one size),
            e.g. :class:`~lpips_explorer.study.triplets.Triplet`.
        models: ``spec → model``; a learned spec whose model is missing or ``None`` is left out.

    Equals :func:`triplet_distances` triplet by triplet (the same network on the same inputs,
    batched; float32 batching may differ in the last bits).
    """
    if not triplets:
        return {}
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for spec in specs:
        if not spec.learned:
            out[spec.name] = (np.array([spec.classic(t.ref, t.p0) for t in triplets], dtype=np.float64),
                              np.array([spec.classic(t.ref, t.p1) for t in triplets], dtype=np.float64))
            continue
        model = models.get(spec)
        if model is None:
            continue
        spec.check_model(model)
        x = torch.cat([spec.prepare(t.ref) for t in triplets for _ in (0, 1)])
        y = torch.cat([spec.prepare(im) for t in triplets for im in (t.p0, t.p1)])
        step = max(1, model.images_per_batch(*x.shape[-2:]) // 2)
        parts = [model.compare(a, b, spatial=False).total for a, b in zip(x.split(step), y.split(step))]
        d = np.asarray(torch.cat(parts).detach().cpu(), dtype=np.float64).reshape(-1, 2)
        out[spec.name] = (d[:, 0].copy(), d[:, 1].copy())
    return out


def summarize(
    distances: Mapping[str, tuple[Any, Any]],
    families: Sequence[str],
    judgements: Iterable[tuple[str, int, int]],
    specs: Sequence[MetricSpec],
    *,
    session: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """A whole study's results, as plain JSON-able values.

    Args:
        distances: ``spec name → (d0, d1)``, each ``(T,)`` over the study's triplets (:func:`study_distances`).
        families: ``(T,)`` each triplet's family.
        judgements: ``(session, triplet index, choice)`` for every judgement.
        specs: the metrics to score, in the order to show them; one missing from ``distances``
            is listed under ``"unavailable"``.
        session: also score this session alone (``"you"``).
        n_boot, seed: the bootstrap.

    Returns:
        ``{"n_triplets", "n_judges", "n_judgements", "class", "you", "per_triplet", "unavailable", "cant_tell"}``,
        where ``class`` (and ``you``, or ``None``) holds ``metrics`` (a list of ``{key, label, score,
        low, high, n}``, ``key`` the spec's name),
        ``ceiling`` (same keys) and ``by_family`` (``family → {key: score, …,
        "ceiling": …, "n": …}``); ``per_triplet`` lists ``{index, family, h, n, votes, scores: {key: score}}``
        for each judged triplet, ``votes`` the number of judges choosing copy 1, copy 2 and "can't tell".
    """
    judged = list(judgements)
    n = len(families)
    for key, (d0, d1) in distances.items():
        if len(d0) != n or len(d1) != n:
            raise ValueError(f"{key}: {len(d0)}/{len(d1)} values for {n} triplets")
    usable = [s for s in specs if s.name in distances]
    scored = dict(distances=distances, families=families, usable=usable, n_boot=n_boot, seed=seed)
    whole = _block(judged, **scored, by_family=True)
    you = _block([j for j in judged if j[0] == session], **scored, by_family=True) if session is not None else None
    per_triplet = _per_triplet(judged, whole, distances, families, usable) if whole is not None else []
    for b in (whole, you):
        if b is not None:
            del b["h"], b["idx"]
    return {
        "n_triplets": n,
        "n_judges": len({s for s, _, _ in judged}),
        "n_judgements": len(judged),
        "cant_tell": "counts as half a vote for each copy",
        "class": whole,
        "you": you,
        "per_triplet": per_triplet,
        "unavailable": [s.name for s in specs if s.name not in distances],
    }


def _block(rows: list[tuple[str, int, int]], *, distances: Mapping[str, tuple[Any, Any]], families: Sequence[str],
           usable: Sequence[MetricSpec], n_boot: int, seed: int, by_family: bool) -> dict[str, Any] | None:
    """:func:`summarize`'s results over the judgements ``rows`` (``None`` when there are none):
    ``metrics`` and ``ceiling`` with bootstrap intervals, ``by_family`` when asked, and the judged
    triplets' ``idx`` ``(J,)`` and judge fractions ``h`` ``(J,)`` for the caller to use and drop.

    Raises:
        ValueError: a judgement names a triplet outside ``[0, len(families))``.
    """
    n = len(families)
    fr = judge_fractions([t for _, t, _ in rows], [c for _, _, c in rows])
    if not fr:
        return None
    idx = np.array(list(fr), dtype=int)
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"a judgement names triplet {int(idx.max())}, the study has {n}")
    h = np.array([fr[i][0] for i in idx])
    out: dict[str, Any] = {"metrics": [], "h": h, "idx": idx}
    for i, s in enumerate(usable):
        d0, d1 = (np.asarray(d, dtype=np.float64)[idx] for d in distances[s.name])
        out["metrics"].append({"key": s.name, "label": s.label,
                               **score_metric(d0, d1, h, higher_is_closer=s.higher_is_better,
                                              n_boot=n_boot, seed=seed + i)})
    c = human_ceiling_scores(h)
    lo, hi = bootstrap_ci(c, n_boot=n_boot, seed=seed)
    out["ceiling"] = {"key": "ceiling", "label": "Human ceiling", "score": float(c.mean()), "low": lo, "high": hi,
                      "n": int(c.size)}
    if by_family:
        fam = np.array([families[i] for i in idx])
        out["by_family"] = {}
        for f in dict.fromkeys(fam):
            m = fam == f
            entry = {"n": int(m.sum()), "ceiling": float(c[m].mean())}
            for s in usable:
                d0, d1 = (np.asarray(d, dtype=np.float64)[idx][m] for d in distances[s.name])
                entry[s.name] = two_afc(d0, d1, h[m], higher_is_closer=s.higher_is_better)
            out["by_family"][str(f)] = entry
    return out


def _per_triplet(judged: list[tuple[str, int, int]], whole: dict[str, Any], distances: Mapping[str, tuple[Any, Any]],
                 families: Sequence[str], usable: Sequence[MetricSpec]) -> list[dict[str, Any]]:
    """:func:`summarize`'s ``per_triplet``: for each triplet of ``whole`` (the class's block, its
    ``idx`` and ``h`` still there), its family, judge fraction, judge count, votes per choice and
    each metric's 2AFC score."""
    counts = judge_fractions([t for _, t, _ in judged], [c for _, _, c in judged])
    votes: dict[int, list[int]] = {}
    for _, t, c in judged:
        votes.setdefault(int(t), [0, 0, 0])[int(c)] += 1
    per_triplet = []
    for i, hv in zip(whole["idx"], whole["h"]):
        scores = {}
        for s in usable:
            d0, d1 = (float(np.asarray(d, dtype=np.float64)[i]) for d in distances[s.name])
            scores[s.name] = float(two_afc_scores([d0], [d1], [hv], higher_is_closer=s.higher_is_better)[0])
        per_triplet.append({"index": int(i), "family": str(families[i]), "h": float(hv),
                            "n": counts[int(i)][1], "votes": votes[int(i)], "scores": scores})
    return per_triplet
