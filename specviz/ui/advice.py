"""A slow run's explanation in place, with one button that reruns it with the suggested setting
(docs/DESIGN.md, "Why a run was slow")."""

from __future__ import annotations

import streamlit as st

from specviz import markup
from specviz.lessons import advice
from specviz.traces.trace import Trace

from .settings import config_widgets, widget_values
from .state import key, page_state, shared


def apply_settings(page: str, values: dict[str, object], run: bool) -> None:
    """Set widget values by key (before the widgets are drawn: call from a button's on_click), and ask the
    page's run section to start a run on this script run."""
    for name, value in values.items():
        st.session_state[name] = value
    if run:
        page_state(page).autorun = True


def rerun_as_suggested(page: str, trace: Trace, suggestion: advice.Suggestion) -> None:
    """The suggested rerun: the same prompt and settings, but the suggestion's, with plain decoding timed."""
    values = widget_values({**config_widgets(trace.config), **dict(suggestion.settings)})
    values[key(page, "prompt")] = trace.prompt
    if page == "step":
        values[key(page, "baseline")] = True  # the rerun must measure its speed-up too
    shared().prompt = trace.prompt
    apply_settings(page, values, run=True)


def slow_run_note(page: str, trace: Trace) -> advice.SlowRun | None:
    """Under a run slower than plain decoding: why, from its own numbers, and the one rerun that would help."""
    slow = advice.explain_slow(trace)
    if slow is None:
        return None
    with st.container(border=True, key=key(page, "slow")):
        st.markdown(markup.slow_run_markdown(slow))
        st.button(
            slow.suggestion.label,
            icon=":material/replay:",
            type="primary",
            key=key(page, "suggested_rerun"),
            on_click=rerun_as_suggested,
            args=(page, trace, slow.suggestion),
            help="Sets the sidebar to this run's settings with the suggested change, and runs the same prompt again.",
        )
    return slow
