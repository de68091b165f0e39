"""lpips_explorer: the lessons, figures, class study and diagnostics that LPIPS Explorer's pages are built from.

It sits above the metric engine, :mod:`lpips_core` (which never imports it), and below the
Streamlit app (``app.py``, ``app_pages/``, ``ui/``): it may use Plotly and SQLAlchemy, never
Streamlit. Modules: ``distortions`` and ``synth`` (what the pages do to images), ``shift_blur``,
``toy_layer``, ``calibration`` and ``loss_lab`` (the lessons), ``figures`` (pure Plotly
builders), ``study`` (the class study's triplets, scoring and store), ``diagnostics`` (Debug a
score), ``demo_dataset`` (the dataset page's demo set); ``runtime`` holds the server's plumbing
(scratch folders, heavy-job slots, after-run memory housekeeping).
"""
