"""Result tables on disk: streamed as computed, resumed, and merged from shards.

A table is CSV (``.csv``) or JSON Lines (``.jsonl``), one row per pair, columns
:data:`BASE_COLUMNS` then one per metric (its spec name). Beside it, ``<table>.manifest.json``
holds the configuration the rows were computed under, the package versions, whether the run
finished and, once it has, the summary. Floats are written with Python's ``repr`` (exact round
trip), so a table read back and written again is byte for byte the same.

- Streaming: each block's rows are appended and flushed as soon as they are computed; a killed
  run loses at most the block in flight (a torn last line is ignored when the table is read).
- Resume: the rows already on disk are kept and only blocks with a missing row are computed
  again; when the run ends the table is rewritten in pair order (duplicates of a recomputed
  block dropped, the later kept), so an interrupted and resumed run gives the same table as an
  uninterrupted one.
- Merge: :func:`merge_tables` checks that the shard tables were computed under one configuration
  over the same pairs, that every shard ``0 … n−1`` is present once and finished, and that
  their rows cover every pair exactly once; the merged table and summary equal one run's.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Iterable, Sequence

__all__ = [
    "BASE_COLUMNS",
    "RowWriter",
    "manifest_path",
    "merge_tables",
    "read_manifest",
    "read_rows",
    "table_format",
    "write_manifest",
    "write_table",
]

BASE_COLUMNS: tuple[str, ...] = ("index", "key", "a", "b", "a_size", "b_size", "error_kind", "error")
"""Columns every row has: the pair's global index and key, both files (relative names), both
decoded sizes ``"HxW"``, and ``error_kind``/``error`` (empty when the pair was scored)."""

_TEXT = {"key", "a", "b", "a_size", "b_size", "error_kind", "error"}


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


def _encode(row: dict, columns: Sequence[str], fmt: str) -> str:
    if fmt == "jsonl":
        return json.dumps({c: _json_safe(row.get(c)) for c in columns}, ensure_ascii=False) + "\n"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["" if row.get(c) is None else repr(row[c])
                                                    if isinstance(row[c], float) else row[c] for c in columns])
    return buf.getvalue()


def _header(columns: Sequence[str], fmt: str) -> str:
    if fmt == "jsonl":
        return ""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(columns)
    return buf.getvalue()


class RowWriter:
    """Append rows to a table as they are computed (flushed after every :meth:`write`).

    Args:
        path: ``.csv`` or ``.jsonl``.
        columns: the table's columns (:data:`BASE_COLUMNS` + metric names).
        append: continue an existing table (its columns must be ``columns``).
    """

    def __init__(self, path: str | os.PathLike[str], columns: Sequence[str], *, append: bool = False):
        self.path, self.columns, self.fmt = Path(path), tuple(columns), table_format(path)
        exists = self.path.exists() and self.path.stat().st_size > 0
        if append and exists:
            _trim_torn_tail(self.path)
            self._fh = open(self.path, "a", encoding="utf-8", newline="")
        else:
            self._fh = open(self.path, "w", encoding="utf-8", newline="")
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


def _trim_torn_tail(path: Path) -> None:
    """Cut a last line left without its newline by a killed run."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _decode_value(column: str, text):
    if column == "index":
        return int(text)
    if column in _TEXT:
        return "" if text is None else str(text)
    if text is None or text == "":
        return None
    return float(text)


def read_rows(path: str | os.PathLike[str]) -> tuple[tuple[str, ...], list[dict]]:
    """``(columns, rows)`` of a table; a torn last line (no newline) is ignored.

    Raises:
        ValueError: not a table this module wrote (unknown extension, missing base columns, a
            malformed line other than the last).
    """
    fmt = table_format(path)
    text = Path(path).read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows: list[dict] = []
    if fmt == "csv":
        records = list(csv.reader(io.StringIO(text)))
        if not records:
            return (), []
        columns = tuple(records[0])
        for n, rec in enumerate(records[1:], 2):
            if len(rec) != len(columns):
                raise ValueError(f"{path}: line {n} has {len(rec)} fields, the header {len(columns)}")
            rows.append({c: _decode_value(c, v) for c, v in zip(columns, rec)})
    else:
        columns = ()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n} is not JSON ({exc})") from None
            columns = columns or tuple(rec)
            rows.append({c: (float(v) if isinstance(v, str) and c not in _TEXT else _decode_value(c, v))
                         for c, v in rec.items()})
    missing = [c for c in BASE_COLUMNS if columns and c not in columns]
    if missing:
        raise ValueError(f"{path} is not a results table: columns {missing} are missing")
    return columns, rows


def write_table(path: str | os.PathLike[str], columns: Sequence[str], rows: Iterable[dict]) -> None:
    """Write a whole table atomically (a temporary file beside it, then ``os.replace``)."""
    path = Path(path)
    fmt = table_format(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(_header(columns, fmt))
        for r in rows:
            fh.write(_encode(r, columns, fmt))
    os.replace(tmp, path)


def write_manifest(path: str | os.PathLike[str], manifest: dict) -> None:
    """Write ``<table>.manifest.json`` atomically."""
    target = manifest_path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=_json_safe) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def read_manifest(path: str | os.PathLike[str]) -> dict:
    """The manifest beside a table.

    Raises:
        ValueError: it is missing or not JSON.
    """
    target = manifest_path(path)
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{target} is missing: {path} was not written by this tool") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{target} is not JSON ({exc})") from None


def final_rows(rows: Iterable[dict], indices: Iterable[int] | None = None) -> list[dict]:
    """Rows in index order, one per index (the last written wins), restricted to ``indices``."""
    latest = {r["index"]: r for r in rows}
    keep = sorted(latest) if indices is None else [i for i in sorted(set(indices)) if i in latest]
    return [latest[i] for i in keep]


def merge_tables(shards: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> dict:
    """Merge shard tables into ``out`` (and its manifest, with the summary); returns the manifest.

    Raises:
        ValueError: shards of different configurations or pairs, a shard missing, repeated or
            unfinished, rows missing or repeated, ``out`` among the inputs.
    """
    from .score import summarize  # score imports this module

    if not shards:
        raise ValueError("merge needs at least one shard table")
    if any(Path(s).resolve() == Path(out).resolve() for s in shards):
        raise ValueError(f"the merged table {str(out)!r} must not be one of the shards")
    table_format(out)
    manifests = [read_manifest(s) for s in shards]
    first = manifests[0]
    for s, m in zip(shards, manifests):
        if m.get("config") != first.get("config"):
            raise ValueError(f"{s} was computed under another configuration than {shards[0]}")
        if not m.get("complete"):
            raise ValueError(f"{s} is unfinished: rerun its shard with --resume first")
    n = first["run"]["shard"][1] if first["run"].get("shard") else 1
    ids = sorted(m["run"]["shard"][0] if m["run"].get("shard") else 0 for m in manifests)
    if ids != list(range(n)) or any((m["run"].get("shard") or [0, 1])[1] != n for m in manifests):
        raise ValueError(f"merge needs shards 0…{n - 1} of {n} once each, got {ids}")
    columns, rows = None, []
    for s in shards:
        cols, part = read_rows(s)
        if columns is not None and cols != columns:
            raise ValueError(f"{s} has columns {cols}, {shards[0]} has {columns}")
        columns = cols
        rows.extend(final_rows(part))
    rows.sort(key=lambda r: r["index"])
    total = first["config"]["pairs_total"]
    if [r["index"] for r in rows] != list(range(total)):
        raise ValueError(f"the shards hold {len(rows)} rows for {total} pairs (some missing or repeated)")
    write_table(out, columns, rows)
    names = [c for c in columns if c not in BASE_COLUMNS]
    manifest = {**first, "run": {**first["run"], "shard": None, "merged_from": [str(s) for s in shards]},
                "complete": True, "summary": summarize(rows, names)}
    write_manifest(out, manifest)
    return manifest
