"""LPIPS Explorer: the Streamlit entry point.

Sets the page config once, draws the sidebar controls shared by every page (backbone, version,
lin/baseline, the device and weights line, the reference image) and runs the chosen page. The
sidebar and the page each run inside :func:`ui.error_boundary`: an unexpected exception becomes a
short message with the configuration, and its traceback goes to the server's log.
"""

import streamlit as st

import ui

# An emoji, not a ":material/…:" icon: Streamlit's frontend fetches a Material favicon from
# fonts.gstatic.com, while an emoji favicon is an inline SVG (no request to an outside host).
st.set_page_config(page_title="LPIPS Explorer", page_icon="⚖️", layout="wide")

PAGES = [
    st.Page("app_pages/shift_vs_blur.py", title="Shift vs blur", icon=":material/school:", default=True),
    st.Page("app_pages/distortion_lab.py", title="Distortion lab", icon=":material/science:"),
    st.Page("app_pages/conventions.py", title="Conventions", icon=":material/rule:"),
    st.Page("app_pages/inside_a_layer.py", title="Inside a layer", icon=":material/layers:"),
    st.Page("app_pages/debug_a_score.py", title="Debug a score", icon=":material/bug_report:"),
    st.Page("app_pages/calibration_lab.py", title="Calibration lab", icon=":material/tune:"),
    st.Page("app_pages/judge_it_yourself.py", title="Judge it yourself", icon=":material/how_to_vote:"),
]

page = st.navigation(PAGES)
with ui.error_boundary("The sidebar"):
    ui.init_state()
    ui.sidebar()
with ui.error_boundary(page.title):
    page.run()
