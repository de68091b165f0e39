"""The Streamlit side of LPIPS Explorer: what ``app.py`` and the pages share.

- :mod:`ui.state`: session-state keys as named constants.
- :mod:`ui.text`: pure text helpers (escaping, numbers, labels, verdicts); no Streamlit.
- :mod:`ui.choices`: the app's choices (the default configuration, reference sources, the extra
  metrics, upload keys); no Streamlit.
- :mod:`ui.models`: the one model getter (keyed by spec), weights status, the sidebar's configuration.
- :mod:`ui.pair`: the shared reference image and the distorted pair the analysis pages study.
- :mod:`ui.widgets`: the sidebar, the reference picker, the extra-metrics picker.
- :mod:`ui.boundary`: the error boundary each page runs in.
- :mod:`ui.links`: the view mirrored in the URL's query parameters (links that reproduce it).
- :mod:`ui.fragments`: a page's interactive part as an ``st.fragment`` (its widgets rerun it alone).
- :mod:`ui.sessions`: folders a session owns (deleted when it ends) and the server's heavy-job slots.
- :mod:`ui.study_client`: the class study's student page in the browser (the answer guard, the
  kept token) and its frame (:func:`ui.study_client.student_frame`).
- :mod:`ui.layout`: style rules that keep Streamlit's multiselect chips and uploader line whole.
- :mod:`ui.diversity`: the reference sets' diversities that LPIPS space shows a set's own beside.

Pages and ``app.py`` import each name from the submodule that defines it
(``from ui.text import md_escape``, ``from ui import links``): this package exports nothing
itself, so go-to-definition lands on the definition, and ``import ui.text`` (or ``ui.state``,
``ui.choices``) does not import Streamlit. All computation happens in ``lpips_core``.
"""
