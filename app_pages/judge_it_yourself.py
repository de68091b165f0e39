"""Judge it yourself: a 2AFC study a whole class can run, then each metric scored against the class.

A lecturer creates a study (number of triplets, distortion families, seed; patches from the sample
photos, a synthetic texture or an uploaded image) and gets a short code; students open the app
with ``?study=CODE`` and all see the same triplets, one at a time: a reference patch between two
distorted copies, answered with a click or the keys 1 / 2 / 0 (Streamlit's built-in button
shortcuts). Answers go to a database through ``st.connection("sql")``: by default a SQLite file
``study.db`` in ``$LPIPS_EXPLORER_DATA`` (else ``data/`` beside ``app.py``), or any SQLAlchemy URL
set as ``[connections.sql] url = ...`` in ``.streamlit/secrets.toml``. The results score every
metric of the registry with BAPPS' 2AFC convention (:mod:`lpips_explorer.study.scoring`).

All computation is in :mod:`lpips_explorer.study`; this file reads widgets and draws results.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import ui
from lpips_core.cells import frame_to_csv
from lpips_core import WeightsUnavailable, metric_registry
from lpips_core.images import ImageLoadError, image_to_png_bytes, load_image
from lpips_explorer.study import scoring
from lpips_explorer.study import store as study_store
from lpips_explorer.study import triplets as T

log = logging.getLogger("lpips_explorer.study")
DATA_ENV = "LPIPS_EXPLORER_DATA"
DATA_DIR = Path(__file__).resolve().parents[1] / "data"
SCALE = 5  # a 64 px patch shown at 320 px, nearest neighbour (every pixel a crisp 5 × 5 block)
SESSION, SHOWN, LAST, ERROR = "study_session", "study_shown", "study_last", "study_error"
CHOICE_TEXT = {0: "1 is closer", 1: "2 is closer", scoring.CANT_TELL: "can't tell"}
SOURCES = ("Sample photos", "Synthetic texture", "An uploaded image")


# --------------------------------------------------------------------------- the database
def _secrets_url() -> bool:
    """Whether ``.streamlit/secrets.toml`` configures ``[connections.sql]`` (then it wins)."""
    try:
        if not st.secrets.load_if_toml_exists():
            return False
        section = st.secrets.get("connections", {})
        return bool(section and section.get("sql"))
    except Exception:  # an unreadable secrets file: fall back to the local database
        return False


@st.cache_resource(show_spinner=False)
def _store(_engine, url: str) -> study_store.StudyStore:
    return study_store.StudyStore(_engine)  # creates or upgrades the schema once per server and URL


def get_store() -> tuple[study_store.StudyStore, str]:
    """The study store and where it lives (for the caption). Kwargs passed to ``st.connection``
    override ``secrets.toml``, so the default URL is passed only when the secrets name none."""
    if _secrets_url():
        conn = st.connection("sql", type="sql")
        where = "the database configured in .streamlit/secrets.toml"
    else:
        folder = os.environ.get(DATA_ENV) or str(DATA_DIR)
        conn = st.connection("sql", type="sql", url=study_store.sqlite_url(folder))
        where = f"SQLite file {Path(folder) / 'study.db'}"
    engine = conn.engine
    return _store(engine, engine.url.render_as_string(hide_password=True)), where


# --------------------------------------------------------------------------- triplets and metrics
@st.cache_data(max_entries=1024, show_spinner=False)
def _render(recipe: str, _store: study_store.StudyStore) -> T.Triplet:
    return T.render(recipe, uploads=_store.get_image)


def _big(img: np.ndarray) -> np.ndarray:
    return np.repeat(np.repeat(img, SCALE, axis=0), SCALE, axis=1)


@st.cache_resource(show_spinner="Loading a metric…")
def _model(metric: str, net: str, lin: bool, device: str):
    return metric_registry.build(metric, net, lin=lin, device=device)


def _models() -> tuple[list[scoring.MetricVariant], dict, list[str]]:
    """Every variant, the models of the available learned ones, and a note for each unavailable one."""
    variants = scoring.metric_variants()
    models, notes = {}, []
    for v in variants:
        if not v.learned:
            continue
        ok, why = v.availability()
        if ok:
            try:
                models[v.key] = _model(v.metric, v.net, v.lin, ui.device_name())
                continue
            except (WeightsUnavailable, OSError, RuntimeError, ValueError) as exc:
                why = f"its weights could not be loaded ({type(exc).__name__})"
        notes.append(f"{v.label}: {why}")
    return variants, models, notes


@st.cache_data(max_entries=256, show_spinner="What each metric says…")
def _one_distances(recipe: str, _store: study_store.StudyStore) -> dict[str, tuple[float, float]]:
    variants, models, _ = _models()
    t = _render(recipe, _store)
    return scoring.triplet_distances(t.ref, t.p0, t.p1, variants, models)


@st.cache_data(max_entries=16, show_spinner="Scoring every triplet with every metric…")
def _study_distances(recipes: tuple[str, ...], _store: study_store.StudyStore) -> dict[str, list[list[float]]]:
    variants, models, _ = _models()
    d = scoring.study_distances([_render(r, _store) for r in recipes], variants, models)
    return {k: [list(map(float, a)), list(map(float, b))] for k, (a, b) in d.items()}


# --------------------------------------------------------------------------- answering
def _answer(store: study_store.StudyStore, study: study_store.Study, session: str, index: int, choice: int) -> None:
    shown = st.session_state.get(SHOWN)
    ms = round((time.monotonic() - shown[2]) * 1000) if shown and shown[:2] == (study.code, index) else None
    try:
        store.submit(study, session, index, choice, ms)
    except study_store.StoreBusy as exc:
        st.session_state[ERROR] = str(exc)
        return
    st.session_state[LAST] = (study.code, index, choice)


def _prefers_text(p: int) -> str:
    return {0: "1", 1: "2", -1: "tie"}[int(p)]


def _reveal(row: study_store.TripletRow, choice: int, store) -> None:
    d = _one_distances(row.recipe, store)
    lines = []
    for v in scoring.metric_variants():
        if v.key not in d:
            continue
        p = int(scoring.prefers([d[v.key][0]], [d[v.key][1]], higher_is_closer=v.higher_is_closer)[0])
        agrees = "—" if choice == scoring.CANT_TELL or p < 0 else ("yes" if p == choice else "no")
        lines.append({"metric": v.label, "copy 1": d[v.key][0], "copy 2": d[v.key][1],
                      "closer by the metric": _prefers_text(p), "agrees with you": agrees})
    st.markdown(f"**Triplet {row.index + 1}: you said {CHOICE_TEXT[choice]}.** What each metric said "
                "(a distance: smaller is closer; PSNR and SSIM: larger is closer):")
    st.dataframe(pd.DataFrame(lines), hide_index=True, width="stretch",
                 column_config={"copy 1": st.column_config.NumberColumn(format="%.4g"),
                                "copy 2": st.column_config.NumberColumn(format="%.4g")})


def _triplet_view(store, study, row: study_store.TripletRow, session: str) -> None:
    t = _render(row.recipe, store)
    if st.session_state.get(SHOWN, (None, None))[:2] != (study.code, row.index):
        # (code, index, when shown, pixel digest): the response time starts here
        st.session_state[SHOWN] = (study.code, row.index, time.monotonic(), t.digest())
    st.markdown("**Which copy is closer to the reference in the middle?**")
    cols = st.columns(3)
    for col, img, cap in zip(cols, (t.p0, t.ref, t.p1), ("1", "Reference", "2")):
        col.image(_big(img), caption=cap, width=64 * SCALE)
    b = st.columns(3)
    for col, choice, label, key in ((b[0], 0, "1 is closer", "1"), (b[1], scoring.CANT_TELL, "Can't tell", "0"),
                                    (b[2], 1, "2 is closer", "2")):
        col.button(label, key=f"study_choice_{choice}", shortcut=key, on_click=_answer, width="stretch",
                   args=(store, study, session, row.index, choice), help=f"or press {key}")


# --------------------------------------------------------------------------- results
def _fmt_rows(block: dict | None) -> dict[str, dict]:
    if block is None:
        return {}
    return {m["key"]: m for m in block["metrics"]} | {"ceiling": block["ceiling"]}


def _results(store, study, rows, session: str) -> None:
    st.header("Results")
    judged = store.judgements(study)
    if not judged:
        st.info("No answers yet.")
        return
    variants, _, notes = _models()
    dist = _study_distances(tuple(r.recipe for r in rows), store)
    res = scoring.summarise(dist, [r.family for r in rows], [(j.session, j.triplet, j.choice) for j in judged],
                            variants, session=session, seed=study.seed)
    cls, you = _fmt_rows(res["class"]), _fmt_rows(res["you"])
    st.caption(f"Class: {res['n_judges']} judge{'s' * (res['n_judges'] != 1)}, {res['n_judgements']} judgements on "
               f"{len(res['per_triplet'])} of {res['n_triplets']} triplets. 2AFC agreement as in BAPPS: per "
               "triplet, the fraction of judges choosing the copy the metric puts closer (0.5 on a metric tie; "
               "“can't tell” counts half to each side). Intervals: 95% bootstrap over triplets.")
    table = []
    for key, label in [(v.key, v.label) for v in variants if v.key in dist] + [("ceiling", "Human ceiling")]:
        c, y = cls.get(key, {}), you.get(key, {})
        mine = key != "ceiling"  # one judge agrees with themself: no ceiling for "you"
        table.append({"metric": label, "you": y.get("score") if mine else None,
                      "you low": y.get("low") if mine else None, "you high": y.get("high") if mine else None,
                      "class": c.get("score"), "class low": c.get("low"), "class high": c.get("high")})
    fmt = {k: st.column_config.NumberColumn(format="%.3f") for k in table[0] if k != "metric"}
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", column_config=fmt,
                 height=36 * (len(table) + 1) + 3)  # every row visible, no inner scrolling
    st.caption("Human ceiling: the mean over triplets of p² + (1 − p)², p the fraction of the class choosing "
               "copy 2 — how often a judge drawn from this class agrees with it. With one judge it is 1.")
    for note in notes:
        st.caption(f":material/cloud_off: Not scored — {ui.md_escape(note)}")

    by_family = res["class"]["by_family"]
    if len(by_family) > 1:
        st.subheader("By distortion family (class)")
        labels = {v.key: v.label for v in variants} | {"ceiling": "Human ceiling"}
        fam = pd.DataFrame({f: {labels[k]: e[k] for k in [*dist, "ceiling"] if k in e} for f, e in by_family.items()})
        fam = fam.reindex([labels[k] for k in [*labels] if labels[k] in fam.index])
        st.dataframe(fam.reset_index(names="metric"), hide_index=True, width="stretch",
                     column_config={f: st.column_config.NumberColumn(format="%.3f") for f in by_family})

    worst = sorted((p for p in res["per_triplet"] if "mse" in p["scores"]), key=lambda p: p["scores"]["mse"])[:3]
    worst = [p for p in worst if p["scores"]["mse"] < 0.5]
    if worst:
        st.subheader("Where MSE and the class disagreed most")
        for p in worst:
            row = rows[p["index"]]
            t = _render(row.recipe, store)
            d0, d1 = dist["mse"][0][p["index"]], dist["mse"][1][p["index"]]
            cols = st.columns(3)
            for col, img, cap in zip(cols, (t.p0, t.ref, t.p1), ("1", "Reference", "2")):
                col.image(_big(img), caption=cap, width=64 * 3)
            st.caption(f"Triplet {p['index'] + 1} ({row.family}): {p['h']:.0%} of {p['n']} judges chose copy 2; "
                       f"MSE puts copy {1 if d0 < d1 else 2} closer (MSE {d0:.4g} vs {d1:.4g}), agreeing with "
                       f"{p['scores']['mse']:.0%} of the class.")

    frame = pd.DataFrame([{"study": study.code, "session": j.session, "triplet": j.triplet + 1,
                           "family": rows[j.triplet].family, "choice": j.choice, "answer": CHOICE_TEXT[j.choice],
                           "response_ms": j.response_ms, "time_utc": j.created.isoformat()} for j in judged])
    out = {"study": {"code": study.code, "n_triplets": study.n_triplets, "families": list(study.families),
                     "seed": study.seed, "reveal": study.reveal}, "not_scored": notes, **res}
    c1, c2 = st.columns(2)
    c1.download_button("Judgements (CSV)", frame_to_csv(frame), f"study-{study.code}-judgements.csv",
                       "text/csv", key="study_dl_csv")
    c2.download_button("Results (JSON)", json.dumps(out, indent=1, default=str), f"study-{study.code}-results.json",
                       "application/json", key="study_dl_json")


# --------------------------------------------------------------------------- creating and joining
def _create_form(store, *, expanded: bool) -> None:
    with st.expander("Create a study (lecturer)", expanded=expanded):
        c1, c2, c3 = st.columns(3)
        n = c1.number_input("Triplets", 1, 200, 20, key="study_n")
        seed = c2.number_input("Seed", 0, 2**31 - 1, 0, key="study_seed")
        source = c3.radio("Patches from", SOURCES, key="study_source")
        families = st.multiselect("Distortion families", T.FAMILIES, default=["shift-vs-blur"], key="study_families",
                                  help="single families put the same distortion on both copies at close "
                                       "strengths; mixed ones (shift-vs-blur, …) one on each side")
        upload = None
        if source == SOURCES[2]:
            upload = st.file_uploader("Image", type=list(ui.UPLOAD_TYPES), key="study_upload")
        each = st.toggle("Show what each metric said after every answer (off: only at the end)", value=True,
                         key="study_reveal_each")
        if not st.button("Create the study", key="study_create", type="primary"):
            return
        if not families:
            st.error("Choose at least one distortion family.")
            return
        uploads = {}
        if source == SOURCES[0]:
            images = T.sample_ids()
        elif source == SOURCES[1]:
            images = [f"synth:texture:{int(seed)}"]
        else:
            if upload is None:
                st.error("Upload an image first.")
                return
            try:
                png = image_to_png_bytes(load_image(upload, max_side=T.SOURCE_SIDE).array)
            except ImageLoadError as exc:
                st.error(ui.md_escape(str(exc)))
                return
            uid = T.upload_id(png)
            uploads[uid] = png
            images = [uid]
        try:
            recipes = T.make_recipes(int(n), families=families, seed=int(seed), images=images, uploads=uploads)
        except ValueError as exc:
            st.error(ui.md_escape(str(exc)))
            return
        for uid, png in uploads.items():
            store.put_image(uid, png)
        digests = [T.render(r, uploads=uploads).digest() for r in recipes]
        study = store.create_study(recipes, families=families, seed=int(seed), reveal="each" if each else "end",
                                   digests=digests)
        st.query_params["study"] = study.code
        st.rerun()


def _join_form() -> None:
    with st.form("study_join", border=False):
        code = st.text_input("Study code", key="study_join_code", placeholder="e.g. K7QW3M")
        if st.form_submit_button("Join") and code.strip():
            st.query_params["study"] = code.strip().upper()
            st.rerun()


# --------------------------------------------------------------------------- the page
def main() -> None:
    st.title("Judge it yourself")
    st.caption("LPIPS was fitted to people's answers to one question: which of two distorted copies is closer "
               "to a reference? Answer it yourself, then see which metric agrees with you and with your class.")
    try:
        store, where = get_store()
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server: say so, keep the app alive
        st.error(f"The study database could not be opened ({type(exc).__name__}). Check "
                 f"`[connections.sql]` in .streamlit/secrets.toml or ${DATA_ENV}; the server's log has the details.")
        log.exception("the study database could not be opened")
        return
    session = st.session_state.setdefault(SESSION, uuid.uuid4().hex)
    code = st.query_params.get("study")
    study = store.study(code) if code else None
    if code and study is None:
        st.error(f"No study has the code {ui.md_escape(ui.links.shown(code, quote=False))}.")
    if study is None:
        _join_form()
        _create_form(store, expanded=True)
        st.caption(f"Answers are stored in the {ui.md_escape(where)}, with an anonymous session id only.")
        return

    rows = store.triplets(study)
    st.subheader(f"Study {study.code}")
    st.caption(f"{study.n_triplets} triplets · {', '.join(study.families)} · metrics shown "
               f"{'after every answer' if study.reveal == 'each' else 'at the end'} · students join with "
               f"`?study={study.code}` after the app's address. Anonymous: no name is asked or kept.")
    if err := st.session_state.pop(ERROR, None):
        st.error(err)
    answered = store.answered(study, session)
    st.progress(len(answered) / len(rows), text=f"{len(answered)} of {len(rows)} answered")
    remaining = [r for r in rows if r.index not in answered]
    if remaining:
        st.caption(f"Triplet {remaining[0].index + 1} of {len(rows)} · keys: 1, 2, or 0 for can't tell")
        _triplet_view(store, study, remaining[0], session)
    else:
        st.success(f"You have answered all {len(rows)} triplets. Thank you!")
    last = st.session_state.get(LAST)
    if study.reveal == "each" and last and last[0] == study.code and last[1] in answered:
        _reveal(rows[last[1]], last[2], store)  # below the next triplet: the images stay at the top
    lecturer = st.toggle("Show the class results now (lecturer)", key="study_lecturer",
                         help="results appear for everyone once they have answered every triplet")
    if not remaining or lecturer:
        if st.button("Refresh the class results", key="study_refresh"):
            pass  # a rerun reads the judgements again
        _results(store, study, rows, session)
    if st.button("Leave this study", key="study_leave"):
        del st.query_params["study"]
        st.rerun()
    _create_form(store, expanded=False)


main()
