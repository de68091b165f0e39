"""``python -m lpips_core diversity`` (Gram path), ``neighbours`` and ``embed``: JSON equal to the
reference package and to brute force, the documented shapes, one-line errors.

In-process through ``main`` (the fast tier); one subprocess twin is ``slow``.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import REPO
from datasets_shared import image, save
from lpips_core.__main__ import main
from test_space import _inputs, _set


def _run(capfd, *args) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("space_cli")
    pool = _set(root / "pool", n=7, seed=3)
    (pool / "sub").mkdir()
    (pool / "sub" / "deep.png").write_bytes((pool / "img04.png").read_bytes())
    query = _set(root / "query", n=3, seed=4, dup=False)
    return query, pool


def test_diversity_json_equals_the_reference_packages_all_pairs_mean(folders, capfd, tmp_path):
    """The mean over all pairs as the reference's ``lpips_1dir_allpairs.py`` computes it (one forward
    of ``lpips.LPIPS`` per pair, images by ``lpips.im2tensor``), within 1e-5; the matrix too."""
    import lpips

    from lpips_core.testing import reference_lpips

    _, pool = folders
    matrix = tmp_path / "d.npy"
    code, out, err = _run(capfd, "diversity", pool, "--json", "--matrix", matrix)
    assert code == 0, err
    got = json.loads(out)
    names, _ = _inputs(pool)
    ref = reference_lpips("alex", "0.1", True)
    tensors = [lpips.im2tensor(np.asarray(Image.open(pool / n).convert("RGB"))) for n in names]
    want = np.zeros((len(names), len(names)))
    with torch.no_grad():
        for i, j in itertools.combinations(range(len(names)), 2):
            want[i, j] = want[j, i] = float(ref(tensors[i], tensors[j]))
    m = got["metrics"]["lpips-alex-0.1-lin-[-1,1]"]
    pairs = want[np.triu_indices(len(names), 1)]
    assert m["n"] == got["n"] == len(pairs) == 36 and got["config"]["images"] == 9
    assert abs(m["mean"] - pairs.mean()) <= 1e-5
    assert abs(m["std"] - pairs.std(ddof=1)) <= 1e-5
    assert m["ci95"][0] < m["mean"] < m["ci95"][1] and "jackknife" in got["config"]["ci95"]
    d = np.load(matrix)
    assert d.shape == (9, 9) and np.abs(d - want).max() <= 1e-5
    assert got["versions"]["lpips"] == "0.1.4" and got["versions"]["weights"]["lpips-alex-0.1-lin-[-1,1]"]


def test_diversity_table_and_per_pair_fallbacks(folders, capfd):
    _, pool = folders
    code, out, err = _run(capfd, "diversity", pool)
    assert code == 0, err
    assert "9 images, all 36 pairs through the Gram matrix" in out and "jackknife over images" in out
    # --sample keeps the per-pair path (its Student t summary), and so do metrics without an embedding
    code, out, err = _run(capfd, "diversity", pool, "--sample", "3", "--metrics", "mse", "--workers", "0", "--json")
    assert code == 0, err
    assert json.loads(out)["n"] == 3 and json.loads(out)["config"]["ci95"] == "Student t interval of the mean"


def test_neighbours_json_shape_and_values(folders, capfd):
    from lpips_core import LPIPS

    query, pool = folders
    code, out, err = _run(capfd, "neighbours", query, pool, "--k", "3", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert set(got) == {"queries", "config", "versions"}
    qnames, qx = _inputs(query)
    pnames, px = _inputs(pool)
    assert [q["query"] for q in got["queries"]] == qnames
    assert "sub/deep.png" in pnames  # names relative to their folder
    model = LPIPS("alex", device="cpu")
    for q, i in zip(got["queries"], range(len(qnames))):
        assert set(q) == {"query", "neighbours"} and len(q["neighbours"]) == 3
        assert all(set(n) == {"name", "distance"} for n in q["neighbours"])
        vals = model.compare(qx[i:i + 1], px).total.double().numpy()
        # identical images tie exactly in the tool (one forward pass); in this batched oracle they can
        # differ in the last float bits, so values within 1e-6 count as a tie, broken by name
        order = sorted(range(len(pnames)), key=lambda j: (round(vals[j], 6), pnames[j]))[:3]
        assert [n["name"] for n in q["neighbours"]] == [pnames[j] for j in order]
        assert max(abs(n["distance"] - vals[j]) for n, j in zip(q["neighbours"], order)) <= 1e-5
    assert got["config"]["metric"] == "lpips-alex-0.1-lin-[-1,1]" and got["config"]["exclude_self"] is False


def test_neighbours_of_a_folder_in_itself_leave_out_self_matches(folders, capfd):
    _, pool = folders
    code, out, err = _run(capfd, "neighbours", pool, pool, "--k", "1", "--json")
    assert code == 0, err
    got = {q["query"]: q["neighbours"][0] for q in json.loads(out)["queries"]}
    assert all(q != n["name"] for q, n in got.items())
    assert got["img02.png"] == {"name": "zz-copy-of-img02.png", "distance": 0.0}
    assert got["img04.png"] == {"name": "sub/deep.png", "distance": 0.0}
    code, out, err = _run(capfd, "neighbours", pool, pool, "--k", "2")
    assert code == 0 and "(self-matches left out)" in out


def test_embed_shards_then_diversity_and_neighbours_of_the_embedding(folders, capfd, tmp_path):
    query, pool = folders
    emb = tmp_path / "emb"
    for i in range(2):
        code, out, err = _run(capfd, "embed", pool, emb, "--shard", f"{i}/2")
        assert code == 0, err
        assert f"(shard {i}/2) embedded as lpips-alex-0.1-lin-[-1,1]" in out
    code, out, _ = _run(capfd, "diversity", emb, "--json")
    from_emb = json.loads(out)["metrics"]["lpips-alex-0.1-lin-[-1,1]"]
    code, out, _ = _run(capfd, "diversity", pool, "--json")
    direct = json.loads(out)["metrics"]["lpips-alex-0.1-lin-[-1,1]"]
    assert abs(from_emb["mean"] - direct["mean"]) <= 1e-6
    code, out, err = _run(capfd, "neighbours", query, emb, "--k", "2", "--json")
    assert code == 0, err
    code, out2, _ = _run(capfd, "neighbours", query, pool, "--k", "2", "--json")
    assert [[n["name"] for n in q["neighbours"]] for q in json.loads(out)["queries"]] == \
        [[n["name"] for n in q["neighbours"]] for q in json.loads(out2)["queries"]]
    code, _, err = _run(capfd, "neighbours", query, emb, "--metric", "lpips-vgg")
    assert code == 2 and "holds embeddings of lpips-alex-0.1-lin-[-1,1], not lpips-vgg-0.1-lin-[-1,1]" in err


def test_approximate_neighbours_match_the_exact_ones_on_a_small_pool(folders, capfd):
    query, pool = folders
    _, exact, _ = _run(capfd, "neighbours", query, pool, "--k", "3", "--json")
    code, approx, err = _run(capfd, "neighbours", query, pool, "--k", "3", "--json", "--approximate",
                             "--proj-dim", "32")
    assert code == 0, err
    a, e = json.loads(approx)["queries"], json.loads(exact)["queries"]
    assert [[n["name"] for n in q["neighbours"]] for q in a] == [[n["name"] for n in q["neighbours"]] for q in e]
    assert max(abs(x["distance"] - y["distance"]) for qa, qe in zip(a, e)
               for x, y in zip(qa["neighbours"], qe["neighbours"])) <= 1e-12  # float64 both ways
    assert json.loads(approx)["config"]["method"].startswith("approximate")


ERRORS = [
    (("neighbours", "{q}", "{p}", "--metric", "dists"), "dists-vgg-[0,1] has no embedding"),
    (("neighbours", "{q}", "{p}", "--k", "0"), "expected a positive integer"),
    (("diversity", "{p}", "--sample", "3", "--matrix", "m.npy"), "--matrix and --embeddings need"),
    (("diversity", "{p}", "--matrix", "m.txt"), "--matrix must end in .npy"),
    (("diversity", "{p}", "--metrics", "lpips,lpips-vgg", "--matrix", "m.npy"), "take one metric"),
    (("neighbours", "{mixed}", "{p}"), "LPIPS compares images of one size; pass a size (--size N)"),
    (("neighbours", "/nonexistent/q", "{p}"), "folder '/nonexistent/q' does not exist"),
]


@pytest.mark.parametrize("args, message", ERRORS, ids=[m for _, m in ERRORS])
def test_errors_exit_2_with_one_line(folders, args, message, capfd, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    query, pool = folders
    mixed = tmp_path / "mixed"
    save(image(np.random.default_rng(0), 64, 64), mixed / "a.png")
    save(image(np.random.default_rng(1), 48, 64), mixed / "b.png")
    code, out, err = _run(capfd, *(a.format(q=query, p=pool, mixed=mixed) for a in args))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err


@pytest.mark.slow  # a subprocess (full tier); the in-process tests above cover the same command
def test_neighbours_in_a_subprocess(folders):
    from test_datasets_cli import run_cli

    query, pool = folders
    proc = run_cli("neighbours", str(query), str(pool), "--k", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [len(q["neighbours"]) for q in got["queries"]] == [2, 2, 2]
    assert str(REPO)  # run from the repository root
