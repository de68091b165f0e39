"""``python -m lpips_core score|diversity|explain|merge``: JSON equal to the library, one-line errors.

The subprocess tests pay about 3 s of interpreter and torch start-up each, plus the scoring. The
fast tier runs one scoring command end to end (``diversity``, equal to the library) and the table
of refused arguments in-process through ``main``; the other subprocess tests (the same table as
real processes included) are marked ``slow`` and run with ``pytest --full``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from datasets_shared import make_pairs
from lpips_core.datasets import Scorer, all_pairs, match_folders, score_pairs


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, on the kernels of this process, so that its numbers equal the
    library's here bit for bit. This process's NNPACK pool is for one thread (``conftest.py``):
    with more torch threads it runs oneDNN, which a fresh process would not on an AVX2 CPU."""
    import torch

    env = os.environ.copy()
    if torch.get_num_threads() > 1:
        env["LPIPS_EXPLORER_NNPACK"] = "0"
    return subprocess.run([sys.executable, "-m", "lpips_core", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=600)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_pairs(tmp_path_factory.mktemp("cli"), n=5, odd_size=1, seed=7)


@pytest.mark.slow  # subprocesses (full tier)
def test_score_json_equals_the_library(folders, tmp_path):
    out = tmp_path / "rows.jsonl"
    proc = run_cli("score", *map(str, folders), "--metrics", "lpips,psnr", "--net", "vgg", "--workers", "0",
                   "--batch-size", "2", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = score_pairs(match_folders(*folders), scorer=Scorer(["lpips-vgg", "psnr"], device="cpu"), batch_size=2,
                       workers=0)
    assert set(got) >= {"n", "skipped", "metrics", "config", "versions"}
    assert (got["n"], got["skipped"]) == (5, 0)
    assert got["metrics"] == want.summary["metrics"]
    assert list(got["metrics"]) == ["lpips-vgg-0.1-lin-[-1,1]", "psnr"]
    assert got["config"]["mismatch"] == "error" and got["versions"]["weights"]["lpips-vgg-0.1-lin-[-1,1]"]
    assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == [r["key"] for r in want.rows]


@pytest.mark.slow  # subprocesses (full tier)
def test_table_shards_and_merge(folders, tmp_path):
    for i in range(2):
        proc = run_cli("score", *map(str, folders), "--metrics", "ssim", "--batch-size", "2", "--workers", "0",
                       "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}.csv"))
        assert proc.returncode == 0, proc.stderr
        assert "ssim" in proc.stdout and "95% CI" in proc.stdout
    proc = run_cli("merge", str(tmp_path / "all.csv"), str(tmp_path / "s0.csv"), str(tmp_path / "s1.csv"), "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = score_pairs(match_folders(*folders), "ssim", batch_size=2, workers=0)
    assert got["metrics"] == want.summary["metrics"] and got["n"] == 5


def test_diversity_over_a_seeded_sample(folders):
    proc = run_cli("diversity", str(folders[0]), "--metrics", "mse", "--sample", "4", "--seed", "1", "--workers",
                   "0", "--json")
    assert proc.returncode == 0, proc.stderr
    want = score_pairs(all_pairs(folders[0], sample=4, seed=1), "mse", workers=0)
    assert json.loads(proc.stdout)["metrics"] == want.summary["metrics"]


@pytest.mark.slow  # subprocesses (full tier)
def test_explain_names_the_configuration(folders):
    truth = score_pairs(match_folders(*folders), "lpips-alex-0.0-lin-[0,255]", workers=0, mismatch="crop")
    mean = truth.summary["metrics"]["lpips-alex-0.0-lin-[0,255]"]["mean"]
    proc = run_cli("explain", *map(str, folders), "--reported", repr(mean), "--nets", "alex", "--mismatch", "crop",
                   "--workers", "0", "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["candidates"][0]["config"] == "lpips-alex-0.0-lin-[0,255]" and len(got["candidates"]) == 3
    assert got["candidates"][0]["distance"] < 1e-6


ERRORS = [
    (("score", "/nonexistent/a", "/nonexistent/b"), "reference folder '/nonexistent/a' does not exist"),
    (("score", "{a}", "{b}", "--metrics", "lpips-resnet"), "LPIPS has no option 'resnet'"),
    (("score", "{a}", "{b}", "--shard", "2/2"), "shard i/n needs 0 ≤ i < n"),
    (("score", "{a}", "{b}", "--resume"), "--resume needs --out FILE"),
    (("score", "{a}", "{b}", "--out", "rows.txt"), "must end in .csv or .jsonl"),
    (("score", "{a}", "{b}", "--batch-size", "0"), "expected a positive integer"),
    (("explain", "{a}", "{b}", "--reported", "nan"), "expected a finite number"),
    (("explain", "{a}", "{b}"), "--reported"),
    (("diversity", "{a}/p00.png"), "is not a folder"),
    (("merge", "m.csv", "/nonexistent/s0.csv"), "missing"),
]


ERROR_IDS = [f"args{i}-{message}" for i, (_, message) in enumerate(ERRORS)]


@pytest.mark.slow  # a subprocess per case (full tier); test_errors_in_process runs the table in the fast tier
@pytest.mark.parametrize("args, message", ERRORS, ids=ERROR_IDS)
def test_errors_exit_2_with_one_line(folders, args, message):
    a, b = map(str, folders)
    proc = run_cli(*(x.format(a=a, b=b) for x in args))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("args, message", ERRORS, ids=ERROR_IDS)
def test_errors_in_process(folders, args, message, capfd, monkeypatch):
    """The same table through ``main`` in the test process (usage errors leave by ``SystemExit(2)``,
    the others return 2): one ``error: …`` line on stderr naming the problem, nothing on stdout."""
    from lpips_core.__main__ import main

    monkeypatch.chdir(REPO)  # where run_cli runs the subprocesses
    a, b = map(str, folders)
    try:
        code = main([x.format(a=a, b=b) for x in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err
    assert out == ""


@pytest.mark.parametrize("command", ["score", "explain"])
def test_help_names_the_folders_by_role(command, capsys):
    """``--help`` says which folder is which: references first, test images second; and what
    ``--mismatch resize`` resizes."""
    from lpips_core.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"{command} [-h]" in text and "REFERENCE_DIR TEST_DIR" in text
    assert "REFERENCE_DIR references (ground truth), or one reference image" in text
    assert "TEST_DIR test images (a method's outputs)" in text
    assert "resize each test image to its reference's size" in text


def test_json_names_files_and_discovery_by_role(folders, tmp_path, capsys):
    """``score --json`` reports the discovery with ``only_reference``/``only_test`` and the table's
    rows name ``reference``/``test`` and their sizes."""
    from lpips_core.__main__ import main

    ref, test = folders
    (ref / "lonely.png").write_bytes((ref / "p00.png").read_bytes())
    try:
        out = tmp_path / "rows.jsonl"
        assert main(["score", str(ref), str(test), "--metrics", "mse", "--workers", "0", "--out", str(out),
                     "--json"]) == 0
    finally:
        (ref / "lonely.png").unlink()
    got = json.loads(capsys.readouterr().out)
    disc = got["config"]["discovery"]
    assert (disc["only_reference"], disc["only_test"]) == (1, 0)
    assert disc["examples"]["only_reference"] == ["lonely.png"]
    assert (disc["reference_dir"], disc["test_dir"]) == (str(ref), str(test))
    first = json.loads(out.read_text().splitlines()[0])
    assert list(first)[:8] == ["index", "key", "reference", "test", "reference_size", "test_size", "error_kind",
                               "error"]
    assert (first["reference"], first["test"]) == ("p00.png", "p00.jpg")  # make_pairs: JPEG test images too


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_table_with_positional_columns_gives_one_line_on_resume_and_merge(folders, tmp_path, capsys, fmt):
    """A table whose files are in columns ``a``, ``b``, ``a_size``, ``b_size`` (this tool's earlier
    layout): ``--resume`` and ``merge`` stop with one line that names the columns and the fix; the
    table renamed as the message says resumes and merges as any other."""
    from lpips_core.__main__ import main

    ref, test = map(str, folders)
    renames = {"reference": "a", "test": "b", "reference_size": "a_size", "test_size": "b_size"}
    shards = [tmp_path / f"s{i}.{fmt}" for i in range(2)]
    for i, s in enumerate(shards):
        assert main(["score", ref, test, "--metrics", "mse", "--workers", "0", "--batch-size", "2",
                     "--shard", f"{i}/2", "--out", str(s)]) == 0
    capsys.readouterr()
    wanted = shards[0].read_text()

    def rename(path, mapping):
        text = path.read_text()
        if fmt == "csv":
            head, rest = text.split("\n", 1)
            path.write_text(",".join(mapping.get(c, c) for c in head.split(",")) + "\n" + rest)
        else:
            path.write_text("".join(json.dumps({mapping.get(k, k): v for k, v in json.loads(line).items()},
                                               ensure_ascii=False) + "\n" for line in text.splitlines()))

    rename(shards[0], renames)
    for args in (["score", ref, test, "--metrics", "mse", "--workers", "0", "--batch-size", "2", "--shard", "0/2",
                  "--out", str(shards[0]), "--resume"],
                 ["merge", str(tmp_path / f"all.{fmt}"), *map(str, shards)]):
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and "unexpected" not in err
        assert "has columns a, b, a_size, b_size" in err and "reference, test, reference_size, test_size" in err
        assert "rename them" in err
    rename(shards[0], {v: k for k, v in renames.items()})
    assert shards[0].read_text() == wanted
    assert main(["merge", str(tmp_path / f"all.{fmt}"), *map(str, shards)]) == 0
