"""The Shift-vs-blur lesson's computations: a metric along a shift or blur sweep, cached on disk.

A sweep runs the distorted copies of one reference through a learned metric in one batch
(:func:`lpips_core.sweeps.metric_many`) and keeps the totals, the per-layer terms and, on
request, each layer's distance map block-averaged to a small grid. Results are cached on disk
under ``~/.cache/lpips_explorer/sweeps`` (``LPIPS_EXPLORER_SWEEP_CACHE`` overrides; ``"off"``
disables), keyed by the reference's content, the sweep, the model (metric, net, version, lin,
weights provenance) and the library version with a hash of the sources the numbers depend on,
so a changed library or model never reads a stale entry. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from lpips_explorer.distortions import gaussian_blur, shift
from lpips_explorer.figures.lessons import block_mean
from lpips_core.sweeps import metric_many

__all__ = ["DEFAULT_SHIFT", "DEFAULT_SIGMA", "KINDS", "MAP_SHIFTS", "SHIFTS", "SHIFT_BOUNDARY", "SIGMAS", "cache_dir",
           "distorted", "lesson_sweeps", "library_hash", "swept_value", "sweep"]

#: The two distortions of the lesson: a shift (px, to the right) and a Gaussian blur (σ, px).
KINDS = ("shift", "blur")
#: How the shift fills the uncovered column.
SHIFT_BOUNDARY = "reflect"
#: The lesson's curves: shifts 0…8 px, blur σ 0…3 px; the shifts whose per-layer maps the "why" shows.
SHIFTS: tuple[float, ...] = tuple(float(s) for s in range(9))
SIGMAS: tuple[float, ...] = tuple(float(s) for s in np.arange(0.0, 3.01, 0.5))
MAP_SHIFTS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
#: The page's starting point: the lesson's one-pixel shift against a σ = 1.5 px blur.
DEFAULT_SHIFT, DEFAULT_SIGMA = 1.0, 1.5
_MAP_SIDE = 48


def distorted(ref: np.ndarray, kind: str, value: float) -> np.ndarray:
    """``ref`` (``(H, W, 3)`` in ``[0, 1]``) shifted right by ``value`` px (reflect boundary) or
    blurred with σ = ``value`` px; ``value == 0`` returns ``ref`` itself."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if value == 0:
        return ref
    return shift(ref, value, boundary=SHIFT_BOUNDARY) if kind == "shift" else gaussian_blur(ref, value)


#: The ``lpips_core`` files a sweep's numbers depend on (their content is the "library version").
_NUMERIC_SOURCES = ("lpips_core", "lpips_core.backbones", "lpips_core.conventions", "lpips_core.dists",
                    "lpips_core.metric_registry", "lpips_core.model", "lpips_core.protocol", "lpips_core.stlpips",
                    "lpips_core.sweeps", "lpips_core.weights", "lpips_explorer.distortions",
                    "lpips_explorer.shift_blur", "lpips_explorer.figures.lessons")


@lru_cache(maxsize=1)
def library_hash() -> str:
    """A hash of the library's version and of the sources the numbers depend on (:data:`_NUMERIC_SOURCES`)."""
    import importlib.util

    from lpips_core import __version__

    h = hashlib.blake2b(__version__.encode(), digest_size=12)
    for name in _NUMERIC_SOURCES:
        h.update(name.encode())
        h.update(Path(importlib.util.find_spec(name).origin).read_bytes())
    return h.hexdigest()


def cache_dir() -> Path | None:
    """Where sweeps are cached (``None`` when ``LPIPS_EXPLORER_SWEEP_CACHE=off``)."""
    env = os.environ.get("LPIPS_EXPLORER_SWEEP_CACHE", "")
    if env.lower() == "off":
        return None
    return Path(env) if env else Path.home() / ".cache" / "lpips_explorer" / "sweeps"


def _key(ref: np.ndarray, kind: str, values: Sequence[float], metric: str, model, maps_at: Sequence[float]) -> str:
    h = hashlib.blake2b(digest_size=20)
    ref = np.ascontiguousarray(ref, dtype=np.float32)
    h.update(repr(ref.shape).encode())
    h.update(ref.tobytes())
    desc = {"kind": kind, "values": [float(v) for v in values], "maps_at": [float(v) for v in maps_at],
            "metric": metric, "net": getattr(model, "net", None), "version": getattr(model, "version", None),
            "lin": getattr(model, "channel_weights", None) is not None, "weights": str(getattr(model, "weights", "")),
            "lib": library_hash(), "map_side": _MAP_SIDE, "boundary": SHIFT_BOUNDARY}
    h.update(json.dumps(desc, sort_keys=True).encode())
    return h.hexdigest()


def _load(path: Path) -> dict | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {"total": z["total"].astype(np.float64).tolist(), "per_layer": z["per_layer"].astype(np.float64),
                    "layer_names": [str(s) for s in z["layer_names"]],
                    "maps": z["maps"] if z["maps"].size else None}
    except (OSError, KeyError, ValueError):
        return None


def _save(path: Path, out: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, total=np.asarray(out["total"]), per_layer=out["per_layer"],
                     layer_names=np.asarray(out["layer_names"]),
                     maps=out["maps"] if out["maps"] is not None else np.zeros((0,)))
        os.replace(tmp, path)  # atomic: a reader never sees half a file
    except OSError:
        pass  # a read-only home only costs the speed-up


def sweep(
    model,
    ref: np.ndarray,
    kind: str,
    values: Sequence[float],
    *,
    metric: str,
    maps_at: Sequence[float] = (),
    use_disk: bool = True,
) -> dict:
    """``metric`` between ``ref`` and each of its ``kind``-distorted copies at ``values``.

    Args:
        model: the metric's model (:func:`lpips_core.metric_registry.build`).
        ref: ``(H, W, 3)`` float array in ``[0, 1]``.
        kind: ``"shift"`` or ``"blur"``; ``values`` in px (0 = the reference itself, scored 0
            without a forward pass).
        maps_at: values (a subset of ``values``, none 0) whose per-layer distance maps to keep,
            block-averaged to at most 48 cells a side (the metric must have maps).
        use_disk: read and write the on-disk cache (:func:`cache_dir`).

    Returns:
        ``{"total": [len(values)] floats, "per_layer": (len(values), L) float64, "layer_names": [L],
        "maps": (len(maps_at), L, h, w) float64 or None}``; rows for value 0 are zeros.

    Raises:
        ValueError: unknown kind, no values, or a ``maps_at`` value not among the non-zero ``values``.
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("sweep needs at least one value")
    maps_at = [float(v) for v in maps_at]
    todo = [v for v in values if v != 0]
    bad = [v for v in maps_at if v not in todo]
    if bad:
        raise ValueError(f"maps_at {bad} must be non-zero members of values {values}")
    folder = cache_dir() if use_disk else None
    path = folder / f"{_key(ref, kind, values, metric, model, maps_at)}.npz" if folder else None
    if path is not None and path.exists():
        hit = _load(path)
        if hit is not None:
            return hit
    names = list(getattr(model, "layer_names", ()))
    total = dict.fromkeys(values, 0.0)
    per_layer = np.zeros((len(values), len(names)))
    maps = None
    if todo:
        res = metric_many(model, ref, [distorted(ref, kind, v) for v in todo], metric=metric, spatial=bool(maps_at))
        names = list(res.layer_names)
        per_layer = np.zeros((len(values), len(names)))
        rows = res.per_layer.double().cpu().numpy()
        for v, t, r in zip(todo, res.total.tolist(), rows):
            total[v] = float(t)
            per_layer[values.index(v)] = r
        if maps_at:
            full = res.layer_maps.double().cpu().numpy()
            maps = np.stack([block_mean(full[todo.index(v)], _MAP_SIDE) for v in maps_at])
    out = {"total": [total[v] for v in values], "per_layer": per_layer, "layer_names": names, "maps": maps}
    if path is not None:
        _save(path, out)
    return out


def swept_value(model, ref: np.ndarray, kind: str, value: float, *, metric: str) -> float | None:
    """``metric`` of ``ref``'s ``kind`` copy at ``value`` read from a lesson sweep on disk (the
    :data:`SHIFTS`/:data:`SIGMAS` sweeps :func:`lesson_sweeps` writes, with or without maps), or
    ``None`` when no such sweep is cached (or the disk cache is off). Never computes.

    The value is the one the sweep computed in its batch (equal to a single pass within float
    rounding); a value 0 is 0.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    value = float(value)
    if value == 0:
        return 0.0
    values = SHIFTS if kind == "shift" else SIGMAS
    folder = cache_dir()
    if folder is None or value not in values:
        return None
    for maps_at in ((), MAP_SHIFTS) if kind == "shift" else ((),):
        path = folder / f"{_key(ref, kind, values, metric, model, maps_at)}.npz"
        hit = _load(path) if path.exists() else None
        if hit is not None:
            return float(hit["total"][values.index(value)])
    return None


def lesson_sweeps(ref: np.ndarray, lpips_models: dict, others: dict | None = None, *, why_net: str | None = None,
                  sigma: float = DEFAULT_SIGMA) -> None:
    """Run (and so cache on disk) the sweeps the Shift-vs-blur page asks for at its defaults.

    Args:
        ref: ``(H, W, 3)`` in ``[0, 1]``: the reference exactly as the page gets it.
        lpips_models: net → LPIPS model; the shift sweep of ``why_net`` (default: the first) keeps
            the :data:`MAP_SHIFTS` maps, and its blur at ``sigma`` is swept alone with its maps.
        others: any further ``name → (metric, model)`` (the successor metrics), totals only.
    """
    why_net = why_net if why_net is not None else next(iter(lpips_models), None)
    for net, model in lpips_models.items():
        sweep(model, ref, "shift", SHIFTS, metric="lpips", maps_at=MAP_SHIFTS if net == why_net else ())
        sweep(model, ref, "blur", SIGMAS, metric="lpips")
    if why_net in lpips_models and sigma:
        sweep(lpips_models[why_net], ref, "blur", (sigma,), metric="lpips", maps_at=(sigma,))
    for metric, model in (others or {}).values():
        for kind, values in (("shift", SHIFTS), ("blur", SIGMAS)):
            sweep(model, ref, kind, values, metric=metric)


def main(argv: list[str] | None = None) -> int:
    """``python -m lpips_explorer.shift_blur [--side 256] [--nets alex vgg] IMAGE…``: fill the disk cache
    for these images (e.g. ``sample_images/*.png``) at the app's working size."""
    import argparse

    from lpips_core import metric_registry
    from lpips_core.images import load_image

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("images", nargs="+")
    p.add_argument("--side", type=int, default=256, help="the app's working size (longer side, px)")
    p.add_argument("--nets", nargs="+", default=["alex", "vgg"], help="LPIPS backbones")
    p.add_argument("--others", nargs="*", default=["stlpips:alex"],
                   help="further metric:net pairs (the app's successors on a CPU: stlpips:alex)")
    args = p.parse_args(argv)
    models = {net: metric_registry.build("lpips", net) for net in args.nets}
    others = {}
    for spec in args.others:
        metric, _, net = spec.partition(":")
        others[spec] = (metric, metric_registry.build(metric, net or None))
    for path in args.images:
        ref = load_image(path, max_side=args.side).array
        lesson_sweeps(ref, models, others)
        print(f"{path}: cached in {cache_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
