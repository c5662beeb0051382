"""The step-through viewer: one round (chips, the next token's distribution, both KV caches, the words),
a run's summary, and the controls that step, play and pause through the rounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from specviz import charts, markup
from specviz.decoding.config import SpecConfig
from specviz.lessons import lab
from specviz.runs import speedup
from specviz.serving.jobs import Job
from specviz.traces.trace import RoundEvent, TokenEvent, Trace

from .advice import slow_run_note
from .files import recorded_traces, trace_download
from .recorded import its_prompt, trace_banner
from .safe import safe
from .server import shared_drafts_note
from .state import adopt_trace, key, page_state, remember

SPEEDS = {"0.5×": 0.5, "1×": 1.0, "2×": 2.0, "4×": 4.0}
KV_WORDS = (
    "A model's KV cache stores its work on every token so far, so each forward pass only processes the new "
    "tokens. The verify pass adds the drafted tokens to the target's cache, and drafting adds them to the "
    "draft's. After the verdict both caches are **cropped** back to the committed text "
    "(`DynamicCache.crop`); rejected tokens are forgotten, and the prompt is never processed again. A cell "
    "marked **new** is a committed token this cache has not read yet, fed first and counted in the lengths: in "
    "round 1 the prompt's last token, later the last round's correction or bonus token, and for the draft model "
    "also its own last draft token when the target kept it (it proposed that token but never read it)."
)


@dataclass(frozen=True)
class RoundContext:
    """What a round view needs besides the round: the run's settings and size, and a key for its chart."""

    config: SpecConfig
    rounds: int | None  # rounds in the run (None while it runs)
    prompt_len: int  # prompt tokens, for the KV caches
    chart_key: str

    @classmethod
    def of(cls, trace: Trace, chart_key: str) -> RoundContext:
        return cls(trace.config, len(trace.rounds), len(trace.prompt_ids), chart_key)


def legend(kinds: Sequence[str] = ("accepted", "rejected", "unchecked", "resampled", "bonus")) -> None:
    st.html(markup.legend_html(kinds))


def round_view(event: RoundEvent, context: RoundContext, *, show_chart: bool = True, show_cache: bool = True) -> None:
    """One round: chips with q, p, min(1, p/q), u and verdicts, the next token, its distribution, the KV caches."""
    greedy = context.config.greedy
    st.html(
        markup.round_head_html(event, context.rounds)
        + markup.round_chips_html(event, greedy)
        + markup.tree_html(event, greedy)
    )
    shared_drafts_note()
    left, right = st.columns([3, 2], gap="large")
    with right:
        asked = context.config.gamma if context.config.schedule == "constant" else None
        st.markdown(markup.explain_round(event, greedy, asked=asked, budget=context.config.max_new_tokens))
    ending = markup.round_ending(event)
    with left:
        if show_chart and ending == "eos":
            st.markdown("**At the end of text:** the run ends; no token is drawn after it.")
        elif show_chart:
            where = {"resampled": "rejection", "empty": "next-token"}.get(ending, "bonus")
            what = "the target's distribution p over its top tokens"
            if where == "rejection" and event.top_q:  # greedy needs no residual (the correction is argmax p)
                what = (
                    "p and q over the top tokens"
                    if greedy
                    else "p, q and the residual norm(max(0, p − q)) over the top tokens"
                )
            st.markdown(f"**At the {where} position:** {what}")
            st.plotly_chart(
                charts.next_token_figure(event, greedy),
                key=f"nt-{context.chart_key}-{event.index}",
                config={"displayModeBar": False},
            )
    with right:
        if show_chart:
            st.markdown(markup.explain_chart(event, greedy))
    # the whole width: the loop's code and the round's tokens beside it (in the right-hand column every line wrapped)
    st.markdown("**The loop in code** — the lines this round ran are marked:")
    st.html(markup.round_code_html(event, greedy, asked=asked, budget=context.config.max_new_tokens))
    if show_cache:
        left, right = st.columns([3, 2], gap="large")
        left.markdown("**KV caches** — the keys and values each model keeps for the tokens it has already seen:")
        left.html(markup.kv_cache_html(event, context.prompt_len, context.config.drafter))
        right.markdown(KV_WORDS)


def summary_metrics(trace: Trace) -> None:
    s = trace.summary
    rate = speedup(trace)
    cols = st.columns(6)
    cols[0].metric("New tokens", s.new_tokens)
    cols[1].metric("Rounds (target passes)", s.rounds)
    cols[2].metric(
        "Mean acceptance length",
        markup.length_shown(lab.mean_acceptance_length(trace)),
        help="1 + accepted ÷ drafts (rounds that drafted): the tokens a verify pass with a draft commits, bonus "
        f"included. Over every target pass, empty drafts too: {s.new_tokens / s.rounds if s.rounds else 0:.2f} new "
        "tokens per pass, the speed-up if drafting were free and a verify pass cost as much as one plain step.",
    )
    cols[3].metric(
        "Acceptance rate",
        markup.rate_shown(s.drafted, s.acceptance_rate),
        help="Accepted drafted tokens / drafted tokens."
        if s.drafted
        else f"{markup.NOTHING_DRAFTED.capitalize()}: no rate (every round was one plain target step).",
    )
    cols[4].metric("Speculative tok/s", f"{s.tokens_per_second:.1f}")
    cols[5].metric(
        "Speed-up",
        f"{rate:.2f}×" if rate is not None else "—",
        help="Speculative tokens/s ÷ plain decoding tokens/s (measured, prompt prefill excluded)."
        if rate is not None
        else "Run with 'also time plain decoding' to measure it.",
    )


def stopped_note(trace: Trace) -> None:
    if trace.summary.finish_reason == "cancelled" or (
        trace.baseline_summary is not None and trace.baseline_summary.finish_reason == "cancelled"
    ):
        st.warning(markup.stopped_message(len(trace.rounds)))


def live_rounds(job: Job) -> None:
    """Live view of a speculative run (and its baseline) as events arrive."""
    events = list(job.events)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    config: SpecConfig = job.meta["config"]
    prompt = job.meta.get("prompt", "")
    if tokens:
        st.progress(
            min(1.0, len(tokens) / max(1, config.max_new_tokens)),
            text=f"Now timing plain decoding for the speed-up: token {len(tokens)} of ≤ {config.max_new_tokens}",
        )
    if not rounds:
        st.caption("Waiting for the first round (the prompt is processed first)…")
        st.html(markup.text_html(prompt, [], caret=True))
        return
    last = rounds[-1]
    st.html(markup.text_html(prompt, rounds, current=last.index, caret=not tokens, follow=True))
    context = RoundContext(config, None, rounds[0].target_cache_before + 1, "live")
    round_view(last, context, show_chart=False)


# --- stepping through a finished run --------------------------------------------------------------


def _goto(page: str, index: int, playing: bool = False) -> None:
    state = page_state(page)
    state.index, state.playing = index, playing


def _slider_moved(page: str) -> None:
    _goto(page, int(st.session_state[key(page, "slider")]) - 1)


def _interval(page: str) -> float | None:
    """The play timer's tick: two seconds a round at 1×; None while paused."""
    speed = SPEEDS.get(st.session_state.get(key(page, "speed")) or "1×", 1.0)
    return round(2.0 / speed, 2) if page_state(page).playing else None


def trace_viewer(page: str, trace: Trace) -> None:
    """Step forward and back through the rounds of a trace; play and pause at a chosen speed."""
    n = len(trace.rounds)
    if n == 0:
        st.info("This run has no rounds to show.")
        return
    state = page_state(page)
    state.index = min(max(int(state.index), 0), n - 1)
    interval = _interval(page)
    st.fragment(_viewer_body, run_every=interval)(page, trace, interval)


def _advance(page: str, n: int) -> tuple[int, bool]:
    """One tick of the play timer: the next round (the first tick after Play only arms it); stop at the end."""
    state = page_state(page)
    if state.playing and state.tick_armed:
        state.index = min(state.index + 1, n - 1)
    state.tick_armed = state.playing
    if state.playing and state.index >= n - 1:
        state.playing = state.tick_armed = False
    return state.index, state.playing


def _controls(page: str, index: int, n: int, playing: bool) -> None:
    # the key gives the row a class: in a narrow window the buttons show their icons only (style.css)
    controls = st.container(key=f"sv-controls-{page}").columns([1, 1, 1.4, 1, 1, 2.2], vertical_alignment="bottom")
    step = {"on_click": _goto, "width": "stretch"}
    controls[0].button(
        "First", icon=":material/first_page:", key=key(page, "first"), args=(page, 0), help="First round", **step
    )
    controls[1].button(
        "Back",
        icon=":material/chevron_left:",
        key=key(page, "prev"),
        args=(page, max(0, index - 1)),
        help="Previous round",
        **step,
    )
    if playing:
        controls[2].button("Pause", icon=":material/pause:", key=key(page, "pause"), args=(page, index, False), **step)
    else:
        start = 0 if index >= n - 1 else index
        controls[2].button(
            "Play",
            icon=":material/play_arrow:",
            key=key(page, "play"),
            args=(page, start, True),
            type="primary",
            disabled=n < 2,
            help="Advance one round at a time",
            **step,
        )
    controls[3].button(
        "Next",
        icon=":material/chevron_right:",
        key=key(page, "next"),
        args=(page, min(n - 1, index + 1)),
        help="Next round",
        **step,
    )
    controls[4].button(
        "Last", icon=":material/last_page:", key=key(page, "last"), args=(page, n - 1), help="Last round", **step
    )
    controls[5].segmented_control(
        "Speed", list(SPEEDS), key=key(page, "speed"), default="1×", label_visibility="collapsed"
    )


@safe
def _viewer_body(page: str, trace: Trace, interval: float | None) -> None:
    n = len(trace.rounds)
    index, playing = _advance(page, n)
    _controls(page, index, n, playing)
    if _interval(page) != interval:
        st.rerun()  # play, pause or a new speed: redraw the viewer with the new tick interval
    if n > 1:
        st.session_state[key(page, "slider")] = index + 1
        st.slider("Round", 1, n, key=key(page, "slider"), on_change=_slider_moved, args=(page,))
    st.markdown("**The text so far** — each token coloured by where it came from; this round's tokens are outlined:")
    legend(("prompt", "accepted", "resampled", "bonus"))
    st.html(markup.text_html(trace.prompt, trace.rounds, current=index))
    round_view(trace.rounds[index], RoundContext.of(trace, page))


def show_trace(page: str, trace: Trace, label: str) -> None:
    """A finished run on the Step through page: its header, settings, summary, the viewer and its text."""
    head, download = st.columns([5, 1.3], vertical_alignment="bottom")
    head.subheader(f"Showing {label}")
    with download:
        trace_download(trace, page)
    st.caption(markup.trace_caption(trace))
    if label.startswith("the recorded run"):
        trace_banner(f"{label}, {its_prompt(trace)}", trace, "Run")
    stopped_note(trace)
    summary_metrics(trace)
    st.caption(markup.A_BRIDGE)  # the rate above beside Leviathan's a, which the guided answers and Theory use
    slow_run_note(page, trace)
    trace_viewer(page, trace)
    with st.expander("The final text"):
        st.text(markup.clip(trace.summary.text, markup.MAX_PROMPT_SHOWN * 5))


def recorded_picker(page: str) -> None:
    """Pick a recorded run to show (in the Replay popover)."""
    recorded = recorded_traces()
    if not recorded:
        return
    names = [name for name, _ in recorded]
    choice = st.selectbox(
        "…or a recorded run", names, index=None, key=key(page, "recorded_pick"), placeholder="Choose a recorded run"
    )
    state = page_state(page)
    if choice is not None and state.recorded_shown != choice:
        state.recorded_shown = choice
        adopt_trace(page, dict(recorded)[choice], f"the recorded run “{choice}”")


def trace_to_show(page: str) -> tuple[Trace | None, str]:
    """The page's trace and its label; before any, the first recorded run (remembered for Theory)."""
    state = page_state(page)
    if state.trace is not None:
        return state.trace, state.label
    recorded = recorded_traces()
    if not recorded:
        return None, state.label
    name, trace = recorded[0]
    label = f"the recorded run “{name}”"
    remember(trace, label)
    return trace, label
