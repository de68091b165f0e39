"""The error boundary every page runs in: a short message for the user, the traceback in the log.

``app.py`` wraps ``page.run()`` (and the sidebar) in :func:`error_boundary`. Streamlit's control
flow (``st.rerun``, ``st.stop``, ``st.switch_page`` raise ``RerunException`` / ``StopException``,
and a fragment's handled error ``FragmentHandledException``) passes through untouched.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import streamlit as st
from streamlit.errors import FragmentHandledException
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from . import state
from .text import config_summary, page_error_message

log = logging.getLogger("lpips_explorer.ui")

#: Exceptions that are Streamlit's control flow, not errors: always re-raised.
CONTROL_FLOW: tuple[type[BaseException], ...] = (ScriptControlException, FragmentHandledException)


def _config_text(*, escape: bool) -> str:
    """The session's configuration (Markdown-escaped for the page, raw for the log); a fallback if
    even that cannot be read."""
    try:
        from .models import device_name, sidebar_spec

        return config_summary(sidebar_spec(), device_name(), st.session_state.get(state.REF_NAME), escape=escape)
    except Exception:  # the message must not fail in turn
        return "unavailable"


@contextmanager
def error_boundary(where: str) -> Iterator[None]:
    """Run the ``with`` block; on an exception show a short ``st.error`` (what failed, the
    exception's type, the configuration) and log the traceback on the server.

    The exception's text and traceback never reach the user (they may hold server paths).
    ``where`` names what is running (a page's title), shown in the message and the log.
    """
    try:
        yield
    except CONTROL_FLOW:
        raise
    except Exception as exc:
        log.exception("%s raised %s (configuration: %s)", where, type(exc).__name__, _config_text(escape=False))
        st.error(page_error_message(where, exc, _config_text(escape=True)), icon=":material/error:")
