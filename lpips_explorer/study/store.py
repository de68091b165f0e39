"""Where a class study lives: a SQLAlchemy schema and a small repository over any :class:`~sqlalchemy.engine.Engine`.

No Streamlit here: the page hands in the Engine of ``st.connection("sql")``; tests hand in one of
their own (a SQLite file in a temporary folder, or a throw-away PostgreSQL cluster). Any
SQLAlchemy URL works; SQLite and PostgreSQL (``postgresql+psycopg://…``, the ``postgres`` extra)
are tested. :func:`sqlite_url` gives the default one.

Tables (schema version :data:`SCHEMA_VERSION` = 4):

- ``schema_version(version)``: one row;
- ``studies(id, code, created, n_triplets, families, seed, reveal, lecturer_hash, released, closed,
  metrics_pending)``:
  ``code`` the short code students type, ``families`` a JSON list, ``reveal`` ``"each"`` (metrics
  after every answer) or ``"end"``; ``lecturer_hash`` the SHA-256 of the lecturer key (the key
  itself is never stored); ``released`` whether students see the class results; ``closed`` when
  the lecturer closed it (no more answers; the class results are then shown to everyone);
  ``metrics_pending`` while its learned metrics are still being computed after creation;
- ``triplets(id, study_id, idx, family, recipe, digest, ref_png, p0_png, p1_png, distances)``:
  ``recipe`` the JSON of a :class:`~lpips_explorer.study.triplets.Recipe`, ``digest`` the SHA-256
  of its rendered pixels; the three 8-bit PNGs students are shown and ``distances``, the JSON
  ``{metric spec name: [value for copy 1, value for copy 2]}`` computed on those PNGs' pixels when
  the study was created (:mod:`lpips_explorer.study.prepare`), so that answering computes nothing
  (a study stored under the short keys of earlier versions, ``"lpips-alex"``, reads back under
  the spec names);
- ``judgements(id, study_id, session, triplet_idx, choice, response_ms, created)``: ``session``
  an anonymous participant id (:func:`lpips_explorer.study.access.participant_id`: a hash of the
  token in the student's link; no name, no address), ``choice`` 0 (first copy), 1 (second copy)
  or 2 (can't tell); one judgement per participant and triplet: a second answer is refused and
  the first stays (:meth:`StudyStore.submit`);
- ``images(id, png)``: uploaded source images (PNG bytes), by :func:`~lpips_explorer.study.triplets.upload_id`;
- ``participants(id, study_id, session, kept, created)``: whether a student's browser keeps their
  token (``kept`` false: it keeps no cookie, so opening the bare link again makes a new judge; the
  lecturer sees how many such judges joined). The page notes only browsers that keep none.

Upgrades run in place, in one transaction, on first use (:meth:`StudyStore.ensure_schema`):
version 1 (no ``reveal``, ``response_ms``, ``digest``, ``images``) → 2 → 3 (the lecturer columns
and the stored images and distances) → 4 (``participants``). A study from before version 3 has no lecturer key: its
results stay visible to everyone (``released`` is set), as they were, and its triplets get their
images and distances when first shown (:meth:`StudyStore.fill_triplets`).

Writes never stall a class: SQLite connections get ``PRAGMA journal_mode=WAL`` (readers never
block the writer), a short ``busy_timeout`` (:data:`BUSY_TIMEOUT_MS`) and ``foreign_keys=ON``;
PostgreSQL connections a ``lock_timeout`` of the same length. A transaction that meets a lock is
retried with jittered backoff until :attr:`StudyStore.deadline` (2.5 s) would pass; then
:class:`StoreBusy` (a plain sentence, never the driver's message) reaches the caller, and nothing
was written. An answer is one ``INSERT … ON CONFLICT DO NOTHING``: a retry, a double click or a
resent message never stores it twice. :meth:`StudyStore.answer` (what the page calls) also takes it
only for the participant's *current* triplet (the first one not yet answered): an answer naming any
other triplet (a second tap, a stale tab, a replayed message) is acknowledged and changes nothing.

A database that cannot take a write at all (a full or read-only disk, a database file that has
gone, a file that is not a database) raises :class:`StoreUnavailable` with the cause in words,
never the driver's exception; the store keeps the last fault (:attr:`StudyStore.fault`) for the
lecturer's view.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import hmac
import json
import os
import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from lpips_explorer.study.scoring import CHOICES, stored_key

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CODE_ALPHABET",
    "REVEAL_MODES",
    "SCHEMA_VERSION",
    "Answer",
    "Fault",
    "Judgement",
    "NotLecturer",
    "StoreBusy",
    "StoreUnavailable",
    "Study",
    "StudyClosed",
    "StudyStore",
    "TripletRow",
    "key_hash",
    "metadata",
    "normalise_code",
    "sqlite_url",
]

SCHEMA_VERSION = 4
REVEAL_MODES = ("each", "end")
#: Study codes: 6 characters without look-alikes (no 0/O, 1/I/L).
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
#: How long one statement waits for a lock held by another connection (SQLite ``busy_timeout``,
#: PostgreSQL ``lock_timeout``), in ms. Short, so that the store's own retries, bounded by
#: :attr:`StudyStore.deadline`, decide how long a student waits.
BUSY_TIMEOUT_MS = 250
#: The longest a write may take, retries included, before :class:`StoreBusy` (seconds).
DEADLINE_S = 2.5

metadata = sa.MetaData()

schema_version = sa.Table("schema_version", metadata, sa.Column("version", sa.Integer, nullable=False))

studies = sa.Table(
    "studies", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("code", sa.String(16), nullable=False, unique=True),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.Column("n_triplets", sa.Integer, nullable=False),
    sa.Column("families", sa.Text, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("reveal", sa.String(8), nullable=False, server_default="each"),
    sa.Column("lecturer_hash", sa.String(64), nullable=True),
    sa.Column("released", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("closed", sa.DateTime(timezone=True), nullable=True),
    sa.Column("metrics_pending", sa.Boolean, nullable=False, server_default=sa.false()),
)

triplets = sa.Table(
    "triplets", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("family", sa.String(32), nullable=False),
    sa.Column("recipe", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=True),
    sa.Column("ref_png", sa.LargeBinary, nullable=True),
    sa.Column("p0_png", sa.LargeBinary, nullable=True),
    sa.Column("p1_png", sa.LargeBinary, nullable=True),
    sa.Column("distances", sa.Text, nullable=True),
    sa.UniqueConstraint("study_id", "idx", name="uq_triplet_index"),
)

judgements = sa.Table(
    "judgements", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
    sa.Column("session", sa.String(64), nullable=False),
    sa.Column("triplet_idx", sa.Integer, nullable=False),
    sa.Column("choice", sa.SmallInteger, nullable=False),
    sa.Column("response_ms", sa.Integer, nullable=True),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("choice IN (0, 1, 2)", name="ck_choice"),
    sa.UniqueConstraint("study_id", "session", "triplet_idx", name="uq_one_answer"),
)

images = sa.Table(
    "images", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("png", sa.LargeBinary, nullable=False),
)

participants = sa.Table(
    "participants", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
    sa.Column("session", sa.String(64), nullable=False),
    sa.Column("kept", sa.Boolean, nullable=False),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("study_id", "session", name="uq_participant"),
)


class StoreBusy(RuntimeError):
    """The database stayed locked until the write's deadline; nothing was written."""


class StoreUnavailable(RuntimeError):
    """The database cannot be used right now (full or read-only disk, a file gone, not a database);
    nothing was written. ``cause`` says why in words (for the lecturer and the server's owner)."""

    def __init__(self, cause: str):
        super().__init__(f"The study database cannot be used: {cause}.")
        self.cause = cause


@dataclass(frozen=True)
class Fault:
    """The last time the database refused work: ``when`` (UTC), ``cause`` in words, how many
    refusals since ``first`` (reset after 10 minutes without one)."""

    when: _dt.datetime
    cause: str
    count: int
    first: _dt.datetime


@dataclass(frozen=True)
class Answer:
    """What :meth:`StudyStore.answer` did: ``stored`` (this answer is now the participant's answer
    to ``triplet``), else it was acknowledged without a change (``triplet`` was answered already,
    or is not the participant's current one). ``current``: the participant's first unanswered
    triplet after the call (``None``: all answered)."""

    stored: bool
    triplet: int
    current: int | None


class StudyClosed(RuntimeError):
    """The lecturer has closed the study: it takes no more answers."""


class NotLecturer(PermissionError):
    """The key given is not this study's lecturer key."""


@dataclass(frozen=True)
class Study:
    """A study as stored. ``lecturer_key`` is set only on the object :meth:`StudyStore.create_study`
    returns (the one moment the key exists outside its holder's link)."""

    code: str
    created: _dt.datetime
    n_triplets: int
    families: tuple[str, ...]
    seed: int
    reveal: str
    id: int
    released: bool = False
    closed: _dt.datetime | None = None
    lecturer_hash: str | None = field(default=None, repr=False)
    lecturer_key: str | None = field(default=None, repr=False, compare=False)
    metrics_pending: bool = False

    @property
    def class_visible(self) -> bool:
        """Whether students see the class results: released by the lecturer, or the study is closed."""
        return self.released or self.closed is not None


@dataclass(frozen=True)
class TripletRow:
    """One stored triplet: its recipe, the PNGs shown and each metric's values
    (``distances``: ``key → (copy 1, copy 2)``; ``None`` until computed, for a study from before version 3)."""

    index: int
    family: str
    recipe: str  # JSON
    digest: str | None
    ref_png: bytes | None = field(default=None, repr=False)
    p0_png: bytes | None = field(default=None, repr=False)
    p1_png: bytes | None = field(default=None, repr=False)
    distances: Mapping[str, tuple[float, float]] | None = field(default=None, repr=False)

    @property
    def ready(self) -> bool:
        """Its images and metric values are stored."""
        return None not in (self.ref_png, self.p0_png, self.p1_png, self.distances)


@dataclass(frozen=True)
class Judgement:
    session: str
    triplet: int
    choice: int
    response_ms: int | None
    created: _dt.datetime


def sqlite_url(folder: str | Path, name: str = "study.db") -> str:
    """``sqlite:///<folder>/<name>`` (absolute), creating ``folder`` if needed."""
    path = Path(folder).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path / name}"


def key_hash(key: str) -> str:
    """The stored form of a lecturer key: SHA-256 (hex). Keys are 192-bit random tokens, so an
    unsalted hash cannot be reversed by guessing."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"a lecturer key must be a non-empty string, got {key!r}")
    return hashlib.sha256(key.encode()).hexdigest()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_MS)}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
    finally:
        cur.close()


def _postgres_timeouts(dbapi_conn, _record) -> None:
    """A statement waits at most :data:`BUSY_TIMEOUT_MS` for a lock (then SQLSTATE 55P03, retried)."""
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"SET lock_timeout = {int(BUSY_TIMEOUT_MS)}")
    finally:
        cur.close()
    dbapi_conn.commit()  # SET is transactional: commit it, or the pool's reset would roll it back


_LISTENERS = {"sqlite": _sqlite_pragmas, "postgresql": _postgres_timeouts}
#: SQLSTATEs of a lock wait given up (55P03), a statement cancelled by a timeout (57014), a
#: serialization failure (40001) and a deadlock (40P01): the transaction did nothing; retry it.
_PG_RETRY = {"55P03", "57014", "40001", "40P01"}


def _is_busy(exc: OperationalError) -> bool:
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) in _PG_RETRY:
        return True
    text = str(orig).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


#: What a driver's message or SQLSTATE means, in words (the first match wins).
_FAULTS_SQLITE = (
    ("database or disk is full", "the disk is full"),
    ("readonly database", "the database is read-only (a read-only disk, folder or file)"),
    ("unable to open database file", "the database file cannot be opened (its folder is gone or not writable)"),
    ("disk i/o error", "a disk I/O error (the disk is full, failing or gone)"),
    ("file is not a database", "the database file is not a database"),
    ("malformed", "the database file is damaged"),
    ("no such table", "the database has lost its tables (was the file replaced?)"),
)
_FAULTS_PG = {"53100": "the database server's disk is full", "53200": "the database server is out of memory",
              "25006": "the database is read-only", "57P01": "the database server is shutting down",
              "57P03": "the database server is not accepting connections yet"}
_OS_FAULTS = {errno.ENOSPC: "the disk is full", errno.EROFS: "the disk is read-only",
              errno.EACCES: "no permission to write the database", errno.EPERM: "no permission to write the database",
              errno.ENOENT: "the database file is gone", errno.EIO: "a disk I/O error"}


def fault_cause(exc: BaseException) -> str | None:
    """The cause of a database failure in words, or ``None`` when ``exc`` is not one the store
    turns into :class:`StoreUnavailable` (a programming error, say, stays an exception)."""
    if isinstance(exc, OSError):
        return _OS_FAULTS.get(exc.errno, f"the operating system refused the write ({exc.strerror or exc})")
    if isinstance(exc, DBAPIError):
        orig = getattr(exc, "orig", None)
        if isinstance(orig, OSError):
            return fault_cause(orig)
        state = getattr(orig, "sqlstate", None)
        if state in _FAULTS_PG:
            return _FAULTS_PG[state]
        if isinstance(state, str) and state.startswith("08"):
            return "the database server cannot be reached"
        text = str(orig if orig is not None else exc).lower()
        for needle, cause in _FAULTS_SQLITE:
            if needle in text:
                return cause
        if exc.connection_invalidated:
            return "the connection to the database was lost"
    return None


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _utc(value: _dt.datetime | None) -> _dt.datetime | None:
    """A stored time as an aware UTC datetime (SQLite gives it back naive)."""
    if value is None:
        return None
    return value.replace(tzinfo=_dt.timezone.utc) if value.tzinfo is None else value.astimezone(_dt.timezone.utc)


def _study(r) -> "Study":
    return Study(r.code, _utc(r.created), r.n_triplets, tuple(json.loads(r.families)), r.seed, r.reveal, r.id,
                 bool(r.released), _utc(r.closed), r.lecturer_hash, None, bool(r.metrics_pending))


def _distances_json(d: Mapping[str, Sequence[float]]) -> str:
    out = {}
    for key, pair in d.items():
        a, b = (float(v) for v in pair)
        out[str(key)] = [a, b]
    return json.dumps(out, sort_keys=True)


def _distances_from(text: str | None) -> dict[str, tuple[float, float]] | None:
    """The stored JSON under spec names (:func:`~lpips_explorer.study.scoring.stored_key`: a study
    stored under earlier short keys such as ``"lpips-alex"`` reads back like a new one)."""
    if text is None:
        return None
    return {stored_key(k): (float(v[0]), float(v[1])) for k, v in json.loads(text).items()}


def _png(value: Any, name: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)) or not bytes(value[:8]) == b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{name} must be PNG bytes, got {type(value).__name__}")
    return bytes(value)


T = TypeVar("T")
_LISTEN_LOCK = threading.Lock()


class StudyStore:
    """Studies, triplets and judgements in one database.

    Args:
        engine: a SQLAlchemy Engine (``st.connection("sql").engine`` in the app).
        deadline: seconds a write (or read) may take, its retries included, before
            :class:`StoreBusy` (default :data:`DEADLINE_S`). Each attempt can itself wait up to
            :data:`BUSY_TIMEOUT_MS` for a lock, which the loop counts in.
        retries: the most attempts within the deadline (default 12).
        backoff: first wait between attempts in seconds, doubled each attempt (with jitter),
            capped at 0.25 s.

    The schema is created (or upgraded) on first use by :meth:`ensure_schema`, which the
    constructor calls.
    """

    def __init__(self, engine: Engine, *, deadline: float = DEADLINE_S, retries: int = 12, backoff: float = 0.02):
        if not isinstance(engine, Engine):
            raise TypeError(f"engine must be a sqlalchemy Engine, got {type(engine).__name__}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
            raise ValueError(f"retries must be an int >= 1, got {retries!r}")
        if not backoff >= 0:
            raise ValueError(f"backoff must be >= 0 seconds, got {backoff!r}")
        if not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
        self.engine, self.retries, self.backoff, self.deadline = engine, retries, float(backoff), float(deadline)
        #: The last refusal (:class:`Fault`), for the lecturer's view; ``None`` while all is well.
        self.fault: Fault | None = None
        self._fault_lock = threading.Lock()
        db = engine.url.database if engine.dialect.name == "sqlite" else None
        #: A SQLite file that must stay where it is (a vanished file is a fault, not a new database).
        self._file = None if not db or db == ":memory:" or db.startswith("file:") else Path(db)
        self._watch_file = False
        listener = _LISTENERS.get(engine.dialect.name)
        if listener is not None:
            with _LISTEN_LOCK:
                if not event.contains(engine, "connect", listener):
                    event.listen(engine, "connect", listener)
                    engine.dispose()  # connections opened before the listener get the settings too
        self.ensure_schema()
        self._watch_file = self._file is not None and self._file.exists()

    # ------------------------------------------------------------------ faults
    def _record(self, cause: str) -> None:
        now = _now()
        with self._fault_lock:
            last = self.fault
            fresh = last is None or (now - last.when).total_seconds() > 600
            self.fault = Fault(now, cause, 1 if fresh else last.count + 1, now if fresh else last.first)

    def _unavailable(self, cause: str, exc: BaseException | None = None) -> StoreUnavailable:
        self._record(cause)
        err = StoreUnavailable(cause)
        if exc is not None:
            err.__cause__ = exc
        return err

    # ------------------------------------------------------------------ transactions
    def _write(self, fn: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run ``fn`` in one transaction, retried while the database is locked, within :attr:`deadline`.

        On SQLite a writing transaction starts with ``BEGIN IMMEDIATE``: it takes the write lock
        first, waiting for it in the busy handler. A deferred transaction that reads first could
        not upgrade to writing once another writer had committed after its read (SQLite's
        ``SQLITE_BUSY_SNAPSHOT``, which no busy timeout waits out).
        """
        t0 = time.monotonic()
        lock_wait = BUSY_TIMEOUT_MS / 1000.0
        immediate = write and self.engine.dialect.name == "sqlite"
        for attempt in range(self.retries):
            if self._watch_file and not self._file.exists():  # SQLite would write on into a deleted file
                raise self._unavailable(f"the database file {self._file} is gone (moved or deleted)")
            try:
                with self.engine.begin() as conn:
                    if immediate:
                        conn.exec_driver_sql("BEGIN IMMEDIATE")
                    return fn(conn)
            except OperationalError as exc:
                if not _is_busy(exc):
                    cause = fault_cause(exc)
                    if cause is None:
                        raise
                    raise self._unavailable(cause, exc) from exc
                pause = min(self.backoff * 2 ** attempt, 0.25) * (0.5 + random.random())
                late = time.monotonic() - t0 + pause + lock_wait > self.deadline
                if late or attempt + 1 == self.retries:
                    self._record("the database stayed locked by another writer (busy)")
                    raise StoreBusy("The study database is busy right now and your answer was not saved: "
                                    "please press again.") from exc
                time.sleep(pause)
            except (DBAPIError, OSError) as exc:
                cause = fault_cause(exc)
                if cause is None:
                    raise
                raise self._unavailable(cause, exc) from exc
        raise AssertionError("unreachable")

    def _read(self, fn: Callable[[Connection], T]) -> T:
        return self._write(fn, write=False)  # the same bounded retry (a WAL reader is rarely blocked, but a checkpoint can)

    # ------------------------------------------------------------------ schema
    def schema_version(self) -> int | None:
        """The stored schema version, ``None`` for an empty database."""
        def read(conn):
            if not sa.inspect(conn).has_table("schema_version"):
                return None
            return conn.execute(sa.select(schema_version.c.version)).scalar()
        return self._read(read)

    def ensure_schema(self) -> int:
        """Create the tables on an empty database, or upgrade an older schema; returns the version.

        Raises:
            RuntimeError: the database holds a newer schema than this code knows, or foreign tables.
        """
        def current(conn) -> bool:  # a database at this version is only read (it may be read-only)
            return (sa.inspect(conn).has_table("schema_version")
                    and conn.execute(sa.select(schema_version.c.version)).scalar() == SCHEMA_VERSION)

        for attempt in range(5):  # two servers creating the same new database at once: the loser sees the tables
            try:
                if self._read(current):
                    return SCHEMA_VERSION
                return self._write(self._ensure)
            except (OperationalError, IntegrityError, StoreBusy, StoreUnavailable, sa.exc.ProgrammingError):
                if attempt == 4:
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    @staticmethod
    def _ensure(conn: Connection) -> int:
        insp = sa.inspect(conn)
        if not insp.has_table("schema_version"):
            if insp.has_table("studies"):
                raise RuntimeError("the database has a 'studies' table but no schema_version: not a study database")
            metadata.create_all(conn)
            conn.execute(schema_version.insert().values(version=SCHEMA_VERSION))
            return SCHEMA_VERSION
        version = conn.execute(sa.select(schema_version.c.version)).scalar()
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise RuntimeError(f"the study database has schema version {version}; this code knows up to "
                               f"{SCHEMA_VERSION}. Update LPIPS Explorer.")
        if (not isinstance(version, int) or isinstance(version, bool)
                or any(v not in UPGRADES for v in range(version, SCHEMA_VERSION))):
            known = ", ".join(str(v) for v in [*sorted(UPGRADES), SCHEMA_VERSION])
            raise RuntimeError(f"the study database has schema version {str(version)[:20]!r}, which no version of "
                               f"LPIPS Explorer wrote (known: {known}): not a study database this code can "
                               "open or upgrade")
        while version < SCHEMA_VERSION:
            UPGRADES[version](conn)
            version += 1
            conn.execute(schema_version.update().values(version=version))
        return version

    # ------------------------------------------------------------------ studies
    def create_study(self, recipes: Sequence[Any], *, families: Sequence[str], seed: int,
                     reveal: str = "each", digests: Sequence[str] | None = None, code: str | None = None,
                     pngs: Sequence[tuple[bytes, bytes, bytes]] | None = None,
                     distances: Sequence[Mapping[str, Sequence[float]]] | None = None,
                     lecturer_key: str | None = None, metrics_pending: bool = False) -> Study:
        """Store a study and its triplets; returns it with a fresh short code (or ``code``) and its
        lecturer key (``lecturer_key``, or a fresh 192-bit one), of which only the hash is stored.

        Args:
            recipes: :class:`~lpips_explorer.study.triplets.Recipe` objects (anything with ``to_json()``
                and ``family``), in the order students see them.
            digests: the SHA-256 of each triplet's pixels (lets a later version notice drift).
            pngs: each triplet's ``(reference, copy 1, copy 2)`` PNG bytes as shown to students.
            distances: each triplet's ``{spec name: (value for copy 1, value for copy 2)}``.
            lecturer_key: the key that opens the lecturer view (default: drawn here).
            metrics_pending: the learned metrics are computed after creation (the page's background
                job, which clears it with :meth:`metrics_done`).

        Raises:
            ValueError: no recipes, a bad reveal mode, lists of another length, a taken ``code``.
        """
        recipes = list(recipes)
        if not recipes:
            raise ValueError("a study needs at least one triplet")
        if reveal not in REVEAL_MODES:
            raise ValueError(f"reveal must be one of {REVEAL_MODES}, got {reveal!r}")
        for name, seq in (("digests", digests), ("pngs", pngs), ("distances", distances)):
            if seq is not None and len(seq) != len(recipes):
                raise ValueError(f"{len(seq)} {name} for {len(recipes)} recipes")
        key = secrets.token_urlsafe(24) if lecturer_key is None else lecturer_key
        hashed = key_hash(key)
        created = _now()
        rows = []
        for i, r in enumerate(recipes):
            row = {"idx": i, "family": r.family, "recipe": r.to_json(),
                   "digest": None if digests is None else digests[i], "ref_png": None, "p0_png": None,
                   "p1_png": None, "distances": None}
            if pngs is not None:
                row["ref_png"], row["p0_png"], row["p1_png"] = (_png(p, f"pngs[{i}]") for p in pngs[i])
            if distances is not None:
                row["distances"] = _distances_json(distances[i])
            rows.append(row)

        def insert(conn, c):
            sid = conn.execute(studies.insert().values(
                code=c, created=created, n_triplets=len(recipes), families=json.dumps(list(families)),
                seed=int(seed), reveal=reveal, lecturer_hash=hashed, released=False,
                metrics_pending=bool(metrics_pending))).inserted_primary_key[0]
            conn.execute(triplets.insert(), [{"study_id": sid, **row} for row in rows])
            return sid

        for _ in range(20 if code is None else 1):
            c = normalise_code(code) if code is not None else "".join(
                secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            try:
                sid = self._write(lambda conn: insert(conn, c))
            except IntegrityError:
                if code is not None:
                    raise ValueError(f"the study code {c!r} is taken") from None
                continue
            return Study(c, created, len(recipes), tuple(families), int(seed), reveal, sid, False, None, hashed, key,
                         bool(metrics_pending))
        raise RuntimeError("could not draw a free study code in 20 attempts")

    def study(self, code: str) -> Study | None:
        """The study with ``code`` (case and spaces ignored), or ``None``."""
        c = normalise_code(code, strict=False)
        if c is None:
            return None
        row = self._read(lambda conn: conn.execute(sa.select(studies).where(studies.c.code == c)).first())
        if row is None:
            return None
        return _study(row)

    def studies(self) -> list[Study]:
        rows = self._read(lambda conn: conn.execute(sa.select(studies).order_by(studies.c.id)).all())
        return [_study(r) for r in rows]

    def triplets(self, study: Study, *, images: bool = True) -> list[TripletRow]:
        """The study's triplets in order; without their PNGs when ``images`` is false."""
        cols = [triplets.c.idx, triplets.c.family, triplets.c.recipe, triplets.c.digest, triplets.c.distances]
        if images:
            cols += [triplets.c.ref_png, triplets.c.p0_png, triplets.c.p1_png]
        rows = self._read(lambda conn: conn.execute(
            sa.select(*cols).where(triplets.c.study_id == study.id).order_by(triplets.c.idx)).all())
        return [TripletRow(r.idx, r.family, r.recipe, r.digest,
                           *((bytes(r.ref_png) if r.ref_png is not None else None,
                              bytes(r.p0_png) if r.p0_png is not None else None,
                              bytes(r.p1_png) if r.p1_png is not None else None) if images else (None, None, None)),
                           _distances_from(r.distances)) for r in rows]

    def fill_triplets(self, study: Study, filled: Mapping[int, tuple[tuple[bytes, bytes, bytes],
                                                                      Mapping[str, Sequence[float]]]]) -> None:
        """Store the images and metric values of triplets that lack them (a study from before version 3):
        ``{index: ((ref, copy 1, copy 2) PNGs, distances)}``. A triplet already filled is left as it is."""
        updates = []
        for i, (pngs, dist) in filled.items():
            ref, p0, p1 = (_png(p, f"pngs[{i}]") for p in pngs)
            updates.append({"b_idx": int(i), "ref_png": ref, "p0_png": p0, "p1_png": p1,
                            "distances": _distances_json(dist)})
        if not updates:
            return
        stmt = (triplets.update()
                .where((triplets.c.study_id == study.id) & (triplets.c.idx == sa.bindparam("b_idx"))
                       & triplets.c.distances.is_(None))
                .values(ref_png=sa.bindparam("ref_png"), p0_png=sa.bindparam("p0_png"),
                        p1_png=sa.bindparam("p1_png"), distances=sa.bindparam("distances")))
        self._write(lambda conn: conn.execute(stmt, updates))

    # ------------------------------------------------------------------ the lecturer
    def is_lecturer(self, study: Study, key: str | None) -> bool:
        """Whether ``key`` is this study's lecturer key (constant-time comparison of the hashes)."""
        if not key or not isinstance(key, str) or study.lecturer_hash is None or len(key) > 256:
            return False
        return hmac.compare_digest(key_hash(key), study.lecturer_hash)

    def _lecturer_update(self, study: Study, key: str, **values) -> Study:
        if not self.is_lecturer(study, key):
            raise NotLecturer(f"that is not the lecturer key of study {study.code}")
        self._write(lambda conn: conn.execute(studies.update().where(studies.c.id == study.id).values(**values)))
        return self.study(study.code)

    def release(self, study: Study, key: str, released: bool = True) -> Study:
        """Show (or hide again) the class results to the students; returns the study as now stored.

        Raises:
            NotLecturer: ``key`` is not the study's lecturer key.
        """
        return self._lecturer_update(study, key, released=bool(released))

    def close(self, study: Study, key: str) -> Study:
        """Close the study: no more answers, and the class results are shown to everyone.

        Raises:
            NotLecturer: ``key`` is not the study's lecturer key.
        """
        if study.closed is not None:
            return study
        return self._lecturer_update(study, key, closed=_now())

    def reopen(self, study: Study, key: str) -> Study:
        """Take answers again after :meth:`close`."""
        return self._lecturer_update(study, key, closed=None)

    # ------------------------------------------------------------------ judgements
    def submit(self, study: Study, session: str, index: int, choice: int, response_ms: int | None = None) -> bool:
        """Record one judgement: ``True`` when stored, ``False`` when this participant had already
        answered this triplet (the first answer stays; nothing is written).

        One transaction: the study's ``closed`` is read and the row inserted with ``ON CONFLICT DO
        NOTHING`` (PostgreSQL, SQLite), so a retry after a lost reply never stores it twice.

        Raises:
            ValueError: a bad session id, triplet index or choice.
            StudyClosed: the lecturer has closed the study.
            StoreBusy: the database stayed locked until the deadline; nothing was written.
        """
        row = _judgement_row(study, session, index, choice, response_ms)

        def write(conn) -> bool:
            closed = conn.execute(sa.select(studies.c.closed).where(studies.c.id == study.id)).first()
            if closed is None or closed[0] is not None:
                raise StudyClosed(f"study {study.code} is closed: it takes no more answers")
            return _insert_once(conn, judgements, row, ("study_id", "session", "triplet_idx"))

        return self._write(write)

    def answer(self, study: Study, session: str, index: int, choice: int, response_ms: int | None = None) -> Answer:
        """Record a participant's answer to the triplet they were shown, only if it is their
        *current* triplet: the first one they have not answered (the one the page shows).

        An answer naming any other triplet (the second tap of a double tap, a key's auto-repeat, a
        click in a stale tab, a replayed message) is acknowledged and changes nothing
        (``Answer.stored`` false). One transaction: the study's ``closed``, the participant's answers
        and the insert (``ON CONFLICT DO NOTHING``, so two servers racing store it once).

        Raises:
            ValueError: a bad session id, triplet index or choice.
            StudyClosed: the lecturer has closed the study.
            StoreBusy, StoreUnavailable: nothing was written; the student presses again.
        """
        row = _judgement_row(study, session, index, choice, response_ms)

        def first_open(done: set[int]) -> int | None:
            return next((i for i in range(study.n_triplets) if i not in done), None)

        def write(conn) -> Answer:
            closed = conn.execute(sa.select(studies.c.closed).where(studies.c.id == study.id)).first()
            if closed is None or closed[0] is not None:
                raise StudyClosed(f"study {study.code} is closed: it takes no more answers")
            done = {int(i) for (i,) in conn.execute(sa.select(judgements.c.triplet_idx).where(
                (judgements.c.study_id == study.id) & (judgements.c.session == session)))}
            if first_open(done) != index:
                return Answer(False, index, first_open(done))
            stored = _insert_once(conn, judgements, row, ("study_id", "session", "triplet_idx"))
            if stored:
                done.add(index)
            return Answer(stored, index, first_open(done))

        return self._write(write)

    def judgements(self, study: Study, session: str | None = None) -> list[Judgement]:
        """Every judgement of the study (or of one session), in the order they were stored."""
        q = sa.select(judgements).where(judgements.c.study_id == study.id)
        if session is not None:
            q = q.where(judgements.c.session == session)
        rows = self._read(lambda conn: conn.execute(q.order_by(judgements.c.id)).all())
        return [Judgement(r.session, r.triplet_idx, r.choice, r.response_ms, _utc(r.created)) for r in rows]

    def answered(self, study: Study, session: str) -> dict[int, int]:
        """``triplet index → choice`` for every triplet this session has answered."""
        q = sa.select(judgements.c.triplet_idx, judgements.c.choice).where(
            (judgements.c.study_id == study.id) & (judgements.c.session == session))
        return {int(i): int(c) for i, c in self._read(lambda conn: conn.execute(q).all())}

    def counts(self, study: Study) -> tuple[int, int]:
        """``(participants who answered at least once, judgements)`` of the study."""
        q = sa.select(sa.func.count(sa.distinct(judgements.c.session)), sa.func.count()).where(
            judgements.c.study_id == study.id)
        n_sessions, n = self._read(lambda conn: conn.execute(q).one())
        return int(n_sessions), int(n)

    # ------------------------------------------------------------------ participants' browsers
    def mark_participant(self, study: Study, session: str, kept: bool) -> None:
        """Note whether this participant's browser keeps their token (a cookie); a browser that
        once said it keeps it stays "kept"."""
        if not isinstance(session, str) or not 1 <= len(session) <= 64:
            raise ValueError(f"session must be a non-empty id of at most 64 characters, got {session!r}")
        row = {"study_id": study.id, "session": session, "kept": bool(kept), "created": _now()}

        def write(conn) -> None:
            if not _insert_once(conn, participants, row, ("study_id", "session")) and kept:
                conn.execute(participants.update().where((participants.c.study_id == study.id)
                                                         & (participants.c.session == session)).values(kept=True))

        self._write(write)

    def unkept(self, study: Study) -> int:
        """How many participants who answered said their browser keeps nothing (opening the bare
        link again would have made them a new judge)."""
        answered = sa.select(judgements.c.session).where(judgements.c.study_id == study.id).distinct()
        q = sa.select(sa.func.count()).select_from(participants).where(
            (participants.c.study_id == study.id) & participants.c.kept.is_(False)
            & participants.c.session.in_(answered))
        return int(self._read(lambda conn: conn.execute(q).scalar()))

    # ------------------------------------------------------------------ metric values added later
    def add_distances(self, study: Study, values: Mapping[int, Mapping[str, Sequence[float]]]) -> None:
        """Merge metric values into stored triplets (``{index: {spec name: (copy 1, copy 2)}}``):
        the metrics a study computes after it was created (values already stored stay)."""
        if not values:
            return

        def write(conn) -> None:
            rows = conn.execute(sa.select(triplets.c.idx, triplets.c.distances).where(
                (triplets.c.study_id == study.id) & triplets.c.idx.in_([int(i) for i in values]))).all()
            for idx, text in rows:
                have = json.loads(text) if text else {}
                merged = {**{k: list(map(float, v)) for k, v in values[idx].items()}, **have}
                conn.execute(triplets.update().where((triplets.c.study_id == study.id) & (triplets.c.idx == idx))
                             .values(distances=_distances_json(merged)))

        self._write(write)

    def metrics_done(self, study: Study) -> None:
        """The learned metrics computed after creation are all stored (or given up): clear ``metrics_pending``."""
        self._write(lambda conn: conn.execute(studies.update().where(studies.c.id == study.id)
                                              .values(metrics_pending=False)))

    # ------------------------------------------------------------------ uploaded images
    def put_image(self, image_id: str, png: bytes) -> None:
        """Keep an uploaded source image (idempotent)."""
        if not isinstance(png, (bytes, bytearray)) or not png:
            raise ValueError("png must be non-empty bytes")
        self._write(lambda conn: _insert_once(conn, images, {"id": image_id, "png": bytes(png)}, ("id",)))

    def get_image(self, image_id: str) -> bytes | None:
        return self._read(lambda conn: conn.execute(sa.select(images.c.png).where(images.c.id == image_id)).scalar())


def _judgement_row(study: Study, session: str, index: int, choice: int, response_ms: int | None) -> dict:
    """A judgement's row, its arguments checked (``ValueError``: a bad session id, index or choice)."""
    if not isinstance(session, str) or not 1 <= len(session) <= 64:
        raise ValueError(f"session must be a non-empty id of at most 64 characters, got {session!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < study.n_triplets:
        raise ValueError(f"index must be in [0, {study.n_triplets}), got {index!r}")
    if choice not in CHOICES or isinstance(choice, bool):
        raise ValueError(f"choice must be one of {CHOICES}, got {choice!r}")
    if response_ms is not None:
        response_ms = max(0, min(int(response_ms), 2**31 - 1))
    return {"study_id": study.id, "session": session, "triplet_idx": index, "choice": int(choice),
            "response_ms": response_ms, "created": _now()}


def _insert_once(conn: Connection, table: sa.Table, row: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """Insert ``row`` unless a row with the same ``keys`` exists; ``True`` when it was inserted."""
    name = conn.dialect.name
    if name in ("sqlite", "postgresql"):
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert
        stmt = insert(table).values(**row).on_conflict_do_nothing(index_elements=list(keys))
        return conn.execute(stmt.returning(*table.primary_key.columns)).first() is not None
    try:  # another database: a savepoint keeps the outer transaction usable after the violation
        with conn.begin_nested():
            conn.execute(table.insert().values(**row))
    except IntegrityError:
        return False
    return True


def normalise_code(code: Any, *, strict: bool = True) -> str | None:
    """``" ab3k9z "`` → ``"AB3K9Z"``; a malformed code raises ``ValueError`` (or gives ``None`` when not ``strict``).

    New codes use :data:`CODE_ALPHABET`; any 4 to 16 ASCII letters and digits are accepted, so a
    code typed by a lecturer (``code=``) or kept from an older version still works.
    """
    c = "".join(str(code).split()).upper() if isinstance(code, str) else None
    if c is None or not 4 <= len(c) <= 16 or not (c.isascii() and c.isalnum()):
        if strict:
            raise ValueError(f"a study code is 4 to 16 letters and digits, got {code!r}")
        return None
    return c


# --------------------------------------------------------------------------- upgrades
def _add_column(conn: Connection, table: str, column: sa.Column) -> None:
    """``ALTER TABLE … ADD COLUMN`` with the column's type, nullability and default (a SQL expression
    such as ``sa.false()``) as this database spells them."""
    spec = column.type.compile(dialect=conn.dialect)
    if column.server_default is not None:
        spec += " DEFAULT " + str(column.server_default.arg.compile(dialect=conn.dialect))
    if not column.nullable:
        spec += " NOT NULL"
    conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column.name} {spec}"))


def _upgrade_1_to_2(conn: Connection) -> None:
    """v1 → v2: ``studies.reveal``, ``judgements.response_ms``, ``triplets.digest``, the ``images`` table."""
    conn.execute(sa.text("ALTER TABLE studies ADD COLUMN reveal VARCHAR(8) NOT NULL DEFAULT 'each'"))
    conn.execute(sa.text("ALTER TABLE judgements ADD COLUMN response_ms INTEGER"))
    conn.execute(sa.text("ALTER TABLE triplets ADD COLUMN digest VARCHAR(64)"))
    images.create(conn, checkfirst=True)


def _upgrade_2_to_3(conn: Connection) -> None:
    """v2 → v3: the lecturer's columns on ``studies`` and the stored images and metric values on
    ``triplets``. Existing studies had their results open to everyone: they stay released."""
    for name in ("lecturer_hash", "released", "closed"):
        _add_column(conn, "studies", studies.c[name])
    for name in ("ref_png", "p0_png", "p1_png", "distances"):
        _add_column(conn, "triplets", triplets.c[name])
    conn.execute(studies.update().values(released=True))


def _upgrade_3_to_4(conn: Connection) -> None:
    """v3 → v4: the ``participants`` table (whether a student's browser keeps their token) and
    ``studies.metrics_pending`` (learned metrics still to compute after creation)."""
    participants.create(conn, checkfirst=True)
    _add_column(conn, "studies", studies.c.metrics_pending)


#: ``version → step`` taking a database from ``version`` to ``version + 1`` (inside one transaction).
UPGRADES: dict[int, Callable[[Connection], None]] = {1: _upgrade_1_to_2, 2: _upgrade_2_to_3, 3: _upgrade_3_to_4}
