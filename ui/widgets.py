"""The widgets shared by the pages: the sidebar, the reference picker and the successor picker.

Each reads its widgets and session state and returns plain values; the work happens in
``lpips_core``. Every user-controlled string they show goes through :func:`ui.text.md_escape`.
"""

from __future__ import annotations

import streamlit as st

from . import state
from .choices import (DEFAULT_SAMPLE, DEFAULT_WORKING_SIDE, SUCCESSORS, SYNTHETIC, UPLOAD_TYPES, WORKING_SIDES,
                      default_successors, successor_label, upload_key)
from .models import app_config, metric_status, weights_status
from .pair import _sample, _synthetic, sample_names, set_reference
from .text import NET_LABELS, device_word, md_escape


def sidebar() -> None:
    """The controls that persist across pages (drawn by ``app.py`` on every run).

    Each control's default is the session's current value (``init_state`` has set them): a
    control the browser mounts afresh, without the value it held, then shows the session's
    setting and never sends a default back in its place (a toggle defaulting to off would
    silently switch a session to the uncalibrated baseline).
    """
    status = weights_status()
    ss = st.session_state
    sb = st.sidebar
    nets = list(NET_LABELS)
    sb.selectbox(
        "Backbone", nets, key=state.NET, index=_index(nets, state.NET),
        format_func=lambda n: NET_LABELS[n] + ("" if status[n][0] else " (unavailable)"),
        help="The network whose features LPIPS compares.",
    )
    versions = ("0.1", "0.0")
    version = _current(versions, state.VERSION, "0.1")

    def _keep_version() -> None:  # clicking the chosen segment clears it: keep the version instead
        if ss.get(state.VERSION) is None:
            ss[state.VERSION] = version

    sb.segmented_control("Version", versions, key=state.VERSION, default=version, on_change=_keep_version,
                         help="0.0 is the first release, which skipped the input scaling layer; 0.1 is the default.")
    sb.toggle("lin (learned channel weights)", key=state.LIN, value=bool(ss.get(state.LIN, True)),
              help="Off: the uncalibrated baseline, every channel weighted 1.")
    cfg = app_config()
    ok, source = status[cfg.net]
    sb.caption(f"Device: **{md_escape(cfg.device)}** · Weights: {md_escape(source) if ok else 'unavailable'}")
    with sb.expander("Reference image", expanded=False):
        reference_picker()


def _current(options, key: str, fallback):
    """The session's value of ``key`` when it is one of ``options``, else ``fallback``: a persistent
    control's default (see :func:`sidebar`)."""
    value = st.session_state.get(key, fallback)
    return value if value in options else fallback


def _index(options, key: str, fallback=None) -> int:
    """The position of the session's value of ``key`` in ``options`` (else of ``fallback``, else 0)."""
    value = _current(options, key, fallback if fallback in options else options[0])
    return list(options).index(value)


def reference_picker() -> None:
    """Choose the reference once: a sample photo, an upload or a synthetic image.

    An upload is decoded again only when its content key changes (:func:`ui.choices.upload_key`:
    a hash of its bytes, its name and the working side), so a different file with the same name
    and size becomes the new reference.
    """
    from lpips_core.images import ImageLoadError, load_image

    ss = st.session_state
    sources = ["Sample photo", "Upload", "Synthetic"]
    source = st.radio("Source", sources, key=state.REF_SOURCE, horizontal=True,
                      index=_index(sources, state.REF_SOURCE))
    st.select_slider("Working size (longer side, px)", WORKING_SIDES, key=state.WORKING_SIDE,
                     value=_current(WORKING_SIDES, state.WORKING_SIDE, DEFAULT_WORKING_SIDE),
                     help="Photos and uploads are downscaled to this size so every page stays interactive.")
    side = ss[state.WORKING_SIDE]
    if source == "Sample photo":
        names = sample_names()
        name = st.selectbox("Photo", names, key=state.REF_SAMPLE,
                            index=_index(names, state.REF_SAMPLE, DEFAULT_SAMPLE))
        array, label = _sample(name, side)
        if ss.get(state.REF_NAME) != label or ss[state.REF_IMAGE].shape != array.shape:
            set_reference(array, label)
    elif source == "Upload":
        up = st.file_uploader("Image file", type=UPLOAD_TYPES, key=state.REF_UPLOAD)
        if up is not None:
            key = upload_key(up.getvalue(), up.name, side)
            if ss.get(state.REF_UPLOAD_KEY) != key:
                ss[state.REF_UPLOAD_KEY] = key
                try:
                    loaded = load_image(up, max_side=side, min_side=64)
                except ImageLoadError as exc:
                    ss[state.REF_UPLOAD_ERROR] = str(exc)
                else:
                    ss[state.REF_UPLOAD_ERROR] = None
                    set_reference(loaded.array, f"upload: {up.name}", notices=loaded.notices)
            if ss.get(state.REF_UPLOAD_ERROR):
                st.error(md_escape(ss[state.REF_UPLOAD_ERROR]))
    else:
        kind = st.selectbox("Pattern", SYNTHETIC, key=state.REF_SYNTH_KIND,
                            index=_index(SYNTHETIC, state.REF_SYNTH_KIND))
        sizes = (64, 96, 128, 192, 256)
        size = st.select_slider("Side (px)", sizes, value=_current(sizes, state.REF_SYNTH_SIZE, 128),
                                key=state.REF_SYNTH_SIZE)
        seed = int(st.number_input("Seed", 0, 10_000, _current(range(10_001), state.REF_SYNTH_SEED, 0),
                                   key=state.REF_SYNTH_SEED)) if kind == "texture patch" else 0
        period = int(st.number_input("Period (px)", 2, 64, _current(range(2, 65), state.REF_SYNTH_PERIOD, 8),
                                     key=state.REF_SYNTH_PERIOD)) if kind in ("stripes", "checkerboard",
                                                                              "grating") else 8
        array, label = _synthetic(kind, size, seed, period)
        if ss.get(state.REF_NAME) != label:
            set_reference(array, label)
    for notice in ss.get(state.REF_NOTICES, ()):
        st.caption(md_escape(notice))
    st.image(ss[state.REF_IMAGE], caption=md_escape(ss[state.REF_NAME]), clamp=True)


def successor_picker(key: str) -> list[str]:
    """The "Successor metrics" multiselect (widget ``key``), shared across pages; returns the chosen ids.

    The choice lives in ``st.session_state[ui.state.SUCCESSORS]`` (default
    :func:`ui.choices.default_successors` for the device), so it survives switching pages although
    each page has its own widget.
    """
    ss = st.session_state
    device = app_config().device
    if state.SUCCESSORS not in ss:
        ss[state.SUCCESSORS] = default_successors(device)
    ss[key] = [sid for sid in ss[state.SUCCESSORS] if sid in SUCCESSORS]

    def _keep() -> None:
        ss[state.SUCCESSORS] = list(ss[key])

    def _label(sid: str) -> str:
        ok, _ = metric_status(*SUCCESSORS[sid])
        return successor_label(sid) + ("" if ok else " (unavailable)")

    st.multiselect(
        "Successor metrics", list(SUCCESSORS), key=key, on_change=_keep, format_func=_label,
        help="Shift-tolerant LPIPS (Ghildyal and Liu, 2022) and DISTS (Ding et al., 2022), on the same "
             "pair. The choice is shared by the Shift vs blur, Distortion lab and Conventions pages.",
    )
    if device == "cpu":
        st.caption("On a CPU only ST-LPIPS · AlexNet is on by default: each VGG-based successor adds about "
                   "10–15 s to a page's first run here (results are cached after); on a GPU all are on.")
    else:
        st.caption(f"On this {device_word(device)} every successor is on by default; results are cached.")
    return list(ss[key])
