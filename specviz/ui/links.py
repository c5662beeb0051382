"""The address's query parameters, each read by one strict function: a link is typed by anyone.

`query_number` is the only reader of `st.query_params` in the app. A value is a whole number when it is ASCII digits
only (str.isdigit also takes '²' and other scripts' digits, which int() then refuses), at most MAX_DIGITS of them
(int() refuses more than 4,300 digits; a 100,000-character value is never converted), and inside the range the
caller gives. Anything else is ignored with one line on the page saying so, never an exception.
"""

from __future__ import annotations

import streamlit as st

from specviz.markup import md

MAX_DIGITS = 6  # every number a link carries is small; longer is refused before int() reads it
SHOWN_CHARS = 24  # how much of a refused value the note repeats


def parse_number(text: object, lo: int, hi: int) -> tuple[int | None, str]:
    """(the number, "") when `text` is ASCII digits, at most MAX_DIGITS, with lo <= number <= hi;
    else (None, why it was refused)."""
    if not isinstance(text, str) or not text:
        return None, "it is empty"
    if len(text) > MAX_DIGITS:
        return None, f"it is longer than {MAX_DIGITS} characters"
    if not (text.isascii() and text.isdigit()):
        return None, "it is not a whole number in the digits 0-9"
    number = int(text)
    if not lo <= number <= hi:
        return None, f"it is not between {lo} and {hi}"
    return number, ""


def query_number(name: str, lo: int, hi: int, meaning: str) -> int | None:
    """The query parameter `name` as a number from lo to hi, or None when it is absent or refused; a refused value
    is noted on the page in one line (`meaning` says what the number would have been)."""
    if name not in st.query_params:
        return None
    text = st.query_params.get(name, "")
    number, why = parse_number(text, lo, hi)
    if number is None:
        shown = md(text, SHOWN_CHARS)
        st.caption(f"The link's {md(name)}={shown} was ignored: {why} ({meaning}, {lo}-{hi}).")
    return number
