"""Which images to compare: two folders matched by name, all pairs in one folder, one reference.

Every function returns a :class:`Discovery`: the pairs in a deterministic order (sorted by
``key``) plus everything it did *not* pair, so nothing is ever dropped silently:

- ``only_reference`` / ``only_test``: files whose name (relative path without extension) has no
  partner in the other folder;
- ``duplicates``: names that more than one file on a side claims (``cat.png`` and ``cat.jpg``):
  ambiguous, so none of them is paired;
- ``ignored``: files that are not images by their extension (:data:`IMAGE_EXTENSIONS`), hidden
  files included.

A pair's two sides are named by their role: ``reference`` (the ground truth) and ``test`` (the
image under test, a method's output); all pairs of one folder (diversity) have no roles, and
there ``reference`` is the pair's first image in name order and ``test`` the second. Paths in rows
are relative to their folder, with ``/`` separators, so a table written on one machine merges
with one written on another (see :mod:`lpips_core.datasets.store`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "IMAGE_EXTENSIONS",
    "Discovery",
    "Pair",
    "all_pairs",
    "MAX_ALL_PAIRS",
    "check_pair_count",
    "folder_pixels",
    "match_folders",
    "names_digest",
    "pairs_digest",
    "reference_pairs",
    "shard_bounds",
]

IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm", ".pnm", ".tga"}
)
"""File extensions (lower case) treated as images; every other file is reported as ``ignored``."""


@dataclass(frozen=True)
class Pair:
    """One pair to score.

    Attributes:
        key: the pair's name, unique within a discovery, and its sort key (folders: the
            relative path without extension; all pairs: ``"first|second"``).
        reference, test: the files' paths: the reference (ground truth) and the test image (all
            pairs: the first and second image in name order).
        reference_name, test_name: the paths relative to their folder, ``/``-separated (what
            rows show).
    """

    key: str
    reference: str
    test: str
    reference_name: str
    test_name: str


@dataclass(frozen=True)
class Discovery:
    """Pairs in ``key`` order, and every file that was not paired, with why.

    Attributes:
        pairs: the pairs, sorted by ``key``.
        only_reference, only_test: relative paths of files with no partner in the other folder.
        duplicates: ``(name, reference files, test files)`` for names claimed by several files of a side.
        ignored: relative paths (``"reference:"``/``"test:"`` prefixed for two folders) of non-image files.
        mode: ``"folders"``, ``"all-pairs"`` or ``"reference"``.
        total: for ``"all-pairs"``, how many pairs exist before sampling; else ``len(pairs)``.
    """

    pairs: tuple[Pair, ...]
    only_reference: tuple[str, ...] = ()
    only_test: tuple[str, ...] = ()
    duplicates: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    ignored: tuple[str, ...] = ()
    mode: str = "folders"
    total: int = 0
    source: dict = field(default_factory=dict)

    def report(self) -> dict:
        """Plain counts and lists for a manifest or ``--json`` (file lists capped at 20 each)."""
        cap = 20
        return {
            "mode": self.mode,
            "pairs": len(self.pairs),
            "total": self.total,
            "only_reference": len(self.only_reference),
            "only_test": len(self.only_test),
            "duplicates": len(self.duplicates),
            "ignored": len(self.ignored),
            "examples": {
                "only_reference": list(self.only_reference[:cap]),
                "only_test": list(self.only_test[:cap]),
                "duplicates": [[stem, list(fa), list(fb)] for stem, fa, fb in self.duplicates[:cap]],
                "ignored": list(self.ignored[:cap]),
            },
            **self.source,
        }


def _check_dir(folder: str | os.PathLike[str], name: str) -> Path:
    path = Path(folder)
    if not path.exists():
        raise ValueError(f"{name} {str(folder)!r} does not exist")
    if not path.is_dir():
        raise ValueError(f"{name} {str(folder)!r} is not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise ValueError(f"{name} {str(folder)!r} cannot be read (permission denied)")
    return path


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """Relative ``/``-paths of the image files under ``root`` (recursive, sorted), and of the rest."""
    images, other = [], []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        dirnames.sort()
        for fn in sorted(filenames):
            rel = Path(dirpath, fn).relative_to(root).as_posix()
            is_image = not fn.startswith(".") and Path(fn).suffix.lower() in IMAGE_EXTENSIONS
            (images if is_image else other).append(rel)
    return sorted(images), sorted(other)


def _raise(exc: OSError) -> None:
    raise ValueError(f"cannot read folder {exc.filename!r}: {exc.strerror}")


def _stem(rel: str) -> str:
    return rel[: -len(Path(rel).suffix)] if Path(rel).suffix else rel


def _groups(files: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rel in files:
        groups.setdefault(_stem(rel), []).append(rel)
    return groups


def match_folders(reference_dir: str | os.PathLike[str], test_dir: str | os.PathLike[str]) -> Discovery:
    """Pair the references (ground truth) with the test images (a method's outputs) by relative
    path without extension, recursively.

    ``reference_dir/x/cat.png`` pairs with ``test_dir/x/cat.jpg`` (key ``"x/cat"``);
    ``reference_dir/cat.png`` does not pair with ``test_dir/x/cat.png``. A name claimed by several
    files of one side is ambiguous: none of its files is paired, and it is reported in
    ``duplicates`` with the files of both sides.

    Raises:
        ValueError: a folder is missing, not a folder or unreadable.
    """
    ra, rb = _check_dir(reference_dir, "reference folder"), _check_dir(test_dir, "test folder")
    files_a, other_a = _walk(ra)
    files_b, other_b = _walk(rb)
    ga, gb = _groups(files_a), _groups(files_b)
    dup = {s for s in set(ga) | set(gb) if len(ga.get(s, ())) > 1 or len(gb.get(s, ())) > 1}
    keys = sorted((set(ga) & set(gb)) - dup)
    pairs = tuple(Pair(k, str(ra / ga[k][0]), str(rb / gb[k][0]), ga[k][0], gb[k][0]) for k in keys)
    only_ref = tuple(ga[s][0] for s in sorted(set(ga) - set(gb) - dup))
    only_test = tuple(gb[s][0] for s in sorted(set(gb) - set(ga) - dup))
    dups = tuple((s, tuple(ga.get(s, ())), tuple(gb.get(s, ()))) for s in sorted(dup))
    ignored = tuple([f"reference:{r}" for r in other_a] + [f"test:{r}" for r in other_b])
    return Discovery(pairs, only_ref, only_test, dups, ignored, "folders", len(pairs),
                     {"reference_dir": str(reference_dir), "test_dir": str(test_dir)})


def _unrank(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Index ``k`` of the pairs ``(i, j), i < j < n`` in lexicographic order → ``(i, j)``."""
    starts = np.concatenate([[0], np.cumsum(np.arange(n - 1, 0, -1))])  # first index of each row i
    i = np.searchsorted(starts, k, side="right") - 1
    return i, k - starts[i] + i + 1


MAX_ALL_PAIRS: int = 100_000
"""The most pairs ``diversity`` scores one by one, all of them or a ``--sample`` (:func:`check_pair_count`)."""


def check_pair_count(n_pairs: int, *, per_pair_seconds: float, sample: int | None,
                     limit: int = MAX_ALL_PAIRS, what: str = "pairs") -> None:
    """Refuse to score more than ``limit`` pairs one by one: all ``n_pairs``, or ``min(sample,
    n_pairs)`` when a ``sample`` is drawn (a sample of at least all pairs is all pairs).

    Args:
        n_pairs: how many pairs there are (all of them).
        per_pair_seconds: an estimate of one pair's cost, for the message.
        sample: the ``--sample`` size (``None``: all pairs).
        limit: the bound (default :data:`MAX_ALL_PAIRS`).
        what: how the message names the pairs (``"pairs of 3,000 images"``).

    Raises:
        ValueError: more than ``limit`` pairs would be scored; the message states the count, the
            estimated time and the way out (``--sample K`` with ``K ≤ limit``). A ``sample`` that
            is not a positive integer.
    """
    if sample is not None:
        if not isinstance(sample, (int, np.integer)) or isinstance(sample, bool) or sample < 1:
            raise ValueError(f"sample must be a positive integer, got {sample!r}")
        scored = min(int(sample), n_pairs)
    else:
        scored = n_pairs
    if scored <= limit:
        return
    hours = scored * per_pair_seconds / 3600
    minutes = round(hours * 60)
    took = f"{hours:,.1f} hours" if hours >= 1 else f"{minutes:,} minute{'' if minutes == 1 else 's'}"
    cost = f"(about {took} at ~{per_pair_seconds * 1000:.3g} ms a pair, before any result)"
    if sample is None:
        raise ValueError(f"all {what} are {n_pairs:,} pairs, more than the {limit:,} scored without --sample "
                         f"{cost}; pass --sample K to score a seeded random sample of K pairs (e.g. --sample {limit})")
    asked = (f"all {what} are {n_pairs:,} pairs, and --sample {int(sample):,} takes all of them"
             if sample >= n_pairs else f"--sample {int(sample):,} takes {scored:,} of the {n_pairs:,} {what}")
    raise ValueError(f"{asked}: more than the {limit:,} pairs scored one by one {cost}; pass --sample K with "
                     f"K ≤ {limit:,} to score a seeded random sample of K pairs (e.g. --sample {limit})")


def all_pairs(folder: str | os.PathLike[str], *, sample: int | None = None, seed: int = 0,
              max_pairs: int | None = None, per_pair_seconds: float = 0.0) -> Discovery:
    """Every unordered pair of distinct images in ``folder`` (recursive), or a seeded sample of them.

    The "diversity" of multimodal image-to-image papers (the reference's
    ``lpips_1dir_allpairs.py``) is the mean distance over these pairs.

    Args:
        sample: keep ``sample`` pairs drawn without replacement (``numpy.random.default_rng(seed)``);
            ``None`` keeps all ``n (n − 1) / 2``.
        seed: the sample's seed (the same seed and folder give the same pairs).
        max_pairs, per_pair_seconds: refuse to keep more than ``max_pairs`` pairs (all of them,
            or ``min(sample, all)``: :func:`check_pair_count`), before any pair is built;
            ``None``: no bound.

    Raises:
        ValueError: the folder is missing or unreadable, has fewer than two images, ``sample``
            is not a positive integer, or more than ``max_pairs`` pairs to keep.
    """
    root = _check_dir(folder, "folder")
    files, other = _walk(root)
    if len(files) < 2:
        raise ValueError(f"folder {str(folder)!r} has {len(files)} image(s); all pairs need at least 2")
    n = len(files)
    total = n * (n - 1) // 2
    if max_pairs is not None:
        check_pair_count(total, per_pair_seconds=per_pair_seconds, sample=sample, limit=max_pairs,
                         what=f"pairs of {n:,} images")
    if sample is None:
        ks = np.arange(total)
    else:
        if not isinstance(sample, (int, np.integer)) or isinstance(sample, bool) or sample < 1:
            raise ValueError(f"sample must be a positive integer, got {sample!r}")
        ks = np.sort(np.random.default_rng(seed).choice(total, size=min(int(sample), total), replace=False))
    ii, jj = _unrank(ks, n)
    pairs = [Pair(f"{files[i]}|{files[j]}", str(root / files[i]), str(root / files[j]), files[i], files[j])
             for i, j in zip(ii.tolist(), jj.tolist())]
    pairs.sort(key=lambda p: p.key)
    return Discovery(tuple(pairs), ignored=tuple(other), mode="all-pairs", total=total,
                     source={"dir": str(folder), "sample": sample, "seed": seed})


def reference_pairs(reference: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Discovery:
    """One reference image against every test image in ``folder`` (recursive); keys are the folder's names.

    Raises:
        ValueError: the reference is not a file, or the folder is missing or unreadable.
    """
    ref = Path(reference)
    if not ref.is_file():
        raise ValueError(f"reference {str(reference)!r} is not a file")
    root = _check_dir(folder, "test folder")
    files, other = _walk(root)
    pairs = tuple(Pair(_stem(r), str(ref), str(root / r), ref.name, r) for r in files)
    dups = tuple((k, (), tuple(v)) for k, v in sorted(_groups(files).items()) if len(v) > 1)
    bad = {d[0] for d in dups}
    kept = tuple(sorted((p for p in pairs if p.key not in bad), key=lambda p: p.key))
    return Discovery(kept, duplicates=dups, ignored=tuple(other), mode="reference", total=len(kept),
                     source={"reference": str(reference), "test_dir": str(folder)})


def folder_pixels(folder: str | os.PathLike[str], *, max_pixels: int | None = None) -> int:
    """Width x height added up over the image files under ``folder`` (recursive), from their
    headers alone (:func:`lpips_core.images.header_pixels`): what scoring them would decode.

    Files over ``max_pixels`` (default :data:`lpips_core.images.DEFAULT_MAX_PIXELS`) and files
    without a readable header are not counted: scoring refuses them unread.
    """
    from ..images import DEFAULT_MAX_PIXELS, header_pixels

    cap = DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels
    root = _check_dir(folder, "folder")
    total = 0
    for rel in _walk(root)[0]:
        n = header_pixels(root / rel)
        if n is not None and n <= cap:
            total += n
    return total


def pairs_digest(pairs: Sequence[Pair]) -> str:
    """SHA-256 of the pairs' keys and relative names, in order: what resume and merge check.

    Independent of where the folders are mounted, so shards run on different machines merge.
    """
    return names_digest((p.key, p.reference_name, p.test_name) for p in pairs)


def names_digest(entries: Iterable[tuple[str, str, str]]) -> str:
    """:func:`pairs_digest` of ``(key, reference_name, test_name)`` triples (e.g. a table's rows,
    in index order)."""
    h = hashlib.sha256()
    for key, ref, test in entries:
        h.update(f"{key}\t{ref}\t{test}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def shard_bounds(n_blocks: int, shard: tuple[int, int] | None) -> tuple[int, int]:
    """Blocks ``[start, stop)`` of shard ``(i, n)``: ``n`` contiguous, near-equal slices of the blocks.

    Raises:
        ValueError: not ``0 ≤ i < n``.
    """
    if shard is None:
        return 0, n_blocks
    i, n = shard
    if not (isinstance(i, int) and isinstance(n, int) and n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 ≤ i < n, got {shard!r}")
    return i * n_blocks // n, (i + 1) * n_blocks // n
