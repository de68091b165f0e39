"""Scoring, fitting lin weights, and the toy 2AFC experiment on the stand-ins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from lpips_core.progress import part, report
from lpips_explorer.calibration.common import DEFAULT_THREADS, Progress, _int, _positive, torch_threads
from lpips_explorer.calibration.standin import StandInNet, _channel_terms_from
from lpips_explorer.calibration.triplets import Triplets, make_triplets

__all__ = ["Accuracy", "DEFAULT_NET_SEEDS", "StandInResult", "TwoAFCResult", "fit_lin", "run_2afc", "score_2afc"]

#: Seeds of the stand-ins in the reference example.
DEFAULT_NET_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)


@dataclass(frozen=True, eq=False)
class Accuracy:
    """2AFC agreement with the constructed answers: overall and per kind of far patch.

    Attributes:
        all, noise, dct: mean score over all test triplets / the noise ones / the DCT ones
            (``nan`` where a subset is empty).
        per_triplet: ``(N,)`` 1 (right), 0 (wrong) or 0.5 (tie).
    """

    all: float
    noise: float
    dct: float
    per_triplet: np.ndarray

    def as_dict(self) -> dict[str, float]:
        return {"all": self.all, "noise": self.noise, "dct": self.dct}


def score_2afc(d0, d1, h) -> np.ndarray:
    """Per triplet: 1 when the metric calls the right patch closer, 0 when not, 0.5 on a tie.

    ``h = 1`` means ``x1`` is the closer one. ``d0, d1, h``: ``(N,)`` arrays or tensors.
    """
    d0, d1, h = (np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
                 for v in (d0, d1, h))
    if not d0.shape == d1.shape == h.shape:
        raise ValueError(f"d0, d1 and h must have the same shape; got {d0.shape}, {d1.shape}, {h.shape}")
    return (d0 < d1) * (1 - h) + (d1 < d0) * h + (d0 == d1) * 0.5


def _accuracy(scores: np.ndarray, kind: np.ndarray) -> Accuracy:
    def mean(mask):
        return float(scores[mask].mean()) if mask.any() else float("nan")

    return Accuracy(mean(np.ones(len(scores), bool)), mean(kind == "noise"), mean(kind == "dct"), scores)


def fit_lin(t0: torch.Tensor, t1: torch.Tensor, h: torch.Tensor | np.ndarray, *, steps: int = 300,
            lr: float = 0.05, progress: Progress | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Fit non-negative channel weights ``w`` (start: all 1) to 2AFC labels.

    Model: ``P(x1 is closer) = sigmoid(t0 @ w − t1 @ w)``, binary cross-entropy against ``h``,
    full-batch Adam (learning rate ``lr``, PyTorch's defaults otherwise), then ``w`` clamped to
    ``>= 0`` after every step.

    Args:
        t0, t1: ``(N, C)`` channel terms of (ref, x0) and (ref, x1) (:func:`standin_channel_terms`).
        h: ``(N,)`` labels in ``{0, 1}``.
        steps: Adam steps, ``>= 0``.
        lr: learning rate, ``> 0``.
        progress: ``progress(done, total)`` in Adam steps (:mod:`lpips_core.progress`).

    Returns:
        ``(w, loss)``: ``(C,)`` float32 weights and the ``(steps,)`` training loss before each step.
    """
    steps = _int(steps, "steps", lo=0)
    lr = _positive(lr, "lr")
    t0, t1 = t0.detach().clone().float(), t1.detach().clone().float()
    h = torch.as_tensor(np.asarray(h), dtype=torch.float32)
    if t0.ndim != 2 or t0.shape != t1.shape or h.shape != t0.shape[:1]:
        raise ValueError(
            f"t0, t1 must be (N, C) and h (N,); got {tuple(t0.shape)}, {tuple(t1.shape)}, {tuple(h.shape)}"
        )
    w = torch.ones(t0.shape[1], requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    losses = np.empty(steps)
    every = max(1, steps // 20)
    with torch.enable_grad():
        for i in range(steps):
            loss = F.binary_cross_entropy_with_logits(t0 @ w - t1 @ w, h)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                w.clamp_(min=0)
            losses[i] = loss.item()
            if (i + 1) % every == 0 or i + 1 == steps:
                report(progress, i + 1, steps)
    return w.detach(), losses


def _split(w: torch.Tensor, channels: Sequence[int]) -> tuple[np.ndarray, ...]:
    return tuple(p.numpy().copy() for p in torch.split(w, list(channels)))


# ----------------------------------------------------------------------------- the experiment
@dataclass(frozen=True, eq=False)
class StandInResult:
    """One stand-in network in the toy 2AFC.

    Attributes:
        seed: the network's seed.
        unweighted: test accuracy with all channel weights 1 (the row "w = 1").
        lin: test accuracy with the fitted weights (the row "lin").
        weights: the fitted weights, one ``(C_l,)`` array per layer.
        loss: ``(steps,)`` training loss.
        train_unweighted, train_lin: accuracy on the training triplets.
    """

    seed: int
    unweighted: Accuracy
    lin: Accuracy
    weights: tuple[np.ndarray, ...]
    loss: np.ndarray
    train_unweighted: Accuracy
    train_lin: Accuracy

    @property
    def zero_fraction(self) -> tuple[float, ...]:
        """Per layer, the fraction of fitted weights that are exactly 0."""
        return tuple(float((w == 0).mean()) for w in self.weights)


@dataclass(frozen=True, eq=False)
class TwoAFCResult:
    """The toy 2AFC: L2 and every stand-in (w = 1 and lin) on the same test triplets.

    Attributes:
        l2: accuracy of the mean squared difference of the network inputs.
        standins: one :class:`StandInResult` per network seed, in order.
        test_kind: ``(N,)`` the test triplets' kinds.
        settings: the arguments of :func:`run_2afc`.
    """

    l2: Accuracy
    standins: tuple[StandInResult, ...]
    test_kind: np.ndarray
    settings: dict

    def rows(self) -> dict[str, Accuracy]:
        """Row label → accuracy, in the reference example's order and labels."""
        out = {"L2": self.l2}
        for s in self.standins:
            out[f"stand-in net {s.seed}, w = 1"] = s.unweighted
            out[f"stand-in net {s.seed}, lin"] = s.lin
        return out

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: acc.as_dict() for name, acc in self.rows().items()}


def run_2afc(
    *,
    net_seeds: Sequence[int] = DEFAULT_NET_SEEDS,
    n_train: int = 600,
    n_test: int = 600,
    train_seed: int = 1,
    test_seed: int = 2,
    steps: int = 300,
    lr: float = 0.05,
    size: int = 64,
    threads: int | None = DEFAULT_THREADS,
    test: Triplets | None = None,
    progress: Progress | None = None,
) -> TwoAFCResult:
    """The toy 2AFC experiment; deterministic for given arguments.

    Training and test triplets come from :func:`make_triplets`; L2 is scored on the float32
    network inputs; each stand-in is scored with all weights 1 and with weights fitted by
    :func:`fit_lin` on the training triplets, both on the test triplets.

    Args:
        net_seeds: seeds of the stand-ins (distinct, ``>= 0``), one row pair each.
        n_train, n_test: numbers of triplets, ``>= 1``.
        train_seed, test_seed: NumPy seeds of the two sets.
        steps, lr: the fit (see :func:`fit_lin`).
        size: patch side.
        threads: torch threads during the run (restored after); ``None`` keeps the current.
        test: reuse already drawn test triplets (must match ``n_test``, ``test_seed``, ``size``).
        progress: ``progress(done, total)`` (:mod:`lpips_core.progress`) in units of work of a rough
            CPU cost model (a triplet drawn is 1), rising to ``total``.

    Returns:
        :class:`TwoAFCResult`.
    """
    settings = _settings(net_seeds, n_train, n_test, train_seed, test_seed, steps, lr, size, test)
    seeds, steps = tuple(settings["net_seeds"]), settings["steps"]
    n_train, n_test = settings["n_train"], settings["n_test"]

    # Rough cost model (CPU): a triplet ≈ 1 unit; one stand-in's features ≈ 0.35 unit per
    # triplet; a fitting step on 600 triplets ≈ 0.15 unit.
    build = float(n_train + (n_test if test is None else 0))
    per_net = 0.35 * (n_train + n_test) + 0.15 * steps * n_train / 600
    total = build + per_net * len(seeds)
    done = 0.0

    with torch_threads(threads):
        train = make_triplets(n_train, train_seed, size=size, progress=part(progress, 0, n_train, total))
        done += n_train
        if test is None:
            test = make_triplets(n_test, test_seed, size=size, progress=part(progress, done, done + n_test, total))
            done += n_test
        tr, te = train.tensors(), test.tensors()
        l2 = _accuracy(score_2afc((te[0] - te[1]).pow(2).mean((1, 2, 3)),
                                  (te[0] - te[2]).pow(2).mean((1, 2, 3)), test.h), test.kind)
        results = []
        for seed in seeds:
            report(progress, done, total)
            result, done = _standin(seed, train, test, tr, te, steps=steps, lr=settings["lr"],
                                    progress=progress, done=done, total=total)
            results.append(result)
    report(progress, total, total)
    return TwoAFCResult(l2, tuple(results), test.kind.copy(), settings)


def _settings(net_seeds, n_train, n_test, train_seed, test_seed, steps, lr, size, test) -> dict:
    """:func:`run_2afc`'s arguments checked, as its ``settings`` (seeds as a list).

    Raises:
        ValueError: no seed, repeated seeds, a count or step number out of range, ``lr <= 0``,
            or ``test`` triplets that do not match ``n_test``, ``test_seed`` and ``size``.
    """
    seeds = tuple(_int(s, "net seed", lo=0) for s in net_seeds)
    if not seeds:
        raise ValueError("net_seeds must name at least one stand-in")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"net_seeds must be distinct; got {list(seeds)}")
    n_train, n_test = _int(n_train, "n_train", lo=1), _int(n_test, "n_test", lo=1)
    steps, lr = _int(steps, "steps", lo=0), _positive(lr, "lr")
    if test is not None and (len(test), test.seed, test.ref.shape[1]) != (n_test, test_seed, size):
        raise ValueError(
            f"the given test triplets (n={len(test)}, seed={test.seed}, size={test.ref.shape[1]}) do not "
            f"match n_test={n_test}, test_seed={test_seed}, size={size}"
        )
    return dict(net_seeds=list(seeds), n_train=n_train, n_test=n_test, train_seed=train_seed,
                test_seed=test_seed, steps=steps, lr=lr, size=size)


def _standin(seed: int, train: Triplets, test: Triplets, tr: tuple, te: tuple, *, steps: int, lr: float,
             progress: Progress | None, done: float, total: float) -> tuple[StandInResult, float]:
    """One stand-in of :func:`run_2afc`: its channel terms on both sets, lin weights fitted on the
    training triplets, and its accuracy with weights 1 and fitted; with the cost units done after it
    (``done`` before it, out of ``total``, reported through ``progress`` during the fit). ``tr``,
    ``te``: the sets' ``tensors()``, ``(N, 3, S, S)`` each."""
    n_train, n_test = len(train), len(test)
    net = StandInNet(seed)
    terms = {}
    for name, (r, a, b) in (("train", tr), ("test", te)):
        fr = net.features(r)
        terms[name] = (_channel_terms_from(fr, net.features(a)), _channel_terms_from(fr, net.features(b)))
    done += 0.35 * (n_train + n_test)
    fit = 0.15 * steps * n_train / 600
    w, loss = fit_lin(*terms["train"], train.h, steps=steps, lr=lr,
                      progress=part(progress, done, done + fit, total))
    done += fit
    ones = torch.ones_like(w)

    def acc(name, v, triplets):
        t0, t1 = terms[name]
        return _accuracy(score_2afc(t0 @ v, t1 @ v, triplets.h), triplets.kind)

    return StandInResult(
        seed=seed, unweighted=acc("test", ones, test), lin=acc("test", w, test),
        weights=_split(w, net.channels), loss=loss,
        train_unweighted=acc("train", ones, train), train_lin=acc("train", w, train),
    ), done
