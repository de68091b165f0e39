"""Placeholder until the page lands (issue 4 / 7)."""

import streamlit as st

st.title("inside_a_layer".replace("_", " ").capitalize())
st.info("This page is being built.")
