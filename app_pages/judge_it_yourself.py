"""Judge it yourself: a 2AFC study a whole class can run, then each metric scored against the class.

Three people use this page (docs/class-study.md is the guide):

- the **lecturer** creates a study (number of triplets, distortion families, seed; patches from the
  sample photos, a synthetic texture or an uploaded image). Every triplet's images and the pixel
  metrics are computed then (about a second, progress at the top of the page) and stored; the
  learned metrics follow in the background (:func:`lpips_explorer.study.prepare.start_metrics`).
  The lecturer first gets the lecturer link ``?study=CODE&key=KEY`` on a step of its own (shown
  once; the database keeps its hash; "I have kept it"), then the projector view
  ``?study=CODE&view=lecturer``: the student link with a copy button and a QR code, the class
  result live, release and close. The key stays in the session, never on the projected screen or
  in the address; the kept link opens the lecturer view again;
- **students** open ``/?study=CODE`` (any page of the app with ``study=`` comes here; ``app.py``
  then draws nothing but the study: no navigation, no sidebar): the page adds their own token
  ``p=…`` to the address and keeps it in a cookie (:mod:`ui.study_client`), so a reload, the back
  button or the bare link opened again keeps their place; each answer names the triplet it was
  shown for and is one database write and a redraw of this part of the page (an ``st.fragment``);
- **whoever runs the server** chooses the database (``[connections.sql]``, else SQLite in
  ``$LPIPS_EXPLORER_DATA`` or ``data/``: :func:`lpips_explorer.environment.data_dir`) and who may create studies (``[study] admin_key`` in
  ``.streamlit/secrets.toml``).

All computation is in :mod:`lpips_explorer.study` and :mod:`lpips_explorer.figures.study`; this
file reads widgets and draws.
"""

from __future__ import annotations

import html
import json
import logging
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from lpips_core.images import ImageLoadError, image_to_png_bytes, load_image
from lpips_explorer import environment
from lpips_explorer.figures.study import agreement_chart, lin_weights_chart
from lpips_explorer.study import access
from lpips_explorer.study import fit as class_fit
from lpips_explorer.study import prepare as prep
from lpips_explorer.study import present, scoring
from lpips_explorer.study import store as study_store
from lpips_explorer.study import triplets as T
from ui import links
from ui import study as study_cache
from ui import study_client
from ui.choices import UPLOAD_TYPES
from ui.models import availability, get_model, get_models
from ui.study import SPECS
from ui.text import md_escape

log = logging.getLogger("lpips_explorer.study")
DATA_ENV = "LPIPS_EXPLORER_DATA"  # named in the message shown when the database cannot be opened
URL_PATH = "judge_it_yourself"
#: Session-state keys: when the shown triplet appeared, the last answer, an answer's error, a new key.
SHOWN, LAST, ERROR, NEW_KEY = "study_shown", "study_last", "study_error", "study_new_key"
#: … an answer acknowledged without a change, how many times the answer view was drawn, this tab's
#: participant token per study, the lecturer keys this session holds per study.
NOTICE, DRAWS, TOKENS, KEYS_HELD = "study_notice", "study_draws", "study_tokens", "study_keys"
NOT_SAVED = "Not saved \u2014 press again."
SOURCES = ("Sample photos", "Synthetic texture", "An uploaded image")
LIVE_S = 3.0  # the lecturer's results refresh every LIVE_S seconds
WAIT_S = 5.0  # a student who has finished checks every WAIT_S seconds whether the results are out
WATCH_S = 15.0  # a student who answers checks every WATCH_S seconds whether the study was closed
KEYS = {0: "1", scoring.CANT_TELL: "0", 1: "2"}  # stored choice → keyboard shortcut


# --------------------------------------------------------------------------- settings and the database
def _secrets() -> dict:
    """``.streamlit/secrets.toml`` as a dict ({} when absent or unreadable)."""
    try:
        if not st.secrets.load_if_toml_exists():
            return {}
        return st.secrets.to_dict()
    except Exception:  # an unreadable secrets file: the defaults
        log.warning("could not read .streamlit/secrets.toml; using the defaults", exc_info=True)
        return {}


def _settings() -> dict:
    """``[study]`` of the secrets: ``admin_key`` (creating needs it), ``public_url`` (the students' address)."""
    section = _secrets().get("study", {})
    return section if isinstance(section, dict) else {}


def get_store() -> tuple[study_store.StudyStore, str]:
    """The study store and where it lives (shown to the lecturer only). Kwargs passed to
    ``st.connection`` override ``secrets.toml``, so the default URL is passed only when the secrets name none."""
    section = _secrets().get("connections", {})
    sql = section.get("sql") if isinstance(section, dict) else None
    if isinstance(sql, dict) and sql:
        # url= given explicitly (when the section has one) also reaches st.connection where the
        # secrets were supplied some other way than the file (Streamlit's AppTest, for one)
        conn = st.connection("sql", type="sql", **({"url": sql["url"]} if sql.get("url") else {}))
        where = "the database configured as [connections.sql] in .streamlit/secrets.toml"
    else:
        folder = str(environment.data_dir())
        conn = st.connection("sql", type="sql", url=study_store.sqlite_url(folder))
        where = f"the SQLite file {Path(folder).resolve() / 'study.db'}"
    engine = conn.engine
    return study_cache.store(engine, engine.url.render_as_string(hide_password=True)), where


#: Computed when the study is created (the rest, the learned metrics, in the background).
PIXEL_SPECS = [s for s in SPECS if not s.learned]


def _prepare(recipes, uploads) -> list[prep.Prepared]:
    """Every triplet's PNGs and metric values, with a progress bar (the one wait of a study)."""
    bar = st.progress(0.0, text="Loading the metrics…")
    models = get_models([s for s in SPECS if s.learned], quiet=True)  # unavailable ones are left out

    def progress(done: int, total: int) -> None:
        bar.progress(done / total,
                     text=f"Preparing the study: {done} of {total} steps (the triplets, then each metric)")

    out = prep.prepare(recipes, SPECS, models, uploads=uploads, progress=progress)
    bar.empty()
    return out


def _url(store: study_store.StudyStore) -> str:
    return store.engine.url.render_as_string(hide_password=True)


def _job_key(store: study_store.StudyStore, study: study_store.Study) -> str:
    return f"{_url(store)}#{study.code}"


def metrics_job(store, study) -> prep.MetricsJob | None:
    """The background job computing this study's learned metrics in this process, if one was started."""
    return prep.metrics_job(_job_key(store, study))


def _version(store, study) -> int:
    job = metrics_job(store, study)
    return -1 if job is None else job.done


def _load_model(spec):
    """A learned metric's model for the background job (``None`` when its weights are not here)."""
    try:
        return get_model(spec, quiet=True)
    except Exception:  # noqa: BLE001 - the job lists it as not computed; the log has why
        log.warning("the model of %s could not be built", spec.name, exc_info=True)
        return None


def _missing_metrics(rows) -> list:
    """The learned metrics this server can compute that the study's triplets do not have yet."""
    have = set(rows[0].distances or {}) if rows else set()
    return [s for s in SPECS if s.learned and s.name not in have and availability(s)[0]]


def start_metrics(store, study, rows) -> prep.MetricsJob | None:
    """Start computing the learned metrics the study lacks, in the background (once per process);
    ``metrics_pending`` is cleared when they are all stored."""
    missing = _missing_metrics(rows)

    def save(name: str, values: dict) -> None:
        store.add_distances(study, {i: {name: v} for i, v in values.items()})

    def done() -> None:
        store.metrics_done(study)

    return prep.start_metrics(_job_key(store, study), [(r.ref_png, r.p0_png, r.p1_png) for r in rows], missing,
                              _load_model, save, done)


def study_rows(store: study_store.StudyStore, study: study_store.Study) -> list[study_store.TripletRow]:
    """The study's triplets with their images and metric values; a study from an older version
    gets them computed now (once) and stored; learned metrics a study lacks (it was created a
    moment ago, or the server restarted while computing them) are computed in the background."""
    rows = study_cache.triplets(store, _url(store), study.code, study.id, _version(store, study))
    if all(r.ready for r in rows):
        if study.metrics_pending and metrics_job(store, study) is None:
            start_metrics(store, study, rows)
        return rows
    missing = [r for r in rows if not r.ready]
    with st.status(f"Preparing {len(missing)} triplets of this study once…", expanded=True):
        done = _prepare([T.Recipe.from_json(r.recipe) for r in missing], store.get_image)
    store.fill_triplets(study, {r.index: (d.pngs, d.distances) for r, d in zip(missing, done)})
    study_cache.triplets.clear()
    return study_cache.triplets(store, _url(store), study.code, study.id, _version(store, study))


# --------------------------------------------------------------------------- results
def class_summary(store, study) -> dict | None:
    _, n = store.counts(study)
    return study_cache.class_summary(store, _url(store), study.code, n, _version(store, study))


def _class_results(store, study, rows, *, lecturer: bool) -> None:
    """The class result to project: the chart, the triplets where MSE and the class disagreed most."""
    res = class_summary(store, study)
    if res is None or res["class"] is None:
        st.info("No answers yet. The chart appears with the first answer and follows the class live."
                if lecturer else "No answers yet.")
        return
    # students get the compact chart (the names inside the plot: it fits a 360 px phone)
    st.plotly_chart(agreement_chart(res["class"], n_judges=res["n_judges"], compact=not lecturer),
                    key="study_chart", config={"displayModeBar": False})
    st.caption(f"{md_escape(present.judges_text(res['n_judges']))}, {res['n_judgements']} answers on "
               f"{len(res['per_triplet'])} of {res['n_triplets']} triplets. Each dot: the share of the class a "
               "metric agrees with (BAPPS' 2AFC score; \u201ccan't tell\u201d counts half to each copy), with its "
               "95% bootstrap interval over triplets. Blue: learned metrics; grey diamonds: MSE, PSNR, SSIM. "
               "Green band: the human ceiling, how often a judge drawn from this class agrees with it.")
    if res["unavailable"]:
        labels = {s.name: s.label for s in SPECS}
        st.caption("Not scored (weights not on this server): "
                   + ", ".join(md_escape(labels.get(k, k)) for k in res["unavailable"]))
    worst = sorted((p for p in res["per_triplet"] if "mse" in p["scores"]), key=lambda p: p["scores"]["mse"])[:3]
    worst = [p for p in worst if p["scores"]["mse"] < 0.5]
    if worst:
        st.subheader("Where MSE and the class disagreed most")
        for p in worst:
            row = rows[p["index"]]
            d0, d1 = row.distances["mse"]
            st.markdown(f"**Triplet {p['index'] + 1}** · {md_escape(row.family)}")
            st.html(present.triplet_html(row.ref_png, row.p0_png, row.p1_png, size="large", index=row.index))
            st.caption(f"{md_escape(present.votes_text(p['votes']))} MSE puts copy {1 if d0 < d1 else 2} closer "
                       f"(MSE {d0:.4g} against {d1:.4g}), agreeing with {p['scores']['mse']:.0%} of the class.")
    by_family = res["class"]["by_family"]
    if len(by_family) > 1:
        with st.expander("By distortion family"):
            labels = {s.name: s.label for s in SPECS} | {"ceiling": "Human ceiling"}
            keys = [m["key"] for m in res["class"]["metrics"]] + ["ceiling"]
            fam = pd.DataFrame([{"metric": labels[k], **{f: e.get(k) for f, e in by_family.items()}} for k in keys])
            st.dataframe(fam, hide_index=True, width="stretch",
                         column_config={f: st.column_config.NumberColumn(format="%.3f") for f in by_family})
    out = {"study": {"code": study.code, "n_triplets": study.n_triplets, "families": list(study.families),
                     "seed": study.seed, "reveal": study.reveal}, **res}
    st.download_button("Results (JSON)", lambda: json.dumps(out, indent=1, default=str),
                       f"study-{study.code}-results.json", "application/json", key="study_dl_json",
                       on_click="ignore")


# --------------------------------------------------------------------------- students
def _answer(store, study, participant: str, index: int, choice: int) -> None:
    """A button's callback: one database write, for the triplet the button was drawn with
    (``index``), taken only if it is still the participant's current triplet. Its outcome is kept
    for the redraw that follows."""
    shown = st.session_state.get(SHOWN)
    ms = round((time.monotonic() - shown[2]) * 1000) if shown and shown[:2] == (study.code, index) else None
    try:
        got = store.answer(study, participant, index, choice, ms)
    except (study_store.StoreBusy, study_store.StoreUnavailable):  # the lecturer's view says why
        st.session_state[ERROR] = NOT_SAVED  # one short line: the buttons stay on a phone's screen
        return
    except study_store.StudyClosed:
        st.session_state[ERROR] = "The lecturer has closed this study: it takes no more answers."
        return
    if got.stored:
        st.session_state[LAST] = (study.code, index)
    else:  # a second tap, a stale tab, a replayed message: acknowledged, nothing changed
        st.session_state[NOTICE] = f"Triplet {index + 1} was answered already: nothing changed."


def _pending(store, study) -> int:
    """How many learned metrics are still being computed for this study (0 when none)."""
    job = metrics_job(store, study)
    return 0 if job is None or job.finished else job.total - job.done


def _reveal(row: study_store.TripletRow, choice: int, *, pending: int = 0) -> None:
    st.markdown(f"**Triplet {row.index + 1}: you said {present.CHOICE_TEXT[choice]}.** What each metric said "
                "(a distance: smaller is closer; PSNR and SSIM: larger is closer):")
    st.table(pd.DataFrame(present.reveal_rows(row.distances, SPECS, choice)), hide_index=True)
    if pending:
        st.caption(f"{pending} learned metric{'s are' if pending > 1 else ' is'} still being computed: "
                   "they appear here in a minute or so.")


@st.fragment
def _answering(store, study, rows, participant: str) -> None:
    """The triplet, the three answers and (reveal "each") what the metrics said about the last one.
    A button reruns only this fragment: the answer's write, then this redraw.

    Laid out for a phone in a lecture hall: the progress line, the question, the three patches
    (sized from the window's height, :data:`present.ANSWER_FIT`) and the three buttons all fit a
    360 × 640 window; notices take the question's place; the rest comes below the buttons."""
    try:
        answered = store.answered(study, participant)
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        st.warning("The study's answers cannot be read right now: reload the page in a moment (your answers "
                   "are kept).", icon=":material/cloud_off:")
        return
    remaining = [r for r in rows if r.index not in answered]
    err = st.session_state.pop(ERROR, None)
    notice = st.session_state.pop(NOTICE, None)
    if err and "closed" in err:
        st.rerun(scope="app")
    if not remaining:
        st.rerun(scope="app")  # the last answer: the whole page becomes the results
    row = remaining[0]
    if st.session_state.get(SHOWN, (None, None))[:2] != (study.code, row.index):
        st.session_state[SHOWN] = (study.code, row.index, time.monotonic())  # the response time starts here
    draw = st.session_state[DRAWS] = st.session_state.get(DRAWS, 0) + 1  # the page's guard: "drawn again"
    st.progress(len(answered) / len(rows), text=f"Triplet {row.index + 1} of {len(rows)} · "
                                                f"{len(answered)} answered")
    if err:
        st.error(err, icon=":material/error:")
    elif notice:
        st.info(notice, icon=":material/done_all:")
    else:
        st.markdown("**Which copy is closer to the reference?**")
    st.html(present.triplet_html(row.ref_png, row.p0_png, row.p1_png, index=row.index, draw=draw,
                                 fit=present.ANSWER_FIT_NOTICE if err or notice else present.ANSWER_FIT))
    # Each button carries the triplet it was drawn with (in its key and its callback's arguments),
    # and the store takes an answer only for the participant's current triplet: a second tap, a
    # stale tab or a replayed message names a triplet already answered, and changes nothing. In
    # the browser, ui.study_client also holds the buttons between a press and the next drawing,
    # and ignores a held key's auto-repeat.
    with st.container(horizontal=True, gap="small", key="study_answers"):
        for choice, label in ((0, "1 is closer"), (scoring.CANT_TELL, "Can't tell"), (1, "2 is closer")):
            st.button(label, key=f"study_choice_{choice}_{row.index}", shortcut=KEYS[choice], on_click=_answer,
                      width="stretch", args=(store, study, participant, row.index, choice),
                      help=f"or press {KEYS[choice]}")
    st.caption("Keys: **1**, **2**, or **0** for can't tell.")
    last = st.session_state.get(LAST)
    if study.reveal == "each" and last and last[0] == study.code and last[1] in answered:
        _reveal(rows[last[1]], answered[last[1]], pending=_pending(store, study))


@st.fragment(run_every=WATCH_S)
def _watch(store, code: str) -> None:
    """While a student answers: every WATCH_S seconds, whether the lecturer has closed the study
    (then the page says so). It also makes the page rerun whole after the server restarts: the
    browser requests a full run on reconnecting only when the page has a fragment that reruns by
    itself, and the answer buttons' fragment exists only in the server process that drew them."""
    try:
        closed = store.study(code).closed is not None
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        return  # the database is away for a moment: the next look says
    if closed:
        st.rerun(scope="app")


@st.fragment(run_every=WAIT_S)
def _wait_for_results(store, code: str) -> None:
    """A finished student's page checks every few seconds whether the lecturer has released the results."""
    try:
        visible = store.study(code).class_visible
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        visible = False  # the database is away for a moment: the next look says
    if visible:
        st.rerun(scope="app")
    st.info("The class results appear here when your lecturer shows them.", icon=":material/hourglass_top:")


def _token(code: str) -> tuple[str, bool]:
    """The participant's token for study ``code``, and whether it is new: the link's ``p=``; else
    this tab's (the back button or a link without it in the same tab); else the browser's cookie
    (the bare link opened again in the same browser, :mod:`ui.study_client`); else a new one."""
    tokens = st.session_state.setdefault(TOKENS, {})
    token = st.query_params.get("p")
    if token is not None and not access.valid_token(token):
        st.warning("This link's participant token is malformed: it is not used.")
        token = None
    fresh = False
    if token is None:
        token = tokens.get(code)
    if token is None:
        kept = st.context.cookies.get(study_client.cookie_name(code))
        token = kept if access.valid_token(kept) else None
    if token is None:
        token, fresh = access.new_token(), True
    tokens[code] = token
    if st.query_params.get("p") != token:
        st.query_params["p"] = token  # a reload keeps it
    return token, fresh


def keeps_nothing() -> bool:
    """Whether this browser keeps no cookie: it sent none with its connection, not even the one
    Streamlit set when it served the page (its XSRF cookie; only known while that protection is on)."""
    return bool(st.get_option("server.enableXsrfProtection")) and "_streamlit_xsrf" not in st.context.cookies


def _student(store, study) -> None:
    token, fresh = _token(study.code)
    participant = access.participant_id(token)
    if fresh and keeps_nothing():  # the bare link opened again here would make a new judge: the lecturer sees how many
        try:
            store.mark_participant(study, participant, False)
        except (study_store.StoreBusy, study_store.StoreUnavailable):
            log.warning("a participant's browser could not be noted", exc_info=True)
    rows = study_rows(store, study)
    answered = store.answered(study, participant)
    if len(answered) < len(rows) and study.closed is None:
        _answering(store, study, rows, participant)
        _watch(store, study.code)
        _student_footer(study, rows, token)
        return
    if study.closed is not None and len(answered) < len(rows):
        st.warning(f"The lecturer has closed this study: you answered {len(answered)} of {len(rows)} triplets.")
    else:
        st.success(f"You have answered all {len(rows)} triplets. Thank you!")
    last = st.session_state.get(LAST)
    if study.reveal == "each" and last and last[0] == study.code and last[1] in answered:
        _reveal(rows[last[1]], answered[last[1]])
    if answered:
        dist = scoring.stored_distances([r.distances for r in rows])
        mine = scoring.summarize(dist, [r.family for r in rows], [(participant, i, c) for i, c in answered.items()],
                                 SPECS, n_boot=1)["class"]
        klass = None
        if study.class_visible:
            res = class_summary(store, study)
            klass = res["class"] if res else None
        st.subheader("Which metric agrees with you")
        st.table(pd.DataFrame(present.own_rows(mine, klass)), hide_index=True)
        st.caption(f"For each metric, the share of your {len(answered)} answers it agrees with (\u201ccan't tell\u201d "
                   "counts half)" + (", and of the whole class's." if klass else "."))
    if study.class_visible:
        st.header("The class")
        _class_results(store, study, rows, lecturer=False)
    else:
        _wait_for_results(store, study.code)
    _student_footer(study, rows, token)


def _student_footer(study, rows, token: str) -> None:
    """Below the study: what it is, and the browser's part (the answer guard, the kept token)."""
    st.caption(f"Study **{study.code}** · {len(rows)} triplets · anonymous: no name is asked; this browser "
               "keeps your place, so a reload or the link opened again continues where you were.")
    study_client.mount(study.code, token)


# --------------------------------------------------------------------------- the lecturer
def _app_url() -> str:
    """The address students use: ``[study] public_url`` if set, else the one this browser used."""
    public = _settings().get("public_url")
    if isinstance(public, str) and public.strip():
        return public.strip().rstrip("/")
    return links.link(st.context.url, "", {}, served_path=URL_PATH).rstrip("/")


def _qr_html(link: str, width: str) -> str:
    return (f'<img data-qr="student" alt="QR code of the student link" src="{present.qr_svg_data_uri(link)}" '
            f'style="width:{width};image-rendering:pixelated;display:block;margin:auto">')


@st.dialog("Join the study", width="large")
def _qr_dialog(link: str, code: str) -> None:
    """The student link's QR code as large as the window allows, for the back of the room."""
    st.html(_qr_html(link, "min(100%, 72vh)") + f"<div style='text-align:center;font-size:1.6rem'>"
            f"{html.escape(link)}<br>code <b>{html.escape(code)}</b></div>")


def _set_released(store, study, key) -> None:
    try:
        store.release(store.study(study.code), key, bool(st.session_state.get("study_released")))
    except (study_store.StoreBusy, study_store.StoreUnavailable):  # the live view says why (the store keeps the fault)
        log.warning("releasing the results failed", exc_info=True)


@st.fragment(run_every=LIVE_S)
def _live(store, code: str, key: str) -> None:
    """The lecturer's live view: who has answered, the class result, the downloads (every few
    seconds); what the database refused lately, and judges who may have joined twice."""
    _fault(store)
    try:
        _live_view(store, code)
    except (study_store.StoreBusy, study_store.StoreUnavailable) as exc:
        st.error(f"The class cannot be read right now: {md_escape(getattr(exc, 'cause', 'the database is busy'))}. "
                 "This view tries again every few seconds.", icon=":material/cloud_off:")


def _live_view(store, code: str) -> None:
    study = store.study(code)
    rows = study_rows(store, study)
    judged = store.judgements(study)
    unkept = store.unkept(study)
    per: dict[str, int] = {}
    for j in judged:
        per[j.session] = per.get(j.session, 0) + 1
    finished = sum(1 for n in per.values() if n == len(rows))
    c1, c2, c3 = st.columns(3)
    c1.metric("Students", len(per))
    c2.metric("Answers", len(judged))
    c3.metric("Finished", finished)
    if unkept:
        st.caption(f":material/person_add: **{unkept} judge{'s' if unkept > 1 else ''} joined twice?** "
                   f"{unkept} of the {len(per)} students answered in a browser that keeps no cookie (cookies blocked): "
                   "if one of them opened the link again, they were counted again, as a new judge.")
    _class_results(store, study, rows, lecturer=True)
    _fit_ours(study, rows, judged)
    families = [r.family for r in rows]
    st.download_button("Every answer (CSV)", lambda: present.judgements_csv(study.code, store.judgements(study),
                                                                            families),
                       f"study-{study.code}-answers.csv", "text/csv", key="study_dl_csv", on_click="ignore")


FIT_KEY = "study_fit"


def _fit_ours(study, rows, judged) -> None:
    """Once the results are released: lin weights fitted to the class's answers ("our own
    LPIPS"), per layer beside the published ones, the cross-validated agreement of ours, the
    published weights and the baseline with intervals, and the weights to download."""
    if not judged or not (study.released or study.closed is not None):
        return
    st.subheader("Fit our own LPIPS")
    st.caption("LPIPS weights each channel of AlexNet's features; the paper fitted those weights to people's "
               "answers like these. Fit them to this class's answers: each triplet is scored by weights fitted "
               "without it (cross-validation), beside the published weights and the unweighted baseline.")
    if st.button("Fit our own LPIPS", key="study_fit_button", icon=":material/model_training:"):
        model = get_model("lpips-alex-baseline", quiet=True)
        if model is None:
            st.warning("The AlexNet weights are not available on this server.", icon=":material/cloud_off:")
            return
        with st.spinner("Fitting to the class's answers…"):
            try:
                report = class_fit.fit_class(model, rows, judged)
            except ValueError as exc:
                st.warning(md_escape(str(exc)))
                return
        st.session_state[FIT_KEY] = {"code": study.code, "answers": len(judged), "report": report}
    held = st.session_state.get(FIT_KEY)
    if not held or held["code"] != study.code:
        return
    rep = held["report"]
    cv = rep["cross_validation"]
    st.plotly_chart(lin_weights_chart(rep["layers"], net=rep["net"]), key="study_fit_chart",
                    config={"displayModeBar": False})
    if cv:
        table = [{"weights": label, "2AFC agreement": f"{cv[k]['score']:.3f}",
                  "95% interval": f"{cv[k]['ci95'][0]:.3f} – {cv[k]['ci95'][1]:.3f}"}
                 for k, label in (("fitted", "ours (cross-validated)"), ("published", "published"),
                                  ("baseline", "baseline (all weights 1)"), ("human_ceiling", "human ceiling"))]
        st.table(pd.DataFrame(table).set_index("weights"))
        st.caption(f"{rep['triplets']} triplets, {rep['judges']} judges, {cv['folds']}-fold: "
                   f"{md_escape(cv['verdict'])}. Intervals: bootstrap over triplets.")
    if held["answers"] != len(judged):
        st.caption(f"Fitted on {held['answers']} answers; there are {len(judged)} now: press the button again.")
    st.download_button("Our LPIPS weights (.pth)", rep["weights"], f"study-{study.code}-lin-alex.pth",
                       "application/octet-stream", key="study_fit_download", on_click="ignore",
                       help="LPIPS('alex', lin_path=FILE), or the reference package's lpips.LPIPS(model_path=FILE)")


def _fault(store) -> None:
    """What the database refused in the last ten minutes, in words (the lecturer's view only)."""
    fault = store.fault
    if fault is None or (time.time() - fault.when.timestamp()) > 600:
        return
    times = f", {fault.count} times since {fault.first:%H:%M:%S} UTC" if fault.count > 1 else ""
    st.error(f"**Answers could not be saved** at {fault.when:%H:%M:%S} UTC{times}: {md_escape(fault.cause)}. "
             "Students were told *not saved \u2014 press again*; nothing was stored twice.",
             icon=":material/database:")


@st.fragment(run_every=2.0)
def _metrics_progress(store, code: str) -> None:
    """While the learned metrics are computed in the background: how far (every 2 s), then the
    whole page once more (the chart gains them) and this stops."""
    try:
        study = store.study(code)
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        return
    job = metrics_job(store, study)
    if job is None or job.finished:
        st.rerun(scope="app")
    st.progress(job.done / max(1, job.total),
                text=f"Computing what each learned metric says: {job.current or '…'} ({job.done} of {job.total}). "
                     "Students can answer already.")


def _metrics_status(store, study) -> None:
    job = metrics_job(store, study)
    if job is not None and not job.finished:
        _metrics_progress(store, study.code)
    elif job is not None and job.failed:
        labels = {s.name: s.label for s in SPECS}
        st.caption("Not computed (the server's log says why): " + ", ".join(labels.get(n, n) for n in job.failed))


def _keep_link(study, key: str) -> None:
    """The one step that shows the lecturer link: before the view that goes on the projector."""
    st.subheader(f"Study {study.code} \u00b7 keep your lecturer link")
    st.markdown("**Keep this link** (copy it with the icon: a note, a password manager, an e-mail to yourself). "
                "It is shown here once, and the server keeps only a hash of its key: it alone shows the class "
                "results before the end, downloads every answer and closes the study. Opened later, it brings "
                "you back to the lecturer view.")
    st.code(present.lecturer_link(_app_url(), study.code, key), language=None, wrap_lines=True)
    st.caption("The next step is the view to project (the QR code for the students): it shows no key, "
               "and neither does its address.")
    if st.checkbox("I have kept it", key="study_key_kept"):
        st.session_state.pop(NEW_KEY, None)
        st.rerun()


def _lecturer(store, study, key: str, where: str) -> None:
    _metrics_status(store, study)
    if st.session_state.get(NEW_KEY) == study.code:
        _keep_link(study, key)
    else:
        _projector(store, study, key, where)
    study_client.keep_lecturer(study.code, key)  # a reload or a server restart keeps this view


def _projector(store, study, key: str, where: str) -> None:
    """The lecturer's view, made to be projected: no key on it, none in the address."""
    st.subheader(f"Study {study.code} · lecturer view")
    app_url = _app_url()
    link = present.student_link(app_url, study.code)
    left, right = st.columns([3, 2], vertical_alignment="center")
    with left:
        st.markdown("**Students open** (copy it with the icon, or let them scan the code):")
        st.code(link, language=None, wrap_lines=True)
        st.caption(f"Or they open the app and type the code **{study.code}**. {study.n_triplets} triplets · "
                   f"{', '.join(study.families)} · metrics shown {'after every answer' if study.reveal == 'each' else 'at the end'}.")
        if present.local_only(link):
            st.warning("This address names this computer only: students' devices cannot open it. Open this page "
                       "through the computer's network address, or set `public_url` under `[study]` in "
                       ".streamlit/secrets.toml.", icon=":material/wifi_off:")
    with right:
        st.html(_qr_html(link, "min(100%, 340px)"))
        if st.button("Show the code full screen", key="study_qr_big", icon=":material/qr_code_2:", width="stretch"):
            _qr_dialog(link, study.code)
    c1, c2 = st.columns(2, vertical_alignment="center")
    c1.toggle("Show the class results to students", value=study.released, key="study_released",
              on_change=_set_released, args=(store, study, key),
              help="Students who have finished see the class chart as soon as this is on.")
    if study.closed is None:
        if c2.button("Close the study", key="study_close", icon=":material/lock:",
                     help="No more answers; everyone sees the class results."):
            store.close(study, key)
            st.rerun()
    else:
        c2.caption(f"Closed at {study.closed:%H:%M} UTC: no more answers; everyone sees the class results.")
        if c2.button("Reopen", key="study_reopen"):
            store.reopen(study, key)
            st.rerun()
    st.header("The class, live")
    _live(store, study.code, key)
    with st.expander("Where the answers are stored"):
        st.caption(f"Answers are stored in {md_escape(where)} (shown in the lecturer view only), with an "
                   "anonymous participant id each.")


# --------------------------------------------------------------------------- creating and joining
def _prepare_now(recipes, uploads, top) -> list[prep.Prepared]:
    """The part of a study made while the lecturer waits: every triplet's PNGs and the pixel
    metrics (about a second), with a progress bar at the top of the page. The learned metrics
    follow in the background (:func:`start_metrics`)."""
    bar = top.progress(0.0, text="Creating the study…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Creating the study: {done} of {total} steps (the triplets, then the "
                                        "pixel metrics; the learned metrics follow in the background)")

    out = prep.prepare(recipes, PIXEL_SPECS, {}, uploads=uploads, progress=progress)
    top.empty()
    return out


def _create(store, top) -> None:
    settings = _settings()
    admin = settings.get("admin_key")
    with st.expander("Create a study (lecturer)", expanded=True):
        c1, c2, c3 = st.columns(3)
        n = c1.number_input("Triplets", 1, 200, 12, key="study_n")
        seed = c2.number_input("Seed", 0, 2**31 - 1, 0, key="study_seed")
        source = c3.radio("Patches from", SOURCES, key="study_source")
        families = st.multiselect("Distortion families", T.FAMILIES, default=["shift-vs-blur"], key="study_families",
                                  help="single families put the same distortion on both copies at close "
                                       "strengths; mixed ones (shift-vs-blur, …) one on each side")
        upload = None
        if source == SOURCES[2]:
            upload = st.file_uploader("Image", type=list(UPLOAD_TYPES), key="study_upload")
        each = st.toggle("Show what each metric said after every answer (off: only at the end)", value=True,
                         key="study_reveal_each")
        given = None
        if admin:
            given = st.text_input("Admin key", type="password", key="study_admin_key",
                                  help="This server lets only holders of its admin key create studies.")
        if not st.button("Create the study", key="study_create", type="primary"):
            return
        if not access.admin_ok(admin, given):
            st.error("That is not this server's admin key: ask whoever runs it.")
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
                st.error(md_escape(str(exc)))
                return
            uid = T.upload_id(png)
            uploads[uid] = png
            images = [uid]
        try:
            recipes = T.make_recipes(int(n), families=families, seed=int(seed), images=images, uploads=uploads)
        except ValueError as exc:
            st.error(md_escape(str(exc)))
            return
        done = _prepare_now(recipes, uploads, top)
        try:
            for uid, png in uploads.items():
                store.put_image(uid, png)
            study = store.create_study(recipes, families=families, seed=int(seed),
                                       reveal="each" if each else "end", digests=[d.digest for d in done],
                                       pngs=[d.pngs for d in done], distances=[d.distances for d in done],
                                       metrics_pending=True)
        except (study_store.StoreBusy, study_store.StoreUnavailable) as exc:
            st.error(f"The study could not be stored: {md_escape(getattr(exc, 'cause', 'the database is busy'))}. "
                     "Nothing was created; press *Create the study* again once that is fixed.")
            return
        start_metrics(store, study, store.triplets(study))
        st.session_state.setdefault(KEYS_HELD, {})[study.code] = study.lecturer_key
        st.session_state[NEW_KEY] = study.code
        st.query_params.from_dict({"study": study.code, "view": "lecturer"})  # no key in the address
        st.rerun()


def _join() -> None:
    with st.form("study_join", border=False):
        code = st.text_input("Study code", key="study_join_code", placeholder="e.g. K7QW3M")
        if st.form_submit_button("Join") and code.strip():
            st.query_params.from_dict({"study": code.strip().upper()})
            st.rerun()


# --------------------------------------------------------------------------- the page
def student_view() -> bool:
    """Whether this run draws the student's page (a study link without the lecturer's key or view):
    app.py then draws nothing but the study."""
    return "study" in st.query_params and "key" not in st.query_params and st.query_params.get("view") != "lecturer"


def main() -> None:
    if not student_view():
        st.title("Judge it yourself")
    top = st.empty()  # creating a study shows its progress here, at the top of the page
    try:
        store, where = get_store()
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server: say so, keep the app alive
        st.error(f"The study database could not be opened ({type(exc).__name__}). Whoever runs this server: "
                 f"check `[connections.sql]` in .streamlit/secrets.toml or ${DATA_ENV}; the server's log has "
                 "the details.")
        log.exception("the study database could not be opened")
        return
    code = st.query_params.get("study")
    try:
        study = store.study(code) if code else None
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        st.error("The study cannot be opened right now: reload the page in a moment (your answers are kept).",
                 icon=":material/cloud_off:")
        log.warning("the study database could not be read", exc_info=True)
        return
    if study is None:
        if student_view():
            st.title("Judge it yourself")
        st.caption("LPIPS was fitted to people's answers to one question: which of two distorted copies is "
                   "closer to a reference? Answer it yourself with your class, then see which metric agrees "
                   "with you and with the class.")
        if code:
            st.error(f"No study has the code {md_escape(links.shown(code, quote=False))}.")
        _join()
        _create(store, top)
        return
    held = st.session_state.setdefault(KEYS_HELD, {})
    key = st.query_params.get("key")
    if key is not None:
        if store.is_lecturer(study, key):
            held[study.code] = key  # the key lives in this session from now on, not in the address
            st.query_params.from_dict({"study": study.code, "view": "lecturer"})
        else:
            st.warning("This link's lecturer key does not open this study: you see the student view.")
            del st.query_params["key"]
    if st.query_params.get("view") == "lecturer":
        # held by this session, or by this browser's session cookie (a reload, a server restart)
        key = held.get(study.code) or st.context.cookies.get(study_client.key_cookie_name(study.code))
        if key is not None and store.is_lecturer(study, key):
            held[study.code] = key
            try:
                _lecturer(store, study, key, where)
            except (study_store.StoreBusy, study_store.StoreUnavailable) as exc:
                st.error(f"The study database cannot be used right now: "
                         f"{md_escape(getattr(exc, 'cause', 'it is busy'))}. Reload in a moment.",
                         icon=":material/cloud_off:")
            return
        st.info(f"This is the lecturer's view of study {study.code}. Its key is never in this address, so that "
                "it never reaches the projector: open the lecturer link you kept to see the class live.",
                icon=":material/key:")
        st.markdown(f"Students open **{present.student_link(_app_url(), study.code)}**.")
        return
    try:
        _student(store, study)
    except (study_store.StoreBusy, study_store.StoreUnavailable):
        st.error(f"{NOT_SAVED} The study's answers cannot be reached right now; reload the page in a moment "
                 "(your answers are kept).", icon=":material/cloud_off:")
        log.warning("a student's page could not reach the study database", exc_info=True)


main()
