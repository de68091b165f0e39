"""Style rules the app adds to Streamlit's own widgets, so that what they show is never cut (issue 44).

Streamlit draws two widgets with text it may cut at a laptop's or a phone's width:

- a multiselect keeps its chosen options ("chips") on one line that scrolls sideways, so a chip
  past the field's width is cut (a "Sizes" field read ``256×25``): here the chips wrap onto more
  lines and the field grows to hold them;
- a file uploader cuts its line "Limit … per file • PNG, JPG, …" with an ellipsis in a narrow
  column: here the line wraps.

:func:`layout_css` adds the rules once per run (``app.py``'s sidebar draws it on every page); a
``<style>``-only ``st.html`` takes no room on the page. The selectors are Streamlit's
``data-testid`` attributes; ``tests/e2e/test_every_page.py`` finds anything cut or scrolling
sideways, so a Streamlit release that renames them shows up there.
"""

from __future__ import annotations

import streamlit as st

__all__ = ["LAYOUT_CSS", "layout_css"]

LAYOUT_CSS = """
[data-testid='stMultiSelectTagsContainer'] {
  flex-wrap: wrap; height: auto; overflow: visible; mask-image: none; -webkit-mask-image: none;
  padding-top: 2px; padding-bottom: 2px;
}
div:has(> [data-testid='stMultiSelectTagsContainer']) { height: auto; max-height: none; }
div:has(> div > [data-testid='stMultiSelectTagsContainer']) { height: auto; }
[data-testid='stFileUploaderDropzoneInstructions'] span { white-space: normal; }
"""


def layout_css() -> None:
    """Add :data:`LAYOUT_CSS` to the page (no element takes room: a style-only ``st.html``)."""
    st.html(f"<style>{LAYOUT_CSS}</style>")
