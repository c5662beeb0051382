"""A round as Python-like pseudo-code, fifteen lines, with the lines this round took highlighted and the round's own
tokens beside them (accept, reject and resample, bonus, end of text, empty draft). The engine's real code is
decoding/engine.py and decoding/acceptance.py; this is the same loop for reading."""

from __future__ import annotations

from specviz.traces.trace import RoundEvent

from .base import count, esc, round_ending, visible

# (line number, code); the test on line 7 and the draw on line 12 depend on greedy (GREEDY_LINES replaces them)
LINES = (
    (1, "def one_round(x, gamma):"),
    (2, "    d, q = draft(x, gamma)       # d1..dn ~ q"),
    (3, "    if not d:                    # nothing drafted"),
    (4, "        return x + [sample(target(x))]"),
    (5, "    p = target(x, d)             # one pass"),
    (6, "    for i in range(len(d)):"),
    (7, "        if u[i] < min(1, p[i][d[i]] / q[i][d[i]]):"),
    (8, "            x.append(d[i])       # accept"),
    (9, "            if d[i] == END: return x"),
    (10, "        else:                    # reject"),
    (11, "            r = norm(max(0, p[i] - q[i]))"),
    (12, "            return x + [sample(r)]"),
    (13, "    # every draft accepted:"),
    (14, "    return x + [sample(p[len(d)])]  # bonus"),
    (15, "# then both KV caches are cropped to x"),
)
GREEDY_LINES = {
    7: "        if d[i] == argmax(p[i]):",
    11: "            # greedy: no residual needed",
    12: "            return x + [argmax(r)]",
    14: "    return x + [argmax(p[len(d)])]  # bonus",
    4: "        return x + [argmax(target(x))]",
}
TAKEN = {  # the lines each kind of round runs through
    "empty": (1, 2, 3, 4, 15),
    "bonus": (1, 2, 5, 6, 7, 8, 13, 14, 15),
    "eos": (1, 2, 5, 6, 7, 8, 9, 15),
    "resampled": (1, 2, 5, 6, 7, 10, 11, 12, 15),
}
MAX_NAMED = 4  # tokens named in one note


def code_path(event: RoundEvent) -> str:
    """Which way through the code the round went: a key of TAKEN (a rejection whose alternative was kept, then a
    bonus after it, went through the rejection)."""
    ending = round_ending(event)
    if ending == "bonus" and event.rejection_index is not None:
        return "resampled"
    return ending


def _tokens(texts: list[object]) -> str:
    shown = [visible(t) for t in texts[:MAX_NAMED]]
    return ", ".join(shown) + (f", … ({len(texts)} in all)" if len(texts) > MAX_NAMED else "")


def round_notes(event: RoundEvent) -> dict[int, str]:
    """What this round did on each line it took: its own tokens and counts (plain text; the caller escapes)."""
    ending = code_path(event)
    n = len(event.drafted)
    kept = min(count(event.n_accepted), n)
    notes = {}
    if ending == "empty":
        notes[4] = f"→ {visible(event.next_token.text)}"
        return notes
    notes[2] = f"n = {n}"
    accepted = [d.text for d in event.drafted[:kept] if d.verdict == "accepted"]
    if ending == "eos":
        accepted = accepted[: len(event.appended)]
    if accepted:
        notes[8] = f"×{len(accepted)}: {_tokens(accepted)}"
    if ending == "eos":
        notes[9] = f"{visible(accepted[-1]) if accepted else 'end of text'}: the text ends"
    elif ending == "resampled":
        j = count(event.rejection_index)
        rejected = visible(event.drafted[j].text) if j < n else "?"
        notes[10] = f"d{j + 1} = {rejected}"
        notes[12] = f"→ {visible(event.next_token.text)}"
    else:
        notes[14] = f"→ {visible(event.next_token.text)}"
    return notes


def round_code_html(event: RoundEvent, greedy: bool) -> str:
    """The loop as fifteen lines of Python-like code, the lines this round took marked `hit`, each with its note."""
    notes = round_notes(event)
    taken = set(TAKEN[code_path(event)]) | ({8} if 8 in notes else set())  # a rejection after some accepted
    rows = []
    for number, text in LINES:
        code = GREEDY_LINES.get(number, text) if greedy else text
        cls = "sv-line hit" if number in taken else "sv-line"
        note = f'<span class="sv-note">{esc(notes[number])}</span>' if number in notes else ""
        rows.append(f'<span class="{cls}"><span class="sv-ln">{number}</span>{esc(code)}{note}</span>')
    extra = ""
    if event.alternatives or event.tree:
        extra = (
            '<div class="sv-code-foot">This round also checked candidates off the chain (alternatives or a tree, '
            "below): the same test, each against what the refusals before it left of p.</div>"
        )
    return f'<div class="sv-code"><pre>{"".join(rows)}</pre>{extra}</div>'
