"""The class study's cached work on the server: the study store, a study's triplets, the class result.

Every cache here is server-wide, shared by the lecturer and every student: the store
(``st.cache_resource``, once per database URL, which creates or upgrades its schema), a study's
triplets with their images and metric values (``st.cache_resource``, read once per study and
``version``, the metrics its background job has computed so far) and the class's result
(``st.cache_data`` for at most a minute, recomputed when an answer arrives, since the number of
answers is part of its key). The store and the engine are passed unhashed; the database URL stands
for them in the keys. The browser side of the study is :mod:`ui.study_client`.
"""

from __future__ import annotations

import streamlit as st

from lpips_core.spec import standard_specs
from lpips_explorer.study import scoring
from lpips_explorer.study import store as study_store

__all__ = ["SPECS", "class_summary", "store", "triplets"]

#: What a study scores: every metric at its defaults, and each LPIPS baseline.
SPECS = standard_specs()


@st.cache_resource(show_spinner=False)
def store(_engine, url: str) -> study_store.StudyStore:
    return study_store.StudyStore(_engine)  # creates or upgrades the schema once per server and URL


@st.cache_resource(max_entries=32, show_spinner=False)
def triplets(_store: study_store.StudyStore, url: str, code: str, study_id: int,
             version: int = -1) -> list[study_store.TripletRow]:
    """A study's triplets: read once per server and ``version`` (the metrics computed so far by its
    background job in this process; -1 without one)."""
    return _store.triplets(_store.study(code))


@st.cache_data(ttl=60, max_entries=64, show_spinner=False)
def class_summary(_store: study_store.StudyStore, url: str, code: str, n_judgements: int,
                  version: int = -1) -> dict | None:
    """The class's results while it has ``n_judgements`` answers and ``version`` (the metrics
    computed so far) (shared by every session)."""
    study = _store.study(code)
    rows = triplets(_store, url, code, study.id, version)  # ready: the page prepared them before asking
    judged = _store.judgements(study)
    if not judged:
        return None
    dist = scoring.stored_distances([r.distances for r in rows])
    return scoring.summarize(dist, [r.family for r in rows], [(j.session, j.triplet, j.choice) for j in judged],
                             SPECS, seed=study.seed)
