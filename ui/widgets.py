"""The widgets shared by the pages: the sidebar, the reference picker and the extra-metrics picker.

Each reads its widgets and session state and returns plain values; the work happens in
``lpips_core``. Every user-controlled string they show goes through :func:`ui.text.md_escape`.
"""

from __future__ import annotations

import streamlit as st

from . import state
from lpips_core import metric_registry
from lpips_core.spec import MetricSpec, parse_spec

from .layout import layout_css
from .choices import (DEFAULT_SAMPLE, DEFAULT_SPEC, DEFAULT_WORKING_SIDE, EXTRA_SPECS, SYNTHETIC, UPLOAD_TYPES,
                      WORKING_SIDES, default_extras, upload_key)
from .models import availability, device_name, sidebar_spec
from .pair import _sample, _synthetic, sample_names, set_reference
from .text import NET_LABELS, device_word, md_escape


def sidebar() -> None:
    """The controls that persist across pages (drawn by ``app.py`` on every run).

    Each control's default is the session's current value (``init_state`` has set them): a
    control the browser mounts afresh, without the value it held, then shows the session's
    setting and never sends a default back in its place (a toggle defaulting to off would
    silently switch a session to the uncalibrated baseline).
    """
    ss = st.session_state
    sb = st.sidebar
    info = metric_registry.METRICS[DEFAULT_SPEC.metric]  # the sidebar's metric: its nets and versions
    nets = list(info.nets)
    sb.selectbox(
        "Backbone", nets, key=state.NET, index=_index(nets, state.NET),
        format_func=lambda n: NET_LABELS[n] + ("" if availability(DEFAULT_SPEC.replace(net=n))[0]
                                               else " (unavailable)"),
        help="The network whose features LPIPS compares.",
    )
    versions = info.versions
    version = _current(versions, state.VERSION, DEFAULT_SPEC.version)

    def _keep_version() -> None:  # clicking the chosen segment clears it: keep the version instead
        if ss.get(state.VERSION) is None:
            ss[state.VERSION] = version

    sb.segmented_control("Version", versions, key=state.VERSION, default=version, on_change=_keep_version,
                         help="0.0 is the first release, which skipped the input scaling layer; 0.1 is the default.")
    sb.toggle("lin (learned channel weights)", key=state.LIN, value=bool(ss.get(state.LIN, DEFAULT_SPEC.lin)),
              help="Off: the uncalibrated baseline, every channel weighted 1.")
    ok, source = availability(sidebar_spec())
    sb.caption(f"Device: **{md_escape(device_name())}** · Weights: {md_escape(source) if ok else 'unavailable'}")
    with sb.expander("Reference image", expanded=False):
        reference_picker()
    layout_css()  # Streamlit's multiselect chips and uploader line wrap instead of being cut (every page)


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


def extras_picker(key: str) -> list[MetricSpec]:
    """The "Successor metrics" multiselect (widget ``key``) over :data:`ui.choices.EXTRA_SPECS`,
    shared across pages; returns the chosen specs.

    The choice lives in ``st.session_state[ui.state.EXTRA_METRICS]`` (spec names; default
    :func:`ui.choices.default_extras` for the device), so it survives switching pages although
    each page has its own widget.
    """
    ss = st.session_state
    device = device_name()
    names = [s.name for s in EXTRA_SPECS]
    if state.EXTRA_METRICS not in ss:
        ss[state.EXTRA_METRICS] = [s.name for s in default_extras(device)]
    ss[key] = [n for n in ss[state.EXTRA_METRICS] if n in names]

    def _keep() -> None:
        ss[state.EXTRA_METRICS] = list(ss[key])

    def _label(name: str) -> str:
        return parse_spec(name).label + ("" if availability(name)[0] else " (unavailable)")

    st.multiselect(
        "Successor metrics", names, key=key, on_change=_keep, format_func=_label,
        help="Shift-tolerant LPIPS (Ghildyal and Liu, 2022) and DISTS (Ding et al., 2022), on the same "
             "pair. The choice is shared by the Shift vs blur, Distortion lab and Conventions pages.",
    )
    if device == "cpu":
        st.caption("On a CPU only ST-LPIPS · AlexNet is on by default: each VGG-based successor adds about "
                   "10–15 s to a page's first run here (results are cached after); on a GPU all are on.")
    else:
        st.caption(f"On this {device_word(device)} every successor is on by default; results are cached.")
    return [parse_spec(n) for n in ss[key]]
