"""Conventions: the same pair scored under every common mistake, as a ratio to the correct value."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd
import streamlit as st

from lpips_core import metric_registry
from lpips_core.cells import frame_to_csv
from lpips_core.sweeps import VARIANT_NOTES, VARIANTS, grid_rows, metric_grid_rows
from lpips_explorer.figures.grids import conventions_heatmap, size_curves
from ui import links
from ui.choices import DEFAULT_SPEC, EXTRA_SPECS, UPLOAD_TYPES
from ui.conventions import grid_piece, successor_piece, uploaded_test
from ui.models import availability, get_models, sidebar_spec
from ui.pair import current_pair
from ui.text import NET_LABELS, md_escape, size_text
from ui.widgets import extras_picker

SIZES = (None, 64, 128, 224, 256)
#: Scoring time (s) after which the first backbone's rows are drawn before the others are scored
#: (below it, they were read from the cache: the whole grid is drawn at once).
STAGE_AFTER_S = 0.5
SUCCESSOR_SIZES = (None, 64, 256)
GRID_METRIC = DEFAULT_SPEC  # the grid's metric (LPIPS): its backbones and versions


def backbone(spec) -> str:
    """The LPIPS grid's row name: the backbone alone (``"AlexNet"``); the page is about LPIPS."""
    return NET_LABELS[spec.net]


def in_order(by_net: dict[str, list], chosen: list[str]) -> list:
    """The cells of the backbones scored so far, in the multiselect's order (``chosen``: the grid's rows)."""
    return [c for n in chosen if n in by_net for c in by_net[n]]


def with_size(cells: list, size: int | None, native: str) -> list:
    """The cells of one size with that size written as the app writes sizes: ``"64×64 px"``, and
    ``"native"`` spelled out as the pixel size scored (``native``: ``"native (256×192 px)"``)."""
    label = native if size is None else size_text(size, size)
    return [dataclasses.replace(c, size_label=label) for c in cells]


def _pair() -> tuple[np.ndarray, str, np.ndarray, str]:
    """The pair: the sidebar's reference against the lab's chain or an uploaded test image (resized to
    the reference's size), its caption, the two images; returns ``ref, ref_name, dist, source``."""
    ref, ref_name, dist, source = current_pair()
    h, w = ref.shape[:2]
    up = st.file_uploader("Your own test image (optional; scored against the sidebar's reference)", type=UPLOAD_TYPES,
                          key="conv_test_file")
    if up is not None:
        try:
            dist, (th, tw) = uploaded_test(up.getvalue(), up.name, (h, w))
        except ValueError as exc:
            st.error(f"{md_escape(up.name)} cannot be used: {md_escape(str(exc))} The lab's chain is used instead.")
        else:
            source = f"upload: {up.name}"
            if (th, tw) != (h, w):
                st.caption(f"The test image is {size_text(tw, th, labelled=True)}; it was resized to the "
                           f"reference's {size_text(w, h)} "
                           "(bilinear, antialiased) so the two can be compared pixel for pixel.")
    st.caption(f"Pair: {md_escape(ref_name)} ({size_text(w, h, labelled=True)}) against "
               f"{md_escape(source)}. \"native\" below is this size, {size_text(w, h)}: the reference as loaded at "
               "the sidebar's working size.")
    c1, c2 = st.columns(2)
    c1.image(ref, caption="reference", clamp=True, width="stretch")
    c2.image(dist, caption="distorted", clamp=True, width="stretch")
    return ref, ref_name, dist, source


def _backbones() -> list[str]:
    """The backbones picker (those with weights on this machine) and what it leaves out; returns the
    backbones chosen, in the multiselect's order."""
    nets = [n for n in NET_LABELS if availability(GRID_METRIC.replace(net=n))[0]]
    skipped = [n for n in NET_LABELS if n not in nets]
    chosen = st.multiselect("Backbones", nets, default=nets, format_func=NET_LABELS.get, key="conv_nets")
    if skipped:
        st.caption("Left out (no weights on this machine): " + ", ".join(NET_LABELS[n] for n in skipped) + ".")
    return chosen


def lpips_grid(ref: np.ndarray, ref_name: str, dist: np.ndarray, source: str, chosen: list[str], native: str) -> None:
    """The LPIPS grid of the backbones ``chosen`` (returns early, where it used to stop the page, so the
    successors still show)."""
    if not chosen:
        st.info("Choose at least one backbone.")
        return

    versions = metric_registry.METRICS[GRID_METRIC.metric].versions
    # The sidebar's backbone first: its rows are drawn as soon as they are scored, and the grid fills in
    # as the others (VGG16 is ten times AlexNet's work) are scored below it.
    first = [n for n in chosen if n == sidebar_spec().net] or chosen[:1]
    order = first + [n for n in chosen if n not in first]
    chart, bar = st.empty(), st.progress(0.0, text="Scoring the grid…")
    by_net: dict[str, list] = {}
    started, done = time.monotonic(), 0
    for i, net in enumerate(order):
        models = get_models([GRID_METRIC.replace(net=net, version=v) for v in versions], quiet=True)
        if any(m is None for m in models.values()):
            done += len(SIZES)
            continue
        for size in SIZES:
            bar.progress(done / (len(order) * len(SIZES)),
                         text=f"{NET_LABELS[net]} at {native if size is None else size_text(size, size)}…")
            by_net.setdefault(net, []).extend(with_size(grid_piece(ref, dist, net, size, models), size, native))
            done += 1
        rest = [NET_LABELS[n] for n in order[i + 1:]]
        if rest and by_net and time.monotonic() - started > STAGE_AFTER_S:  # scoring, not reading the cache
            with chart.container():
                st.plotly_chart(conventions_heatmap(in_order(by_net, chosen), row_label=backbone))
                st.caption(f"{' and '.join(rest)}: being scored (below); the grid gains its rows when done.")
    bar.empty()
    cells = in_order(by_net, chosen)
    if not cells:
        chart.empty()
        st.warning("No backbone could be scored.")
        return

    chart.plotly_chart(conventions_heatmap(cells, row_label=backbone), key="conv_heatmap")
    st.caption("Colour: log₂ of the ratio to the reference (★, white = agrees; red = larger, blue = smaller). "
               "Each cell shows the ratio and the LPIPS value; hover for the explanation.")
    st.markdown("**LPIPS against the size it is computed at** (the correct convention, each backbone):")
    st.plotly_chart(size_curves(cells, row_label=backbone), key="conv_size_chart")
    refs = [c for c in cells if c.is_reference]
    spans = []
    for row in dict.fromkeys(c.row_spec for c in refs):
        vals = {c.size_label: c.value for c in refs if c.row_spec == row}
        lo, hi = min(vals, key=vals.get), max(vals, key=vals.get)
        spans.append(f"{backbone(row)} {vals[hi]:.3f} at {hi} vs {vals[lo]:.3f} at {lo}")
    st.caption("The same pair at different sizes: " + "; ".join(spans) + ". A score is comparable only at a stated size.")

    st.subheader("What each variant models")
    # A table that wraps its text: every note reads whole at 1024 px with the sidebar open.
    st.table(pd.DataFrame({"variant": list(VARIANTS), "the mistake it models": [VARIANT_NOTES[v] for v in VARIANTS]})
             .set_index("variant"))

    table = pd.DataFrame(grid_rows(cells))
    with st.expander("All values"):
        st.dataframe(table, hide_index=True, key="conv_table")
    csv = frame_to_csv(table.assign(reference=ref_name, pair=source))
    st.download_button("Download the grid (CSV)", csv, file_name="lpips_conventions.csv", mime="text/csv",
                       key="conv_csv")


def successors_grid(ref: np.ndarray, ref_name: str, dist: np.ndarray, source: str, native: str) -> None:
    """ST-LPIPS and DISTS: the convention each expects, and each wrong one as a ratio to the correct value."""
    st.subheader("Successor metrics: the conventions they expect")
    st.markdown(
        "ST-LPIPS keeps LPIPS's contract, inputs in **[−1, 1]**; DISTS takes images in **[0, 1]**, as "
        "torchvision's `ToTensor` gives them. Below, the same pair is fed to each under every range convention; "
        "each cell is a ratio to that metric's correct value at the same size."
    )
    picked = extras_picker("conv_successors")
    rows = []
    for spec in EXTRA_SPECS:
        info = metric_registry.METRICS[spec.metric]
        rows.append({"metric": spec.label, "expects": spec.convention, "paper": info.reference,
                     "what it changes": info.summary})
    st.table(pd.DataFrame(rows).set_index("metric"))  # wraps its text: every row reads whole
    if not picked:
        st.info("Choose a successor metric above to see what a wrong convention does to it.")
        return
    models = {spec: m for spec, m in get_models(picked).items() if m is not None}
    if not models:
        return
    cells = []
    bar = st.progress(0.0, text="Scoring the successor metrics…")
    pieces = [(spec, size) for spec in models for size in SUCCESSOR_SIZES]
    for k, (spec, size) in enumerate(pieces):
        bar.progress(k / len(pieces), text=f"{spec.label} at {native if size is None else size_text(size, size)}…")
        cells += with_size(successor_piece(ref, dist, spec.name, size, models[spec]), size, native)
    bar.empty()
    st.plotly_chart(conventions_heatmap(cells, value_name="distance"), key="conv_succ_heatmap")
    st.caption("★ marks each metric's correct convention. Colour: log₂ of the ratio to it (white = agrees; "
               "red = larger, blue = smaller); hover for what the mistake models.")
    table = pd.DataFrame(metric_grid_rows(cells))
    table["metric"] = table["metric"].map({spec.name: spec.label for spec in models})
    with st.expander("All successor values"):
        st.dataframe(table, hide_index=True, key="conv_succ_table")
    csv = frame_to_csv(table.assign(reference=ref_name, pair=source))
    st.download_button("Download the successor grid (CSV)", csv, file_name="successor_conventions.csv",
                       mime="text/csv", key="conv_succ_csv")


def main() -> None:
    """The page, top to bottom: the pair, the backbones, the LPIPS grid, the successor metrics."""
    links.declare(chain=True)
    st.title("Conventions")
    st.markdown(
        "LPIPS numbers are comparable only under one contract: inputs in [−1, 1], version 0.1, the learned "
        "lin weights, colour, and a stated size. Here the same pair is scored under each common mistake; every "
        "cell is shown as a ratio to the correct value of its backbone and size."
    )
    ref, ref_name, dist, source = _pair()
    h, w = ref.shape[:2]
    native = f"native ({size_text(w, h)})"  # the size the "native" column is scored at
    chosen = _backbones()
    lpips_grid(ref, ref_name, dist, source, chosen, native)
    successors_grid(ref, ref_name, dist, source, native)


main()
