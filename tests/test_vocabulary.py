"""One acceptance vocabulary on every page, the serving engines' own (issue 43; docs/DESIGN.md, "The algorithm and
its notation"): acceptance rate (accepted / drafted), mean acceptance length (tokens per target pass, bonus
included), per-position acceptance, and Leviathan's a, with the bridge between a and the rate wherever the two stand
together.

Every string literal that can reach the screen (the pages, the Streamlit layer, the markup, the figures and the
lessons' words; docstrings and comments left out) is searched for the old mixed terms a browser review found side by
side: "Tokens / target pass" beside "tokens per round", "57% kept" beside "a = 0.81", a slider "a: acceptance rate"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from specviz import markup

ROOT = Path(__file__).resolve().parent.parent
SHOWN = [ROOT / "pages", *(ROOT / "specviz" / name for name in ("ui", "markup", "charts", "lessons"))]
OLD_TERMS = {  # pattern: what to say instead
    r"(?<!draft )(?<!drafted )tokens per round|tokens / round|tokens/round": "mean acceptance length (tokens per pass)",
    r"Tokens / target pass": "Mean acceptance length",
    r"accepted ?/ ?round|accepted tokens per round": "draft tokens accepted per round",
    r"\b\d+% kept|\bkept \d+%|% of the drafted tokens were kept|of its drafts kept": "acceptance rate N%",
    r"a: acceptance rate|\(the acceptance rate\)|per-token acceptance a": "Leviathan's a (the chance a token is kept)",
}


def shown_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal in a module but its docstrings; an f-string's literal parts joined."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    docstrings |= parts  # an f-string's pieces are searched joined, once
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append((node.lineno, node.value))
    return found


def old_terms_in(paths: list[Path]) -> list[str]:
    hits = []
    for folder in paths:
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else [folder]:
            strings = shown_strings(path)
            # implicit concatenation is one Constant already; adjacent f-string pieces are searched joined too
            for line, text in strings:
                for pattern, instead in OLD_TERMS.items():
                    if re.search(pattern, text, flags=re.IGNORECASE):
                        hits.append(f"{path.name}:{line}: {text[:80]!r} -> say {instead!r}")
    return hits


def test_no_page_uses_the_old_mixed_terms():
    hits = old_terms_in(SHOWN)
    assert not hits, "\n".join(hits)


def test_the_search_finds_an_old_term(tmp_path):
    """The negative control: a module that shows an old term is caught (docstrings are not)."""
    bad = tmp_path / "bad.py"
    bad.write_text('"""tokens per round in a docstring is fine."""\nLABEL = f"Tokens per round: {3}"\n')
    assert len(old_terms_in([bad])) == 1


@pytest.mark.parametrize("term", ["Acceptance rate", "Leviathan's **a**", "Mean acceptance length", "unchecked"])
def test_the_bridge_names_both_numbers_and_why_they_differ(term):
    assert term in markup.A_BRIDGE
