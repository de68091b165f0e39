"""LPIPS Explorer: Streamlit entry point (the full navigation lands with the app issue)."""

import streamlit as st

st.set_page_config(page_title="LPIPS Explorer", layout="wide")
st.title("LPIPS Explorer")
st.write("The exact LPIPS engine is in `lpips_core`; the pages are being built.")
