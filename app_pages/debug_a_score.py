"""Debug a score: upload a pair and see everything that can move its LPIPS value."""

from __future__ import annotations

import math
import time

import pandas as pd
import streamlit as st

from lpips_core.backbones import between_layers
from lpips_core.conventions import RESIZE_METHODS
from lpips_core.images import image_to_png_bytes, min_side_for
from lpips_core.spec import MetricSpec
from lpips_explorer.diagnostics import (CHECKS, NATIVE_MAX_SIDE, SIZE_POLICY, Diagnosis, build_report, demo_pair,
                                        library_versions, report_json)
from lpips_explorer.figures.maps import map_overlay, per_layer_bars
from ui import links
from ui.choices import UPLOAD_TYPES
from ui.debug import load, pair_images, run
from ui.links import Field
from ui.models import get_model, sidebar_spec
from ui.pair import reference, working_side
from ui.text import NET_LABELS, fmt, md_escape, md_frame, signed, significant, size_hw

#: The widgets a link reproduces (:func:`ui.links.declare`).
LINKED = (Field("dbg_opacity", "float", 0.0, 1.0),)

ICONS = {"ok": ":material/check_circle:", "warning": ":material/warning:", "info": ":material/info:"}


def score_row(diag: Diagnosis, net_label: str) -> None:
    """The pair's LPIPS, MSE, PSNR and SSIM in one row of metrics, and where the pair was scored."""
    size = diag.native_size
    scored, ref_hw, test_hw = size["scored_hw"], size["reference_hw"], size["test_hw"]
    m = st.columns(4)
    m[0].metric(f"LPIPS ({net_label})", f"{diag.score:.4f}")
    m[1].metric("MSE", significant(diag.classic["mse"]), help="Mean squared error on the [0, 1] pixel scale.")
    m[2].metric("PSNR (dB)", fmt(diag.classic["psnr"], 2))
    m[3].metric("SSIM", "n/a" if not math.isfinite(diag.classic["ssim"]) else f"{diag.classic['ssim']:.4f}")
    c = diag.config  # the model that gave these numbers, which a reader of the score needs
    st.caption(f"Scored with {NET_LABELS.get(c['net'], c['net'])}, v{c['version']}, "
               f"{'lin' if c['lin'] else 'baseline (uncalibrated)'}, at {size_hw(scored, labelled=True)}; the "
               f"reference file is {size_hw(ref_hw)}, the test file {size_hw(test_hw)}. Offsets are in the "
               "reference file's pixels.")


#: The summary's columns: what each check would change, in numbers (the findings are in the cards below).
SUMMARY_COLUMNS = ("status", "what if", "LPIPS as is", "LPIPS what if", "change")


def summary_frame(diag: Diagnosis) -> pd.DataFrame:
    """The ranked findings, one row per check run so far, indexed by the check's name: the
    counterfactual that moves the score most, the score it is compared with, the score it gives and
    the change (``NaN`` where a check computed none)."""
    return pd.DataFrame(
        [{"check": f.name, "status": f.status, "what if": f.counterfactual or "—", "LPIPS as is": f.as_is,
          "LPIPS what if": f.score, "change": f.change} for f in diag.ranking],
        columns=("check", *SUMMARY_COLUMNS)).astype({c: float for c in SUMMARY_COLUMNS[2:]}).set_index("check")


def summary_table(frame: pd.DataFrame) -> None:
    """The summary as a table that wraps its text (it fits the page at any width, so every number
    shows): scores to 4 decimals, the change signed (``0``, never ``-0.0000``), ``—`` for none."""
    styled = frame.style.format({"LPIPS as is": "{:.4f}", "LPIPS what if": "{:.4f}"}, na_rep="—").format(
        lambda v: signed(v, 4), subset=["change"], na_rep="—")
    st.table(styled)


CHECK_NAMES = {spec.id: spec.name for spec in CHECKS}


def show_partial(box, diag: Diagnosis, net_label: str) -> None:
    """The score at once, then the ranking as each check's counterfactuals come in (replaced when done)."""
    with box.container():
        st.subheader("What moves this score, largest first")
        score_row(diag, net_label)
        done = len(CHECKS) - len(diag.pending)
        st.info(f"Checks {done} of {len(CHECKS)} done; now: {CHECK_NAMES[diag.pending[0]]}. Each check scores "
                "the pair again under a counterfactual (another size, range, background, alignment…), so the "
                "ranking fills in over the next seconds.", icon=":material/hourglass_top:")
        if diag.ranking:
            summary_table(summary_frame(diag))


def _intro() -> None:
    """The page's title and what it does."""
    st.title("Debug a score")
    st.markdown(
        "An LPIPS value depends on more than the two pictures: their sizes, how they were decoded, their "
        "alignment and compression. Upload a reference and a test image: they are scored as uploaded, at their "
        "own resolution, and every check runs on the files themselves. The summary ranks what each check found "
        "by how much it changes the score."
    )


def _pair(net: str, max_side: int) -> tuple[bytes, str, bytes, str]:
    """The two uploaders, and the pair they give as ``(ref_data, ref_name, test_data, test_name)``: the
    sidebar's reference where none is uploaded, a demo test (with its two sliders) where none is."""
    u1, u2 = st.columns(2)
    ref_file = u1.file_uploader("Reference image", type=UPLOAD_TYPES, key="dbg_ref_file")
    test_file = u2.file_uploader("Test image", type=UPLOAD_TYPES, key="dbg_test_file")

    min_side = min_side_for(net)
    side_ref, side_name = reference()
    if ref_file is not None:
        ref_data, ref_name = ref_file.getvalue(), ref_file.name
    else:
        ref_data, ref_name = image_to_png_bytes(side_ref), f"sidebar reference ({side_name})"
    if test_file is not None:
        test_data, test_name = test_file.getvalue(), test_file.name
    else:
        st.info("No test image uploaded: the test is a demo made from the reference (shifted, then saved as "
                "JPEG), so every check has something to find. Upload your own to debug it.", icon=":material/science:")
        d1, d2 = st.columns(2)
        shift_px = d1.slider("Demo: shift (px)", 0.0, 6.0, 3.0, 0.5, key="dbg_demo_shift")
        quality = d2.slider("Demo: JPEG quality", 5, 95, 30, 5, key="dbg_demo_quality")
        base = load(ref_data, ref_name, max_side, min_side)
        if isinstance(base, str):
            st.error("Reference: " + md_escape(base))
            st.stop()
        test_data = demo_pair(base.array, dx=shift_px, dy=shift_px * 2 / 3, quality=quality)[1]
        test_name = f"demo (reference shifted {shift_px:g} px right, {shift_px * 2 / 3:.2g} px down, JPEG q{quality})"
    return ref_data, ref_name, test_data, test_name


def _scoring_options(max_side: int) -> tuple[str, str]:
    """Where the pair is scored (its own size or the working size) and how a differing test is resized,
    with the caption on sizes; returns ``(resolution, method)``."""
    o1, o2 = st.columns(2)
    resolution = o1.radio(
        "Score at", ("native", "working"), key="dbg_resolution", horizontal=True,
        format_func=lambda r: "the files' own size" if r == "native" else f"the working size ({max_side} px)")
    method = o2.selectbox("When the sizes differ, resize the test image with", RESIZE_METHODS, key="dbg_method")
    st.caption(f"When the two files differ in size, {SIZE_POLICY}. At the files' own size the longer side is capped "
               f"at {NATIVE_MAX_SIDE} px (larger files are downscaled, with a notice) so VGG16 answers within seconds "
               f"on a CPU; the working size is the sidebar's ({max_side} px).")
    return resolution, method


def _diagnosis(pair: tuple[bytes, str, bytes, str], resolution: str, max_side: int, method: str, cfg: MetricSpec,
               model, net_label: str) -> Diagnosis:
    """The pair scored and checked, the ranking shown as it fills in (then cleared); stops the page on an error."""
    ref_data, ref_name, test_data, test_name = pair
    box = st.empty()
    tick, last_tick = st.empty(), [0.0]

    def stop_if_replaced() -> None:
        """Between network layers, at most every 0.2 s: an empty update of an empty placeholder, which
        is where Streamlit ends a run the user has replaced. Replacing an uploaded file reruns the
        page twice (the old file removed, then the new one); without this the first run went on
        scoring a pair nobody asked for (up to seconds of VGG16 at 512 px) on the cores the second
        needed."""
        now = time.monotonic()
        if now - last_tick[0] >= 0.2:
            last_tick[0] = now
            tick.empty()

    with st.spinner("Scoring the pair…"), between_layers(stop_if_replaced):
        diag = run(ref_data, ref_name, test_data, test_name, resolution, max_side, method, cfg.name, model,
                   lambda partial: show_partial(box, partial, net_label))
    box.empty()
    if isinstance(diag, str):
        st.error(md_escape(diag))
        st.stop()
    return diag


def _summary(diag: Diagnosis, net_label: str, ref_name: str, test_name: str) -> None:
    """The score, the ranked summary, the pair as compared and the files' notices."""
    st.subheader("What moves this score, largest first")
    score_row(diag, net_label)
    if diag.native_size["downscaled"]:
        st.info(f"A file is larger than {diag.native_size['max_side']} px on its longer side: both were downscaled "
                "to score them (the checks still read the files at full size).",
                icon=":material/photo_size_select_large:")
    summary_table(summary_frame(diag))
    st.caption("Change: the score the check's counterfactual gives (what if) minus the score it is compared with (as "
               "is: the pair's score, or for the misalignment check the score of the central crop both are cut to). "
               "Each check's finding and numbers are below, in the same order.")
    i1, i2 = st.columns(2)
    shown_ref, shown_test = pair_images(diag)
    i1.image(shown_ref, caption="reference", width="stretch")
    i1.caption(md_escape(ref_name))
    i2.image(shown_test, caption="test, as compared", width="stretch")
    i2.caption(md_escape(test_name))
    for which, facts in diag.facts.items():
        for notice in facts["notices"]:
            st.caption(f"{which.capitalize()}: {md_escape(notice)}")


def _checks(diag: Diagnosis) -> None:
    """One card per check, in the summary's order, then the files' facts."""
    st.subheader("Checks, in the same order")
    for check in sorted(diag.checks, key=lambda c: [f.check_id for f in diag.ranking].index(c.id)):
        with st.container(border=True):
            st.markdown(f"{ICONS[check.status]} **{check.name}** — {check.status}")
            st.markdown(md_escape(check.finding))
            st.markdown("*Effect on the score:* " + md_escape(check.effect))
            if check.id == "size":
                st.table(pd.DataFrame([{"choice": o.label, "compared at": size_hw(o.size), "LPIPS": o.lpips,
                                        "note": o.note} for o in diag.resize_options]).set_index("choice")
                         .style.format({"LPIPS": "{:.4f}"}))

    with st.expander("File facts"):
        facts = pd.DataFrame({k: {f: str(v) for f, v in d.items() if f != "notices"} for k, d in diag.facts.items()})
        st.table(md_frame(facts))  # st.table reads Markdown: the files' names are escaped


def _report_download(diag: Diagnosis, max_side: int, resolution: str, ref_name: str, test_name: str) -> None:
    """The download button of the report (JSON)."""
    report = build_report(diag, versions=library_versions({"streamlit": st.__version__}),
                          extra_config={"working max side (px)": max_side, "scored at": resolution,
                                        "reference file": ref_name,
                                        "test file": test_name})
    # Encoded when clicked (a callable): no file is kept in the server's media store between reruns.
    st.download_button("Download the report (JSON)", lambda: report_json(report),
                       file_name="lpips_debug_report.json", mime="application/json", key="dbg_json",
                       on_click="ignore")


def main() -> None:
    """The page, top to bottom."""
    links.declare(*LINKED)
    _intro()
    cfg = sidebar_spec()
    max_side = working_side()
    pair = _pair(cfg.net, max_side)
    _, ref_name, _, test_name = pair
    resolution, method = _scoring_options(max_side)
    model = get_model(cfg)
    if model is None:
        st.stop()
    net_label = NET_LABELS[cfg.net]
    diag = _diagnosis(pair, resolution, max_side, method, cfg, model, net_label)
    _summary(diag, net_label, ref_name, test_name)
    _checks(diag)

    # Drawn here rather than in a section function: the map's opacity is a linked widget (LINKED), and the
    # page declares it (links.declare, above) before it is drawn, in the file's order too (tests/test_links.py).
    st.subheader("Where the distance comes from")
    c1, c2 = st.columns([3, 2])
    with c1:
        opacity = st.slider("Map opacity", 0.0, 1.0, 0.6, 0.05, key="dbg_opacity")
        st.plotly_chart(map_overlay(diag.test, diag.spatial_map, opacity=opacity,
                                    title=f"Spatial map (mean {diag.spatial_map.mean():.4f} = LPIPS)"), key="dbg_map")
    with c2:
        st.plotly_chart(per_layer_bars({net_label: (diag.layer_names, diag.per_layer)},
                                       title="Per-layer terms"), key="dbg_layers")

    _report_download(diag, max_side, resolution, ref_name, test_name)


main()
