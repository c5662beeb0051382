"""The text views: the prompt and every committed token coloured by where it came from, plain decoding's
tokens, and a race lane (a text box with its counters and progress bar)."""

from __future__ import annotations

from collections.abc import Sequence

from specviz.lessons.lab import round_origins
from specviz.traces.trace import RoundEvent

from .base import MAX_PROMPT_SHOWN, MAX_TOKEN_CHARS, MAX_TOKENS_DRAWN, ORIGIN_CLASS, clip, count, css_class, esc, fmt

COLORS = {"speculative": "#4f46e5", "plain": "#64748b"}  # as charts.COLORS (kept here: no plotly in markup)


def token_span(text: object, cls: str, title: str) -> str:
    """One token; `cls` is built from fixed names only, `title` is escaped."""
    parts = esc(clip(text, MAX_TOKEN_CHARS)).replace("\n", '<span class="nl">↵</span>\n')
    return f'<span class="sv-t {cls}" title="{esc(title)}">{parts}</span>'


def box_html(inner: str, follow: bool) -> str:
    """The text box; `follow` keeps it scrolled to the newest token (a column-reverse scroller)."""
    if follow:
        return f'<div class="sv-text sv-follow"><div>{inner}</div></div>'
    return f'<div class="sv-text">{inner}</div>'


def prompt_html(prompt: object) -> str:
    return f'<span class="sv-prompt">{esc(clip(prompt, MAX_PROMPT_SHOWN))}</span>'


def _more(drawn: int, total: int) -> str:
    return f'<span class="sv-more">… {total - drawn:,} more tokens not drawn</span>' if total > drawn else ""


def text_html(
    prompt: object,
    rounds: Sequence[RoundEvent],
    current: int | None = None,
    caret: bool = False,
    show_future: bool = False,
    follow: bool = False,
) -> str:
    """The prompt, then every committed token coloured by origin; the tokens of round `current` outlined.
    At most MAX_TOKENS_DRAWN tokens are drawn."""
    spans: list[str] = []
    total = 0
    upto = len(rounds) - 1 if current is None else current
    for event in rounds:
        index = count(event.index)
        if index > upto and not show_future:
            break
        total += len(event.appended)
        for tok in round_origins(event, limit=MAX_TOKENS_DRAWN - len(spans)):
            cls = f"sv-{css_class(tok.origin, ORIGIN_CLASS, 'bonus')}"
            if index == current:
                cls += " sv-current"
            if index > upto:
                cls += " sv-future"
            if tok.ratio is not None:
                extra = f", min(1,p/q) = {fmt(tok.ratio, '.3f')}"
            else:
                extra = f", prob {fmt(tok.prob, '.3f')}"
            spans.append(token_span(tok.text, cls, f"round {index + 1}: {tok.origin}{extra}"))
    caret_html = '<span class="sv-caret"></span>' if caret else ""
    return box_html(f"{prompt_html(prompt)}{''.join(spans)}{_more(len(spans), total)}{caret_html}", follow)


def plain_text_html(
    prompt: object | None, tokens: Sequence[object], cls: str = "sv-plain", caret: bool = False, follow: bool = False
) -> str:
    """Plain decoding's tokens after the prompt; `cls` is one of ours. At most MAX_TOKENS_DRAWN tokens."""
    spans = "".join(token_span(t, cls, "plain decoding") for t in tokens[:MAX_TOKENS_DRAWN])
    head = prompt_html(prompt) if prompt else ""
    more = _more(min(len(tokens), MAX_TOKENS_DRAWN), len(tokens))
    return box_html(f"{head}{spans}{more}{'<span class=sv-caret></span>' if caret else ''}", follow)


def lane_html(*, name: str, kind: str, body: str, done: int, total: int, rate: float) -> str:
    """A race lane: its name, counters, text box (`body`, already built) and progress bar; kind is
    "speculative" or "plain"."""
    cls = "spec" if kind == "speculative" else "plain"
    width = min(100.0, max(0.0, 100.0 * done / total)) if total else 0.0
    return (
        f'<div class="sv-lane"><div class="sv-lane-head"><span class="name {cls}">{esc(name)}</span>'
        f'<span class="stats"><b>{esc(done)}</b> tokens · <b>{esc(fmt(rate, ".1f"))}</b> tok/s</span></div>{body}'
        f'<div class="bar"><div style="width:{width:.1f}%;background:{COLORS[kind]}"></div></div></div>'
    )


def clock_html(t: float, end: float) -> str:
    return f'<div class="sv-clock">{esc(fmt(min(t, end), ".1f"))} s <small>of {esc(fmt(end, ".1f"))} s</small></div>'
