"""The study store (lpips_explorer.study.store) on a real SQLite file and on a real PostgreSQL.

Every test runs twice with the same assertions: on a SQLite file in a temporary folder and on a
fresh database in a throw-away PostgreSQL cluster (``tests/pg_server.py``: ``initdb`` + ``pg_ctl``
on a free port, started once per session in about a second). A cluster that cannot start fails
the PostgreSQL cases; they are never skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from lpips_explorer.study import access
from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T
from pg_server import pg_cluster, pg_url  # noqa: F401  (fixtures)

DIALECTS = ["sqlite", "postgresql"]


@pytest.fixture(params=DIALECTS)
def url(request, tmp_path):
    if request.param == "sqlite":
        return S.sqlite_url(tmp_path)
    return request.getfixturevalue("pg_url")


@pytest.fixture
def engines():
    """Engines made by a test, disposed at its end (PostgreSQL keeps connections otherwise)."""
    made: list[sa.Engine] = []

    def make(url: str) -> sa.Engine:
        made.append(sa.create_engine(url))
        return made[-1]

    yield make
    for e in made:
        e.dispose()


@pytest.fixture
def db(url, engines):
    return S.StudyStore(engines(url)), url


def _study(st, n=5, family="shift-vs-blur", seed=3, **kw):
    recipes = T.make_recipes(n, families=[family], seed=seed)
    return st.create_study(recipes, families=[family], seed=seed,
                           digests=[T.render(r).digest() for r in recipes], **kw), recipes


class Holder:
    """Another connection holding the write lock: SQLite's ``BEGIN IMMEDIATE`` (the database's one
    writer lock), PostgreSQL's ``LOCK TABLE judgements IN EXCLUSIVE MODE`` (every INSERT waits)."""

    def __init__(self, url: str):
        self.sqlite = url.startswith("sqlite")
        if self.sqlite:
            self.conn = sqlite3.connect(sa.engine.make_url(url).database, timeout=0, isolation_level=None,
                                        check_same_thread=False)
        else:
            import psycopg

            plain = sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
            self.conn = psycopg.connect(plain)

    def hold(self) -> None:
        if self.sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            self.conn.execute("LOCK TABLE judgements IN EXCLUSIVE MODE")

    def let_go(self) -> None:
        if self.sqlite:
            self.conn.execute("ROLLBACK")
        else:
            self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


def test_schema_is_created_on_first_use(db):
    st, url = db
    insp = sa.inspect(st.engine)
    assert set(insp.get_table_names()) == {"schema_version", "studies", "triplets", "judgements", "images",
                                               "participants"}
    assert {c["name"] for c in insp.get_columns("judgements")} == {
        "id", "study_id", "session", "triplet_idx", "choice", "response_ms", "created"}
    assert {c["name"] for c in insp.get_columns("studies")} >= {"lecturer_hash", "released", "closed"}
    assert {c["name"] for c in insp.get_columns("triplets")} >= {"ref_png", "p0_png", "p1_png", "distances"}
    assert st.schema_version() == S.SCHEMA_VERSION == 4
    with st.engine.connect() as c:
        if st.engine.dialect.name == "sqlite":
            assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == S.BUSY_TIMEOUT_MS == 250
        else:
            assert c.exec_driver_sql("SHOW lock_timeout").scalar() == "250ms"
    assert S.StudyStore(st.engine).ensure_schema() == 4  # a second start changes nothing


def test_study_round_trip_with_images_distances_and_a_hashed_key(db, engines):
    st, url = db
    recipes = T.make_recipes(3, families=["blur"], seed=2)
    pngs = [(b"\x89PNG\r\n\x1a\nref%d" % i, b"\x89PNG\r\n\x1a\np0", b"\x89PNG\r\n\x1a\np1") for i in range(3)]
    dist = [{"mse": (0.25 + i, 0.125), "lpips-alex": (0.1, 1e-9 * i)} for i in range(3)]
    study = st.create_study(recipes, families=["blur"], seed=2, reveal="end", pngs=pngs, distances=dist)
    assert len(study.code) == 6 and set(study.code) <= set(S.CODE_ALPHABET)
    key = study.lecturer_key
    assert access.valid_token(key) and study.lecturer_hash == S.key_hash(key)
    # a fresh engine on the same database (as another server process would open it)
    other = S.StudyStore(engines(url))
    again = other.study(f"  {study.code.lower()} ")
    assert again == study and again.lecturer_key is None and again.reveal == "end"
    assert (again.released, again.closed, again.class_visible) == (False, None, False)
    rows = other.triplets(again)
    assert [r.index for r in rows] == [0, 1, 2] and all(r.ready for r in rows)
    assert [(r.ref_png, r.p0_png, r.p1_png) for r in rows] == pngs
    # floats round-trip exactly through the JSON; a key stored in the short form of earlier
    # versions ("lpips-alex") reads back as its spec name
    read = [{"mse": d["mse"], "lpips-alex-0.1-lin-[-1,1]": d["lpips-alex"]} for d in dist]
    assert [r.distances for r in rows] == read
    assert [r.recipe for r in rows] == [r.to_json() for r in recipes]
    light = other.triplets(again, images=False)
    assert light[0].ref_png is None and light[0].distances == read[0]
    # only the hash is stored, never the key
    with other.engine.connect() as c:
        stored = c.execute(sa.select(S.studies)).one()._asdict()
    assert key not in json.dumps(stored, default=str) and stored["lecturer_hash"] == S.key_hash(key)
    assert other.is_lecturer(again, key) and not other.is_lecturer(again, key + "x")
    assert not other.is_lecturer(again, None) and not other.is_lecturer(again, "")
    assert other.study("ZZZZZZ") is None and other.study("no!") is None and other.study("ab") is None


def test_recipes_regenerate_the_stored_digests(db):
    st, _ = db
    study, recipes = _study(st)
    for row, recipe in zip(st.triplets(study), recipes):
        t = T.render(row.recipe)
        assert t.digest() == row.digest == T.render(recipe).digest()


def test_one_answer_per_participant_and_triplet(db):
    st, _ = db
    study, _ = _study(st)
    assert st.submit(study, "s1", 0, 1, 812) is True
    assert st.submit(study, "s1", 0, 0, 900) is False  # a second answer is refused: the first stays
    assert st.submit(study, "s2", 0, 2) is True
    js = st.judgements(study)
    assert [(j.session, j.triplet, j.choice, j.response_ms) for j in js] == [("s1", 0, 1, 812), ("s2", 0, 2, None)]
    assert all(j.created.tzinfo is dt.timezone.utc for j in js)
    assert st.answered(study, "s1") == {0: 1} and st.answered(study, "s3") == {}
    assert st.counts(study) == (2, 2)
    for bad, match in (((study, "s1", 5, 0), "index must be"), ((study, "s1", 1, 3), "choice must be"),
                       ((study, "", 1, 0), "session must be")):
        with pytest.raises(ValueError, match=match):
            st.submit(*bad)


def test_an_answer_counts_only_for_the_current_triplet(db):
    """The second tap of a double tap, a held key's repeat, a stale tab and a replayed message all
    name a triplet that is not the participant's current one: acknowledged, nothing changes."""
    st, _ = db
    study, _ = _study(st, n=4)
    first = st.answer(study, "s1", 0, 1, 900)
    assert first == S.Answer(True, 0, 1)
    for replay in range(3):  # the same message again, and again (a double tap, an auto-repeat, a replay)
        assert st.answer(study, "s1", 0, 0, 40) == S.Answer(False, 0, 1)
    assert st.answer(study, "s1", 2, 1, 40) == S.Answer(False, 2, 1)  # a triplet not yet shown
    assert st.answer(study, "s1", 1, 2, 1200) == S.Answer(True, 1, 2)
    assert st.answer(study, "s2", 0, 0) == S.Answer(True, 0, 1)  # another participant is on their own
    assert [(j.session, j.triplet, j.choice, j.response_ms) for j in st.judgements(study)] == [
        ("s1", 0, 1, 900), ("s1", 1, 2, 1200), ("s2", 0, 0, None)]
    for i in (2, 3):
        st.answer(study, "s1", i, 0)
    assert st.answer(study, "s1", 3, 1) == S.Answer(False, 3, None)  # all answered
    with pytest.raises(ValueError, match="index must be"):
        st.answer(study, "s1", 4, 0)
    st.close(study, study.lecturer_key)
    with pytest.raises(S.StudyClosed):
        st.answer(study, "s2", 1, 0)


def test_participants_whose_browser_keeps_nothing_are_counted(db):
    st, _ = db
    study, _ = _study(st, n=2)
    st.mark_participant(study, "kept", True)
    st.mark_participant(study, "lost1", False)
    st.mark_participant(study, "lost1", False)  # reported twice: one participant
    st.mark_participant(study, "lost2", False)
    st.mark_participant(study, "later", False)
    st.mark_participant(study, "later", True)  # a later report says it keeps it after all
    assert st.unkept(study) == 0  # only judges who answered count
    for session in ("kept", "lost1", "lost2", "later", "nobody"):
        st.answer(study, session, 0, 1)
    assert st.unkept(study) == 2


def test_metric_values_added_after_creation_are_merged(db):
    st, _ = db
    study, _ = _study(st, n=2, pngs=None, metrics_pending=True)
    assert study.metrics_pending and st.study(study.code).metrics_pending
    st.add_distances(study, {0: {"mse": (0.1, 0.2)}, 1: {"mse": (0.3, 0.4)}})
    st.add_distances(study, {0: {"lpips-alex-0.1-lin-[-1,1]": (0.5, 0.6), "mse": (9.0, 9.0)}})
    rows = st.triplets(study, images=False)
    assert rows[0].distances == {"mse": (0.1, 0.2), "lpips-alex-0.1-lin-[-1,1]": (0.5, 0.6)}  # stored values stay
    assert rows[1].distances == {"mse": (0.3, 0.4)}
    st.metrics_done(study)
    assert not st.study(study.code).metrics_pending and not _study(st)[0].metrics_pending


def test_a_full_disk_is_said_in_words_and_stores_nothing(db, monkeypatch):
    """SQLite's own "database or disk is full" (the file capped at its current size) and an OSError
    ENOSPC from the write: StoreUnavailable with the cause, the fault kept for the lecturer, nothing stored."""
    import errno

    st, url = db
    study, _ = _study(st, n=3)
    assert st.answer(study, "s", 0, 1).stored and st.fault is None

    def boom(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(st.engine, "begin", boom)
        with pytest.raises(S.StoreUnavailable, match="the disk is full") as info:
            st.answer(study, "s", 1, 0)
        assert info.value.cause == "the disk is full"
    assert st.fault.cause == "the disk is full" and st.fault.count == 1
    if url.startswith("sqlite"):
        capped = S.StudyStore(sa.create_engine(url))
        sa.event.listen(capped.engine, "connect", lambda c, _r: c.execute(
            f"PRAGMA max_page_count={c.execute('PRAGMA page_count').fetchone()[0]}"))
        capped.engine.dispose()
        big = "x" * 64
        with pytest.raises(S.StoreUnavailable, match="the disk is full"):
            for k in range(2000):  # fill the last free pages, then one more row cannot be written
                capped.answer(study, f"{big[:40]}{k:06d}", 0, 1)
        capped.engine.dispose()
    assert st.answered(study, "s") == {0: 1}


def test_a_read_only_or_vanished_database_is_said_in_words(tmp_path):
    folder = tmp_path / "data"
    st = S.StudyStore(sa.create_engine(S.sqlite_url(folder)))
    study, _ = _study(st, n=3)
    assert st.answer(study, "s", 0, 1).stored
    # the same file opened read-only, as on a read-only disk (the tests run as root: chmod would not stop a write)
    engine = sa.create_engine(f"sqlite:///file:{folder / 'study.db'}?mode=ro&uri=true")
    ro = S.StudyStore(engine)
    with pytest.raises(S.StoreUnavailable, match="read-only"):
        ro.answer(study, "s", 1, 0)
    assert ro.fault and "read-only" in ro.fault.cause
    assert ro.answered(study, "s") == {0: 1}  # reading still works
    engine.dispose()
    import shutil

    shutil.rmtree(folder)  # the folder is deleted under the running server
    with pytest.raises(S.StoreUnavailable, match="is gone"):
        st.answer(study, "s", 1, 0)
    with pytest.raises(S.StoreUnavailable):
        st.answered(study, "s")
    assert "gone" in st.fault.cause and st.fault.count == 2
    st.engine.dispose()


def test_only_the_lecturer_key_releases_and_closes(db):
    st, _ = db
    study, _ = _study(st)
    key = study.lecturer_key
    for action in (lambda k: st.release(study, k), lambda k: st.close(study, k)):
        for wrong in ("nope", "", None, key[:-1]):
            with pytest.raises(S.NotLecturer):
                action(wrong)
    assert st.study(study.code).class_visible is False
    released = st.release(study, key)
    assert released.released and released.class_visible and released.closed is None
    assert st.release(released, key, False).released is False
    assert st.submit(study, "s1", 0, 1) is True
    closed = st.close(study, key)
    assert closed.closed is not None and closed.class_visible and not closed.released
    with pytest.raises(S.StudyClosed, match="closed"):
        st.submit(study, "s1", 1, 1)
    with pytest.raises(S.StudyClosed):
        st.submit(closed, "s2", 0, 0)
    assert [j.triplet for j in st.judgements(study)] == [0]
    reopened = st.reopen(closed, key)
    assert reopened.closed is None and st.submit(reopened, "s1", 1, 1) is True


def test_30_threads_by_40_judgements_lose_none(url, engines):
    """30 participants, each on its own engine (as separate server processes would be), start
    together and each submit 40 judgements: every row arrives, with its content, and no error escapes."""
    setup = S.StudyStore(engines(url))
    study, _ = _study(setup, n=40, family="noise-vs-blur")
    n_threads, n_each = 30, 40
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []
    expected = {}
    for k in range(n_threads):
        for i in range(n_each):
            expected[(f"session-{k:02d}", i)] = ((k * 7 + i) % 3, 100 * k + i)
    stores = [S.StudyStore(engines(url)) for _ in range(n_threads)]

    def work(k: int) -> None:
        try:
            barrier.wait()
            for i in range(n_each):
                choice, ms = expected[(f"session-{k:02d}", i)]
                assert stores[k].submit(study, f"session-{k:02d}", i, choice, ms) is True
        except BaseException as exc:  # noqa: BLE001 - collected and reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    rows = S.StudyStore(engines(url)).judgements(study)
    assert len(rows) == n_threads * n_each == 1200
    assert {(j.session, j.triplet): (j.choice, j.response_ms) for j in rows} == expected
    with setup.engine.connect() as c:
        assert c.execute(sa.text("SELECT COUNT(*) FROM judgements")).scalar() == 1200


def test_a_short_lock_is_waited_out(db):
    """Another connection holds the write lock for 0.4 s: the answer waits it out and is stored once."""
    st, url = db
    study, _ = _study(st)
    holder = Holder(url)
    try:
        holder.hold()
        threading.Timer(0.4, holder.let_go).start()
        t0 = time.monotonic()
        assert st.submit(study, "s", 0, 1, 10) is True
        assert 0.3 <= time.monotonic() - t0 < 3.0
    finally:
        time.sleep(0.1)
        holder.close()
    assert [(j.session, j.triplet, j.choice) for j in st.judgements(study)] == [("s", 0, 1)]


def test_an_answer_under_a_held_write_lock_returns_within_3_s(db):
    """A lock that is never let go: the answer fails with a plain "press again" within 3 s (never
    the driver's message), nothing is written; pressed again after the lock is gone, it is stored once."""
    st, url = db
    study, _ = _study(st)
    holder = Holder(url)
    try:
        holder.hold()
        t0 = time.monotonic()
        with pytest.raises(S.StoreBusy, match="press again") as info:
            st.submit(study, "s", 1, 0, 500)
        took = time.monotonic() - t0
        assert 1.5 < took < 3.0, took  # it tried for most of the deadline, and gave up in time
        assert "locked" not in str(info.value) and "55P03" not in str(info.value)
        holder.let_go()
    finally:
        holder.close()
    assert st.judgements(study) == []
    assert st.submit(study, "s", 1, 0, 500) is True
    assert st.submit(study, "s", 1, 0, 500) is False
    assert [(j.session, j.triplet, j.choice) for j in st.judgements(study)] == [("s", 1, 0)]


def test_fill_triplets_completes_an_old_study_once(db):
    st, _ = db
    study, _ = _study(st, n=2)
    assert not any(r.ready for r in st.triplets(study))
    png = b"\x89PNG\r\n\x1a\nx"
    st.fill_triplets(study, {1: ((png, png, png), {"mse": (0.5, 0.25)})})
    rows = st.triplets(study)
    assert [r.ready for r in rows] == [False, True] and rows[1].distances == {"mse": (0.5, 0.25)}
    st.fill_triplets(study, {1: ((png, png, png), {"mse": (9.0, 9.0)})})  # already filled: kept
    assert st.triplets(study)[1].distances == {"mse": (0.5, 0.25)}
    with pytest.raises(ValueError, match="PNG"):
        st.fill_triplets(study, {0: ((b"GIF89a", png, png), {})})


# --------------------------------------------------------------------------- upgrades
def test_a_study_stored_under_short_keys_is_scored_under_spec_names(tmp_path):
    """A study database written before metric keys were spec names (``{"lpips-alex": …}`` in the
    triplets' JSON, written here with SQL exactly as it was stored) opens, and its class result
    scores every stored metric under its spec and label; nothing is rewritten."""
    from lpips_core.spec import standard_specs
    from lpips_explorer.study import scoring

    engine = sa.create_engine(S.sqlite_url(tmp_path))
    st = S.StudyStore(engine)
    recipes = T.make_recipes(2, families=["blur"], seed=5)
    png = b"\x89PNG\r\n\x1a\nx"
    study = st.create_study(recipes, families=["blur"], seed=5, reveal="end", pngs=[(png, png, png)] * 2,
                            distances=[{"mse": (0.1, 0.2)}] * 2)
    old = [{"mse": [0.1, 0.2], "lpips-alex": [0.3, 0.1], "lpips-alex-baseline": [0.2, 0.4], "dists-vgg": [0.5, 0.6]},
           {"mse": [0.4, 0.3], "lpips-alex": [0.1, 0.2], "lpips-alex-baseline": [0.1, 0.3], "dists-vgg": [0.6, 0.5]}]
    with engine.begin() as c:
        for i, d in enumerate(old):
            c.execute(sa.text("UPDATE triplets SET distances = :d WHERE idx = :i"), {"d": json.dumps(d), "i": i})
    rows = S.StudyStore(sa.create_engine(S.sqlite_url(tmp_path))).triplets(study)
    dist = scoring.stored_distances([r.distances for r in rows])
    assert sorted(dist) == ["dists-vgg-[0,1]", "lpips-alex-0.1-baseline-[-1,1]", "lpips-alex-0.1-lin-[-1,1]", "mse"]
    res = scoring.summarize(dist, ["blur", "blur"], [("p1", 0, 1), ("p1", 1, 0)], standard_specs(), n_boot=10)
    scored = {m["label"]: m["score"] for m in res["class"]["metrics"]}
    # the judge: copy 2 closer on triplet 0, copy 1 on triplet 1 (h = 1, 0); a metric scores 1 where it agrees
    assert scored == {"MSE": 0.0, "LPIPS · AlexNet": 1.0, "LPIPS · AlexNet (baseline)": 0.5, "DISTS · VGG16": 0.0}
    with engine.connect() as c:  # the stored JSON is as it was
        assert json.loads(c.execute(sa.text("SELECT distances FROM triplets WHERE idx = 0")).scalar()) == old[0]


def _old_schema(version: int) -> tuple[sa.MetaData, dict[str, sa.Table]]:
    """The tables exactly as schema version 1 or 2 declared them (for building old databases)."""
    md = sa.MetaData()
    sv = sa.Table("schema_version", md, sa.Column("version", sa.Integer, nullable=False))
    st = sa.Table(
        "studies", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("code", sa.String(16), nullable=False, unique=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("n_triplets", sa.Integer, nullable=False),
        sa.Column("families", sa.Text, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        *([sa.Column("reveal", sa.String(8), nullable=False, server_default="each")] if version >= 2 else []))
    tr = sa.Table(
        "triplets", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("recipe", sa.Text, nullable=False),
        *([sa.Column("digest", sa.String(64), nullable=True)] if version >= 2 else []),
        sa.UniqueConstraint("study_id", "idx", name="uq_triplet_index"))
    ju = sa.Table(
        "judgements", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("triplet_idx", sa.Integer, nullable=False),
        sa.Column("choice", sa.SmallInteger, nullable=False),
        *([sa.Column("response_ms", sa.Integer, nullable=True)] if version >= 2 else []),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("choice IN (0, 1, 2)", name="ck_choice"),
        sa.UniqueConstraint("study_id", "session", "triplet_idx", name="uq_one_answer"))
    tables = {"schema_version": sv, "studies": st, "triplets": tr, "judgements": ju}
    if version >= 2:
        tables["images"] = sa.Table("images", md, sa.Column("id", sa.String(64), primary_key=True),
                                    sa.Column("png", sa.LargeBinary, nullable=False))
    return md, tables


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_database_is_upgraded_in_place(url, engines, version):
    """A database written by schema version 1 or 2 keeps every row; its studies stay open to all
    (they had no lecturer key), their triplets lack images until filled; new studies work beside them."""
    recipes = T.make_recipes(3, families=["blur"], seed=9)
    md, t = _old_schema(version)
    engine = engines(url)
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    with engine.begin() as c:
        md.create_all(c)
        c.execute(t["schema_version"].insert().values(version=version))
        c.execute(t["studies"].insert().values(code="OLDKEY", created=when, n_triplets=3, families='["blur"]', seed=9))
        c.execute(t["triplets"].insert(), [{"study_id": 1, "idx": i, "family": "blur", "recipe": r.to_json()}
                                           for i, r in enumerate(recipes)])
        c.execute(t["judgements"].insert(), [{"study_id": 1, "session": s, "triplet_idx": i, "choice": ch,
                                              "created": when} for s, i, ch in (("a", 0, 1), ("a", 1, 2), ("b", 0, 0))])
        if version == 2:
            c.execute(t["images"].insert().values(id="upload:abc", png=b"old-png"))
    st = S.StudyStore(engines(url))
    assert st.schema_version() == 4
    study = st.study("oldkey")
    assert (study.reveal, study.n_triplets, study.created, study.families) == ("each", 3, when, ("blur",))
    assert study.released and study.class_visible and study.closed is None and study.lecturer_hash is None
    assert not st.is_lecturer(study, "anything")
    rows = st.triplets(study)
    assert [r.digest for r in rows] == [None] * 3 and not any(r.ready for r in rows)
    assert [T.render(r.recipe).digest() for r in rows] == [T.render(r).digest() for r in recipes]
    old = st.judgements(study)
    assert [(j.session, j.triplet, j.choice, j.response_ms) for j in old] == [("a", 0, 1, None), ("a", 1, 2, None),
                                                                           ("b", 0, 0, None)]
    assert st.submit(study, "a", 2, 0, 640) and st.judgements(study, "a")[-1].response_ms == 640
    if version == 2:
        assert st.get_image("upload:abc") == b"old-png"
    st.put_image("upload:def", b"png-bytes")
    st.put_image("upload:def", b"png-bytes")  # idempotent
    assert st.get_image("upload:def") == b"png-bytes"
    new, _ = _study(st)  # new studies work beside the old one
    assert not st.study(new.code).released and st.is_lecturer(st.study(new.code), new.lecturer_key)
    with st.engine.begin() as c:
        c.execute(sa.text("UPDATE schema_version SET version = 5"))
    with pytest.raises(RuntimeError, match="schema version 5"):
        S.StudyStore(engines(url))


def test_create_study_rejects(db):
    st, _ = db
    recipes = T.make_recipes(2, families=["blur"], seed=0)
    with pytest.raises(ValueError, match="at least one triplet"):
        st.create_study([], families=["blur"], seed=0)
    with pytest.raises(ValueError, match="reveal must be"):
        st.create_study(recipes, families=["blur"], seed=0, reveal="never")
    with pytest.raises(ValueError, match="1 pngs for 2 recipes"):
        st.create_study(recipes, families=["blur"], seed=0, pngs=[(b"", b"", b"")])
    with pytest.raises(ValueError, match="PNG bytes"):
        st.create_study(recipes, families=["blur"], seed=0, pngs=[(b"x", b"y", b"z")] * 2)
    st.create_study(recipes, families=["blur"], seed=0, code="ABCD23")
    with pytest.raises(ValueError, match="is taken"):
        st.create_study(recipes, families=["blur"], seed=0, code="abcd23")
    with pytest.raises(TypeError, match="Engine"):
        S.StudyStore("sqlite:///x.db")
    assert [s.code for s in st.studies()] == ["ABCD23"]
