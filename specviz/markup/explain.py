"""A round, its chart and a run's settings in words (markdown for st.markdown and st.caption).

Values that came from a trace are clipped and markdown-escaped (`md`), token text goes in code spans (`code`),
so a file cannot add links or formatting.
"""

from __future__ import annotations

from specviz import drafters
from specviz.traces.trace import RoundEvent, Trace

from .base import code, count, md, md_fmt, md_prob, round_ending
from .provenance import note_words


def _rejection(event: RoundEvent, greedy: bool, j: int) -> list[str]:
    n = len(event.drafted)
    d = event.drafted[j]
    path = event.tree_path
    kept = event.kept_alternative or (path[0] if path else None)  # what the target kept in d's place
    if greedy:
        top = kept.text if kept is not None else event.next_token.text  # else the next token is a bonus after it
        why = f"the target's most likely token there is {code(top)}, not {code(d.text)}"
    else:
        why = (
            f"p = {md_prob(d.p)} and q = {md_prob(d.q)}, so min(1, p/q) = {md_prob(d.ratio)}, "
            f"and the draw u = {md_prob(d.u)} was larger"
        )
    chain = count(event.n_accepted) - (event.kept_alternative is not None) - len(path)  # chain_accepted, any value
    parts = [f"It accepted **{chain}**, then rejected {code(d.text)} at position {j + 1}: {why}."]
    if j + 1 < n:
        rest = n - j - 1
        parts.append(
            f"The {rest} token{'s' if rest != 1 else ''} after it {'are' if rest != 1 else 'is'} thrown away unchecked."
        )
    if event.alternatives and j == n - 1:
        parts.append(explain_alternatives(event, greedy))
    if event.tree:
        parts.append(explain_tree(event, greedy))
    elif kept is None and greedy:
        parts.append(
            "In greedy mode the correction is the target's own top token, "
            "exactly what plain decoding would have written."
        )
    elif kept is None:
        tree = event.alternatives and j == n - 1
        left = "what the rejections left of p" if tree else "the residual norm(max(0, p − q))"
        parts.append(
            f"In place of the rejected token, {code(event.next_token.text)} was drawn from "
            f"{left}: the probability mass the draft under-represented."
        )
    return parts


# The one-line bridge wherever the acceptance rate and Leviathan's a stand together
# (docs/DESIGN.md, "The algorithm and its notation").
A_BRIDGE = (
    "**Acceptance rate** = accepted ÷ drafted tokens. Leviathan's **a** is the chance one drafted token is kept, "
    "estimated from the same run as the a whose expected accepted prefix a(1 − a^γ)/(1 − a) matches the measured "
    "one; it is higher than the rate, which also counts the tokens thrown away unchecked after a rejection. "
    "**Mean acceptance length** = 1 + accepted ÷ drafts (rounds that drafted): tokens per target pass, bonus "
    "included."
)

SOURCE_WORDS = {  # who drafted, for the traffic drafter and the controller (RoundEvent.draft_source)
    drafters.TRAFFIC_SOURCE: "**Source: traffic.** The tokens are the most frequent continuation of the longest "
    "earlier match in the requests served so far and this one (no draft forward; q is a point mass, q = 1).",
    drafters.MODEL_SOURCE: "**Source: draft model.** The controller expected the draft model to commit the most "
    "tokens per second this round: no confident traffic match, or matches of this length have not held often enough "
    "yet to be sure of (the model is the floor: traffic must beat it at a lower bound of its measured rate).",
    drafters.BOTH_SOURCE: "**Source: traffic, then the draft model.** The traffic match ran out early and the model's "
    "continuation was expected to pay for its draft forwards: it continued where the match ended (q = 1 on the "
    "traffic tokens, the model's q after them).",
}


def explain_round(event: RoundEvent, greedy: bool, *, asked: int | None = None, budget: int | None = None) -> str:
    """The round in words, for the column beside it; asked (a constant schedule's gamma) and budget (the run's new
    tokens) let it say when the token budget cut this round's gamma."""
    n = len(event.drafted)
    cut = budget_words(event, asked, budget)
    if n == 0 and not event.tree:
        return empty_round_words(event, greedy, cut)
    short = (
        f" of the γ = {md(event.gamma)} it could (a drafter stops early: at low confidence, at an end of sequence, "
        "where an n-gram or traffic match ends, or after Medusa's K heads)"
        if isinstance(event.gamma, int) and n < event.gamma
        else ""
    )
    parts = [
        f"{cut}The drafter proposed **{n}** token{'s' if n != 1 else ''}{short}. "
        f"The target scored all of them in **one** forward pass."
    ]
    if event.draft_source in SOURCE_WORDS:
        parts.append(SOURCE_WORDS[event.draft_source])
    if event.choice_seconds > 0:  # a controller round: what choosing cost, beside what drafting did
        parts.append(
            f"Choosing (the traffic lookup and the choice) took {md_fmt(1000 * event.choice_seconds, '.2f')} ms of "
            f"this round's {md_fmt(1000 * event.draft_seconds, '.1f')} ms draft phase."
        )
    shared = sum(bool(d.from_lookahead) for d in event.drafted)
    if shared:
        forwards = md(event.draft_forwards)
        parts.append(
            f"The draft itself ran {forwards} forward pass{'es' if event.draft_forwards != 1 else ''}, "
            f"not {n}: prompt lookup guessed how the text goes on, one draft pass scored the guesses at "
            f"once, and {shared} token{'s were' if shared != 1 else ' was'} (marked ⇢) drawn from q rows "
            "that came with those guesses. Each is still drawn from the q shown on its chip, so the "
            "verification is exactly the same; only the draft's passes are fewer."
        )
    j = event.rejection_index
    ended = round_ending(event) == "eos"
    if j is None and not ended:
        parts.append(
            f"It accepted **all {n}**, so it also gives a free **bonus** token from the distribution "
            f"after the last draft: {n + 1} tokens for one target pass."
        )
    elif j is None:
        parts.append(f"It accepted **all {n}**.")
    elif isinstance(j, int) and 0 <= j < n:
        parts += _rejection(event, greedy, j)
    if ended:
        parts.append(end_of_text_words(event))
    appended = len(event.appended)
    if j is not None or appended != n + 1:  # all accepted: the bonus sentence already said n + 1
        parts.append(f"This round committed **{appended}** token{'s' if appended != 1 else ''} for one target pass.")
    return " ".join(parts)


def empty_round_words(event: RoundEvent, greedy: bool, cut: str = "") -> str:
    """A round that drafted nothing: one plain target step (no draft to accept, no bonus)."""
    how = "its most likely token" if greedy else "a draw from it"
    why = (
        "γ was 0 this round (the auto schedule times a plain step now and then, or the token budget left no room)"
        if event.gamma == 0
        else "no n-gram or traffic match, or a draft that stopped at once"
    )
    return (
        f"{cut}The drafter proposed **nothing** this round ({why}), so nothing was accepted or rejected: "
        "the round was **one plain "
        f"target step**. The target's pass gave p after the last committed token, and the next token "
        f"{code(event.next_token.text)} is {how}, exactly as plain decoding would write it. This round committed "
        f"**{len(event.appended)}** token for one target pass; it adds nothing to the acceptance rate (no drafted "
        "tokens)."
    )


def end_of_text_words(event: RoundEvent) -> str:
    """An accepted end-of-text token: the commit stops there, so nothing after it (no bonus) is added."""
    k = len(event.appended)  # the end of text is the k-th committed token, a drafted one
    token = event.drafted[k - 1].text if 0 < k <= len(event.drafted) else "the end of text"
    after = count(event.n_accepted) - k
    dropped = (
        f" the {after} accepted token{'s' if after != 1 else ''} after it {'are' if after != 1 else 'is'} dropped and"
        if after > 0
        else ""
    )
    follow = "correction" if event.rejection_index is not None else "bonus"
    return (
        f"The kept token {code(token)} (d{k}) is the **end of text**: the text ends there, so{dropped} no "
        f"{follow} token is added after it, just as plain decoding stops at its end of text. "
        "It stays in the text: nothing kept is rolled back."
    )


def budget_words(event: RoundEvent, asked: int | None, budget: int | None) -> str:
    """'γ is 4 here, not 5: ...' when the token budget, not the schedule, set this round's gamma."""
    if not all(isinstance(x, int) for x in (asked, budget, event.gamma, event.position)):
        return ""
    if not event.gamma < asked or event.position + event.gamma + 1 != budget:
        return ""
    return (
        f"γ is {md(event.gamma)} here, not {md(asked)}: a round commits up to γ + 1 tokens, and only "
        f"{md(budget - event.position)} of the {md(budget)}-token budget were left. "
    )


def explain_tree(event: RoundEvent, greedy: bool) -> str:
    """Words for a tree draft's walk (draft heads with alternatives), after a rejection on the chain."""
    path = event.tree_path
    rule = (
        "keeping the one that is the target's most likely token there"
        if greedy
        else "keeping the first that passes recursive rejection sampling: min(1, r/q), r being what the refusals "
        "before it left of p, so each committed token still follows p exactly"
    )
    parts = [
        f"The heads also proposed **{count(len(event.tree))}** candidates off the chain (the tree below; each saw "
        "only its own path in the same target forward, through a tree attention mask). At each node the target "
        f"checks its children in order, {rule}."
    ]
    if path:
        names = ", ".join(code(t.text) for t in path[:16])
        then = "a bonus token after the last of them" if event.next_source == "bonus" else "a correction there"
        parts.append(
            f"It kept **{len(path)}** off the chain ({names}), then {code(event.next_token.text)}: {then}. Those "
            "tokens are not in the target's cache yet: the next verify feeds them again."
        )
    elif greedy:
        parts.append(
            f"None was the target's top token: the correction is {code(event.next_token.text)}, as plain "
            "decoding would have written."
        )
    else:
        parts.append(f"None passed: {code(event.next_token.text)} was drawn from what the refusals left of p.")
    return " ".join(parts)


def explain_alternatives(event: RoundEvent, greedy: bool) -> str:
    """Words for a rejection at a position that came with alternatives (a small token tree)."""
    n = len(event.drafted)
    names = ", ".join(code(a.text) for a in event.alternatives[:16])
    head = (
        f"The verify pass also scored the draft's other candidates for its last position, {n} ({names}), "
        "each seeing the same text before it: the same pass, a few more rows. "
    )
    kept = event.kept_alternative
    if greedy:
        rule = "They are checked in order; one is kept if it is the target's top token."
    else:
        rule = (
            "They were drawn from the same q and are checked in order against what the rejections left: "
            "r = norm(max(0, p − q)), shrunk again after each refused candidate, kept with probability "
            "min(1, r/q) (recursive rejection sampling, so the token still follows p exactly)."
        )
    if kept is not None:
        tail = (
            f" {code(kept.text)} was kept in place of the rejected draft, and the same pass's row after it "
            f"gave the bonus token {code(event.next_token.text)}."
        )
    else:
        tail = " None was kept."
    return head + rule + tail


def explain_chart(event: RoundEvent, greedy: bool) -> str:
    ending = round_ending(event)
    if ending == "empty":
        return (
            "Nothing was drafted, so the target's pass has one distribution: p after the last committed token. "
            "The next token is " + ("its top token" if greedy else "drawn from it") + ", a plain decoding step."
        )
    if ending == "eos":
        return (
            "The end of text was accepted, so the run ends here: no token is added after it, and there is no "
            "next-token distribution to show (plain decoding stops at the same token)."
        )
    if event.kept_alternative is not None:
        return (
            f"The target kept the draft's alternative {code(event.kept_alternative.text)}; the verify pass "
            "also computed p after it, shown here. The bonus token is "
            + ("its top token." if greedy else "drawn from it.")
        )
    if event.next_source == "bonus":
        return (
            "Every draft was accepted, so the target's pass has one distribution left over, p after the last "
            "draft token. The bonus token is " + ("its top token." if greedy else "drawn from it.")
        )
    if greedy:
        return (
            "The chart compares p (indigo) and q (teal) where the draft went wrong: the draft's favourite "
            "was not the target's. Greedy decoding needs no residual; it takes the tallest indigo bar."
        )
    return (
        "Where q (teal) is taller than p (indigo), the draft over-proposes; where p is taller, it "
        "under-proposes. The residual (orange) keeps only the part of p that q missed, rescaled to sum to 1. "
        "Drawing the replacement from it is what makes the output follow p exactly."
    )


def pair_caption(names: dict) -> str:
    """The loaded pair in the sidebar: '**p** target · **q** draft · device · precision'."""
    return (
        f"**p** {md(names.get('target', '?'))} · **q** {md(names.get('draft', 'none'))} · "
        f"{md(names.get('device', '?'))} · {md(names.get('precision', names.get('dtype', '?')))}"
    )


def precision_note(names: dict) -> str:
    """What a run's precision means for the exactness a page shows: each precision is its own target p. With
    row-invariant attention (models/attention.py) greedy text is plain decoding's bit for bit in every precision;
    a run recorded without it (older recordings) could flip a near-tie. No number: the page beside it shows none."""
    precision = md(str(names.get("precision", names.get("dtype", "float32"))))
    if names.get("attention") == "row-invariant":
        return (
            f"The target runs in {precision}: that model is the target p here, and speculative decoding follows it "
            "exactly. Its check of a draft computes every token as a single step of plain decoding would, bit for "
            "bit, so in greedy mode the two texts are identical in every precision."
        )
    if precision in ("fp32", "float32"):
        return "The target runs in float32, the models' exact weights: the least rounding of the sidebar's choices."
    return (
        f"The target runs in {precision}: that rounded model is the target p here, and speculative decoding "
        "follows it exactly. This run was recorded before the check of a draft computed each token as a single "
        "step does: where two tokens tied within rounding, the two could pick differently."
    )


def identity_broken(names: dict) -> str:
    """Why greedy texts differ, once they do: a near-tie on a run without row-invariant attention, else a fault."""
    if names.get("attention") == "row-invariant":
        return (
            "In greedy mode they must be identical: the check of a draft computes each token as a single step "
            "does. This is a fault in specviz; please report it with this run's trace."
        )
    return (
        "In greedy mode they should be identical; this run was recorded before the check of a draft computed "
        "each token as a single step does, and a tiny difference between them can flip a near-tie between two "
        "tokens."
    )


def trace_caption(trace: Trace) -> str:
    """The pair and the settings a trace was recorded with, in one line."""
    names = trace.pair if isinstance(trace.pair, dict) else {}
    c = trace.config
    drafter = drafters.title(c.drafter)  # the registry's words ("Medusa heads"; an unknown name as it is)
    sampling = "greedy" if c.greedy else f"temperature {md_fmt(c.temperature, 'g')}"
    top_k = f", top-k {md(c.top_k)}" if c.top_k else ""
    top_p = f", top-p {md_fmt(c.top_p, 'g')}" if is_below_one(c.top_p) else ""
    words = note_words(trace.note or "")[0]  # the tool that recorded it is no part of the sentence
    note = f" · {md(words)}" if words else ""
    return (
        f"target p: {md(names.get('target', '?'))} · draft q: {md(names.get('draft', '?'))} · "
        f"{md(names.get('device', ''))} · drafter: {drafter} · γ = {md(c.gamma)} ({md(c.schedule)}) · "
        f"{sampling}{top_k}{top_p} · seed {md(c.seed)}{note}"
    )


def is_below_one(x: object) -> bool:
    return isinstance(x, (int, float)) and x < 1


def stream_stopped_message(finished: int) -> str:
    """A stream of requests stopped midway: only its finished requests are results."""
    done = count(finished)
    shown = f"{done} requests finished before the stop and are" if done != 1 else "1 request finished before it and is"
    return (
        f"Stopped: {shown} shown; the request under way was dropped, not plotted (a half-run request measures nothing)."
    )


def stopped_message(rounds: int) -> str:
    return f"Stopped: this run was cancelled after {count(rounds)} rounds; what was computed is shown."
