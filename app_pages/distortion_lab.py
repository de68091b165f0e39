"""Distortion lab: build a chain of distortions and see what every metric, layer and position says."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st
from streamlit import session_state as ss

from lpips_core.cells import frame_to_csv
from lpips_core.spec import MetricSpec
from lpips_explorer import lab as L
from lpips_explorer.distortions import DISTORTIONS, PARAMS
from lpips_explorer.figures.maps import abs_difference, dists_stage_bars, map_overlay, map_png, per_layer_bars
from ui import links
from ui.fragments import page_fragment
from ui.lab import classic_metrics, pair_key, scored
from ui.links import Field
from ui.models import get_model, sidebar_spec
from ui.pair import apply_chain, reference
from ui.state import LAB_ADD_NAME, LAB_CHAIN, LAB_NEXT_ID, LAB_STEPS
from ui.text import NET_LABELS, chain_key, chain_label, md_escape, significant, size_hw
from ui.widgets import extras_picker

#: The widgets a link reproduces (:func:`ui.links.declare`); the link also carries the chain.
LINKED = (Field("lab_opacity", "float", 0.0, 1.0),)


# --------------------------------------------------------------------------- chain state
def _defaults(name: str) -> dict:
    return {p: spec.default for p, spec in PARAMS[name].items()}


def _init() -> None:
    if LAB_STEPS not in ss:
        ss[LAB_STEPS] = [{"id": 0, "name": "gaussian_blur", "params": _defaults("gaussian_blur")}]
        ss[LAB_NEXT_ID] = 1


def _add() -> None:
    name = ss.get(LAB_ADD_NAME, "gaussian_blur")
    ss[LAB_STEPS] = ss[LAB_STEPS] + [{"id": ss[LAB_NEXT_ID], "name": name, "params": _defaults(name)}]
    ss[LAB_NEXT_ID] += 1


def _remove(step_id: int) -> None:
    ss[LAB_STEPS] = [s for s in ss[LAB_STEPS] if s["id"] != step_id]


def _move_up(step_id: int) -> None:
    steps = list(ss[LAB_STEPS])
    i = next(k for k, s in enumerate(steps) if s["id"] == step_id)
    if i > 0:
        steps[i - 1], steps[i] = steps[i], steps[i - 1]
    ss[LAB_STEPS] = steps


def _reset() -> None:
    for key in [k for k in ss if isinstance(k, str) and k.startswith("lab_") and k[4:5].isdigit()]:
        del ss[key]
    del ss[LAB_STEPS]
    _init()


def _param_widget(step_id: int, pname: str, spec, value):
    """One widget built from the distortion's ParamSpec; returns the value to use."""
    key = f"lab_{step_id}_{pname}"
    if spec.choices:
        choices = list(spec.choices)
        return st.selectbox(pname, choices, index=choices.index(value) if value in choices else 0, key=key,
                            help=spec.help)
    if isinstance(spec.default, tuple):
        text = st.text_input(pname, ", ".join(f"{v:g}" for v in value), key=key, help=spec.help)
        try:
            taps = tuple(float(t) for t in text.replace(";", ",").split(",") if t.strip())
        except ValueError:
            st.error(f"{pname}: enter numbers separated by commas (e.g. 0.25, 0.5, 0.25).")
            return value
        return taps or value
    if spec.default is None:  # optional integer: empty = the function's own default
        return st.number_input(pname, min_value=int(spec.min), max_value=int(spec.max), value=value,
                               step=int(spec.step), key=key, placeholder="auto", help=spec.help)
    if isinstance(spec.default, int):
        if pname == "seed":
            return int(st.number_input(pname, int(spec.min), int(spec.max), int(value), 1, key=key, help=spec.help))
        return int(st.slider(pname, int(spec.min), int(spec.max), int(value), int(spec.step), key=key, help=spec.help))
    return float(st.slider(pname, float(spec.min), float(spec.max), float(value), float(spec.step), key=key,
                           help=spec.help))


# --------------------------------------------------------------------------- drawing (cached work: ui.lab)
def _headline(spec: MetricSpec, answer: L.Scored | None, classic: dict[str, float]) -> None:
    """The step's answer at once: the sidebar's ``spec`` beside MSE, PSNR and SSIM, drawn before the
    images and the other backbones (which fill in below)."""
    c1, c2, c3, c4 = st.columns(4)
    name = spec.row_spec.label  # "LPIPS · AlexNet"; the version and head are in the caption and the help
    if answer is None:
        c1.metric(name, "—", help=f"{NET_LABELS[spec.net]} (the sidebar's backbone) is unavailable here; the "
                  "table below has every backbone that is.")
    else:
        c1.metric(name, f"{answer.total:.4f}",
                  help=f"The sidebar's backbone, {L.note(spec)}. Every backbone is in the table below.")
    psnr, ssim = classic["psnr"], classic["ssim"]
    c2.metric("MSE", significant(classic["mse"]), help="Mean squared error on the [0, 1] pixel scale, to two "
              "significant digits (the table below has more).")
    c3.metric("PSNR", "∞" if math.isinf(psnr) else f"{psnr:.2f} dB")
    c4.metric("SSIM", f"{ssim:.4f}" if math.isfinite(ssim) else "—",
              help=None if math.isfinite(ssim) else "The image is too small for SSIM's window.")


#: The metrics table's values: significant digits, so a small MSE never reads as zero.
VALUE_HELP = ("Four significant digits (MSE on the [0, 1] pixel scale, PSNR in dB); the CSV download has every "
              "digit.")


# --------------------------------------------------------------------------- page
def main() -> None:
    """The page: the linked widgets and chain first, the chain's first step, the title, then the lab."""
    # Above the sections it calls: links.declare comes before the linked widget (lab_opacity, in
    # _where_from) in the file's order too (tests/test_links.py).
    links.declare(*LINKED, chain=True)
    _init()
    st.title("Distortion lab")
    lab()


def _chain_editor() -> list[dict]:
    """The chain's steps, each in a bordered box with its parameters (move up, remove), then Add and
    Reset; returns the steps (``ss[LAB_STEPS]``, their parameters as the widgets now hold them)."""
    st.subheader("The chain")
    steps = ss[LAB_STEPS]
    if not steps:
        st.info("The chain is empty: the distorted image is the reference itself. Add a step below.")
    for k, step in enumerate(steps):
        with st.container(border=True):
            head, up, rm = st.columns([6, 1, 1])
            head.markdown(f"**{k + 1}. {step['name']}**")
            up.button("↑", key=f"lab_up_{step['id']}", on_click=_move_up, args=(step["id"],), disabled=k == 0,
                      help="Move this step earlier")
            rm.button("✕", key=f"lab_rm_{step['id']}", on_click=_remove, args=(step["id"],), help="Remove this step")
            cols = st.columns(max(1, len(PARAMS[step["name"]])))
            for col, (pname, spec) in zip(cols, PARAMS[step["name"]].items()):
                with col:
                    step["params"][pname] = _param_widget(step["id"], pname, spec, step["params"].get(pname, spec.default))
    a1, a2, a3 = st.columns([3, 1, 1])
    a1.selectbox("Add a distortion", list(DISTORTIONS), key=LAB_ADD_NAME, label_visibility="collapsed")
    a2.button("Add step", key="lab_add", on_click=_add)
    a3.button("Reset", key="lab_reset", on_click=_reset)
    return steps


def _metrics_table(cfg: MetricSpec, results: dict, run, classic: dict[str, float], chain: list,
                   ref_name: str) -> list[MetricSpec]:
    """The metrics for every backbone (the sidebar's version and head) and the extra metrics, scored
    by ``run`` into ``results``: the table, what is unavailable, the CSV; returns the specs shown."""
    st.subheader("Metrics")
    extras = extras_picker("lab_successors")
    backbones = [cfg.replace(net=n) for n in NET_LABELS]  # the sidebar's version and head on every backbone
    with st.spinner("Every available backbone…"):
        for spec in [*backbones, *extras]:
            if spec not in results:
                run(spec)
    shown = [*backbones, *extras]
    table = pd.DataFrame(L.metric_rows(classic, results, shown))
    # Widths in the proportions the texts need (the grid stretches them to the page): at 1024 px with the
    # sidebar open every label and note shows whole.
    st.dataframe(table, hide_index=True, key="lab_metrics",
                 column_config={"metric": st.column_config.TextColumn(width=150),
                                "value": st.column_config.NumberColumn(format="%.4g", help=VALUE_HELP, width=80),
                                "note": st.column_config.TextColumn(width=320)})
    missing = [NET_LABELS[s.net] for s in backbones if results[s] is None]
    if missing:
        st.caption(f"Unavailable here: {', '.join(missing)} — see the sidebar's backbone list for the reason and fix.")
    csv = frame_to_csv(table.assign(chain=chain_label(chain), reference=ref_name))
    st.download_button("Download the metrics (CSV)", csv, file_name="lpips_metrics.csv", mime="text/csv",
                       key="lab_csv")
    return shown


def _where_from(cfg: MetricSpec, results: dict, dist: np.ndarray) -> None:
    """Where the distance comes from: the per-layer bars (and DISTS's stages) of the metrics shown,
    then one backbone's spatial map over the distorted image, its PNG download."""
    bars, stages, sources = L.layer_bars(results), L.staged(results), L.map_sources(results, first=cfg)
    if not bars and not stages:
        st.info("No LPIPS backbone is available: the per-layer bars and maps need one.")
        st.stop()

    st.subheader("Where the distance comes from")
    if bars:
        st.plotly_chart(per_layer_bars(bars, title="Per-layer terms d_l, stacked"), key="lab_layers_fig")
        st.caption("Each bar's height is its metric's value: the sum of its layers' terms."
                   + (" ST-LPIPS has the same five layer terms as LPIPS (same recipe, anti-aliased network); its "
                      "bar's height is the ST-LPIPS value." if any(s.metric != cfg.metric for s in sources) else ""))
    for r in stages:
        st.plotly_chart(
            dists_stage_bars(r.layer_names, r.components["texture"], r.components["structure"],
                             label=r.spec.metric_label, title=f"{r.spec.label} = {r.total:.4f}: texture and structure terms "
                                   "per stage, all of them summed"),
            key=f"lab_{r.spec.metric}_{r.spec.net}_fig",
        )
        st.caption("DISTS compares whole feature maps: texture = differences of channel means, structure = loss of "
                   "correlation, per stage (stage 0 is the image itself). It has no spatial map.")
    if not sources:
        st.stop()

    m1, m2, m3 = st.columns([1, 2, 1])
    by_name = {s.name: s for s in sources}  # the sidebar's backbone first (the default), the others, ST-LPIPS
    picked = m1.selectbox("Backbone", list(by_name), format_func=lambda n: by_name[n].row_spec.label,
                          key="lab_map_net")
    res = results[by_name[picked]]
    layer = m2.radio("Map", [L.SUMMED, *res.layer_names], horizontal=True, key="lab_map_layer")
    opacity = m3.slider("Map opacity", 0.0, 1.0, 0.6, 0.05, key="lab_opacity")
    values, equals = L.map_values(res, layer)
    title = f"{res.spec.label}, {layer}: mean {values.mean():.4f} ({equals})"
    st.plotly_chart(map_overlay(dist, values, opacity=opacity, title=title), key="lab_map_fig")
    st.caption("Each layer's map is bilinearly upsampled to the image size, as the reference package does with "
               "spatial=True; the summed map's mean is the LPIPS value. Drawn over the distorted image.")
    # Encoded when clicked (a callable), not on every slider step; the click needs no rerun.
    st.download_button("Download the map (PNG)", lambda: map_png(values, image=dist, opacity=float(opacity)),
                       file_name=f"lpips_map_{res.spec.metric}_{res.spec.net}_{layer}.png", mime="image/png",
                       key="lab_png", on_click="ignore")


# The chain, the metrics, the bars and the map: a parameter change reruns this part alone.
@page_fragment("Distortion lab")
def lab() -> None:
    ref, ref_name = reference()
    cfg = sidebar_spec()
    st.caption(f"Reference: {md_escape(ref_name)} · {size_hw(ref.shape[:2], labelled=True)} · LPIPS "
               f"{L.note(cfg)} (sidebar)")
    steps = _chain_editor()
    chain = [(s["name"], {p: v for p, v in s["params"].items()}) for s in steps]
    try:
        chain_json = chain_key(chain)
        dist = apply_chain(ref, chain_json)
    except (ValueError, TypeError) as exc:
        st.error("This chain cannot be applied: " + md_escape(str(exc)))
        st.stop()
    ss[LAB_CHAIN] = chain  # the Conventions and Inside-a-layer pages use the same pair
    pair = pair_key(ref, chain_json)
    st.caption("Chain: " + md_escape(chain_label(chain)))

    # -- the answer first (one forward pass of the sidebar's backbone), then everything else
    classic = classic_metrics(pair, ref, dist)
    results: dict[MetricSpec, L.Scored | None] = {}

    def run(spec: MetricSpec) -> None:
        model = get_model(spec, quiet=True)
        results[spec] = None if model is None else scored(pair, spec.name, ref, dist, model)

    run(cfg)
    _headline(cfg, results[cfg], classic)

    diff, gain = abs_difference(ref, dist)
    i1, i2, i3 = st.columns(3)
    i1.image(ref, caption="reference", clamp=True, width="stretch")
    i2.image(dist, caption="distorted", clamp=True, width="stretch")
    i3.image(diff, caption=f"|difference| × {gain:.1f}" if gain != 1 else "|difference| (none)", clamp=True,
             width="stretch")

    shown = _metrics_table(cfg, results, run, classic, chain, ref_name)
    _where_from(cfg, {s: results[s] for s in shown}, dist)  # what the table shows, in its order


main()
