"""LPIPS as a loss: two small optimisation experiments, pure, seeded and budgeted.

- :func:`mse_blur_experiment` ("Why MSE training blurs"): the one image closest, on average, to K
  randomly shifted copies of a reference, under MSE (whose answer is the mean of the copies, a
  blur) and under each learned metric given.
- :func:`fooling_experiment` (after Kettunen, Härkönen and Lehtinen, 2019): move from a source
  image toward a target while a metric keeps the image within ``eps`` of the source; how far
  does it get in pixels?

Both take a ``progress(fraction, message)`` callback (return ``False`` to stop), a step budget,
a time budget ``max_seconds`` and an optional ``cancel`` :class:`threading.Event`. Stopped runs
return what they reached, with the reason (``"steps"``, ``"time"`` or ``"cancelled"``). The time
budget covers the set-up too (the shifted copies, and each metric's features of the fixed
images, computed a few images at a time and stopped at the deadline).

Every parameter is checked before any work: integers within their bounds, floats finite and
within theirs (:data:`LIMITS`), so no setting can ask for terabytes or hours: ``lr=inf``,
``max_shift=10**6`` or ``size=2048`` is a ``ValueError`` naming the value and the range.

Images are ``(H, W, 3)`` float32 in ``[0, 1]``; the optimised image stays in ``[0, 1]`` by
projection (clamped after every step). Each metric sees it through its own input convention (its
``input_range``, via :func:`lpips_core.conventions.apply_convention`). The blur experiment runs
Adam (``betas = (0.5, 0.9)``: short memories, so that the steps shrink with the learning rate and
MSE reaches its closed-form answer within a small step budget) with a cosine learning rate from
``lr`` to 0 over the budget; the fooling experiment takes projected steps
(:func:`fooling_experiment`).

Models are passed in (``label → model``) and never built here: anything with ``input_range`` and
a differentiable ``model(x, y) → (N,)`` works (the :class:`~lpips_core.protocol.LearnedMetric`
models, :class:`~lpips_core.elpips.ELPIPS`). For a :class:`LearnedMetric` the fixed images'
features are computed once, without a graph, and only the optimised image goes through the
network at each step.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping

import numpy as np
import torch

from lpips_core.conventions import apply_convention, resize, to_tensor
from lpips_explorer.distortions import gaussian_blur
from lpips_core.elpips import ELPIPS
from lpips_core.images import check_image
from lpips_core.protocol import LearnedMetric

__all__ = [
    "BlurExperiment", "FoolingExperiment", "FoolingRun", "LIMITS", "LossRun", "MSE_LABEL", "PUBLISHED_FOOLING",
    "Progress", "defaults", "fooling_experiment", "highfreq_energy", "mse_blur_experiment", "sharpness",
    "shifted_copies",
]

#: ``progress(fraction in [0, 1], message)``; returning ``False`` stops the experiment.
Progress = Callable[[float, str], "bool | None"]
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
#: the metric stayed within ε of the source, as a multiple of ε (mean ± standard error).
PUBLISHED_FOOLING: dict[str, tuple[float, float]] = {"LPIPS-VGG": (16.2, 0.8), "LPIPS-SqueezeNet": (15.2, 0.7),
                                                     "E-LPIPS": (3.0, 0.2)}


def defaults(device: str | torch.device) -> dict[str, dict]:
    """Default settings per device: small and ≤ 30 s on a 2-core CPU, larger on a GPU.

    Returns ``{"blur": {...}, "fooling": {...}}``: keyword arguments for the two experiments.
    """
    if torch.device(device).type == "cpu":
        return {"blur": dict(size=96, copies=8, max_shift=4, steps=30, lr=0.05, max_seconds=30.0),
                "fooling": dict(size=64, eps=0.05, steps=60, step_size=0.05, check_samples=8, max_seconds=30.0)}
    return {"blur": dict(size=128, copies=16, max_shift=6, steps=300, lr=0.05, max_seconds=60.0),
            "fooling": dict(size=128, eps=0.05, steps=400, step_size=0.02, check_samples=64, max_seconds=60.0)}


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
    """Steps, a deadline, the cancel hooks, and the progress report of one experiment."""

    def __init__(self, max_seconds: float | None, progress: Progress | None, cancel: threading.Event | None):
        if max_seconds is not None:
            _check_float("max_seconds", max_seconds)
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable(fraction, message), got {type(progress).__name__}")
        self.start = time.perf_counter()
        self.deadline = None if max_seconds is None else self.start + float(max_seconds)
        self.progress, self.cancel = progress, cancel
        self.cancelled = False

    def share(self, remaining_parts: int) -> float | None:
        """The deadline of the next part: an equal share of the time left among the parts left."""
        if self.deadline is None:
            return None
        now = time.perf_counter()
        return now + max(0.0, self.deadline - now) / max(1, remaining_parts)

    def report(self, fraction: float, message: str) -> bool:
        """Tell ``progress``; ``False`` when the experiment must stop (cancelled)."""
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
        if self.progress is not None and not self.cancelled:
            if self.progress(min(1.0, max(0.0, fraction)), message) is False:
                self.cancelled = True
        return not self.cancelled


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


def _cosine(opt: torch.optim.Optimizer, lr: float, fraction: float) -> None:
    """Learning rate ``lr · (1 + cos(π · fraction)) / 2``: from ``lr`` at the start to 0 at the end."""
    for group in opt.param_groups:
        group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * fraction))


class _Clock:
    """How far one run is through its budget: the larger of the steps done and the time used,
    as fractions of ``steps`` and of the run's time share (so that a run cut short by time still
    anneals its learning rate to 0)."""

    def __init__(self, steps: int, deadline: float | None):
        self.steps, self.deadline = steps, deadline
        self.start = time.perf_counter()
        self.stopped: Stop = "steps"

    def fraction(self, step: int) -> float:
        p = step / self.steps
        if self.deadline is not None:
            span = self.deadline - self.start
            p = max(p, 1.0 if span <= 0 else (time.perf_counter() - self.start) / span)
        return p

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


# --------------------------------------------------------------------------- why MSE blurs
@dataclass(frozen=True)
class LossRun:
    """One optimisation: the image it reached and how.

    Attributes:
        image: ``(H, W, 3)`` float32 in ``[0, 1]``: the optimised image.
        losses: the mean loss over the copies at each step (before that step's update).
        steps: the updates done. seconds: wall time. stopped: ``"steps"``, ``"time"`` or ``"cancelled"``.
        sharpness: :func:`sharpness` of ``image`` relative to the unshifted reference.
    """

    image: np.ndarray
    losses: list[float]
    steps: int
    seconds: float
    stopped: Stop
    sharpness: float


@dataclass(frozen=True)
class BlurExperiment:
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
        settings: the arguments it ran with.
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


def _start_image(kind: str, centre: torch.Tensor, sigma: float) -> torch.Tensor:
    if kind == "blurred":
        return torch.from_numpy(gaussian_blur(_np(centre), sigma).astype(np.float32)).permute(2, 0, 1)[None].clamp(0, 1)
    if kind == "grey":
        return torch.full_like(centre, 0.5)
    if kind == "noise":
        g = torch.Generator().manual_seed(0)
        return torch.rand(centre.shape, generator=g, dtype=centre.dtype)
    raise ValueError(f"start must be 'blurred', 'grey' or 'noise', got {kind!r}")


def _optimise(loss_fn: Callable[[torch.Tensor], torch.Tensor], x0: torch.Tensor, *, steps: int, lr: float,
              clock: "_Clock", budget: _Budget, label: str, part: tuple[int, int]) -> tuple:
    """Adam on ``x`` (clamped to ``[0, 1]`` after each step), cosine learning rate over the budget."""
    x = x0.clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr, betas=BETAS, eps=1e-12)
    losses: list[float] = []
    k, n = part
    for step in range(steps):
        p = clock.fraction(step)
        if p >= 1.0:
            clock.stopped = "time"
            break
        if not budget.report((k + p) / n, f"{label}: step {step + 1} of {steps}"):
            clock.stopped = "cancelled"
            break
        _cosine(opt, lr, p)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(x).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)
        losses.append(float(loss.detach()))
    return x.detach(), losses


def mse_blur_experiment(
    reference: np.ndarray,
    models: Mapping[str, object],
    *,
    size: int = 96,
    copies: int = 8,
    max_shift: int = 4,
    steps: int = 30,
    lr: float = 0.05,
    start: Literal["blurred", "grey", "noise"] = "blurred",
    seed: int = 0,
    max_seconds: float | None = 30.0,
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

    Budgets: each loss gets at most ``steps`` updates and an equal share of the time left
    (``max_seconds`` in all; ``None``: no time limit, fully reproducible).

    Args:
        reference: ``(H, W, 3)`` float in ``[0, 1]`` (its centre square is used).
        models: label → a metric (``input_range`` and a differentiable ``model(x, y) → (N,)``).
        size, copies, max_shift: see :func:`shifted_copies`.
        steps, lr: Adam's budget and peak learning rate (image units, ``[0, 1]``).
        progress, cancel: see the module docstring.

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
    runs: dict[str, LossRun] = {}
    labels = list(losses)
    for i, label in enumerate(labels):
        deadline = budget.share(len(labels) - i)
        if not budget.report(i / len(labels), f"{label}: preparing"):
            break
        loss = losses[label]
        clock = _Clock(steps, deadline)
        x_start = x0
        try:
            if label != MSE_LABEL:
                dev = getattr(loss, "device", torch.device("cpu"))
                x_start = x0.to(dev)
                loss = _distance_to(loss, targets.to(dev), deadline)
        except _OutOfTime:
            img, curve = x_start, []
            clock.stopped = "time"
        else:
            img, curve = _optimise(loss, x_start, steps=steps, lr=lr, clock=clock, budget=budget, label=label,
                                   part=(i, len(labels)))
        out = _np(img)
        runs[label] = LossRun(out, curve, len(curve), clock.seconds, clock.stopped, sharpness(out, centre))
        if clock.stopped == "cancelled":
            break
    budget.report(1.0, "done")
    gap = float(np.abs(runs[MSE_LABEL].image - mean).max()) if MSE_LABEL in runs else float("nan")
    settings = dict(size=size, copies=copies, max_shift=max_shift, steps=steps, lr=lr, start=start, seed=seed,
                    max_seconds=max_seconds)
    return BlurExperiment(centre, stack, shifts, mean, _np(x0), runs, gap, sharpness(mean, centre),
                          budget.cancelled, settings)


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
        steps, seconds, stopped: the updates done, wall time, why it stopped.
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


@dataclass(frozen=True)
class FoolingExperiment:
    """What :func:`fooling_experiment` returns: ``source``, ``target`` ``(H, W, 3)``, ``eps``,
    ``source_to_target`` (RMS), ``runs`` (label → :class:`FoolingRun`), ``cancelled``, ``settings``."""

    source: np.ndarray
    target: np.ndarray
    eps: float
    source_to_target: float
    runs: dict[str, FoolingRun]
    cancelled: bool
    settings: dict = field(default_factory=dict)


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


def fooling_experiment(
    source: np.ndarray,
    target: np.ndarray,
    models: Mapping[str, object],
    *,
    eps: float = 0.05,
    size: int = 64,
    steps: int = 60,
    step_size: float = 0.05,
    check_samples: int = 8,
    seed: int = 0,
    max_seconds: float | None = 30.0,
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
      step size (cosine-annealed from ``step_size`` to 0); once ``d > eps / 2``, ``u`` loses its
      component along ``g`` when that would raise ``d`` (the step slides along the constraint);

    and clamps ``x`` to ``[0, 1]``. Every step whose own ``d ≤ eps`` is a candidate; the one closest
    to the target is kept. A final check enforces the constraint: the candidate ``c`` is accepted
    when ``check(c) ≤ eps``, else the largest ``t`` (bisection, :data:`HALVINGS` halvings, fewer when
    the time budget runs out) with
    ``check(source + t·(c − source)) ≤ eps`` is taken. ``check`` is the metric itself for
    LPIPS-like models and, for ELPIPS, the mean over ``check_samples`` transformations of a fixed
    seed. The reported ``l2`` is the RMS pixel distance (``[0, 1]`` units) between the source and
    that final image, and ``ratio = l2 / eps``.

    Kettunen et al. (2019) report ``l2 / eps`` of 16.2 ± 0.8 for LPIPS-VGG and 3.0 ± 0.2 for
    E-LPIPS (:data:`PUBLISHED_FOOLING`) with their own, much longer attack, image sizes and ℓ2
    normalisation: compare the order of the metrics, not the absolute ratios.

    Args:
        source, target: ``(H, W, 3)`` float in ``[0, 1]`` (centre squares resized to ``size``).
        models: label → a metric (``input_range`` and a differentiable ``model(x, y) → (N,)``).
        eps: the allowed distance to the source.
        steps, step_size: the step budget per metric and the largest fraction of the way to the
            target one step takes; each metric also gets an equal share of the time left
            (``max_seconds``; ``None``: no limit, fully reproducible).
        check_samples: ELPIPS samples per final check. seed: seeds ELPIPS (reseeded per run).

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
    runs: dict[str, FoolingRun] = {}
    labels = list(models)
    for i, label in enumerate(labels):
        deadline = budget.share(len(labels) - i)
        if not budget.report(i / len(labels), f"{label}: preparing"):
            break
        model = models[label]
        if isinstance(model, ELPIPS):
            model.reseed(seed)
        dev = getattr(model, "device", torch.device("cpu"))
        s, t = src.to(dev), tgt.to(dev)
        if deadline is not None and time.perf_counter() >= deadline:  # the set-up took this run's share
            runs[label] = FoolingRun(_np(s), 0.0, 0.0, 0.0, 0.0, _rms(s, t), [], [], 0.0, 0, 0.0, "time")
            continue
        dist = _distance_to(model, s)
        check = _checker(model, s, samples=check_samples, seed=seed + 1)
        if deadline is not None:  # keep time for the final check (one timed call; the halvings stop at the deadline)
            t_check = time.perf_counter()
            check(s)
            deadline -= 2 * (time.perf_counter() - t_check)
        x = s.clone()
        best, best_pull = s.clone(), pull0
        ds: list[float] = []
        l2s: list[float] = []
        clock = _Clock(steps, deadline)
        for step in range(steps):
            p = clock.fraction(step)
            if p >= 1.0:
                clock.stopped = "time"
                break
            if not budget.report((i + p) / len(labels), f"{label}: step {step + 1} of {steps}"):
                clock.stopped = "cancelled"
                break
            xg = x.clone().requires_grad_(True)
            d = dist(xg).mean()
            (g,) = torch.autograd.grad(d, xg)
            dv = float(d.detach())
            pv = float(((x - t) ** 2).mean())
            ds.append(dv)
            l2s.append(_rms(x, s))
            if dv <= eps and pv < best_pull:
                best, best_pull = x.clone(), pv
            x = _project_step(x, dv, g, t, eps=eps, step=step_size * 0.5 * (1 + math.cos(math.pi * p))).clamp(0, 1)
        final, tt = best, 1.0
        dist_final, se = check(best) if best_pull < pull0 else (0.0, 0.0)  # no candidate: the source itself
        if dist_final > eps:
            lo, hi, lo_val = 0.0, 1.0, (0.0, 0.0)
            for _ in range(HALVINGS):
                if budget.deadline is not None and time.perf_counter() >= budget.deadline:
                    break  # out of time: keep the last t that passed (0 at worst: the source)
                mid = 0.5 * (lo + hi)
                val = check(s + mid * (best - s))
                if val[0] <= eps:
                    lo, lo_val = mid, val
                else:
                    hi = mid
            tt = lo
            final = s + lo * (best - s)
            dist_final, se = lo_val
        l2 = _rms(final, s)
        runs[label] = FoolingRun(_np(final), l2, l2 / eps, dist_final, se, _rms(final, t), ds, l2s, tt, len(ds),
                                 clock.seconds, clock.stopped)
        if clock.stopped == "cancelled":
            break
    budget.report(1.0, "done")
    settings = dict(eps=eps, size=size, steps=steps, step_size=step_size, check_samples=check_samples, seed=seed,
                    max_seconds=max_seconds)
    return FoolingExperiment(_np(src), _np(tgt), float(eps), math.sqrt(pull0), runs, budget.cancelled, settings)
