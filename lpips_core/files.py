"""The one reader of untrusted files and the one writer of result files.

Every path a user hands the library -- an image, a weights file, an embedding's arrays and
manifest, a results table -- is read through :func:`open_regular` (or :func:`read_bytes` /
:func:`read_text` on top of it), and every result file the library writes goes through
:func:`check_output` and :func:`published` (or :func:`write_bytes` on top of it).

The reader's rules:

- **Regular files only.** ``os.stat`` (which follows a symbolic link) is examined *before* the
  file is opened: a directory, a named pipe (which would block a reader forever), a device such
  as ``/dev/zero`` (endless) or a socket is refused unread. A link is therefore followed only to
  a regular file. The file is opened non-blocking and examined again on the open descriptor, so
  a file swapped for a FIFO between the two looks is refused too.
- **A byte cap, checked before reading**: a file larger than the caller's ``max_bytes`` is
  refused from its size alone, and :func:`read_bytes` never reads more than ``max_bytes + 1``
  bytes, so a file that grows while it is read is refused as well.

The writer's rules:

- **Nothing is overwritten by surprise**: :func:`check_output` refuses an existing file unless
  the caller resumes (or was told to overwrite), and always refuses a symbolic link, a FIFO, a
  device or a folder in the output's place, so a result is never written through a link or into
  a pipe.
- **Atomic**: the content goes to a new temporary file in the same folder (created exclusively,
  so never through a link), and is renamed into place only once complete; a killed run never
  leaves a half-written file under the final name. Without ``overwrite`` the rename refuses a
  file that appeared meanwhile (a hard link, which cannot replace an existing name).

Refusals are :class:`UnsafeFile` (a ``ValueError``) with ``reason`` in words; callers that keep
their own messages (images, weights) format them from ``kind`` and ``reason``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

__all__ = [
    "UnsafeFile",
    "check_output",
    "check_regular",
    "open_regular",
    "published",
    "read_bytes",
    "read_text",
    "save_npy",
    "write_bytes",
]

_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnsafeFile(ValueError):
    """A path the reader or the writer refuses.

    Attributes:
        path: the path as text.
        kind: ``"directory"``, ``"special"`` (FIFO, device, socket), ``"too_large"``,
            ``"symlink"`` or ``"exists"``.
        reason: why, in words, starting with "it is ..." (no path).
        size: the file's size in bytes (``"too_large"``), else ``None``.
    """

    def __init__(self, path: str, kind: str, reason: str, size: int | None = None):
        super().__init__(f"'{path}' {reason[3:] if reason.startswith('it ') else reason}")
        self.path, self.kind, self.reason, self.size = path, kind, reason, size


def _name(path) -> str:
    return os.fsdecode(path)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _problem(st: os.stat_result, path: str, max_bytes: int | None) -> UnsafeFile | None:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return UnsafeFile(path, "directory", "it is a directory, not a file")
    if not stat.S_ISREG(mode):
        what = next((w for test, w in _NOT_REGULAR if test(mode)), "not a regular file")
        return UnsafeFile(path, "special", f"it is {what}, not a regular file, so it was not read")
    if max_bytes is not None and st.st_size > max_bytes:
        return UnsafeFile(path, "too_large", f"it is {_mib(st.st_size)}, more than the {_mib(max_bytes)} allowed "
                                             "here, so it was not read", size=st.st_size)
    return None


def check_regular(path: str | os.PathLike, *, max_bytes: int | None) -> os.stat_result:
    """``os.stat(path)`` after refusing, from it alone (nothing is opened), anything but a regular
    file of at most ``max_bytes``.

    Raises:
        UnsafeFile: a directory, FIFO, device, socket, or a file over ``max_bytes``.
        OSError: the path does not exist or cannot be examined (``FileNotFoundError``,
            ``PermissionError``, ...); ``ValueError`` for a NUL byte in it.
    """
    st = os.stat(path)
    problem = _problem(st, _name(path), max_bytes)
    if problem:
        raise problem
    return st


def open_regular(path: str | os.PathLike, *, max_bytes: int | None) -> BinaryIO:
    """``path`` opened for binary reading, after :func:`check_regular` (non-blocking, and checked
    again on the open descriptor: a file replaced since the first look is refused too).

    Raises:
        UnsafeFile, OSError: see :func:`check_regular`.
    """
    check_regular(path, max_bytes=max_bytes)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        problem = _problem(os.fstat(fd), _name(path), max_bytes)
        if problem:
            raise problem
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: ordinary reads from here on
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, *, max_bytes: int) -> bytes:
    """The whole file, through :func:`open_regular`; at most ``max_bytes`` are accepted, also from
    a file that grows while it is read.

    Raises:
        UnsafeFile, OSError: see :func:`check_regular`.
    """
    with open_regular(path, max_bytes=max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeFile(_name(path), "too_large", f"it grew past the {_mib(max_bytes)} allowed here while it "
                                                   "was read, so it was not used", size=len(data))
    return data


def read_text(path: str | os.PathLike, *, max_bytes: int, encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded (strictly: ``UnicodeDecodeError`` for bytes that are not ``encoding``)."""
    return read_bytes(path, max_bytes=max_bytes).decode(encoding)


# --------------------------------------------------------------------------- the writer
def check_output(path: str | os.PathLike, *, exists_ok: bool = False, hint: str = "remove it or choose another "
                 "path") -> bool:
    """Refuse a place a result must not be written to; return whether a regular file is there.

    A symbolic link (even to a regular file), a FIFO, a device, a socket or a folder is always
    refused; an existing regular file only without ``exists_ok`` (a resume, or an overwrite the
    user asked for), with ``hint`` saying what to do.

    Raises:
        UnsafeFile: the refusal, in one line.
    """
    name = _name(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFile(name, "symlink", "is a symbolic link: nothing is written through a link; remove it or "
                                          "choose another path")
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(name, "directory", "is a folder, not a file to write")
    if not stat.S_ISREG(st.st_mode):
        what = next((w for test, w in _NOT_REGULAR if test(st.st_mode)), "not a regular file")
        raise UnsafeFile(name, "special", f"is {what}: results are written to regular files only")
    if not exists_ok:
        raise UnsafeFile(name, "exists", f"exists: {hint}")
    return True


@contextlib.contextmanager
def published(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """A temporary path in ``path``'s folder to write the whole result to; on a clean exit it is
    renamed to ``path`` (on an exception it is removed, and ``path`` is untouched).

    Without ``overwrite`` the result appears only if nothing took ``path`` meanwhile (checked by
    :func:`check_output` first, and by the no-clobber rename); with it (a file the caller owns,
    such as a cache entry), whatever is at ``path`` -- a file, a link, a FIFO -- is replaced by
    the rename, never written through or opened; only a folder is refused.

    Raises:
        UnsafeFile: ``path`` is refused (see :func:`check_output`).
    """
    path = Path(path)
    if not overwrite:
        check_output(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        raise UnsafeFile(_name(path), "directory", "is a folder, not a file to write")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent or ".")
    try:  # mkstemp's 0600 would outlive the rename: give the file the mode open() gives a new one
        mask = os.umask(0o077)  # (read by setting it: a file created meanwhile gets the stricter mask)
        os.umask(mask)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~mask)
    finally:
        os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        _rename(tmp_path, path, overwrite)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def _rename(tmp: Path, path: Path, overwrite: bool) -> None:
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails with EEXIST if anything took the name meanwhile
    except FileExistsError:
        raise UnsafeFile(_name(path), "exists", "exists (it appeared while the result was written): remove it or "
                                                "choose another path") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        check_output(path)  # a file system without hard links: look once more, then rename
        os.replace(tmp, path)


def write_bytes(path: str | os.PathLike, data: bytes | Callable[[BinaryIO], None], *,
                overwrite: bool = False) -> None:
    """Write ``data`` (bytes, or a function writing to a binary file) to ``path`` through
    :func:`published`."""
    with published(path, overwrite=overwrite) as tmp:
        with open(tmp, "wb") as fh:
            if isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                data(fh)


def save_npy(path: str | os.PathLike, array, *, overwrite: bool = False) -> None:
    """``numpy.save`` of ``array`` to ``path`` (the name as given) through :func:`published`."""
    import numpy as np

    write_bytes(path, lambda fh: np.save(fh, array, allow_pickle=False), overwrite=overwrite)

