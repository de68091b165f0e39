"""Plotly figure builders: pure functions, data in, ``plotly.graph_objects.Figure`` out (no Streamlit)."""
