"""Placeholder until the page lands (issue 4 / 7)."""

import streamlit as st

st.title("debug_a_score".replace("_", " ").capitalize())
st.info("This page is being built.")
