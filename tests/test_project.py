"""Project-level promises: a pure library, README commands that CI really runs."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def test_library_does_not_import_streamlit():
    code = (
        "import sys, pkgutil, importlib, lpips_core\n"
        "for m in pkgutil.walk_packages(lpips_core.__path__, 'lpips_core.'):\n"
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
    assert "streamlit run app.py" in app_cmd and "pytest" in test_cmd
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci, "'.ci/run' must run the README's test command verbatim"


def test_nothing_heavy_is_tracked():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO).stdout.split()
    assert not [f for f in files if f.endswith((".pth", ".pt", ".ckpt")) or f.startswith(".venv/")]
