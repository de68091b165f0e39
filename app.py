"""LPIPS Explorer: the Streamlit entry point.

Sets the page config once, draws the sidebar controls shared by every page (backbone, version,
lin/baseline, the device and weights line, the reference image) and runs the chosen page. The
sidebar and the page each run inside :func:`ui.error_boundary`: an unexpected exception becomes a
short message with the configuration, and its traceback goes to the server's log.
"""

import streamlit as st

from lpips_explorer.runtime.memory import freeze_long_lived, release_unused, start_periodic_release
from ui import links
from ui.boundary import error_boundary
from ui.models import start_warm_up
from ui.pair import init_state
from ui.study_client import student_frame
from ui.text import md_escape
from ui.widgets import sidebar

# An emoji, not a ":material/…:" icon: Streamlit's frontend fetches a Material favicon from
# fonts.gstatic.com, while an emoji favicon is an inline SVG (no request to an outside host).
st.set_page_config(page_title="LPIPS Explorer", page_icon="⚖️", layout="wide")

PAGES = [
    st.Page("app_pages/shift_vs_blur.py", title="Shift vs blur", icon=":material/school:", url_path="home",
            default=True),
    st.Page("app_pages/distortion_lab.py", title="Distortion lab", icon=":material/science:",
            url_path="distortion_lab"),
    st.Page("app_pages/conventions.py", title="Conventions", icon=":material/rule:", url_path="conventions"),
    st.Page("app_pages/inside_a_layer.py", title="Inside a layer", icon=":material/layers:",
            url_path="inside_a_layer"),
    st.Page("app_pages/debug_a_score.py", title="Debug a score", icon=":material/bug_report:",
            url_path="debug_a_score"),
    st.Page("app_pages/calibration_lab.py", title="Calibration lab", icon=":material/tune:",
            url_path="calibration_lab"),
    st.Page("app_pages/judge_it_yourself.py", title="Judge it yourself", icon=":material/how_to_vote:",
            url_path="judge_it_yourself"),
    st.Page("app_pages/score_a_dataset.py", title="Score a dataset", icon=":material/dataset:",
            url_path="score_a_dataset"),
    st.Page("app_pages/lpips_space.py", title="LPIPS space", icon=":material/scatter_plot:", url_path="lpips_space"),
    st.Page("app_pages/lpips_as_a_loss.py", title="LPIPS as a loss", icon=":material/trending_down:",
            url_path="lpips_as_a_loss"),
]

# Streamlit serves the default page at the root only ("/" ; its own url_path just has to be
# unique), so a hidden alias makes /shift_vs_blur open it too (links use that path).
ALIASES = {"shift_vs_blur": st.Page("app_pages/shift_vs_blur.py", title="Shift vs blur", icon=":material/school:",
                                    url_path="shift_vs_blur", visibility="hidden")}

# A student's study link (?study=CODE without the lecturer's key or view) gets nothing but the
# study: no navigation to wander into, no sidebar, no page title (the phone's screen is the study's).
STUDENT = ("study" in st.query_params and "key" not in st.query_params
           and st.query_params.get("view") != "lecturer")
page = st.navigation(PAGES + list(ALIASES.values()), position="hidden" if STUDENT else "sidebar")
# Any page opened with ?study=CODE shows the class study (students get "/?study=CODE"); the query
# parameters go along (the participant token p=, the lecturer key key=).
if "study" in st.query_params and page.url_path != "judge_it_yourself":
    st.switch_page(next(p for p in PAGES if p.url_path == "judge_it_yourself"), query_params=st.query_params.to_dict())
url_path = page.url_path or next(iter(ALIASES))  # the page's linkable path
start_warm_up()  # once per server: the default model built and run in a background thread
start_periodic_release()  # once per server: memory freed between runs (closed sessions) goes back too
if STUDENT:
    student_frame()
    try:
        with error_boundary(page.title):
            page.run()
    finally:
        release_unused()
        freeze_long_lived()
    st.stop()
link_notices: list[str] = []
with error_boundary("The link"):
    link_notices = links.read()  # before any widget: a link's state becomes the widgets' state
with error_boundary("The sidebar"):
    init_state()
    sidebar()
for notice in link_notices:
    st.warning(md_escape(notice), icon=":material/link_off:")
try:
    with error_boundary(page.title):
        page.run()
finally:  # also after st.stop(): the URL always describes the view
    with error_boundary("The link"):
        links.link_control(url_path, links.write(), served_path=page.url_path)
    # A rerun's activations (hundreds of MB at 512 px) are freed when it ends, but glibc keeps
    # freed memory in its arenas: give it back to the OS (benchmarks/memory.py measures this).
    release_unused()
    # Streamlit's full garbage collection after each run walks every object of torch, pandas,
    # Plotly…: freeze those once imported, so a slider step does not pay 0.25 s for them.
    freeze_long_lived()
