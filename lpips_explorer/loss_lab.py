"""LPIPS as a loss: two small optimisation experiments, pure, seeded and budgeted.

- :func:`mse_blur_experiment` ("Why MSE training blurs"): the one image closest, on average, to K
  randomly shifted copies of a reference, under MSE (whose answer is the mean of the copies, a
  blur) and under each learned metric given.
- :func:`fooling_experiment` (after Kettunen, Härkönen and Lehtinen, 2019): move from a source
  image toward a target while a metric keeps the image within ``eps`` of the source; how far
  does it get in pixels?

**Equal budgets.** Every loss (every attacked metric) takes the same number of steps,
``steps``. The losses step in turn: round ``k`` is the ``k``-th step of each loss, one after the
other. The learning rate (the fooling step size) follows a cosine schedule of the step number
alone, so a run's numbers do not depend on the machine's speed or load. ``max_seconds`` is a time
limit for the whole experiment (set-up included), a safety stop and not a share: a round starts
only when the time left holds one more round at the pace so far (and, in the fooling
experiment, every metric's final check), so when the limit stops an experiment every loss has
taken the same number of steps, fewer than ``steps``; its runs say ``stopped="time"``. The set-up
(the shifted copies, each metric's features of the fixed images, computed a few images at a
time) counts against the limit too and is stopped at it.

Both take a ``progress(done, total)`` callback (:mod:`lpips_core.progress`; ``done`` of ``total``
steps, counting each loss's step; return ``False`` to stop) and an optional
``cancel`` :class:`threading.Event`; a cancelled experiment returns what it reached with
``cancelled=True`` (its runs may then differ by one step: the round it stopped in).

Every parameter is checked before any work: integers within their bounds, floats finite and
within theirs (:data:`LIMITS`), so no setting can ask for terabytes or hours: ``lr=inf``,
``max_shift=10**6`` or ``size=2048`` is a ``ValueError`` naming the value and the range.

Images are ``(H, W, 3)`` float32 in ``[0, 1]``; the optimised image stays in ``[0, 1]`` by
projection (clamped after every step). Each metric sees it through its own input convention (its
``input_range``, via :func:`lpips_core.conventions.apply_convention`). The blur experiment runs
Adam (``betas = (0.5, 0.9)``: short memories, so that the steps shrink with the learning rate and
MSE reaches its closed-form answer within a small step budget) with a cosine learning rate from
``lr`` to 0 over the ``steps``; the fooling experiment takes projected steps
(:func:`fooling_experiment`).

Models are passed in (``label → model``) and never built here: anything with ``input_range`` and
a differentiable ``model(x, y) → (N,)`` works (the :class:`~lpips_core.protocol.LearnedMetric`
models, :class:`~lpips_core.elpips.ELPIPS`). For a :class:`LearnedMetric` the fixed images'
features are computed once, without a graph, and only the optimised image goes through the
network at each step. Because the losses step in turn, every loss's fixed features are held at
once (at ``size=128`` and 16 copies, about 125 MiB each for VGG16 and DISTS).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping, Sequence

import numpy as np
import torch

from lpips_core.conventions import apply_convention, resize, to_tensor
from lpips_explorer.distortions import gaussian_blur
from lpips_core.elpips import ELPIPS
from lpips_core.images import check_image
from lpips_core.progress import Progress
from lpips_core.protocol import LearnedMetric

__all__ = [
    "BlurExperiment", "FoolingExperiment", "FoolingRun", "LIMITS", "LossRun", "MSE_LABEL", "PUBLISHED_FOOLING",
    "Progress", "TimeLeft", "budget_text", "cosine", "defaults", "fooling_experiment", "highfreq_energy", "mse_blur_experiment",
    "sharpness", "shifted_copies",
]

#: The label of the pixel loss in :func:`mse_blur_experiment`.
MSE_LABEL = "MSE"
Stop = Literal["steps", "time", "cancelled"]
#: Bisection halvings of the fooling experiment's final check (``t`` to within 1/64).
HALVINGS = 6
#: The fooling experiment's projection aims at ``(1 − MARGIN)·eps`` and moves at most ``MAX_MOVE`` (RMS).
MARGIN = 0.1
MAX_MOVE = 0.05
#: Adam's betas for both experiments (see the module docstring).
BETAS = (0.5, 0.9)

#: The range of every numeric parameter, ``name → (lowest, highest)`` (both included; ``lr``,
#: ``eps``, ``step_size`` and ``max_seconds`` must also be above 0). At ``size=256`` and 64
#: copies a VGG16 set-up is about 2 GB of activations and seconds on a CPU; a step is bounded likewise.
LIMITS: dict[str, tuple[float, float]] = {
    "size": (16, 256), "copies": (1, 64), "max_shift": (0, 16), "steps": (1, 10_000), "lr": (0.0, 1.0),
    "seed": (0, 2**32 - 1), "max_seconds": (0.0, 3600.0), "eps": (0.0, 1.0), "step_size": (0.0, 1.0),
    "check_samples": (2, 256), "fooling_size": (32, 256),
}
#: Fixed images whose features are computed at once during set-up (the deadline is checked between).
SETUP_CHUNK = 8

#: Kettunen et al. (2019, §3.1, 30 OpenImages images): the ℓ2 distance their attack reached while
#: the metric stayed within ε of the source, as a multiple of ε (mean ± standard error). Their
#: attack, image sizes and ℓ2 normalisation are their own (and the attack much longer than
#: :func:`fooling_experiment`'s): compare the order of the metrics, not the absolute ratios.
PUBLISHED_FOOLING: dict[str, tuple[float, float]] = {"LPIPS-VGG": (16.2, 0.8), "LPIPS-SqueezeNet": (15.2, 0.7),
                                                     "E-LPIPS": (3.0, 0.2)}


def defaults(device: str | torch.device) -> dict[str, dict]:
    """Default settings per device: keyword arguments for the two experiments,
    ``{"blur": {...}, "fooling": {...}}``.

    On a CPU each experiment is sized to finish within 60 s on a 2-core machine with every loss
    on the same number of steps, enough for the slow losses (VGG16, DISTS) to flatten out
    (``benchmarks/loss_lab.py`` measures it); ``max_seconds`` is a safety stop at twice that. On a
    GPU the images, copies and steps are larger.
    """
    if torch.device(device).type == "cpu":
        return {"blur": dict(size=96, copies=8, max_shift=4, steps=60, lr=0.05, max_seconds=120.0),
                "fooling": dict(size=64, eps=0.05, steps=100, step_size=0.05, check_samples=8, max_seconds=120.0)}
    return {"blur": dict(size=128, copies=16, max_shift=6, steps=300, lr=0.05, max_seconds=120.0),
            "fooling": dict(size=128, eps=0.05, steps=400, step_size=0.02, check_samples=64, max_seconds=120.0)}


# --------------------------------------------------------------------------- sharpness
def highfreq_energy(img: np.ndarray) -> float:
    """High-frequency energy of an image: the mean square of its 5-point discrete Laplacian
    ``4·x[i, j] − x[i−1, j] − x[i+1, j] − x[i, j−1] − x[i, j+1]`` over interior pixels (no
    boundary handling) and the three channels. ``img``: ``(H, W, 3)`` in ``[0, 1]``, H, W ≥ 3."""
    x = check_image(img, name="img").astype(np.float64)
    if min(x.shape[:2]) < 3:
        raise ValueError(f"img must be at least 3×3 px, got shape {x.shape}")
    lap = 4 * x[1:-1, 1:-1] - x[:-2, 1:-1] - x[2:, 1:-1] - x[1:-1, :-2] - x[1:-1, 2:]
    return float(np.mean(lap**2))


def sharpness(img: np.ndarray, reference: np.ndarray) -> float:
    """:func:`highfreq_energy` of ``img`` relative to ``reference``'s: 1 is as sharp as the
    reference, below 1 blurrier, above 1 more high-frequency content (sharper or noisier)."""
    ref = highfreq_energy(reference)
    if ref == 0:
        raise ValueError("the reference has no high-frequency energy (a flat image): sharpness is undefined")
    return highfreq_energy(img) / ref


# --------------------------------------------------------------------------- helpers
def _square(img: np.ndarray, side: int) -> torch.Tensor:
    """Centre square crop of ``(H, W, 3)`` resized (antialiased bilinear) → ``(1, 3, side, side)``."""
    img = check_image(img, name="image")
    h, w = img.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    return resize(to_tensor(img[top:top + s, left:left + s]), side).clamp(0, 1)


def _np(x: torch.Tensor) -> np.ndarray:
    """``(1, 3, H, W)`` or ``(3, H, W)`` tensor → ``(H, W, 3)`` float32 array."""
    x = x.detach().float().cpu()
    if x.ndim == 4:
        x = x[0]
    return np.ascontiguousarray(x.permute(1, 2, 0).numpy(), dtype=np.float32)


def shifted_copies(reference: np.ndarray, *, size: int, copies: int, max_shift: int,
                   seed: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """``copies`` crop-consistent shifted views of ``reference`` at ``size × size`` px.

    The reference's centre square is resized to ``size + 2·max_shift``; the unshifted view is its
    central ``size × size`` window and a copy shifted by ``(dy, dx)`` (integers drawn uniformly
    from ``[−max_shift, max_shift]`` with ``numpy.random.default_rng(seed)``) is the window moved
    by that much: real image content at every border, no wrap-around and no padding.

    Returns:
        ``(centre (size, size, 3), copies (K, size, size, 3), shifts [(dy, dx), …])``.
    """
    _check_int("size", size)
    _check_int("copies", copies)
    _check_int("max_shift", max_shift)
    _check_int("seed", seed)
    big = _np(_square(reference, size + 2 * max_shift))
    rng = np.random.default_rng(seed)
    shifts = [(int(a), int(b)) for a, b in rng.integers(-max_shift, max_shift + 1, size=(copies, 2))]
    s = max_shift
    stack = np.stack([big[s + dy:s + dy + size, s + dx:s + dx + size] for dy, dx in shifts])
    return big[s:s + size, s:s + size].copy(), stack, shifts


class _OutOfTime(Exception):
    """The deadline passed during a run's set-up."""


def _distance_to(model, fixed: torch.Tensor, deadline: float | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``f(x01) → (K,)`` distances from ``x01`` ``(1, 3, H, W)`` in ``[0, 1]`` to the ``K`` fixed
    images ``fixed`` ``(K, 3, H, W)`` in ``[0, 1]``, differentiable in ``x01``.

    A :class:`LearnedMetric` computes the fixed images' features once, without a graph,
    :data:`SETUP_CHUNK` images at a time (raising :class:`_OutOfTime` between two when
    ``deadline``, a ``time.perf_counter()`` value, has passed), and runs only ``x`` at each call
    (the protocol's differentiable stage hooks); any other model (ELPIPS, whose transformations
    change every call) gets ``model(x, fixed)``.
    """
    conv = model.input_range
    if isinstance(model, LearnedMetric):
        parts = []
        with torch.no_grad():
            for chunk in apply_convention(fixed, conv).split(SETUP_CHUNK):
                if deadline is not None and time.perf_counter() >= deadline:
                    raise _OutOfTime
                parts.append(model._graph_maps(model._run(model._check_input(chunk, "y"))))
        fy = parts[0] if len(parts) == 1 else [torch.cat(layer) for layer in zip(*parts)]

        def f(x01: torch.Tensor) -> torch.Tensor:
            x = model._check_input(apply_convention(x01, conv), "x")
            return model._graph_terms(model._graph_maps(model._run(x)), fy)
        return f
    return lambda x01: model(apply_convention(x01, conv), apply_convention(fixed, conv))


class _Budget:
    """The time limit, the cancel hooks and the progress report of one experiment."""

    def __init__(self, max_seconds: float | None, progress: Progress | None, cancel: threading.Event | None):
        if max_seconds is not None:
            _check_float("max_seconds", max_seconds)
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable(done, total), got {type(progress).__name__}")
        self.start = time.perf_counter()
        self.deadline = None if max_seconds is None else self.start + float(max_seconds)
        self.progress, self.cancel = progress, cancel
        self.cancelled = False

    def room_for(self, seconds: float) -> bool:
        """Whether ``seconds`` more fit before the deadline (always, without one)."""
        return self.deadline is None or time.perf_counter() + seconds <= self.deadline

    def report(self, done: int, total: int) -> bool:
        """Tell ``progress(done, total)``; ``False`` when the experiment must stop (cancelled)."""
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
        if self.progress is not None and not self.cancelled:
            if self.progress(min(max(done, 0), total), total) is False:
                self.cancelled = True
        return not self.cancelled


class _Rounds:
    """The rounds of an experiment (round ``k``: the ``k``-th step of every loss in turn): how
    many are done, their pace, and whether one more fits in the time left."""

    def __init__(self, steps: int, budget: _Budget):
        self.steps, self.budget = steps, budget
        self.done = 0
        self.spent = 0.0
        self._started = 0.0

    def next_fits(self, reserve: float = 0.0) -> bool:
        """One more round (at the mean pace so far) and ``reserve`` seconds fit before the deadline."""
        pace = self.spent / self.done if self.done else 0.0
        return self.budget.room_for(pace + reserve)

    def begin(self) -> None:
        self._started = time.perf_counter()

    def end(self) -> None:
        self.spent += time.perf_counter() - self._started
        self.done += 1

    def run(self, labels: Sequence[str], total: int, step: Callable[[str, float], None], rate: float,
            reserve: float = 0.0) -> Stop:
        """Round after round, ``step(label, cosine(rate, k, steps))`` for every label in turn, until
        every step is taken (``"steps"``), one more round and ``reserve`` would pass the deadline
        (``"time"``), or the user cancels (``"cancelled"``; the round it stopped in counts)."""
        while self.done < self.steps:
            if not self.next_fits(reserve):
                return "time"
            k = self.done
            self.begin()
            for i, label in enumerate(labels):
                if not self.budget.report(k * len(labels) + i, total):
                    self.end()
                    return "cancelled"
                step(label, cosine(rate, k, self.steps))
            self.end()
        return "steps"


def _check_int(name: str, value, key: str | None = None) -> None:
    """``value`` is an int (not a bool) within ``LIMITS[key or name]``, else ``ValueError``."""
    lo, hi = LIMITS[key or name]
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an int from {lo:,.0f} to {hi:,.0f}, got {value!r}")


def _check_float(name: str, value) -> None:
    """``value`` is a finite real number in ``(lo, hi]`` of ``LIMITS[name]``, else ``ValueError``."""
    lo, hi = LIMITS[name]
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo < value <= hi:
        raise ValueError(f"{name} must be a finite number in ({lo:g}, {hi:g}], got {value!r}")


def _check_common(steps: int, lr: float) -> None:
    _check_int("steps", steps)
    _check_float("lr", lr)


def cosine(peak: float, step: int, steps: int) -> float:
    """The schedule of both experiments: ``peak · (1 + cos(π · step / steps)) / 2`` at step
    ``step`` (0-based) of ``steps``, from ``peak`` at the first step toward 0 at the end; a
    function of the step alone, so a run does not depend on the machine's speed."""
    return peak * 0.5 * (1 + math.cos(math.pi * step / steps))


def budget_text(experiment: "BlurExperiment | FoolingExperiment", what: str = "loss") -> tuple[bool, str]:
    """What an experiment's budgets were, in one Markdown sentence or three, for a page.

    Returns ``(equal, text)``: ``equal`` is whether every ``what`` (``"loss"``, ``"metric"``)
    took the steps asked for; the text says how many, and otherwise who got fewer and why.
    """
    asked = int(experiment.settings["steps"])
    taken = experiment.steps
    if not taken:
        return False, f"No {what} took a step."
    counts = sorted(set(taken.values()))
    if counts == [asked]:
        return True, f"**Equal budgets:** every {what} took the same **{asked} steps**."
    if len(counts) == 1:
        k = counts[0]
        why = {"time": f"The time limit ({experiment.settings['max_seconds']:g} s) stopped the experiment",
               "cancelled": "The experiment was stopped"}.get(experiment.stopped, "The experiment ended")
        return False, (f"{why} after **{k} of {asked} steps**. Every {what} took the same {k} steps (they step "
                       "in turn), but the schedule had not run its course, so the results may still be "
                       "changing. Raise the time limit, or ask for fewer steps or a smaller working size.")
    most = counts[-1]
    fewer = ", ".join(f"{label} {n}" for label, n in taken.items() if n < most)
    return False, (f"**Unequal budgets:** {fewer} steps against {most} for the others (of {asked} asked): "
                   "compare these results with care.")


class TimeLeft:
    """The time an experiment has left, for its progress line, from the measured pace of its steps.

    The set-up and the first round (every loss's first step, with each network's first passes)
    are slower than the rest, so they are not counted: the pace is measured from the end of the
    first round to the end of the last whole round (rounds, not single steps: the losses' steps
    differ in cost, a pixel loss's step is far cheaper than a VGG16's). With ``limit``, the
    experiment's time limit in seconds from ``start``: when the steps left at that pace would run
    past it, the line says the run stops at the limit (which the experiment enforces) instead.

    Args:
        start: ``time.perf_counter()`` when the experiment started (its limit counts from there).
        total: the steps of the whole experiment (every loss's, as ``progress(done, total)`` counts).
        per_round: steps per round (the number of losses); ``limit``: seconds, or ``None``.

    Times are passed in (:meth:`text` reads no clock), so the estimate is a pure function of them.
    """

    def __init__(self, start: float, total: int, *, per_round: int = 1, limit: float | None = None):
        if per_round < 1 or total < 0:
            raise ValueError(f"per_round must be ≥ 1 and total ≥ 0, got {per_round} and {total}")
        self.start, self.total, self.per_round, self.limit = start, total, per_round, limit
        self._first: tuple[int, float] | None = None  # (steps done, time) at the end of the first round
        self._last: tuple[int, float] | None = None  # … at the end of the latest whole round after it

    def text(self, done: int, now: float) -> str:
        """``"about 42 s left"``, ``"stops at the 120 s limit, in about 30 s"``, or ``""`` while no
        pace is measured yet (before the end of the second round) and once every step is done."""
        if done and done % self.per_round == 0:  # the end of a round
            if self._first is None:
                self._first = (done, now)
            elif done > self._first[0] and (self._last is None or done > self._last[0]):
                self._last = (done, now)
        if self._first is None or self._last is None or done >= self.total:
            return ""
        (d0, t0), (d1, t1) = self._first, self._last
        left = (t1 - t0) / (d1 - d0) * (self.total - done)
        elapsed = now - self.start
        if self.limit is not None and elapsed + left > self.limit:
            return f"stops at the {self.limit:g} s limit, in about {max(0.0, self.limit - elapsed):.0f} s"
        return f"about {left:.0f} s left"


# --------------------------------------------------------------------------- why MSE blurs
@dataclass(frozen=True)
class LossRun:
    """One optimisation: the image it reached and how.

    Attributes:
        image: ``(H, W, 3)`` float32 in ``[0, 1]``: the optimised image.
        losses: the mean loss over the copies at each step (before that step's update).
        steps: the updates done (``len(losses)``). stopped: ``"steps"`` (all of them),
            ``"time"`` (the time limit) or ``"cancelled"``.
        seconds: wall time spent on this loss, its set-up included; ``setup_seconds`` the set-up
            alone (the features of the fixed copies).
        sharpness: :func:`sharpness` of ``image`` relative to the unshifted reference.
    """

    image: np.ndarray
    losses: list[float]
    steps: int
    seconds: float
    stopped: Stop
    sharpness: float
    setup_seconds: float = 0.0

    @property
    def seconds_per_step(self) -> float:
        """Mean wall time of one step (``nan`` without a step)."""
        return (self.seconds - self.setup_seconds) / self.steps if self.steps else float("nan")


class _EqualSteps:
    """What an experiment's ``runs`` (label → run with ``steps``) says about its budget."""

    runs: dict

    @property
    def steps(self) -> dict[str, int]:
        """Label (loss or attacked metric) → the steps its run took."""
        return {label: run.steps for label, run in self.runs.items()}

    @property
    def equal_steps(self) -> bool:
        """Whether every run took the same number of steps (always, unless cancelled mid-round)."""
        return len(set(self.steps.values())) <= 1


@dataclass(frozen=True)
class BlurExperiment(_EqualSteps):
    """What :func:`mse_blur_experiment` returns.

    Attributes:
        reference: ``(H, W, 3)`` the unshifted view (sharpness 1 by definition).
        copies: ``(K, H, W, 3)`` the shifted copies; ``shifts`` their ``(dy, dx)``.
        mean: ``(H, W, 3)`` the mean of the copies: MSE's closed-form answer.
        start: ``(H, W, 3)`` the image every optimisation starts from.
        runs: loss label → :class:`LossRun` (``"MSE"`` first, then the models in order).
        mse_gap: max-abs difference between the MSE run's image and ``mean`` (``nan`` without a run).
        mean_sharpness: :func:`sharpness` of ``mean``.
        cancelled: whether the experiment was stopped before every loss ran.
        settings: the arguments it ran with (``steps``: the steps asked for each loss).
        stopped: why the experiment ended: ``"steps"`` (every loss took ``settings["steps"]``),
            ``"time"`` (the time limit: every loss took the same, smaller number) or ``"cancelled"``.
    """

    reference: np.ndarray
    copies: np.ndarray
    shifts: list[tuple[int, int]]
    mean: np.ndarray
    start: np.ndarray
    runs: dict[str, LossRun]
    mse_gap: float
    mean_sharpness: float
    cancelled: bool
    settings: dict = field(default_factory=dict)
    stopped: Stop = "steps"


def _start_image(kind: str, centre: torch.Tensor, sigma: float) -> torch.Tensor:
    if kind == "blurred":
        return torch.from_numpy(gaussian_blur(_np(centre), sigma).astype(np.float32)).permute(2, 0, 1)[None].clamp(0, 1)
    if kind == "grey":
        return torch.full_like(centre, 0.5)
    if kind == "noise":
        g = torch.Generator().manual_seed(0)
        return torch.rand(centre.shape, generator=g, dtype=centre.dtype)
    raise ValueError(f"start must be 'blurred', 'grey' or 'noise', got {kind!r}")


class _Descent:
    """One loss's optimisation: Adam on ``x`` (clamped to ``[0, 1]`` after each step)."""

    def __init__(self, loss_fn: Callable[[torch.Tensor], torch.Tensor], x0: torch.Tensor, lr: float,
                 setup_seconds: float):
        self.loss_fn = loss_fn
        self.x = x0.clone().requires_grad_(True)
        self.opt = torch.optim.Adam([self.x], lr=lr, betas=BETAS, eps=1e-12)
        self.losses: list[float] = []
        self.setup_seconds = self.seconds = setup_seconds

    def step(self, lr: float) -> None:
        t0 = time.perf_counter()
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.x).mean()
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            self.x.clamp_(0.0, 1.0)
        self.losses.append(float(loss.detach()))
        self.seconds += time.perf_counter() - t0


def _blur_setup(losses: Mapping[str, object], x0: torch.Tensor, targets: torch.Tensor, lr: float, budget: _Budget,
                total: int) -> tuple[dict[str, "_Descent"], Stop]:
    """Each loss's optimisation, set up in turn (a learned loss's features of the fixed copies
    ``targets`` ``(K, 3, H, W)``, timed), from ``x0`` ``(1, 3, H, W)``; why the set-up ended
    (``"steps"``: all done, ``"time"``: the limit, every loss then starts and ends at ``x0``,
    ``"cancelled"``)."""
    descents: dict[str, _Descent] = {}
    stopped: Stop = "steps"
    for label, loss in losses.items():
        if not budget.report(0, total):
            return descents, "cancelled"
        t0 = time.perf_counter()
        x_start = x0
        if label != MSE_LABEL:
            dev = getattr(loss, "device", torch.device("cpu"))
            x_start = x0.to(dev)
            try:
                loss = _distance_to(loss, targets.to(dev), budget.deadline)
            except _OutOfTime:
                stopped = "time"
                break
        descents[label] = _Descent(loss, x_start, lr, time.perf_counter() - t0)
    if stopped == "time":  # no loss takes a step: all of them end where they start
        descents.update((label, _Descent(loss, x0, lr, 0.0)) for label, loss in losses.items() if label not in descents)
    return descents, stopped


def mse_blur_experiment(
    reference: np.ndarray,
    models: Mapping[str, object],
    *,
    size: int = 96,
    copies: int = 8,
    max_shift: int = 4,
    steps: int = 60,
    lr: float = 0.05,
    start: Literal["blurred", "grey", "noise"] = "blurred",
    seed: int = 0,
    max_seconds: float | None = 120.0,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> BlurExperiment:
    """Why MSE training blurs: the image closest on average to K shifted copies, per loss.

    For each loss (MSE, then every model of ``models``, e.g. ``{"LPIPS · AlexNet": …,
    "LPIPS · VGG16": …, "ST-LPIPS · AlexNet": …, "DISTS": …}``) it runs Adam from the same
    ``start`` image (``"blurred"``: the unshifted view under a Gaussian blur of σ = ``max_shift`` px,
    so that colours start right and every loss must add the detail; ``"grey"``: 0.5 everywhere;
    ``"noise"``: uniform noise of a fixed seed) to
    minimise ``mean_k loss(x, copy_k)`` over :func:`shifted_copies` (seeded by ``seed``). Under MSE
    the minimiser is the mean of the copies (the result is compared with it: ``mse_gap``).

    Budget: every loss takes ``steps`` Adam steps, the losses in turn (round ``k`` is the
    ``k``-th step of each), with the learning rate ``cosine(lr, k, steps)``. ``max_seconds``
    (``None``: none) is a time limit for the whole experiment, set-up included: a round starts
    only while the time left holds one at the pace so far, so a limit that stops the experiment
    leaves every loss with the same number of steps (``stopped="time"``). Without the limit
    reached, the numbers do not depend on the machine's speed or load.

    Args:
        reference: ``(H, W, 3)`` float in ``[0, 1]`` (its centre square is used).
        models: label → a metric (``input_range`` and a differentiable ``model(x, y) → (N,)``).
        size, copies, max_shift: see :func:`shifted_copies`.
        steps, lr: the steps every loss takes and Adam's peak learning rate (image units, ``[0, 1]``).
        max_seconds, progress, cancel: see the module docstring.

    Returns:
        :class:`BlurExperiment`.

    Raises:
        ValueError, TypeError: bad images or options (the message names the value).
    """
    _check_common(steps, lr)
    budget = _Budget(max_seconds, progress, cancel)  # the clock starts before the set-up
    centre, stack, shifts = shifted_copies(reference, size=size, copies=copies, max_shift=max_shift, seed=seed)
    c = torch.from_numpy(centre).permute(2, 0, 1)[None]
    targets = torch.from_numpy(stack).permute(0, 3, 1, 2).contiguous()
    mean = stack.astype(np.float64).mean(0).astype(np.float32)
    x0 = _start_image(start, c, float(max(1, max_shift)))
    losses: dict[str, object] = {MSE_LABEL: lambda x: ((x - targets) ** 2).mean(dim=(1, 2, 3))}
    for label, model in models.items():
        if label == MSE_LABEL:
            raise ValueError(f"{MSE_LABEL!r} is the pixel loss's label; give the model another one")
        losses[label] = model
    labels = list(losses)
    total = steps * len(labels)
    descents, stopped = _blur_setup(losses, x0, targets, lr, budget, total)
    rounds = _Rounds(steps, budget)
    if stopped == "steps":
        stopped = rounds.run(labels, total, lambda label, rate: descents[label].step(rate), lr)
    budget.report(total, total)
    runs: dict[str, LossRun] = {}
    for label, d in descents.items():
        out = _np(d.x)
        runs[label] = LossRun(out, d.losses, len(d.losses), d.seconds, stopped, sharpness(out, centre),
                              d.setup_seconds)
    gap = float(np.abs(runs[MSE_LABEL].image - mean).max()) if MSE_LABEL in runs else float("nan")
    settings = dict(size=size, copies=copies, max_shift=max_shift, steps=steps, lr=lr, start=start, seed=seed,
                    max_seconds=max_seconds)
    return BlurExperiment(centre, stack, shifts, mean, _np(x0), runs, gap, sharpness(mean, centre),
                          budget.cancelled, settings, stopped)


# --------------------------------------------------------------------------- fooling the metric
@dataclass(frozen=True)
class FoolingRun:
    """One metric's attack.

    Attributes:
        image: ``(H, W, 3)`` in ``[0, 1]``: the final image, within ``eps`` of the source by the check.
        l2: its root-mean-square pixel distance to the source (``[0, 1]`` units).
        ratio: ``l2 / eps``.
        distance: the metric's check value for ``image`` (ELPIPS: the mean over ``check_samples``).
        distance_stderr: its standard error (ELPIPS), else 0.
        to_target: RMS pixel distance of ``image`` to the target (the source's is in the experiment).
        distances, l2s: per step, the metric's value (as the optimiser saw it; ELPIPS: one fresh
            sample) and the RMS distance to the source, before that step's update.
        pullback: the fraction ``t`` of the way from the source to the best iterate kept by the
            final check (1: the iterate itself passed; less: it was pulled back toward the source).
        steps, seconds, stopped: the steps taken, wall time on this metric (set-up, steps and
            final check), why the steps ended (``"steps"``, ``"time"``, ``"cancelled"``).
        check_cut: whether the time limit ended the final check's bisection early (``pullback``
            is then smaller than needed: the image is closer to the source than it could be).
    """

    image: np.ndarray
    l2: float
    ratio: float
    distance: float
    distance_stderr: float
    to_target: float
    distances: list[float]
    l2s: list[float]
    pullback: float
    steps: int
    seconds: float
    stopped: Stop
    check_cut: bool = False


@dataclass(frozen=True)
class FoolingExperiment(_EqualSteps):
    """What :func:`fooling_experiment` returns: ``source``, ``target`` ``(H, W, 3)``, ``eps``,
    ``source_to_target`` (RMS), ``runs`` (label → :class:`FoolingRun`), ``cancelled``, ``settings``
    (``steps``: the steps asked for each metric), ``stopped`` (as :attr:`BlurExperiment.stopped`)."""

    source: np.ndarray
    target: np.ndarray
    eps: float
    source_to_target: float
    runs: dict[str, FoolingRun]
    cancelled: bool
    settings: dict = field(default_factory=dict)
    stopped: Stop = "steps"


def _rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b) ** 2).mean().sqrt())


def _checker(model, source: torch.Tensor, *, samples: int, seed: int) -> Callable[[torch.Tensor], tuple[float, float]]:
    """``check(x01) → (distance, stderr)`` to the source, deterministic: LPIPS-like models directly;
    ELPIPS as the mean of ``samples`` transformations of a fixed seed (the same for every check)."""
    conv = model.input_range
    s = apply_convention(source, conv)
    if isinstance(model, ELPIPS):
        def check(x01: torch.Tensor) -> tuple[float, float]:
            est = model.evaluate(apply_convention(x01, conv), s, samples=samples, seed=seed)
            return float(est.mean[0]), float(est.stderr[0])
        return check

    def check(x01: torch.Tensor) -> tuple[float, float]:
        with torch.no_grad():
            return float(model(apply_convention(x01, conv), s)[0]), 0.0
    return check


def _project_step(x: torch.Tensor, d: float, g: torch.Tensor, target: torch.Tensor, *, eps: float,
                  step: float) -> torch.Tensor:
    """One step of the fooling experiment (see :func:`fooling_experiment`); returns the new ``x``."""
    gg = float((g * g).sum())
    if d > eps:
        if gg == 0:
            return x
        move = -((d - (1 - MARGIN) * eps) / gg) * g
        rms = float(move.pow(2).mean().sqrt())
        if rms > MAX_MOVE:
            move = move * (MAX_MOVE / rms)
        return x + move
    u = target - x
    gu = float((g * u).sum())
    if d > 0.5 * eps and gu > 0 and gg > 0:
        u = u - (gu / gg) * g
    return x + step * u


class _Attack:
    """One metric's attack: its iterate, the best candidate so far, the per-step curves."""

    def __init__(self, model, src: torch.Tensor, tgt: torch.Tensor, *, eps: float, check_samples: int, seed: int):
        t0 = time.perf_counter()
        self.eps = eps
        self.s, self.t = src, tgt
        self.pull0 = float(((src - tgt) ** 2).mean())
        self.dist = _distance_to(model, src)
        self.check = _checker(model, src, samples=check_samples, seed=seed)
        t_check = time.perf_counter()
        self.check(src)  # one timed check: the final check needs time for up to 1 + HALVINGS of them
        self.check_seconds = time.perf_counter() - t_check
        self.x = src.clone()
        self.best, self.best_pull = src.clone(), self.pull0
        self.ds: list[float] = []
        self.l2s: list[float] = []
        self.seconds = time.perf_counter() - t0

    def step(self, size: float) -> None:
        t0 = time.perf_counter()
        xg = self.x.clone().requires_grad_(True)
        d = self.dist(xg).mean()
        (g,) = torch.autograd.grad(d, xg)
        dv = float(d.detach())
        pv = float(((self.x - self.t) ** 2).mean())
        self.ds.append(dv)
        self.l2s.append(_rms(self.x, self.s))
        if dv <= self.eps and pv < self.best_pull:
            self.best, self.best_pull = self.x.clone(), pv
        self.x = _project_step(self.x, dv, g, self.t, eps=self.eps, step=size).clamp(0, 1)
        self.seconds += time.perf_counter() - t0

    def finish(self, budget: _Budget, stopped: Stop) -> FoolingRun:
        """The final check (see :func:`fooling_experiment`): accept the best candidate or pull it back."""
        t0 = time.perf_counter()
        s, best, eps = self.s, self.best, self.eps
        final, tt, cut = best, 1.0, False
        dist_final, se = self.check(best) if self.best_pull < self.pull0 else (0.0, 0.0)  # else: the source
        if dist_final > eps:
            lo, hi, lo_val = 0.0, 1.0, (0.0, 0.0)
            for _ in range(HALVINGS):
                if not budget.room_for(0.0):
                    cut = True  # out of time: keep the last t that passed (0 at worst: the source)
                    break
                mid = 0.5 * (lo + hi)
                val = self.check(s + mid * (best - s))
                if val[0] <= eps:
                    lo, lo_val = mid, val
                else:
                    hi = mid
            tt = lo
            final = s + lo * (best - s)
            dist_final, se = lo_val
        l2 = _rms(final, s)
        self.seconds += time.perf_counter() - t0
        return FoolingRun(_np(final), l2, l2 / eps, dist_final, se, _rms(final, self.t), self.ds, self.l2s, tt,
                          len(self.ds), self.seconds, stopped, cut)


def _fooling_setup(models: Mapping[str, object], src: torch.Tensor, tgt: torch.Tensor, *, eps: float,
                   check_samples: int, seed: int, budget: _Budget, total: int) -> tuple[dict[str, _Attack], Stop]:
    """Each metric's attack, set up in turn (its features of the source ``(1, 3, H, W)``, one timed
    check; ELPIPS reseeded), and why the set-up ended (``"steps"``: all done, ``"time"``, ``"cancelled"``)."""
    attacks: dict[str, _Attack] = {}
    for label, model in models.items():
        if not budget.report(0, total):
            return attacks, "cancelled"
        if not budget.room_for(0.0):
            return attacks, "time"
        if isinstance(model, ELPIPS):
            model.reseed(seed)
        dev = getattr(model, "device", torch.device("cpu"))
        attacks[label] = _Attack(model, src.to(dev), tgt.to(dev), eps=eps, check_samples=check_samples,
                                 seed=seed + 1)
    return attacks, "steps"


def _source_run(model, src: torch.Tensor, tgt: torch.Tensor) -> FoolingRun:
    """The run of a metric that took no step (the set-up used the time): the source itself."""
    s, t = src.to(getattr(model, "device", "cpu")), tgt.to(getattr(model, "device", "cpu"))
    return FoolingRun(_np(s), 0.0, 0.0, 0.0, 0.0, _rms(s, t), [], [], 0.0, 0, 0.0, "time")


def _attack_in_rounds(attacks: dict[str, _Attack], labels: Sequence[str], *, steps: int, step_size: float,
                      budget: _Budget, total: int, stopped: Stop) -> tuple[dict[str, FoolingRun], Stop]:
    """Round after round, every metric's step in turn (while ``stopped`` is ``"steps"``; the time
    left must also hold every final check), then each attack's final check: the runs and why the
    steps ended."""
    reserve = sum((1 + HALVINGS) * a.check_seconds for a in attacks.values())
    rounds = _Rounds(steps, budget)
    if stopped == "steps":
        stopped = rounds.run(labels, total, lambda label, rate: attacks[label].step(rate), step_size, reserve)
    runs: dict[str, FoolingRun] = {}
    for label, attack in attacks.items():
        if stopped != "cancelled" and not budget.report(rounds.done * len(labels), total):
            stopped = "cancelled"
        runs[label] = attack.finish(budget, stopped)
    return runs, stopped


def fooling_experiment(
    source: np.ndarray,
    target: np.ndarray,
    models: Mapping[str, object],
    *,
    eps: float = 0.05,
    size: int = 64,
    steps: int = 100,
    step_size: float = 0.05,
    check_samples: int = 8,
    seed: int = 0,
    max_seconds: float | None = 120.0,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> FoolingExperiment:
    """Fooling the metric: go toward ``target`` while ``d(source, x) ≤ eps``; how far in pixels?

    For each model (e.g. ``{"LPIPS · VGG16": …, "LPIPS · AlexNet": …, "ELPIPS": …}``), projected
    steps start from ``x = source``. Each step computes ``d = d(source, x)`` and its gradient ``g``
    (one pass through the network; an ELPIPS model draws a fresh transformation every step, so
    the attacker sees the expectation only through samples, as in Kettunen et al.), then:

    - ``d > eps``: a linearised projection back inside, ``x −= (d − 0.9·eps) / ‖g‖² · g`` (the
      move capped at an RMS of :data:`MAX_MOVE`);
    - ``d ≤ eps``: a step toward the target, ``x += s · u`` with ``u = target − x`` and ``s`` the
      step size (``cosine(step_size, k, steps)`` at step ``k``); once ``d > eps / 2``, ``u``
      loses its component along ``g`` when that would raise ``d`` (the step slides along the
      constraint);

    and clamps ``x`` to ``[0, 1]``. Every step whose own ``d ≤ eps`` is a candidate; the one closest
    to the target is kept. A final check enforces the constraint: the candidate ``c`` is accepted
    when ``check(c) ≤ eps``, else the largest ``t`` (bisection, :data:`HALVINGS` halvings, fewer when
    the time limit is reached: ``check_cut``) with
    ``check(source + t·(c − source)) ≤ eps`` is taken. ``check`` is the metric itself for
    LPIPS-like models and, for ELPIPS, the mean over ``check_samples`` transformations of a fixed
    seed. The reported ``l2`` is the RMS pixel distance (``[0, 1]`` units) between the source and
    that final image, and ``ratio = l2 / eps``.

    Budget: every metric takes ``steps`` steps, the metrics in turn (round ``k`` is the ``k``-th
    step of each). ``max_seconds`` (``None``: none) limits the whole experiment: a round starts
    only while the time left holds one more and every metric's final check (timed once at
    set-up, ``1 + HALVINGS`` checks each), so a limit that stops the attack leaves every metric
    with the same number of steps (``stopped="time"``).

    Args:
        source, target: ``(H, W, 3)`` float in ``[0, 1]`` (centre squares resized to ``size``).
        models: label → a metric (``input_range`` and a differentiable ``model(x, y) → (N,)``).
        eps: the allowed distance to the source.
        steps, step_size: the steps every metric takes and the largest fraction of the way to
            the target one step takes.
        check_samples: ELPIPS samples per final check. seed: seeds ELPIPS (reseeded per metric).
        max_seconds, progress, cancel: see the module docstring.

    Returns:
        :class:`FoolingExperiment`.
    """
    _check_int("steps", steps)
    _check_float("step_size", step_size)
    _check_float("eps", eps)
    _check_int("check_samples", check_samples)
    _check_int("size", size, "fooling_size")
    _check_int("seed", seed)
    budget = _Budget(max_seconds, progress, cancel)
    src, tgt = _square(source, size), _square(target, size)
    pull0 = float(((src - tgt) ** 2).mean())
    if pull0 == 0:
        raise ValueError("source and target are the same image: there is nowhere to go")
    total = steps * len(models)
    attacks, stopped = _fooling_setup(models, src, tgt, eps=eps, check_samples=check_samples, seed=seed, budget=budget,
                                      total=total)
    if stopped == "time":  # the set-up used the time: no metric takes a step, each keeps the source
        runs = {label: _source_run(model, src, tgt) for label, model in models.items()}
    else:
        runs, stopped = _attack_in_rounds(attacks, list(models), steps=steps, step_size=step_size, budget=budget,
                                          total=total, stopped=stopped)
    budget.report(total, total)
    settings = dict(eps=eps, size=size, steps=steps, step_size=step_size, check_samples=check_samples, seed=seed,
                    max_seconds=max_seconds)
    return FoolingExperiment(_np(src), _np(tgt), float(eps), math.sqrt(pull0), runs, budget.cancelled, settings,
                             stopped)
