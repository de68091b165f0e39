"""The study store (lpips_explorer.study.store) on a real SQLite file in a temporary folder."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from lpips_explorer.study import store as S
from lpips_explorer.study import triplets as T


def _engine(folder):
    return sa.create_engine(S.sqlite_url(folder))


@pytest.fixture
def db(tmp_path):
    return S.StudyStore(_engine(tmp_path)), tmp_path


def _study(st, n=5, family="shift-vs-blur", seed=3, **kw):
    recipes = T.make_recipes(n, families=[family], seed=seed)
    return st.create_study(recipes, families=[family], seed=seed,
                           digests=[T.render(r).digest() for r in recipes], **kw), recipes


def test_schema_is_created_on_first_use(db):
    st, folder = db
    assert (folder / "study.db").is_file()
    insp = sa.inspect(st.engine)
    assert set(insp.get_table_names()) == {"schema_version", "studies", "triplets", "judgements", "images"}
    assert {c["name"] for c in insp.get_columns("judgements")} == {
        "id", "study_id", "session", "triplet_idx", "choice", "response_ms", "created"}
    assert st.schema_version() == S.SCHEMA_VERSION == 2
    with st.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == S.BUSY_TIMEOUT_MS
    assert S.StudyStore(st.engine).ensure_schema() == 2  # a second start changes nothing


def test_study_round_trip_and_recipes_regenerate_the_same_pixels(db):
    st, folder = db
    study, recipes = _study(st, reveal="end")
    assert len(study.code) == 6 and set(study.code) <= set(S.CODE_ALPHABET)
    # a fresh engine on the same file (as another server process would open it)
    other = S.StudyStore(_engine(folder))
    again = other.study(f"  {study.code.lower()} ")
    assert again == study and again.reveal == "end" and again.families == ("shift-vs-blur",)
    rows = other.triplets(again)
    assert [r.index for r in rows] == list(range(5))
    for row, recipe in zip(rows, recipes):
        t = T.render(row.recipe)
        assert t.digest() == row.digest
        direct = T.render(recipe)
        for a, b in ((t.ref, direct.ref), (t.p0, direct.p0), (t.p1, direct.p1)):
            assert a.tobytes() == b.tobytes()
    assert other.study("ZZZZZZ") is None and other.study("no!") is None and other.study("ab") is None


def test_one_answer_per_session_and_triplet(db):
    st, _ = db
    study, _ = _study(st)
    assert st.submit(study, "s1", 0, 1, 812) is True
    assert st.submit(study, "s1", 0, 0, 900) is False  # a double click: the first answer stays
    assert st.submit(study, "s2", 0, 2) is True
    js = st.judgements(study)
    assert [(j.session, j.triplet, j.choice, j.response_ms) for j in js] == [("s1", 0, 1, 812), ("s2", 0, 2, None)]
    assert st.answered(study, "s1") == {0} and st.answered(study, "s3") == set()
    for bad, match in (((study, "s1", 5, 0), "index must be"), ((study, "s1", 1, 3), "choice must be"),
                       ((study, "", 1, 0), "session must be")):
        with pytest.raises(ValueError, match=match):
            st.submit(*bad)


def test_30_threads_by_40_judgements_lose_none(tmp_path):
    """30 sessions, each on its own engine (as separate server processes would be), start together
    and each submit 40 judgements: every row arrives, with its content, and no error escapes."""
    setup = S.StudyStore(_engine(tmp_path))
    study, _ = _study(setup, n=40, family="noise-vs-blur")
    n_threads, n_each = 30, 40
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []
    expected = {}
    for k in range(n_threads):
        for i in range(n_each):
            expected[(f"session-{k:02d}", i)] = ((k * 7 + i) % 3, 100 * k + i)

    def work(k: int) -> None:
        try:
            st = S.StudyStore(_engine(tmp_path))
            barrier.wait()
            for i in range(n_each):
                choice, ms = expected[(f"session-{k:02d}", i)]
                assert st.submit(study, f"session-{k:02d}", i, choice, ms) is True
        except BaseException as exc:  # noqa: BLE001 - collected and reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    rows = S.StudyStore(_engine(tmp_path)).judgements(study)
    assert len(rows) == n_threads * n_each == 1200
    assert {(j.session, j.triplet): (j.choice, j.response_ms) for j in rows} == expected
    with sqlite3.connect(tmp_path / "study.db") as raw:
        assert raw.execute("SELECT COUNT(*) FROM judgements").fetchone()[0] == 1200


def test_a_locked_database_is_retried_then_reported_plainly(tmp_path, monkeypatch):
    """Another writer holds the lock: the store waits it out with backoff; when it never lets go,
    the caller gets StoreBusy with a plain sentence, never the driver's "database is locked"."""
    monkeypatch.setattr(S, "BUSY_TIMEOUT_MS", 0)  # no driver-side waiting: every lock reaches the retry
    st = S.StudyStore(_engine(tmp_path), retries=12, backoff=0.02)
    study, _ = _study(st)
    holder = sqlite3.connect(tmp_path / "study.db", timeout=0, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock for 0.4 s
    threading.Timer(0.4, lambda: holder.execute("COMMIT")).start()
    t0 = time.monotonic()
    assert st.submit(study, "s", 0, 1, 10) is True
    assert time.monotonic() - t0 >= 0.3  # it really waited for the lock
    time.sleep(0.1)
    holder.execute("BEGIN IMMEDIATE")  # and now for good
    try:
        quick = S.StudyStore(st.engine, retries=3, backoff=0.01)  # WAL: reading the schema is not blocked
        with pytest.raises(S.StoreBusy, match="nothing was saved") as info:
            quick.submit(study, "s", 1, 0)
        assert "locked" not in str(info.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [j.triplet for j in st.judgements(study)] == [0]


V1_DDL = [
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE studies (id INTEGER PRIMARY KEY AUTOINCREMENT, code VARCHAR(16) NOT NULL UNIQUE, "
    "created DATETIME NOT NULL, n_triplets INTEGER NOT NULL, families TEXT NOT NULL, seed BIGINT NOT NULL)",
    "CREATE TABLE triplets (id INTEGER PRIMARY KEY AUTOINCREMENT, study_id INTEGER NOT NULL REFERENCES studies(id), "
    "idx INTEGER NOT NULL, family VARCHAR(32) NOT NULL, recipe TEXT NOT NULL, UNIQUE (study_id, idx))",
    "CREATE TABLE judgements (id INTEGER PRIMARY KEY AUTOINCREMENT, study_id INTEGER NOT NULL REFERENCES studies(id), "
    "session VARCHAR(64) NOT NULL, triplet_idx INTEGER NOT NULL, choice SMALLINT NOT NULL, created DATETIME NOT NULL, "
    "CHECK (choice IN (0, 1, 2)), UNIQUE (study_id, session, triplet_idx))",
]


def test_a_version_1_database_is_upgraded_in_place(tmp_path):
    """A database written by the first layout (no reveal, response_ms, digest, images) keeps its data."""
    recipes = T.make_recipes(3, families=["blur"], seed=9)
    path = tmp_path / "study.db"
    with sqlite3.connect(path) as raw:
        for ddl in V1_DDL:
            raw.execute(ddl)
        raw.execute("INSERT INTO schema_version VALUES (1)")
        raw.execute("INSERT INTO studies (code, created, n_triplets, families, seed) "
                    "VALUES ('OLDKEY', '2025-01-02 03:04:05.000000', 3, '[\"blur\"]', 9)")
        raw.executemany("INSERT INTO triplets (study_id, idx, family, recipe) VALUES (1, ?, 'blur', ?)",
                        [(i, r.to_json()) for i, r in enumerate(recipes)])
        raw.executemany("INSERT INTO judgements (study_id, session, triplet_idx, choice, created) "
                        "VALUES (1, ?, ?, ?, '2025-01-02 03:05:00.000000')", [("a", 0, 1), ("a", 1, 2), ("b", 0, 0)])
    st = S.StudyStore(_engine(tmp_path))
    assert st.schema_version() == 2
    study = st.study("oldkey")
    assert study.reveal == "each" and study.n_triplets == 3 and study.created.year == 2025
    rows = st.triplets(study)
    assert [r.digest for r in rows] == [None] * 3
    assert [T.render(r.recipe).digest() for r in rows] == [T.render(r).digest() for r in recipes]
    old = st.judgements(study)
    assert [(j.session, j.triplet, j.choice, j.response_ms) for j in old] == [("a", 0, 1, None), ("a", 1, 2, None),
                                                                           ("b", 0, 0, None)]
    assert st.submit(study, "a", 2, 0, 640) and st.judgements(study, "a")[-1].response_ms == 640
    st.put_image("upload:abc", b"png-bytes")
    assert st.get_image("upload:abc") == b"png-bytes"
    new, _ = _study(st)  # new studies work beside the old one
    assert st.study(new.code).reveal == "each"
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = 3")
    with pytest.raises(RuntimeError, match="schema version 3"):
        S.StudyStore(_engine(tmp_path))


def test_create_study_rejects(db):
    st, _ = db
    recipes = T.make_recipes(2, families=["blur"], seed=0)
    with pytest.raises(ValueError, match="at least one triplet"):
        st.create_study([], families=["blur"], seed=0)
    with pytest.raises(ValueError, match="reveal must be"):
        st.create_study(recipes, families=["blur"], seed=0, reveal="never")
    st.create_study(recipes, families=["blur"], seed=0, code="ABCD23")
    with pytest.raises(ValueError, match="is taken"):
        st.create_study(recipes, families=["blur"], seed=0, code="abcd23")
    with pytest.raises(TypeError, match="Engine"):
        S.StudyStore("sqlite:///x.db")
