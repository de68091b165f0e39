"""Cached models, weights status and the sidebar's configuration.

Models are ``st.cache_resource`` singletons, one per configuration for the whole server, never
mutated by a page. A model whose weights are missing or cannot be read is ``None`` for the page,
after a warning that says why and what to do (never a traceback): every other part of the page
keeps working.
"""

from __future__ import annotations

import logging
import pickle
import sys
import threading
from typing import Any, Sequence

import streamlit as st

from lpips_core import LPIPS, WeightsUnavailable, metric_registry, resolve_device
from lpips_core import weights as weights_mod

from . import state
from .choices import SUCCESSORS, AppConfig, default_successors
from .text import NET_LABELS, md_escape, metric_label

log = logging.getLogger("lpips_explorer.ui")

# What a damaged or foreign checkpoint raises while it is read (an interrupted download, a file of
# another model): reported as "could not be read", with the details in the server's log.
_LOAD_ERRORS = (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError)
_CLOUD_OFF = ":material/cloud_off:"


@st.cache_resource(show_spinner=False)
def device_name() -> str:
    """The device every model runs on (``"cuda"``, ``"mps"`` or ``"cpu"``), resolved once per server."""
    return str(resolve_device(None))


def app_config() -> AppConfig:
    """The sidebar's configuration (defaults before the sidebar has run: AlexNet, v0.1, lin)."""
    ss = st.session_state
    return AppConfig(ss.get(state.NET, "alex"), ss.get(state.VERSION, "0.1"), bool(ss.get(state.LIN, True)),
                     device_name())


@st.cache_resource(show_spinner="Loading the LPIPS model…")
def _load_model(net: str, version: str, lin: bool, device: str) -> LPIPS:
    # One instance per (net, version, lin, device) for the whole server; never mutated. The log
    # line lets the load test count how many times a model was really built.
    model = LPIPS(net, version, lin, device=device)
    print(f"lpips-explorer: loaded model net={net} version={version} lin={lin} device={device}",
          file=sys.stderr, flush=True)
    return model


@st.cache_resource(show_spinner="Loading the successor metric…")
def _load_metric_model(metric: str, net: str, device: str):
    # One instance per (metric, net, device) for the whole server; never mutated. Logged apart
    # from the LPIPS models' "loaded model" lines, which the load test counts.
    model = metric_registry.build(metric, net, device=device)
    print(f"lpips-explorer: loaded metric {metric} net={net} device={device}", file=sys.stderr, flush=True)
    return model


_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None


#: What the warm-up builds after the default model: the default page's other backbone (Shift vs
#: blur shows AlexNet and VGG16 side by side) and, through :func:`default_successors`, its successors.
WARM_ALSO = ("vgg",)


def start_warm_up(net: str = "alex", version: str = "0.1", lin: bool = True) -> threading.Thread:
    """Build the default LPIPS model through the cached getter and run one tiny forward pass, then
    build the default page's other models (:data:`WARM_ALSO` and the device's default successors),
    in a background thread started once per server process (the first script run); later calls
    return that thread. A session that needs a model meanwhile waits on ``st.cache_resource``'s
    per-key lock, so no model is ever built twice; the first page's script loads its own models
    while this thread loads the others. Failures (e.g. missing weights) are logged only: the page
    that needs the model reports them as usual.
    """
    global _warm_thread
    with _warm_lock:
        if _warm_thread is None:
            device = device_name()

            def work() -> None:
                try:
                    import torch

                    model = _load_model(net, version, lin, device)
                    x = torch.zeros(1, 3, 64, 64, device=device)
                    with torch.inference_mode():
                        model(x, x, normalize=False)  # zeros are a valid [-1, 1] input: no range warning
                    print(f"lpips-explorer: warmed up net={net} device={device}", file=sys.stderr, flush=True)
                except Exception:  # noqa: BLE001 - a warm-up must never take the server down
                    log.warning("the background warm-up of %s failed", net, exc_info=True)
                others = [(_load_model, (n, version, lin, device)) for n in WARM_ALSO if n != net]
                others += [(_load_metric_model, (*SUCCESSORS[sid], device)) for sid in default_successors(device)]
                for build, args in others:
                    try:
                        build(*args)
                    except Exception:  # noqa: BLE001 - e.g. weights absent: the page says why
                        log.info("the background build of %s failed", args, exc_info=True)

            _warm_thread = threading.Thread(target=work, name="lpips-warm-up", daemon=True)
            _warm_thread.start()
        return _warm_thread


def _unreadable(label: str, exc: BaseException) -> str:
    """The reason shown for weights that exist but cannot be read (the exception goes to the log)."""
    log.error("%s: its weights could not be read", label, exc_info=exc)
    return (f"its weights could not be read ({type(exc).__name__}); the server's log has the details. "
            "Delete the damaged file so that it is fetched or converted again.")


def _warn(label: str, why: str) -> None:
    # The library's message: Markdown-escaped, its download links kept clickable.
    st.warning(f"**{label} is unavailable.** {md_escape(why, links=True)}", icon=_CLOUD_OFF)


def get_model(net: str | None = None, version: str | None = None, lin: bool | None = None,
              *, quiet: bool = False) -> LPIPS | None:
    """The cached LPIPS model for the given (or the sidebar's) configuration.

    Returns ``None`` when the backbone's weights are unavailable or cannot be read, after showing
    why and how to fix it (unless ``quiet``).
    """
    cfg = app_config()
    net = cfg.net if net is None else net
    version = cfg.version if version is None else version
    lin = cfg.lin if lin is None else lin
    try:
        return _load_model(net, version, lin, cfg.device)
    except WeightsUnavailable as exc:
        why = str(exc)
    except _LOAD_ERRORS as exc:
        why = _unreadable(NET_LABELS[net], exc)
    if not quiet:
        _warn(NET_LABELS[net], why)
    return None


@st.cache_data(show_spinner=False, ttl=60)
def weights_status() -> dict[str, tuple[bool, str]]:
    """For each backbone: can it be loaded without a download, and from where (or the fix)."""
    return {net: weights_mod.availability(net) for net in NET_LABELS}


def available_nets() -> list[str]:
    """The backbones whose weights are here, in the sidebar's order."""
    return [net for net, (ok, _) in weights_status().items() if ok]


@st.cache_data(show_spinner=False, ttl=60)
def metric_status(metric: str, net: str | None = None) -> tuple[bool, str]:
    """:func:`lpips_core.metric_registry.availability`: loadable without a download, and from where (or the fix)."""
    return metric_registry.availability(metric, net)


def get_metric_model(metric: str, net: str | None = None, *, quiet: bool = False):
    """The cached model of a registered ``metric`` (``"stlpips"``, ``"dists"``, …) for ``net``
    (default: the metric's own), with its default weights.

    Returns ``None`` when the weights are unavailable or cannot be read, after showing why and how
    to fix it (unless ``quiet``). For LPIPS with the sidebar's version and lin, use :func:`get_model`.
    """
    net = net or metric_registry.METRICS[metric].default_net
    label = metric_label(metric, net)
    ok, why = metric_status(metric, net)
    if ok:
        try:
            return _load_metric_model(metric, net, app_config().device)
        except WeightsUnavailable as exc:
            why = str(exc)
        except _LOAD_ERRORS as exc:
            why = _unreadable(label, exc)
    if not quiet:
        _warn(label, why)
    return None


def successor_models(chosen: Sequence[str], *, quiet: bool = False) -> dict[str, Any]:
    """``id → model`` for the chosen successors (ids of :data:`ui.choices.SUCCESSORS`); ``None`` for
    one whose weights are unavailable (after a warning with the reason and the fix, unless ``quiet``)."""
    return {sid: get_metric_model(*SUCCESSORS[sid], quiet=quiet) for sid in chosen}
