"""Inside a layer: from two feature maps to the number d_l — first a toy layer, then the real network."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lpips_core.spec import MetricSpec
from lpips_explorer.figures.layers import (heatmaps_row, lin_weight_bars, top_channel_bars, toy_arrows, toy_terms,
                                           zero_share_bars)
from lpips_explorer.lab import note
from lpips_explorer.toy_layer import toy_layer
from ui import links
from ui.layer import breakdown
from ui.links import Field
from ui.models import get_model, sidebar_spec
from ui.pair import current_pair
from ui.text import md_escape, size_hw

#: The widgets a link reproduces (:func:`ui.links.declare`); the link also carries the chain.
LINKED = (Field("ial_w2", "float", 0.0, 1.0),)

TOP_K = 10
#: The toy table's angle on the "mean of all nine" row, which has no single angle.
NO_ANGLE = "—"
ANGLE_HELP = ("The angle between the two unit vectors at that position; none on the mean row, since d_l averages "
              "the nine terms, not the angles.")


# --------------------------------------------------------------------------- the toy layer
def _toy_intro() -> None:
    """The toy layer's heading and what it computes."""
    st.subheader("A toy layer you can see")
    st.markdown(
        "Two channels on a 3×3 grid, so every feature vector is an arrow. At each position both vectors are "
        "divided by their length (only the direction counts), subtracted, weighted channel by channel and "
        "squared; the nine terms are averaged into the layer's value d_l. Every number below is computed by the "
        "engine's own per-layer code."
    )


def _toy_layer(w2: float) -> None:
    """The toy layer for channel 2's weight ``w2``: its arrows, its terms, their numbers and what they say."""
    toy = toy_layer((1.0, w2))
    st.plotly_chart(toy_arrows(toy), key="ial_toy_arrows")
    st.caption("Blue: the reference's unit vectors; red: the distorted image's. Under each pair: the weighted "
               "term, and in grey the unweighted one (2 − 2 cos θ).")
    # One panel per column: side by side on a laptop, one above the other on a phone (one colour scale).
    t1, t2 = st.columns(2)
    t1.plotly_chart(toy_terms(toy, panels=("weighted",)), key="ial_toy_terms")
    t2.plotly_chart(toy_terms(toy, panels=("unweighted",)), key="ial_toy_terms_unweighted")
    # One type per column: the angle as text, "—" on the mean row, which has no single angle (d_l averages
    # the nine terms, not the angles; 2 − 2 cos of the mean angle is not the mean term).
    numbers = pd.DataFrame([
        {"position": "bottom right", "angle (°)": f"{toy.angles[2, 2]:.0f}", "unweighted": toy.terms_unweighted[2, 2],
         "weighted": toy.terms[2, 2]},
        {"position": "centre", "angle (°)": f"{toy.angles[1, 1]:.0f}", "unweighted": toy.terms_unweighted[1, 1],
         "weighted": toy.terms[1, 1]},
        {"position": "mean of all nine = d_l", "angle (°)": NO_ANGLE, "unweighted": toy.d_l_unweighted,
         "weighted": toy.d_l},
    ])
    st.dataframe(numbers, hide_index=True, key="ial_toy_numbers",
                 column_config={"angle (°)": st.column_config.TextColumn(help=ANGLE_HELP),
                                **{c: st.column_config.NumberColumn(format="%.3f")
                                   for c in ("unweighted", "weighted")}})
    st.caption(f"Angle: between the reference's and the distorted image's vector at that position. The mean row has "
               f"none ({NO_ANGLE}): d_l is the mean of the nine terms, and the angles are not averaged (the nine lie "
               f"between {toy.angles.min():.0f}° and {toy.angles.max():.0f}°).")
    st.markdown(
        f"Bottom right the vectors point along channel 1 and channel 2: the difference is (1, −1), weighted "
        f"(1, {w2:g}), so the term is 1 + {w2 ** 2:.4g} = **{toy.terms[2, 2]:.3f}** (unweighted "
        f"{toy.terms_unweighted[2, 2]:.3f}). In the centre the directions are {toy.angles[1, 1]:.0f}° apart: "
        f"**{toy.terms[1, 1]:.3f}** (unweighted {toy.terms_unweighted[1, 1]:.3f}). The other seven positions nearly "
        f"agree, and the mean of the nine terms is d_l = **{toy.d_l:.3f}**."
    )


# --------------------------------------------------------------------------- the real network
def _real_network() -> tuple:
    """The real network's heading, the sidebar's model and the current pair's per-layer breakdown
    (the page stops here, with a note, when the sidebar's backbone is unavailable)."""
    st.subheader("The real network")
    cfg = sidebar_spec()
    model = get_model(cfg)
    if model is None:
        st.info("Choose an available backbone in the sidebar to look inside the real network.")
        st.stop()
    ref, ref_name, dist, source = current_pair()
    st.caption(f"Model: {cfg.row_spec.label}, {note(cfg)} (sidebar). Pair: {md_escape(ref_name)} against "
               f"{md_escape(source)}.")
    with st.spinner("Running the pair through the network…"):
        b = breakdown(ref, dist, cfg.name, model)
    return cfg, model, b


def _layer(b, names: list[str]) -> tuple[str, int, float, str]:
    """The layer picker and the layer's summary table; returns the layer, its index, its d_l and its grid."""
    layer = st.selectbox("Layer", names, index=min(1, len(names) - 1), key="ial_layer",
                         format_func=lambda n: f"{n}  (d_l = {b.per_layer[names.index(n)]:.4f})")
    li = names.index(layer)
    feats_x = b.features_ref[li]
    d_l = float(b.per_layer[li])

    grid = size_hw(feats_x.shape[1:], unit="")  # positions, width × height as the app writes sizes
    summary = pd.DataFrame([{
        "layer": layer, "channels": feats_x.shape[0], "grid (width×height)": grid,
        "d_l": d_l, "share of LPIPS": d_l / b.total if b.total else 0.0, "LPIPS": b.total,
    }])
    st.dataframe(summary, hide_index=True, key="ial_layer_summary",
                 column_config={"d_l": st.column_config.NumberColumn(format="%.5f"),
                                "LPIPS": st.column_config.NumberColumn(format="%.5f"),
                                "share of LPIPS": st.column_config.NumberColumn(format="percent")})
    return layer, li, d_l, grid


def _channel(b, layer: str, li: int, order: np.ndarray, d_l: float) -> None:
    """The channel picker and the channel's feature maps for the reference and the distorted image, and their Δ."""
    feats_x, feats_y = b.features_ref[li], b.features_dist[li]
    contrib = b.contributions[li]
    channel = st.selectbox(
        "Channel (ordered by its contribution to this pair's d_l)", [int(c) for c in order], key="ial_channel",
        format_func=lambda c: f"channel {c}: {contrib[c] / d_l:.1%} of d_l" if d_l else f"channel {c}",
    )
    f1, f2 = st.columns([3, 2])  # the Δ panel wide enough for its title at 1024 px with the sidebar open
    # Short panel titles (the channel is in the caption): three panels share 1024 px with the sidebar open.
    f1.plotly_chart(heatmaps_row({"reference": feats_x[channel], "distorted": feats_y[channel]},
                                 value_name="unit-normalised activation"), key="ial_features")
    f2.plotly_chart(heatmaps_row({"Δ = reference − distorted": feats_x[channel] - feats_y[channel]},
                                 colorscale="RdBu_r", zmid=0.0, value_name="Δ"), key="ial_feature_diff")
    st.caption(f"Channel {channel} of {layer}, unit-normalised activations: at each position the vector over all "
               "channels has length 1, so a channel's value is its share of the direction there.")


def _term_map(b, layer: str, li: int, d_l: float, grid: str) -> None:
    """The layer's per-position term, whose mean is d_l."""
    st.plotly_chart(heatmaps_row({f"{layer}: per-position term (mean = d_l = {d_l:.4f})": b.term_maps[li]},
                                 colorscale="Inferno", value_name="term", height=360), key="ial_term_map")
    st.caption(f"The weighted squared difference of the normalised features at the layer's native "
               f"{grid} grid (width×height), before the spatial mean.")


def _lin_weights(cfg: MetricSpec, model, names: list[str], layer: str, li: int, order: np.ndarray) -> None:
    """The layer's lin weights (its top channels highlighted) beside each layer's share of zero weights."""
    w_model = model if cfg.lin else get_model(cfg.replace(lin=True), quiet=True)
    weights = None if w_model is None else [w.detach().cpu().numpy().ravel() for w in w_model.channel_weights]
    c1, c2 = st.columns(2)
    with c1:
        if weights is not None:
            st.plotly_chart(lin_weight_bars(weights[li], layer_name=layer, highlight=order[:TOP_K]),
                            key="ial_weights")
            if not cfg.lin:
                st.caption("The sidebar has the baseline selected (every weight 1); these are the lin weights it "
                           "ignores.")
    with c2:
        if weights is not None:
            shares = [float((w == 0).mean()) for w in weights]
            st.plotly_chart(zero_share_bars(names, shares, title="Share of zero lin weights per layer"),
                            key="ial_zero_share")


def _top_channels(b, layer: str, li: int, order: np.ndarray, d_l: float) -> None:
    """The layer's top channels by their contribution to d_l."""
    contrib = b.contributions[li]
    st.plotly_chart(top_channel_bars(order[:TOP_K], contrib[order[:TOP_K]], total=d_l, layer_name=layer),
                    key="ial_top_channels")
    st.caption("A channel's contribution is its lin weight times the spatial mean of its squared normalised "
               "difference; the contributions of all channels sum to d_l.")


def main() -> None:
    """The page, top to bottom: the toy layer, then the same steps inside the real network."""
    links.declare(*LINKED, chain=True)
    st.title("Inside a layer")
    _toy_intro()
    # The linked slider is drawn here, after links.declare in the source too (tests/test_links.py).
    w2 = st.slider("Weight of channel 2 (w₂; channel 1 keeps w₁ = 1)", 0.0, 1.0, 0.6, 0.05, key="ial_w2",
                   help="Eq. 1 weights the difference: w ⊙ Δ. The engine weights squared differences with v = w².")
    _toy_layer(w2)

    cfg, model, b = _real_network()
    names = list(b.layer_names)
    layer, li, d_l, grid = _layer(b, names)
    order = np.argsort(b.contributions[li])[::-1]
    _channel(b, layer, li, order, d_l)
    _term_map(b, layer, li, d_l, grid)
    _lin_weights(cfg, model, names, layer, li, order)
    _top_channels(b, layer, li, order, d_l)


main()
