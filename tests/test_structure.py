"""The package's shape: no import cycle between specviz's modules, each module imports on its own and is
small, streamlit stays in the app layer, pages stay thin, and docs/DESIGN.md and its notes are cited correctly.

The import graph is read from the source (ast), every `from .x import`, `from . import x` and
`import specviz.x`, lazy imports inside functions included: a cycle broken only by a lazy import is
still two modules that need each other.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "specviz"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The specviz modules that the module `name` (at `path`) imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            found.add(base_name)
            found.update(f"{base_name}.{alias.name}" for alias in node.names)  # `from . import builtin`
    return {m for m in found if m in known and m != name}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    paths = modules(package)
    return {name: imported(path, name, set(paths)) for name, path in paths.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle_in_specviz():
    graph = import_graph()
    assert "specviz.bench.cli" in graph["specviz.bench"]  # the walk sees relative imports
    assert "specviz.decoding.engine" in graph["specviz.bench.curve"]
    assert find_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import x\n")
    (package / "b.py").write_text("def f():\n    from .sub.c import y\n")  # a lazy import closes it
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import a\n")
    (package / "d.py").write_text("from .a import x\n")  # imports the cycle, not part of it
    assert find_cycles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


# The package's layers, lowest first (specviz/__init__.py draws the same picture): a module imports from its own
# folder and from lower layers only; folders on one line stand side by side and never import each other.
LAYERS = (
    ("specviz", "specviz.errors", "specviz.progress"),
    ("specviz.models",),
    ("specviz.decoding",),
    ("specviz.drafters",),
    ("specviz.traces", "specviz.training"),
    ("specviz.runs",),
    ("specviz.lessons", "specviz.cli"),
    ("specviz.bench", "specviz.serving", "specviz.markup"),
    ("specviz.charts",),
    ("specviz.ui",),
    ("specviz.__main__",),
)
ENTRY_POINTS = {"specviz", "specviz.__main__", "specviz.errors", "specviz.progress", "specviz.runs"}


def layer_of(module: str) -> tuple[str, int]:
    """(the folder or top-level module that `module` belongs to, its layer)."""
    best = ("", -1, -1)
    for rank, units in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".")) and len(unit) > best[2]:
                best = (unit, rank, len(unit))
    assert best[1] >= 0, f"{module} is in no layer: add its folder to LAYERS"
    return best[0], best[1]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from another folder of the same or a higher layer."""
    found = []
    for name, targets in sorted(graph.items()):
        unit, rank = layer_of(name)
        for target in sorted(targets):
            target_unit, target_rank = layer_of(target)
            if target_unit != unit and target_rank >= rank:
                found.append(f"{name} imports {target}")
    return found


def test_lower_layers_never_import_higher_ones():
    assert layer_violations(import_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {
        "specviz.decoding.engine": {"specviz.drafters.model", "specviz.decoding.kvcache"},
        "specviz.bench.run": {"specviz.serving.jobs", "specviz.runs"},  # side by side: neither may import the other
        "specviz.ui.pair": {"specviz.models.loading"},
    }
    assert layer_violations(graph) == [
        "specviz.bench.run imports specviz.serving.jobs",
        "specviz.decoding.engine imports specviz.drafters.model",
    ]


def test_every_module_lives_in_a_folder_but_the_entry_points():
    top = {name for name in modules() if name.count(".") == 1 or name == "specviz"}
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert top - packages == ENTRY_POINTS - {"specviz"}


# One interpreter imports every third-party name specviz's sources import, then forks a child per module, which
# imports that module with no specviz module loaded yet: as a fresh interpreter per module would, in a fraction of
# the time (each fresh one spent seconds importing torch and transformers again). Third-party modules cannot hide a
# cycle between specviz's own, and a forgotten `import torch` is still a NameError: the child's module has its own
# names. Preloading is best effort; whatever fails there fails again, visibly, in the child.
IMPORT_EACH_ALONE = r"""
import importlib, json, os, sys, traceback
for module, name in json.loads(sys.argv[1]):
    try:
        loaded = importlib.import_module(module)
        if name:
            getattr(loaded, name, None) or importlib.import_module(f"{module}.{name}")
    except Exception:
        pass
for name in json.loads(sys.argv[2]):
    package = name.split(".")[0]
    assert not any(m == package or m.startswith(package + ".") for m in sys.modules), f"{package} preloaded"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(name)
            error = ""
        except BaseException:
            error = traceback.format_exc()
        with os.fdopen(write, "w") as out:
            out.write(error)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        error = got.read()
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"name": name, "error": error or ("" if status == 0 else f"child exit status {status}")}))
"""


def third_party_imports(sources: list[Path], package: str) -> list[tuple[str, str]]:
    """(module, name) for every absolute import outside `package` in the sources: `import a.b` as (a.b, ""),
    `from a.b import c` as (a.b, c)."""
    found: set[tuple[str, str]] = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update((alias.name, "") for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.update((node.module, alias.name) for alias in node.names)
    return sorted((module, name) for module, name in found if module.split(".")[0] != package)


def import_each_alone(names: list[str], cwd: Path, preload: list[tuple[str, str]]) -> dict[str, str]:
    """Module name -> the traceback of importing it first in a process that holds no module of its package
    ("" when it imported)."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_ALONE, json.dumps(preload), json.dumps(names)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    reported = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r["error"] for r in reported}


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, str]:
    return import_each_alone(sorted(modules()), ROOT, third_party_imports(sorted(PACKAGE.rglob("*.py")), "specviz"))


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_imports_alone(name, imported_alone):
    """Each module imports first, with no other specviz module loaded: an import-order cycle would fail here."""
    assert imported_alone[name] == ""


def test_the_alone_check_reports_an_import_order_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import helper\n\nVALUE = 1\n")
    (package / "b.py").write_text("from .a import VALUE\n\n\ndef helper():\n    return VALUE\n")
    (package / "c.py").write_text("import json\n")
    preload = third_party_imports(sorted(package.glob("*.py")), "pkg")
    assert preload == [("json", "")]
    found = import_each_alone(["pkg.a", "pkg.b", "pkg.c"], tmp_path, preload)
    assert "ImportError" in found["pkg.a"] and "ImportError" in found["pkg.b"]  # each, imported first, breaks
    assert found["pkg.c"] == ""


def function_lengths(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


SOURCES = sorted(PACKAGE.rglob("*.py"))
PAGES = sorted((ROOT / "pages").glob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_is_small(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500
    assert {name: n for name, n in function_lengths(path).items() if n > 60} == {}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_streamlit_stays_in_the_app_layer(path):
    if path.relative_to(PACKAGE).parts[0] == "ui":
        return
    names = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    modules_from = {
        node.module.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    assert "streamlit" not in names | modules_from


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_pages_are_short_and_hold_no_torch_and_no_hand_written_state(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 100
    assert "torch" not in text and "session_state" not in text


# Docs: code cites a section of docs/DESIGN.md or of a dated note by its title; the map and the README's layout
# name every module.
CITATION = re.compile(r'(docs/(?:DESIGN|notes/[\w.-]+)\.md),? (?:# )?(?:section )?"([^"]+)"')  # may wrap in a comment


def headings(path: Path) -> set[str]:
    """The section titles of a markdown file (fenced code left out)."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(line.lstrip("#").strip())
    return found


def unresolved_citations(files: list[Path], root: Path = ROOT) -> tuple[dict[str, list[str]], list[str]]:
    """({cited doc: titles it lacks}, files naming a DESIGN.md outside docs/), and the docs cited at all as keys."""
    cited: dict[str, set[str]] = {}
    outside: list[str] = []
    for path in files:
        text = " ".join(path.read_text(encoding="utf-8").split())  # a citation may wrap across lines
        for doc, title in CITATION.findall(text):
            cited.setdefault(doc, set()).add(title)
        outside += [path.name for m in re.finditer(r"(\S*)DESIGN\.md", text) if not m.group(1).endswith("docs/")]
    lacking = {
        doc: sorted(titles - (headings(root / doc) if (root / doc).is_file() else set()))
        for doc, titles in cited.items()
    }
    return lacking, outside


def test_every_design_doc_citation_names_a_section_and_no_file_outside_the_repo():
    scripts = [p for p in (ROOT / "scripts").glob("*.*") if p.suffix in (".py", ".sh")]
    tests = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.name != "test_structure.py"]
    files = [
        *SOURCES,
        *PAGES,
        ROOT / "app.py",
        *scripts,
        *tests,
        ROOT / ".streamlit" / "config.toml",
        ROOT / "requirements.txt",
        ROOT / "requirements-dev.txt",
        ROOT / "README.md",
    ]
    lacking, outside = unresolved_citations(files)
    assert "docs/DESIGN.md" in lacking  # the check reads citations at all
    assert {doc: titles for doc, titles in lacking.items() if titles} == {}
    assert outside == []


def test_the_design_doc_citation_check_finds_a_missing_section(tmp_path):
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "DESIGN.md").write_text("# Design\n\n## The engine\n\n```\n# Not a title\n```\n")
    (tmp_path / "docs" / "notes" / "n.md").write_text("# Note\n\n### Measured\n")
    code = tmp_path / "code.py"
    code.write_text(
        '# docs/DESIGN.md, "The engine"; docs/DESIGN.md,\n# "Not a title"; docs/notes/n.md, "Measured";\n'
        '# docs/notes/n.md, "Gone"; docs/notes/none.md, "Any"; see DESIGN.md\n'
    )
    lacking, outside = unresolved_citations([code], tmp_path)
    assert lacking == {"docs/DESIGN.md": ["Not a title"], "docs/notes/n.md": ["Gone"], "docs/notes/none.md": ["Any"]}
    assert outside == ["code.py"]


def section(path: Path, title: str) -> str:
    """The text of the `## title` section of a markdown file, up to the next section of that level or above."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
    return "\n".join(lines[start:end])


def named_modules(layout: str) -> set[str]:
    """The modules a layout names, as paths under specviz/. A line that starts with `folder/` names that folder (its
    __init__.py) and, on it and on the lines after it, its modules by name, with or without .py; a line that starts
    with `name.py` (or `specviz/`, or any line before the first folder) names top-level modules."""
    folder, named = "", set()
    for line in layout.splitlines():
        start = re.match(r"\s*(\w+)(/|\.py\b)", line)
        if start:
            folder = "" if start.group(2) == ".py" or start.group(1) == "specviz" else start.group(1) + "/"
            if folder:
                named.add(folder + "__init__.py")
        for word in re.findall(r"[\w.]+", line):
            named.add(folder + (word if word.endswith(".py") else word + ".py"))
    return named


@pytest.mark.parametrize("doc, title", [("docs/DESIGN.md", "Map: every module"), ("README.md", "Layout")])
def test_design_map_and_readme_layout_name_every_module(doc, title):
    expected = {str(path.relative_to(PACKAGE)) for path in SOURCES}
    missing = sorted(expected - named_modules(section(ROOT / doc, title)))
    assert missing == [], f"add these modules to {doc}, {title!r}: {missing}"


def test_the_design_map_check_finds_a_missing_module():
    named = named_modules("__init__.py\ndecoding/engine.py  the round\n  tree\n  runs.py\nmodels/   loading\n")
    assert {"__init__.py", "runs.py", "decoding/__init__.py", "decoding/engine.py", "decoding/tree.py"} <= named
    assert "models/loading.py" in named and "models/builtin.py" not in named and "decoding/kvcache.py" not in named
    assert "decoding/runs.py" not in named and "runs/loading.py" not in named


def test_design_doc_links_and_notes_resolve():
    docs = [ROOT / "README.md", ROOT / "docs" / "DESIGN.md", *sorted((ROOT / "docs" / "notes").glob("*.md"))]
    broken = [
        f"{doc.relative_to(ROOT)}: {link}"
        for doc in docs
        for link in re.findall(r"\]\(([^)#\s]+)[^)]*\)", doc.read_text(encoding="utf-8"))
        if "://" not in link and not (doc.parent / link).exists()
    ]
    assert broken == []
    notes = {path.name for path in (ROOT / "docs" / "notes").glob("2*.md")}
    linked = set(re.findall(r"notes/(2[\w.-]+\.md)", (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")))
    assert notes and notes == linked  # every dated note is linked from DESIGN.md, and every link is a note


BESIDE_THE_PACKAGE = {  # tests/ folders that mirror no package folder, each with what it holds
    "browser": "the app's pages walked in a real Chromium",
    "scripts": "the scripts/ folder's checks",
    "real": "every test on the built-in pair (marker real)",
    "helpers": "plain helpers the test modules import",
    "data": "files the tests read",
}


def test_the_tests_folders_mirror_the_package():
    """tests/decoding/ tests specviz/decoding/, and so on; at tests/ itself only the package's own top-level modules'
    tests (test_runs.py for runs.py) and this one."""
    tests = ROOT / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    package = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders - package == set(BESIDE_THE_PACKAGE)
    top_level = {p.stem for p in PACKAGE.glob("*.py")} | {"structure"}
    assert {p.stem.removeprefix("test_") for p in tests.glob("test_*.py")} <= top_level
    assert not [p for p in tests.rglob("*.py") if p.parent == tests and not p.name.startswith(("test_", "conftest"))]
