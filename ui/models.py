"""The app's one model getter, weights status and the sidebar's configuration.

Every page gets every model from :func:`get_model`, keyed by a :class:`~lpips_core.spec.MetricSpec`
(what the model depends on: :attr:`~lpips_core.spec.MetricSpec.model_spec`) and the server's
device: one ``st.cache_resource`` singleton per model for the whole server, never mutated by a
page, so no model is built twice whichever pages ask for it. A model whose weights are missing
or cannot be read is ``None`` for the page, after a warning that says why and what to do (never
a traceback): every other part of the page keeps working.

The sidebar's configuration is :func:`sidebar_spec` (a spec of :data:`ui.choices.DEFAULT_SPEC`'s
metric) and :func:`device_name`.
"""

from __future__ import annotations

import logging
import pickle
import sys
import threading
from typing import Any, Iterable

import streamlit as st

from lpips_core import WeightsUnavailable, metric_registry, resolve_device
from lpips_core.spec import MetricSpec, parse_spec

from . import state
from .choices import DEFAULT_SPEC, default_extras
from .text import md_escape

log = logging.getLogger("lpips_explorer.ui")

# What a damaged or foreign checkpoint raises while it is read (an interrupted download, a file of
# another model): reported as "could not be read", with the details in the server's log.
_LOAD_ERRORS = (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError)
_CLOUD_OFF = ":material/cloud_off:"


@st.cache_resource(show_spinner=False)
def device_name() -> str:
    """The device every model runs on (``"cuda"``, ``"mps"`` or ``"cpu"``), resolved once per server."""
    return str(resolve_device(None))


def sidebar_spec() -> MetricSpec:
    """The sidebar's configuration: :data:`ui.choices.DEFAULT_SPEC`'s metric on the chosen backbone,
    version and head (the defaults before the sidebar has run)."""
    ss = st.session_state
    return DEFAULT_SPEC.replace(net=ss.get(state.NET, DEFAULT_SPEC.net),
                                version=ss.get(state.VERSION) or DEFAULT_SPEC.version,
                                lin=bool(ss.get(state.LIN, DEFAULT_SPEC.lin)))


@st.cache_resource(show_spinner="Loading the metric's network…")
def _load(name: str, device: str):
    # One instance per model (a spec's model_spec name) and device for the whole server; never
    # mutated. The log line lets the load test count how many times a model was really built.
    model = parse_spec(name).build(device=device)
    print(f"lpips-explorer: loaded model {name} device={device}", file=sys.stderr, flush=True)
    return model


@st.cache_data(show_spinner=False, ttl=60)
def _availability(name: str) -> tuple[bool, str]:
    return parse_spec(name).availability()


def availability(spec: MetricSpec | str) -> tuple[bool, str]:
    """Whether ``spec``'s weights are here without a download, and from where (or the fix);
    cheap (loads nothing) and cached for a minute. Always ``(True, "computed")`` for a classic metric."""
    return _availability(parse_spec(spec).model_spec.name)


def available_nets() -> list[str]:
    """The backbones of the sidebar's metric whose weights are here, in the sidebar's order."""
    return [net for net in metric_registry.METRICS[DEFAULT_SPEC.metric].nets
            if availability(DEFAULT_SPEC.replace(net=net))[0]]


def _unreadable(label: str, exc: BaseException) -> str:
    """The reason shown for weights that exist but cannot be read (the exception goes to the log)."""
    log.error("%s: its weights could not be read", label, exc_info=exc)
    return (f"its weights could not be read ({type(exc).__name__}); the server's log has the details. "
            "Delete the damaged file so that it is fetched or converted again.")


def get_model(spec: MetricSpec | str | None = None, *, quiet: bool = False):
    """The cached model of a learned ``spec`` (default: :func:`sidebar_spec`) on :func:`device_name`.

    Returns ``None`` when its weights are unavailable or cannot be read, after showing why and
    how to fix it (unless ``quiet``).

    Raises:
        ValueError: a classic metric's spec (it has no model) or a malformed name.
    """
    spec = sidebar_spec() if spec is None else parse_spec(spec)
    if not spec.learned:
        raise ValueError(f"{spec.label} is computed on the images directly; it has no model")
    ok, why = availability(spec)
    if ok:
        try:
            return _load(spec.model_spec.name, device_name())
        except WeightsUnavailable as exc:
            why = str(exc)
        except _LOAD_ERRORS as exc:
            why = _unreadable(spec.label, exc)
    if not quiet:
        # The library's message: Markdown-escaped, its download links kept clickable.
        st.warning(f"**{spec.label} is unavailable.** {md_escape(why, links=True)}", icon=_CLOUD_OFF)
    return None


def get_models(specs: Iterable[MetricSpec | str], *, quiet: bool = False) -> dict[MetricSpec, Any]:
    """``spec → model`` (:func:`get_model`) for each learned spec, ``None`` for one whose weights
    are unavailable (after a warning with the reason and the fix, unless ``quiet``)."""
    return {s: get_model(s, quiet=quiet) for s in map(parse_spec, specs)}


_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None


#: What the warm-up builds after the default model: the default page's other backbone (Shift vs
#: blur shows AlexNet and VGG16 side by side); the device's default extra metrics follow.
WARM_ALSO: tuple[MetricSpec, ...] = (DEFAULT_SPEC.replace(net="vgg"),)


def start_warm_up(spec: MetricSpec = DEFAULT_SPEC) -> threading.Thread:
    """Build ``spec``'s model through the cached getter and run one tiny forward pass, then build
    the default page's other models (:data:`WARM_ALSO` and the device's default extra metrics),
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

                    model = _load(spec.model_spec.name, device)
                    x = torch.zeros(1, 3, 64, 64, device=device)
                    with torch.inference_mode():
                        model(x, x, normalize=False)  # zeros are valid input in the metric's range: no range warning
                    print(f"lpips-explorer: warmed up {spec.name} device={device}", file=sys.stderr, flush=True)
                except Exception:  # noqa: BLE001 - a warm-up must never take the server down
                    log.warning("the background warm-up of %s failed", spec.name, exc_info=True)
                for other in (*WARM_ALSO, *default_extras(device)):
                    if other.model_spec == spec.model_spec:
                        continue
                    try:
                        _load(other.model_spec.name, device)
                    except Exception:  # noqa: BLE001 - e.g. weights absent: the page says why
                        log.info("the background build of %s failed", other.name, exc_info=True)

            _warm_thread = threading.Thread(target=work, name="lpips-warm-up", daemon=True)
            _warm_thread.start()
        return _warm_thread
