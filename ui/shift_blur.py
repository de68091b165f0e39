"""Shift vs blur's cached work: the 8×8 stripes lesson, the copies and their scores, the sweeps.

Every cache here is server-wide (``st.cache_data`` / ``st.cache_resource``): the lesson, a copy's
numbers, a sweep and a figure depend only on the reference's content (``ref_id``, its digest; the
image itself is passed unhashed as ``_ref``), the slider value and the metric's spec name, so every
session that studies the same reference reads the same entries. :func:`swept` keeps the distances
the sweeps computed, so a slider step onto a swept value reads its number instead of passing the
copy through every network; :func:`curve` keeps :func:`lpips_explorer.shift_blur.sweep` (itself
cached on disk) in memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from lpips_core import metrics
from lpips_core.caching import LRU
from lpips_core.spec import CLASSIC, MetricSpec
from lpips_core.sweeps import metric_many
from lpips_explorer import synth
from lpips_explorer.distortions import kernel_blur, shift
from lpips_explorer.figures.lessons import layer_maps_by_shift, pixel_grid
from lpips_explorer.lab import classic_label
from lpips_explorer.shift_blur import SHIFTS, SIGMAS, distorted, swept_value, sweep

__all__ = ["SWEPT_KEPT", "classic", "copy_of", "copy_score", "curve", "distance", "remember", "remembered",
           "stripes_figure", "stripes_lesson", "swept", "why_maps_figure"]


@st.cache_data(show_spinner=False, max_entries=4)
def stripes_lesson() -> dict:
    """The 8×8 stripes, a copy shifted right by 1 px and one blurred with ¼[1 2 1] (both wrapping
    around), and each copy's row 0, per-pixel squared errors, MSE and PSNR (the same for everyone)."""
    ref = synth.stripes()
    copies = {"shifted 1 px": shift(ref, 1, boundary="wrap"),
              "blurred ¼[1 2 1]": kernel_blur(ref, [0.25, 0.5, 0.25], boundary="wrap")}
    rows = []
    for name, img in copies.items():
        err = (img[..., 0].astype(np.float64) - ref[..., 0]) ** 2
        values, counts = np.unique(err, return_counts=True)
        pattern = ", ".join(f"{v:g} on {c / err.size:.0%} of pixels" for v, c in zip(values, counts))
        rows.append({"copy": name, "row 0": " ".join(f"{v:g}" for v in img[0, :, 0]),
                     "per-pixel squared error": pattern, "MSE": metrics.mse(ref, img),
                     "PSNR (dB)": metrics.psnr(ref, img),
                     "SSIM": "n/a (needs ≥ 11×11 px; this image is 8×8 px)"})
    return {"reference": ref, "copies": copies, "rows": rows}


@st.cache_data(show_spinner=False, max_entries=8)
def copy_of(ref_id: str, _ref: np.ndarray, kind: str, value: float) -> np.ndarray:
    """The copy shown (a few kept: each is a full image, 3 MB at 512 px)."""
    return distorted(_ref, kind, value)


@st.cache_data(show_spinner=False, max_entries=256)
def classic(ref_id: str, _ref: np.ndarray, kind: str, value: float) -> dict[str, float]:
    """MSE, PSNR and SSIM of one copy, by label (the copy itself is not kept: only the three numbers)."""
    img = distorted(_ref, kind, value)
    return {classic_label(name): c(_ref, img) for name, c in CLASSIC.items()}


@st.cache_data(show_spinner=False, max_entries=256)
def copy_score(ref_id: str, _ref: np.ndarray, kind: str, value: float, spec: str, _model) -> float:
    """One copy's distance under ``spec`` (a name; ``_model`` its model, not hashed); an unchanged
    copy scores 0 without a pass. Cached by content, the copy and the spec."""
    if value == 0:
        return 0.0
    return float(metric_many(_model, _ref, [distorted(_ref, kind, value)], spec=spec).total[0])


#: Swept distances kept for the whole server, the least recently used dropped first (a few MB).
SWEPT_KEPT = 20_000


@st.cache_resource(show_spinner=False)
def swept() -> LRU:
    """Distances the page's sweeps have computed, server-wide: ``(reference digest, kind, value,
    spec name) → distance``. A slider step onto a swept value reads its number here instead of
    passing the copy through every network again (the sweep computed the same distance)."""
    return LRU(SWEPT_KEPT)


def remember(ref_id: str, kind: str, values: Sequence[float], totals: Sequence[float], spec: str) -> None:
    """Keep a sweep's distances in :func:`swept`, one per swept value."""
    swept().update({(ref_id, kind, float(v), spec): float(t) for v, t in zip(values, totals)})


def remembered(ref_id: str, spec: str) -> bool:
    """Whether both sweeps of this reference and spec are in :func:`swept`."""
    table = swept()
    return all((ref_id, kind, float(v), spec) in table for kind, values in (("shift", SHIFTS), ("blur", SIGMAS))
               for v in values)


def distance(ref: np.ndarray, ref_id: str, kind: str, value: float, spec: MetricSpec, model) -> float:
    """The copy's distance: from a sweep when one has covered it (this server's, else one cached on
    disk by :func:`lpips_explorer.shift_blur.sweep`, e.g. precomputed at set-up), else one pass (:func:`copy_score`)."""
    key = (ref_id, kind, float(value), spec.name)
    known = swept().get(key)
    if known is None:
        known = swept_value(model, ref, kind, value, spec=spec)
        if known is not None:
            swept().put(key, known)
    return known if known is not None else copy_score(ref_id, ref, kind, value, spec.name, model)


@st.cache_data(show_spinner=False, max_entries=32)
def curve(ref_id: str, _ref: np.ndarray, kind: str, values: tuple[float, ...], spec: str, _model,
          maps_at: tuple[float, ...] = ()) -> dict:
    """:func:`lpips_explorer.shift_blur.sweep` (disk-cached), also cached in memory per server."""
    return sweep(_model, _ref, kind, values, spec=spec, maps_at=maps_at)


@st.cache_resource(show_spinner=False)
def stripes_figure():
    """The 8×8 stripes lesson's figure (the same for everyone; built once per server)."""
    lesson = stripes_lesson()
    return pixel_grid({"reference": lesson["reference"], **lesson["copies"]})


@st.cache_resource(show_spinner=False, max_entries=16)
def why_maps_figure(ref_id: str, spec: str, sigma: float, _maps: dict, _names: tuple):
    """:func:`layer_maps_by_shift` for one reference, model and blur σ (built once; a shift slider
    step does not change it). The figure is only read by ``st.plotly_chart``."""
    return layer_maps_by_shift(_maps, _names)
