"""The hostile-safe zip guard (lpips_core.datasets.archive): zip-slip, links, bombs, lying headers."""

from __future__ import annotations

import io
import stat
import struct
import zipfile
import zlib

import pytest

from lpips_core.datasets.archive import ArchiveRefused, dataset_folders, extract_zip, member_path


def _zip(members: dict[str, bytes], *, modes: dict[str, int] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if modes and name in modes:
                info.external_attr = modes[name] << 16
            zf.writestr(info, data)
    return buf.getvalue()


def _raw_zip(name: str, payload: bytes, declared: int, *, crc_of: int | None = None) -> bytes:
    """A one-member zip written by hand: raw-deflated ``payload`` whose headers declare ``declared``
    uncompressed bytes, and the CRC-32 of ``payload[:crc_of]`` (default: all of it)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = comp.compress(payload) + comp.flush()
    crc = zlib.crc32(payload[:crc_of])
    fname = name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), declared, len(fname), 0)
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), declared,
                          len(fname), 0, 0, 0, 0, 0, 0)
    body = local + fname + data
    cd = central + fname
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(cd), len(body), 0)
    return body + cd + end


def _left(tmp_path):
    return sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))


def test_extracts_a_plain_dataset_into_a_temp_folder(tmp_path):
    data = _zip({"set/ref/a.png": b"A" * 10, "set/m1/a.png": b"B" * 20, "set/": b"", "__MACOSX/set/._a.png": b"x"})
    out = extract_zip(data)
    try:
        assert out.files == ("set/ref/a.png", "set/m1/a.png")
        assert out.total_bytes == 30
        assert (out.root / "set/m1/a.png").read_bytes() == b"B" * 20
        assert not (out.root / "__MACOSX").exists()
        base, dirs = dataset_folders(out.root)
        assert base == out.root / "set" and [d.name for d in dirs] == ["m1", "ref"]
    finally:
        import shutil
        shutil.rmtree(out.root)


@pytest.mark.parametrize("name", ["../evil.png", "ok/../../evil.png", "/etc/evil.png", "\\evil.png",
                                  "C:/evil.png", "a/C:evil.png", "..\\..\\evil.png"])
def test_refuses_zip_slip_absolute_and_drive_names(tmp_path, name):
    data = _zip({"ref/a.png": b"fine", name: b"evil"})
    with pytest.raises(ArchiveRefused, match="climbs out|absolute|drive"):
        extract_zip(data, tmp_path)
    assert _left(tmp_path) == []  # refused before anything was written
    assert not (tmp_path.parent / "evil.png").exists()


def test_refuses_a_symlink_member(tmp_path):
    data = _zip({"ref/a.png": b"fine", "ref/link.png": b"/etc/passwd"},
                modes={"ref/link.png": stat.S_IFLNK | 0o777})
    with pytest.raises(ArchiveRefused, match=r"member .ref/link.png. is a symbolic link"):
        extract_zip(data, tmp_path)
    assert _left(tmp_path) == []


def test_refuses_a_fifo_member(tmp_path):
    data = _zip({"ref/p": b""}, modes={"ref/p": stat.S_IFIFO | 0o644})
    with pytest.raises(ArchiveRefused, match="special file"):
        extract_zip(data, tmp_path)


def test_refuses_a_zip_bomb_before_extraction(tmp_path):
    """64 MiB of zeros deflate to ~64 KiB: the declared size is over the cap, nothing is written."""
    bomb = _zip({"ref/a.png": b"fine", "m/bomb.png": bytes(64 * 2**20)})
    assert len(bomb) < 200_000
    with pytest.raises(ArchiveRefused, match=r"expands to 67108868 bytes, more than the 16777216 allowed"):
        extract_zip(bomb, tmp_path, max_bytes=16 * 2**20)
    assert _left(tmp_path) == []


def test_refuses_a_bomb_whose_header_lies_about_its_size(tmp_path):
    """The headers declare 1000 bytes; the deflate stream holds 32 MiB of zeros (CRC of all of it)."""
    bomb = _raw_zip("m/bomb.png", bytes(32 * 2**20), 1000)
    assert zipfile.ZipFile(io.BytesIO(bomb)).infolist()[0].file_size == 1000
    with pytest.raises(ArchiveRefused, match="damaged.*Bad CRC-32"):
        extract_zip(bomb, tmp_path, max_bytes=10_000)
    assert _left(tmp_path) == []


def test_a_lying_header_with_a_matching_crc_yields_only_its_declared_bytes(tmp_path):
    """Even a CRC forged for the first 1000 bytes gains the bomb nothing: 1000 bytes are written."""
    out = extract_zip(_raw_zip("m/bomb.png", bytes(32 * 2**20), 1000, crc_of=1000), tmp_path, max_bytes=10_000)
    assert out.total_bytes == 1000 and (tmp_path / "m/bomb.png").stat().st_size == 1000


def test_counts_members_and_bytes_against_the_caps(tmp_path):
    data = _zip({f"ref/{i}.png": b"x" for i in range(11)})
    with pytest.raises(ArchiveRefused, match="11 members, more than the 10 allowed"):
        extract_zip(data, tmp_path, max_members=10)
    assert extract_zip(data, tmp_path, max_members=11).total_bytes == 11


def test_refuses_duplicates_encryption_and_non_zips(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ref/a.png", b"1")
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("ref/a.png", b"2")
    with pytest.raises(ArchiveRefused, match="more than once"):
        extract_zip(buf.getvalue(), tmp_path)
    with pytest.raises(ArchiveRefused, match="not a readable zip"):
        extract_zip(b"PNG not a zip", tmp_path)
    enc = bytearray(_zip({"ref/a.png": b"x"}))
    enc[6] |= 1  # general-purpose flag bit 0 (encrypted) in the local header ...
    enc[enc.index(b"PK\x01\x02") + 8] |= 1  # ... and in the central directory
    with pytest.raises(ArchiveRefused, match="encrypted"):
        extract_zip(bytes(enc), tmp_path)


def test_bad_arguments(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(ValueError, match="empty folder"):
        extract_zip(_zip({"a.png": b"1"}), tmp_path)
    with pytest.raises(ValueError, match="max_bytes must be an integer >= 0, got -1"):
        extract_zip(b"", max_bytes=-1)
    with pytest.raises(TypeError, match="must be a str"):
        member_path(3)
    assert member_path("a/./b//c.png").as_posix() == "a/b/c.png"
    assert member_path("./") is None and member_path("dir/").as_posix() == "dir"
