"""A page's interactive part as an ``st.fragment``: a widget inside it reruns only that part.

On a full run (``app.py`` running the page) the fragment runs as part of the page, and app.py
mirrors the URL and releases memory after it as for any page. When one of its own
widgets changes, Streamlit reruns the fragment alone: the sidebar, the page's header and
everything else are neither recomputed nor re-sent, and the browser leaves them as they are.
For that rerun this module does what app.py does after a page: the URL's query parameters
(:func:`ui.links.write`) and the memory release. The error boundary is applied inside the
fragment on every run, because Streamlit handles an exception leaving a fragment itself.

Measured on the Distortion lab's blur slider (Chromium, 2-core CPU, median of 8 steps): a step
went from ~1.0 s to ~0.84 s, the script's own time from 0.63–0.80 s to 0.50–0.59 s and the
browser's renderer CPU from 0.65 to 0.58 s.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from lpips_explorer.runtime.memory import freeze_long_lived, release_unused

from . import links
from .boundary import error_boundary


def fragment_rerun() -> bool:
    """Whether this script run is a fragment's own rerun (not a run of the whole app)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def page_fragment(where: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a part of a page as an ``st.fragment``. Its arguments are Streamlit's: a rerun of
    the fragment alone calls it with those of the last full run.

    Args:
        where: the page's title, named by the error boundary's message.

    When the URL changed and the sidebar's "Link to this view" is open, the whole app reruns
    once so that the link it shows is the new one.
    """

    def decorate(body: Callable[..., None]) -> Callable[..., None]:
        @st.fragment
        @functools.wraps(body)
        def run(*args: Any, **kwargs: Any) -> None:
            alone = fragment_rerun()  # else a full run, after which app.py does the rest
            before = st.session_state.get(links._LAST)
            try:
                # Inside the fragment on every run: Streamlit shows an exception that leaves a
                # fragment as its own error element (with the traceback), before app.py's boundary.
                with error_boundary(where):
                    body(*args, **kwargs)
            finally:
                if alone:
                    with error_boundary("The link"):
                        links.write()  # remembers what it wrote in links._LAST
                    release_unused()
                    freeze_long_lived()
            if alone and st.session_state.get(links.LINK_OPEN) and st.session_state.get(links._LAST) != before:
                st.rerun(scope="app")

        return run

    return decorate
