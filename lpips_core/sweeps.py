"""Many comparisons at once: sweeps against one reference and the Conventions grid.

Both paths do the least network work the answer needs:

- :func:`lpips_many` runs the reference through the network once (the model's content-keyed
  cache, so a later call with the same reference and configuration does not even do that) and
  all other images in one batch.
- :func:`conventions_grid` evaluates, per backbone and size, every input variant of the pair in
  one batch for the v0.1 model and one for v0.0; the uncalibrated baseline reuses the v0.1
  features (lin and baseline differ only in the channel weights), so it costs no forward pass;
  a size the image already has (``256`` beside ``native`` for a 256 px image) reuses the native
  size's values (the same inputs: the same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from . import metric_registry
from .conventions import CONVENTIONS, LUMA, apply_convention, parse_size, resize, to_gray, to_input, to_tensor
from .metric_registry import NET_LABELS
from .model import LPIPS, _numpy_head
from .protocol import MetricResult
from .spec import MetricSpec

__all__ = [
    "GridCell",
    "VARIANTS",
    "VARIANT_NOTES",
    "conventions_grid",
    "grid_rows",
    "lpips_many",
    "metric_conventions_grid",
    "metric_grid_rows",
    "metric_many",
    "size_label",
]


def lpips_many(
    model: LPIPS,
    ref: np.ndarray,
    images: Sequence[np.ndarray],
    *,
    convention: str = "[-1,1]",
    size: int | tuple[int, int] | None = None,
    grayscale: bool = False,
    spatial: bool = False,
    keep_reference: bool = True,
) -> MetricResult:
    """LPIPS between one reference and each of ``images``: ``(H, W, 3)`` arrays in ``[0, 1]``.

    The reference goes through :meth:`LPIPS.reference_features` (cached by content;
    ``keep_reference=False`` uses a cached entry but stores no new one), the images through the
    network in one batch (chunked only for very large batches).

    Returns:
        :class:`~lpips_core.protocol.MetricResult` with ``total`` of shape ``(len(images),)``.

    Raises:
        ValueError: no images, or an image whose shape differs from the reference's.
    """
    if len(images) == 0:
        raise ValueError("lpips_many needs at least one image to compare")
    for i, img in enumerate(images):
        if np.shape(img) != np.shape(ref):
            raise ValueError(f"image {i} has shape {np.shape(img)}, the reference {np.shape(ref)}")
    opts = dict(convention=convention, size=size, grayscale=grayscale)
    x = to_input(ref, **opts)
    others = torch.cat([to_input(img, **opts) for img in images])
    return model.compare_batch(x, others, spatial=spatial, keep_reference=keep_reference)


# --------------------------------------------------------------------------- any metric of the registry
def _check_images(ref: np.ndarray, images: Sequence[np.ndarray]) -> None:
    if len(images) == 0:
        raise ValueError("metric_many needs at least one image to compare")
    for i, img in enumerate(images):
        if np.shape(img) != np.shape(ref):
            raise ValueError(f"image {i} has shape {np.shape(img)}, the reference {np.shape(ref)}")


def metric_many(
    model,
    ref: np.ndarray,
    images: Sequence[np.ndarray],
    *,
    spec: MetricSpec | str | None = None,
    spatial: bool = False,
) -> MetricResult:
    """A learned metric between one reference and each of ``images``: ``(H, W, 3)`` arrays in ``[0, 1]``.

    Each image is fed as ``spec`` prepares it (:meth:`MetricSpec.prepare`: its input convention,
    colour and size; by default the model's own spec, the metric's correct range at native size).
    The reference goes through the network once (the model's content-keyed cache), the images in
    batches (:meth:`~lpips_core.protocol.LearnedMetric.compare_batch`).

    Args:
        model: ``spec``'s model, as :meth:`MetricSpec.build` (or the app's getter) gives it.
        spec: a learned :class:`~lpips_core.spec.MetricSpec` or its name, whose model is ``model``.
        spatial: per-layer maps (LPIPS and ST-LPIPS only).

    Returns:
        :class:`~lpips_core.protocol.MetricResult`, ``total`` of shape ``(len(images),)``.

    Raises:
        ValueError: a classic or malformed spec, no images, an image whose shape differs from the
            reference's, or ``spatial`` for DISTS (it has no maps).
        TypeError: ``model`` is not ``spec``'s model.
    """
    spec = MetricSpec.for_model(model, spec)
    _check_images(ref, images)
    x = spec.prepare(ref)
    others = torch.cat([spec.prepare(img) for img in images])
    return model.compare_batch(x, others, spatial=spatial)


def metric_conventions_grid(
    model,
    ref: np.ndarray,
    dist: np.ndarray,
    *,
    sizes: Sequence[int | None] = (None, 64, 256),
    conventions: Sequence[str] = CONVENTIONS,
) -> list[GridCell]:
    """A learned metric of one pair fed under each range convention × size, as a ratio to the correct one.

    Per size, the pair under every convention goes through the network in one batch.

    Args:
        model: the metric's model (its spec, :meth:`MetricSpec.of_model`, says what is correct).
        ref, dist: ``(H, W, 3)`` arrays in ``[0, 1]`` of equal shape.
        conventions: from ``("[-1,1]", "[0,1]", "[0,255]")``; the metric's correct one is always added.

    Returns:
        One :class:`GridCell` per (size, convention), in that order: ``spec`` the model's spec
        under that convention and size, ``variant`` the convention, ``value`` the distance,
        ``ratio`` its ratio to the correct convention's value at the same size, ``note``
        :func:`metric_registry.convention_note`, ``is_reference`` for the correct convention.
    """
    own = MetricSpec.for_model(model)
    if np.shape(ref) != np.shape(dist):
        raise ValueError(f"the pair differs in shape: {np.shape(ref)} and {np.shape(dist)}")
    bad = [c for c in conventions if c not in CONVENTIONS]
    if bad:
        raise ValueError(f"unknown conventions {bad}; valid: {CONVENTIONS}")
    correct = own.convention
    convs = list(dict.fromkeys([correct, *conventions]))
    cells: list[GridCell] = []
    for size in sizes:
        specs = [own.replace(convention=c, size=size) for c in convs]
        xs = [s.prepare(ref) for s in specs]
        ys = [s.prepare(dist) for s in specs]
        feats = model.features(torch.cat(xs + ys))
        n = len(convs)
        totals = model.compare_features(feats[:n], feats[n:], spatial=False).total
        values = dict(zip(convs, (float(t) for t in totals)))
        base = values[correct]
        for c, s in zip(convs, specs):
            cells.append(GridCell(
                s, c, size_label(size), values[c], base, values[c] / base if base else float("nan"),
                metric_registry.convention_note(own.metric, c), c == correct,
            ))
    return cells


def metric_grid_rows(cells: Sequence[GridCell]) -> list[dict]:
    """Plain dicts (one per cell of :func:`metric_conventions_grid`) for a table or a CSV file;
    ``metric`` is the row's spec name (the metric on its network at its own convention)."""
    return [
        {
            "metric": c.row_spec.name,
            "convention": c.variant,
            "size": c.size_label,
            "value": c.value,
            "correct_value": c.reference_value,
            "ratio_to_correct": c.ratio,
            "is_correct": c.is_reference,
            "what_it_models": c.note,
        }
        for c in cells
    ]


# --------------------------------------------------------------------------- the Conventions grid
VARIANTS: tuple[str, ...] = ("[-1,1]", "[0,1]", "[0,255]", "v0.0", "baseline", "grayscale")
VARIANT_NOTES: dict[str, str] = {
    "[-1,1]": "Reference: inputs in [−1, 1], version 0.1, learned lin weights, colour.",
    "[0,1]": "Forgot normalize=True: [0, 1] images fed to a model that expects [−1, 1].",
    "[0,255]": "No scaling at all: raw 8-bit values fed, as the FashionMNIST notebook did.",
    "v0.0": "Version 0.0: the first release, which skipped the input scaling layer, with its own lin weights.",
    "baseline": "Uncalibrated (lpips=False): every channel weighted 1 — a cosine distance, not LPIPS.",
    "grayscale": "Colour dropped: the luma replicated to three channels before the network.",
}
# variant → (convention, version, lin, grayscale)
_VARIANT_CONFIG = {
    "[-1,1]": ("[-1,1]", "0.1", True, False),
    "[0,1]": ("[0,1]", "0.1", True, False),
    "[0,255]": ("[0,255]", "0.1", True, False),
    "v0.0": ("[-1,1]", "0.0", True, False),
    "baseline": ("[-1,1]", "0.1", False, False),
    "grayscale": ("[-1,1]", "0.1", True, True),
}


def size_label(size: int | None) -> str:
    return "native" if size is None else f"{size}×{size}"


@dataclass(frozen=True)
class GridCell:
    """One cell: ``value`` of ``spec`` (exactly what was computed: metric, network, version, head,
    input convention, colour, size) and its ratio to the reference variant of the same row and size.

    ``variant`` names what the cell changes (``"[0,1]"``, ``"v0.0"``, ``"baseline"`` …);
    ``size_label`` the size as shown (``"native"``, ``"64×64"``); :attr:`row_spec` the row it
    belongs to (the metric on that network at its defaults)."""

    spec: MetricSpec
    variant: str
    size_label: str
    value: float
    reference_value: float
    ratio: float
    note: str
    is_reference: bool

    @property
    def row_spec(self) -> MetricSpec:
        """The row: the metric on this cell's network, every other option at its defaults."""
        return self.spec.row_spec


def _feature_keys(variants: Sequence[str], version: str) -> list[tuple[str, bool]]:
    """The distinct (convention, grayscale) inputs the variants of one ``version`` need."""
    keys: dict[tuple, None] = {}
    for v in variants:
        conv, ver, _, gray = _VARIANT_CONFIG[v]
        if ver == version:
            keys.setdefault((conv, gray))
    return list(keys)


def _variant_spec(net: str, variant: str, size: int | None) -> MetricSpec:
    conv, version, lin, gray = _VARIANT_CONFIG[variant]
    return MetricSpec("lpips", net=net, version=version, lin=lin, convention=conv, grayscale=gray, size=size)


def conventions_grid(
    ref: np.ndarray,
    dist: np.ndarray,
    *,
    get_model: Callable[[MetricSpec], LPIPS | None],
    nets: Sequence[str] = tuple(NET_LABELS),
    sizes: Sequence[int | None] = (None, 64, 128, 224, 256),
    variants: Sequence[str] = VARIANTS,
    progress: Callable[[int, int], object] | None = None,
) -> list[GridCell]:
    """LPIPS of one pair under every backbone × variant × size, each as a ratio to the reference.

    Args:
        ref, dist: ``(H, W, 3)`` arrays in ``[0, 1]`` of equal shape.
        get_model: the model of a spec (``MetricSpec("lpips", net=…, version=…)``, lin weights),
            or ``None`` when that backbone is unavailable (its cells are then left out); the
            app passes its cached getter.
        progress: ``progress(done, total)`` after each (net, size), ``total = len(nets) * len(sizes)``.

    Returns:
        One :class:`GridCell` per computed cell, in (net, size, variant) order; each cell's
        ``spec`` is the LPIPS configuration the variant stands for at that size.
    """
    if np.shape(ref) != np.shape(dist):
        raise ValueError(f"the pair differs in shape: {np.shape(ref)} and {np.shape(dist)}")
    unknown = [v for v in variants if v not in _VARIANT_CONFIG]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; valid: {VARIANTS}")
    variants = list(dict.fromkeys(["[-1,1]", *variants]))
    pair01 = (to_tensor(ref), to_tensor(dist))  # checked and converted once, resized per size
    steps = len(nets) * len(sizes)
    cells: list[GridCell] = []
    done = 0
    native = tuple(pair01[0].shape[-2:])
    for net in nets:
        models = {ver: get_model(MetricSpec("lpips", net=net, version=ver))
                  for ver in {_VARIANT_CONFIG[v][1] for v in variants}}
        by_shape: dict[tuple[int, int], dict[str, float]] = {}  # a size equal to another (native) is computed once
        for size in sizes:
            done += 1
            if any(m is None for m in models.values()):
                if progress:
                    progress(done, steps)
                continue
            shape = parse_size(size, native)
            if shape not in by_shape:
                by_shape[shape] = _grid_values(pair01, models, variants, size)
            values = by_shape[shape]
            base = values["[-1,1]"]
            for v in variants:
                cells.append(GridCell(
                    _variant_spec(net, v, size), v, size_label(size), values[v], base,
                    values[v] / base if base else float("nan"), VARIANT_NOTES[v], v == "[-1,1]",
                ))
            if progress:
                progress(done, steps)
    return cells


_CONVENTION_AFFINE = {"[-1,1]": (2.0, -1.0), "[0,1]": None, "[0,255]": (255.0, None)}
_LUMA = np.asarray(LUMA, dtype=np.float32).reshape(1, 3, 1, 1)


def _variant_inputs(x01: torch.Tensor, keys: Sequence[tuple[str, bool]], numpy: bool) -> torch.Tensor:
    """``(1, 3, H, W)`` in ``[0, 1]`` → ``(len(keys), 3, H, W)``: the image under each (convention,
    grayscale) of ``keys``, as ``apply_convention(to_gray(x) if gray else x, convention)``.

    With ``numpy`` (a CPU model whose head runs in NumPy, see ``lpips_core.model._numpy_head``)
    the same float32 operations in the same order run in NumPy on one thread, giving the same
    bits: in PyTorch each of these small passes is a fork/join of two OpenMP threads, which
    waits whenever another process holds a core."""
    if not numpy:
        return torch.cat([apply_convention(to_gray(x01) if g else x01, c) for c, g in keys])
    x = np.ascontiguousarray(x01.numpy())  # to_tensor's permuted view: one copy, then contiguous passes
    gray = None
    out = np.empty((len(keys), *x.shape[1:]), dtype=np.float32)
    for i, (conv, g) in enumerate(keys):
        if g and gray is None:  # BT.601 luma: the channels weighted, then summed in order
            gray = np.add.reduce(x * _LUMA, axis=1, keepdims=True)
        src = gray if g else x
        affine = _CONVENTION_AFFINE[conv]
        if affine is None:
            out[i] = src[0]
            continue
        np.multiply(src[0], np.float32(affine[0]), out=out[i])
        if affine[1] is not None:
            np.add(out[i], np.float32(affine[1]), out=out[i])
    return torch.from_numpy(out)


def _grid_values(pair01, models: dict[str, LPIPS], variants, size) -> dict[str, float]:
    values: dict[str, float] = {}
    # each image resized once; conventions and grayscale are cheap maps of the resized [0, 1] image
    pair01 = [resize(t, size) for t in pair01]
    for version, model in models.items():
        keys = _feature_keys(variants, version)
        numpy = _numpy_head(model.device)
        xs, ys = (_variant_inputs(t, keys, numpy) for t in pair01)
        # one backbone batch; lin and baseline both come from the per-channel terms
        if model.channel_weights is None:
            raise ValueError("conventions_grid needs get_model to return lin models (lin=True)")
        terms = model.pair_channel_terms(xs, ys)
        lin = sum(t @ w.cpu() for t, w in zip(terms, model.channel_weights))
        base = sum(t.sum(1) for t in terms)
        for v in variants:
            conv, ver, use_lin, gray = _VARIANT_CONFIG[v]
            if ver == version:
                i = keys.index((conv, gray))
                values[v] = float(lin[i] if use_lin else base[i])
    return values


def grid_rows(cells: Sequence[GridCell]) -> list[dict]:
    """Plain dicts (one per cell) for a table or a CSV file."""
    return [
        {
            "backbone": c.spec.net,
            "variant": c.variant,
            "size": c.size_label,
            "lpips": c.value,
            "reference_lpips": c.reference_value,
            "ratio_to_reference": c.ratio,
            "is_reference": c.is_reference,
            "what_it_models": c.note,
        }
        for c in cells
    ]
