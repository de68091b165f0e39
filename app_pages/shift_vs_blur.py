"""Shift vs blur: pixel metrics punish a shift and forgive a blur; deep features disagree.

The answer comes first (the current copies' numbers, one shared-axis chart of each metric's
shift-to-blur ratio, the verdict); the sweeps behind the curves and the per-layer "why" follow,
from :func:`lpips_explorer.shift_blur.sweep` (cached in memory and on disk, keyed by content).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lpips_core.caching import content_digest
from lpips_core.spec import CLASSIC, MetricSpec
from lpips_explorer.figures.lessons import EXTRA_ROWS, METRIC_ROWS, layer_ratio_curves, shift_blur_ratios, sweep_curves
from lpips_explorer.figures.maps import abs_difference
from lpips_explorer.lab import classic_label
from lpips_explorer.shift_blur import DEFAULT_SHIFT, DEFAULT_SIGMA, MAP_SHIFTS, SHIFT_BOUNDARY, SHIFTS, SIGMAS
from ui import links
from ui.links import Field
from ui.models import get_models, sidebar_spec
from ui.pair import reference
from ui.shift_blur import (classic, copy_of, curve, distance, remember, remembered, stripes_figure, stripes_lesson,
                           why_maps_figure)
from ui.text import NET_LABELS, md_escape, size_text, verdict
from ui.widgets import extras_picker

#: The widgets a link reproduces (:func:`ui.links.declare`).
LINKED = (Field("svb_present", "bool"), Field("svb_shift", "int", 0, 8), Field("svb_blur", "float", 0.0, 3.0))

#: The backbones the lesson shows beside the sidebar's (with the sidebar's version and head).
LESSON_NETS = ("alex", "vgg")


class Section:
    """A titled part of the page below the answer: in the presentation view a collapsed expander
    whose content is built only while it is open (``open``; opening it reruns the page), otherwise
    a subheader and a container, always built.

    A folded chart would still be sent and drawn by the browser on every slider step (measured:
    the hidden curves figure alone cost ~0.3 s of the browser's main thread per step), and a
    folded table makes a new session load the data grid's scripts (1.2 MB), so what a closed
    section holds is neither built nor sent.
    """

    def __init__(self, title: str, present: bool, key: str):
        if present:
            self.box = st.expander(title, key=key, on_change="rerun")
            self.open = bool(self.box.open)
        else:
            st.subheader(title)
            self.box, self.open = st.container(), True


# --------------------------------------------------------------------------- the answer, on one screen
def _reference_caption(ref: np.ndarray, ref_name: str, cfg: MetricSpec) -> str:
    """The caption naming the reference, the sidebar's LPIPS and the shift boundary."""
    H, W = ref.shape[:2]
    return (f"Reference: {md_escape(ref_name)} · {size_text(W, H, labelled=True)} · "
            f"LPIPS: v{cfg.version}, {'lin' if cfg.lin else 'baseline'}, sidebar backbone "
            f"{NET_LABELS[cfg.net]} · shift boundary: {SHIFT_BOUNDARY}")


def _copies(ref: np.ndarray, ref_id: str, s: float, sigma: float) -> None:
    """The five images: the reference, its shifted and blurred copies and their differences to it."""
    shifted, blurred = copy_of(ref_id, ref, "shift", s), copy_of(ref_id, ref, "blur", sigma)
    (d_shift, g_shift), (d_blur, g_blur) = abs_difference(shifted, ref), abs_difference(blurred, ref)
    for col, img, cap in zip(st.columns(5), (ref, shifted, blurred, d_shift, d_blur),
                             ("reference", f"shifted {s:g} px", f"blurred σ = {sigma:g}",
                              f"|shifted − ref| ×{g_shift:.1f}", f"|blurred − ref| ×{g_blur:.1f}")):
        col.image(img, caption=cap, clamp=True, width="stretch")


def _settings(cfg: MetricSpec, present: bool, ref_caption: str) -> tuple[dict, object]:
    """The lesson's models and the successor picker (after the reference caption in the presentation
    view); returns the available models by spec and where the answer goes."""
    # the sidebar's metric on its backbone first, then on the lesson's backbones
    lesson = list(dict.fromkeys([cfg, *(cfg.replace(net=n) for n in LESSON_NETS)]))
    models = {spec: m for spec, m in get_models(lesson).items() if m is not None}
    # where the chart and the verdict go: in the presentation view a slot above the settings, filled
    # below once every number is known; else in turn, after the successor picker
    answer = st.container() if present else st
    if present:
        st.caption(ref_caption)
    extras = extras_picker("svb_successors")
    models.update((spec, m) for spec, m in get_models(extras).items() if m is not None)
    return models, answer


def _distances(ref: np.ndarray, ref_id: str, s: float, sigma: float, models: dict) -> dict[str, list[float]]:
    """Each metric's ``[shifted copy's, blurred copy's]`` distance (similarity for SSIM), by label."""
    rows = {name: [classic(ref_id, ref, "shift", s)[name], classic(ref_id, ref, "blur", sigma)[name]]
            for name in map(classic_label, CLASSIC)}
    for spec, m in models.items():
        rows[spec.label] = [distance(ref, ref_id, k, v, spec, m) for k, v in (("shift", s), ("blur", sigma))]
    return rows


def _answer(answer, rows: dict[str, list[float]], models: dict, cfg: MetricSpec, s: float, sigma: float) -> None:
    """The answer: each metric's shift-to-blur ratio as bars beside the verdict."""
    learned = [spec.label for spec in models]
    highlight = cfg.label if cfg in models else None
    ratios = {"MSE": rows["MSE"][0] / rows["MSE"][1] if rows["MSE"][1] > 0 else float("nan"),
              "1 − SSIM": (1 - rows["SSIM"][0]) / (1 - rows["SSIM"][1]) if rows["SSIM"][1] < 1 else float("nan")}
    ratios.update({name: rows[name][0] / rows[name][1] if rows[name][1] > 0 else float("nan") for name in learned})

    left, right = answer.columns([3, 2])
    if any(np.isfinite(v) and v > 0 for v in ratios.values()):
        # HTML bars, not a Plotly chart: a new visitor's browser draws them at once, where Plotly's bundle
        # (4.7 MB, seconds of evaluation on a 2-core CPU) kept the page busy long after the verdict.
        left.container(key="svb_ratio").html(shift_blur_ratios(ratios, highlight=highlight).html)
    else:
        left.info("Move both sliders off 0 to compare the two copies.")
    parts = [verdict("MSE", *rows["MSE"]), verdict("SSIM", *rows["SSIM"], higher_is_better=True)]
    for spec in models:
        text = verdict(spec.label, *rows[spec.label])
        parts.append(f"**{text} (the sidebar's backbone)**" if spec == cfg else text)
    right.markdown(f"**Verdict at a {s:g} px shift and σ = {sigma:g}:** " + "; ".join(parts) + ".")
    if cfg not in models:
        right.caption(f"The sidebar's backbone ({NET_LABELS[cfg.net]}) is unavailable here; the others are shown.")
    if not models:
        answer.info("No LPIPS backbone is available, so only the pixel metrics are shown.")


def _numbers(rows: dict[str, list[float]], models: dict, present: bool, s: float, sigma: float) -> None:
    """The numbers section: the current copies' distances as a table, and the shift as a share of the blur."""
    learned = [spec.label for spec in models]
    table = pd.DataFrame({"metric": list(rows), f"shifted {s:g} px": [v[0] for v in rows.values()],
                          f"blurred σ = {sigma:g}": [v[1] for v in rows.values()]})
    numbers = Section("The numbers", present, "svb_open_numbers")
    if numbers.open:
        with numbers.box:
            st.dataframe(table, hide_index=True, key="svb_current_table")
            st.caption("Bars: each metric's distance of the shifted copy over the blurred copy's, on one log axis "
                       "(SSIM as 1 − SSIM); below 1 the metric forgives the shift. Red: the sidebar's backbone.")
            shares = [f"{name} {rows[name][0] / rows[name][1]:.0%}" for name in learned if rows[name][1] > 0]
            if shares:
                st.markdown("**The shift as a share of the blur** (the shifted copy's distance over the blurred "
                            "copy's; the smaller, the more a metric forgives the shift): " + ", ".join(shares) + ".")


# --------------------------------------------------------------------------- why, and the details
def _why_section(why_spec: MetricSpec | None, present: bool) -> tuple[Section, object]:
    """The why section's heading and explanation; returns the section and the slot its figures fill."""
    why = Section("Why deep features forgive a shift", present, "svb_open_why")
    why.box.markdown(
        "Each layer of the network pools and strides: AlexNet's first layer already samples every 4th pixel, "
        "and every later layer sees a wider neighbourhood (its receptive field grows with depth). A feature "
        "that summarises a 100-pixel patch hardly changes when the patch moves by one pixel, while a "
        "blur removes the fine detail every layer was tuned to. LPIPS adds up one term per layer; below, "
        f"each layer's term (for {why_spec.label if why_spec is not None else 'the first available backbone'}) "
        "as the shift grows, first as maps on one colour scale, then as a multiple of the same layer's term for "
        "the blur."
    )
    return why, why.box.empty()


def _stripes(box) -> None:
    """The 8×8 stripes lesson: the two copies, their pixel numbers and why MSE gets them backwards."""
    with box:
        lesson = stripes_lesson()
        mse_shift, mse_blur = (r["MSE"] for r in lesson["rows"])
        st.markdown("Every row of the reference reads `0 0 1 1 0 0 1 1`. One copy is shifted right by one pixel "
                    "(wrapping around), the other blurred with the kernel ¼[1 2 1] (wrapping around).")
        st.plotly_chart(stripes_figure(), key="svb_stripes_fig")
        st.dataframe(pd.DataFrame(lesson["rows"]), hide_index=True, key="svb_stripes_table",
                     column_config={"MSE": st.column_config.NumberColumn(format="%.4f"),
                                    "PSNR (dB)": st.column_config.NumberColumn(format="%.2f")})
        st.markdown(f"Pixel MSE calls the blurred copy **{mse_shift / mse_blur:g}×** closer "
                    f"({mse_shift:g} / {mse_blur:g}), the opposite of what we see. "
                    "(LPIPS needs more pixels than 8×8, so the question moves to the real image above.)")


def _why_figures(why_slot, ref: np.ndarray, ref_id: str, sigma: float, why_spec: MetricSpec, models: dict) -> None:
    """The why section's figures: each layer's maps for the shifts (and the blur), then each layer's
    term for a shift as a multiple of its term for the blur."""
    with why_slot.container():
        m = models[why_spec]
        key = why_spec.name
        with st.spinner("Each layer's maps for the shifts…"):
            sh = curve(ref_id, ref, "shift", SHIFTS, key, m, maps_at=MAP_SHIFTS)
            bl = curve(ref_id, ref, "blur", (sigma,), key, m, maps_at=(sigma,) if sigma else ())
        names = sh["layer_names"]
        rows_maps = {f"shift {v:g} px": sh["maps"][k] for k, v in enumerate(MAP_SHIFTS)}
        if bl["maps"] is not None:
            rows_maps[f"blur σ = {sigma:g}"] = bl["maps"][0]
        st.plotly_chart(why_maps_figure(ref_id, key, sigma, rows_maps, tuple(names)), key="svb_why_maps")
        blur_terms = bl["per_layer"][0]
        if sigma > 0 and np.all(blur_terms > 0):
            idx = [SHIFTS.index(v) for v in SHIFTS if v > 0]
            per = np.asarray(sh["per_layer"])[idx]
            st.plotly_chart(layer_ratio_curves([SHIFTS[i] for i in idx], per, blur_terms, names,
                                               blur_label=f"blur σ = {sigma:g}"), key="svb_why_ratio")
            one = per[0] / blur_terms
            st.caption(f"At a 1 px shift: {names[int(np.argmax(one))]} finds the shift {one.max():.2g}× the blur, "
                       f"{names[int(np.argmin(one))]} only {one.min():.2g}× (term ratios, {why_spec.label}).")


def _sweeps(curves_section: Section, ref: np.ndarray, ref_id: str, models: dict,
            why_spec: MetricSpec | None) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each learned metric's distance over the shift and the blur sweeps, by label (a spinner while they run)."""
    # The sweeps run whether or not their chart is shown: a slider step then reads each copy's distance
    # from them (``remember``) instead of passing it through every network. Once remembered, a closed
    # section does not fetch them again.
    series_shift: dict[str, list[float]] = {}
    series_blur: dict[str, list[float]] = {}
    with (curves_section.box if curves_section.open else st.container()):
        with st.spinner("Running the sweeps through the networks (once per reference; cached on disk)…"):
            for spec, m in models.items():
                if not curves_section.open and remembered(ref_id, spec.name):
                    continue
                # the why figure's sweep (with maps) is the same call: one sweep
                maps_at = MAP_SHIFTS if spec == why_spec else ()
                series_shift[spec.label] = curve(ref_id, ref, "shift", SHIFTS, spec.name, m, maps_at=maps_at)["total"]
                series_blur[spec.label] = curve(ref_id, ref, "blur", SIGMAS, spec.name, m)["total"]
                remember(ref_id, "shift", SHIFTS, series_shift[spec.label], spec.name)
                remember(ref_id, "blur", SIGMAS, series_blur[spec.label], spec.name)
    return series_shift, series_blur


def _curves(box, ref: np.ndarray, ref_id: str, s: float, sigma: float, models: dict,
            series_shift: dict[str, list[float]], series_blur: dict[str, list[float]]) -> None:
    """The curves section: every metric against the shift and the blur, on shared y-axes."""
    with box:
        classic_shift = {name: [classic(ref_id, ref, "shift", v)[name] for v in SHIFTS]
                         for name in map(classic_label, CLASSIC)}
        classic_blur = {name: [classic(ref_id, ref, "blur", v)[name] for v in SIGMAS]
                        for name in map(classic_label, CLASSIC)}
        extra_rows = tuple(r for r in EXTRA_ROWS if any(spec.metric_label == r for spec in models))
        st.plotly_chart(
            sweep_curves({"shift (px)": (SHIFTS, {**classic_shift, **series_shift}),
                          "blur σ (px)": (SIGMAS, {**classic_blur, **series_blur})},
                         markers={"shift (px)": s, "blur σ (px)": sigma},
                         rows=METRIC_ROWS + extra_rows if extra_rows else None, shared_y=True),
            key="svb_curves",
        )
        st.caption("Each row's shift and blur panels share one y-axis, so the two can be compared by eye. "
                   "PSNR of an unchanged image is infinite, so its curves start at the first distorted point. "
                   "Each curve is one batch through the network; the reference's features are computed once.")
        if extra_rows:
            st.caption("ST-LPIPS is LPIPS on an anti-aliased network retrained on the same judgments; DISTS "
                       "compares VGG16 feature statistics (texture) and correlations (structure).")


def main() -> None:
    """The page, top to bottom: the answer on one screen, then the numbers, why, the stripes and the curves."""
    # Presentation view: what the lesson needs (the sliders, the five images, the chart and the verdict)
    # fits a 1024×768 window with the sidebar open; the settings (reference caption, successor metrics)
    # come after the answer. Measured in Chromium at 1024×768: the verdict had ended at 1,016 px.
    # The linked widgets are drawn here, after links.declare in the source too (tests/test_links.py).
    links.declare(*LINKED)
    head, switch = st.columns([3, 2], vertical_alignment="bottom")
    head.title("Shift vs blur")
    present = switch.toggle("Presentation view", value=True, key="svb_present",
                            help="The answer on one 1024×768 screen; the settings and details come below it.")
    st.markdown("We barely see a one-pixel shift but plainly see a blur; pixel metrics see it the other way "
                "round, and LPIPS comes much closer to us.")
    ref, ref_name = reference()
    ref_id = content_digest(ref)
    cfg = sidebar_spec()
    ref_caption = _reference_caption(ref, ref_name, cfg)
    if not present:
        st.caption(ref_caption)
    c1, c2 = st.columns(2)
    s = float(c1.slider("Shift (px, to the right)", 0, 8, int(DEFAULT_SHIFT), 1, key="svb_shift"))
    sigma = float(c2.slider("Blur σ (px)", 0.0, 3.0, DEFAULT_SIGMA, 0.25, key="svb_blur"))
    _copies(ref, ref_id, s, sigma)
    models, answer = _settings(cfg, present, ref_caption)
    rows = _distances(ref, ref_id, s, sigma, models)
    _answer(answer, rows, models, cfg, s, sigma)
    _numbers(rows, models, present, s, sigma)

    # the layers explained: the first metric with spatial maps (the sidebar's when it is available)
    why_spec = next((spec for spec in models if spec.has_maps), None)
    why, why_slot = _why_section(why_spec, present)
    stripes = Section("The 8×8 stripes: why pixel metrics get it backwards", present, "svb_open_stripes")
    curves_section = Section("The curves: every metric against the shift and the blur (shared y-axes)", present,
                             "svb_open_curves")
    if stripes.open:
        _stripes(stripes.box)
    if why_spec is not None and why.open:
        _why_figures(why_slot, ref, ref_id, sigma, why_spec, models)
    series_shift, series_blur = _sweeps(curves_section, ref, ref_id, models, why_spec)
    if curves_section.open:
        _curves(curves_section.box, ref, ref_id, s, sigma, models, series_shift, series_blur)


main()
