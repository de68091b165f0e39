"""The LPIPS-space commands held to the dataset path's rules: one reader, one writer, a checked
embedding format. Each test replays a row of the hostile-input table (``docs/untrusted-input.md``,
"LPIPS space"), with the input built here:

1. a FIFO beside the images;  2. a link to ``/dev/zero``;  3. a 700 MB "image" (sparse);
4. a FIFO as an embedding's manifest, φ or norms file;  5. an edited embedding folder;
7. a link, an existing shard or matrix in the output's place, and a run stopped half-way.

(Rows 6 and 12, the bounds, are in ``test_space_bounds.py``; 8 and 9, tables, in
``test_torn_tables.py``; 10 and 11, names on a terminal or a page, in ``test_hostile_names.py``.)

A hang must fail, not stall the suite: every call runs under :func:`_deadline` (``SIGALRM``
interrupts a blocking ``open`` of a FIFO).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lpips_core import files, space
from lpips_core.__main__ import main

SPEC = "lpips-alex-0.1-lin-[-1,1]"


@contextlib.contextmanager
def _deadline(seconds: int = 60):
    def fire(*_):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _run(capfd, *args) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    with _deadline():
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
    out, err = capfd.readouterr()
    return code, out, err, time.perf_counter() - t0


def _images(folder: Path, n: int = 3, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(folder / f"img{i}.png")
    return folder


@pytest.fixture(scope="module")
def model():
    from lpips_core import metric_registry

    return metric_registry.build("lpips", "alex", version="0.1", lin=True, device="cpu")


@pytest.fixture()
def hostile(tmp_path):
    """Three images and, beside them, a FIFO, a link to /dev/zero and a 700 MB sparse file."""
    d = _images(tmp_path / "d")
    os.mkfifo(d / "pipe.png")
    os.symlink("/dev/zero", d / "z.png")
    with open(d / "big.png", "wb") as fh:
        fh.truncate(700 * 2**20)  # sparse: 700 MB by its size, nothing on disk
    return d


# --------------------------------------------------------------------------- rows 1-3: the reader
def test_the_reader_refuses_a_fifo_a_device_link_and_an_oversized_file_unread(hostile):
    cases = {"pipe.png": ("special", "named pipe"), "z.png": ("special", "character device"),
             "big.png": ("too_large", "700 MiB")}
    for name, (kind, words) in cases.items():
        t0 = time.perf_counter()
        with _deadline(10), pytest.raises(files.UnsafeFile) as info:
            files.read_bytes(hostile / name, max_bytes=512 * 2**20)
        assert info.value.kind == kind and words in str(info.value)
        assert time.perf_counter() - t0 < 1.0
    assert files.read_bytes(hostile / "img0.png", max_bytes=1 << 20)[:4] == b"\x89PNG"
    with pytest.raises(files.UnsafeFile, match="more than the 100 bytes"):
        files.read_bytes(hostile / "img0.png", max_bytes=100)


@pytest.mark.parametrize("command", ["diversity", "neighbours", "embed"])
def test_space_commands_skip_a_fifo_a_dev_zero_link_and_a_700_mb_file_with_their_reasons(
        command, hostile, tmp_path, capfd):
    """Rows 1-3: before, ``diversity``/``neighbours``/``embed`` hung on the FIFO, read /dev/zero
    until memory ran out and read the 700 MB file whole; now each is a skipped image with its
    reason, and the three real images are embedded."""
    args = {"diversity": ["diversity", hostile, "--json"],
            "neighbours": ["neighbours", hostile, hostile, "--k", "1", "--json"],
            "embed": ["embed", hostile, tmp_path / "out", "--json"]}[command]
    code, out, err, seconds = _run(capfd, *args, "--net", "alex") if command != "diversity" else \
        _run(capfd, *args, "--metrics", "lpips")
    assert code == 0, err
    got = json.loads(out)
    if command == "diversity":
        skipped = got["config"]["skipped_images"]
        assert got["config"]["images"] == 3 and got["skipped"] == 3
    elif command == "neighbours":
        skipped = got["config"]["skipped"]["pool"]
        assert got["config"]["pool"] == 3
    else:
        skipped = got["skipped"]
        assert got["count"] == 3
    reasons = {s["name"]: s["error"] for s in skipped}
    assert set(reasons) == {"big.png", "pipe.png", "z.png"}
    assert "named pipe (FIFO)" in reasons["pipe.png"]
    assert "character device" in reasons["z.png"]
    assert "700 MiB" in reasons["big.png"] and "512 MiB" in reasons["big.png"]
    assert seconds < 30  # the skips take milliseconds; the rest is the model and three forwards


def test_a_fifo_argument_to_compare_is_a_one_line_refusal(hostile, capfd):
    code, out, err, seconds = _run(capfd, "compare", hostile / "img0.png", hostile / "pipe.png")
    assert code == 2 and "named pipe" in err and len(err.strip().splitlines()) == 1 and seconds < 10


# --------------------------------------------------------------------------- rows 4-5: checked format
@pytest.fixture()
def emb_dir(tmp_path, model):
    d = _images(tmp_path / "imgs", n=6, seed=1)
    out = tmp_path / "emb"
    space.embed(model, d, out=out)
    return out


def _manifest(out: Path) -> dict:
    return json.loads((out / "embedding-00000-of-00001.json").read_text())


def _save_manifest(out: Path, m: dict) -> None:
    (out / "embedding-00000-of-00001.json").write_text(json.dumps(m))


def _rewrite_npy(out: Path, key: str, array: np.ndarray, m: dict | None = None) -> dict:
    """Replace an array file and record its new digest, as a careful editor would."""
    m = m or _manifest(out)
    buf = io.BytesIO()
    np.save(buf, array)
    data = buf.getvalue()
    (out / m[key]["file"]).write_bytes(data)
    m[key]["sha256"] = hashlib.sha256(data).hexdigest()
    _save_manifest(out, m)
    return m


def test_a_valid_embedding_records_each_array_file_and_opens(emb_dir):
    m = _manifest(emb_dir)
    assert m["format"] == space.FORMAT
    for key, dtype, shape in (("phi", "float32", [6, m["dim"]]), ("norms", "float64", [6])):
        rec = m[key]
        assert rec["dtype"] == dtype and rec["shape"] == shape
        assert rec["sha256"] == hashlib.sha256((emb_dir / rec["file"]).read_bytes()).hexdigest()
    emb = space.open_embedding(emb_dir)
    assert len(emb) == 6 and emb.spec_name == SPEC
    assert not [p for p in emb_dir.iterdir() if p.name.startswith(".")]  # no temporary left


@pytest.mark.parametrize("which", ["manifest", "phi", "norms"])
def test_a_fifo_in_an_embedding_folder_is_refused_not_waited_on(emb_dir, which, capfd):
    """Row 4: before, a FIFO as the manifest, φ or norms file hung ``neighbours``/``diversity``."""
    m = _manifest(emb_dir)
    name = {"manifest": "embedding-00000-of-00001.json", "phi": m["phi"]["file"], "norms": m["norms"]["file"]}[which]
    (emb_dir / name).unlink()
    os.mkfifo(emb_dir / name)
    code, out, err, seconds = _run(capfd, "diversity", emb_dir)
    assert code == 2 and "named pipe (FIFO)" in err and name in err
    assert len(err.strip().splitlines()) == 1 and seconds < 5


def _edit_layout(out):
    m = _manifest(out)
    m["layout"] = [["conv1", 1, 10, 10]]  # cut to 100 dims
    _save_manifest(out, m)


def _edit_norm_plus_5(out):
    m = _manifest(out)
    n = np.load(out / m["norms"]["file"])
    n[2] += 5
    _rewrite_npy(out, "norms", n, m)


def _edit_norms_negative(out):
    m = _manifest(out)
    _rewrite_npy(out, "norms", -np.load(out / m["norms"]["file"]), m)


def _edit_norms_unrecorded(out):  # the file changed, the digest not
    m = _manifest(out)
    n = np.load(out / m["norms"]["file"])
    n[0] += 5
    np.save(out / m["norms"]["file"], n)


def _edit_phi_int8(out):
    m = _manifest(out)
    phi = np.load(out / m["phi"]["file"])
    _rewrite_npy(out, "phi", (phi * 100).astype(np.int8), m)


def _edit_phi_value(value):
    def edit(out):
        m = _manifest(out)
        phi = np.array(np.load(out / m["phi"]["file"]))
        phi[3, 7] = value
        _rewrite_npy(out, "phi", phi, m)
    return edit


def _edit_contents_equal(out):
    m = _manifest(out)
    for f in m["files"]:
        f["content"] = m["files"][0]["content"]
    _save_manifest(out, m)


def _edit_phi_file(name):
    def edit(out):
        m = _manifest(out)
        m["phi"]["file"] = name(out) if callable(name) else name
        _save_manifest(out, m)
    return edit


def _edit_files_cut(out):
    m = _manifest(out)
    m["files"] = m["files"][:3]
    _save_manifest(out, m)


def _edit_files_and_count_cut(out):
    m = _manifest(out)
    m["files"], m["count"] = m["files"][:3], 3
    _save_manifest(out, m)


EDITS = {
    "layout cut to 100 dims": (_edit_layout, "dim is"),
    "one norm +5 (digest updated)": (_edit_norm_plus_5, "norm 2 is"),
    "negative norms (digest updated)": (_edit_norms_negative, "negative or not finite"),
    "norms edited, digest not": (_edit_norms_unrecorded, "SHA-256"),
    "int8 phi (digest updated)": (_edit_phi_int8, "float32"),
    "inf in one row (digest updated)": (_edit_phi_value(np.inf), "row 3"),
    "NaN in one row (digest updated)": (_edit_phi_value(np.nan), "not finite"),
    "every content digest equal": (_edit_contents_equal, "identical pixels give identical rows"),
    "phi.file = ../../x.npy": (_edit_phi_file("../../x.npy"), "array files live in the folder"),
    "phi.file absolute": (_edit_phi_file(lambda out: str(out.parent / "x.npy")), "array files live in the folder"),
    "files cut to 3 of 6": (_edit_files_cut, "files lists 3 images, count says 6"),
    "files and count cut to 3": (_edit_files_and_count_cut, "do not make the 6 images"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_embedding_is_a_one_line_refusal_never_a_number(edit, emb_dir, capfd):
    """Row 5: before, each edit gave exit 0 with wrong numbers (a mean of 0.9715 for 0.6763, an
    interval below zero, every distance 0, a false copy at 0.0, NaN with nonfinite 0, a .npy
    from outside the folder, rows dropped); now each is refused naming the file and the check."""
    shutil.copy(emb_dir / _manifest(emb_dir)["phi"]["file"], emb_dir.parent / "x.npy")
    fn, words = EDITS[edit]
    fn(emb_dir)
    with pytest.raises(ValueError, match=None) as info:
        space.open_embedding(emb_dir)
    assert words in str(info.value) and "\n" not in str(info.value)
    code, out, err, _ = _run(capfd, "diversity", emb_dir, "--json")
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_shards_of_other_versions_are_not_joined(tmp_path, model):
    d = _images(tmp_path / "imgs", n=4, seed=2)
    out = tmp_path / "emb"
    for i in range(2):
        space.embed(model, d, out=out, shard=(i, 2))
    path = out / "embedding-00001-of-00002.json"
    m = json.loads(path.read_text())
    m["versions"] = dict(m["versions"], torch="0.0.1")
    path.write_text(json.dumps(m))
    with pytest.raises(ValueError, match="differ in versions"):
        space.open_embedding(out)


# --------------------------------------------------------------------------- row 7: the writer
def test_embed_never_writes_through_a_link_or_over_a_shard(tmp_path, capfd):
    """Row 7: before, ``embed`` overwrote the link's target (and a plain existing shard)."""
    d = _images(tmp_path / "imgs")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, out / "phi-00000-of-00001.npy")
    code, _, err, _ = _run(capfd, "embed", d, out, "--net", "alex")
    assert code == 2 and "symbolic link" in err and victim.read_text() == "keep me"
    (out / "phi-00000-of-00001.npy").unlink()
    (out / "norms-00000-of-00001.npy").write_bytes(b"mine")
    code, _, err, _ = _run(capfd, "embed", d, out, "--net", "alex")
    assert code == 2 and "exists" in err and (out / "norms-00000-of-00001.npy").read_bytes() == b"mine"
    os.mkfifo(out / "embedding-00000-of-00001.json")
    (out / "norms-00000-of-00001.npy").unlink()
    code, _, err, seconds = _run(capfd, "embed", d, out, "--net", "alex")
    assert code == 2 and "named pipe" in err and seconds < 5


def test_diversity_matrix_refuses_an_existing_file_a_link_and_a_fifo(tmp_path, capfd):
    d = _images(tmp_path / "imgs")
    existing = tmp_path / "d.npy"
    existing.write_bytes(b"precious")
    code, _, err, _ = _run(capfd, "diversity", d, "--matrix", existing)
    assert code == 2 and "exists" in err and existing.read_bytes() == b"precious"
    link = tmp_path / "link.npy"
    os.symlink(existing, link)
    code, _, err, _ = _run(capfd, "diversity", d, "--matrix", link)
    assert code == 2 and "symbolic link" in err and existing.read_bytes() == b"precious"
    os.mkfifo(tmp_path / "pipe.npy")
    code, _, err, seconds = _run(capfd, "diversity", d, "--matrix", tmp_path / "pipe.npy")
    assert code == 2 and "named pipe" in err and seconds < 5
    code, _, err, _ = _run(capfd, "diversity", d, "--matrix", tmp_path / "new.npy")
    assert code == 0, err
    assert np.load(tmp_path / "new.npy").shape == (3, 3)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_a_run_stopped_half_way_leaves_nothing_under_a_final_name(tmp_path, model):
    """A kill mid-embed (here an exception from the progress callback after the first image)
    leaves no shard file under its final name and no temporary behind."""
    d = _images(tmp_path / "imgs", n=4)
    out = tmp_path / "out"

    def stop(done, total):
        if done >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        space.embed(model, d, out=out, progress=stop, threads=1)
    assert sorted(p.name for p in out.iterdir()) == []
    emb = space.embed(model, d, out=out)  # and the same folder then takes the shard
    assert len(emb) == 4 and len(space.open_embedding(out)) == 4


def test_published_refuses_a_name_taken_while_writing(tmp_path):
    target = tmp_path / "r.bin"
    with pytest.raises(files.UnsafeFile, match="appeared while"):
        with files.published(target) as tmp:
            tmp.write_bytes(b"ours")
            target.write_bytes(b"theirs")
    assert target.read_bytes() == b"theirs" and [p.name for p in tmp_path.iterdir()] == ["r.bin"]
