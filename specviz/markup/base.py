"""What every HTML builder shares: escaping, tolerant number formatting, fixed class names, and caps.

A trace may come from an uploaded file, so any field may hold any value (a string where a number
belongs, NaN, a huge count). Builders therefore interpolate nothing raw: text and numbers go through
`esc`, class names through a fixed mapping (`css_class`), and every repetition is capped so that one
view stays within a few MB of HTML whatever the trace says.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping

# Caps on what one view draws (a real run has at most 1024 new tokens and gamma <= 32).
MAX_PROMPT_SHOWN = 20_000  # characters of the prompt in a text box
MAX_TOKEN_CHARS = 200  # characters of one token's text
MAX_TOKENS_DRAWN = 4_096  # token spans in one text box
MAX_CHIPS = 64  # chips (drafted tokens or alternatives) in one round
MAX_CELLS = 96  # cells in one KV-cache row
MAX_LABEL_CHARS = 300  # a model name, a note, a label
MD_SPECIAL = set("\\`*_[]<>!$~:#")
# Streamlit's markdown links bare URLs, www. names and e-mail addresses even when escaped: a word joiner
# after "//", "www" and "@" keeps them text.
AUTOLINK = re.compile(r"(?<=:)//|(?i:www)(?=\.)|@")
WORD_JOINER = "\u2060"

VERDICT_CLASS = {"accepted": "accepted", "rejected": "rejected", "unchecked": "unchecked"}
SOURCE_CLASS = {"resampled": "resampled", "bonus": "bonus"}
ORIGIN_CLASS = {"accepted": "accepted", "resampled": "resampled", "bonus": "bonus"}
LEGEND_NAMES = {
    "accepted": "accepted draft token",
    "rejected": "rejected draft token",
    "unchecked": "not checked (after a rejection)",
    "resampled": "resampled from the residual",
    "bonus": "bonus token from p",
    "prompt": "prompt",
    "plain": "plain decoding",
}


def esc(value: object) -> str:
    """Any value as HTML text, quotes included, whatever its type."""
    return html.escape(str(value), quote=True)


def css_class(value: object, allowed: Mapping[str, str], default: str) -> str:
    """A class name from a fixed mapping, never the raw value."""
    return allowed.get(value, default) if isinstance(value, str) else default


def clip(value: object, limit: int) -> str:
    """str(value), cut to `limit` characters with a note of how many were left out."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def visible(text: object) -> str:
    """Token text with its whitespace made visible: a space is ␣, a newline ↵, a tab ⇥, nothing ∅."""
    text = clip(text, MAX_TOKEN_CHARS)
    if text == "":
        return "∅"
    return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥").replace("\r", "")


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def fmt(x: object, spec: str) -> str:
    """x formatted with `spec` when it is a number, else its text (clipped); the caller escapes it."""
    if is_number(x):
        try:
            return format(x, spec)
        except (ValueError, OverflowError):
            pass
    return clip(x, 40)


def fmt_prob(x: object) -> str:
    if x is None:
        return "—"
    if is_number(x) and math.isfinite(x) and 0 < x < 0.001:
        return "<0.001"
    return fmt(x, ".3f")


def count(x: object, limit: int = 10**9) -> int:
    """A non-negative int for arithmetic and loops: a non-integer value counts as 0, a huge one as `limit`."""
    if isinstance(x, bool) or not isinstance(x, int):
        return 0
    return min(max(x, 0), limit)


def counted(n: int, word: str, words: str | None = None) -> str:
    """n with its noun: "1 run", "2 runs", "1,024 tokens" (`words` where the plural is not word + "s")."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def round_ending(event: object) -> str:
    """How a round ended, for its words and chips: "empty" (nothing drafted: one plain target step), "eos" (an
    accepted drafted token was the end of text: the commit stopped there, so no next token followed it), else its
    next token's source ("bonus" or "resampled"; anything else reads as "bonus")."""
    drafted = getattr(event, "drafted", ())
    if not drafted and not getattr(event, "tree", ()):
        return "empty"
    kept = count(getattr(event, "n_accepted", 0))
    if len(getattr(event, "appended", ())) < kept + 1:
        return "eos"
    return css_class(getattr(event, "next_source", ""), SOURCE_CLASS, "bonus")


def md(value: object, limit: int = MAX_LABEL_CHARS) -> str:
    """A value inside a line of markdown: a number as itself; anything else clipped, on one line, with the
    characters that make links, emphasis, code, HTML, math or Streamlit directives escaped."""
    if is_number(value):
        return str(value)
    text = " ".join(clip(value, limit).splitlines())
    text = AUTOLINK.sub(lambda m: m.group(0) + WORD_JOINER, text)
    return "".join("\\" + c if c in MD_SPECIAL else c for c in text)


def md_fmt(x: object, spec: str) -> str:
    """fmt for markdown: a number formatted, anything else escaped."""
    return fmt(x, spec) if is_number(x) else md(x)


def md_prob(x: object) -> str:
    return fmt_prob(x) if x is None or is_number(x) else md(x)


def code(text: object) -> str:
    """Token text as a markdown code span whose fence is longer than any run of backticks inside it."""
    shown = visible(text)
    longest = run = 0
    for c in shown:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if longest or shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"
