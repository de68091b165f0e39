"""An embedding: φ of a set of images in blocks, and the checked format it is stored in.

:class:`Embedding` holds ``(N, D)`` float32 rows, in memory or in ``.npy`` memmaps (one block per
shard), with their names, norms, content digests and manifest. On disk a shard ``I`` of ``N`` is
``phi-I-of-N.npy`` (float32), ``norms-I-of-N.npy`` (float64) and ``embedding-I-of-N.json``, the
manifest in format :data:`FORMAT` (configuration, input size, versions, weights provenance, file
list and digests); :func:`open_embedding` joins the shards of a folder, checking every file
before a number comes out of it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import files
from .euclidean import EmbeddingLayout

__all__ = ["FORMAT", "MAX_MANIFEST_BYTES", "Embedding", "is_embedding_dir", "open_embedding"]

FORMAT = "lpips-space-embedding/2"
_MANIFEST = re.compile(r"^embedding-(\d{5})-of-(\d{5})\.json$")


@dataclass
class Embedding:
    """φ of a set of images, in memory or in ``.npy`` memmaps (one block per shard), and what made it.

    Attributes:
        names: the images' names (relative to their folder, sorted), one per row.
        blocks: ``(first row, array (rows, D) float32)`` per shard, in row order.
        norms: ``(N,)`` float64, ``‖φ_i‖²`` accumulated in float64 from the stored float32 rows.
        content: per row a digest of the decoded image (equal digests: identical pixels).
        layout: :class:`EmbeddingLayout`.
        manifest: configuration, input size, versions, weights, files and digests, skipped files.
        skipped: ``[{"name", "error"}]`` for files that could not be read (no row).
    """

    names: list[str]
    blocks: list[tuple[int, np.ndarray]]
    norms: np.ndarray
    content: list[str]
    layout: EmbeddingLayout
    manifest: dict
    skipped: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def dim(self) -> int:
        return self.layout.dim

    @property
    def nbytes(self) -> int:
        return len(self.names) * self.dim * 4

    @property
    def spec_name(self) -> str:
        return self.manifest["config"]["spec"]

    def rows(self, i0: int, i1: int, k0: int = 0, k1: int | None = None) -> np.ndarray:
        """Rows ``[i0, i1)``, columns ``[k0, k1)`` as one C-contiguous float32 array (read from disk)."""
        k1 = self.dim if k1 is None else k1
        out = np.empty((i1 - i0, k1 - k0), dtype=np.float32)
        for start, arr in self.blocks:
            lo, hi = max(i0, start), min(i1, start + arr.shape[0])
            if lo < hi:
                out[lo - i0:hi - i0] = arr[lo - start:hi - start, k0:k1]
        return out

    def _view(self, i0: int, i1: int, k0: int, k1: int) -> np.ndarray:
        """Rows ``[i0, i1)``, columns ``[k0, k1)``: a (strided) view when one in-memory block holds
        them, else :meth:`rows`'s copy. For a reader that converts anyway (a float64 GEMM)."""
        for start, arr in self.blocks:
            if type(arr) is np.ndarray and start <= i0 and i1 <= start + arr.shape[0]:
                return arr[i0 - start:i1 - start, k0:k1]
        return self.rows(i0, i1, k0, k1)

    def take(self, indices: Sequence[int]) -> np.ndarray:
        """Whole rows at ``indices`` ``(len, D)`` float32."""
        out = np.empty((len(indices), self.dim), dtype=np.float32)
        for r, i in enumerate(indices):
            out[r] = self.rows(int(i), int(i) + 1)[0]
        return out

    def canonical(self) -> np.ndarray:
        """Per row the first row with the same decoded pixels (itself when unique)."""
        first: dict[str, int] = {}
        return np.array([first.setdefault(c, i) for i, c in enumerate(self.content)], dtype=np.int64)

    def compatible(self, other: "Embedding") -> None:
        """Raise ``ValueError`` unless ``other`` was made under the same configuration and input size."""
        a, b = self.manifest, other.manifest
        for key in ("config", "input_size", "layout"):
            if a.get(key) != b.get(key):
                raise ValueError(f"the embeddings differ in {key}: {a.get(key)} and {b.get(key)}; "
                                 "compare images embedded under one configuration and size")

def is_embedding_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding embedding manifests (``embedding-I-of-N.json``)."""
    p = Path(path)
    return p.is_dir() and any(_MANIFEST.match(f.name) for f in p.iterdir())


MAX_MANIFEST_BYTES = 256 * 2**20
"""Largest embedding manifest read (256 MiB: about a million images' file records)."""

_SHARED_KEYS = ("format", "config", "input_size", "layout", "dim", "names_digest", "images_total", "model",
                "versions")
"""What every shard of one embedding must agree on (configuration, size, weights, package versions)."""


def open_embedding(path: str | os.PathLike[str]) -> Embedding:
    """The embedding in folder ``path``: all its shards, joined in row order (memmaps, read lazily).

    Every file is read through :mod:`lpips_core.files` (regular files only, size-capped) and
    checked before a number comes out of it: each manifest's shape and counts; each array file
    named in it (a plain name inside the folder), its dtype, shape and SHA-256; every φ value
    finite; every norm finite, ``≥ 0`` and equal to its row's ``‖φ‖²``; rows with one content
    digest (identical pixels) bitwise equal; the shards of one configuration, size, weights and
    package versions, tiling the image list.

    Raises:
        ValueError: no manifest, a missing shard, or any check above, in one line naming the
            file and the check.
    """
    root = Path(path)
    found = sorted((int(m.group(1)), int(m.group(2)), f) for f in root.iterdir() if (m := _MANIFEST.match(f.name)))
    if not found:
        raise ValueError(f"{str(path)!r} holds no embedding (embedding-I-of-N.json files)")
    counts = {n for _, n, _ in found}
    if len(counts) != 1:
        raise ValueError(f"{str(path)!r} mixes shard counts {sorted(counts)}")
    n_shards = counts.pop()
    have = [i for i, _, _ in found]
    missing = sorted(set(range(n_shards)) - set(have))
    if missing:
        raise ValueError(f"{str(path)!r} lacks shard(s) {missing} of {n_shards}: run embed --shard i/{n_shards} "
                         "for each")
    if len(have) != len(set(have)) or max(have) >= n_shards:
        raise ValueError(f"{str(path)!r} holds shards outside 0…{n_shards - 1} or twice")
    manifests = [_read_manifest(f, i, n_shards) for i, _, f in found]
    first = manifests[0]
    for (_, _, f), m in zip(found[1:], manifests[1:]):
        for key in _SHARED_KEYS:
            if m.get(key) != first.get(key):
                raise ValueError(f"the shards in {str(path)!r} differ in {key} ({f.name} against {found[0][2].name}): "
                                 "not one embedding; embed every shard with one configuration and one install")
    total = first["images_total"]
    names, content, blocks, norms, skipped = [], [], [], [], []
    for (i, _, f), m in zip(found, manifests):
        lo, hi = m["rows"]
        if [lo, hi] != [i * total // n_shards, (i + 1) * total // n_shards]:
            raise ValueError(f"{f}: rows {m['rows']} are not slice {i} of {n_shards} of {total} images")
        arr, norm = _load_arrays(root, f, m)
        blocks.append((len(names), arr))
        names += [x["name"] for x in m["files"]]
        content += [x["content"] for x in m["files"]]
        norms.append(norm)
        skipped += m["skipped"]
    if len(set(names)) != len(names):
        raise ValueError(f"{str(path)!r}: an image name appears in more than one row")
    manifest = {k: v for k, v in first.items() if k not in ("files", "rows", "shard", "count", "phi", "norms",
                                                             "skipped")}
    manifest.update(shards=n_shards, count=len(names), folder=str(root))
    layout = EmbeddingLayout(tuple(tuple(x) for x in first["layout"]))
    return Embedding(names, blocks, np.concatenate(norms), content, layout, manifest, skipped)


def _nat(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_int(name: str, value, minimum: int, what: str) -> int:
    """``value`` as an ``int`` ``≥ minimum``, else one line naming the argument and what it is.

    Raises:
        TypeError: not an integer. ValueError: a bool, or below ``minimum``.
    """
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer ≥ {minimum} ({what}), got {value!r}")
    if isinstance(value, (bool, np.bool_)) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum} ({what}), got {value!r}")
    return int(value)


def _read_manifest(f: Path, shard: int, n_shards: int) -> dict:
    """One shard's manifest, read through the one reader and checked to have the shape
    :func:`embed` writes (counts agreeing with each other and with the file's name)."""
    try:
        m = json.loads(files.read_text(f, max_bytes=MAX_MANIFEST_BYTES))
    except files.UnsafeFile as exc:
        raise ValueError(f"the embedding manifest {exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{f} is not UTF-8 text: not an embedding manifest") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{f} is not JSON ({str(exc)[:80]})") from None
    except OSError as exc:
        raise ValueError(f"{f} cannot be read ({exc.strerror or type(exc).__name__})") from None
    problem = _manifest_problem(m, shard, n_shards)
    if problem:
        raise ValueError(f"{f} is not a valid embedding manifest: {problem}")
    return m


def _spec_layout_problem(m: dict) -> str | None:
    """What is wrong with a manifest's ``config.spec`` and ``layout`` (``[[name, C, H, W], ...]``,
    every side positive), or ``None``: the part an embedding's and a pool's manifests share."""
    if not isinstance(m.get("config"), dict) or not isinstance(m["config"].get("spec"), str):
        return "config.spec is missing"
    layout = m.get("layout")
    if not (isinstance(layout, list) and layout and all(
            isinstance(x, list) and len(x) == 4 and isinstance(x[0], str) and all(_nat(v) and v > 0 for v in x[1:])
            for x in layout)):
        return "layout is not a list of [name, C, H, W]"
    return None


def _manifest_problem(m, shard: int, n_shards: int) -> str | None:
    if not isinstance(m, dict):
        return "it is not a JSON object"
    if m.get("format") != FORMAT:
        if isinstance(m.get("format"), str) and m["format"].startswith("lpips-space-embedding/"):
            return f"its format is {m['format']!r}, this version reads {FORMAT!r}: embed the images again"
        return f"format {str(m.get('format'))[:40]!r} is not {FORMAT!r}"
    problem = _spec_layout_problem(m)
    if problem:
        return problem
    dim = sum(c * h * w for _, c, h, w in m["layout"])
    if m.get("dim") != dim:
        return f"dim is {str(m.get('dim'))[:20]}, its layout gives {dim}"
    if m.get("shard") != [shard, n_shards]:
        return f"shard is {str(m.get('shard'))[:40]}, its file name says [{shard}, {n_shards}]"
    total, rows, count = m.get("images_total"), m.get("rows"), m.get("count")
    if not _nat(total) or not (isinstance(rows, list) and len(rows) == 2 and all(_nat(v) for v in rows)
                               and rows[0] <= rows[1] <= total):
        return "images_total or rows is not a count"
    if not _nat(count):
        return "count is not a count"
    fl, sk = m.get("files"), m.get("skipped")
    if not isinstance(fl, list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                           and isinstance(x.get("content"), str) for x in fl):
        return "files is not a list of {name, content}"
    if not isinstance(sk, list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in sk):
        return "skipped is not a list of {name, error}"
    if len(fl) != count:
        return f"files lists {len(fl)} images, count says {count}"
    if count + len(sk) != rows[1] - rows[0]:
        return (f"{count} rows and {len(sk)} skipped images do not make the {rows[1] - rows[0]} images of rows "
                f"{rows}")
    if not isinstance(m.get("names_digest"), str) or not isinstance(m.get("input_size"), list):
        return "names_digest or input_size is missing"
    tag = f"{shard:05d}-of-{n_shards:05d}"
    for key, name, dtype, shape in (("phi", f"phi-{tag}.npy", "float32", [count, dim]),
                                    ("norms", f"norms-{tag}.npy", "float64", [count])):
        rec = m.get(key)
        if not isinstance(rec, dict):
            return f"{key} is not a record of its array file"
        if rec.get("file") != name:
            return f"{key}.file is {str(rec.get('file'))[:60]!r}, not {name!r} (array files live in the folder)"
        if rec.get("dtype") != dtype:
            return f"{key}.dtype is {str(rec.get('dtype'))[:20]!r}, not {dtype!r}"
        if rec.get("shape") != shape:
            return f"{key}.shape is {str(rec.get('shape'))[:40]}, the manifest's counts give {shape}"
        if not (isinstance(rec.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", rec["sha256"])):
            return f"{key}.sha256 is not a SHA-256 digest"
    return None


def _load_arrays(root: Path, manifest_file: Path, m: dict) -> tuple[np.ndarray, np.ndarray]:
    """A shard's φ (a read-only memmap) and norms, read through the one reader and checked against
    the manifest (dtype, shape, SHA-256) and each other, in one pass over φ."""
    count, dim = m["phi"]["shape"]
    phi_file, norms_file = root / m["phi"]["file"], root / m["norms"]["file"]
    where = f"{phi_file}"
    try:
        norms_bytes = files.read_bytes(norms_file, max_bytes=count * 8 + 4096)
        fh = files.open_regular(phi_file, max_bytes=count * dim * 4 + 4096)
    except files.UnsafeFile as exc:
        raise ValueError(f"the embedding's array file {exc}") from None
    except OSError as exc:
        raise ValueError(f"the embedding's array file {exc.filename} cannot be read "
                         f"({exc.strerror or type(exc).__name__})") from None
    if hashlib.sha256(norms_bytes).hexdigest() != m["norms"]["sha256"]:
        raise ValueError(f"{norms_file}: its SHA-256 is not the one its manifest records (the file was changed)")
    try:
        stored = np.load(io.BytesIO(norms_bytes), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{norms_file} is not a .npy array ({str(exc)[:80]})") from None
    if stored.dtype != np.float64 or stored.shape != (count,):
        raise ValueError(f"{norms_file} holds {stored.dtype} {stored.shape}, its manifest says float64 ({count},)")
    if not np.isfinite(stored).all() or (stored < 0).any():
        raise ValueError(f"{norms_file}: a norm is negative or not finite (a squared length is ≥ 0)")
    with fh:
        try:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f".npy format version {version}")
            shape, fortran, dtype = read_header(fh)
        except (ValueError, OSError, EOFError) as exc:
            raise ValueError(f"{where} is not a .npy array ({str(exc)[:80]})") from None
        if dtype != np.dtype("<f4") or fortran or tuple(shape) != (count, dim):
            raise ValueError(f"{where} holds {dtype} {shape}{' (Fortran order)' if fortran else ''}, its manifest "
                             f"says float32 {(count, dim)}")
        offset = fh.tell()
        if os.fstat(fh.fileno()).st_size != offset + count * dim * 4:
            raise ValueError(f"{where} is {os.fstat(fh.fileno()).st_size:,} bytes, not the header and {count} rows "
                             "its manifest says")
        fh.seek(0)
        h = hashlib.sha256(fh.read(offset))
        norms = np.empty(count, dtype=np.float64)
        row_digest: list[bytes] = []
        rows = max(1, (32 << 20) // max(1, dim * 4))
        for r0 in range(0, count, rows):
            r1 = min(count, r0 + rows)
            buf = fh.read((r1 - r0) * dim * 4)
            h.update(buf)
            x = np.frombuffer(buf, dtype="<f4").reshape(r1 - r0, dim)
            if not np.isfinite(x).all():
                bad = r0 + int(np.nonzero(~np.isfinite(x).all(1))[0][0])
                raise ValueError(f"{where}: row {bad} ({m['files'][bad]['name']!r}) holds a value that is not finite")
            x64 = x.astype(np.float64)
            norms[r0:r1] = np.einsum("ij,ij->i", x64, x64)
            row_digest += [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in x]
        if h.hexdigest() != m["phi"]["sha256"]:
            raise ValueError(f"{where}: its SHA-256 is not the one its manifest records (the file was changed)")
        if not np.allclose(stored, norms, rtol=1e-9, atol=1e-12):
            bad = int(np.nonzero(~np.isclose(stored, norms, rtol=1e-9, atol=1e-12))[0][0])
            raise ValueError(f"{norms_file}: norm {bad} is {float(stored[bad])!r}, but ‖φ‖² of its row is "
                             f"{float(norms[bad])!r}")
        first: dict[str, bytes] = {}
        for i, rec in enumerate(m["files"]):
            if first.setdefault(rec["content"], row_digest[i]) != row_digest[i]:
                raise ValueError(f"{manifest_file}: {rec['name']!r} has the content digest of an earlier image but "
                                 "other embedding values (identical pixels give identical rows)")
        arr = np.memmap(fh, dtype=np.float32, mode="r", offset=offset, shape=(count, dim))
    return arr, stored
