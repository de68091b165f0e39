"""Distortion lab: build a chain of distortions and see what every metric, layer and position says."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import streamlit as st

import ui
from lpips_core.cells import frame_to_csv
from lpips_core import metrics
from lpips_explorer.distortions import DISTORTIONS, PARAMS
from lpips_explorer.figures.maps import abs_difference, dists_stage_bars, map_overlay, map_png, per_layer_bars
from lpips_core.sweeps import lpips_many, metric_many
from ui.state import LAB_ADD_NAME, LAB_CHAIN, LAB_NEXT_ID, LAB_STEPS

ss = st.session_state


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


# --------------------------------------------------------------------------- cached work
# The cached functions below take the pair's key (:func:`pair_key`) and the images unhashed
# (``_ref``, ``_dist``): Streamlit hashes every hashed argument on each call, and the four calls of
# a rerun would hash both images again each time.
def pair_key(ref: np.ndarray, chain_json: str) -> str:
    """What identifies the lab's pair: a digest of the reference's pixels and the chain (its JSON)."""
    return f"{hashlib.blake2b(np.ascontiguousarray(ref).data, digest_size=16).hexdigest()}:{chain_json}"


@st.cache_data(show_spinner=False, max_entries=16)
def classic_metrics(pair: str, _ref: np.ndarray, _dist: np.ndarray) -> dict[str, float]:
    ref, dist = _ref, _dist
    try:
        s = metrics.ssim(ref, dist)
    except ValueError:
        s = float("nan")
    return {"MSE": metrics.mse(ref, dist), "PSNR (dB)": metrics.psnr(ref, dist), "SSIM": s}


@st.cache_data(show_spinner=False, max_entries=8)  # each holds five maps: 5 MB at 512 px
def lab_lpips(pair: str, net: str, version: str, lin: bool, _ref: np.ndarray, _dist: np.ndarray, _model) -> dict:
    """One forward pass of the distorted image (the reference's features are cached by the model)."""
    r = lpips_many(_model, _ref, [_dist], spatial=True)
    return {"total": float(r.total[0]), "per_layer": r.per_layer[0].numpy(), "layer_names": tuple(r.layer_names),
            "layer_maps": r.layer_maps[0].numpy()}


@st.cache_data(show_spinner=False, max_entries=8)
def lab_successor(pair: str, metric: str, net: str, _ref: np.ndarray, _dist: np.ndarray, _model) -> dict:
    """A successor metric on the pair (cached by both images' content, the metric and its net).

    ST-LPIPS: as :func:`lab_lpips` (per-layer terms and maps). DISTS: its per-stage texture and
    structure terms (no maps).
    """
    r = metric_many(_model, _ref, [_dist], metric=metric, spatial=_model.has_maps)
    out = {"total": float(r.total[0]), "per_layer": r.per_layer[0].numpy(), "layer_names": tuple(r.layer_names),
           "components": {k: v[0].numpy() for k, v in r.components.items()}}
    if r.layer_maps is not None:
        out["layer_maps"] = r.layer_maps[0].numpy()
    return out


def _headline(net: str, how: str, answer: dict | None, classic: dict[str, float]) -> None:
    """The step's answer at once: the sidebar backbone's (``net``, computed as ``how``) LPIPS beside
    MSE, PSNR and SSIM, drawn before the images and the other backbones (which fill in below)."""
    label = ui.NET_LABELS[net]
    c1, c2, c3, c4 = st.columns(4)
    if answer is None:
        c1.metric(f"LPIPS · {label}", "—", help=f"{label} (the sidebar's backbone) is unavailable here; the table "
                  "below has every backbone that is.")
    else:
        c1.metric(f"LPIPS · {label}", f"{answer['total']:.4f}",
                  help=f"The sidebar's backbone, {how}. Every backbone is in the table below.")
    psnr, ssim = classic["PSNR (dB)"], classic["SSIM"]
    c2.metric("MSE", ui.significant(classic["MSE"]), help="Mean squared error on the [0, 1] pixel scale, to two "
              "significant digits (the table below has more).")
    c3.metric("PSNR", "∞" if math.isinf(psnr) else f"{psnr:.2f} dB")
    c4.metric("SSIM", f"{ssim:.4f}" if math.isfinite(ssim) else "—",
              help=None if math.isfinite(ssim) else "The image is too small for SSIM's window.")


def _map_label(key: str) -> str:
    return ui.NET_LABELS[key] if key in ui.NET_LABELS else ui.successor_label(key)


#: The metrics table's values: significant digits, so a small MSE never reads as zero.
VALUE_HELP = ("Four significant digits (MSE on the [0, 1] pixel scale, PSNR in dB); the CSV download has every "
              "digit.")
SUCCESSOR_NOTES = {"stlpips": "shift-tolerant checkpoint, inputs in [-1,1]", "dists": "inputs in [0,1]"}


# --------------------------------------------------------------------------- page
_init()
st.title("Distortion lab")


# The chain, the metrics, the bars and the map: a parameter change reruns this part alone.
@ui.page_fragment("Distortion lab", "distortion_lab")
def lab() -> None:
    ref, ref_name = ui.reference()
    cfg = ui.app_config()
    how = f"v{cfg.version}, {'lin' if cfg.lin else 'baseline'}"  # the sidebar's LPIPS version and head
    st.caption(f"Reference: {ui.md_escape(ref_name)} · {ui.size_hw(ref.shape[:2], labelled=True)} · LPIPS {how} "
               "(sidebar)")

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

    chain = [(s["name"], {p: v for p, v in s["params"].items()}) for s in steps]
    try:
        chain_json = ui.chain_key(chain)
        dist = ui.apply_chain(ref, chain_json)
    except (ValueError, TypeError) as exc:
        st.error("This chain cannot be applied: " + ui.md_escape(str(exc)))
        st.stop()
    ss[LAB_CHAIN] = chain  # the Conventions and Inside-a-layer pages use the same pair
    pair = pair_key(ref, chain_json)
    st.caption("Chain: " + ui.md_escape(ui.chain_label(chain)))

    # -- the answer first (one forward pass of the sidebar's backbone), then everything else
    status = ui.weights_status()
    classic = classic_metrics(pair, ref, dist)
    results: dict[str, dict] = {}
    if status[cfg.net][0] and (model := ui.get_model(cfg.net, quiet=True)) is not None:
        results[cfg.net] = lab_lpips(pair, cfg.net, cfg.version, cfg.lin, ref, dist, model)
    _headline(cfg.net, how, results.get(cfg.net), classic)

    diff, gain = abs_difference(ref, dist)
    i1, i2, i3 = st.columns(3)
    i1.image(ref, caption="reference", clamp=True, width="stretch")
    i2.image(dist, caption="distorted", clamp=True, width="stretch")
    i3.image(diff, caption=f"|difference| × {gain:.1f}" if gain != 1 else "|difference| (none)", clamp=True,
             width="stretch")

    # -- metrics for every backbone
    st.subheader("Metrics")
    chosen = ui.successor_picker("lab_successors")
    rows = [{"metric": name, "value": value, "note": "" if math.isfinite(value) or name != "SSIM" else "image too small"}
            for name, value in classic.items()]
    with st.spinner("LPIPS through every available backbone…"):
        for net, label in ui.NET_LABELS.items():
            if net not in results:
                model = ui.get_model(net, quiet=True) if status[net][0] else None
                if model is None:
                    rows.append({"metric": f"LPIPS · {label}", "value": float("nan"),
                                 "note": "unavailable (no weights)"})
                    continue
                results[net] = lab_lpips(pair, net, cfg.version, cfg.lin, ref, dist, model)
            rows.append({"metric": f"LPIPS · {label}", "value": results[net]["total"], "note": how})
    succ_results: dict[str, dict] = {}  # successor id → lab_successor's dict
    if chosen:
        with st.spinner("The successor metrics…"):
            for sid, model in ui.successor_models(chosen).items():
                metric, net = ui.SUCCESSORS[sid]
                if model is None:
                    rows.append({"metric": ui.successor_label(sid), "value": float("nan"),
                                 "note": "unavailable (no weights)"})
                    continue
                succ_results[sid] = lab_successor(pair, metric, net, ref, dist, model)
                rows.append({"metric": ui.successor_label(sid), "value": succ_results[sid]["total"],
                             "note": SUCCESSOR_NOTES[metric]})
    table = pd.DataFrame(rows)
    # Widths in the proportions the texts need (the grid stretches them to the page): at 1024 px with the
    # sidebar open every label and note shows whole.
    st.dataframe(table, hide_index=True, key="lab_metrics",
                 column_config={"metric": st.column_config.TextColumn(width=150),
                                "value": st.column_config.NumberColumn(format="%.4g", help=VALUE_HELP, width=80),
                                "note": st.column_config.TextColumn(width=320)})
    missing = [ui.NET_LABELS[n] for n in ui.NET_LABELS if n not in results]
    if missing:
        st.caption(f"Unavailable here: {', '.join(missing)} — see the sidebar's backbone list for the reason and fix.")
    csv = frame_to_csv(table.assign(chain=ui.chain_label(chain), reference=ref_name))
    st.download_button("Download the metrics (CSV)", csv, file_name="lpips_metrics.csv", mime="text/csv",
                       key="lab_csv")

    layered = {sid: r for sid, r in succ_results.items() if "layer_maps" in r}  # ST-LPIPS: layers and maps
    staged = {sid: r for sid, r in succ_results.items() if {"texture", "structure"} <= set(r["components"])}  # DISTS
    if not results and not layered and not staged:
        st.info("No LPIPS backbone is available: the per-layer bars and maps need one.")
        st.stop()

    st.subheader("Where the distance comes from")
    if results or layered:
        bars = {label: (results[n]["layer_names"], results[n]["per_layer"])
                for n, label in ui.NET_LABELS.items() if n in results}
        bars.update({ui.successor_label(sid): (r["layer_names"], r["per_layer"]) for sid, r in layered.items()})
        st.plotly_chart(
            per_layer_bars(bars, title="Per-layer terms d_l, stacked: each bar's height is the LPIPS value"),
            key="lab_layers_fig",
        )
        if layered:
            st.caption("ST-LPIPS has the same five layer terms as LPIPS (same recipe, anti-aliased network); its "
                       "bar's height is the ST-LPIPS value.")
    for sid, r in staged.items():
        st.plotly_chart(
            dists_stage_bars(r["layer_names"], r["components"]["texture"], r["components"]["structure"], label="DISTS",
                             title=f"{ui.successor_label(sid)} = {r['total']:.4f}: texture and structure terms "
                                   "per stage, all of them summed"),
            key=f"lab_{sid.replace('-', '_')}_fig",
        )
        st.caption("DISTS compares whole feature maps: texture = differences of channel means, structure = loss of "
                   "correlation, per stage (stage 0 is the image itself). It has no spatial map.")
    if not results and not layered:
        st.stop()

    map_sources = {**results, **layered}  # the sidebar's backbone first (the default), the others, ST-LPIPS

    m1, m2, m3 = st.columns([1, 2, 1])
    map_net = m1.selectbox("Backbone", list(map_sources), format_func=_map_label, key="lab_map_net")
    res = map_sources[map_net]
    layer = m2.radio("Map", ["summed", *res["layer_names"]], horizontal=True, key="lab_map_layer")
    opacity = m3.slider("Map opacity", 0.0, 1.0, 0.6, 0.05, key="lab_opacity")
    values = res["layer_maps"].sum(0) if layer == "summed" else res["layer_maps"][res["layer_names"].index(layer)]
    metric_name = "LPIPS" if map_net in results else "ST-LPIPS"
    title = (f"{_map_label(map_net)}, {layer}: mean {values.mean():.4f} "
             f"({'= ' + metric_name if layer == 'summed' else '= d_l of this layer'})")
    st.plotly_chart(map_overlay(dist, values, opacity=opacity, title=title), key="lab_map_fig")
    st.caption("Each layer's map is bilinearly upsampled to the image size, as the reference package does with "
               "spatial=True; the summed map's mean is the LPIPS value. Drawn over the distorted image.")
    # Encoded when clicked (a callable), not on every slider step; the click needs no rerun.
    st.download_button("Download the map (PNG)", lambda: map_png(values, image=dist, opacity=float(opacity)),
                       file_name=f"lpips_map_{map_net}_{layer}.png", mime="image/png", key="lab_png", on_click="ignore")


lab()
