"""The contract of ``python -m lpips_core``, pinned by golden files under ``tests/data/cli_contract/``.

What is pinned, for the top-level parser and each subcommand (``compare``, ``score``, ``merge``,
``explain``, ``embed``, ``diversity``, ``neighbours``, ``score-2afc``, ``fit-lin``):

- the exact ``--help`` text, rendered with ``COLUMNS=100`` so the wrapping does not depend on the
  terminal (``help-<command>.txt``; ``help-main.txt`` for the top level);
- one small real call per subcommand (AlexNet, 64 px images, a few pairs): its exit status and
  ``--json`` object (``run-<command>.json``), and for most its text table (``run-<command>.txt``);
- per family (compare; the dataset commands; the LPIPS-space commands; the 2AFC commands) one
  usage error and one runtime error: exit status 2, nothing on stdout, the one ``error: ...`` line
  (``errors.json``).

Everything runs in-process through :func:`lpips_core.cli.main` (one ``--help`` also as
``python -m lpips_core``, ``slow``). Volatile fields are normalised before comparing: the temporary
folder becomes ``<tmp>``, the repository ``<repo>``, the weights cache ``<cache>``, durations ``0``,
package versions ``<version>``, where the weights came from ``<weights>``. Floats (in JSON and in
the text tables) are compared within one unit in the last printed place or 1e-5 relative, as the
full tier's two torch threads may run other kernels than the fast tier's one (differences near
1e-7); everything else must be equal.

The goldens were generated from the command line before its modules were reorganised; a change to
them is a change to what users see. To regenerate them after a deliberate change (then review the
diff)::

    LX_REGEN_CLI_GOLDEN=1 .venv/bin/python -m pytest -q --full tests/test_cli_contract.py

``argparse``'s help layout differs between Python minor versions; the goldens are of Python 3.11.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, golden_dir
from datasets_shared import make_pairs

GOLDEN = REPO / "tests" / "data" / "cli_contract"
REGEN = os.environ.get("LX_REGEN_CLI_GOLDEN") == "1"
SUBCOMMANDS = ("compare", "score", "merge", "explain", "embed", "diversity", "neighbours", "score-2afc", "fit-lin")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


# --------------------------------------------------------------------------- goldens
def _golden_text(name: str, got: str, *, numbers: bool = False) -> None:
    """``got`` equals the golden file ``name`` (exactly, or with :func:`_same_numbers` tolerance)."""
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
        return
    assert path.is_file(), f"{path} is missing (LX_REGEN_CLI_GOLDEN=1 writes it)"
    want = path.read_text()
    if numbers:
        _same_numbers(got, want)
    else:
        assert got == want


def _same_numbers(got: str, want: str) -> None:
    """The same text, except that each number may differ by one unit in its last printed place
    (or 1e-5 relative)."""
    assert _NUMBER.sub("#", got) == _NUMBER.sub("#", want), (got, want)
    for g, w in zip(_NUMBER.findall(got), _NUMBER.findall(want)):
        decimals = len(w.split("e")[0].partition(".")[2])
        assert abs(float(g) - float(w)) <= max(10.0 ** -decimals, 1e-5 * abs(float(w))), (g, w, got)


def _same_json(got, want, where: str = "$") -> None:
    """Equal JSON values, floats within 1e-5 relative or 1e-6 absolute."""
    if isinstance(want, float) or (isinstance(got, float) and isinstance(want, int) and not isinstance(want, bool)):
        assert isinstance(got, (int, float)) and not isinstance(got, bool), (where, got, want)
        assert abs(got - want) <= max(1e-6, 1e-5 * abs(want)), (where, got, want)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), (where, list(got), list(want))
        for k in want:
            _same_json(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            _same_json(g, w, f"{where}[{i}]")
    else:
        assert got == want, (where, got, want)


def _golden_json(name: str, got) -> None:
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
        return
    assert path.is_file(), f"{path} is missing (LX_REGEN_CLI_GOLDEN=1 writes it)"
    _same_json(got, json.loads(path.read_text()))


# --------------------------------------------------------------------------- normalising
def _cache_dir() -> str:
    from lpips_core.weights import cache_dir

    return str(cache_dir())


def _normal_text(text: str, tmp: Path) -> str:
    """``text`` with the temporary folder as ``<tmp>``, the repository as ``<repo>``, the weights cache
    as ``<cache>`` and the line naming where the weights came from as ``weights: <weights>``."""
    text = text.replace(str(tmp), "<tmp>").replace(str(REPO), "<repo>")
    for home in {_cache_dir(), str(Path(os.environ.get("TORCH_HOME", Path.home() / ".cache" / "torch")))}:
        text = text.replace(home, "<cache>")
    return re.sub(r"(?m)^weights: .*$", "weights: <weights>", text)


_VOLATILE = ("seconds",)


def _normal_json(value, tmp: Path, key: str = ""):
    """A JSON value with paths normalised (:func:`_normal_text`), durations 0, package versions
    ``<version>``, where the weights came from (this machine's caches) ``<weights>``, the digests of
    embedding files ``<sha256>``."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _VOLATILE:
                out[k] = _zeroed(v)
            elif k == "versions" and isinstance(v, dict):
                out[k] = {vk: (_normal_json(vv, tmp, vk) if vk == "weights" else "<version>") for vk, vv in v.items()}
            elif k == "sha256":  # of an embedding's float bytes: the last bits follow the kernels
                out[k] = "<sha256>"
            elif k == "weights" and isinstance(v, str):
                out[k] = "<weights>"
            elif key == "weights" and isinstance(v, str):  # versions.weights: {spec: where its weights came from}
                out[k] = "<weights>"
            else:
                out[k] = _normal_json(v, tmp, k)
        return out
    if isinstance(value, list):
        return [_normal_json(v, tmp, key) for v in value]
    if isinstance(value, str):
        return _normal_text(value, tmp)
    return value


def _zeroed(value):
    if isinstance(value, dict):
        return {k: _zeroed(v) for k, v in value.items()}
    return 0 if isinstance(value, (int, float)) and not isinstance(value, bool) else value


# --------------------------------------------------------------------------- running
def _main(argv: list[str], capfd) -> tuple[int, str, str]:
    """``main(argv)`` in-process: ``(exit status, stdout, stderr)``; a usage error's ``SystemExit`` is its status."""
    from lpips_core.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """The module's inputs, each built once from seeded helpers (the other CLI tests' own)."""
    from test_space import _set
    from test_twoafc import _bapps

    tmp = tmp_path_factory.mktemp("cli_contract")
    make_pairs(tmp / "pairs", n=3, odd_size=0, seed=7)
    _set(tmp / "pool", n=4, seed=3)
    _set(tmp / "query", n=2, seed=4, dup=False)
    _bapps(tmp / "2afc", n=8, seed=1)
    (tmp / "out").mkdir()
    return tmp


def _args(argv: tuple, tmp: Path) -> list[str]:
    ex = golden_dir()
    return [a.format(tmp=tmp, ref=ex / "ex_ref.png", p0=ex / "ex_p0.png") for a in argv]


# --------------------------------------------------------------------------- --help
@pytest.mark.parametrize("command", ("main",) + SUBCOMMANDS)
def test_help_text(command, capfd, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = _main(["--help"] if command == "main" else [command, "--help"], capfd)
    assert (code, err) == (0, "")
    _golden_text(f"help-{command}.txt", out)


@pytest.mark.slow  # a subprocess (full tier): python -m lpips_core is the same parser
def test_help_as_a_module():
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, "-m", "lpips_core", "score", "--help"], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == (GOLDEN / "help-score.txt").read_text()


# --------------------------------------------------------------------------- one real call per subcommand
CALLS = {
    "compare": ("compare", "{ref}", "{p0}"),
    "score": ("score", "{tmp}/pairs/a", "{tmp}/pairs/b", "--metrics", "lpips,mse", "--workers", "0", "--lanes", "0",
              "--batch-size", "2", "--out", "{tmp}/out/rows-{mode}.csv"),
    "diversity": ("diversity", "{tmp}/pool"),
    "diversity-sample": ("diversity", "{tmp}/pool", "--metrics", "mse,psnr", "--sample", "4", "--seed", "1",
                         "--workers", "0"),
    "embed": ("embed", "{tmp}/pool", "{tmp}/out/emb-{mode}", "--shard", "0/2"),
    "neighbours": ("neighbours", "{tmp}/query", "{tmp}/pool", "--k", "2"),
    "neighbours-self": ("neighbours", "{tmp}/pool", "{tmp}/pool", "--k", "1"),
    "score-2afc": ("score-2afc", "{tmp}/2afc", "--metrics", "mse,lpips"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_real_call(name, root, capfd):
    """The JSON object (``--json``) and the text table of the same call."""
    for mode in ("json", "text"):
        argv = [a.replace("{mode}", mode) for a in CALLS[name]] + (["--json"] if mode == "json" else [])
        code, out, err = _main(_args(argv, root), capfd)
        assert (code, err) == (0, ""), err
        if mode == "json":
            _golden_json(f"run-{name}.json", _normal_json(json.loads(out), root))
        else:
            _golden_text(f"run-{name}.txt", _normal_text(out, root), numbers=True)


def test_merge(root, capfd):
    """``score --shard i/2`` twice, then ``merge`` (text, then ``--json`` with ``--force`` over the same tables)."""
    tables = [f"{root}/out/shard{i}.jsonl" for i in range(2)]
    for i, table in enumerate(tables):
        code, out, err = _main(["score", f"{root}/pairs/a", f"{root}/pairs/b", "--metrics", "ssim", "--workers", "0",
                                "--batch-size", "2", "--shard", f"{i}/2", "--out", table], capfd)
        assert (code, err) == (0, ""), err
        _golden_text(f"run-score-shard{i}.txt", _normal_text(out, root), numbers=True)
    code, out, err = _main(["merge", f"{root}/out/merged.jsonl", *tables], capfd)
    assert (code, err) == (0, ""), err
    _golden_text("run-merge.txt", _normal_text(out, root), numbers=True)
    code, out, err = _main(["merge", f"{root}/out/merged2.jsonl", *tables, "--json"], capfd)
    assert (code, err) == (0, ""), err
    _golden_json("run-merge.json", _normal_json(json.loads(out), root))


@pytest.mark.slow  # every AlexNet configuration at three sizes (full tier)
def test_explain(root, capfd):
    argv = ["explain", f"{root}/pairs/a", f"{root}/pairs/b", "--reported", "0.05", "--name", "LPIPS (AlexNet)",
            "--workers", "0", "--lanes", "0", "--top", "4"]
    code, out, err = _main(argv + ["--json"], capfd)
    assert (code, err) == (0, ""), err
    _golden_json("run-explain.json", _normal_json(json.loads(out), root))
    code, out, err = _main(argv, capfd)
    assert (code, err) == (0, ""), err
    _golden_text("run-explain.txt", _normal_text(out, root), numbers=True)


def test_fit_lin(root, capfd):
    code, out, err = _main(["fit-lin", f"{root}/2afc", "--out", f"{root}/out/lin.pth", "--folds", "2", "--json"],
                           capfd)
    assert (code, err) == (0, ""), err
    _golden_json("run-fit-lin.json", _normal_json(json.loads(out), root))
    code, out, err = _main(["fit-lin", f"{root}/2afc", "--out", f"{root}/out/lin2.pth", "--folds", "2"], capfd)
    assert (code, err) == (0, ""), err
    _golden_text("run-fit-lin.txt", re.sub(r" in \d+\.\d s:", " in <s> s:", _normal_text(out, root)), numbers=True)


def test_compare_json_equals_the_golden_distance(root, capfd):
    """The compare call's golden holds the published AlexNet distance (a check on the goldens themselves)."""
    got = json.loads((GOLDEN / "run-compare.json").read_text())
    assert abs(got["lpips"] - 0.721881) <= 1e-6 and got["size"] == [64, 64]
    assert np.isclose(sum(got["per_layer"]), got["distance"], rtol=1e-5)


# --------------------------------------------------------------------------- errors: one per family and kind
ERRORS = {
    "compare-usage": ("compare", "{ref}", "{p0}", "--size", "0"),
    "compare-usage-device": ("compare", "{ref}", "{p0}", "--device", "tpu"),
    "compare-runtime": ("compare", "{ref}", "{tmp}/nope.png"),
    "main-usage": (),
    "main-usage-command": ("frobnicate",),
    "datasets-usage": ("score", "{tmp}/pairs/a", "{tmp}/pairs/b", "--shard", "2/2"),
    "datasets-usage-size": ("score", "{tmp}/pairs/a", "{tmp}/pairs/b", "--size", "32x32"),
    "datasets-usage-device": ("score", "{tmp}/pairs/a", "{tmp}/pairs/b", "--device", "tpu"),
    "datasets-runtime": ("score", "{tmp}/nonexistent", "{tmp}/pairs/b"),
    "explain-usage": ("explain", "{tmp}/pairs/a", "{tmp}/pairs/b", "--reported", "nan"),
    "merge-runtime": ("merge", "{tmp}/out/m.csv", "{tmp}/nonexistent.csv"),
    "space-usage": ("neighbours", "{tmp}/query", "{tmp}/pool", "--k", "0"),
    "space-usage-device": ("embed", "{tmp}/pool", "{tmp}/out/e", "--device", "tpu"),
    "space-runtime": ("neighbours", "{tmp}/query", "{tmp}/pool", "--metric", "dists"),
    "diversity-runtime": ("diversity", "{tmp}/pool", "--matrix", "{tmp}/out/m.txt"),
    "twoafc-usage": ("fit-lin", "{tmp}/2afc", "--out", "{tmp}/out/x.pth", "--strength", "-1"),
    "twoafc-usage-required": ("fit-lin", "{tmp}/2afc"),
    "twoafc-runtime": ("score-2afc", "{tmp}/pairs", "--metrics", "mse"),
}


def test_errors_are_one_line(root, capfd):
    got = {}
    for name, argv in ERRORS.items():
        code, out, err = _main(_args(argv, root), capfd)
        assert code == 2 and out == "", (name, out)
        assert err.startswith("error: ") and err.count("\n") == 1, (name, err)
        got[name] = {"argv": [_normal_text(a, root) for a in _args(argv, root)], "code": code,
                     "stderr": _normal_text(err, root)}
    _golden_json("errors.json", got)


# --------------------------------------------------------------------------- the command line sits on top
def _imports(path: Path, package: str) -> set[str]:
    """The absolute module names ``path`` (a module of ``package``) imports, ``from X import y`` also as ``X.y``."""
    import ast

    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out |= {module} | {f"{module}.{a.name}" for a in node.names}
    return out


def test_the_library_never_imports_the_command_line():
    """No module of ``lpips_core`` but ``cli/`` itself and the ``__main__`` shim imports ``lpips_core.cli``."""
    root = REPO / "lpips_core"
    offenders = []
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(REPO).with_suffix("").parts
        if parts[1] == "cli" or parts[-1] == "__main__":
            continue
        package = ".".join(parts if f.name == "__init__.py" else parts[:-1]).removesuffix(".__init__")
        if any(m == "lpips_core.cli" or m.startswith("lpips_core.cli.") for m in _imports(f, package)):
            offenders.append(str(f.relative_to(REPO)))
    assert offenders == []
    assert "lpips_core.cli" in _imports(root / "__main__.py", "lpips_core")  # the scan sees the one that does
