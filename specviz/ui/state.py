"""The app's session state: one dataclass per page under one key, one shared slot, widget keys from one helper.

Pages never spell a session-state key: they get their PageState (`page_state`), the shared slot (`shared`)
and widget keys (`key(page, name)`) from here. Widget keys are "page.name", as Streamlit and the tests see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from specviz.decoding.config import SpecConfig
from specviz.lessons import lab
from specviz.models.loading import PairSpec
from specviz.serving.jobs import Job
from specviz.traces.trace import Trace

HISTORY_LIMIT = 60  # runs kept for the Theory page's measured points


def key(page: str, name: str) -> str:
    """The key of widget `name` on `page` (or "cfg" for the sidebar)."""
    return f"{page}.{name}"


@dataclass(frozen=True)
class Settings:
    """The sidebar's settings of this script run."""

    spec: PairSpec
    config: SpecConfig | None  # None when a setting is out of range
    config_error: str | None
    chat: bool  # wrap prompts in the chat template
    has_pair: bool = True  # False while a custom pair has not been applied


@dataclass
class PageState:
    """Everything a page keeps between reruns (its widgets' values live under their own keys)."""

    trace: Trace | None = None  # the run shown
    label: str = ""  # "your run", "the uploaded run", ...
    job: Job | None = None  # the background run of this page, running or finished
    error: str | None = None  # the last run's error, shown until the next run
    result: Any = None  # what a non-trace run produced (the lab's runs, lossless's distributions)
    index: int = 0  # the round shown by the step-through viewer
    playing: bool = False
    tick_armed: bool = False  # the play timer's next tick advances a round
    replaying: bool = False  # the race replay's clock is running
    clock_start: float = 0.0
    upload_id: str | None = None  # the uploaded file already read (parsed once, not on every rerun)
    upload_error: str | None = None  # why the last file was refused (it was let go), shown until the next upload
    upload_round: int = 0  # the uploader's key changes with it: a refused file's uploader is emptied
    recorded_shown: str | None = None
    autorun: bool = False  # a button (a suggested rerun, an experiment) asked for a run: run_section starts it
    experiment: str | None = None  # the guided experiment last started on this page (specviz/lessons/experiments.py)
    experiment_job: Job | None = None  # the run it started (its answer shows once this has finished)
    stopped: str | None = None  # the last run was stopped: what was kept and what was dropped (until the next one)

    @property
    def busy(self) -> bool:
        return self.job is not None and not self.job.finished


@dataclass
class Shared:
    """What the pages share: the settings, the prompt, this session's runs."""

    settings: Settings | None = None
    prompt: str | None = None  # the prompt last picked or typed on any page
    history: list[tuple[str, Trace]] = field(default_factory=list)
    last_with_baseline: Trace | None = None  # the last run shown that also timed plain decoding (for Race)


def page_state(page: str) -> PageState:
    found = st.session_state.get(key("state", page))
    if not isinstance(found, PageState):
        found = PageState()
        st.session_state[key("state", page)] = found
    return found


def shared() -> Shared:
    found = st.session_state.get("state.shared")
    if not isinstance(found, Shared):
        found = Shared()
        st.session_state["state.shared"] = found
    return found


def remember(trace: Trace, label: str) -> None:
    """This session's runs, for the Theory page's measured points."""
    history = shared().history
    if not any(t is trace for _, t in history):
        history.append((label, trace))
        del history[:-HISTORY_LIMIT]


def history() -> list[tuple[str, Trace]]:
    return list(shared().history)


def adopt_trace(page: str, trace: Trace, label: str, at_end: bool = False) -> None:
    """Show this trace on the page (from a run, an upload or a recording) and remember it for Theory."""
    state = page_state(page)
    state.trace, state.label = trace, label
    state.index = max(0, len(trace.rounds) - 1) if at_end else 0
    state.playing = False
    if trace.baseline_summary is not None:
        shared().last_with_baseline = trace
    remember(trace, f"{label}: {lab.short(trace.prompt, 30)}")
