"""Streamlit helpers shared by the pages: sidebar configuration, cached models, the reference image.

The only UI module besides ``app.py`` and ``app_pages/``. It reads widgets and session state and
returns plain values; all computation happens in ``lpips_core``.

Session state it owns:

- ``net``, ``version``, ``lin``: the sidebar's model configuration (widget keys).
- ``ref_image`` (``(H, W, 3)`` float32 in ``[0, 1]``), ``ref_name``, ``ref_notices``: the reference
  image chosen once (sample photo, upload or synthetic) and shared by every page.
- ``working_side``: the longer side sample photos and uploads are brought to (default 256 px),
  which keeps every page interactive on a CPU.

The successor metrics (ST-LPIPS, DISTS) come from :func:`get_metric_model`, cached like the LPIPS
models; which of them the pages compute is ``pagekit``'s ``successors`` state.
"""

from __future__ import annotations

import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st

from lpips_core import LPIPS, WeightsUnavailable, metric_registry, resolve_device
from lpips_core import weights as weights_mod

REPO = Path(__file__).resolve().parent
SAMPLES_DIR = REPO / "sample_images"
NET_LABELS = {"alex": "AlexNet", "vgg": "VGG16", "squeeze": "SqueezeNet 1.1"}
DEFAULT_SAMPLE = "chelsea"
WORKING_SIDES = (128, 256, 384, 512)
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif", "tif", "tiff"]
SYNTHETIC = ("texture patch", "stripes", "checkerboard", "grating", "gradient")


@dataclass(frozen=True)
class AppConfig:
    """The sidebar's model configuration."""

    net: str
    version: str
    lin: bool
    device: str

    @property
    def label(self) -> str:
        return f"{NET_LABELS[self.net]}, v{self.version}, {'lin' if self.lin else 'baseline'}"


# --------------------------------------------------------------------------- models
@st.cache_resource(show_spinner=False)
def device_name() -> str:
    return str(resolve_device(None))


@st.cache_resource(show_spinner="Loading the LPIPS model…")
def _load_model(net: str, version: str, lin: bool, device: str) -> LPIPS:
    # One instance per (net, version, lin, device) for the whole server; never mutated. The log
    # line lets the load test count how many times a model was really built.
    model = LPIPS(net, version, lin, device=device)
    print(f"lpips-explorer: loaded model net={net} version={version} lin={lin} device={device}",
          file=sys.stderr, flush=True)
    return model


def get_model(net: str | None = None, version: str | None = None, lin: bool | None = None,
              *, quiet: bool = False) -> LPIPS | None:
    """The cached model for the given (or the sidebar's) configuration.

    Returns ``None`` when the backbone's weights are unavailable, after showing why and how to fix
    it (unless ``quiet``): every other part of the page keeps working.
    """
    cfg = app_config()
    net = cfg.net if net is None else net
    version = cfg.version if version is None else version
    lin = cfg.lin if lin is None else lin
    try:
        return _load_model(net, version, lin, cfg.device)
    except WeightsUnavailable as exc:
        if not quiet:
            st.warning(f"**{NET_LABELS[net]} is unavailable.** {md_escape(exc)}", icon=":material/cloud_off:")
        return None


@st.cache_data(show_spinner=False, ttl=60)
def weights_status() -> dict[str, tuple[bool, str]]:
    """For each backbone: can it be loaded without a download, and from where (or the fix)."""
    return {net: weights_mod.availability(net) for net in NET_LABELS}


def available_nets() -> list[str]:
    return [net for net, (ok, _) in weights_status().items() if ok]


# --------------------------------------------------------------------------- successor metrics
def metric_label(metric: str, net: str | None = None) -> str:
    """``"ST-LPIPS · AlexNet"``, ``"DISTS · VGG16"``, ``"LPIPS · VGG16"``."""
    info = metric_registry.METRICS[metric]
    return f"{info.label} · {NET_LABELS[net or info.default_net]}"


@st.cache_data(show_spinner=False, ttl=60)
def metric_status(metric: str, net: str | None = None) -> tuple[bool, str]:
    """:func:`lpips_core.metric_registry.availability`: loadable without a download, and from where (or the fix)."""
    return metric_registry.availability(metric, net)


@st.cache_resource(show_spinner="Loading the successor metric…")
def _load_metric_model(metric: str, net: str, device: str):
    # One instance per (metric, net, device) for the whole server; never mutated. Logged apart
    # from the LPIPS models' "loaded model" lines, which the load test counts.
    model = metric_registry.build(metric, net, device=device)
    print(f"lpips-explorer: loaded metric {metric} net={net} device={device}", file=sys.stderr, flush=True)
    return model


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$])")


def md_escape(text: str) -> str:
    """Escape Markdown (and HTML) syntax so user-controlled text (file names, loader messages)
    renders literally wherever Streamlit interprets Markdown."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def get_metric_model(metric: str, net: str | None = None, *, quiet: bool = False):
    """The cached model of ``metric`` (``"lpips"``, ``"stlpips"``, ``"dists"``) for ``net``.

    LPIPS is :func:`get_model` (v0.1, lin). Returns ``None`` when the weights are unavailable (or
    cannot be read), after showing why and how to fix it (unless ``quiet``): never a traceback,
    and every other part of the page keeps working.
    """
    info = metric_registry.METRICS[metric]
    net = net or info.default_net
    if metric == "lpips":
        return get_model(net, "0.1", True, quiet=quiet)
    label = metric_label(metric, net)
    ok, why = metric_status(metric, net)
    if ok:
        try:
            return _load_metric_model(metric, net, app_config().device)
        except WeightsUnavailable as exc:
            why = str(exc)
        except (ValueError, OSError, RuntimeError) as exc:  # a damaged or foreign checkpoint
            why = f"its weights could not be read: {exc}"
    if not quiet:
        st.warning(f"**{label} is unavailable.** {md_escape(why)}", icon=":material/cloud_off:")
    return None


# --------------------------------------------------------------------------- sidebar
def app_config() -> AppConfig:
    ss = st.session_state
    return AppConfig(ss.get("net", "alex"), ss.get("version", "0.1"), bool(ss.get("lin", True)), device_name())


def sidebar() -> None:
    """The controls that persist across pages (drawn by ``app.py`` on every run)."""
    status = weights_status()
    sb = st.sidebar
    sb.selectbox(
        "Backbone", list(NET_LABELS), key="net",
        format_func=lambda n: NET_LABELS[n] + ("" if status[n][0] else " (unavailable)"),
        help="The network whose features LPIPS compares.",
    )
    sb.segmented_control("Version", ["0.1", "0.0"], key="version", help="0.0 is the first release, "
                         "which skipped the input scaling layer; 0.1 is the default.")
    if st.session_state.get("version") is None:  # a segmented control can be cleared
        st.session_state["version"] = "0.1"
    sb.toggle("lin (learned channel weights)", key="lin",
              help="Off: the uncalibrated baseline, every channel weighted 1.")
    cfg = app_config()
    ok, source = status[cfg.net]
    sb.caption(f"Device: **{cfg.device}** · Weights: {html.escape(source if ok else 'unavailable')}")
    with sb.expander("Reference image", expanded=False):
        reference_picker()


def init_state() -> None:
    ss = st.session_state
    ss.setdefault("net", "alex")
    ss.setdefault("version", "0.1")
    ss.setdefault("lin", True)
    ss.setdefault("working_side", 256)
    if "ref_image" not in ss:
        _set_reference(*_sample(DEFAULT_SAMPLE, ss["working_side"]), notices=())


# --------------------------------------------------------------------------- reference image
def sample_names() -> list[str]:
    return sorted(p.stem for p in SAMPLES_DIR.glob("*.png"))


@st.cache_data(show_spinner=False, max_entries=32)
def _sample(name: str, side: int) -> tuple[np.ndarray, str]:
    from lpips_core.images import load_image

    loaded = load_image(SAMPLES_DIR / f"{name}.png", max_side=side)
    return loaded.array, f"sample: {name}"


@st.cache_data(show_spinner=False, max_entries=32)
def _synthetic(kind: str, size: int, seed: int, period: int) -> tuple[np.ndarray, str]:
    from lpips_core import synth

    if kind == "texture patch":
        return synth.texture_patch(seed, size=size), f"texture patch (seed {seed}, {size} px)"
    if kind == "stripes":
        return synth.stripes(size, period), f"stripes ({size} px, period {period})"
    if kind == "checkerboard":
        return synth.checkerboard(size, max(1, period // 2)), f"checkerboard ({size} px, squares {max(1, period // 2)})"
    if kind == "grating":
        return synth.grating(size / period, 30.0, size=size), f"grating ({size} px, period {period}, 30°)"
    return synth.gradient(size=size), f"gradient ({size} px)"


def _set_reference(array: np.ndarray, name: str, *, notices: tuple[str, ...]) -> None:
    st.session_state["ref_image"] = array
    st.session_state["ref_name"] = name
    st.session_state["ref_notices"] = tuple(notices)


def reference() -> tuple[np.ndarray, str]:
    """The current reference image ``(H, W, 3)`` float32 in ``[0, 1]`` and its name."""
    init_state()
    return st.session_state["ref_image"], st.session_state["ref_name"]


def reference_picker() -> None:
    """Choose the reference once: a sample photo, an upload or a synthetic image."""
    from lpips_core.images import ImageLoadError, load_image

    ss = st.session_state
    source = st.radio("Source", ["Sample photo", "Upload", "Synthetic"], key="ref_source", horizontal=True)
    st.select_slider("Working size (longer side, px)", WORKING_SIDES, key="working_side",
                     help="Photos and uploads are downscaled to this size so every page stays interactive.")
    if source == "Sample photo":
        names = sample_names()
        name = st.selectbox("Photo", names, key="ref_sample",
                            index=names.index(DEFAULT_SAMPLE) if DEFAULT_SAMPLE in names else 0)
        array, label = _sample(name, ss["working_side"])
        if ss.get("ref_name") != label or ss["ref_image"].shape != array.shape:
            _set_reference(array, label, notices=())
    elif source == "Upload":
        up = st.file_uploader("Image file", type=UPLOAD_TYPES, key="ref_upload")
        if up is not None:
            key = (up.name, up.size, ss["working_side"])
            if ss.get("ref_upload_key") != key:
                ss["ref_upload_key"] = key
                try:
                    loaded = load_image(up, max_side=ss["working_side"], min_side=64)
                except ImageLoadError as exc:
                    ss["ref_upload_error"] = str(exc)
                else:
                    ss["ref_upload_error"] = None
                    _set_reference(loaded.array, f"upload: {up.name}", notices=loaded.notices)
            if ss.get("ref_upload_error"):
                st.error(md_escape(ss["ref_upload_error"]))
    else:
        kind = st.selectbox("Pattern", SYNTHETIC, key="ref_synth_kind")
        size = st.select_slider("Side (px)", [64, 96, 128, 192, 256], value=128, key="ref_synth_size")
        seed = int(st.number_input("Seed", 0, 10_000, 0, key="ref_synth_seed")) if kind == "texture patch" else 0
        period = int(st.number_input("Period (px)", 2, 64, 8, key="ref_synth_period")) if kind in (
            "stripes", "checkerboard", "grating") else 8
        array, label = _synthetic(kind, size, seed, period)
        if ss.get("ref_name") != label:
            _set_reference(array, label, notices=())
    for notice in ss.get("ref_notices", ()):
        st.caption(md_escape(notice))
    st.image(ss["ref_image"], caption=ss["ref_name"], clamp=True)


# --------------------------------------------------------------------------- small display helpers
def fmt(value: float, digits: int = 4) -> str:
    """A number for display: ∞ for infinity (identical images' PSNR)."""
    if value == float("inf"):
        return "∞"
    if value == float("-inf"):
        return "−∞"
    return f"{value:.{digits}f}"
