"""The Streamlit side of LPIPS Explorer: what ``app.py`` and the pages share.

- :mod:`ui.state`: session-state keys as named constants.
- :mod:`ui.text`: pure text helpers (escaping, numbers, labels, verdicts); no Streamlit.
- :mod:`ui.choices`: the app's choices (the default configuration, reference sources, the extra
  metrics, upload keys); no Streamlit.
- :mod:`ui.models`: the one model getter (keyed by spec), weights status, the sidebar's configuration.
- :mod:`ui.pair`: the shared reference image and the distorted pair the analysis pages study.
- :mod:`ui.widgets`: the sidebar, the reference picker, the extra-metrics picker.
- :mod:`ui.boundary`: the error boundary each page runs in.
- :mod:`ui.links`: the view mirrored in the URL's query parameters (links that reproduce it).
- :mod:`ui.fragments`: a page's interactive part as an ``st.fragment`` (its widgets rerun it alone).
- :mod:`ui.sessions`: folders a session owns (deleted when it ends) and the server's heavy-job slots.
- :mod:`ui.study_client`: the class study's student page in the browser (the answer guard, the
  kept token) and its frame (:func:`ui.study_client.student_frame`).
- :mod:`ui.layout`: style rules that keep Streamlit's multiselect chips and uploader line whole.
- :mod:`ui.diversity`: the reference sets' diversities that LPIPS space shows a set's own beside.

Pages import what they use from here (``import ui``; ``ui.reference()``, ``ui.md_escape(...)``).
All computation happens in ``lpips_core``. The names are loaded on first use, so that
``import ui.text`` (or ``ui.state``, ``ui.choices``) does not import Streamlit.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name → the submodule that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("state", "text", "choices", "models", "pair", "widgets", "boundary", "links", "fragments",
                     "sessions", "study_client"), ""),
    "student_frame": "study_client",
    **dict.fromkeys(("heavy_job", "scratch_folder", "scratch_release", "scratch_settle"), "sessions"),
    "page_fragment": "fragments",
    "error_boundary": "boundary",
    **dict.fromkeys(("CPU_EXTRAS", "DEFAULT_CHAIN", "DEFAULT_SAMPLE", "DEFAULT_SPEC", "EXTRA_SPECS", "SAMPLES_DIR",
                     "SYNTHETIC", "UPLOAD_TYPES", "WORKING_SIDES", "default_extras", "upload_key"), "choices"),
    **dict.fromkeys(("availability", "available_nets", "device_name", "get_model", "get_models", "sidebar_spec",
                     "start_warm_up"), "models"),
    **dict.fromkeys(("apply_chain", "current_pair", "init_state", "reference", "sample_names", "set_reference",
                     "working_side"), "pair"),
    **dict.fromkeys(("NET_LABELS", "chain_key", "chain_label", "distance_text", "fmt", "md_escape", "md_frame", "plotly_escape",
                     "png_data_url", "significant", "signed", "size_hw", "size_text", "verdict"), "text"),
    **dict.fromkeys(("extras_picker", "reference_picker", "sidebar"), "widgets"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ui' has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name] or name}", __name__)
    value = module if not _EXPORTS[name] else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
