"""Where a class study lives: a SQLAlchemy schema and a small repository over any :class:`~sqlalchemy.engine.Engine`.

No Streamlit here: the page hands in the Engine of ``st.connection("sql")``; tests hand in one of
their own (a real SQLite file in a temporary folder). Any SQLAlchemy URL works (SQLite by
default, PostgreSQL through ``.streamlit/secrets.toml``); :func:`sqlite_url` gives the default one.

Tables (schema version :data:`SCHEMA_VERSION` = 2):

- ``schema_version(version)``: one row;
- ``studies(id, code, created, n_triplets, families, seed, reveal)``: ``code`` the short code
  students type, ``families`` a JSON list, ``reveal`` ``"each"`` (metrics after every answer) or
  ``"end"``;
- ``triplets(id, study_id, idx, family, recipe, digest)``: ``recipe`` the JSON of a
  :class:`~lpips_explorer.study.triplets.Recipe`, ``digest`` the SHA-256 of its pixels when created;
- ``judgements(id, study_id, session, triplet_idx, choice, response_ms, created)``: ``session``
  an anonymous random id (no name, no address, nothing personal), ``choice`` 0 (first copy), 1
  (second copy) or 2 (can't tell); one judgement per session and triplet (a repeat is ignored);
- ``images(id, png)``: uploaded source images (PNG bytes), by :func:`~lpips_explorer.study.triplets.upload_id`.

Version 1 (the first layout) had no ``reveal``, no ``response_ms``, no ``digest`` and no
``images`` table; :meth:`StudyStore.ensure_schema` upgrades it in place (old rows keep their
values; the new columns are ``"each"`` and ``NULL``).

SQLite: every connection gets ``PRAGMA journal_mode=WAL`` (readers never block the writer),
``busy_timeout`` and ``foreign_keys=ON`` (a ``connect`` event), and every write runs in a
transaction retried with exponential backoff while SQLite says "database is locked" or "busy";
only after :attr:`StudyStore.retries` attempts does :class:`StoreBusy` (a plain sentence, never
the driver's message) reach the caller.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from lpips_explorer.study.scoring import CHOICES

__all__ = [
    "CODE_ALPHABET",
    "REVEAL_MODES",
    "SCHEMA_VERSION",
    "Judgement",
    "StoreBusy",
    "Study",
    "StudyStore",
    "TripletRow",
    "metadata",
    "normalise_code",
    "sqlite_url",
]

SCHEMA_VERSION = 2
REVEAL_MODES = ("each", "end")
#: Study codes: 6 characters without look-alikes (no 0/O, 1/I/L).
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
BUSY_TIMEOUT_MS = 10_000

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
)

triplets = sa.Table(
    "triplets", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("family", sa.String(32), nullable=False),
    sa.Column("recipe", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=True),
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


class StoreBusy(RuntimeError):
    """The database stayed locked through every retry; nothing was written."""


@dataclass(frozen=True)
class Study:
    code: str
    created: _dt.datetime
    n_triplets: int
    families: tuple[str, ...]
    seed: int
    reveal: str
    id: int


@dataclass(frozen=True)
class TripletRow:
    index: int
    family: str
    recipe: str  # JSON
    digest: str | None


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


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
    finally:
        cur.close()


def _is_busy(exc: OperationalError) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "locked" in text or "busy" in text


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _utc(value: _dt.datetime) -> _dt.datetime:
    """A stored time as an aware UTC datetime (SQLite gives it back naive)."""
    return value.replace(tzinfo=_dt.timezone.utc) if value.tzinfo is None else value.astimezone(_dt.timezone.utc)


def _study(r) -> "Study":
    return Study(r.code, _utc(r.created), r.n_triplets, tuple(json.loads(r.families)), r.seed, r.reveal, r.id)


T = TypeVar("T")
_LISTEN_LOCK = threading.Lock()


class StudyStore:
    """Studies, triplets and judgements in one database.

    Args:
        engine: a SQLAlchemy Engine (``st.connection("sql").engine`` in the app).
        retries: attempts per write while SQLite is locked (default 12).
        backoff: first wait in seconds, doubled each attempt (with jitter), capped at 1 s.

    The schema is created (or upgraded) on first use by :meth:`ensure_schema`, which the
    constructor calls.
    """

    def __init__(self, engine: Engine, *, retries: int = 12, backoff: float = 0.02):
        if not isinstance(engine, Engine):
            raise TypeError(f"engine must be a sqlalchemy Engine, got {type(engine).__name__}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
            raise ValueError(f"retries must be an int >= 1, got {retries!r}")
        if not backoff >= 0:
            raise ValueError(f"backoff must be >= 0 seconds, got {backoff!r}")
        self.engine, self.retries, self.backoff = engine, retries, float(backoff)
        if engine.dialect.name == "sqlite":
            with _LISTEN_LOCK:
                if not event.contains(engine, "connect", _sqlite_pragmas):
                    event.listen(engine, "connect", _sqlite_pragmas)
                    engine.dispose()  # connections opened before the listener get the pragmas too
        self.ensure_schema()

    # ------------------------------------------------------------------ transactions
    def _write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction, retried while the database is locked."""
        for attempt in range(self.retries):
            try:
                with self.engine.begin() as conn:
                    return fn(conn)
            except OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if attempt + 1 == self.retries:
                    raise StoreBusy(f"The study database stayed busy through {self.retries} attempts; "
                                    "nothing was saved. Please try again in a moment.") from exc
                time.sleep(min(self.backoff * 2 ** attempt, 1.0) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    def _read(self, fn: Callable[[Connection], T]) -> T:
        return self._write(fn)  # the same retry (a WAL reader is rarely blocked, but a checkpoint can)

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
        for attempt in range(3):  # two servers creating the same new file at once: the loser sees the tables
            try:
                return self._write(self._ensure)
            except (OperationalError, IntegrityError):
                if attempt == 2:
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
                     reveal: str = "each", digests: Sequence[str] | None = None, code: str | None = None) -> Study:
        """Store a study and its triplets; returns it with a fresh short code (or ``code``).

        Args:
            recipes: :class:`~lpips_explorer.study.triplets.Recipe` objects (anything with ``to_json()``
                and ``family``), in the order students see them.
            digests: the SHA-256 of each triplet's pixels (optional; lets a later version notice drift).

        Raises:
            ValueError: no recipes, a bad reveal mode, digests of another length, a taken ``code``.
        """
        recipes = list(recipes)
        if not recipes:
            raise ValueError("a study needs at least one triplet")
        if reveal not in REVEAL_MODES:
            raise ValueError(f"reveal must be one of {REVEAL_MODES}, got {reveal!r}")
        if digests is not None and len(digests) != len(recipes):
            raise ValueError(f"{len(digests)} digests for {len(recipes)} recipes")
        created = _now()

        def insert(conn, c):
            sid = conn.execute(studies.insert().values(
                code=c, created=created, n_triplets=len(recipes), families=json.dumps(list(families)),
                seed=int(seed), reveal=reveal)).inserted_primary_key[0]
            conn.execute(triplets.insert(), [
                {"study_id": sid, "idx": i, "family": r.family, "recipe": r.to_json(),
                 "digest": None if digests is None else digests[i]} for i, r in enumerate(recipes)])
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
            return Study(c, created, len(recipes), tuple(families), int(seed), reveal, sid)
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

    def triplets(self, study: Study) -> list[TripletRow]:
        rows = self._read(lambda conn: conn.execute(
            sa.select(triplets.c.idx, triplets.c.family, triplets.c.recipe, triplets.c.digest)
            .where(triplets.c.study_id == study.id).order_by(triplets.c.idx)).all())
        return [TripletRow(r.idx, r.family, r.recipe, r.digest) for r in rows]

    # ------------------------------------------------------------------ judgements
    def submit(self, study: Study, session: str, index: int, choice: int, response_ms: int | None = None) -> bool:
        """Record one judgement; ``False`` when this session already answered this triplet (the first answer stays).

        Raises:
            ValueError: a bad session id, triplet index or choice.
            StoreBusy: the database stayed locked through every retry.
        """
        if not isinstance(session, str) or not 1 <= len(session) <= 64:
            raise ValueError(f"session must be a non-empty id of at most 64 characters, got {session!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < study.n_triplets:
            raise ValueError(f"index must be in [0, {study.n_triplets}), got {index!r}")
        if choice not in CHOICES or isinstance(choice, bool):
            raise ValueError(f"choice must be one of {CHOICES}, got {choice!r}")
        if response_ms is not None:
            response_ms = max(0, min(int(response_ms), 2**31 - 1))
        row = {"study_id": study.id, "session": session, "triplet_idx": index, "choice": int(choice),
               "response_ms": response_ms, "created": _now()}
        try:
            self._write(lambda conn: conn.execute(judgements.insert().values(**row)))
        except IntegrityError:
            return False
        return True

    def judgements(self, study: Study, session: str | None = None) -> list[Judgement]:
        """Every judgement of the study (or of one session), in the order they were stored."""
        q = sa.select(judgements).where(judgements.c.study_id == study.id)
        if session is not None:
            q = q.where(judgements.c.session == session)
        rows = self._read(lambda conn: conn.execute(q.order_by(judgements.c.id)).all())
        return [Judgement(r.session, r.triplet_idx, r.choice, r.response_ms, _utc(r.created)) for r in rows]

    def answered(self, study: Study, session: str) -> set[int]:
        """The triplet indices this session has answered."""
        q = sa.select(judgements.c.triplet_idx).where(
            (judgements.c.study_id == study.id) & (judgements.c.session == session))
        return set(self._read(lambda conn: conn.execute(q).scalars().all()))

    # ------------------------------------------------------------------ uploaded images
    def put_image(self, image_id: str, png: bytes) -> None:
        """Keep an uploaded source image (idempotent)."""
        if not isinstance(png, (bytes, bytearray)) or not png:
            raise ValueError("png must be non-empty bytes")

        def put(conn):
            if conn.execute(sa.select(images.c.id).where(images.c.id == image_id)).first() is None:
                conn.execute(images.insert().values(id=image_id, png=bytes(png)))
        try:
            self._write(put)
        except IntegrityError:
            pass  # stored meanwhile by another session: the same bytes by construction of the id

    def get_image(self, image_id: str) -> bytes | None:
        return self._read(lambda conn: conn.execute(sa.select(images.c.png).where(images.c.id == image_id)).scalar())


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
def _upgrade_1_to_2(conn: Connection) -> None:
    """v1 → v2: ``studies.reveal``, ``judgements.response_ms``, ``triplets.digest``, the ``images`` table."""
    conn.execute(sa.text("ALTER TABLE studies ADD COLUMN reveal VARCHAR(8) NOT NULL DEFAULT 'each'"))
    conn.execute(sa.text("ALTER TABLE judgements ADD COLUMN response_ms INTEGER"))
    conn.execute(sa.text("ALTER TABLE triplets ADD COLUMN digest VARCHAR(64)"))
    images.create(conn, checkfirst=True)


#: ``version → step`` taking a database from ``version`` to ``version + 1`` (inside one transaction).
UPGRADES: dict[int, Callable[[Connection], None]] = {1: _upgrade_1_to_2}
