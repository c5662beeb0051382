"""Background runs: the run section every page gets in one call (button, errors, live view, result),
and the work each page runs (a trace, a batch, the lossless distributions).

How a job flows: the button's click checks what a user can get wrong (settings, prompt, models), then
starts the work in a worker thread (jobs.start_job) and keeps the Job in the page's PageState. While it
runs, a fragment redraws its live view twice a second; when it has finished, the next script run hands
its result to the page once (`on_result`) or keeps its error on the page until the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from specviz import drafters
from specviz.decoding.config import SpecConfig
from specviz.lessons import lab
from specviz.markup import code
from specviz.runs import Cancelled, PromptError, check_length, encode, run_trace
from specviz.serving import budgets
from specviz.serving.jobs import Job, describe_error, start_job
from specviz.serving.pairs import Lease
from specviz.traces.trace import Trace

from .pair import require_pair
from .safe import safe
from .server import bounded, session_alive, session_learning, visitor
from .state import PageState, Settings, key, page_state

Work = Callable[[Job, Any], Any]  # work(job, pair) -> result, run in the worker thread
Budget = Callable[[Any], "str | None"]  # budget(pair) -> the one line refusing a run beyond this server's bound


@dataclass(frozen=True)
class RunButton:
    """The page's run button: where it goes and what it says."""

    slot: Any  # the column (or container) to draw it in
    label: str
    icon: str | None = None
    disabled: bool = False  # besides while a run is going


def _fail(state: PageState, message: str) -> bool:
    state.error = message
    return False


@dataclass(frozen=True)
class Context:
    """A context to check before a run: a prompt, and the answer so far that the run appends to it."""

    prompt: str
    answer: str = ""
    where: str = "Prompt"  # how the error names it


def contexts_of(prompt: str | None, answer: str, batch: Sequence[str]) -> list[Context]:
    """The run's prompt (with the answer so far), and every distinct prompt of a batch, named by its place,
    so that one bad prompt stops a batch before it starts."""
    found = [] if prompt is None else [Context(prompt, answer, "Prompt and answer so far" if answer else "Prompt")]
    unique = list(dict.fromkeys(batch))
    if len(unique) == 1:  # one request: no place to name
        return found + [Context(unique[0])]
    return found + [
        Context(p, where=f"Prompt {i + 1} of {len(unique)} of the batch ({code(lab.short(p, 40))})")
        for i, p in enumerate(unique)
    ]


def _check_contexts(state: PageState, contexts: Sequence[Context], pair=None, chat: bool = True) -> bool:
    """runs.encode's limits on each context: with no pair, only those that need no tokenizer (before waiting
    for the models); with the pair, the token counts too."""
    for context in contexts:
        try:
            if pair is None:
                check_length(context.prompt, context.answer)
            else:
                encode(pair, context.prompt, chat, answer=context.answer)
        except PromptError as exc:
            return _fail(state, f"{context.where}: {exc}.")
    return True


def _leased(run: Work, lease: Lease) -> Callable[[Job], Any]:
    def work(job: Job) -> Any:
        with lease:  # the registry never unloads the pair while this run holds it
            return run(job, lease.pair)

    return work


def launch(
    page: str,
    settings: Settings,
    work: Callable[[], Work],
    *,
    prompt: str | None = None,
    answer: str = "",
    batch: Sequence[str] = (),
    meta: dict | None = None,
    budget: Budget | None = None,
) -> bool:
    """Check what a user can get wrong (the prompt with the answer so far, every prompt of a batch, the run's size
    against this server's budget per visitor), then run work()(job, pair) in the background; it stops when this
    browser session goes. False after an error."""
    contexts = contexts_of(prompt, answer, batch)
    state = page_state(page)
    state.error = None
    if state.busy:
        return False
    if settings.config is None:
        return _fail(state, f"Fix the settings in the sidebar first: {settings.config_error}")
    if not _check_contexts(state, contexts):
        return False
    lease = require_pair(settings)
    if lease is None:
        return False
    try:
        if not _check_contexts(state, contexts, lease.pair, settings.chat):
            lease.release()
            return False
        refused = budget(lease.pair) if budget is not None else None
        if refused:
            lease.release()
            return _fail(state, refused)
        run = work()
        info = {"prompt": prompt or "", "config": settings.config, **(meta or {})}
        state.job = start_job(page, _leased(run, lease), None, info, alive=session_alive(), visitor=visitor())
    except BaseException:
        lease.release()
        raise
    return True


def take_finished(page: str) -> Job | None:
    """The job of this page that has just finished, once; its error is kept on the page until the next run."""
    state = page_state(page)
    job = state.job
    if job is None or not job.finished or job.consumed:
        return None
    job.consumed = True
    if job.state == "failed":
        state.error = job.error
        st.error(job.error)  # this run has drawn the page's errors already; later runs show it there
    return job


def _keep_result(page: str, result: Any, job: Job) -> None:
    page_state(page).result = result


def run_section(
    page: str,
    settings: Settings,
    button: RunButton,
    work: Callable[[], Work],
    *,
    live: Callable[[Job], None],
    errors: Any,
    prompt: str | None = None,
    answer: str = "",
    batch: Sequence[str] = (),
    on_result: Callable[[str, Any, Job], None] = _keep_result,
    budget: Budget | None = None,
) -> PageState:
    """A page's whole run section: the button (launches work() when pressed, after checking the prompt with
    the answer so far, or every prompt of a batch, against the prompt limits), the page's error (in `errors`,
    a container), the live view with a Stop button while it runs, and the finished result, handed once to
    on_result(page, result, job) (default: kept as PageState.result). Returns the page's state."""
    state = page_state(page)
    clicked = button.slot.button(
        button.label,
        icon=button.icon,
        type="primary",
        key=key(page, "run"),
        disabled=state.busy or button.disabled,
        width="stretch",
    )
    if state.autorun and not state.busy:  # a suggested rerun or an experiment set the settings and pressed Run
        state.autorun, clicked = False, True
    if clicked:
        with errors:
            launched = launch(page, settings, work, prompt=prompt, answer=answer, batch=batch, budget=budget)
        if launched and state.experiment is not None and state.experiment_job is None:
            state.experiment_job = state.job
    if state.error:
        errors.error(state.error)
    if state.busy:
        _live_fragment(page, live)
    finished = take_finished(page)
    if finished is not None and finished.result is not None:
        on_result(page, finished.result, finished)
    return state


@st.fragment(run_every=0.5)
@safe
def _live_fragment(page: str, render: Callable[[Job], None]) -> None:
    """While this page's job runs: its state, a Stop button and a live view, refreshed twice a second."""
    job = page_state(page).job
    if job is None or job.finished:
        st.rerun()
    c1, c2 = st.columns([5, 1], vertical_alignment="center")
    with c1:
        if job.state == "waiting":
            st.info(
                "Another run (from another tab or user) is using the models. Visitors take turns, one run "
                f"each, and yours starts in its turn — waiting {job.waited_seconds:.0f} s. Press Stop to give up."
            )
        elif job.cancel.is_set():
            st.caption("Stopping after the current round…")
        else:
            elapsed = time.monotonic() - job.created  # the live view below shows job.progress, on its bar
            st.caption(f":material/progress_activity: Running · {elapsed:.0f} s")
    c2.button(
        "Stop",
        icon=":material/stop:",
        key=key(page, "stop"),
        on_click=job.stop,
        width="stretch",
        help="Cancels the run between two rounds; what was computed so far is kept.",
    )
    render(job)


# --- the work each page runs -----------------------------------------------------------------------


def trace_work(prompt: str, config: SpecConfig, chat: bool, baseline: bool) -> Work:
    """A speculative run (and optionally the baseline), its events streamed into the job; its drafters learn from
    this session's traffic and heads (read here, in the script's thread: the worker has no session)."""
    learning = session_learning()

    def work(job: Job, pair) -> Trace:
        return run_trace(
            pair,
            prompt,
            config,
            chat=chat,
            baseline=baseline,
            cancel=job.cancel,
            on_event=job.on_event,
            on_wait=job.on_wait,
            traffic=learning.traffic(pair),
            heads=learning.trained_heads(pair),
        )

    return work


@dataclass(frozen=True)
class BatchResult:
    """The Acceptance lab's finished runs, and the error of the run that stopped the batch, if one failed."""

    runs: list[lab.LabRun]
    failed: str | None = None


def lab_work(plan: Sequence[lab.PlannedRun], chat: bool) -> Work:
    """The batch one run at a time: a run that fails (or a stop while waiting) keeps the runs finished before it."""
    learning = session_learning()

    def work(job: Job, pair) -> BatchResult:
        traffic, heads = learning.traffic(pair), learning.trained_heads(pair)
        runs: list[lab.LabRun] = []
        for i, planned in enumerate(plan):
            job.fraction = i / len(plan)
            c = planned.config
            job.progress = (
                f"run {i + 1} of {len(plan)}: {planned.category} · {drafters.label(c.drafter)} · "
                f"{'greedy' if c.greedy else f'T={c.temperature:g}'} · {c.schedule}"
            )
            try:
                done = lab.run_batch(
                    pair, [planned], chat=chat, cancel=job.cancel, on_wait=job.on_wait, traffic=traffic, heads=heads
                )
            except Cancelled:
                break
            except Exception as exc:  # noqa: BLE001 - the finished runs stay; the failure is one line
                return BatchResult(
                    runs, f"Run {i + 1} of {len(plan)} failed, the runs before it are kept: {describe_error(exc)}"
                )
            if not done:  # stopped
                break
            runs.extend(done)
        return BatchResult(runs)

    return work


def lab_budget(plan: Sequence[lab.PlannedRun]) -> Budget | None:
    """On an exposed server: the batch's runs x max new tokens against the budget, checked before it starts."""
    if not bounded() or not plan:
        return None
    tokens = max(p.config.max_new_tokens for p in plan)
    return lambda pair: budgets.lab_refusal(len(plan), tokens)


def lab_budget_note() -> str:
    """The bound as the Acceptance lab states it before the batch ("" where nothing is bounded)."""
    if not bounded():
        return ""
    return f" This server is shared, so one batch here takes {budgets.stated(budgets.LAB)}."


def lossless_work(prompt: str, config: SpecConfig, chat: bool, answer_prefix: str) -> Work:
    from specviz.lessons.lossless import next_token_distributions

    def work(job: Job, pair):
        return next_token_distributions(
            pair, prompt, config, chat=chat, answer_prefix=answer_prefix, cancel=job.cancel, on_wait=job.on_wait
        )

    return work


def lab_live(job: Job) -> None:
    st.progress(job.fraction, text=job.progress or "starting…")


def quiet_live(job: Job) -> None:
    st.caption("Computing p and q: one forward pass of each model over the context…")
