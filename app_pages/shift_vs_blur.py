"""Shift vs blur: pixel metrics punish a shift and forgive a blur; deep features disagree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import ui
from lpips_core import metrics, synth
from lpips_core.distortions import gaussian_blur, kernel_blur, shift
from lpips_core.figures.lessons import EXTRA_ROWS, METRIC_ROWS, pixel_grid, sweep_curves
from lpips_core.sweeps import lpips_many, metric_many

SHIFTS = tuple(float(s) for s in range(9))                 # px, the shift curve's points
SIGMAS = tuple(float(s) for s in np.arange(0.0, 3.01, 0.5))  # px, the blur curve's points
LESSON_NETS = ("alex", "vgg")
SHIFT_BOUNDARY = "reflect"


# --------------------------------------------------------------------------- cached work
@st.cache_data(show_spinner=False, max_entries=4)
def stripes_lesson() -> dict:
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
                     "SSIM": "n/a (needs ≥ 11×11 px; this image is 8×8)"})
    return {"reference": ref, "copies": copies, "rows": rows}


@st.cache_data(show_spinner=False, max_entries=32)
def distorted(ref: np.ndarray, kind: str, value: float) -> np.ndarray:
    if value == 0:
        return ref
    if kind == "shift":
        return shift(ref, value, boundary=SHIFT_BOUNDARY)
    return gaussian_blur(ref, value)


@st.cache_data(show_spinner=False, max_entries=64)
def classic(ref: np.ndarray, kind: str, value: float) -> dict[str, float]:
    img = distorted(ref, kind, value)
    return {"MSE": metrics.mse(ref, img), "PSNR (dB)": metrics.psnr(ref, img), "SSIM": metrics.ssim(ref, img)}


@st.cache_data(show_spinner=False, max_entries=16)
def lpips_curve(ref: np.ndarray, kind: str, values: tuple[float, ...], net: str, version: str, lin: bool,
                _model) -> list[float]:
    """LPIPS for every point of one curve: the distorted images in one batch (0 needs no pass)."""
    todo = [v for v in values if v != 0]
    out = dict.fromkeys(values, 0.0)
    if todo:
        res = lpips_many(_model, ref, [distorted(ref, kind, v) for v in todo])
        out.update(zip(todo, (float(t) for t in res.total)))
    return [out[v] for v in values]


def lpips_at(ref, kind: str, value: float, grid: tuple[float, ...], net: str, model) -> float:
    """The current slider value: read off the cached curve, or one forward pass when off the grid."""
    cfg = ui.app_config()
    if value in grid:
        return lpips_curve(ref, kind, grid, net, cfg.version, cfg.lin, model)[grid.index(value)]
    return lpips_curve(ref, kind, (value,), net, cfg.version, cfg.lin, model)[0]


@st.cache_data(show_spinner=False, max_entries=32)
def successor_curve(ref: np.ndarray, kind: str, values: tuple[float, ...], metric: str, net: str,
                    _model) -> list[float]:
    """A successor metric (ST-LPIPS, DISTS) for every point of one curve, in one batch; cached by
    the image's content, the curve, the metric and its net (the model itself is not hashed)."""
    todo = [v for v in values if v != 0]
    out = dict.fromkeys(values, 0.0)
    if todo:
        res = metric_many(_model, ref, [distorted(ref, kind, v) for v in todo], metric=metric)
        out.update(zip(todo, (float(t) for t in res.total)))
    return [out[v] for v in values]


def successor_at(ref, kind: str, value: float, grid: tuple[float, ...], metric: str, net: str, model) -> float:
    """The current slider value of a successor: off the cached curve, or one pass when off the grid."""
    if value in grid:
        return successor_curve(ref, kind, grid, metric, net, model)[grid.index(value)]
    return successor_curve(ref, kind, (value,), metric, net, model)[0]


# --------------------------------------------------------------------------- page
st.title("Shift vs blur")
st.markdown(
    "A one-pixel shift looks like nothing to a person; a blur is plainly visible. "
    "Pixel metrics see it the other way round. Deep features, and so LPIPS, get much closer to what we see."
)

st.subheader("The 8×8 stripes")
lesson = stripes_lesson()
mse_shift, mse_blur = (r["MSE"] for r in lesson["rows"])
st.markdown(
    "Every row of the reference reads `0 0 1 1 0 0 1 1`. One copy is shifted right by one pixel "
    "(wrapping around), the other blurred with the kernel ¼[1 2 1] (wrapping around)."
)
st.plotly_chart(pixel_grid({"reference": lesson["reference"], **lesson["copies"]}), key="svb_stripes_fig")
st.dataframe(pd.DataFrame(lesson["rows"]), hide_index=True, key="svb_stripes_table",
             column_config={"MSE": st.column_config.NumberColumn(format="%.4f"),
                            "PSNR (dB)": st.column_config.NumberColumn(format="%.2f")})
st.markdown(
    f"Pixel MSE calls the blurred copy **{mse_shift / mse_blur:g}×** closer "
    f"({mse_shift:g} / {mse_blur:g}), the opposite of what we see. "
    "(LPIPS needs more pixels than 8×8, so the question moves to a real image below.)"
)

st.subheader("The same question on a real image")
ref, ref_name = ui.reference()
cfg = ui.app_config()
st.caption(f"Reference: {ui.md_escape(ref_name)} · {ref.shape[0]}×{ref.shape[1]} px · "
           f"LPIPS: v{cfg.version}, {'lin' if cfg.lin else 'baseline'} (sidebar) · shift boundary: {SHIFT_BOUNDARY}")
c1, c2 = st.columns(2)
s = float(c1.slider("Shift (px, to the right)", 0, 8, 2, 1, key="svb_shift"))
sigma = float(c2.slider("Blur σ (px)", 0.0, 3.0, 1.5, 0.25, key="svb_blur"))

shifted, blurred = distorted(ref, "shift", s), distorted(ref, "blur", sigma)
i1, i2, i3 = st.columns(3)
i1.image(ref, caption="reference", clamp=True, width="stretch")
i2.image(shifted, caption=f"shifted {s:g} px", clamp=True, width="stretch")
i3.image(blurred, caption=f"blurred σ = {sigma:g}", clamp=True, width="stretch")

models = {net: ui.get_model(net) for net in LESSON_NETS}
models = {net: m for net, m in models.items() if m is not None}
chosen = ui.successor_picker("svb_successors")
succ_models = {sid: m for sid, m in ui.successor_models(chosen).items() if m is not None}

rows = {name: [classic(ref, "shift", s)[name], classic(ref, "blur", sigma)[name]]
        for name in ("MSE", "PSNR (dB)", "SSIM")}
with st.spinner("Running the sweeps through the networks (once per reference)…"):
    curves_shift = {net: lpips_curve(ref, "shift", SHIFTS, net, cfg.version, cfg.lin, m) for net, m in models.items()}
    curves_blur = {net: lpips_curve(ref, "blur", SIGMAS, net, cfg.version, cfg.lin, m) for net, m in models.items()}
    for net, m in models.items():
        rows[f"LPIPS · {ui.NET_LABELS[net]}"] = [lpips_at(ref, "shift", s, SHIFTS, net, m),
                                                 lpips_at(ref, "blur", sigma, SIGMAS, net, m)]
succ_shift: dict[str, list[float]] = {}
succ_blur: dict[str, list[float]] = {}
if succ_models:
    with st.spinner("Running the successor metrics' sweeps (once per reference)…"):
        for sid, m in succ_models.items():
            metric, net = ui.SUCCESSORS[sid]
            name = ui.successor_label(sid)
            succ_shift[name] = successor_curve(ref, "shift", SHIFTS, metric, net, m)
            succ_blur[name] = successor_curve(ref, "blur", SIGMAS, metric, net, m)
            rows[name] = [successor_at(ref, "shift", s, SHIFTS, metric, net, m),
                          successor_at(ref, "blur", sigma, SIGMAS, metric, net, m)]

table = pd.DataFrame({"metric": list(rows), f"shifted {s:g} px": [v[0] for v in rows.values()],
                      f"blurred σ = {sigma:g}": [v[1] for v in rows.values()]})
st.dataframe(table, hide_index=True, key="svb_current_table")

parts = [ui.verdict("MSE", *rows["MSE"]), ui.verdict("SSIM", *rows["SSIM"], higher_is_better=True)]
parts += [ui.verdict(name, *vals) for name, vals in rows.items() if name.startswith("LPIPS")]
parts += [ui.verdict(name, *rows[name]) for name in succ_shift]
st.markdown(f"**Verdict at a {s:g} px shift and σ = {sigma:g}:** " + "; ".join(parts) + ".")
if succ_shift:
    shares = [f"{name} {rows[name][0] / rows[name][1]:.0%}" for name in rows
              if (name.startswith("LPIPS") or name in succ_shift) and rows[name][1] > 0]
    if shares:
        st.markdown("**The shift as a share of the blur** (the shifted copy's distance over the blurred copy's; "
                    "the smaller, the more a metric forgives the shift): " + ", ".join(shares) + ".")
if not models:
    st.info("No LPIPS backbone is available, so only the pixel metrics are shown.")

series_shift = {name: [classic(ref, "shift", v)[name] for v in SHIFTS] for name in ("MSE", "PSNR (dB)", "SSIM")}
series_blur = {name: [classic(ref, "blur", v)[name] for v in SIGMAS] for name in ("MSE", "PSNR (dB)", "SSIM")}
for net in models:
    series_shift[f"LPIPS · {ui.NET_LABELS[net]}"] = curves_shift[net]
    series_blur[f"LPIPS · {ui.NET_LABELS[net]}"] = curves_blur[net]
for name in succ_shift:
    series_shift[name] = succ_shift[name]
    series_blur[name] = succ_blur[name]
extra_rows = tuple(r for r in EXTRA_ROWS if any(name.startswith(r) for name in succ_shift))
st.plotly_chart(
    sweep_curves({"shift (px)": (SHIFTS, series_shift), "blur σ (px)": (SIGMAS, series_blur)},
                 markers={"shift (px)": s, "blur σ (px)": sigma},
                 rows=METRIC_ROWS + extra_rows if extra_rows else None),
    key="svb_curves",
)
st.caption("PSNR of an unchanged image is infinite, so its curves start at the first distorted point. "
           "Each LPIPS curve is one batch through the network; the reference's features are computed once.")
if succ_shift:
    st.caption("ST-LPIPS is LPIPS on an anti-aliased network retrained on the same judgments; DISTS compares "
               "VGG16 feature statistics (texture) and correlations (structure). Each curve is one batch; an "
               "unchanged image scores 0 without a forward pass.")
