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

ROOT = Path(__file__).resolve().parents[2]
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


# --- issue 55: a against the acceptance rate, provenance of recorded numbers, commands in the learner's text ---------

# "acceptance rate" naming Leviathan's a: "a (acceptance rate)", "a the acceptance rate", "a: acceptance rate",
# "acceptance rate (a)", "acceptance rate a = ..."; a is the expected acceptance, the rate is accepted / drafted
A_AS_RATE = re.compile(
    r"\ba\s*(?:[:=,]\s*|\(\s*|\s+)(?:the\s+)?acceptance rate\b"
    r"|acceptance rate\s*(?:\(\s*a\s*\)|,?\s+a\s*(?:[=,);:]|$))",
    re.IGNORECASE,
)
# "this CPU" / "this machine" beside a number: only a live number may say it, and then "now" ("measured on this
# machine now"); the server's words (where it listens, what runs on it) name no number
THIS_MACHINE = re.compile(r"\bthis (?:CPU|machine|computer)\b(?!(?:'s)? now)", re.IGNORECASE)
BESIDE_A_NUMBER = re.compile(r"\d|\{\}|\brecord", re.IGNORECASE)
ABOUT_THE_SERVER = re.compile(r"\bserver\b", re.IGNORECASE)
# a command line or a file of ours: it belongs under a "How this was recorded" expander (ui.how_recorded)
COMMAND = re.compile(r"python -m\b|\bscripts/\S+\.py|\bassets/\S|\.venv/")


def a_as_rate(texts: list[str]) -> list[str]:
    return [t[:90] for t in texts if A_AS_RATE.search(t)]


def this_machine_beside_a_number(texts: list[str]) -> list[str]:
    return [
        t[:90] for t in texts if THIS_MACHINE.search(t) and BESIDE_A_NUMBER.search(t) and not ABOUT_THE_SERVER.search(t)
    ]


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_expander(node: ast.AST) -> bool:
    """`with st.expander(...)` / `with x.expander(...)`, a call to ui.how_recorded / how_recorded, or a pattern
    (re.compile: matched against text, never shown)."""
    return _called(node) in ("expander", "how_recorded", "compile")


def commands_outside_an_expander(path: Path) -> list[str]:
    """Every shown string that holds a command line or one of our paths and is not under an expander: inside a
    `with ….expander(…)` block, an argument of how_recorded, or a module constant only such a call reads."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(_is_expander(item.context_expr) for item in node.items):
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        if isinstance(node, ast.Call) and _is_expander(node):
            inside |= {id(n) for arg in (*node.args, *node.keywords) for n in ast.walk(arg)}
    read_there = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) in inside}
    read_elsewhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in inside}
    for node in tree.body:  # NAME = "python -m ..." read only under an expander
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in read_there and name not in read_elsewhere - {name}:
                inside |= {id(n) for n in ast.walk(node.value)}
    shown = {line for line, _ in shown_strings(path)}
    hits = []
    for node in ast.walk(tree):
        if id(node) in inside or getattr(node, "lineno", None) not in shown:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if COMMAND.search(text) and (node.lineno, text) in shown_strings(path):
            hits.append(f"{path.name}:{node.lineno}: {text[:80]!r}")
    return hits


def shown_files(paths: list[Path]) -> list[Path]:
    return [p for folder in paths for p in (sorted(folder.rglob("*.py")) if folder.is_dir() else [folder])]


def all_shown_strings(paths: list[Path]) -> list[str]:
    return [text for path in shown_files(paths) for _, text in shown_strings(path)]


def test_no_page_calls_a_the_acceptance_rate():
    hits = a_as_rate(all_shown_strings(SHOWN))
    assert not hits, "\n".join(hits)


def test_no_page_says_this_machine_beside_a_number_it_did_not_measure_now():
    hits = this_machine_beside_a_number(all_shown_strings(SHOWN))
    assert not hits, "\n".join(hits)


def test_no_command_line_or_path_outside_an_expander():
    hits = [hit for path in shown_files(SHOWN) for hit in commands_outside_an_expander(path)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize(
    "text",
    [
        "a (acceptance rate)",
        "1 − (1 − a^γ)^B, a the acceptance rate",
        "a: acceptance rate",
        "the acceptance rate (a) is 0.61",
        "acceptance rate a = 0.61",
    ],
)
def test_the_search_finds_a_called_the_acceptance_rate(text):
    """Negative control: each way the pages once called a the acceptance rate is caught."""
    assert a_as_rate([text])


@pytest.mark.parametrize(
    "text",
    [
        "a (expected acceptance)",
        "Acceptance rate 62%: accepted ÷ drafted. Leviathan's a is higher.",
        "a, the share of checked drafts kept",
        "the acceptance rate a learner sees",
    ],
)
def test_the_search_lets_the_right_words_through(text):
    assert not a_as_rate([text])


def test_the_search_finds_this_machine_beside_a_recorded_number():
    """Negative control: the words issue 55 found, and the allowed ones."""
    assert this_machine_beside_a_number(["this CPU's speed drifts (B = {} at γ = {})"])
    assert this_machine_beside_a_number(["Measured on this machine: c = {}"])
    assert this_machine_beside_a_number(["At what acceptance rate does γ 8 stop paying on this CPU?"])
    assert not this_machine_beside_a_number(["c = {}, measured on this machine now"])
    assert not this_machine_beside_a_number(["where the server listens beyond this machine"])


def test_the_search_finds_a_command_outside_an_expander(tmp_path):
    """Negative control: a command in a caption is caught; under an expander, or in how_recorded, it is not."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        'import streamlit as st\nst.caption("Recorded with `python -m specviz bench --stream x`")\n'
        'st.info(f"run {1} by scripts/record_assets.py")\n'
    )
    assert len(commands_outside_an_expander(bad)) == 2
    good = tmp_path / "good.py"
    good.write_text(
        'import streamlit as st\nCOMMAND = "python -m specviz bench"\nhow_recorded(COMMAND)\n'
        'with st.expander("How this was recorded"):\n    st.code("python -m specviz train-heads")\n'
        'ui.how_recorded("python -m specviz bench --batch 1,2")\n'
    )
    assert commands_outside_an_expander(good) == []


def _strings(value: object) -> list[str]:
    """Every string in a figure's JSON (titles, axis titles, legend names, annotations, hover templates)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def rendered_texts() -> dict[str, list[str]]:
    """What the pages render from the shipped recordings, by where it shows: the Theory and Batching figures, the
    Batching words, the verify-cost curve's provenance, and every recorded run's caption."""
    from specviz import charts
    from specviz.lessons import lab, theory
    from specviz.markup import batching as words
    from specviz.traces.batching import load_batching
    from specviz.traces.trace import load_trace

    curve = theory.load_verify_curve(ROOT / "assets" / "verify_curve_cpu.json")
    doc = load_batching(ROOT / "assets" / "batching_cpu.json")
    folders = [ROOT / "assets" / "traces", ROOT / "assets" / "experiments"]
    traces = [load_trace(p) for folder in folders for p in sorted(folder.glob("*.json"))]
    points = [pt for t in traces if (pt := lab.measured_point(t, "recorded")) is not None]
    figures = [
        charts.speedup_figure(0.8, 4, 0.1, points, curve=curve),
        charts.expected_tokens_figure(0.8, 4, points),
        charts.optimal_gamma_map(0.8, 0.1),
        charts.verify_curve_figure(curve),
        *(f(doc) for f in (charts.speedup_vs_batch_figure, charts.round_length_figure, charts.batch_gamma_figure)),
        *(f(doc) for f in (charts.throughput_figure, charts.forward_cost_figure)),
    ]
    return {
        "figures": [s for fig in figures for s in _strings(fig.to_plotly_json()["layout"]) + _strings(fig.data)],
        "batching": [words.EXPLANATION, words.reading(doc), words.source_html(doc, recorded=True)],
        "curve": [markup.curve_origin(curve)],
        "captions": [markup.trace_caption(t) for t in traces],
        "bridge": [markup.A_BRIDGE],
    }


def test_the_rendered_pages_keep_a_and_the_rate_apart_and_name_their_recordings():
    texts = rendered_texts()
    shown = [t for group in texts.values() for t in group]
    assert not a_as_rate(shown), a_as_rate(shown)
    assert not this_machine_beside_a_number(shown), this_machine_beside_a_number(shown)
    assert not [t for t in texts["captions"] if COMMAND.search(t)]  # the recording's script is not in the sentence
    assert any("a (expected acceptance)" in t for t in texts["figures"])  # the search reads the axis titles
    curve = texts["curve"][0]
    assert curve.startswith("recorded on ") and "float32" in curve and "2026-" in curve  # machine, precision, date
    source = texts["batching"][2]
    assert "recorded" in source and "bfloat16" in source  # the Batching recording names its precision


def test_a_run_that_drafted_nothing_has_no_acceptance_rate():
    """max new tokens = 1: every round a plain step; the rate is '—', never 0%."""
    assert markup.rate_shown(0, 0.0) == "—"
    assert markup.rate_shown(8, 0.625) == "62%"
