"""A round as Python-like code, sixteen lines (fifteen in greedy mode), with the lines this round ran marked and the
round's own tokens beside them: the token budget cutting γ, an empty draft, a rejection (with the residual when
sampling, the target's top token when greedy), the accepted drafts, an accepted end of text, the bonus. The engine's
real code is decoding/engine.py and decoding/acceptance.py; this is the same loop for reading.

The code is valid Python and runs as it stands (tests/markup/test_markup.py runs it on recorded rounds and checks that
the lines it ran are the lines marked): every name it reads is assigned on a line above it, or is one of the helpers
that FOOT names (the two models, sample, argmax, norm, random, END)."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.traces.trace import RoundEvent

from .base import count, esc, round_ending, visible


@dataclass(frozen=True)
class Line:
    """One line of the loop: its role (what marks it), its text when sampling and when greedy ("" where greedy has
    no such line)."""

    role: str
    sampled: str
    greedy: str | None = None  # None: the same text in both modes

    def text(self, greedy: bool) -> str:
        return self.sampled if not greedy or self.greedy is None else self.greedy


LINES = (
    Line("def", "def one_round(x, gamma, left):  # left: tokens the budget allows"),
    Line("cut_test", "    if gamma > left - 1:  # room for one more token"),
    Line("cut", "        gamma = left - 1  # the budget cuts the draft"),
    Line("draft", "    d, q = draft(x, gamma)  # d1..dn ~ q", "    d, q = draft(x, gamma)  # di = argmax(qi)"),
    Line("verify", "    p = target(x, d)  # one pass: p1..pn+1"),
    Line("empty_test", "    if not d:  # nothing drafted"),
    Line(
        "empty",
        "        return x + [sample(p[0])]  # a plain step",
        "        return x + [argmax(p[0])]  # a plain step",
    ),
    Line("for", "    for i in range(len(d)):"),
    Line(
        "test",
        "        if random() >= min(1, p[i][d[i]] / q[i][d[i]]):  # reject",
        "        if d[i] != argmax(p[i]):  # reject",
    ),
    Line("residual", "            r = norm(max(0, p[i] - q[i]))  # the residual", ""),
    Line(
        "correct",
        "            return x + [sample(r)]",
        "            return x + [argmax(p[i])]  # the target's top token",
    ),
    Line("accept", "        x = x + [d[i]]  # accept"),
    Line("end_test", "        if d[i] == END:"),
    Line("end", "            return x  # the end of text: nothing after it"),
    Line(
        "bonus",
        "    return x + [sample(p[len(d)])]  # all accepted: bonus",
        "    return x + [argmax(p[len(d)])]  # bonus",
    ),
    Line("crop", "# then both KV caches are cropped to x"),
)
FOOT = (
    "draft and target are the two models' passes (q and p: one distribution per position), sample draws from a "
    "distribution, argmax takes its most likely token, norm scales it to sum to 1, random() is uniform on [0, 1), "
    "END is the end-of-text token."
)
ALWAYS = ("def", "cut_test", "draft", "verify", "empty_test", "crop")  # every round runs these
ENDINGS = {  # the lines each way out of the loop runs, besides ALWAYS and the accepted drafts'
    "empty": ("empty",),
    "resampled": ("for", "test", "residual", "correct"),
    "bonus": ("for", "test", "bonus"),
    "eos": ("for", "test", "end"),
}
MAX_NAMED = 4  # tokens named in one note


def lines_for(greedy: bool) -> list[tuple[int, Line]]:
    """The loop's lines in this mode, numbered from 1."""
    return list(enumerate((line for line in LINES if line.text(greedy) != ""), start=1))


def code_path(event: RoundEvent) -> str:
    """Which way out of the code the round went: a key of ENDINGS (a rejection whose alternative was kept, then a
    bonus after it, went out through the rejection)."""
    ending = round_ending(event)
    if ending == "bonus" and event.rejection_index is not None:
        return "resampled"
    return ending


def budget_cut(event: RoundEvent, asked: int | None, budget: int | None) -> bool:
    """Whether the token budget, not the schedule, set this round's gamma (a constant schedule's `asked` known)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (asked, budget, event.gamma, event.position)):
        return False
    return event.gamma < asked and event.position + event.gamma + 1 == budget


def taken_roles(event: RoundEvent, asked: int | None = None, budget: int | None = None) -> set[str]:
    """The roles of the lines this round ran."""
    ending = code_path(event)
    roles = set(ALWAYS) | set(ENDINGS[ending])
    if budget_cut(event, asked, budget):
        roles.add("cut")
    if ending != "empty" and _accepted(event, ending):
        roles |= {"accept", "end_test"}
    return roles


def _accepted(event: RoundEvent, ending: str) -> list[object]:
    """The texts of the drafts the loop accepted (up to the end of text when it ended there)."""
    kept = min(count(event.n_accepted), len(event.drafted))
    accepted = [d.text for d in event.drafted[:kept] if d.verdict == "accepted"]
    return accepted[: len(event.appended)] if ending == "eos" else accepted


def _tokens(texts: list[object]) -> str:
    shown = [visible(t) for t in texts[:MAX_NAMED]]
    return ", ".join(shown) + (f", … ({len(texts)} in all)" if len(texts) > MAX_NAMED else "")


def round_notes(event: RoundEvent, asked: int | None = None, budget: int | None = None) -> dict[str, str]:
    """What this round did on each line it ran, by role: its own tokens and counts (plain text; the caller
    escapes)."""
    ending = code_path(event)
    notes = {}
    if isinstance(budget, int) and isinstance(event.position, int):
        notes["def"] = f"left = {budget - event.position}"
    if budget_cut(event, asked, budget):
        notes["cut"] = f"gamma = {event.gamma}, not {asked}"
    notes["draft"] = f"n = {len(event.drafted)}"
    arrow = f"→ {visible(event.next_token.text)}"
    if ending == "empty":
        notes["empty"] = arrow
        return notes
    accepted = _accepted(event, ending)
    if accepted:
        notes["accept"] = f"×{len(accepted)}: {_tokens(accepted)}"
    if ending == "eos":
        notes["end"] = f"{visible(accepted[-1]) if accepted else 'end of text'}: the text ends"
    elif ending == "resampled":
        j = count(event.rejection_index)
        rejected = visible(event.drafted[j].text) if j < len(event.drafted) else "?"
        notes["test"] = f"d{j + 1} = {rejected}"
        notes["correct"] = arrow
    else:
        notes["bonus"] = arrow
    return notes


def round_code_html(event: RoundEvent, greedy: bool, *, asked: int | None = None, budget: int | None = None) -> str:
    """The loop as Python-like code, the lines this round ran marked `hit`, each with its note; asked (a constant
    schedule's gamma) and budget (the run's new tokens) mark the budget's cut."""
    notes = round_notes(event, asked, budget)
    taken = taken_roles(event, asked, budget)
    numbered = lines_for(greedy)
    width = max(len(line.text(greedy)) for _, line in numbered)
    rows = []
    for number, line in numbered:
        cls = "sv-line hit" if line.role in taken else "sv-line"
        note = f'<span class="sv-note">{esc(notes[line.role])}</span>' if line.role in notes else ""
        rows.append(
            f'<span class="{cls}"><span class="sv-ln">{number}</span>'
            f'<span class="sv-src">{esc(line.text(greedy).ljust(width))}</span>{note}</span>'
        )
    extra = ""
    if event.alternatives or event.tree:
        extra = (
            " This round also checked candidates off the chain (alternatives or a tree, above): the same test, each "
            "against what the refusals before it left of p."
        )
    return f'<div class="sv-code"><pre>{"".join(rows)}</pre><div class="sv-code-foot">{esc(FOOT)}{extra}</div></div>'
