"""Pair discovery: folders matched by name (recursive, any extension), all pairs, one reference, shards."""

from __future__ import annotations

import numpy as np
import pytest

from datasets_shared import image, save
from lpips_core.datasets.pairs import all_pairs, match_folders, pairs_digest, reference_pairs, shard_bounds


@pytest.fixture
def tree(tmp_path):
    rng = np.random.default_rng(1)
    img = image(rng, 32, 32)
    a, b = tmp_path / "a", tmp_path / "b"
    for rel in ("x.png", "deep/er/y.png", "z.png", "only_a.png", "dup.png", "dup.jpg", "sub/w.png", "notes.txt",
                ".hidden.png"):
        if rel.endswith(".txt"):
            (a / rel).parent.mkdir(parents=True, exist_ok=True)
            (a / rel).write_text("not an image")
        else:
            save(img, a / rel)
    for rel in ("x.jpg", "deep/er/y.webp", "z.PNG", "only_b.png", "dup.png", "w.png", "sub/w2.png"):
        save(img, b / rel)
    return a, b


def test_folders_match_by_relative_stem_and_report_the_rest(tree):
    a, b = tree
    d = match_folders(a, b)
    assert [(p.key, p.reference_name, p.test_name) for p in d.pairs] == [
        ("deep/er/y", "deep/er/y.png", "deep/er/y.webp"),
        ("x", "x.png", "x.jpg"),
        ("z", "z.png", "z.PNG"),
    ]
    assert d.pairs[0].reference == str(a / "deep/er/y.png") and d.pairs[0].test == str(b / "deep/er/y.webp")
    # sub/w.png (reference) and w.png (test) differ in folder: both unmatched; only_* likewise
    assert d.only_reference == ("only_a.png", "sub/w.png")
    assert d.only_test == ("only_b.png", "sub/w2.png", "w.png")
    # "dup" has two reference files: ambiguous, reported with the files of both sides, not paired
    assert d.duplicates == (("dup", ("dup.jpg", "dup.png"), ("dup.png",)),)
    assert d.ignored == ("reference:.hidden.png", "reference:notes.txt")
    rep = d.report()
    assert (rep["pairs"], rep["only_reference"], rep["only_test"], rep["duplicates"], rep["ignored"]) == (3, 2, 3, 1, 2)
    assert rep["examples"]["only_test"] == ["only_b.png", "sub/w2.png", "w.png"]
    assert (rep["reference_dir"], rep["test_dir"]) == (str(a), str(b))
    assert not {"only_a", "only_b", "dir_a", "dir_b"} & set(rep)


def test_folder_errors(tmp_path, tree):
    a, _ = tree
    with pytest.raises(ValueError, match="reference folder .* does not exist"):
        match_folders(tmp_path / "nope", a)
    with pytest.raises(ValueError, match="test folder .* is not a folder"):
        match_folders(a, a / "x.png")


def test_all_pairs_and_a_seeded_sample(tree):
    a, _ = tree
    d = all_pairs(a / "deep" / "..")  # the same folder, spelled differently
    files = sorted({p.reference_name for p in d.pairs} | {p.test_name for p in d.pairs})
    assert files == ["deep/er/y.png", "dup.jpg", "dup.png", "only_a.png", "sub/w.png", "x.png", "z.png"]
    n = len(files)
    assert d.total == n * (n - 1) // 2 == len(d.pairs)
    assert {(p.reference_name, p.test_name) for p in d.pairs} == {(files[i], files[j]) for i in range(n) for j in range(i + 1, n)}
    s1, s2 = all_pairs(a, sample=5, seed=3), all_pairs(a, sample=5, seed=3)
    assert s1.pairs == s2.pairs and len(s1.pairs) == 5 and len({p.key for p in s1.pairs}) == 5
    assert {p.key for p in s1.pairs} <= {p.key for p in d.pairs}
    assert all_pairs(a, sample=5, seed=4).pairs != s1.pairs
    with pytest.raises(ValueError, match="positive integer"):
        all_pairs(a, sample=0)


def test_reference_against_a_folder(tree):
    a, b = tree
    d = reference_pairs(a / "x.png", b)
    assert [p.key for p in d.pairs] == ["deep/er/y", "dup", "only_b", "sub/w2", "w", "x", "z"]
    assert {p.reference for p in d.pairs} == {str(a / "x.png")}
    assert d.report()["reference"] == str(a / "x.png") and d.report()["test_dir"] == str(b)
    with pytest.raises(ValueError, match="not a file"):
        reference_pairs(a, b)


def test_shards_cover_the_blocks_once_and_digest_ignores_mount_point(tree, tmp_path):
    for n_blocks in (0, 1, 7, 10):
        for n in (1, 3, 4):
            spans = [shard_bounds(n_blocks, (i, n)) for i in range(n)]
            assert spans[0][0] == 0 and spans[-1][1] == n_blocks
            assert all(spans[k][1] == spans[k + 1][0] for k in range(n - 1))
            assert max(hi - lo for lo, hi in spans) - min(hi - lo for lo, hi in spans) <= 1
    with pytest.raises(ValueError, match="0 ≤ i < n"):
        shard_bounds(4, (3, 3))
    a, b = tree
    before = pairs_digest(match_folders(a, b).pairs)
    moved = tmp_path / "elsewhere"
    a.rename(moved)
    assert pairs_digest(match_folders(moved, b).pairs) == before
    assert pairs_digest(match_folders(moved, b).pairs[:2]) != before
