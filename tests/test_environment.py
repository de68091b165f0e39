"""The environment variables: each package reads its own in one module, and the documentation lists them all.

Also :mod:`lpips_core.progress`, the one progress-callback shape.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lpips_core import environment as core_env
from lpips_core.progress import part, report
from lpips_explorer import environment as app_env

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ARCHITECTURE.md"


def _reads(path: Path) -> set[str]:
    """The ``LPIPS_EXPLORER_*`` names a source file spells out."""
    return set(re.findall(r"""["'](LPIPS_EXPLORER_[A-Z_]+)["']""", path.read_text()))


#: Page files that still read a variable themselves, with the reader that replaces it (none).
READS_ITS_OWN: dict[str, str] = {}


def test_each_package_reads_its_variables_in_one_module():
    """No module of the engine, the lessons, ``ui`` or the pages touches ``os.environ`` but the two
    ``environment`` modules, and each variable those read is in its table."""
    for module in (core_env, app_env):
        assert _reads(Path(module.__file__)) == {v.name for v in module.VARIABLES}, module.__name__
    files = [*(REPO / "lpips_core").rglob("*.py"), *(REPO / "lpips_explorer").rglob("*.py"),
             *(REPO / "ui").rglob("*.py"), *(REPO / "app_pages").glob("*.py"), REPO / "app.py"]
    readers = []
    for f in files:
        if f.name == "environment.py" or f.relative_to(REPO).as_posix() in READS_ITS_OWN:
            continue
        tree = ast.parse(f.read_text())
        readers += [f"{f.relative_to(REPO)}:{n.lineno}" for n in ast.walk(tree)
                    if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")
                    and isinstance(n.value, ast.Name) and n.value.id == "os"]
    assert readers == []
    assert not {v.name for v in core_env.VARIABLES} & {v.name for v in app_env.VARIABLES}


def test_every_variable_is_in_the_documentation_table():
    """docs/ARCHITECTURE.md's table lists every variable the two packages read, with its default."""
    text = DOC.read_text()
    rows = dict(re.findall(r"^\| `(LPIPS_EXPLORER_[A-Z_]+)` \| ([^|]+) \|", text, flags=re.M))
    for v in (*core_env.VARIABLES, *app_env.VARIABLES):
        assert v.name in rows, f"{v.name} is not in the table of {DOC.name}"
    assert set(rows) >= {v.name for v in (*core_env.VARIABLES, *app_env.VARIABLES)}


def test_engine_readers(monkeypatch, tmp_path):
    for name in ("LPIPS_EXPLORER_CACHE", "LPIPS_EXPLORER_OFFLINE", "LPIPS_EXPLORER_BATCH_TABLE",
                 "LPIPS_EXPLORER_NNPACK", "LPIPS_EXPLORER_CACHE_MB"):
        monkeypatch.delenv(name, raising=False)
    assert core_env.cache_root() == Path.home() / ".cache" / "lpips_explorer"
    assert core_env.batch_table() == core_env.cache_root() / "batch-table.json"
    assert (core_env.offline(), core_env.nnpack(), core_env.cache_mb("LPIPS_EXPLORER_CACHE_MB", 128)) == (
        False, True, 128 << 20)
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setenv("LPIPS_EXPLORER_OFFLINE", "yes")
    monkeypatch.setenv("LPIPS_EXPLORER_NNPACK", "0")
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE_MB", "1.5")
    assert core_env.cache_root() == tmp_path and core_env.batch_table() == tmp_path / "batch-table.json"
    assert (core_env.offline(), core_env.nnpack(), core_env.cache_mb("LPIPS_EXPLORER_CACHE_MB", 128)) == (
        True, False, int(1.5 * (1 << 20)))
    for off in ("off", "0", "no", "FALSE"):
        monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", off)
        assert core_env.batch_table() is None
    monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", str(tmp_path / "t.json"))
    assert core_env.batch_table() == tmp_path / "t.json"
    for bad, match in (("lots", "must be a number of MiB, got 'lots'"), ("-1", "must be ≥ 0, got '-1'")):
        monkeypatch.setenv("LPIPS_EXPLORER_CACHE_MB", bad)
        with pytest.raises(ValueError, match=f"LPIPS_EXPLORER_CACHE_MB {match}"):
            core_env.cache_mb("LPIPS_EXPLORER_CACHE_MB", 128)


def test_app_readers(monkeypatch, tmp_path):
    for v in app_env.VARIABLES:
        monkeypatch.delenv(v.name, raising=False)
    assert app_env.sweep_cache() == Path.home() / ".cache" / "lpips_explorer" / "sweeps"
    assert app_env.data_dir() == REPO / "data"
    assert app_env.scratch_budget_bytes(1 << 30) == 1 << 30 and app_env.scratch_grace_s(150.0) == 150.0
    assert app_env.upload_max_pixels() == 100_000_000 and app_env.heavy_jobs() >= 1
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", "OFF")
    monkeypatch.setenv("LPIPS_EXPLORER_DATA", str(tmp_path))
    monkeypatch.setenv("LPIPS_EXPLORER_HEAVY_JOBS", "0")
    monkeypatch.setenv("LPIPS_EXPLORER_SCRATCH", str(tmp_path / "s"))
    monkeypatch.setenv("LPIPS_EXPLORER_SCRATCH_MB", "2")
    monkeypatch.setenv("LPIPS_EXPLORER_SCRATCH_GRACE_S", "-5")
    monkeypatch.setenv("LPIPS_EXPLORER_UPLOAD_MAX_MP", "0.5")
    assert app_env.sweep_cache() is None and app_env.data_dir() == tmp_path and app_env.heavy_jobs() == 1
    assert app_env.scratch_root() == tmp_path / "s" and app_env.scratch_budget_bytes(1 << 30) == 2 << 20
    assert app_env.scratch_grace_s(150.0) == 0.0 and app_env.upload_max_pixels() == 500_000
    # not a number: the default (a server starts whatever its environment says)
    for name in ("LPIPS_EXPLORER_HEAVY_JOBS", "LPIPS_EXPLORER_SCRATCH_MB", "LPIPS_EXPLORER_UPLOAD_MAX_MP"):
        monkeypatch.setenv(name, "many")
    assert app_env.scratch_budget_bytes(1 << 30) == 1 << 30 and app_env.upload_max_pixels() == 100_000_000
    assert app_env.heavy_jobs() == max(1, (__import__("os").cpu_count() or 1) // 2)


# --------------------------------------------------------------------------- progress(done, total)
def test_progress_report_and_part():
    seen = []
    cb = lambda d, t: seen.append((d, t))  # noqa: E731
    assert report(None, 1, 2) is None
    report(cb, 5, 4)
    report(cb, -1, 4)
    sub = part(cb, 10, 20, 40)  # a step that covers units 10..20 of 40
    sub(0, 5)
    sub(2.5, 5)
    sub(5, 5)
    sub(1, 0)  # an empty step counts as finished
    assert seen == [(4, 4), (0, 4), (10.0, 40), (15.0, 40), (20.0, 40), (20.0, 40)]
    assert part(None, 0, 1, 1) is None
    assert report(lambda d, t: False, 1, 1) is False  # a caller's "stop" comes back
