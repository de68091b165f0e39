"""Project-level promises: a pure library, README commands that CI really runs, test tiers."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

import conftest
from conftest import FULL_TIER, REPO, _tier


def test_the_engine_imports_no_app_dependency():
    """Every module of the engine (``lpips_core``) imports without Streamlit, Plotly or SQLAlchemy: the
    metric library can be used alone; the lessons (``lpips_explorer``) and the app sit above it."""
    code = (
        "import sys, pkgutil, importlib, lpips_core\n"
        "for m in pkgutil.walk_packages(lpips_core.__path__, 'lpips_core.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "print(sorted(k for k in ('streamlit', 'plotly', 'sqlalchemy', 'lpips_explorer', 'ui') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_lessons_import_no_streamlit():
    """``lpips_explorer`` (teaching, figures, study, diagnostics) may use Plotly and SQLAlchemy, never Streamlit."""
    code = (
        "import sys, pkgutil, importlib, lpips_explorer\n"
        "for m in pkgutil.walk_packages(lpips_explorer.__path__, 'lpips_explorer.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "print('streamlit' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", quick)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    app_cmd, test_cmd = commands
    assert "streamlit run app.py" in app_cmd
    assert test_cmd.endswith("python -m pytest --full"), "the README's test command must run the full suite"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci, "'.ci/run' must run the README's test command verbatim"
    assert "set -euo pipefail" in ci, "'.ci/run' must fail on any non-zero status (pytest's 5 included)"


def _collected(*args: str) -> tuple[set[str], str]:
    """Node ids ``pytest --collect-only`` selects with ``args``, and its last line."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    lines = out.stdout.splitlines()
    return {ln for ln in lines if "::" in ln}, lines[-1] if lines else out.stderr


@pytest.mark.slow  # two pytest subprocesses (~10 s); test_tier_hooks_in_process checks the same hooks in the fast tier
def test_default_run_is_the_fast_tier_and_full_runs_everything():
    """A plain ``pytest`` deselects the AppTest and browser tests (and says how many); with
    ``--full`` they are collected and carry their tier marker (``-m`` selects them)."""
    paths = ["tests/e2e", "tests/test_pages.py", "tests/test_project.py"]
    fast, fast_summary = _collected(*paths)
    heavy, _ = _collected("--full", "-m", "apptest or e2e", *paths)
    slow, _ = _collected("--full", "-m", "slow", *paths)
    assert fast and all(n.startswith("tests/test_project.py::") for n in fast), fast_summary
    files = {n.split("::")[0] for n in heavy}
    assert files >= {"tests/e2e/test_browser.py", "tests/e2e/test_load.py", "tests/test_pages.py"}
    assert all(f.startswith("tests/e2e/") or f == "tests/test_pages.py" for f in files), files
    assert "tests/test_project.py::test_default_run_is_the_fast_tier_and_full_runs_everything" in slow
    assert not fast & slow
    assert f"({len(heavy | slow)} deselected)" in fast_summary, fast_summary


def test_tier_by_location():
    """``tests/e2e/*`` → ``e2e``; ``test_page*.py`` or the ``app`` fixture → ``apptest``; else none."""
    def item(path: str, *fixtures: str) -> SimpleNamespace:
        return SimpleNamespace(path=REPO / path, fixturenames=list(fixtures))

    assert _tier(item("tests/e2e/test_load.py", "server")) == "e2e"
    assert _tier(item("tests/test_pages_successors.py")) == "apptest"
    assert _tier(item("tests/test_sweeps.py", "golden", "app")) == "apptest"
    assert _tier(item("tests/test_sweeps.py", "golden", "device")) is None
    assert _tier(item("tests/test_e2e_like.py")) is None


class _Item(SimpleNamespace):
    """What ``pytest_collection_modifyitems`` reads of a collected item: its path, fixtures, marks."""

    def __init__(self, path: str, *fixtures: str, marks: tuple[str, ...] = ()):
        super().__init__(path=REPO / path, fixturenames=list(fixtures), marks=list(marks))

    def add_marker(self, name: str) -> None:
        self.marks.append(name)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def test_tier_hooks_in_process():
    """The tier hooks of ``tests/conftest.py`` called directly (the subprocess test above runs a
    real ``pytest``, full tier): without ``--full`` every item marked by location or carrying
    ``slow`` is handed to ``pytest_deselected`` (deselected, not skipped), the rest keep their
    order, and the summary says how many; with ``--full`` all are kept, with their tier marks."""
    def items() -> list[_Item]:
        return [_Item("tests/test_model.py", "golden"), _Item("tests/e2e/test_load.py", "server"),
                _Item("tests/test_pages.py"), _Item("tests/test_sweeps.py", "app"),
                _Item("tests/test_cli.py", marks=("slow",)), _Item("tests/test_images.py")]

    def config(full: bool) -> tuple[SimpleNamespace, list]:
        deselected: list = []
        hook = SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items))
        return SimpleNamespace(getoption=lambda name: full if name == "--full" else None, hook=hook,
                               stash={}), deselected

    fast, (cfg, deselected) = items(), config(False)
    conftest.pytest_collection_modifyitems(cfg, fast)
    assert [i.path.name for i in fast] == ["test_model.py", "test_images.py"] and fast[0].marks == []
    assert [(i.path.name, i.marks) for i in deselected] == [
        ("test_load.py", ["e2e"]), ("test_pages.py", ["apptest"]), ("test_sweeps.py", ["apptest"]),
        ("test_cli.py", ["slow"])]
    lines: list[str] = []
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=lines.append), 0, cfg)
    assert lines == ["fast tier: 4 full-tier tests (apptest, e2e, slow) deselected; run `pytest --full` for everything"]

    full, (cfg, deselected) = items(), config(True)
    conftest.pytest_collection_modifyitems(cfg, full)
    assert deselected == [] and cfg.stash == {}
    assert [i.marks for i in full] == [[], ["e2e"], ["apptest"], ["apptest"], ["slow"], []]
    lines.clear()
    conftest.pytest_terminal_summary(SimpleNamespace(write_line=lines.append), 0, cfg)
    assert lines == []


def test_tier_markers_are_registered():
    text = (REPO / "pyproject.toml").read_text()
    markers = text.split("markers = [", 1)[1].split("]", 1)[0]
    assert sorted(re.findall(r'"(\w+):', markers)) == sorted(FULL_TIER)


def test_nothing_heavy_is_tracked():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO).stdout.split()
    assert not [f for f in files if f.endswith((".pth", ".pt", ".ckpt")) or f.startswith(".venv/")]


# --------------------------------------------------------------------------- globs that match nothing
def _static_path(node, names: dict, here):
    """The path an expression of a test module stands for, where it can be known without running
    the test: ``Path(__file__)``, ``.resolve()``, ``.parent``, ``.parents[n]``, ``/ "literal"``
    and module-level names built from those; ``None`` for anything else (``tmp_path``, a loop
    variable, a call)."""
    import ast
    from pathlib import Path

    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "Path" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "__file__":
            return Path(here)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "resolve" and not node.args:
            base = _static_path(node.func.value, names, here)
            return base.resolve() if isinstance(base, Path) else None
        return None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = _static_path(node.value, names, here)
        return base.parent if isinstance(base, Path) else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents" \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        base = _static_path(node.value.value, names, here)
        return base.parents[node.slice.value] if isinstance(base, Path) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _static_path(node.left, names, here), _static_path(node.right, names, here)
        return left / right if isinstance(left, Path) and isinstance(right, (str, Path)) else None
    return None


def _test_globs() -> list[tuple[str, str, "object"]]:
    """Every ``X.glob("…")`` / ``X.rglob("…")`` in the test files whose ``X`` is known statically
    (see :func:`_static_path`): ``(where, pattern, path)``."""
    import ast

    out = []
    for f in sorted([*(REPO / "tests").glob("*.py"), *(REPO / "tests" / "e2e").glob("*.py")]):
        tree = ast.parse(f.read_text())
        names: dict = {"REPO": REPO}
        for stmt in tree.body:  # module-level names, in order (REPO = Path(__file__)..., FOLDER = REPO / "x")
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                value = _static_path(stmt.value, names, f)
                if value is not None:
                    names[stmt.targets[0].id] = value
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("glob", "rglob") and len(node.args) == 1 \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                base = _static_path(node.func.value, names, f)
                if base is not None and not isinstance(base, str):
                    pattern = node.args[0].value if node.func.attr == "glob" else "**/" + node.args[0].value
                    out.append((f"{f.relative_to(REPO)}:{node.lineno}", pattern, base))
    return out


def test_every_glob_in_the_tests_matches_a_file():
    """A glob over the repository that matches nothing makes a test check nothing (a folder renamed,
    a file moved): every glob a test file makes over a path known without running it matches at
    least one file."""
    globs = _test_globs()
    assert len(globs) >= 6, f"the scan found too few globs to be checking anything: {globs}"
    empty = [f"{where}: {base}/{pattern}" for where, pattern, base in globs if not any(base.glob(pattern))]
    assert empty == []


def test_the_glob_scan_sees_a_glob_that_matches_nothing(tmp_path, monkeypatch):
    """The scan itself: a test file globbing a folder that does not exist is found, and reported."""
    fake = tmp_path / "repo"
    (fake / "tests" / "e2e").mkdir(parents=True)
    (fake / "tests" / "test_x.py").write_text(
        'from pathlib import Path\nREPO = Path(__file__).resolve().parents[1]\nFOLDER = REPO / "gone"\n'
        'FILES = sorted(FOLDER.glob("*.png"))\nOTHER = list((REPO / "tests").rglob("test_*.py"))\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO", fake)
    found = {(where, pattern, str(base)) for where, pattern, base in _test_globs()}
    assert found == {("tests/test_x.py:4", "*.png", str(fake / "gone")),
                     ("tests/test_x.py:5", "**/test_*.py", str(fake / "tests"))}
    assert [w for w, p, b in _test_globs() if not any(b.glob(p))] == ["tests/test_x.py:4"]
