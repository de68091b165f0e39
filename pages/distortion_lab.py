"""Placeholder until the page lands (issue 4 / 7)."""

import streamlit as st

st.title("distortion_lab".replace("_", " ").capitalize())
st.info("This page is being built.")
