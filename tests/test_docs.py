"""The documents are the user's: every relative link and image in them exists, every Python snippet
in the README runs as written, the README stays a page (≤ 250 lines, with pictures of the app), and
no document, source or result file names a working session (the word "stop" and a number) instead of saying what the
code does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "benchmarks" / "RESULTS.md",
               REPO / "tests" / "data" / "README.md", REPO / "sample_images" / "README.md"])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)))
    return out


def test_the_documents_exist():
    assert all(p.is_file() for p in DOCS), [str(p) for p in DOCS if not p.is_file()]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_image_exists(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text(encoding="utf-8")):
            broken.append(target)
    assert broken == [], f"{doc.relative_to(REPO)}: broken links {broken}"


def test_the_readme_is_a_page_with_pictures_of_the_app():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    images = [t for t in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", text) if not t.startswith("http")]
    assert len(images) >= 3 and all((REPO / t).is_file() and t.startswith("docs/img/") for t in images), images


def test_no_document_source_or_result_names_a_working_session():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"\bstops? [0-9]+\b", re.I)
    hits = [f for f in files if pattern.search(f.replace("-", " ").replace("_", " "))]
    for f in files:
        path = REPO / f
        if path.suffix in (".py", ".md", ".json", ".toml", ".sh", ".txt", ".cfg") or f == ".ci/run":
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
            hits += [f"{f}:{n}" for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    assert hits == []


def _readme_snippets() -> list[str]:
    return PYTHON_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_python_snippets():
    assert len(_readme_snippets()) >= 1


@pytest.mark.parametrize("index", range(len(_readme_snippets())))
def test_every_readme_python_snippet_runs_verbatim(index):
    """Each ```python block, exactly as written, in a fresh interpreter at the repository root."""
    code = _readme_snippets()[index]
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"snippet {index}:\n{code}\n--- stderr:\n{proc.stderr[-3000:]}"
