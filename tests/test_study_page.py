"""AppTest of the "Judge it yourself" page on a temporary SQLite database (LPIPS_EXPLORER_DATA).

The app is opened as people open it: students with ``/?study=CODE`` (the root page; app.py sends
any page with ``study=`` to the study), a reload as a fresh session with the same address, the
lecturer with the lecturer link ``?study=CODE&key=KEY``.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import sqlalchemy as sa

import torch

from lpips_core import metrics
from lpips_core.spec import standard_specs
from lpips_core.testing import reference_lpips
from lpips_explorer.study import access, scoring
from lpips_explorer.study import prepare as P
from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T
from apptest_helpers import ok
from pg_server import pg_cluster, pg_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.apptest  # full tier (tests/conftest.py): each test runs the app

APP = Path(__file__).resolve().parents[1] / "app.py"
FAMILIES = ["shift-vs-blur", "noise-vs-blur"]
CLASSIC = [s for s in standard_specs() if not s.learned]


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(APP), default_timeout=180)


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A 5-triplet study (metrics after every answer) in a database of its own, its images and the
    pixel metrics' values stored (the learned ones are checked in the creation test)."""
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    recipes = T.make_recipes(5, families=FAMILIES, seed=4)
    done = P.prepare(recipes, CLASSIC, {})
    made = store.create_study(recipes, families=FAMILIES, seed=4, digests=[d.digest for d in done],
                              pngs=[d.pngs for d in done], distances=[d.distances for d in done])
    return store, made, done


def _open(query: dict):
    """A new session on ``/`` with ``query`` (a first visit, or a reload of a kept address)."""
    at = _app()
    for k, v in query.items():
        at.query_params[k] = v
    return ok(at.run())


def _title(at) -> str:
    return at.title[0].value if at.title else ""


def _studying(at, code: str) -> bool:
    """The student's page of study ``code``: nothing but the study (no page title, no sidebar)."""
    return (any(f"Study **{code}**" in c.value for c in at.caption) and not at.title
            and not at.sidebar.children)


def _shown_index(at) -> int | None:
    return at.session_state["study_shown"][1] if "study_shown" in at.session_state else None


def _lecturer_widgets(at) -> list:
    """The lecturer's controls on the page (release, close), if any."""
    return [w for w in [*at.toggle, *at.button] if w.key in ("study_released", "study_close", "study_reopen")]


def _answer(at, choice: int):
    return ok(at.button(key=f"study_choice_{choice}_{_shown_index(at)}").click().run())


def _mse_score(done, judgements):
    """The class's MSE agreement, recomputed from the stored PNGs' pixels and the answers."""
    fr = scoring.judge_fractions([t for _, t, _ in judgements], [c for _, _, c in judgements])
    idx = sorted(fr)
    d = []
    for i in idx:
        ref, p0, p1 = (P.decode_png(p) for p in done[i].pngs)
        d.append((metrics.mse(ref, p0), metrics.mse(ref, p1)))
    return scoring.two_afc([a for a, _ in d], [b for _, b in d], [fr[i][0] for i in idx])


def test_root_link_lands_on_the_study_and_a_reload_keeps_the_participant(study):
    store, made, done = study
    at = _open({"study": made.code})
    assert _studying(at, made.code)  # "/?study=CODE" opened the study, not the default page
    token = at.query_params["p"]
    assert access.valid_token(token) and at.query_params["study"] == made.code
    assert _shown_index(at) == 0
    _answer(at, 1)
    _answer(at, 0)
    # reload: a new session with the same address (the token in it)
    again = _open({"study": made.code, "p": token})
    assert again.query_params["p"] == token and _shown_index(again) == 2
    _answer(again, 2)
    for choice in (1, 1):
        _answer(again, choice)
    judged = [(j.session, j.triplet, j.choice) for j in store.judgements(made)]
    pid = access.participant_id(token)
    assert judged == [(pid, 0, 1), (pid, 1, 0), (pid, 2, 2), (pid, 3, 1), (pid, 4, 1)]
    assert store.counts(made) == (1, 5)  # one person, one judge
    assert any("answered all 5" in s.value for s in again.success)
    # another page of the app with study= and the token lands on the study too, finished
    other = _app()
    other.query_params.update({"study": made.code, "p": token})
    ok(other.run())
    ok(other.switch_page("app_pages/distortion_lab.py").run())
    assert _studying(other, made.code) and any("answered all 5" in s.value for s in other.success)


def test_a_student_cannot_reveal_results_or_download_answers(study):
    store, made, done = study
    at = _open({"study": made.code})
    for choice in (1, 0, 2, 1, 1):
        _answer(at, choice)
    assert any("answered all 5" in s.value for s in at.success)
    # their own agreement, no class results, no lecturer controls, no downloads, no server path
    own = at.table[-1].value
    assert list(own.columns) == ["metric", "agrees with you"] and not own.isna().any().any()
    assert not at.get("plotly_chart") and not _lecturer_widgets(at) and not at.get("download_button")
    assert any("appear here when your lecturer" in i.value for i in at.info)
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "study.db" not in text and "SQLite" not in text
    # a wrong lecturer key gives the student view, with a notice, and the key is dropped
    bad = _open({"study": made.code, "key": made.lecturer_key[:-2] + "xx", "p": at.query_params["p"]})
    assert any("does not open this study" in w.value for w in bad.warning)
    assert "key" not in bad.query_params and not _lecturer_widgets(bad) and not bad.get("download_button")
    assert not store.study(made.code).released


def test_the_lecturer_link_shows_the_class_live_releases_and_closes(study):
    store, made, done = study
    a = _open({"study": made.code})
    a_choices = [1, 0, 2, 1, 1]
    for c in a_choices:
        _answer(a, c)
    b = _open({"study": made.code})
    b_choices = [0, 0, 1]
    for c in b_choices:
        _answer(b, c)
    lect = _open({"study": made.code, "key": made.lecturer_key})
    assert any(f"Study {made.code} · lecturer view" in s.value for s in lect.subheader)
    codes = [c.value for c in lect.code]
    assert any(v.endswith(f"/?study={made.code}") for v in codes)  # the full student link, copyable
    assert [m.value for m in lect.metric] == ["2", "8", "1"]  # students, answers, finished
    chart = lect.get("plotly_chart")
    assert chart, "the lecturer sees the class chart"
    judged = [(j.session, j.triplet, j.choice) for j in store.judgements(made)]
    import json

    fig = json.loads(chart[0].proto.spec)
    mse_trace = next(t for t in fig["data"] if "MSE" in t["y"])
    assert mse_trace["x"][mse_trace["y"].index("MSE")] == pytest.approx(_mse_score(done, judged), abs=1e-12)
    assert any("2 judges, 8 answers" in c.value for c in lect.caption)
    assert lect.get("download_button")  # every answer as CSV, and the results
    assert any("SQLite file" in c.value for c in lect.caption)  # where data lives: lecturer only
    # students who finished see the class only once released
    ok(a.run())
    assert not a.get("plotly_chart")
    ok(lect.toggle(key="study_released").set_value(True).run())
    assert store.study(made.code).released
    ok(a.run())
    assert a.get("plotly_chart") and list(a.table[-1].value.columns) == ["metric", "agrees with you", "agrees with the class"]
    # closing: no more answers; the student who had not finished is told so and sees the class
    ok(lect.button(key="study_close").click().run())
    assert store.study(made.code).closed is not None
    ok(b.run())
    assert any("closed this study" in w.value for w in b.warning) and b.get("plotly_chart")
    assert not [x for x in b.button if x.key and x.key.startswith("study_choice_")]
    assert len(store.judgements(made)) == 8


def test_an_answer_under_a_held_write_lock_says_press_again_within_3_s(study, tmp_path):
    store, made, done = study
    at = _open({"study": made.code})
    holder = sqlite3.connect(tmp_path / "study.db", timeout=0, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("BEGIN IMMEDIATE")
        t0 = time.monotonic()
        _answer(at, 1)
        took = time.monotonic() - t0
        assert took < 3.0, took
        assert any("press again" in e.value for e in at.error)
        assert _shown_index(at) == 0 and store.judgements(made) == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _answer(at, 1)
    assert _shown_index(at) == 1 and not at.error
    assert [(j.triplet, j.choice) for j in store.judgements(made)] == [(0, 1)]


def test_a_lecturer_creates_a_study_with_every_value_precomputed(app, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    at = ok(app.run())
    ok(at.switch_page("app_pages/judge_it_yourself.py").run())
    at.number_input(key="study_n").set_value(3)
    at.number_input(key="study_seed").set_value(12)
    at.multiselect(key="study_families").set_value(["blur", "jpeg-vs-noise"])
    at.toggle(key="study_reveal_each").set_value(False)
    t0 = time.monotonic()
    ok(at.button(key="study_create").click().run())
    took = time.monotonic() - t0
    code = at.query_params["study"]
    # the lecturer link, shown once on a step of its own; the address never holds the key
    assert "key" not in at.query_params and at.query_params["view"] == "lecturer"
    assert any("keep your lecturer link" in s.value for s in at.subheader) and not at.get("plotly_chart")
    link = next(c.value for c in at.code if "key=" in c.value)
    key = parse_qs(urlsplit(link).query)["key"][0]
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    made = store.study(code)
    assert (made.n_triplets, made.seed, made.reveal, made.families) == (3, 12, "end", ("blur", "jpeg-vs-noise"))
    assert store.is_lecturer(made, key) and made.lecturer_hash == S.key_hash(key)
    assert took < 30, took  # the triplets and the pixel metrics; the learned ones follow in the background
    ok(at.checkbox(key="study_key_kept").check().run())  # "I have kept it": the projector view
    assert any(f"Study {code} · lecturer view" in s.value for s in at.subheader)
    shown = " ".join([*(c.value for c in at.code), *(m.value for m in at.markdown), *(c.value for c in at.caption)])
    assert key not in shown and "key" not in at.query_params and any(f"?study={code}" in c.value for c in at.code)
    deadline = time.monotonic() + 600  # the learned metrics, computed in the background
    while store.study(code).metrics_pending and time.monotonic() < deadline:
        time.sleep(1)
    assert not store.study(code).metrics_pending
    recipes = T.make_recipes(3, families=["blur", "jpeg-vs-noise"], seed=12)
    rows = store.triplets(made)
    assert [r.recipe for r in rows] == [r.to_json() for r in recipes] and all(r.ready for r in rows)
    oracle = reference_lpips("alex")  # the reference lpips package on our weights
    for row, recipe in zip(rows, recipes):
        t = T.render(recipe)
        ref, p0, p1 = (P.decode_png(p) for p in (row.ref_png, row.p0_png, row.p1_png))
        for shown, exact in ((ref, t.ref), (p0, t.p0), (p1, t.p1)):  # the PNGs are the rendering, 8-bit
            assert np.abs(shown - exact).max() <= 0.5 / 255 + 1e-6 and np.allclose(shown * 255, np.round(shown * 255), atol=1e-4)
        assert row.digest == t.digest()
        assert row.distances["mse"] == (metrics.mse(ref, p0), metrics.mse(ref, p1))
        x = torch.from_numpy(np.stack([ref, ref])).permute(0, 3, 1, 2)
        y = torch.from_numpy(np.stack([p0, p1])).permute(0, 3, 1, 2)
        with torch.no_grad():
            d = oracle(x, y, normalize=True).flatten().tolist()
        assert row.distances["lpips-alex-0.1-lin-[-1,1]"] == pytest.approx(tuple(d), rel=1e-5, abs=1e-6)
        assert {"lpips-vgg-0.1-lin-[-1,1]", "lpips-alex-0.1-baseline-[-1,1]", "stlpips-alex-[-1,1]", "dists-vgg-[0,1]",
                "psnr", "ssim"} <= set(row.distances)
    # a student answers with no metric computed (the reveal is at the end: no table while answering)
    s = _open({"study": code})
    _answer(s, 1)
    assert not s.table and [(j.triplet, j.choice) for j in store.judgements(made)] == [(0, 1)]
    s.query_params["study"] = "NOSUCH"
    del s.query_params["p"]
    ok(s.run())
    assert any("No study has the code NOSUCH" in e.value for e in s.error)
    s.query_params["study"] = "X" * 300_000  # a long value is cut, as every other link value
    ok(s.run())
    said = next(e.value for e in s.error if "No study has the code" in e.value)
    assert len(said) < 200 and "300,000 characters" in said
    # the kept link opens the lecturer view again; the key goes from the address to the session
    again = _open({"study": code, "key": key})
    assert any(f"Study {code} · lecturer view" in s.value for s in again.subheader)
    assert "key" not in again.query_params and again.query_params["view"] == "lecturer"
    bare = _open({"study": code, "view": "lecturer"})  # the projector's address in a new session: no key, no class
    assert not bare.get("plotly_chart") and not bare.metric
    assert any("lecturer link you kept" in i.value for i in bare.info)


def test_an_admin_key_limits_who_creates_studies(tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    at = _app()
    at.secrets["study"] = {"admin_key": "s3cret-admin"}
    ok(at.run())
    ok(at.switch_page("app_pages/judge_it_yourself.py").run())
    at.number_input(key="study_n").set_value(2)
    ok(at.button(key="study_create").click().run())
    assert any("not this server's admin key" in e.value for e in at.error)
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    assert store.studies() == [] and "study" not in at.query_params
    at.text_input(key="study_admin_key").input("s3cret-admin")
    ok(at.button(key="study_create").click().run())
    assert [s.code for s in store.studies()] == [at.query_params["study"]]
    deadline = time.monotonic() + 600  # its learned metrics, in the background: done before the next test
    while store.studies()[0].metrics_pending and time.monotonic() < deadline:
        time.sleep(0.5)


def test_a_study_from_before_version_3_is_prepared_once_on_first_view(tmp_path, monkeypatch):
    """Triplets stored without images (an upgraded database) get them on first view, on the shown pixels."""
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    store = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path)))
    recipes = T.make_recipes(2, families=["blur"], seed=1)
    old = store.create_study(recipes, families=["blur"], seed=1)
    at = _open({"study": old.code})
    rows = store.triplets(old)
    assert all(r.ready for r in rows) and _shown_index(at) == 0
    ref, p0, _ = (P.decode_png(p) for p in (rows[0].ref_png, rows[0].p0_png, rows[0].p1_png))
    assert rows[0].distances["mse"][0] == metrics.mse(ref, p0)


def test_the_page_on_postgresql_through_the_documented_url(pg_url):
    """``[connections.sql] url = "postgresql+psycopg://…"`` in the secrets: the page answers into PostgreSQL."""
    engine = sa.create_engine(pg_url)
    try:
        store = S.StudyStore(engine)
        recipes = T.make_recipes(3, families=["blur"], seed=5)
        done = P.prepare(recipes, CLASSIC, {})
        made = store.create_study(recipes, families=["blur"], seed=5, digests=[d.digest for d in done],
                                  pngs=[d.pngs for d in done], distances=[d.distances for d in done])
        at = _app()
        at.secrets["connections"] = {"sql": {"url": pg_url}}
        at.query_params["study"] = made.code
        ok(at.run())
        assert _studying(at, made.code) and _shown_index(at) == 0
        _answer(at, 1)
        _answer(at, 2)
        pid = access.participant_id(at.query_params["p"])
        assert [(j.session, j.triplet, j.choice) for j in store.judgements(made)] == [(pid, 0, 1), (pid, 1, 2)]
        lect = _app()
        lect.secrets["connections"] = {"sql": {"url": pg_url}}
        lect.query_params.update({"study": made.code, "key": made.lecturer_key})
        ok(lect.run())
        assert [m.value for m in lect.metric] == ["1", "2", "0"]
        assert any("[connections.sql] in .streamlit/secrets.toml" in c.value.replace("\\", "") for c in lect.caption)
    finally:
        engine.dispose()


def test_a_full_disk_or_a_read_only_database_is_said_in_words(study, tmp_path):
    """A write refused by the disk (ENOSPC from the answer's INSERT) and a database opened read-only:
    the student sees "not saved — press again" (no exception), nothing is stored; the lecturer's
    view says the cause; pressed again once the disk has room, the answer is stored once."""
    import errno

    store, made, done = study

    def full(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO JUDGEMENTS"):
            raise OSError(errno.ENOSPC, "No space left on device")

    at = _open({"study": made.code})
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", full)
    try:
        _answer(at, 1)
        assert any("Not saved \u2014 press again" in e.value for e in at.error) and _shown_index(at) == 0
        assert store.judgements(made) == []
        lect = _open({"study": made.code, "key": made.lecturer_key})
        said = " ".join(e.value for e in lect.error)
        assert "Answers could not be saved" in said and "the disk is full" in said
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", full)
    _answer(at, 1)
    assert _shown_index(at) == 1 and not at.error
    assert [(j.triplet, j.choice) for j in store.judgements(made)] == [(0, 1)]
    # the same database opened read-only (as on a read-only disk; the tests run as root, so chmod would not do)
    ro = f"sqlite:///file:{tmp_path / 'study.db'}?mode=ro&uri=true"
    s = _app()
    s.secrets["connections"] = {"sql": {"url": ro}}
    s.query_params.update({"study": made.code, "p": at.query_params["p"]})
    ok(s.run())
    assert _shown_index(s) == 1
    ok(s.button(key=f"study_choice_0_{_shown_index(s)}").click().run())
    assert any("Not saved \u2014 press again" in e.value for e in s.error)
    assert [(j.triplet, j.choice) for j in store.judgements(made)] == [(0, 1)]
    lect = _app()
    lect.secrets["connections"] = {"sql": {"url": ro}}
    lect.query_params.update({"study": made.code, "key": made.lecturer_key})
    ok(lect.run())
    assert "the database is read-only" in " ".join(e.value for e in lect.error).replace("\\", "")


def test_a_second_press_for_an_answered_triplet_changes_nothing(study):
    """A tab that still shows an answered triplet (another tab of the same judge answered it): its
    press is acknowledged as "answered already", stores nothing, and the page moves on."""
    store, made, done = study
    a = _open({"study": made.code})
    token = a.query_params["p"]
    b = _open({"study": made.code, "p": token})  # the same judge in a second tab
    _answer(a, 0)
    ok(b.button(key="study_choice_1_0").click().run())  # b's button was drawn for triplet 0
    assert [(j.triplet, j.choice) for j in store.judgements(made)] == [(0, 0)]
    assert any("Triplet 1 was answered already" in i.value for i in b.info) and _shown_index(b) == 1


def test_after_release_the_lecturer_fits_our_own_lpips(study):
    """Simulated answers, released: "Fit our own LPIPS" shows the per-layer chart, the three
    cross-validated agreements with intervals and the human ceiling, and the weights to download,
    which load as LPIPS lin weights and equal what the library fits on the same answers."""
    import io

    import torch

    from lpips_core import LPIPS, twoafc
    from lpips_explorer.study import fit as class_fit

    store, made, done = study
    for choices in ([1, 0, 2, 1, 1], [0, 0, 1, 1, 0], [1, 0, 1, 1, 1]):
        s = _open({"study": made.code})
        for c in choices:
            _answer(s, c)
    lect = _open({"study": made.code, "key": made.lecturer_key})
    assert not [b for b in lect.button if b.key == "study_fit_button"]  # only once released
    ok(lect.toggle(key="study_released").set_value(True).run())
    ok(lect.button(key="study_fit_button").click().run())
    assert any(s.value == "Fit our own LPIPS" for s in lect.subheader)
    table = lect.table[-1].value
    assert list(table.index) == ["ours (cross-validated)", "published", "baseline (all weights 1)", "human ceiling"]
    assert any("5 triplets, 3 judges, 5-fold" in c.value for c in lect.caption)
    charts = [c for c in lect.get("plotly_chart") if "Mean channel weight" in c.proto.spec]
    assert charts
    report = lect.session_state["study_fit"]["report"]
    weights = torch.load(io.BytesIO(report["weights"]), map_location="cpu", weights_only=True)
    assert [tuple(v.shape) for v in weights.values()] == [(1, c, 1, 1) for c in (64, 192, 384, 256, 256)]
    assert all(bool((v >= 0).all()) for v in weights.values())
    want = class_fit.fit_class(LPIPS("alex", lin=False, device="cpu"), store.triplets(made), store.judgements(made))
    assert report["cross_validation"] == want["cross_validation"]
    assert report["weights"] == want["weights"] == twoafc.lin_bytes(
        np.split(np.concatenate([np.frombuffer(v.numpy().tobytes(), np.float32) for v in weights.values()]),
                 np.cumsum([64, 192, 384, 256])))
