"""The package's shape: no import cycle between specviz's modules, and each module imports on its own.

The import graph is read from the source (ast), every `from .x import`, `from . import x` and
`import specviz.x`, lazy imports inside functions included: a cycle broken only by a lazy import is
still two modules that need each other.
"""
from __future__ import annotations

import ast
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
            found.update(f"{base_name}.{alias.name}" for alias in node.names)   # `from . import builtin`
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
    assert "specviz.bench.cli" in graph["specviz.bench"]          # the walk sees relative imports
    assert "specviz.engine" in graph["specviz.bench.curve"]
    assert find_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import x\n")
    (package / "b.py").write_text("def f():\n    from .sub.c import y\n")   # a lazy import closes it
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import a\n")
    (package / "d.py").write_text("from .a import x\n")                  # imports the cycle, not part of it
    assert find_cycles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


@pytest.mark.parametrize("name", sorted(n for n in modules() if n.startswith("specviz.bench")) + [
    "specviz.__main__", "specviz.cli_args", "specviz.models", "specviz.builtin", "specviz.prompts",
    "specviz.progress", "specviz.errors", "specviz.config", "specviz.tiny"])
def test_module_imports_alone(name):
    """Each module imports in a fresh interpreter, first: an import-order cycle would fail here."""
    result = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


def function_lengths(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


BENCH_AND_LOADING = sorted((PACKAGE / "bench").glob("*.py")) + [
    PACKAGE / name for name in ("__main__.py", "cli_args.py", "models.py", "builtin.py", "prompts.py",
                                "progress.py", "errors.py", "config.py", "tiny.py", "prefetch.py")]


@pytest.mark.parametrize("path", BENCH_AND_LOADING, ids=lambda p: p.name)
def test_bench_and_loading_modules_are_small(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500
    assert {name: n for name, n in function_lengths(path).items() if n > 60} == {}
