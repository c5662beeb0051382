"""Token chips for one round: each drafted token with q, p, min(1, p/q), u and its verdict, the
alternatives at the last drafted position, then the resampled or bonus token; the round's header line."""

from __future__ import annotations

from collections.abc import Sequence

from specviz.drafters import source_label
from specviz.traces.trace import DraftedToken, RoundEvent

from .base import (
    LEGEND_NAMES,
    MAX_CHIPS,
    SOURCE_CLASS,
    VERDICT_CLASS,
    count,
    css_class,
    esc,
    fmt,
    fmt_prob,
    round_ending,
    visible,
)

# A row of numbers on a chip: (name, value, "name-class|value-class"); both classes are ours, never data.
Row = tuple[str, str, str]


def legend_html(kinds: Sequence[str] = ("accepted", "rejected", "unchecked", "resampled", "bonus")) -> str:
    items = "".join(
        f'<span><span class="sw {k}"></span>{esc(LEGEND_NAMES[k])}</span>' for k in kinds if k in LEGEND_NAMES
    )
    return f'<div class="sv-legend">{items}</div>'


def chip_html(kind: str, token: object, verdict: str, rows: Sequence[Row], pos: str = "", title: str = "") -> str:
    """One chip; `kind` is a class string built from fixed names only."""
    nums = "".join(
        f'<span class="k {k_cls}">{esc(k)}</span><span class="v {v_cls}">{esc(v)}</span>'
        for k, v, cls in rows
        for k_cls, v_cls in [cls.split("|")]
    )
    pos_html = f'<span class="sv-pos">{esc(pos)}</span>' if pos else ""
    return (
        f'<div class="sv-chip sv-{kind}" title="{esc(title)}">{pos_html}<div class="sv-tok">{esc(visible(token))}'
        f'</div><div class="sv-verdict">{esc(verdict)}</div><div class="sv-nums">{nums}</div></div>'
    )


def verdict_label(verdict: object) -> str:
    return {"accepted": "✓ accepted", "rejected": "✗ rejected"}.get(
        verdict if isinstance(verdict, str) else "", "· not checked"
    )


def _check_row(verdict: object) -> Row:
    """Greedy decoding checks argmax p instead of a draw."""
    return ("argmax p?", "yes" if verdict == "accepted" else "no", "|pass" if verdict == "accepted" else "|fail")


def _draft_rows(d: DraftedToken, greedy: bool) -> list[Row]:
    rows = [
        ("q", fmt_prob(d.q), "q|"),
        ("p", fmt_prob(d.p), "p|"),
        ("min(1,p/q)", fmt_prob(d.ratio), "muted|muted" if greedy else "|"),
    ]
    if greedy:
        if d.verdict != "unchecked":
            rows.append(_check_row(d.verdict))
    elif d.u is not None:
        rows.append(("u", fmt_prob(d.u), "|pass" if d.verdict == "accepted" else "|fail"))
    else:
        rows.append(("u", "—", "|"))
    return rows


def draft_chips_html(event: RoundEvent, greedy: bool) -> str:
    chips = []
    for i, d in enumerate(event.drafted[:MAX_CHIPS]):
        title = (
            f"draft position {i + 1}: q(d)={fmt(d.q, '.4f')}, p(d)={fmt(d.p, '.4f')}, min(1,p/q)={fmt(d.ratio, '.4f')}"
        )
        if greedy:
            title += " (greedy decoding checks argmax p instead)"
        if d.from_lookahead:
            title += "; its q came from a draft forward over prompt-lookup guesses (no forward of its own)"
        chips.append(
            chip_html(
                css_class(d.verdict, VERDICT_CLASS, "unchecked"),
                d.text,
                verdict_label(d.verdict),
                _draft_rows(d, greedy),
                pos=f"d{i + 1}" + (" ⇢" if d.from_lookahead else ""),
                title=title,
            )
        )
    if not chips:
        chips.append(
            '<div class="sv-chip sv-unchecked"><div class="sv-tok">∅</div>'
            '<div class="sv-verdict">nothing drafted</div></div>'
        )
    elif event.alternatives:  # the last drafted token and its alternatives, stacked: one position, several candidates
        chips[-1] = f'<div class="sv-branch">{chips[-1]}{alternative_chips_html(event, greedy)}</div>'
    return "".join(chips)


def alternative_chips_html(event: RoundEvent, greedy: bool) -> str:
    """Chips for the other candidates at the last drafted position (checked only if that draft was rejected)."""
    n = len(event.drafted)
    chips = []
    for m, a in enumerate(event.alternatives[:MAX_CHIPS]):
        rows = [("q", fmt_prob(a.q), "q|"), ("p", fmt_prob(a.p), "p|")]
        if greedy:
            if a.verdict != "unchecked":
                rows.append(_check_row(a.verdict))
        else:
            rows.append(("min(1,r/q)", fmt_prob(a.ratio), "|"))
            rows.append(
                (
                    "u",
                    fmt_prob(a.u) if a.u is not None else "—",
                    "|pass" if a.verdict == "accepted" else ("|fail" if a.u is not None else "|"),
                )
            )
        title = (
            f"alternative {m + 1} for draft position {n}: q={fmt(a.q, '.4f')}, p={fmt(a.p, '.4f')}; checked only "
            f"if d{n} is rejected"
        )
        if not greedy:
            title += ", against the residual r left by the rejections before it"
        kind = css_class(a.verdict, VERDICT_CLASS, "unchecked") + " sv-alt"
        chips.append(chip_html(kind, a.text, verdict_label(a.verdict), rows, pos=f"d{n} alt {m + 1}", title=title))
    return "".join(chips)


def next_chip_html(event: RoundEvent, greedy: bool) -> str:
    t = event.next_token
    source = css_class(event.next_source, SOURCE_CLASS, "bonus")
    ending = round_ending(event)
    if ending == "eos":  # the commit stopped at an accepted end of text: no token follows it
        return (
            '<div class="sv-chip sv-unchecked" title="the text ended at an accepted end-of-text token">'
            '<div class="sv-tok">■</div><div class="sv-verdict">end of text: nothing follows</div></div>'
        )
    if ending == "empty":  # nothing drafted: the round is one plain target step
        verdict = "● plain step: argmax p" if greedy else "● plain step"
        rows = [("from", "p", "p|"), ("prob", fmt_prob(t.prob), "|")]
        return chip_html(
            "bonus", t.text, verdict, rows, title=f"one plain target step, probability {fmt(t.prob, '.4f')}"
        )
    if source == "resampled":
        verdict = "↻ correction: argmax p" if greedy else "↻ resampled"
        rows = [("from", "p" if greedy else "residual", "|"), ("prob", fmt_prob(t.prob), "|")]
    else:
        verdict = "★ bonus: argmax p" if greedy else "★ bonus"
        off_chain = event.kept_alternative is not None or event.tree_path
        after = "after alt" if off_chain else f"p after d{count(event.n_accepted)}"  # p_{n+1}, said in words
        rows = [("from", after if event.drafted else "p", "p|"), ("prob", fmt_prob(t.prob), "|")]
    return chip_html(source, t.text, verdict, rows, title=f"{source} token, probability {fmt(t.prob, '.4f')}")


def round_chips_html(event: RoundEvent, greedy: bool) -> str:
    return (
        f'<div class="sv-chips">{draft_chips_html(event, greedy)}<div class="sv-arrow">→</div>'
        f"{next_chip_html(event, greedy)}</div>"
    )


def round_head_html(event: RoundEvent, rounds: int | None) -> str:
    """'Round 3 of 12 · γ = 5 · drafted 5 · accepted 2 · rejected at d3 · +3 tokens', then the four steps."""
    n = len(event.drafted)
    appended = len(event.appended)
    rejection = event.rejection_index
    outcome = {"empty": "nothing drafted: one plain target step", "eos": "end of text accepted: the run ends"}.get(
        round_ending(event), "all accepted + bonus" if rejection is None else f"rejected at d{count(rejection) + 1}"
    )
    head = (
        f'<div class="sv-round-head"><b>Round {count(event.index) + 1}</b>'
        f"{' of ' + esc(rounds) if rounds else ''} · γ = {esc(event.gamma)}"
        f"{' · source ' + esc(source_label(event.draft_source)) if event.draft_source else ''}"
        f" · drafted {n} · accepted {esc(event.n_accepted)} · {outcome}"
        f"{' · alternative kept' if event.kept_alternative is not None else ''}"
        f"{f' · {len(event.tree_path)} kept off the chain' if event.tree_path else ''}"
        f" · +{appended} token{'s' if appended != 1 else ''}</div>"
    )
    return head + '<div class="sv-step">① draft → ② verify → ③ accept / reject → ④ next token</div>'
