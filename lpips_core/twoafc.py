"""Two-alternative forced choice (2AFC): score any metric on human answers, and fit LPIPS's lin
weights to them, as the paper did.

A 2AFC set is triplets ``(ref, p0, p1)`` with ``h``, the fraction of the judges who called
``p1`` the closer copy (BAPPS' ``judge``). A metric scores ``h`` on a triplet where it puts ``p1``
closer, ``1 − h`` where it puts ``p0`` closer and ``0.5`` on an exact tie; its **2AFC score** is
the mean over triplets (the number in the paper's tables). The **human ceiling** is the mean of
``h² + (1 − h)²``: how often a judge drawn from the same people agrees with them.

LPIPS is linear in its channel weights: ``d(x, y) = Σ_l Σ_c w_lc · t_lc(x, y)`` with
``t_lc = mean_hw (f̂_x − f̂_y)²`` on the unit-normalised features of the frozen backbone. So a set
of triplets needs each image through the network once (:func:`channel_terms`), and fitting the
weights (:func:`fit_lin`) is a small problem over the ``(N, C)`` terms:

- the paper's objective, a binary cross-entropy of a predicted ``P(p1 is closer)`` against ``h``,
  with non-negative weights. The reference's ``train.py`` predicts it with a small ranking head
  (the two distances, their difference and ratios → 32 → 32 → 1); fitted on a few hundred
  triplets that head can learn a mapping in which a larger ``d0`` makes ``p0`` likelier, and
  its weights then rank worse than the published ones on held-out answers (measured: 2AFC 0.68–0.74
  against 0.86 on one synthetic class). Here the link is monotone, ``σ(a · (d0 − d1)/(d0 + d1) + b)``
  with ``a ≥ 0``: the same objective, with the direction fixed and the weights' overall scale free;
  the weights are ``softplus`` scales of the prior's (``≥ 0`` without clamping), fitted by L-BFGS;
- one weight per layer (the default: it scales the prior's channel weights, and holds on a
  class's few hundred answers) or one per channel (the paper's, for sets of thousands);
- a penalty ``strength · ‖w − w₀‖² / ‖w₀‖²`` toward a prior ``w₀``: the published weights or
  uniform weights (all ones), which keeps a few hundred answers from overfitting a thousand
  weights.

:func:`cross_validate` scores fitted weights honestly: ``k``-fold, each fold's weights fitted on
the other folds and scored on it, beside the published weights and the baseline (``w = 1``) on the
same triplets, with percentile bootstrap intervals over triplets and paired intervals of the
differences.

A BAPPS-format folder (:func:`read_bapps`) has ``ref/``, ``p0/``, ``p1/`` images and
``judge/*.npy`` fractions with matching names (the reference's ``dataset/2afc/<split>/<kind>``).
Lin weights are saved in the reference's file layout (``lin{i}.model.1.weight`` ``(1, C, 1, 1)``),
so ``lpips.LPIPS(model_path=…)`` and :class:`lpips_core.LPIPS` (``lin_path=``) both load them.
"""

from __future__ import annotations

import io
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from . import files

__all__ = [
    "FitResult",
    "TwoAFCSet",
    "bootstrap_ci",
    "channel_terms",
    "cross_validate",
    "fit_lin",
    "human_ceiling_scores",
    "lin_bytes",
    "read_bapps",
    "save_lin",
    "two_afc_scores",
]

MAX_JUDGE_BYTES = 4096
"""Largest ``judge/*.npy`` file read (one float is 136 bytes)."""

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


# --------------------------------------------------------------------------- scoring
def two_afc_scores(d0, d1, h) -> np.ndarray:
    """Per triplet: ``h`` where ``d1 < d0``, ``1 − h`` where ``d0 < d1``, ``0.5`` on a tie
    (distances: smaller is closer)."""
    d0, d1, h = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (d0, d1, h))
    if not (d0.shape == d1.shape == h.shape):
        raise ValueError(f"d0, d1 and h must have one length, got {d0.size}, {d1.size}, {h.size}")
    if np.any((h < 0) | (h > 1)) or not np.isfinite(h).all():
        raise ValueError("h must be fractions in [0, 1]")
    return np.where(d1 < d0, h, np.where(d0 < d1, 1.0 - h, 0.5))


def human_ceiling_scores(h) -> np.ndarray:
    """Per triplet ``h² + (1 − h)²``."""
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    return h * h + (1.0 - h) * (1.0 - h)


def bootstrap_ci(scores, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-triplet ``scores`` (seeded)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = s[rng.integers(0, s.size, size=(int(n_boot), s.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- data
@dataclass
class TwoAFCSet:
    """Triplets: ``ref``, ``p0``, ``p1`` as ``(H, W, 3)`` float arrays in ``[0, 1]`` (or paths), and
    ``h`` ``(N,)``, the fraction of judges who called ``p1`` closer. ``names`` name the triplets."""

    ref: list
    p0: list
    p1: list
    h: np.ndarray
    names: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.h = np.asarray(self.h, dtype=np.float64).reshape(-1)
        n = len(self.h)
        if not (len(self.ref) == len(self.p0) == len(self.p1) == n):
            raise ValueError(f"ref, p0, p1 and h must have one length, got {len(self.ref)}, {len(self.p0)}, "
                             f"{len(self.p1)}, {n}")
        if n == 0:
            raise ValueError("a 2AFC set needs at least one triplet")
        if not np.isfinite(self.h).all() or np.any((self.h < 0) | (self.h > 1)):
            raise ValueError("h must be fractions in [0, 1]")
        if not self.names:
            self.names = [f"{i:06d}" for i in range(n)]

    def __len__(self) -> int:
        return len(self.h)


def _read_judge(path: Path) -> float:
    data = files.read_bytes(path, max_bytes=MAX_JUDGE_BYTES)
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{path} is not a .npy array ({str(exc)[:60]})") from None
    if arr.size != 1 or arr.dtype.kind not in "fiu":
        raise ValueError(f"{path} holds {arr.dtype} {arr.shape}, not one fraction")
    v = float(arr.reshape(-1)[0])
    if not (0.0 <= v <= 1.0):
        raise ValueError(f"{path} holds {v!r}, not a fraction in [0, 1]")
    return v


def read_bapps(folder: str | os.PathLike[str]) -> TwoAFCSet:
    """A BAPPS-format 2AFC folder: ``ref/``, ``p0/``, ``p1/`` images and ``judge/NAME.npy`` with the
    same stem. Images are returned as paths (read later through the one reader); a triplet with a
    missing part or a bad judge file is skipped with its reason (``.skipped``).

    Raises:
        ValueError: not such a folder, or no complete triplet.
    """
    root = Path(folder)
    for part in ("ref", "p0", "p1", "judge"):
        if not (root / part).is_dir():
            raise ValueError(f"{str(folder)!r} is not a 2AFC folder: it has no {part}/ folder "
                             "(expected ref/, p0/, p1/ and judge/, as BAPPS' dataset/2afc/<split>/<kind>)")

    def stems(part: str, suffixes) -> dict[str, Path]:
        out = {}
        for p in sorted((root / part).iterdir()):
            if p.suffix.lower() in suffixes:
                out.setdefault(p.stem, p)
        return out

    refs, p0s, p1s = (stems(p, _IMAGE_SUFFIXES) for p in ("ref", "p0", "p1"))
    judges = stems("judge", (".npy",))
    ref, p0, p1, h, names, skipped = [], [], [], [], [], []
    for name in sorted(set(refs) | set(judges)):
        missing = [part for part, d in (("ref", refs), ("p0", p0s), ("p1", p1s), ("judge", judges)) if name not in d]
        if missing:
            skipped.append({"name": name, "error": f"no {', '.join(missing)} file"})
            continue
        try:
            hv = _read_judge(judges[name])
        except (ValueError, OSError) as exc:
            skipped.append({"name": name, "error": " ".join(str(exc).split())})
            continue
        ref.append(str(refs[name]))
        p0.append(str(p0s[name]))
        p1.append(str(p1s[name]))
        h.append(hv)
        names.append(name)
    if not names:
        raise ValueError(f"{str(folder)!r} holds no complete triplet"
                         + (f" ({len(skipped)} incomplete: {skipped[0]['error']} for {skipped[0]['name']!r})"
                            if skipped else ""))
    return TwoAFCSet(ref, p0, p1, np.asarray(h), names, skipped)


def _array(item) -> np.ndarray:
    from .images import check_image, load_image

    if isinstance(item, np.ndarray):
        return check_image(item)
    return load_image(item, max_side=None).array


# --------------------------------------------------------------------------- terms
@torch.inference_mode()
def channel_terms(model, data: TwoAFCSet, *, spec=None, batch: int = 16,
                  progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per triplet and channel ``t = mean_hw (f̂_ref − f̂_p)²`` for ``p0`` and ``p1``: two ``(N, C)``
    float64 arrays (``C``: every layer's channels, in order) and the layers' channel counts.

    ``T0 @ w`` is LPIPS ``d(ref, p0)`` for channel weights ``w`` (the concatenated lin weights, or
    ones for the baseline). Each image goes through the frozen backbone once.

    Args:
        model: an LPIPS-like model (:class:`~lpips_core.model.LPIPSBase`); its own weights are not used.
        spec: the input convention, colour and size (default: the model's own).
    """
    from .model import LPIPSBase
    from .spec import MetricSpec, parse_spec

    if not isinstance(model, LPIPSBase):
        raise TypeError(f"fitting lin weights needs an LPIPS-like model, got {type(model).__name__}")
    spec = MetricSpec.of_model(model) if spec is None else parse_spec(spec)
    n = len(data)
    t0 = t1 = None
    sizes: list[int] = []
    if progress:
        progress(0, n)
    for i0 in range(0, n, batch):
        i1 = min(n, i0 + batch)
        imgs = [_array(x) for part in (data.ref, data.p0, data.p1) for x in part[i0:i1]]
        shapes = {a.shape for a in imgs}
        if len(shapes) > 1 and spec.size is None:
            raise ValueError(f"the triplets' images differ in size ({sorted(shapes)[:2]}…): pass a size "
                             "(--size N) to resize them all")
        x = torch.cat([spec.prepare(a, device=model.device) for a in imgs])
        maps = model.features(x).maps
        m = i1 - i0
        parts0, parts1 = [], []
        for f in maps:
            f = f.double()
            r, a, b = f[:m], f[m:2 * m], f[2 * m:]
            parts0.append((r - a).pow_(2).mean(dim=(2, 3)))
            parts1.append((r - b).pow_(2).mean(dim=(2, 3)))
        if not sizes:
            sizes = [int(f.shape[1]) for f in maps]
            t0 = np.empty((n, sum(sizes)))
            t1 = np.empty((n, sum(sizes)))
        t0[i0:i1] = torch.cat(parts0, 1).cpu().numpy()
        t1[i0:i1] = torch.cat(parts1, 1).cpu().numpy()
        if progress:
            progress(i1, n)
    return t0, t1, sizes


# --------------------------------------------------------------------------- fitting
class _Link(torch.nn.Module):
    """``P(p1 is closer)`` from the two distances: ``σ(a · (d0 − d1)/(d0 + d1) + b)`` with ``a ≥ 0``
    (softplus): a larger ``d0`` always makes ``p1`` likelier, at any overall scale of the weights."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64))

    def forward(self, d0: torch.Tensor, d1: torch.Tensor) -> torch.Tensor:
        return 10.0 * torch.nn.functional.softplus(self.a) * (d0 - d1) / (d0 + d1 + 1e-12) + self.b


@dataclass
class FitResult:
    """Fitted lin weights: ``weights`` per layer ``[(C_l,), …]`` (all ``≥ 0``), the flat ``w``, and how.

    Attributes:
        settings: ``per``, ``prior``, ``strength``, ``steps``, ``seed``, ``objective``.
        loss: the final training loss (cross-entropy plus penalty).
        seconds: the fit's wall time.
    """

    w: np.ndarray
    sizes: list[int]
    settings: dict
    loss: float
    seconds: float

    @property
    def weights(self) -> list[np.ndarray]:
        return list(np.split(self.w, np.cumsum(self.sizes)[:-1]))


def _prior(prior, sizes: Sequence[int], published: np.ndarray | None) -> np.ndarray:
    if isinstance(prior, np.ndarray):
        return np.asarray(prior, dtype=np.float64)
    if prior == "uniform":
        return np.ones(sum(sizes))
    if prior == "published":
        if published is None:
            raise ValueError("prior='published' needs the published weights (published=…)")
        return np.asarray(published, dtype=np.float64)
    raise ValueError(f"prior must be 'published' or 'uniform', got {prior!r}")


def fit_lin(t0: np.ndarray, t1: np.ndarray, h, sizes: Sequence[int], *, per: str = "layer",
            prior: str | np.ndarray = "published", published: np.ndarray | None = None, strength: float = 0.1,
            steps: int = 300, seed: int = 0) -> FitResult:
    """Non-negative lin weights fitted to 2AFC answers (see the module doc).

    Args:
        t0, t1: :func:`channel_terms` ``(N, C)``; h: ``(N,)`` fractions for ``p1``.
        sizes: channels per layer.
        per: ``"layer"`` (one weight per layer, scaling the prior's channel weights; the default)
            or ``"channel"`` (one weight per channel, the paper's). On a few hundred triplets one
            per channel overfits: on answers generated by the published weights (240 triplets,
            5-fold) it agreed 0.008–0.011 less than they did, one per layer within 0.003.
        prior: the weights the penalty pulls toward and the fit starts from: ``"published"``
            (needs ``published``, the flat published weights), ``"uniform"`` (ones) or an array.
        strength: the penalty ``strength · ‖w − w₀‖² / ‖w₀‖²`` (0: none; default 0.1).
        steps: L-BFGS iterations at most (it stops earlier when converged).
        seed: kept in the settings (the fit itself is deterministic).

    Raises:
        ValueError: mismatched shapes or a bad option, in one line.
    """
    t0, t1 = np.asarray(t0, dtype=np.float64), np.asarray(t1, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    if t0.shape != t1.shape or t0.ndim != 2 or t0.shape[0] != h.size or t0.shape[1] != sum(sizes):
        raise ValueError(f"t0, t1 must be (N, {sum(sizes)}) and h (N,); got {t0.shape}, {t1.shape}, {h.shape}")
    if per not in ("channel", "layer"):
        raise ValueError(f"per must be 'channel' or 'layer', got {per!r}")
    if isinstance(strength, bool) or not (isinstance(strength, (int, float)) and math.isfinite(strength)
                                          and strength >= 0):
        raise ValueError(f"strength must be a finite number ≥ 0, got {strength!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 100_000:
        raise ValueError(f"steps must be an integer from 1 to 100,000, got {steps!r}")
    w0 = _prior(prior, sizes, published)
    if w0.shape != (sum(sizes),) or np.any(w0 < 0) or not np.isfinite(w0).all():
        raise ValueError(f"the prior must be {sum(sizes)} finite weights ≥ 0")
    start = time.perf_counter()
    T0, T1, H, W0 = (torch.from_numpy(a) for a in (t0, t1, h, w0))
    layer_of = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(list(sizes)))
    # w = softplus(u) · base: non-negative without clamping, the prior at u = softplus⁻¹(1); a
    # channel the prior weights 0 starts at a tenth of its layer's mean, so that it can grow
    base = W0.clone()
    for li in range(len(sizes)):
        sel = layer_of == li
        mean = float(base[sel].mean()) or 1.0
        base[sel] = torch.where(base[sel] > 0, base[sel], torch.full_like(base[sel], mean * 0.1))
    u = torch.full((sum(sizes) if per == "channel" else len(sizes),), math.log(math.e - 1.0),
                   dtype=torch.float64, requires_grad=True)
    link = _Link()
    norm0 = float((W0 * W0).sum()) or 1.0

    def weights() -> torch.Tensor:
        s = torch.nn.functional.softplus(u)
        return (s if per == "channel" else s[layer_of]) * base

    def objective() -> torch.Tensor:
        w = weights()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(link(T0 @ w, T1 @ w), H)
        return loss + strength * ((w - W0) ** 2).sum() / norm0 if strength else loss

    opt = torch.optim.LBFGS([u, *link.parameters()], lr=1.0, max_iter=int(steps), history_size=20,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        loss_value = float(objective())
        w = weights().numpy().copy()
    settings = {"per": per, "prior": prior if isinstance(prior, str) else "given", "strength": float(strength),
                "steps": int(steps), "seed": int(seed),
                "objective": "binary cross-entropy of P(p1 closer) = σ(a·(d0 − d1)/(d0 + d1) + b), a ≥ 0, against "
                             "h, plus strength·‖w − w0‖²/‖w0‖²; w ≥ 0; L-BFGS"}
    return FitResult(w, list(sizes), settings, loss_value, time.perf_counter() - start)


# --------------------------------------------------------------------------- evaluation
def _summary(scores: np.ndarray, n_boot: int, seed: int) -> dict:
    lo, hi = bootstrap_ci(scores, n_boot=n_boot, seed=seed)
    return {"score": float(scores.mean()), "ci95": [lo, hi]}


def cross_validate(t0: np.ndarray, t1: np.ndarray, h, sizes: Sequence[int], *, published: np.ndarray,
                   folds: int = 5, seed: int = 0, n_boot: int = 2000, **fit_options) -> dict:
    """``folds``-fold cross-validated 2AFC scores of fitted weights, beside the published weights
    and the baseline (``w = 1``) on the same triplets, each with a bootstrap interval over triplets;
    the paired intervals of "fitted − published" and "fitted − baseline"; the human ceiling.

    Returns:
        ``{"triplets", "folds", "fitted", "published", "baseline", "human_ceiling",
        "fitted_minus_published", "fitted_minus_baseline", "verdict"}`` (each score
        ``{"score", "ci95"}``).
    """
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    n = h.size
    folds = int(folds)
    if not 2 <= folds <= n:
        raise ValueError(f"folds must be from 2 to the number of triplets ({n}), got {folds}")
    order = np.random.default_rng(seed).permutation(n)
    fitted = np.empty(n)
    for k in range(folds):
        test = order[k::folds]
        train = np.setdiff1d(order, test)
        res = fit_lin(t0[train], t1[train], h[train], sizes, published=published, seed=seed, **fit_options)
        fitted[test] = two_afc_scores(t0[test] @ res.w, t1[test] @ res.w, h[test])
    pub = two_afc_scores(t0 @ published, t1 @ published, h)
    ones = np.ones(t0.shape[1])
    base = two_afc_scores(t0 @ ones, t1 @ ones, h)
    out = {"triplets": int(n), "folds": folds, "fitted": _summary(fitted, n_boot, seed),
           "published": _summary(pub, n_boot, seed), "baseline": _summary(base, n_boot, seed),
           "human_ceiling": _summary(human_ceiling_scores(h), n_boot, seed)}
    for name, other in (("published", pub), ("baseline", base)):
        diff = fitted - other
        out[f"fitted_minus_{name}"] = _summary(diff, n_boot, seed)
    d = out["fitted_minus_published"]["ci95"]
    if d[0] > 0:
        verdict = "the fitted weights agree with these answers better than the published ones"
    elif d[1] < 0:
        verdict = "the fitted weights agree with these answers worse than the published ones"
    else:
        verdict = (f"too few answers to tell the fitted and the published weights apart ({n} triplets: the "
                   "interval of their difference holds 0)")
    out["verdict"] = verdict
    return out


# --------------------------------------------------------------------------- files
def lin_bytes(weights: Sequence[np.ndarray]) -> bytes:
    """Lin weights as the bytes of a file in the reference's layout (``lin{i}.model.1.weight``
    ``(1, C, 1, 1)`` float32; ``torch.save``)."""
    sd = {f"lin{i}.model.1.weight": torch.from_numpy(np.asarray(w, dtype=np.float32).reshape(1, -1, 1, 1).copy())
          for i, w in enumerate(weights)}
    buf = io.BytesIO()
    torch.save(sd, buf)
    return buf.getvalue()


def save_lin(path: str | os.PathLike[str], weights: Sequence[np.ndarray], *, overwrite: bool = False) -> None:
    """Save :func:`lin_bytes` to ``path`` through the one writer (a taken name, a link or a FIFO
    is refused)."""
    files.write_bytes(path, lin_bytes(weights), overwrite=overwrite)
