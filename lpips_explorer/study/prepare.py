"""Everything a study's triplets need, computed once when the study is created.

Students are shown 8-bit PNGs, and the metrics are computed on exactly those pixels (the PNG
decoded back to ``[0, 1]``), so each metric judges what the class judged. The results are stored
with the study (:meth:`lpips_explorer.study.store.StudyStore.create_study`); answering a triplet
then computes nothing: it is one database write and a redraw.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from PIL import Image

from lpips_core.images import image_to_png_bytes
from lpips_core.spec import MetricSpec
from lpips_explorer.study import scoring
from lpips_explorer.study import triplets as T

__all__ = ["Prepared", "decode_png", "prepare", "shown"]


@dataclasses.dataclass(frozen=True)
class Prepared:
    """One triplet ready to store: its recipe, pixel digest, the three PNGs and every metric's values.

    Attributes:
        recipe: the :class:`~lpips_explorer.study.triplets.Recipe`.
        digest: SHA-256 of the rendered (float) pixels, :meth:`Triplet.digest`.
        pngs: ``(reference, copy 1, copy 2)`` as 8-bit PNG bytes.
        distances: ``spec name → (value for copy 1, value for copy 2)`` on the PNGs' pixels.
    """

    recipe: T.Recipe
    digest: str
    pngs: tuple[bytes, bytes, bytes]
    distances: dict[str, tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class _Shown:
    ref: np.ndarray
    p0: np.ndarray
    p1: np.ndarray


def decode_png(png: bytes) -> np.ndarray:
    """An 8-bit RGB PNG as ``(H, W, 3)`` float32 in ``[0, 1]`` (value / 255)."""
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0


def shown(t: T.Triplet) -> tuple[tuple[bytes, bytes, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A rendered triplet as students see it: the three PNGs and their pixels in ``[0, 1]``
    (``round(value * 255) / 255``, exactly what decoding the PNGs gives)."""
    pngs = tuple(image_to_png_bytes(np.clip(img, 0.0, 1.0)) for img in (t.ref, t.p0, t.p1))
    return pngs, tuple(decode_png(p) for p in pngs)


def prepare(
    recipes: Sequence[T.Recipe],
    specs: Sequence[MetricSpec],
    models: Mapping[MetricSpec, Any],
    *,
    uploads: T.Uploads = None,
    progress: Callable[[int, int], object] | None = None,
) -> list[Prepared]:
    """Render every triplet, encode its PNGs and compute every metric on the shown pixels.

    Args:
        recipes: the study's recipes, in order.
        specs: the metrics to compute (:func:`lpips_core.spec.standard_specs`).
        models: ``spec → model`` for the learned specs; one missing or ``None`` is left out.
        uploads: the bytes of any ``"upload:…"`` image the recipes use.
        progress: ``progress(done, total)`` after each triplet and each metric (``total``: the
            triplets plus the metrics computed).

    Returns:
        One :class:`Prepared` per recipe, in order.
    """
    recipes = list(recipes)
    usable = [s for s in specs if not s.learned or models.get(s) is not None]
    total = len(recipes) + len(usable)
    step = 0
    rendered = []
    for r in recipes:
        t = T.render(r, uploads=uploads)
        pngs, pixels = shown(t)
        rendered.append((t.digest(), pngs, _Shown(*pixels)))
        step += 1
        if progress is not None:
            progress(step, total)
    per_key: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    views = [s for _, _, s in rendered]
    for spec in usable:
        per_key.update(scoring.study_distances(views, [spec], models))
        step += 1
        if progress is not None:
            progress(step, total)
    out = []
    for i, (r, (dig, pngs, _)) in enumerate(zip(recipes, rendered)):
        dist = {k: (float(d0[i]), float(d1[i])) for k, (d0, d1) in per_key.items()}
        out.append(Prepared(r, dig, pngs, dist))
    return out
