"""Result tables torn anywhere resume byte-equal; FIFOs and links in a table's place are refused.

Rows 8 and 9 of "One reader, one writer": a ``score --out`` run stopped by a file-size limit or a
kill can leave its table cut at any byte — inside a multi-byte UTF-8 character of a name, inside
a quoted CSV field or a JSON string — and ``--resume`` must go on from it; a named pipe as a
table, a shard or a manifest, or a link as ``--out``, is refused in one line, at once.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time

import numpy as np
import pytest
from PIL import Image

from lpips_core.__main__ import main
from lpips_core.datasets import Scorer, match_folders, merge_tables, read_rows, score_pairs
from lpips_core.datasets.store import manifest_path

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(signal, "setitimer"),
                                reason="named pipes and interval timers are POSIX")

#: Names with a character of 2 (NEL), 3 (U+2028) and 4 (an emoji) UTF-8 bytes, a quote, a comma and
#: a newline (a quoted CSV cell, escapes in a JSON string), and a byte that is not UTF-8 (a lone
#: surrogate in Python: escaped in both formats).
NAMES = [b"p", "l\u2028s".encode(), 'n,"\u0085\n'.encode(), "e\U0001F600".encode(), b"b\xff"]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """``ref/`` and ``test/`` with one 8 px pair per name (matched by name)."""
    root = tmp_path_factory.mktemp("torn")
    for i, name in enumerate(NAMES):
        for side, seed in ((b"ref", i), (b"test", 50 + i)):
            folder = os.path.join(os.fsencode(root), side)
            os.makedirs(folder, exist_ok=True)
            buf = io.BytesIO()
            Image.fromarray(np.random.default_rng(seed).integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(buf, "PNG")
            with open(os.path.join(folder, name + b".png"), "wb") as fh:
                fh.write(buf.getvalue())
    return root / "ref", root / "test"


@pytest.fixture(scope="module")
def scorer():
    return Scorer(["mse"], device="cpu")


class _Stop(Exception):
    pass


class _Hung(BaseException):  # not an OSError/ValueError: no handler in the CLI turns it into an exit 2
    pass


@contextlib.contextmanager
def _at_most(seconds: float):
    """Fail (instead of hanging the suite) if the body is still running after ``seconds``: a
    timer signal interrupts a blocked ``open``/``read`` of a FIFO in this, the main, thread."""
    def hung(*_):
        raise _Hung(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _one_line_refusal(capsys, argv, *, seconds: float = 5.0) -> str:
    """``main(argv)`` exits 2 with one ``error:`` line within ``seconds``; the line."""
    start = time.perf_counter()
    try:
        with _at_most(seconds):
            code = main(argv)
    except _Hung as exc:
        pytest.fail(f"{argv[0]} hung: {exc}")
    took = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "unexpected" not in err, err
    assert took < seconds
    return err


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_table_torn_at_every_byte_resumes_byte_equal(pairs, scorer, tmp_path, fmt):
    """The uninterrupted run's table cut at every byte offset ``0 … len``, then resumed in-process
    (as ``--resume`` does): the table and its manifest are the uninterrupted run's, byte for byte.

    What a stopped run leaves is made honestly: a real run is interrupted after its first block
    (its ``progress`` raises), which leaves the manifest a run in progress writes (``complete``:
    false, no summary) and a table that is a prefix of the uninterrupted one (checked: rows are
    streamed in pair order, each record as the final table writes it). A kill or a file-size limit
    stops that stream at an arbitrary byte, so each prefix of the uninterrupted table, beside that
    manifest, is a state a stopped run leaves; the byte offsets cut inside the 2, 3 and 4 byte
    characters, the quoted CSV cells of the names (U+2028 and NEL are raw in CSV, escaped in JSON
    Lines) and the JSON strings. (About 16 ms a cut: 340 + 910 cuts, some 25 s on 2 busy cores.)
    """
    disc = match_folders(*pairs)
    full = tmp_path / f"full.{fmt}"
    score_pairs(disc, scorer=scorer, out=str(full), batch_size=2, workers=0)
    data, manifest = full.read_bytes(), manifest_path(full).read_bytes()
    assert len(read_rows(full)[1]) == len(NAMES)
    for ch in ("\U0001F600", "\u2028", "\u0085") if fmt == "csv" else ("\U0001F600",):
        assert ch.encode() in data  # multi-byte characters to cut through
    assert ('"n,""\u0085\n' if fmt == "csv" else '"n,\\"\\u0085\\n').encode() in data  # a quoted cell, a JSON string

    run = tmp_path / f"run.{fmt}"

    def stop(done, total):
        if done >= 2:
            raise _Stop

    with pytest.raises(_Stop):
        score_pairs(disc, scorer=scorer, out=str(run), batch_size=2, workers=0, progress=stop)
    left = run.read_bytes()
    assert 0 < len(left) < len(data) and data.startswith(left)
    in_progress = manifest_path(run).read_bytes()
    assert json.loads(in_progress)["complete"] is False

    for cut in range(len(data) + 1):
        part = tmp_path / f"part.{fmt}"
        part.write_bytes(data[:cut])
        manifest_path(part).write_bytes(in_progress)
        score_pairs(disc, scorer=scorer, out=str(part), resume=True, batch_size=2, workers=0)
        assert part.read_bytes() == data, f"resumed after a cut at byte {cut} ({data[max(0, cut - 8):cut]!r})"
        assert manifest_path(part).read_bytes() == manifest


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_torn_character_is_tolerated_only_at_the_end(pairs, scorer, tmp_path, fmt):
    """Cut inside each multi-byte character: read and resumed; the same bytes in the middle of
    the table, or a byte that is not UTF-8 there: one-line ``ValueError``, nothing rewritten."""
    disc = match_folders(*pairs)
    full = tmp_path / f"full.{fmt}"
    score_pairs(disc, scorer=scorer, out=str(full), batch_size=2, workers=0)
    data, manifest = full.read_bytes(), json.loads(manifest_path(full).read_text())
    manifest.update(complete=False)
    manifest.pop("summary")
    part = tmp_path / f"part.{fmt}"
    for ch in ("\U0001F600", "\u2028", "\u0085") if fmt == "csv" else ("\U0001F600",):
        at = data.index(ch.encode()) + 1
        kept = data[: data.rindex(b"\n", 0, at) + 1]
        part.write_bytes(data[:at])
        assert read_rows(part) == read_rows(_write(tmp_path / f"kept.{fmt}", kept))
        manifest_path(part).write_text(json.dumps(manifest))
        score_pairs(disc, scorer=scorer, out=str(part), resume=True, batch_size=2, workers=0)
        assert part.read_bytes() == data
        for bad in (data[:at] + data[at + 1:], data[:at] + b"\xff" + data[at:]):
            part.write_bytes(bad)
            manifest_path(part).write_text(json.dumps(manifest))
            with pytest.raises(ValueError, match=r"is not a UTF-8 table \((invalid|unexpected).* at byte \d+\)$"):
                read_rows(part)
            with pytest.raises(ValueError, match="is not a UTF-8 table"):
                score_pairs(disc, scorer=scorer, out=str(part), resume=True, batch_size=2, workers=0)
            assert part.read_bytes() == bad


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- row 9
def _score_args(pairs, out, *extra) -> list[str]:
    return ["score", str(pairs[0]), str(pairs[1]), "--metrics", "mse", "--workers", "0", "--batch-size", "2",
            "--out", str(out), *extra]


def test_a_fifo_as_the_out_table_is_refused_at_once(pairs, tmp_path, capsys):
    fifo = tmp_path / "t.csv"
    os.mkfifo(fifo)
    err = _one_line_refusal(capsys, _score_args(pairs, fifo))
    assert f"'{fifo}' is a named pipe (FIFO): results are written to regular files only" in err
    assert not manifest_path(fifo).exists()


def test_a_fifo_as_the_resumed_table_is_refused_at_once(pairs, scorer, tmp_path, capsys):
    disc = match_folders(*pairs)
    full = tmp_path / "full.jsonl"
    score_pairs(disc, scorer=scorer, out=str(full), batch_size=2, workers=0)
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    manifest_path(fifo).write_bytes(manifest_path(full).read_bytes().replace(b'"complete": true', b'"complete": false'))
    err = _one_line_refusal(capsys, _score_args(pairs, fifo, "--resume"))
    assert f"'{fifo}' is a named pipe (FIFO): results are written to regular files only" in err
    with _at_most(5), pytest.raises(ValueError, match="named pipe"):
        score_pairs(disc, scorer=scorer, out=str(fifo), resume=True, batch_size=2, workers=0)


def test_a_fifo_as_the_manifest_is_refused_at_once(pairs, tmp_path, capsys):
    out = tmp_path / "t.csv"
    os.mkfifo(manifest_path(out))
    err = _one_line_refusal(capsys, _score_args(pairs, out, "--resume"))
    assert f"'{manifest_path(out)}' is a named pipe (FIFO), not a regular file, so it was not read" in err
    err = _one_line_refusal(capsys, ["merge", str(tmp_path / "m.csv"), str(out)])
    assert "is a named pipe (FIFO), not a regular file" in err


def test_a_fifo_as_a_merged_shard_or_the_merged_table_is_refused_at_once(pairs, scorer, tmp_path, capsys):
    disc = match_folders(*pairs)
    shards = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, s in enumerate(shards):
        score_pairs(disc, scorer=scorer, out=str(s), shard=(i, 2), batch_size=2, workers=0)
    fifo = tmp_path / "s1-pipe.csv"
    os.mkfifo(fifo)
    manifest_path(fifo).write_bytes(manifest_path(shards[1]).read_bytes())  # a finished shard's manifest
    err = _one_line_refusal(capsys, ["merge", str(tmp_path / "m.csv"), str(shards[0]), str(fifo)])
    assert f"'{fifo}' is a named pipe (FIFO), not a regular file, so it was not read" in err
    with _at_most(5), pytest.raises(ValueError, match="named pipe"):
        merge_tables([shards[0], fifo], tmp_path / "m.csv")
    merged = tmp_path / "merged.csv"
    os.mkfifo(merged)
    err = _one_line_refusal(capsys, ["merge", str(merged), *map(str, shards)])
    assert f"'{merged}' is a named pipe (FIFO): results are written to regular files only" in err


@pytest.mark.parametrize("resume", [False, True])
def test_a_link_as_the_out_table_is_refused_and_its_target_untouched(pairs, scorer, tmp_path, capsys, resume):
    """A link to an (empty, or a finished run's) table, or a dangling one: refused, nothing
    written through it and the link left a link."""
    disc = match_folders(*pairs)
    finished = tmp_path / "finished.csv"
    score_pairs(disc, scorer=scorer, out=str(finished), batch_size=2, workers=0)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    for n, target in enumerate([empty, finished, tmp_path / "nowhere.csv"]):
        before = target.read_bytes() if target.exists() else None
        link = tmp_path / f"link{n}.csv"
        link.symlink_to(target)
        extra = ("--resume",) if resume else ()
        err = _one_line_refusal(capsys, _score_args(pairs, link, *extra))
        assert f"'{link}' is a symbolic link: nothing is written through a link" in err
        assert link.is_symlink() and (target.read_bytes() if target.exists() else None) == before
        assert not manifest_path(link).exists()


def test_tables_and_manifests_get_the_mode_of_a_new_file(pairs, scorer, tmp_path):
    """Written through ``files.published`` (a ``mkstemp`` file renamed into place), a table and its
    manifest still get ``0o666 & ~umask``, as ``open`` gave them (not ``mkstemp``'s 0600)."""
    disc = match_folders(*pairs)
    old = os.umask(0o027)
    try:
        out = tmp_path / "t.jsonl"
        score_pairs(disc, scorer=scorer, out=str(out), batch_size=2, workers=0)
    finally:
        os.umask(old)
    assert {oct(p.stat().st_mode & 0o777) for p in (out, manifest_path(out))} == {oct(0o640)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl", "t.jsonl.manifest.json"]  # no temporary left
