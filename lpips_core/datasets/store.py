"""Result tables on disk: streamed as computed, resumed, and merged from shards.

A table is CSV (``.csv``) or JSON Lines (``.jsonl``), one row per pair, columns
:data:`BASE_COLUMNS` then one per metric (its spec name). Beside it, ``<table>.manifest.json``
holds the configuration the rows were computed under, the package versions, whether the run
finished and, once it has, the summary. Floats are written with Python's ``repr`` (exact round
trip), so a table read back and written again is byte for byte the same.

Any file name round-trips (:mod:`lpips_core.cells`):

- JSON Lines keep the raw names; the characters that other line readers split at (U+2028,
  U+2029, NEL) and the lone surrogates of names that are not UTF-8 are written as ``\\uXXXX``
  escapes, and the reader splits at ``\\n`` only.
- CSV cells of names are :func:`~lpips_core.cells.escape_name` d (``bad\\xff.png``), every
  text cell that a spreadsheet would run as a formula is neutralised with a leading ``'``, and
  both are undone when the table is read.

- Streaming: each block's rows are appended and flushed as soon as they are computed; a killed
  run loses at most the block in flight (a torn last record — found with the CSV parser's own
  record boundaries, so a quoted newline inside a name is not taken for one; cut anywhere,
  also inside a multi-byte UTF-8 character, a quoted field or a JSON string — is ignored when
  the table is read, and cut before a resumed run appends). Only the tail may be torn: bytes
  that are not UTF-8 anywhere else make the table refused.
- Files: tables and manifests are read through :mod:`lpips_core.files` (regular files only, at
  most :data:`MAX_TABLE_BYTES` / :data:`MAX_MANIFEST_BYTES`: a FIFO is refused, never waited
  on) and written through it: :func:`write_table` and :func:`write_manifest` replace the file
  atomically (a link there is replaced, never written through), and :class:`RowWriter` opens only
  a regular file or a new one (``O_NOFOLLOW``), so a link, FIFO, device or folder at a table's
  path is refused before a row is written.
- Resume: the rows already on disk are kept and only blocks with a missing row are computed
  again; when the run ends the table is rewritten in pair order (duplicates of a recomputed
  block dropped, the later kept), so an interrupted and resumed run gives the same table as an
  uninterrupted one.
- Merge: :func:`merge_tables` checks that the shard tables were computed under one configuration
  with the same package versions, weights and device (``force`` records a disagreement in the
  manifest instead), over the same pairs (the rows' keys and names, in index order, must give
  the configuration's ``pairs_digest``), that every shard ``0 … n−1`` is present once and
  finished, that their rows cover every pair exactly once, and that every scored row holds a
  number for every metric; the merged table and summary equal one run's.

Every problem with a table or a manifest is a ``ValueError`` of one line.
"""

from __future__ import annotations

import codecs
import csv
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Iterable, Sequence

from .. import files
from ..cells import escape_name, neutralise, restore, unescape_name
from .summary import summarize

__all__ = [
    "BASE_COLUMNS",
    "ERROR_KINDS",
    "MAX_MANIFEST_BYTES",
    "MAX_TABLE_BYTES",
    "RowWriter",
    "check_rows",
    "final_rows",
    "manifest_path",
    "merge_tables",
    "read_manifest",
    "read_rows",
    "table_format",
    "versions_disagree",
    "write_manifest",
    "write_table",
]

BASE_COLUMNS: tuple[str, ...] = ("index", "key", "reference", "test", "reference_size", "test_size", "error_kind",
                                  "error")
"""Columns every row has: the pair's global index and key, the reference and the test file
(relative names), their decoded sizes ``"HxW"``, and ``error_kind``/``error`` (empty when the pair
was scored)."""

_TEXT = {"key", "reference", "test", "reference_size", "test_size", "error_kind", "error"}

#: The columns of the reference and test files in tables that name them by position instead.
_POSITIONAL = ("a", "b", "a_size", "b_size")

ERROR_KINDS: frozenset[str] = frozenset({"unreadable", "too_large", "size-mismatch", "too-small", "failed"})
"""The values of ``error_kind`` on a row that could not be scored (``""`` on a scored row)."""

MAX_MANIFEST_BYTES = 16 * 2**20
"""Largest manifest read (16 MiB; one this tool writes is a few KB)."""

MAX_TABLE_BYTES = 4 * 2**30
"""Largest table read (4 GiB, some 20 million rows of a few metrics): a larger file is refused
from its size, unread (a table is read whole, to resume, merge or rewrite it in pair order)."""

#: The only metric value that may be non-finite on a scored row: PSNR of identical images.
_MAY_BE_INF = ("psnr",)

def table_format(path: str | os.PathLike[str]) -> str:
    """``"csv"`` or ``"jsonl"`` from the file's extension.

    Raises:
        ValueError: any other extension.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    raise ValueError(f"the output must end in .csv or .jsonl, got {str(path)!r}")


def manifest_path(path: str | os.PathLike[str]) -> Path:
    """``<table>.manifest.json``."""
    return Path(f"{os.fspath(path)}.manifest.json")


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


# Characters written as \uXXXX escapes in JSON Lines: line separators other readers split at,
# and lone surrogates (names that are not UTF-8), which UTF-8 cannot encode.
_JSONL_ESCAPE = re.compile("[\u0085\u2028\u2029\ud800-\udfff]")


def _jsonl_line(record: dict) -> str:
    text = json.dumps(record, ensure_ascii=False)
    return _JSONL_ESCAPE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) + "\n"


def _text_cell(value: str) -> str:
    """A text value as a CSV cell: escaped (lossless for names that are not UTF-8), then
    neutralised against formulas."""
    return neutralise(escape_name(value))


def _csv_line(cells: Sequence[str]) -> str:
    """One CSV record ending in ``\\n``: a cell is quoted (``"`` doubled) when it holds a comma, a
    quote, a newline or a carriage return. (``csv.writer`` with a ``\\n`` terminator leaves a lone
    ``\\r`` unquoted, and every CSV reader then splits the record there.)"""
    return ",".join(f'"{c.replace(chr(34), chr(34) * 2)}"' if any(ch in c for ch in ',"\n\r') else c
                    for c in cells) + "\n"


def _encode(row: dict, columns: Sequence[str], fmt: str) -> str:
    if fmt == "jsonl":
        return _jsonl_line({c: _json_safe(row.get(c)) for c in columns})
    cells = []
    for c in columns:
        v = row.get(c)
        if v is None:
            cells.append("")
        elif isinstance(v, float):
            cells.append(repr(v))
        elif isinstance(v, str):
            cells.append(_text_cell(v))
        else:
            cells.append(str(v))
    return _csv_line(cells)


def _header(columns: Sequence[str], fmt: str) -> str:
    if fmt == "jsonl":
        return ""
    return _csv_line([neutralise(c) for c in columns])


class RowWriter:
    """Append rows to a table as they are computed (flushed after every :meth:`write`).

    Args:
        path: ``.csv`` or ``.jsonl``.
        columns: the table's columns (:data:`BASE_COLUMNS` + metric names).
        append: continue an existing table (its columns must be ``columns``).
    """

    def __init__(self, path: str | os.PathLike[str], columns: Sequence[str], *, append: bool = False):
        self.path, self.columns, self.fmt = Path(path), tuple(columns), table_format(path)
        exists = files.check_output(self.path, exists_ok=True) and self.path.stat().st_size > 0
        append = append and exists
        fd = _open_table(self.path, append=append)
        try:
            if append:
                _trim_torn_tail(self.path, fd)
            self._fh = open(fd, "a" if append else "w", encoding="utf-8", newline="")
        except BaseException:
            os.close(fd)
            raise
        if not append:
            self._fh.write(_header(self.columns, self.fmt))
            self._fh.flush()

    def write(self, rows: Iterable[dict]) -> None:
        self._fh.write("".join(_encode(r, self.columns, self.fmt) for r in rows))
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _open_table(path: Path, *, append: bool) -> int:
    """A descriptor of ``path`` for writing rows (appending, or emptied first; created if
    missing), opened only after :func:`lpips_core.files.check_output` found a regular file or
    nothing there, never through a link (``O_NOFOLLOW``) and never waiting on a FIFO put there
    since (``O_NONBLOCK``, and the open descriptor must be a regular file)."""
    files.check_output(path, exists_ok=True)
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    fd = os.open(path, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise files.UnsafeFile(os.fsdecode(path), "special", "is not a regular file: results are written to "
                                                                 "regular files only")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _decode(data: bytes, path) -> str:
    """A table's bytes as text, exactly as stored (no newline translation: a CR inside a name stays
    one). A multi-byte character cut at the very end (a killed run's torn tail, which the record
    boundaries drop anyway) is left out; a byte that is not UTF-8 anywhere else is refused.

    Raises:
        ValueError: not UTF-8, in one line.
    """
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=False)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a UTF-8 table ({exc.reason} at byte {exc.start})") from None


def _read_text(path: str | os.PathLike[str]) -> tuple[str, int]:
    """A table's text (:func:`_decode`) and its size in bytes, read through
    :func:`lpips_core.files.read_bytes` (a regular file of at most :data:`MAX_TABLE_BYTES`)."""
    data = files.read_bytes(path, max_bytes=MAX_TABLE_BYTES)
    return _decode(data, path), len(data)


def _trim_torn_tail(path: Path, fd: int) -> None:
    """Cut a last record left incomplete by a killed run (the parser's record boundaries; torn
    anywhere, a multi-byte character included), through ``fd``, the table open for writing."""
    text, size = _read_text(path)
    keep = len(_complete_prefix(text, table_format(path)).encode("utf-8"))
    if keep != size:
        os.ftruncate(fd, keep)


def _lines(text: str, ends: list[int]):
    """``text`` in lines split at ``\\n`` only (kept), recording where each ends in ``ends``."""
    start = 0
    while start < len(text):
        j = text.find("\n", start)
        stop = len(text) if j < 0 else j + 1
        ends[0] = stop
        yield text[start:stop]
        start = stop


def _csv_records(text: str) -> tuple[list[list[str]], int]:
    """The complete CSV records of ``text`` and where the last of them ends: a record counts
    when the parser closes it at a ``\\n`` (a quoted newline is inside a field)."""
    ends = [0]
    records, good = [], 0
    try:
        for rec in csv.reader(_lines(text, ends), strict=True):
            if ends[0] and text[ends[0] - 1] == "\n":
                records.append(rec)
                good = ends[0]
    except csv.Error:  # a quoted field left open at the end: torn there
        pass
    return records, good


def _complete_prefix(text: str, fmt: str) -> str:
    if fmt == "csv":
        return text[:_csv_records(text)[1]]
    return text[: text.rfind("\n") + 1]


def _decode_value(column: str, text):
    if column == "index":
        if isinstance(text, bool) or not isinstance(text, (int, str)):
            raise ValueError(f"index {text!r} is not an integer")
        return int(text)
    if column in _TEXT:
        if text is None:
            return ""
        if not isinstance(text, str):
            raise ValueError(f"{column} {text!r} is not text")
        return text
    if text is None or text == "":
        return None
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise ValueError(f"{column} {text!r} is not a number")
    return float(text)


def _csv_text(column: str, cell: str):
    if column in _TEXT:
        return unescape_name(restore(cell))
    return cell


def read_rows(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], list[dict]]:
    """``(columns, rows)`` of a table; a torn last record (a killed run's, cut anywhere) is ignored.

    Raises:
        ValueError: not a table this module wrote (unknown extension, not UTF-8 before the torn
            tail, missing base columns, a malformed record other than the last), or not a regular
            file of at most :data:`MAX_TABLE_BYTES` (:class:`lpips_core.files.UnsafeFile`), in one line.
        OSError: it cannot be read (missing, no permission).
    """
    fmt = table_format(path)
    text, _ = _read_text(path)
    rows: list[dict] = []
    if fmt == "csv":
        records, _ = _csv_records(text)
        if not records:
            return (), []
        columns = tuple(restore(c) for c in records[0])
        _check_columns(path, columns)
        for n, rec in enumerate(records[1:], 2):
            if len(rec) != len(columns):
                raise ValueError(f"{path}: record {n} has {len(rec)} fields, the header {len(columns)}")
            try:
                rows.append({c: _decode_value(c, _csv_text(c, v)) for c, v in zip(columns, rec)})
            except ValueError as exc:
                raise ValueError(f"{path}: record {n}: {exc}") from None
    else:
        columns = ()
        text = _complete_prefix(text, fmt)
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise ValueError(f"{path}: line {n} is not JSON ({str(exc)[:80]})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}: line {n} is not a JSON object")
            if not columns:
                columns = tuple(rec)
                _check_columns(path, columns)
            try:
                rows.append({c: (float(v) if isinstance(v, str) and c not in _TEXT else _decode_value(c, v))
                             for c, v in rec.items()})
            except ValueError as exc:
                raise ValueError(f"{path}: line {n}: {exc}") from None
    return columns, rows


def _check_columns(path, columns: Sequence[str]) -> None:
    """Refuse a table without :data:`BASE_COLUMNS`, in one line (naming the renaming that fixes a
    table whose files are in columns ``a``/``b``)."""
    missing = [c for c in BASE_COLUMNS if c not in columns]
    if missing and all(c in columns for c in _POSITIONAL):
        raise ValueError(f"{path} has columns a, b, a_size, b_size; this version expects reference, test, "
                         "reference_size, test_size (the same data): rename them (a CSV's header, every line's "
                         "keys in JSON Lines) or score into a new file")
    if missing:
        raise ValueError(f"{path} is not a results table: columns {missing} are missing")


def check_rows(rows: Sequence[dict], names: Sequence[str], *, total: int, where: str,
               pairs: Sequence | None = None) -> None:
    """Refuse rows a scorer cannot have written (one-line ``ValueError`` naming the row).

    Every row's ``index`` lies in ``[0, total)``; with ``pairs`` (the sorted pairs), its
    ``key``, ``reference`` and ``test`` are those of ``pairs[index]``; ``error_kind`` is ``""`` or one of
    :data:`ERROR_KINDS`; a scored row holds a finite number for every metric in ``names``
    (PSNR may be ``+inf``: identical images), a row with an error none.
    """
    for r in rows:
        i = r.get("index")
        if not isinstance(i, int) or not 0 <= i < total:
            raise ValueError(f"{where}: a row has index {i!r}, outside 0…{total - 1}")
        if pairs is not None:
            p = pairs[i]
            if (r.get("key"), r.get("reference"), r.get("test")) != (p.key, p.reference_name, p.test_name):
                raise ValueError(f"{where}: the row at index {i} is for {_short(r.get('key'))!r}, but pair {i} is "
                                 f"{_short(p.key)!r}: the table does not belong to these pairs")
        kind = r.get("error_kind")
        if kind and kind not in ERROR_KINDS:
            raise ValueError(f"{where}: the row at index {i} has error kind {_short(kind)!r}")
        for name in names:
            v = r.get(name)
            if kind:
                if v is not None:
                    raise ValueError(f"{where}: the row at index {i} has an error and a {name} value")
                continue
            if not isinstance(v, float) or math.isnan(v) or (
                    math.isinf(v) and not (v > 0 and name.split("-")[0] in _MAY_BE_INF)):
                raise ValueError(f"{where}: the row at index {i} has {name} = {v!r} and no error: "
                                 "not a value a scorer writes")


def _short(text, limit: int = 80) -> str:
    text = text if isinstance(text, str) else repr(text)
    return text if len(text) <= limit else text[:limit] + "…"


def write_table(path: str | os.PathLike[str], columns: Sequence[str], rows: Iterable[dict]) -> None:
    """Write a whole table atomically, replacing the one there (:func:`lpips_core.files.published`:
    a temporary file beside it, then renamed over whatever is at ``path``, which is never written
    through; a folder there is refused)."""
    path = Path(path)
    fmt = table_format(path)
    with files.published(path, overwrite=True) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(_header(columns, fmt))
            for r in rows:
                fh.write(_encode(r, columns, fmt))


def write_manifest(path: str | os.PathLike[str], manifest: dict) -> None:
    """Write ``<table>.manifest.json`` atomically (as :func:`write_table`)."""
    text = json.dumps(manifest, indent=1, sort_keys=True, default=_json_safe) + "\n"
    files.write_bytes(manifest_path(path), text.encode("utf-8"), overwrite=True)


def read_manifest(path: str | os.PathLike[str]) -> dict:
    """The manifest beside a table, checked to have the shape this module writes.

    Raises:
        ValueError: it is missing, not a regular file (a FIFO is refused unread), larger than
            :data:`MAX_MANIFEST_BYTES`, not JSON, or malformed (the message names the first field
            at fault).
    """
    target = manifest_path(path)
    try:
        manifest = json.loads(files.read_bytes(target, max_bytes=MAX_MANIFEST_BYTES).decode("utf-8"))
    except files.UnsafeFile as exc:
        if exc.kind == "too_large":
            raise ValueError(f"{target} is {exc.size:,} bytes, more than a manifest ({MAX_MANIFEST_BYTES:,})") from None
        raise
    except FileNotFoundError:
        raise ValueError(f"{target} is missing: {path} was not written by this tool") from None
    except UnicodeDecodeError:
        raise ValueError(f"{target} is not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{target} is not JSON ({str(exc)[:80]})") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise ValueError(f"{target} is malformed: {problem}")
    return manifest


def _manifest_problem(m) -> str | None:
    """What is wrong with a manifest's shape, or ``None``."""
    if not isinstance(m, dict):
        return f"it holds a JSON {type(m).__name__}, not an object"
    for key, kind in (("config", dict), ("run", dict), ("versions", dict), ("complete", bool)):
        if not isinstance(m.get(key), kind):
            return f"'{key}' is missing or not a JSON {'object' if kind is dict else 'true/false'}"
    config, run = m["config"], m["run"]
    metrics = config.get("metrics")
    if not isinstance(metrics, list) or not all(isinstance(x, str) for x in metrics):
        return "config.metrics is not a list of names"
    total = config.get("pairs_total")
    if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= 10**10:
        return f"config.pairs_total is {_short(repr(total))}, not a count of pairs"
    if not isinstance(config.get("pairs_digest"), str):
        return "config.pairs_digest is not text"
    shard = run.get("shard")
    if shard is not None and not (isinstance(shard, list) and len(shard) == 2
                                  and all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
                                  and 0 <= shard[0] < shard[1]):
        return f"run.shard is {_short(repr(shard))}, not [i, n] with 0 ≤ i < n"
    if not isinstance(run.get("device", ""), str):
        return "run.device is not text"
    return None


def versions_disagree(a: dict, b: dict, *, device_a: str | None = None, device_b: str | None = None) -> list[str]:
    """Where two manifests' package versions, weights and devices differ, one text per item
    (``"torch 2.4.0 vs 2.5.0"``); empty when they agree."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "weights":
            wa, wb = a.get(key) or {}, b.get(key) or {}
            for name in sorted(set(wa) | set(wb)):
                if wa.get(name) != wb.get(name):
                    out.append(f"weights of {name}: {_short(wa.get(name))!r} vs {_short(wb.get(name))!r}")
        elif a.get(key) != b.get(key):
            out.append(f"{key} {_short(a.get(key))} vs {_short(b.get(key))}")
    if device_a != device_b:
        out.append(f"device {_short(device_a)} vs {_short(device_b)}")
    return out


def final_rows(rows: Iterable[dict], indices: Iterable[int] | None = None) -> list[dict]:
    """Rows in index order, one per index (the last written wins), restricted to ``indices``."""
    latest = {r["index"]: r for r in rows}
    keep = sorted(latest) if indices is None else [i for i in sorted(set(indices)) if i in latest]
    return [latest[i] for i in keep]


def merge_tables(shards: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                 force: bool = False) -> dict:
    """Merge shard tables into ``out`` (and its manifest, with the summary); returns the manifest.

    Args:
        shards: the tables of shards ``0 … n−1`` (any order).
        out: the merged ``.csv``/``.jsonl`` (not one of the shards).
        force: merge shards whose package versions, weights or device differ; the differences
            are recorded in the merged manifest's ``run.forced``.

    Raises:
        ValueError: malformed manifests, shards of different configurations, versions, weights or
            devices (without ``force``) or pairs, a shard missing, repeated or unfinished, shards
            of different counts, rows missing, repeated or not the pairs', values a scorer
            cannot write, ``out`` among the inputs.
    """
    from .pairs import names_digest

    if not shards:
        raise ValueError("merge needs at least one shard table")
    if any(Path(s).resolve() == Path(out).resolve() for s in shards):
        raise ValueError(f"the merged table {str(out)!r} must not be one of the shards")
    table_format(out)
    files.check_output(out, exists_ok=True)  # a link, FIFO, device or folder: refused before any work
    manifests = [read_manifest(s) for s in shards]
    first = manifests[0]
    forced: list[str] = []
    for s, m in zip(shards, manifests):
        if m["config"] != first["config"]:
            raise ValueError(f"{s} was computed under another configuration than {shards[0]}")
        if not m["complete"]:
            raise ValueError(f"{s} is unfinished: rerun its shard with --resume first")
        diff = versions_disagree(first["versions"], m["versions"], device_a=first["run"].get("device"),
                                 device_b=m["run"].get("device"))
        if diff and not force:
            raise ValueError(f"{s} was computed with other packages, weights or device than {shards[0]} "
                             f"({'; '.join(diff[:3])}); rerun it, or pass --force to merge anyway")
        forced.extend(f"{s}: {d}" for d in diff)
    counts = {(m["run"].get("shard") or [0, 1])[1] for m in manifests}
    if len(counts) > 1:
        what = ", ".join(f"{s} is shard {(m['run'].get('shard') or [0, 1])[0]} of "
                         f"{(m['run'].get('shard') or [0, 1])[1]}" for s, m in zip(shards, manifests))
        raise ValueError(f"the tables come from different shardings ({what}): merge the n tables of one --shard i/n run")
    n = counts.pop()
    ids = sorted((m["run"].get("shard") or [0, 1])[0] for m in manifests)
    if ids != list(range(n)):
        missing = sorted(set(range(n)) - set(ids))
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        what = "; ".join(x for x in (f"missing {missing}" if missing else "",
                                     f"repeated {repeated}" if repeated else "") if x)
        raise ValueError(f"merge needs shards 0…{n - 1} of {n} once each ({what})")
    total = first["config"]["pairs_total"]
    names = list(first["config"]["metrics"])
    columns, rows = None, []
    for s in shards:
        cols, part = read_rows(s)
        if columns is not None and cols != columns:
            raise ValueError(f"{s} has columns {cols}, {shards[0]} has {columns}")
        columns = cols
        part = final_rows(part)
        check_rows(part, names, total=total, where=str(s))
        rows.extend(part)
    rows.sort(key=lambda r: r["index"])
    if len(rows) != total or any(r["index"] != i for i, r in enumerate(rows)):
        raise ValueError(f"the shards hold {len(rows)} rows for {total} pairs (some missing or repeated)")
    if names_digest((r["key"], r["reference"], r["test"]) for r in rows) != first["config"]["pairs_digest"]:
        raise ValueError("the shards' rows do not name the pairs their manifests were computed on "
                         "(keys or file names differ from the configuration's pairs_digest)")
    write_table(out, columns, rows)
    run = {**first["run"], "shard": None, "merged_from": [str(s) for s in shards]}
    if forced:
        run["forced"] = forced
    manifest = {**first, "run": run, "complete": True, "summary": summarize(rows, names)}
    write_manifest(out, manifest)
    return manifest
