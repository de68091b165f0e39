"""Folders on the server's disk that app sessions own: a registry with a byte budget.

The app unpacks what a visitor uploads (a zip of folders, two sets of files) into folders on the
server. Without an owner, each tab could leave hundreds of MB behind when it closes. Here:

- every folder is made by :meth:`ScratchRegistry.new_folder` under one folder per server process,
  ``<root>/server-<pid>-<token>/`` (``root``: ``$LPIPS_EXPLORER_SCRATCH``, default
  ``<temp>/lpips-explorer``), and recorded with its owner (a session id) and its bytes;
- the total is kept within a byte budget (:data:`DEFAULT_BUDGET_BYTES`,
  ``$LPIPS_EXPLORER_SCRATCH_MB``): a new folder gets at most what is left (its *allowance*),
  and none when too little is left (:class:`ScratchFull`, with a message to show);
- a folder is deleted when its owner replaces it (:meth:`~ScratchRegistry.release`) and when its
  owner has ended: :meth:`~ScratchRegistry.sweep` asks whether each owner is alive and deletes
  the folders of owners gone for longer than a grace period (:data:`GRACE_S`,
  ``$LPIPS_EXPLORER_SCRATCH_GRACE_S``; Streamlit keeps a disconnected session two minutes for a
  reconnect);
- at start-up, what earlier servers left is deleted: their folders when their process is gone,
  anything under the root older than ``max_age_s``, and folders an older version of the app
  left directly in the temp folder (``lpips-dataset-*``, ``lpips-files-*``, ``lpips-demo-*``)
  older than ``max_age_s``;
- :func:`shared_folder` builds a folder every server may share (the demo set) once, atomically,
  and reuses it afterwards.

Nothing here imports Streamlit: :mod:`ui.sessions` gives the registry the session ids and asks
Streamlit's runtime whether they are alive.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lpips_explorer import environment

__all__ = ["DEFAULT_BUDGET_BYTES", "ScratchFull", "ScratchRegistry", "default_root", "registry", "shared_folder",
           "tree_bytes"]

DEFAULT_BUDGET_BYTES = 1 << 30
"""All sessions' folders together on one server: 1 GiB (``$LPIPS_EXPLORER_SCRATCH_MB`` overrides)."""
GRACE_S = 150.0
"""How long a folder outlives its session (a disconnected session may reconnect for 2 minutes)."""
MAX_AGE_S = 24 * 3600.0
"""Leftovers older than this are deleted at start-up, whoever made them."""
LEGACY_PREFIXES = ("lpips-dataset-", "lpips-files-", "lpips-demo-")
"""Folders an older version of the app made directly in the temp folder."""


class ScratchFull(RuntimeError):
    """The server's space for unpacked uploads is used up; the message says so in words."""


def default_root() -> Path:
    """``$LPIPS_EXPLORER_SCRATCH``, or ``<temp>/lpips-explorer``."""
    return environment.scratch_root()


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (links not followed; unreadable entries count 0)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_size
    return total


@dataclass
class _Entry:
    owner: str
    kind: str
    bytes: int
    created: float
    seen_alive: float


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's process)
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


class ScratchRegistry:
    """Owned folders under ``root``, within ``budget_bytes`` (see the module docstring).

    Args:
        root: the folder every server's folders go under (created).
        budget_bytes: the most bytes all folders may hold together.
        grace_s: how long after its owner was last seen alive a folder is kept.
        max_age_s: leftovers older than this are deleted at start-up.
        legacy_dir: where an older version of the app left its folders (default: the temp folder).

    Thread-safe: sessions run on their own threads.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, budget_bytes: int = DEFAULT_BUDGET_BYTES,
                 grace_s: float = GRACE_S, max_age_s: float = MAX_AGE_S,
                 legacy_dir: str | os.PathLike[str] | None = None):
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
            raise ValueError(f"budget_bytes must be an integer >= 0, got {budget_bytes!r}")
        self.root = Path(root) if root is not None else default_root()
        self.budget_bytes, self.grace_s, self.max_age_s = budget_bytes, float(grace_s), float(max_age_s)
        self._lock = threading.Lock()
        self._entries: dict[Path, _Entry] = {}
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.removed_at_start = self._clean_leftovers(Path(legacy_dir) if legacy_dir else
                                                      Path(tempfile.gettempdir()))
        self.server_dir = self.root / f"server-{os.getpid()}-{secrets.token_hex(4)}"
        self.server_dir.mkdir(mode=0o700)  # uploads are readable by this server's user only

    # ------------------------------------------------------------------ start-up
    def _clean_leftovers(self, legacy_dir: Path) -> list[Path]:
        now, removed = time.time(), []
        for entry in list(self.root.iterdir()):
            name = entry.name
            try:
                age = now - entry.lstat().st_mtime
            except OSError:
                continue
            gone = False
            if name.startswith("server-"):
                try:
                    pid = int(name.split("-")[1])
                except (IndexError, ValueError):
                    pid = -1
                gone = pid <= 0 or not _pid_alive(pid) or age > self.max_age_s
            elif name.startswith(".building-"):
                gone = age > 3600
            elif not name.startswith("demo-"):
                gone = age > self.max_age_s
            if gone:
                _remove(entry)
                removed.append(entry)
        try:
            legacy = [p for p in legacy_dir.iterdir() if p.name.startswith(LEGACY_PREFIXES)]
        except OSError:
            legacy = []
        for entry in legacy:
            try:
                if now - entry.lstat().st_mtime > self.max_age_s and entry.is_dir() and not entry.is_symlink():
                    _remove(entry)
                    removed.append(entry)
            except OSError:
                continue
        return removed

    # ------------------------------------------------------------------ folders
    def used(self) -> int:
        """Bytes held (or reserved) by the registered folders."""
        with self._lock:
            return sum(e.bytes for e in self._entries.values())

    def folders(self, owner: str | None = None) -> list[Path]:
        """The registered folders (of ``owner``), oldest first."""
        with self._lock:
            return [p for p, e in sorted(self._entries.items(), key=lambda kv: kv[1].created)
                    if owner is None or e.owner == owner]

    def new_folder(self, owner: str, kind: str, *, want: int, at_least: int | None = None) -> tuple[Path, int]:
        """A new empty folder for ``owner`` and its allowance: ``min(want, room left)`` bytes,
        reserved until :meth:`settle`.

        Args:
            owner: who owns it (a session id).
            kind: a short word in its name (``"zip"``, ``"files"``).
            want: the most bytes the folder will hold.
            at_least: refuse when less than this is left (default: ``want``).

        Raises:
            ScratchFull: less than ``at_least`` bytes are left (the message says how much is used).
        """
        need = want if at_least is None else at_least
        with self._lock:
            room = self.budget_bytes - sum(e.bytes for e in self._entries.values())
            if room < need:
                raise ScratchFull(
                    f"The server's space for unpacked uploads is full: {_mib(self.budget_bytes - room)} of "
                    f"{_mib(self.budget_bytes)} are held by open sessions, and this needs {_mib(need)}. "
                    "Try again in a few minutes (a closed tab frees its space), or with a smaller upload.")
            allowance = min(want, room)
            path = self.server_dir / f"{''.join(c for c in kind if c.isalnum())[:16] or 'x'}-{secrets.token_hex(6)}"
            path.mkdir(parents=True)
            now = time.time()
            self._entries[path] = _Entry(owner, kind, allowance, now, now)
        return path, allowance

    def settle(self, path: str | os.PathLike[str]) -> int:
        """Record what ``path`` really holds (in place of its reservation); returns the bytes."""
        path = Path(path)
        size = tree_bytes(path)
        with self._lock:
            if path in self._entries:
                self._entries[path].bytes = size
        return size

    def release(self, path: str | os.PathLike[str]) -> None:
        """Delete ``path`` (one of the registered folders) and forget it."""
        path = Path(path)
        with self._lock:
            known = self._entries.pop(path, None) is not None
        if known or self.server_dir in path.parents:
            _remove(path)

    def release_owner(self, owner: str) -> list[Path]:
        """Delete every folder of ``owner``; returns them."""
        with self._lock:
            gone = [p for p, e in self._entries.items() if e.owner == owner]
            for p in gone:
                del self._entries[p]
        for p in gone:
            _remove(p)
        return gone

    def sweep(self, alive: Callable[[str], bool], now: float | None = None) -> list[Path]:
        """Delete the folders of owners that ``alive`` says have ended, once ``grace_s`` has passed
        since they were last seen alive (or the folder was made); returns what was deleted."""
        now = time.time() if now is None else now
        with self._lock:
            owners = {e.owner for e in self._entries.values()}
        status = {}
        for o in owners:
            try:
                status[o] = bool(alive(o))
            except Exception:  # cannot tell: keep it
                status[o] = True
        with self._lock:
            gone = []
            for p, e in list(self._entries.items()):
                if status.get(e.owner, True):
                    e.seen_alive = now
                elif now - e.seen_alive > self.grace_s:
                    gone.append(p)
                    del self._entries[p]
        for p in gone:
            _remove(p)
        return gone

    def close(self) -> None:
        """Delete every folder and this server's own folder (e.g. when the server stops)."""
        with self._lock:
            self._entries.clear()
        _remove(self.server_dir)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def shared_folder(name: str, build: Callable[[Path], object], root: str | os.PathLike[str] | None = None, *,
                  stale_prefix: str | None = None) -> Path:
    """``<root>/<name>``, built once by ``build(folder)`` and reused by every later call and server.

    The folder is built under a temporary name and renamed into place with a marker file, so a
    reader never sees half of it; two servers building it at once keep the first. When it is
    built, the other folders whose names start with ``stale_prefix`` (older versions of it) are
    deleted.
    """
    base = Path(root) if root is not None else default_root()
    target = base / name
    if (target / ".complete").is_file():
        return target
    base.mkdir(parents=True, exist_ok=True)
    work = base / f".building-{name}-{secrets.token_hex(4)}"
    work.mkdir()
    try:
        build(work)
        (work / ".complete").write_text("")
        if target.exists():
            _remove(target)  # an incomplete one
        try:
            os.rename(work, target)
        except OSError:  # another server put its own in place first
            if not (target / ".complete").is_file():
                raise
    finally:
        if work.exists():
            _remove(work)
    if stale_prefix:
        for old in base.iterdir():
            if old.name.startswith(stale_prefix) and old.name != name:
                _remove(old)
    return target


_registry: ScratchRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> ScratchRegistry:
    """This process's registry (made on first use, cleaning up leftovers then)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = ScratchRegistry(budget_bytes=environment.scratch_budget_bytes(DEFAULT_BUDGET_BYTES),
                                        grace_s=environment.scratch_grace_s(GRACE_S))
        return _registry
