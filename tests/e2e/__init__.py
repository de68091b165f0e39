"""Browser end-to-end tests: the real ``streamlit run app.py`` driven by Chromium (issue 6).

A package so that its ``conftest.py`` and helpers do not collide with ``tests/conftest.py``.
"""
