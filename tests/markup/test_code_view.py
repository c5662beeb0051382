"""The loop's code view (markup/loop.py) on every way a round can go, greedy and sampled (issue 55): the token budget
cutting γ, nothing drafted, a rejection (the residual when sampling, the target's top token when greedy), an
accepted end of text, the bonus. For each round the code shown is taken from the HTML as it is drawn, and

- every name a marked line reads is assigned on a marked line above it (the function's arguments count as line 1),
  or is one of the helpers the view's foot explains: the branch the round took is code that can run;
- it does run: the code is executed on the round's own drafts, p, q, draws and next token (the helpers below stand
  for the models), and the lines it runs are exactly the lines marked, and it returns the tokens the round
  committed.

Rounds are real ones (the tiny trace, the built-in pair's recordings); the sampled versions of rounds recorded
greedy get draws that give the recorded verdicts. A round that kept a candidate off the chain (alternatives, a
tree) is not this loop's (the view says so in its foot) and is left out."""

from __future__ import annotations

import ast
import dataclasses
import html
import re
import sys
from pathlib import Path

import pytest

from specviz import markup
from specviz.traces.trace import RoundEvent, load_trace

ROOT = Path(__file__).resolve().parents[2]
TINY = load_trace(ROOT / "tests" / "data" / "tiny_trace.json")  # greedy, γ 4, budget 24: rounds 8, 9 cut by it
CODE = load_trace(ROOT / "assets" / "traces" / "1_code_greedy.json")  # last round: γ 3, not 5, 4 of 64 left
PROSE = load_trace(ROOT / "assets" / "traces" / "2_prose_sampling.json")  # sampled: the residual, one bonus
RENAME = load_trace(ROOT / "assets" / "traces" / "3_rename_adaptive.json")  # round 9: <|im_end|> accepted
LOOKAHEAD = load_trace(ROOT / "assets" / "traces" / "4_rename_auto_lookahead.json")  # round 4: nothing drafted
HELPERS = {"draft", "target", "sample", "argmax", "norm", "random", "END"}  # explained in the view's foot
BUILTINS = {"min", "max", "len", "range"}
CODE_LINE = re.compile(
    r'<span class="sv-line( hit)?"><span class="sv-ln">(\d+)</span>'
    r'<span class="sv-src">([^<]*)</span>(?:<span class="sv-note">([^<]*)</span>)?</span>'
)


@dataclasses.dataclass(frozen=True)
class Shown:
    number: int
    marked: bool
    code: str
    note: str


def shown_lines(view: str) -> list[Shown]:
    """The code view's lines as drawn: number, marked or not, the code (unescaped), the note."""
    found = [
        Shown(int(n), bool(hit), html.unescape(code).rstrip(), html.unescape(note or ""))
        for hit, n, code, note in CODE_LINE.findall(view)
    ]
    assert [s.number for s in found] == list(range(1, len(found) + 1)) and len(found) >= 10, view
    return found


def names_by_line(tree: ast.AST) -> tuple[dict[int, set[str]], dict[int, set[str]]]:
    """(names read, names assigned) on each line; a function's arguments are assigned on its def line."""
    reads: dict[int, set[str]] = {}
    writes: dict[int, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            side = reads if isinstance(node.ctx, ast.Load) else writes
            side.setdefault(node.lineno, set()).add(node.id)
        elif isinstance(node, ast.FunctionDef):
            writes.setdefault(node.lineno, set()).update(a.arg for a in node.args.args)
    return reads, writes


def undefined_on_marked_lines(lines: list[Shown]) -> list[str]:
    """Each name a marked line reads that no marked line above it assigns and that is no explained helper."""
    reads, writes = names_by_line(ast.parse("\n".join(s.code for s in lines)))
    marked = [s.number for s in lines if s.marked]
    problems = []
    for number in marked:
        defined = HELPERS | BUILTINS | {n for m in marked if m < number for n in writes.get(m, ())}
        problems += [f"line {number}: {name}" for name in sorted(reads.get(number, set()) - defined)]
    return problems


@dataclasses.dataclass(frozen=True)
class Dist:
    """A stand-in for a distribution in the run: which one (p, q, p - q, the residual) at which position."""

    kind: str
    index: int

    def __sub__(self, other: Dist) -> Dist:
        assert (self.kind, other.kind, self.index) == ("p", "q", other.index), (self, other)
        return Dist("p-q", self.index)

    def __gt__(self, other: object) -> bool:  # max(0, p - q) keeps the difference
        assert other == 0
        return True

    def __lt__(self, other: object) -> bool:
        assert other == 0
        return False


def models_for(event: RoundEvent, greedy: bool, gamma: int):
    """The helpers the code calls, answering with this round's drafts, p, q, draws and next token."""
    drafted = event.drafted
    ids = [d.id for d in drafted]
    j = event.rejection_index
    draws = iter(d.u for d in drafted)
    end = event.appended[-1] if len(event.appended) <= event.chain_accepted else object()

    class Row(Dist):
        def __getitem__(self, token: int) -> float:
            assert token == ids[self.index]
            return getattr(drafted[self.index], self.kind)

    def draft(x, asked):
        assert asked == gamma == event.gamma, "the budget's cut: the round drafted with the γ it recorded"
        return list(ids), [Row("q", i) for i in range(len(ids))]

    def target(x, d):
        assert d == ids
        return [Row("p", i) for i in range(len(d) + 1)]

    # where the round's next token comes from: the residual at a rejection (greedy: p there), else p after the drafts
    source = ("p" if greedy else "residual", j) if j is not None else ("p", len(ids))

    def sample(dist):
        assert not greedy and (dist.kind, dist.index) == source, dist
        return event.next_token.id

    def argmax(dist):
        assert greedy and dist.kind == "p", dist
        return ids[dist.index] if dist.index < len(ids) and dist.index != j else event.next_token.id

    def norm(dist):
        assert dist.kind == "p-q"
        return Dist("residual", dist.index)

    return {"draft": draft, "target": target, "sample": sample, "argmax": argmax, "norm": norm,
            "random": lambda: next(draws), "END": end}  # fmt: skip


def run_shown_code(lines: list[Shown], event: RoundEvent, greedy: bool, gamma: int, left: int):
    """Run the code as shown on this round: the numbers of the lines it ran in order, and the tokens it added to x."""
    namespace = models_for(event, greedy, min(gamma, left - 1))
    exec(compile("\n".join(s.code for s in lines), "<code view>", "exec"), namespace)  # noqa: S102 - our own text
    ran: list[int] = []

    def tracer(frame, what, arg):
        if frame.f_code.co_filename == "<code view>" and what in ("call", "line"):
            ran.append(frame.f_lineno)
            return tracer
        return None

    committed = ["c0", "c1"]
    sys.settrace(tracer)
    try:
        out = namespace["one_round"](list(committed), gamma, left)
    finally:
        sys.settrace(None)
    return ran, out[len(committed) :]


def as_sampled(event: RoundEvent) -> RoundEvent:
    """A greedy round as a sampled one would record it: draws that give its verdicts (p/q below 1 for a refusal)."""
    drafted = []
    for d in event.drafted:
        if d.verdict == "rejected":
            d = dataclasses.replace(d, p=min(d.p, 0.5 * d.q), u=0.75)
        drafted.append(dataclasses.replace(d, u=0.0 if d.verdict == "accepted" else d.u))
    return dataclasses.replace(event, drafted=tuple(drafted))


CASES = {  # name: (round, γ asked by a constant schedule or None, the run's budget)
    "rejection": (TINY.rounds[0], 4, 24),
    "bonus": (TINY.rounds[2], 4, 24),
    "budget cut, rejection": (TINY.rounds[7], 4, 24),
    "budget cut, bonus": (TINY.rounds[8], 4, 24),
    "budget cut, built-in pair": (CODE.rounds[-1], 5, 64),
    "end of text": (RENAME.rounds[8], None, 64),
    "nothing drafted": (LOOKAHEAD.rounds[3], None, 64),
}
CASES.update({f"sampled, {name}": (as_sampled(e), asked, budget) for name, (e, asked, budget) in CASES.items()})
CASES.update({f"recorded sampled, round {e.index + 1}": (e, 4, 48) for e in PROSE.rounds})


@pytest.mark.parametrize("name", list(CASES))
def test_the_marked_lines_are_code_that_runs_and_the_lines_it_ran(name):
    event, asked, budget = CASES[name]
    greedy = "sampled" not in name
    lines = shown_lines(markup.round_code_html(event, greedy, asked=asked, budget=budget))
    assert not undefined_on_marked_lines(lines), undefined_on_marked_lines(lines)
    left = budget - event.position
    ran, added = run_shown_code(lines, event, greedy, asked if asked is not None else event.gamma, left)
    assert added == list(event.appended), "the code commits what the round committed"
    code_lines = {s.number for s in lines if s.marked and not s.code.lstrip().startswith("#")}
    assert set(ran) == code_lines, f"ran {sorted(set(ran))}, marked {sorted(code_lines)}"
    last = ran[-1]  # the way out: its note names the round's next token (an end of text names itself)
    note = next(s.note for s in lines if s.number == last)
    expected = markup.visible(event.next_token.text) if len(event.appended) > event.chain_accepted else "text ends"
    assert expected in note, (last, note)


def test_every_way_through_the_loop_is_covered_in_both_modes():
    """The cases above reach each way out of the loop, and the budget's cut, greedy and sampled."""
    reached = set()
    for name, (event, asked, budget) in CASES.items():
        greedy = "sampled" not in name
        lines = shown_lines(markup.round_code_html(event, greedy, asked=asked, budget=budget))
        marked = {s.code.split("#")[0].strip() for s in lines if s.marked}
        reached |= {(greedy, code) for code in marked if code.startswith("return") or code.startswith("gamma =")}
    for greedy in (True, False):
        pick = "argmax" if greedy else "sample"
        outs = {c for g, c in reached if g == greedy}
        assert outs == {
            "gamma = left - 1",
            f"return x + [{pick}(p[0])]",
            f"return x + [{'argmax(p[i])' if greedy else 'sample(r)'}]",
            "return x",
            f"return x + [{pick}(p[len(d)])]",
        }, outs


def test_the_foot_explains_every_helper_and_greedy_has_no_residual():
    view = markup.round_code_html(TINY.rounds[0], True)
    foot = html.unescape(view.split('class="sv-code-foot">', 1)[1])
    assert all(re.search(rf"\b{name}\b", foot) for name in HELPERS), foot
    greedy = "\n".join(s.code for s in shown_lines(view))
    assert "norm(" not in greedy and "residual" not in greedy and "r)" not in greedy  # the correction is argmax p
    sampled = "\n".join(s.code for s in shown_lines(markup.round_code_html(TINY.rounds[0], False)))
    assert "r = norm(max(0, p[i] - q[i]))" in sampled and "min(1, p[i][d[i]] / q[i][d[i]])" in sampled


def test_a_name_read_before_it_is_assigned_is_found():
    """The check itself: the view's old greedy rejection (`argmax(r)`, r assigned nowhere in greedy mode) fails."""
    lines = shown_lines(markup.round_code_html(TINY.rounds[0], True))
    broken = [dataclasses.replace(s, code=s.code.replace("argmax(p[i])]", "argmax(r)]")) for s in lines]
    assert undefined_on_marked_lines(broken) == [f"line {s.number}: r" for s in broken if "argmax(r)" in s.code]
    with pytest.raises(NameError):
        run_shown_code(broken, TINY.rounds[0], True, 4, 24)
