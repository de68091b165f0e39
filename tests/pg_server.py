"""A throw-away PostgreSQL cluster for the study store's tests: ``initdb`` + ``pg_ctl`` in a temp folder.

Debian's ``postgresql`` package (``scripts/setup.sh --test`` installs it) provides the binaries
under ``/usr/lib/postgresql/<version>/bin``. The cluster listens on a free loopback port with
``trust`` authentication, ``fsync`` off (nothing here must survive a power cut) and its socket in
its own folder; it starts in about a second. PostgreSQL refuses to run as root: as root, the
cluster runs as the ``postgres`` user (``runuser``) in a folder that user owns.

A cluster that cannot start fails the tests that need it, with the reason and the fix; it never
skips them.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from e2e.driver import free_port

FIX = "install Debian's postgresql (`bash scripts/setup.sh --test`, or `apt-get install postgresql`)"


def _bin(name: str) -> str | None:
    """``name`` from the newest ``/usr/lib/postgresql/*/bin``, else from ``PATH``."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return found[-1] if found else shutil.which(name)


@dataclass
class Cluster:
    folder: Path
    port: int
    prefix: list[str]
    pg_ctl: str

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import sqlalchemy as sa

        engine = sa.create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(self.prefix + [self.pg_ctl, "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster() -> Cluster:
    """Start a fresh cluster; ``RuntimeError`` naming the cause and the fix when it cannot."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError(f"PostgreSQL's initdb/pg_ctl were not found: {FIX}")
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"the psycopg driver is missing ({exc}): pip install -e '.[postgres]'") from None
    folder = Path(tempfile.mkdtemp(prefix="study-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError("running as root and there is no 'postgres' user to run the cluster as: "
                               f"{FIX}") from None
        os.chown(folder, user.pw_uid, user.pw_gid)
        os.chmod(folder, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, log = folder / "data", folder / "server.log"
    run = subprocess.run(prefix + [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                                   "--no-sync", "--no-instructions"], capture_output=True, text=True, timeout=120)
    if run.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed ({run.returncode}): {run.stderr.strip()[-2000:]}")
    for attempt in range(3):
        port = free_port()
        opts = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=120")
        run = subprocess.run(prefix + [pg_ctl, "-D", str(data), "-o", opts, "-l", str(log), "-w", "-t", "60", "start"],
                             capture_output=True, text=True, timeout=120)
        if run.returncode == 0:
            cluster = Cluster(folder, port, prefix, pg_ctl)
            _wait_ready(cluster)
            return cluster
        text = log.read_text(errors="replace") if log.exists() else ""
        if "already in use" not in text or attempt == 2:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"pg_ctl start failed ({run.returncode}): {run.stderr.strip()[-1000:]}\n{text[-2000:]}")
    raise AssertionError("unreachable")


def _wait_ready(cluster: Cluster, timeout: float = 30.0) -> None:
    import sqlalchemy as sa

    deadline = time.monotonic() + timeout
    engine = sa.create_engine(cluster.admin_url)
    try:
        while True:
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql("SELECT 1")
                return
            except sa.exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- fixtures
import itertools  # noqa: E402

import pytest  # noqa: E402

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster():
    """One PostgreSQL cluster for the test session (import this fixture into a test module).
    Fails, never skips, when it cannot start."""
    try:
        cluster = start_cluster()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"the PostgreSQL test cluster could not start: {exc}", pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """The URL of a fresh, empty database in the session's cluster."""
    return pg_cluster.create_database(f"study_{os.getpid()}_{next(_names)}")
