"""Unpack an untrusted zip of images into a fresh temporary folder, refusing anything hostile.

:func:`extract_zip` is the one way the app (and anyone else) turns an uploaded archive into a
folder. Every check that can be made from the archive's directory is made **before** a byte is
written:

- member names: ``..`` parts, absolute paths (``/x``, ``\\x``), drive letters (``C:``), NUL
  characters, names that two members share, a name that is a file in one member and a folder in
  another (``ref/x`` beside ``ref/x/y.png``), a name part over :data:`MAX_NAME_BYTES` bytes, a
  path over :data:`MAX_PATH_BYTES` bytes and more than :data:`MAX_DEPTH` nested folders are
  refused (``ArchiveRefused``);
- links and special files: a member whose Unix mode (the high 16 bits of ``external_attr``)
  says symlink, FIFO, device or socket is refused; so are encrypted members;
- size: at most ``max_members`` members and ``max_bytes`` declared uncompressed bytes in all.

While extracting, the bytes really produced are counted per member and in all (a header may
lie about ``file_size``: a member that yields more than it declared is refused), each file is
created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under the destination, and its resolved path is
checked to lie inside it. On any refusal a destination this function created is removed, so
nothing is left behind. macOS's ``__MACOSX/`` resource-fork members are skipped.

Every failure is an :class:`ArchiveRefused` whose message says why, in words and without server
paths: what the checks above catch, and anything the file system still refuses while writing
(``the archive could not be unpacked here: …``).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

__all__ = ["ArchiveRefused", "Extracted", "MAX_ARCHIVE_BYTES", "MAX_BYTES", "MAX_DEPTH", "MAX_MEMBERS", "MAX_NAME_BYTES", "MAX_PATH_BYTES",
           "dataset_folders", "extract_zip", "member_path"]

MAX_MEMBERS = 5000
"""Default cap on the number of members (directories included)."""
MAX_BYTES = 256 * 2**20
"""Default cap on the total uncompressed size (256 MiB)."""
MAX_NAME_BYTES = 255
"""Longest part of a member's path, in UTF-8 bytes (what Linux, macOS and Windows file systems allow)."""
MAX_PATH_BYTES = 1024
"""Longest member path, in UTF-8 bytes."""
MAX_DEPTH = 32
"""Most folders a member may be nested in."""
MAX_ARCHIVE_BYTES = 512 * 2**20
"""Largest zip file read from a path (512 MiB; compressed, so at most :data:`MAX_BYTES`-sized
content is usually far smaller)."""

_CHUNK = 1 << 16
_DRIVE = re.compile(r"^[A-Za-z]:")
_SKIP = "__MACOSX/"


class ArchiveRefused(ValueError):
    """The archive (or one member, named in the message) is unsafe or too large."""


@dataclass(frozen=True)
class Extracted:
    """Where an archive went.

    Attributes:
        root: the destination folder (a fresh temporary folder unless one was given).
        files: the extracted files, relative to ``root``, ``/``-separated, in archive order.
        total_bytes: the bytes written.
    """

    root: Path
    files: tuple[str, ...]
    total_bytes: int


def member_path(name: str) -> PurePosixPath | None:
    """The safe relative path of a member name (``None`` when it names no path, e.g. ``"./"``).

    Raises:
        ArchiveRefused: ``..`` parts, an absolute path, a drive letter, a NUL or an empty name.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    text = name.replace("\\", "/")
    if not text or "\x00" in text:
        raise ArchiveRefused(f"member name {name!r} is empty or holds a NUL character")
    if text.startswith("/") or _DRIVE.match(text):
        raise ArchiveRefused(f"member {_shown(name)!r} has an absolute path or a drive letter")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveRefused(f"member {_shown(name)!r} climbs out of the folder ('..')")
    if any(_DRIVE.match(p) for p in parts):
        raise ArchiveRefused(f"member {_shown(name)!r} holds a drive letter")
    if not parts:
        return None
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES for p in parts):
        raise ArchiveRefused(f"member {_shown(name)!r} has a name part over {MAX_NAME_BYTES} bytes")
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise ArchiveRefused(f"member {_shown(name)!r} has a path over {MAX_PATH_BYTES} bytes")
    if len(parts) > MAX_DEPTH + 1:
        raise ArchiveRefused(f"member {_shown(name)!r} is nested in {len(parts) - 1} folders, more than "
                             f"the {MAX_DEPTH} allowed")
    return PurePosixPath(*parts)


def _shown(name: str, limit: int = 80) -> str:
    """A member name for a message, cut to ``limit`` characters."""
    return name if len(name) <= limit else name[:limit] + "…"


def _file_type(info: zipfile.ZipInfo) -> int:
    """The Unix file-type bits of a member (0 when the archive stores none)."""
    return stat.S_IFMT(info.external_attr >> 16)


def _plan(zf: zipfile.ZipFile, max_members: int, max_bytes: int) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    infos = zf.infolist()
    if len(infos) > max_members:
        raise ArchiveRefused(f"the archive has {len(infos)} members, more than the {max_members} allowed")
    declared = sum(i.file_size for i in infos)
    if declared > max_bytes:
        raise ArchiveRefused(f"the archive expands to {declared} bytes, more than the {max_bytes} allowed")
    plan, seen, folders = [], set(), set()
    for info in infos:
        if info.filename.replace("\\", "/").startswith(_SKIP):
            continue
        path = member_path(info.filename)
        kind = _file_type(info)
        if kind == stat.S_IFLNK:
            raise ArchiveRefused(f"member {info.filename!r} is a symbolic link")
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveRefused(f"member {info.filename!r} is a special file (mode {oct(kind)})")
        if info.flag_bits & 0x1:
            raise ArchiveRefused(f"member {info.filename!r} is encrypted")
        if path is None:
            continue
        key = str(path).lower()
        parents = {str(p).lower() for p in path.parents if str(p) != "."}
        if info.is_dir() or kind == stat.S_IFDIR:
            folders.add(key)
            folders.update(parents)
            continue
        if key in seen:
            raise ArchiveRefused(f"member {_shown(info.filename)!r} appears more than once")
        seen.add(key)
        folders.update(parents)
        plan.append((info, path))
    clash = next((info.filename for info, path in plan if str(path).lower() in folders), None)
    if clash is not None:
        raise ArchiveRefused(f"member {_shown(clash)!r} is a file, and other members put files inside it as a folder")
    return plan


def _write(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Copy one member to ``target``; the bytes written (never more than declared or ``budget``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    written = 0
    with os.fdopen(fd, "wb") as out, zf.open(info) as src:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            if written > info.file_size:
                raise ArchiveRefused(f"member {info.filename!r} expands past its declared {info.file_size} bytes")
            if written > budget:
                raise ArchiveRefused("the archive expands past its size cap while extracting")
            out.write(chunk)
    return written


def extract_zip(
    source: bytes | str | os.PathLike[str] | BinaryIO,
    dest: str | os.PathLike[str] | None = None,
    *,
    max_members: int = MAX_MEMBERS,
    max_bytes: int = MAX_BYTES,
) -> Extracted:
    """Extract a zip of files into ``dest`` (default: a new ``tempfile.mkdtemp`` folder).

    Args:
        source: the archive as bytes, a path, or a binary file object.
        dest: an existing empty folder, or ``None`` for a new temporary one (the caller removes it).
        max_members: the most members allowed (directories included), ``>= 1``.
        max_bytes: the most uncompressed bytes allowed in all, ``>= 0``: checked on the declared
            sizes before extraction and on the bytes produced while extracting.

    Returns:
        :class:`Extracted`.

    Raises:
        ArchiveRefused: not a zip, or a hostile or oversized archive (see the module doc); a
            ``dest`` this function created is removed, files already written into a given
            ``dest`` are removed too.
        ValueError: bad caps, or a ``dest`` that is not an empty folder.
    """
    for name, value, lo in (("max_members", max_members, 1), ("max_bytes", max_bytes, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    created = dest is None
    if dest is not None:
        root = Path(dest)
        if not root.is_dir() or any(root.iterdir()):
            raise ValueError(f"dest must be an existing empty folder, got {str(dest)!r}")
    if isinstance(source, (str, os.PathLike)):  # a path: through the one reader (no FIFO or device is opened)
        from .. import files

        try:
            source = io.BytesIO(files.read_bytes(source, max_bytes=MAX_ARCHIVE_BYTES))
        except (files.UnsafeFile, OSError) as exc:
            raise ArchiveRefused(f"the archive cannot be read: {exc}") from None
    try:
        zf = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ArchiveRefused(f"not a readable zip archive ({_reason(exc)})") from None
    except Exception as exc:  # anything else a crafted central directory provokes
        raise ArchiveRefused(f"not a readable zip archive ({_reason(exc)})") from None
    with zf:
        try:
            plan = _plan(zf, max_members, max_bytes)
        except ArchiveRefused:
            raise
        except Exception as exc:
            raise ArchiveRefused(f"the archive's directory could not be read ({_reason(exc)})") from None
        root = Path(tempfile.mkdtemp(prefix="lpips-dataset-")) if created else Path(dest)
        real_root = root.resolve()
        files, total = [], 0
        try:
            for info, rel in plan:
                target = root.joinpath(*rel.parts)
                try:
                    if not target.resolve().is_relative_to(real_root):
                        raise ArchiveRefused(f"member {_shown(info.filename)!r} would land outside the folder")
                    total += _write(zf, info, target, max_bytes - total)
                except (ArchiveRefused, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError):
                    raise
                except Exception as exc:  # the file system refused it (a name, a depth, a clash)
                    raise ArchiveRefused(f"the archive could not be unpacked here: member "
                                         f"{_shown(info.filename)!r}: {_reason(exc)}") from None
                files.append(str(rel))
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
            _clean(root, created)
            raise ArchiveRefused(f"the archive is damaged ({_reason(exc)})") from None
        except BaseException:
            _clean(root, created)
            raise
    return Extracted(root, tuple(files), total)


def _reason(exc: BaseException) -> str:
    """An exception in words, without the paths an ``OSError`` carries (they name the server's folders)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, RecursionError):
        return "its folders are nested too deeply"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__


def _clean(root: Path, created: bool) -> None:
    if created:
        shutil.rmtree(root, ignore_errors=True)
    else:
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def dataset_folders(root: str | os.PathLike[str]) -> tuple[Path, list[Path]]:
    """The folders an extracted dataset offers: ``(base, its subfolders sorted by name)``.

    ``base`` is ``root``, or the one folder inside it when the archive wraps everything in a
    single top-level folder (``dataset/ref``, ``dataset/method``); hidden folders are left out.
    """
    base = Path(root)
    while True:
        entries = [p for p in base.iterdir() if not p.name.startswith(".")]
        dirs = sorted(p for p in entries if p.is_dir() and not p.is_symlink())
        if len(dirs) == 1 and len(entries) == 1:
            base = dirs[0]
            continue
        return base, dirs
