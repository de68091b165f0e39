"""The shape of the code, read from the sources alone (AST and text; nothing is imported).

- No function of the app or the libraries is longer than :data:`MAX_LINES` lines (``def`` line to
  last line; a method counts, a function nested in another counts as part of it).
- No page declares a Streamlit cache: the pages call ``ui/`` helpers, which hold them.
- ``docs/ARCHITECTURE.md`` names every module of ``lpips_core``, ``lpips_explorer`` and ``ui`` in
  a table of the package's own section (:func:`doc_offenders` says what counts as named).
- A model is kept under its :class:`~lpips_core.spec.MetricSpec` only: no dictionary keyed by a
  tuple of a metric's parts (``(metric, net, version)``, ``(net, version)``), and no call of
  ``metric_registry.build`` outside ``lpips_core/spec.py`` (``MetricSpec.build``) and the registry.

Each check reports every offender as ``path:line what``; each scanner is also run on a small
source written here, so that a scanner that finds nothing cannot pass unnoticed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The most lines a function may take, from its ``def`` line to its last line inclusive.
MAX_LINES = 80
#: The packages whose every module the architecture document names.
PACKAGES = ("lpips_core", "lpips_explorer", "ui")
#: Where ``metric_registry.build`` may be called: the registry and ``MetricSpec.build``.
BUILD_ALLOWED = ("lpips_core/metric_registry.py", "lpips_core/spec.py")


def code_files() -> list[Path]:
    """The non-test sources: the three packages, the pages and ``app.py``."""
    files = [f for package in PACKAGES for f in (REPO / package).rglob("*.py")]
    return sorted([*files, *(REPO / "app_pages").glob("*.py"), REPO / "app.py"])


def _where(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


# --------------------------------------------------------------------------- function length
def long_functions(source: str, where: str, limit: int = MAX_LINES) -> list[str]:
    """``"where:line name (N lines)"`` for each function of ``source`` longer than ``limit`` lines.

    Functions at module level and methods (``Class.name``, classes nested in classes too) are
    measured; a function inside a function is part of its parent and not measured again.
    """
    out: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = child.end_lineno - child.lineno + 1
                if lines > limit:
                    out.append(f"{where}:{child.lineno} {prefix}{child.name} ({lines} lines)")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_no_function_is_longer_than_80_lines():
    """Every function of the app and the libraries fits in :data:`MAX_LINES` lines: a longer one
    is split into named steps."""
    files = code_files()
    assert len(files) > 50, f"the scan found too few files to be checking anything: {len(files)}"
    offenders = [o for f in files for o in long_functions(f.read_text(), _where(f))]
    assert offenders == [], "functions over 80 lines:\n" + "\n".join(offenders)


def test_the_length_scan_measures_methods_and_not_nested_functions_twice():
    body = "".join(f"    x{i} = {i}\n" for i in range(78))  # a def line + 78 + return: 80 lines
    source = (f"def fits():\n{body}    return 0\n\n\n"
              f"def long():\n{body}    y = 1\n    return y\n\n\n"
              f"class A:\n    class B:\n        def m(self):\n" + body.replace("    ", "            ")
              + "            z = 2\n            return z\n\n\n"
              f"def outer():\n    def inner():\n{body.replace('    ', '        ')}        return 1\n"
              "    return inner\n")
    assert long_functions(source, "m.py") == ["m.py:83 long (81 lines)", "m.py:168 A.B.m (81 lines)",
                                              "m.py:251 outer (82 lines)"]


# --------------------------------------------------------------------------- caches in pages
#: Streamlit's cache decorators (and the ones they replaced), by attribute or imported name.
CACHE_ATTRS = {"cache_data", "cache_resource", "experimental_memo", "experimental_singleton"}


def page_caches(source: str, where: str) -> list[str]:
    """``"where:line st.cache_…"`` for each use of a Streamlit cache in ``source``: a decorator,
    a call, ``st.cache`` or a cache imported by name."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and (
                node.attr in CACHE_ATTRS
                or node.attr == "cache" and isinstance(node.value, ast.Name) and node.value.id in ("st", "streamlit")):
            out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id in CACHE_ATTRS:
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.ImportFrom):
            out += [(node.lineno, f"import {a.name}") for a in node.names if a.name in CACHE_ATTRS]
    return [f"{where}:{line} {what}" for line, what in sorted(out)]


def test_no_page_declares_a_streamlit_cache():
    """Pages are thin: what they cache is a ``ui/`` helper's cache (models, pairs, uploads, the
    lessons' results), so a cache is declared, bounded and keyed in one place."""
    pages = sorted((REPO / "app_pages").glob("*.py"))
    assert pages, "no page found"
    offenders = [o for f in pages for o in page_caches(f.read_text(), _where(f))]
    assert offenders == [], "Streamlit caches declared in pages (move them to ui/):\n" + "\n".join(offenders)


def test_the_cache_scan_finds_every_form():
    source = ("import streamlit as st\nfrom streamlit import cache_resource\n\n"
              "@st.cache_data(max_entries=2)\ndef a(x):\n    return x\n\n"
              "b = st.cache_resource(lambda: 1)\n\n@cache_resource\ndef c():\n    return 2\n\n"
              "@st.cache\ndef d():\n    return 3\n\nui.cached_pair(1)\n")
    assert page_caches(source, "p.py") == ["p.py:2 import cache_resource", "p.py:4 st.cache_data",
                                          "p.py:8 st.cache_resource", "p.py:10 cache_resource", "p.py:14 st.cache"]


# --------------------------------------------------------------------------- the architecture document
def modules(package: str) -> list[tuple[str, ...]]:
    """The modules of ``package`` as path parts under it (``("datasets", "score")``), its
    packages' ``__init__`` left out."""
    root = REPO / package
    return sorted(f.relative_to(root).with_suffix("").parts for f in root.rglob("*.py") if f.name != "__init__.py")


_SPAN = re.compile(r"`([^`]+)`")


def _spans(text: str) -> list[str]:
    """The code spans of ``text``, each normalised: no ``()`` or trailing ``/``, ``/`` as ``.``."""
    return [s.strip().removesuffix("()").rstrip("/").replace("/", ".") for s in _SPAN.findall(text)]


def doc_sections(doc: str, package: str) -> list[list[tuple[str, list[str]]]]:
    """The tables of the ``##`` sections whose heading names ``package`` in a code span: for each
    section, its table rows as ``(the deeper heading above the row, or "", the row's cells)``; a
    section runs to the next ``##`` heading. Fenced code blocks are skipped."""
    sections: list[list[tuple[str, list[str]]]] = []
    rows: list[tuple[str, list[str]]] | None = None
    sub, fenced = "", False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            continue
        elif line.startswith("## "):
            rows = [] if package in _spans(line) else None
            sub = ""
            if rows is not None:
                sections.append(rows)
        elif line.startswith("###"):
            sub = line
        elif line.startswith("|") and rows is not None and not re.fullmatch(r"[|\s:-]+", line):
            rows.append((sub, [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]))
    return sections


def named(parts: tuple[str, ...], package: str, rows: list[tuple[str, list[str]]]) -> bool:
    """Whether a table row names the module ``package/parts…``.

    A row names it with a code span holding its dotted or slashed tail under the package
    (``images``, ``datasets.score``, ``datasets/score``, ``lpips_core.datasets.score``), or, for a
    module of a subpackage, its last part alone (``score``) in a row whose first cell is the
    subpackage (``datasets/``) or in a table under a ``###`` heading that names the subpackage in a
    code span (``### The datasets (`datasets/`)``). A subpackage's ``__main__`` is also named by
    ``python -m package.subpackage`` in a code span. Prose outside tables does not count.
    """
    tail = ".".join(parts)
    full = {tail, f"{package}.{tail}"}
    parent = ".".join(parts[:-1])
    parents = {parent, f"{package}.{parent}"} if parent else set()
    main = f"python -m {package}.{parent}" if parts[-1] == "__main__" and parent else None
    for sub, cells in rows:
        spans = {s for cell in cells for s in _spans(cell)}
        if spans & full or main is not None and any(s == main or s.startswith(main + " ") for s in spans):
            return True
        in_parent = parents & (set(_spans(cells[0])) | set(_spans(sub)))
        if in_parent and parts[-1] in spans:
            return True
    return False


def doc_offenders(doc: str) -> list[str]:
    """``"package/module.py"`` for each module ``docs/ARCHITECTURE.md`` does not name (see
    :func:`named`), or one line for a package without a section."""
    out = []
    for package in PACKAGES:
        sections = doc_sections(doc, package)
        if not sections:
            out.append(f"docs/ARCHITECTURE.md: no '## …' section names `{package}` in its heading")
            continue
        rows = [row for section in sections for row in section]
        out += [f"{package}/{'/'.join(parts)}.py" for parts in modules(package) if not named(parts, package, rows)]
    return out


def test_the_architecture_document_names_every_module():
    """``docs/ARCHITECTURE.md`` has a section per package (``## … (`lpips_core`)``) whose tables
    name each of its modules, so a module added without a word on its role fails here."""
    offenders = doc_offenders((REPO / "docs" / "ARCHITECTURE.md").read_text())
    assert offenders == [], "modules docs/ARCHITECTURE.md does not name:\n" + "\n".join(offenders)


def test_the_document_rule_is_strict_but_fair():
    """What names a module: a code span in a table row of the package's section (its tail, or its
    last part in its subpackage's row or table); not prose, not an unquoted word, not a word inside
    a command, not a module's last part in another subpackage's row."""
    doc = "\n".join([
        "## The engine (`lpips_core`)", "", "| module | role |", "|---|---|", "| `images`, `files` | … |",
        "| `datasets/` | discovery (`pairs`), the scorer (`score`) |", "| `space/gram` | the Gram matrix |",
        "| `__main__` | `python -m lpips_core compare\\|explain` |",
        "| `study/` | its CLI (`python -m lpips_core.study`) |", "", "```", "| `api` | in a fence |", "```", "",
        "### The datasets (`datasets/`)", "", "| module | role |", "|---|---|", "| `store` | tables |", "",
        "## Caching (`ui`)", "", "ui's `models` and `pair` in prose, not a table.", "", "| x | y |", "|---|---|",
        "| models | the app's models, unquoted |", "| `state` | … |", ""])
    rows = [r for s in doc_sections(doc, "lpips_core") for r in s]
    assert all(named(p, "lpips_core", rows) for p in [("images",), ("files",), ("datasets", "pairs"),
                                                       ("datasets", "score"), ("datasets", "store"),
                                                       ("space", "gram"), ("__main__",), ("study", "__main__")])
    assert not any(named(p, "lpips_core", rows) for p in [("api",), ("datasets", "explain"), ("space", "embed"),
                                                           ("compare",), ("gram",), ("space", "__main__")])
    ui_rows = [r for s in doc_sections(doc, "ui") for r in s]
    assert named(("state",), "ui", ui_rows) and not named(("models",), "ui", ui_rows)
    assert doc_sections(doc, "lpips_explorer") == []


# --------------------------------------------------------------------------- model keys
#: The parts of a metric's identity that, put in a tuple, make a key a spec replaces.
_PARTS = {"metric", "net", "version", "v", "lin"}


def _part(node: ast.AST) -> str | None:
    """The identity part an expression stands for: a name or attribute called ``metric``, ``net``,
    ``version``, ``v`` or ``lin``, or a string constant (a metric's name spelled out)."""
    if isinstance(node, ast.Name) and node.id in _PARTS:
        return node.id
    if isinstance(node, ast.Attribute) and node.attr in _PARTS:
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "literal"
    return None


def _parts_key(node: ast.AST | None) -> bool:
    """A tuple of a metric's identity parts: ``net`` with the metric, the version or the head."""
    if not isinstance(node, ast.Tuple) or len(node.elts) < 2:
        return False
    parts = [_part(e) for e in node.elts]
    return "net" in parts and any(p not in (None, "net") for p in parts)


def tuple_model_keys(source: str, where: str) -> list[str]:
    """``"where:line key"`` for each dictionary keyed by a tuple of identity parts: a subscript
    (``d[(spec.metric, spec.net, spec.version)]``), a dict display or comprehension, ``.get``/
    ``.setdefault``/``.pop``, or a name bound to such a tuple and called ``key``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        keys: list[ast.AST | None] = []
        if isinstance(node, ast.Subscript):
            keys = [node.slice]
        elif isinstance(node, ast.Dict):
            keys = list(node.keys)
        elif isinstance(node, ast.DictComp):
            keys = [node.key]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "setdefault", "pop"):
            keys = [node.args[0]]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "key" in t.id.lower()
                                                  for t in node.targets):
            keys = [node.value]
        out += [(k.lineno, ast.unparse(k)) for k in keys if _parts_key(k)]
    return [f"{where}:{line} {key}" for line, key in sorted(set(out))]


def registry_builds(source: str, where: str) -> list[str]:
    """``"where:line call"`` for each call of ``metric_registry.build`` (under any alias of the
    module, or ``build`` imported from it)."""
    tree = ast.parse(source)
    modules_, functions = {"metric_registry"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name == "metric_registry":
                    modules_.add(a.asname or a.name)
                elif a.name == "build" and (node.module or "").endswith("metric_registry"):
                    functions.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules_ |= {a.asname for a in node.names if a.name.endswith("metric_registry") and a.asname}
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "build" and (
                isinstance(f.value, ast.Name) and f.value.id in modules_
                or isinstance(f.value, ast.Attribute) and f.value.attr == "metric_registry") \
                or isinstance(f, ast.Name) and f.id in functions:
            out.append((node.lineno, f"{ast.unparse(f)}(…)"))
    return [f"{where}:{line} {call}" for line, call in sorted(out)]


def test_models_are_kept_under_their_spec():
    """A model cache is keyed by the model's :class:`~lpips_core.spec.MetricSpec` (its
    ``model_spec``), and models are built by the spec (``MetricSpec.build``): no dictionary keyed
    by ``(metric, net, version)`` or ``(net, version)`` tuples, no ``metric_registry.build``
    outside the registry and ``spec.py``."""
    offenders = []
    for f in code_files():
        source, where = f.read_text(), _where(f)
        offenders += tuple_model_keys(source, where)
        if where not in BUILD_ALLOWED:
            offenders += registry_builds(source, where)
    assert offenders == [], "models keyed or built other than by their spec:\n" + "\n".join(offenders)


def test_the_model_key_scans_find_what_they_must():
    source = ("from lpips_core import metric_registry as reg\nfrom lpips_core.metric_registry import build as b\n"
              "key = (spec.metric, spec.net, spec.version)\n"
              "models[(net, v)] = m\n"
              "built = {('lpips', net, v): m for (net, v), m in given.items()}\n"
              "cache.get((s.net, s.version))\n"
              "m = reg.build('lpips', 'alex')\nm = b('lpips')\nm = lpips_core.metric_registry.build('dists')\n"
              "ok = {spec.model_spec: m}\nsizes[(net, size)] = 1\ngrid = {(h, w): 1}\nm = spec.build(device='cpu')\n")
    assert tuple_model_keys(source, "x.py") == ["x.py:3 (spec.metric, spec.net, spec.version)", "x.py:4 (net, v)",
                                                "x.py:5 ('lpips', net, v)", "x.py:6 (s.net, s.version)"]
    assert registry_builds(source, "x.py") == ["x.py:7 reg.build(…)", "x.py:8 b(…)",
                                               "x.py:9 lpips_core.metric_registry.build(…)"]


# --------------------------------------------------------------------------- pages and the ui package
#: The statements a page may hold at module level besides the last line's ``main()``.
PAGE_TOP_LEVEL = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef)


def page_shape(source: str, where: str) -> list[str]:
    """What breaks the one page style in ``source``: a page is its docstring, imports, constants,
    functions and classes, and last ``main()``, the function that draws it top to bottom (its
    parts that rerun alone are functions decorated with ``@page_fragment``). A constant may not
    call Streamlit (``x = st.slider(…)`` at module level is page code outside ``main``)."""
    tree = ast.parse(source)
    body = list(tree.body)
    out = []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    else:
        out.append(f"{where}:1 no docstring")
    last = body[-1] if body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and ast.unparse(last.value) == "main()"):
        out.append(f"{where}:{getattr(last, 'lineno', 1)} the last statement is not main()")
    else:
        body = body[:-1]
    if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in body):
        out.append(f"{where}:1 no main()")
    for node in body:
        if not isinstance(node, PAGE_TOP_LEVEL):
            out.append(f"{where}:{node.lineno} {ast.unparse(node).splitlines()[0][:60]}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "st"
                for n in ast.walk(node)):
            out.append(f"{where}:{node.lineno} Streamlit at module level: {ast.unparse(node).splitlines()[0][:60]}")
    return out


def test_every_page_has_one_shape():
    pages = sorted((REPO / "app_pages").glob("*.py"))
    offenders = [o for f in pages for o in page_shape(f.read_text(), _where(f))]
    assert offenders == [], "pages outside the one page style:\n" + "\n".join(offenders)


def test_the_page_shape_scan_finds_what_it_must():
    good = '"""A page."""\nimport streamlit as st\n\nTITLE = "x"\n\n\ndef main():\n    st.title(TITLE)\n\n\nmain()\n'
    assert page_shape(good, "p.py") == []
    bad = '"""A page."""\nimport streamlit as st\n\nst.title("x")\nx = st.slider("a", 0, 1)\nif x:\n    pass\n'
    assert page_shape(bad, "p.py") == ["p.py:6 the last statement is not main()", "p.py:1 no main()",
                                       "p.py:4 st.title('x')", "p.py:5 Streamlit at module level: x = st.slider('a', 0, 1)",
                                       "p.py:6 if x:"]


def ui_package_uses(source: str, where: str) -> list[str]:
    """Where ``source`` uses the ``ui`` package itself rather than one of its modules: ``import ui``
    and ``ui.name`` (names are imported from the module that defines them, so go-to-definition
    finds them; ``import ui.text`` then ``ui.text.x`` is a module's name and allowed)."""
    tree = ast.parse(source)
    out = [(n.lineno, "import ui") for n in ast.walk(tree) if isinstance(n, ast.Import)
           for a in n.names if a.name == "ui"]
    out += [(n.lineno, f"from ui import {a.name}") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module == "ui" and not n.level for a in n.names if not (REPO / "ui" / f"{a.name}.py").exists()]
    dotted = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name.startswith("ui.")}
    if not any(what == "import ui" for _, what in out):
        return [f"{where}:{line} {what}" for line, what in sorted(out)]
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ui" \
                and f"ui.{n.attr}" not in dotted:
            out.append((n.lineno, f"ui.{n.attr}"))
    return [f"{where}:{line} {what}" for line, what in sorted(out)]


def test_names_come_from_the_ui_module_that_defines_them():
    files = [*code_files(), *sorted((REPO / "tests").rglob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py"))]
    offenders = [o for f in files for o in ui_package_uses(f.read_text(), _where(f))]
    assert offenders == [], "the ui package used as a namespace (import from its modules):\n" + "\n".join(offenders)


def test_the_ui_scan_finds_what_it_must():
    source = "import ui\nimport ui.text\nfrom ui import links, reference\n\nui.md_escape('x')\nui.text.fmt(1)\n"
    assert ui_package_uses(source, "x.py") == ["x.py:1 import ui", "x.py:3 from ui import reference",
                                               "x.py:5 ui.md_escape"]
    assert ui_package_uses("import ui.text\n\nui.text.fmt(1)\n", "x.py") == []
