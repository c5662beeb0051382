"""The prompt picker: example prompts by category, and a text area to edit them or type your own.

The prompt is shared between pages (`Shared.prompt`). The two boxes follow the text: when it is one of the
examples they show its category and it, otherwise they show "your own prompt" and no example.
"""

from __future__ import annotations

import streamlit as st

from specviz.lessons import lab
from specviz.runs import MAX_PROMPT_CHARS

from .files import load_prompts
from .state import key, shared

OWN_CATEGORY = "your own prompt"
NO_EXAMPLE = "no example selected: pick one to replace your prompt"


def _category_of(prompts: dict[str, list[str]], text: str, current: str | None) -> str | None:
    """The category of this example text (the current one first), or None for a prompt of the user's own."""
    if current in prompts and text in prompts[current]:
        return current
    return next((name for name, examples in prompts.items() if text in examples), None)


def _pick_category(page: str) -> None:
    category = st.session_state[key(page, "category")]
    if category is None:
        return
    first = load_prompts()[category][0]
    st.session_state[key(page, "example")] = first
    st.session_state[key(page, "prompt")] = first
    shared().prompt = first


def _pick_example(page: str) -> None:
    example = st.session_state[key(page, "example")]
    if example is None:
        return
    st.session_state[key(page, "prompt")] = example
    shared().prompt = example


def _share_prompt(page: str) -> None:
    shared().prompt = st.session_state[key(page, "prompt")]


def _follow_text(page: str, prompts: dict[str, list[str]]) -> str | None:
    """Point both boxes at the example the text is, or at none; the category whose examples to offer."""
    text_key, category_key, example_key = key(page, "prompt"), key(page, "category"), key(page, "example")
    if text_key not in st.session_state:
        st.session_state[text_key] = shared().prompt or next(iter(prompts.values()))[0]
    text = st.session_state[text_key]
    category = _category_of(prompts, text, st.session_state.get(category_key))
    st.session_state[category_key] = category
    st.session_state[example_key] = text if category is not None else None
    return category


def prompt_picker(page: str, label: str = "Prompt", height: int = 110) -> str:
    """Example prompts by category, and a text area to edit them or type your own. Shared between pages."""
    prompts = load_prompts()
    category = _follow_text(page, prompts)
    c1, c2 = st.columns([1, 3])
    c1.selectbox(
        "Example category",
        list(prompts),
        index=None,
        placeholder=OWN_CATEGORY,
        key=key(page, "category"),
        on_change=_pick_category,
        args=(page,),
    )
    c2.selectbox(
        "Example prompt",
        prompts[category or next(iter(prompts))],
        index=None,
        placeholder=NO_EXAMPLE,
        key=key(page, "example"),
        on_change=_pick_example,
        args=(page,),
        format_func=lambda p: lab.short(p, 110),
    )
    return st.text_area(
        label,
        key=key(page, "prompt"),
        height=height,
        on_change=_share_prompt,
        args=(page,),
        help=f"Edit freely. At most {MAX_PROMPT_CHARS} characters.",
    )
