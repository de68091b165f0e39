"""The Shift-vs-blur lesson's computations: a metric along a shift or blur sweep, cached on disk.

A sweep runs the distorted copies of one reference through a learned metric in one batch
(:func:`lpips_core.sweeps.metric_many`, under a :class:`~lpips_core.spec.MetricSpec`) and keeps
the totals, the per-layer terms and, on request, each layer's distance map block-averaged to a
small grid. Results are cached on disk under ``~/.cache/lpips_explorer/sweeps``
(``LPIPS_EXPLORER_SWEEP_CACHE`` overrides; ``"off"`` disables, see
:mod:`lpips_explorer.environment`), keyed by the reference's content, the sweep, the spec, the
weights' provenance and the library version with a hash of the sources the numbers depend on,
so a changed library or model never reads a stale entry. No Streamlit here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from lpips_core import files
from lpips_core.caching import content_digest, memo
from lpips_core.spec import MetricSpec, parse_spec
from lpips_core.sweeps import metric_many
from lpips_explorer import environment
from lpips_explorer.distortions import gaussian_blur, shift
from lpips_explorer.figures.lessons import block_mean

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
                    "lpips_core.spec", "lpips_explorer.shift_blur", "lpips_explorer.figures.lessons")


@memo(1)
def library_hash() -> str:
    """A hash of the library's version and of the sources the numbers depend on (:data:`_NUMERIC_SOURCES`)."""
    import importlib.util

    from lpips_core import __version__

    return content_digest(__version__, *[(name, Path(importlib.util.find_spec(name).origin).read_bytes())
                                         for name in _NUMERIC_SOURCES], size=12)


def cache_dir() -> Path | None:
    """Where sweeps are cached (``None`` when ``LPIPS_EXPLORER_SWEEP_CACHE=off``)."""
    return environment.sweep_cache()


def _key(ref: np.ndarray, kind: str, values: Sequence[float], spec: MetricSpec, model,
         maps_at: Sequence[float]) -> str:
    desc = {"kind": kind, "values": [float(v) for v in values], "maps_at": [float(v) for v in maps_at],
            "spec": spec.name, "weights": str(getattr(model, "weights", "")),
            "lib": library_hash(), "map_side": _MAP_SIDE, "boundary": SHIFT_BOUNDARY}
    return content_digest(np.asarray(ref, dtype=np.float32), json.dumps(desc, sort_keys=True), size=20)


def _load(path: Path) -> dict | None:
    import io

    try:  # through the one reader: a FIFO or an oversized file in the cache is a miss, not a hang
        data = files.read_bytes(path, max_bytes=_MAX_CACHE_BYTES)
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {"total": z["total"].astype(np.float64).tolist(), "per_layer": z["per_layer"].astype(np.float64),
                    "layer_names": [str(s) for s in z["layer_names"]],
                    "maps": z["maps"] if z["maps"].size else None}
    except (OSError, KeyError, ValueError):  # files.UnsafeFile is a ValueError
        return None


def _save(path: Path, out: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the one writer: a temporary file renamed into place, so a reader never sees half a file
        files.write_bytes(path, lambda f: np.savez(f, total=np.asarray(out["total"]), per_layer=out["per_layer"],
                                                   layer_names=np.asarray(out["layer_names"]),
                                                   maps=out["maps"] if out["maps"] is not None else np.zeros((0,))),
                          overwrite=True)
    except (OSError, ValueError):
        pass  # a read-only home (or a folder in the entry's place) only costs the speed-up


_MAX_CACHE_BYTES = 256 * 2**20
"""Largest sweep cache entry read (an entry with its maps is a few MB)."""


def sweep(
    model,
    ref: np.ndarray,
    kind: str,
    values: Sequence[float],
    *,
    spec: MetricSpec | str | None = None,
    maps_at: Sequence[float] = (),
    use_disk: bool = True,
) -> dict:
    """A learned metric between ``ref`` and each of its ``kind``-distorted copies at ``values``.

    Args:
        model: ``spec``'s model (:meth:`MetricSpec.build`, or the app's cached getter).
        spec: a learned :class:`~lpips_core.spec.MetricSpec` or its name (default: the model's own).
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
    spec = MetricSpec.for_model(model, spec)
    folder = cache_dir() if use_disk else None
    path = folder / f"{_key(ref, kind, values, spec, model, maps_at)}.npz" if folder else None
    if path is not None and path.exists():
        hit = _load(path)
        if hit is not None:
            return hit
    names = list(getattr(model, "layer_names", ()))
    total = dict.fromkeys(values, 0.0)
    per_layer = np.zeros((len(values), len(names)))
    maps = None
    if todo:
        res = metric_many(model, ref, [distorted(ref, kind, v) for v in todo], spec=spec, spatial=bool(maps_at))
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


def swept_value(model, ref: np.ndarray, kind: str, value: float, *,
                spec: MetricSpec | str | None = None) -> float | None:
    """``spec`` (default: the model's own) of ``ref``'s ``kind`` copy at ``value`` read from a lesson sweep on disk (the
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
    spec = MetricSpec.for_model(model, spec)
    for maps_at in ((), MAP_SHIFTS) if kind == "shift" else ((),):
        path = folder / f"{_key(ref, kind, values, spec, model, maps_at)}.npz"
        hit = _load(path) if path.exists() else None
        if hit is not None:
            return float(hit["total"][values.index(value)])
    return None


def lesson_sweeps(ref: np.ndarray, models: Mapping[MetricSpec | str, object], *,
                  why: MetricSpec | str | None = None, sigma: float = DEFAULT_SIGMA) -> None:
    """Run (and so cache on disk) the sweeps the Shift-vs-blur page asks for at its defaults.

    Args:
        ref: ``(H, W, 3)`` in ``[0, 1]``: the reference exactly as the page gets it.
        models: spec (or its name) → its model, every one swept over :data:`SHIFTS` and
            :data:`SIGMAS`, totals only, except ``why``.
        why: the spec whose layers the page explains (default: the first of ``models`` with
            spatial maps): its shift sweep keeps the :data:`MAP_SHIFTS` maps, and its blur at
            ``sigma`` is swept alone with its maps.
    """
    models = {parse_spec(spec): model for spec, model in models.items()}
    why = parse_spec(why) if why is not None else next((s for s in models if s.has_maps), None)
    for spec, model in models.items():
        sweep(model, ref, "shift", SHIFTS, spec=spec, maps_at=MAP_SHIFTS if spec == why else ())
        sweep(model, ref, "blur", SIGMAS, spec=spec)
    if why in models and sigma:
        sweep(models[why], ref, "blur", (sigma,), spec=why, maps_at=(sigma,))


#: What :func:`main` sweeps by default: the page's default metrics on a CPU (the sidebar's
#: AlexNet, the lesson's VGG16, ST-LPIPS · AlexNet), the first one explained layer by layer.
DEFAULT_SPECS: tuple[str, ...] = ("lpips-alex", "lpips-vgg", "stlpips-alex")


def main(argv: list[str] | None = None) -> int:
    """``python -m lpips_explorer.shift_blur [--side 256] [--specs lpips-alex lpips-vgg stlpips-alex] IMAGE…``:
    fill the disk cache for these images (e.g. ``sample_images/*.png``) at the app's working size."""
    import argparse

    from lpips_core.images import load_image

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("images", nargs="+")
    p.add_argument("--side", type=int, default=256, help="the app's working size (longer side, px)")
    p.add_argument("--specs", nargs="+", default=list(DEFAULT_SPECS),
                   help="metric spec names (as --metrics of python -m lpips_core score); the first one with "
                        "maps is explained layer by layer")
    args = p.parse_args(argv)
    try:
        specs = [parse_spec(name) for name in args.specs]
    except ValueError as exc:
        p.error(str(exc))
    models = {spec: spec.build() for spec in specs}
    for path in args.images:
        ref = load_image(path, max_side=args.side).array
        lesson_sweeps(ref, models)
        print(f"{path}: cached in {cache_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
