"""The race: both runs replayed on one clock, the greedy identity check, and where the time goes."""

from __future__ import annotations

import time

import streamlit as st

from specviz import charts, markup
from specviz.lessons import lab
from specviz.runs import speedup
from specviz.serving.jobs import Job
from specviz.traces.trace import RoundEvent, TokenEvent, Trace, decode_rate

from .advice import slow_run_note
from .files import trace_download, trace_upload
from .recorded import its_prompt, race_recording, trace_banner
from .safe import safe
from .server import shared_drafts_note
from .state import adopt_trace, key, page_state, shared
from .viewer import stopped_note

RACE_SPEEDS = {"0.5×": 0.5, "1×": 1.0, "2×": 2.0, "5×": 5.0}
MAX_REPLAY_SECONDS = 120.0  # a long (or crafted) run replays faster rather than holding the page for hours


def start_replay(page: str) -> None:
    state = page_state(page)
    state.clock_start, state.replaying = time.monotonic(), True


def adopt_race(page: str, trace: Trace, job: Job | None = None) -> None:
    """A finished race: show it and start its replay."""
    adopt_trace(page, trace, "race")
    start_replay(page)


def race_to_show(page: str) -> Trace | None:
    """This page's race; else the last run shown anywhere that timed plain decoding; else a recorded one."""
    trace = page_state(page).trace or shared().last_with_baseline
    if trace is None:
        trace = race_recording()
        if trace is not None:
            trace_banner(f"a race on {its_prompt(trace)}", trace, "Start the race")
    return trace


def race_end(trace: Trace) -> float:
    ends = [e.elapsed for e in trace.rounds] + [e.elapsed for e in trace.baseline]
    return max(ends) if ends else 0.0


def race_live(job: Job) -> None:
    events = list(job.events)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    prompt = job.meta.get("prompt", "")
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Speculative decoding** (runs first)")
        st.html(markup.text_html(prompt, rounds, caret=not tokens, follow=True))
        shared_drafts_note()
    with c2:
        st.markdown("**Plain decoding** (runs second, never at the same time)")
        st.html(markup.plain_text_html(prompt, [t.token.text for t in tokens], caret=bool(tokens), follow=True))


def race_replay(page: str, trace: Trace) -> None:
    """Both runs on one clock: each lane fills with tokens at the times they were measured."""
    replaying = page_state(page).replaying
    st.fragment(_race_body, run_every=0.25 if replaying else None)(page, trace, replaying)


def replay_speed(chosen: float, end: float) -> float:
    """The chosen speed, or faster where the replay would take more than MAX_REPLAY_SECONDS."""
    return max(chosen, end / MAX_REPLAY_SECONDS)


def _clock(page: str, end: float, replaying: bool) -> float:
    """Seconds on the replay clock (the end once the replay is over)."""
    state = page_state(page)
    if not replaying:
        return end
    speed = replay_speed(RACE_SPEEDS.get(st.session_state.get(key(page, "race_speed")) or "1×", 1.0), end)
    t = (time.monotonic() - state.clock_start) * speed
    if t >= end:
        state.replaying = False
        st.rerun()
    return t


@safe
def _race_body(page: str, trace: Trace, replaying: bool) -> None:
    end = race_end(trace)
    t = _clock(page, end, replaying)
    c1, c2, c3 = st.columns([1.2, 2, 2], vertical_alignment="center")
    c1.html(markup.clock_html(t, end))
    c2.button(
        "Replay the race" if not replaying else "Restart",
        icon=":material/replay:",
        key=key(page, "replay"),
        on_click=start_replay,
        args=(page,),
        type="primary",
    )
    c3.segmented_control("Replay speed", list(RACE_SPEEDS), key=key(page, "race_speed"), default="1×")
    rounds = [e for e in trace.rounds if e.elapsed <= t]
    base = [e for e in trace.baseline if e.elapsed <= t]
    spec_done = sum(len(e.appended) for e in rounds)
    base_prefill = trace.baseline_summary.prefill_seconds if trace.baseline_summary else 0.0
    # A lane's clock stops at its last token: its rate then stays at the run's final rate.
    spec_t = min(t, trace.rounds[-1].elapsed) if trace.rounds else t
    base_t = min(t, trace.baseline[-1].elapsed) if trace.baseline else t
    spec_rate = decode_rate(spec_done, spec_t - trace.summary.prefill_seconds)
    base_rate = decode_rate(len(base), base_t - base_prefill)
    ratio = spec_rate / base_rate if base_rate > 0 and spec_rate > 0 else None
    final = speedup(trace)
    m = st.columns(4)
    m[0].metric("Speculative tok/s", f"{spec_rate:.1f}")
    m[1].metric("Plain tok/s", f"{base_rate:.1f}")
    m[2].metric(
        "Speed-up so far", f"{ratio:.2f}×" if ratio else "—", help="The two rates on the replay clock up to now."
    )
    m[3].metric(
        "Speed-up",
        f"{final:.2f}×" if final is not None else "—",
        help="Final, measured: speculative tokens/s ÷ plain tokens/s (prompt prefill excluded).",
    )
    _lanes(trace, rounds, base, spec_rate=spec_rate, base_rate=base_rate)


def _lanes(trace: Trace, rounds: list, base: list, *, spec_rate: float, base_rate: float) -> None:
    """Both lanes: the text each method has written by now on the replay clock."""
    spec_done = sum(len(e.appended) for e in rounds)
    base_total = trace.baseline_summary.new_tokens if trace.baseline_summary else len(trace.baseline)
    left, right = st.columns(2)
    spec_body = markup.text_html(trace.prompt, rounds, caret=spec_done < trace.summary.new_tokens, follow=True)
    left.html(
        markup.lane_html(
            name="Speculative decoding (draft + target)",
            kind="speculative",
            body=spec_body,
            done=spec_done,
            total=trace.summary.new_tokens,
            rate=spec_rate,
        )
    )
    with left:
        shared_drafts_note()
    base_body = markup.plain_text_html(
        trace.prompt, [e.token.text for e in base], caret=len(base) < base_total, follow=True
    )
    right.html(
        markup.lane_html(
            name="Plain decoding (target alone)",
            kind="plain",
            body=base_body,
            done=len(base),
            total=base_total,
            rate=base_rate,
        )
    )


def _identity(trace: Trace) -> None:
    identity = lab.greedy_identity(trace)
    if identity.checked and identity.identical:
        st.success(
            "Identical texts: in greedy mode speculative decoding wrote exactly what the target alone "
            f"wrote ({trace.summary.new_tokens} tokens)."
        )
    elif identity.checked:
        names = trace.pair if isinstance(trace.pair, dict) else {}
        st.error(f"✗ The texts differ from token {identity.first_difference + 1} on. {markup.identity_broken(names)}")
    if identity.checked:
        st.caption(markup.precision_note(trace.pair if isinstance(trace.pair, dict) else {}))
    else:
        st.info(
            "With temperature > 0 the two runs draw different random samples, so their texts differ; "
            "both follow the same distribution (see the Lossless page)."
        )


def _costs(trace: Trace) -> None:
    costs = lab.cost_breakdown(trace)
    if costs is None:
        return
    m1, m2 = st.columns(2)
    m1.metric("One plain step", f"{costs.target_step * 1000:.0f} ms" if costs.target_step else "—")
    m2.metric(
        "One verify pass",
        f"{costs.verify * 1000:.0f} ms",
        help="One target forward over the drafted tokens (and the last committed one).",
    )
    m1.metric(
        "One draft forward",
        f"{costs.draft_forward * 1000:.0f} ms" if costs.draft_forward else "none",
        help="The n-gram drafter has no model: drafting is almost free.",
    )
    mean_length = markup.length_shown(lab.mean_acceptance_length(trace))
    m2.metric(
        "Tokens per target pass",
        f"{costs.tokens_per_round:.2f}",
        help="New tokens ÷ target passes (rounds, empty drafts included), bonus included: the formula's tokens per "
        "pass below. Mean "
        f"acceptance length (1 + accepted ÷ drafts, rounds that drafted): {mean_length}. "
        "Acceptance rate (accepted ÷ drafted tokens): "
        f"{markup.rate_shown(trace.summary.drafted, trace.summary.acceptance_rate)}.",
    )
    st.markdown(
        "Each round is a **draft** phase (γ small forwards, teal) then one **verify** pass (indigo). "
        "Speculation pays when the tokens gained per round outweigh the round's cost:"
    )
    st.latex(
        r"\begin{gathered}\text{speed-up} \approx \\ \frac{\text{tokens per pass} \times t_\text{step}}"
        r"{t_\text{draft phase} + t_\text{verify}}\end{gathered}"  # two lines: the column may be narrow
    )
    if costs.verify_in_steps is not None:
        st.markdown(
            f"Here one verify pass cost **{costs.verify_in_steps:.1f}** plain steps. On a GPU, checking a few tokens "
            "at once costs about as much as one (the weights are read once either way); on a CPU it costs more, "
            "so acceptance must be higher to win."
        )


def show_race(page: str, trace: Trace) -> None:
    """A finished race: the identity check, the replay, the phase timeline and the cost of each phase."""
    stopped_note(trace)
    _identity(trace)
    race_replay(page, trace)
    slow_run_note(page, trace)
    st.subheader("Where the time goes")
    g1, g2 = st.columns([3, 2], gap="large")
    with g1:
        st.plotly_chart(charts.timeline_figure(trace), key=key(page, "timeline"), config={"displayModeBar": False})
        st.plotly_chart(charts.progress_figure(trace), key=key(page, "progress"), config={"displayModeBar": False})
    with g2:
        _costs(trace)
    trace_download(trace, page)


def race_upload(page: str) -> None:
    """Replay an uploaded run: it must include plain decoding."""
    uploaded = None
    with st.expander("Replay a saved run instead (it must include plain decoding)"):
        uploaded = trace_upload(page)
    if uploaded is None:
        return
    if uploaded.baseline_summary is None:
        st.error(
            "This run has no plain-decoding part to race against; run it here, or on the Step through page "
            "with 'Also time plain decoding' ticked."
        )
    else:
        adopt_trace(page, uploaded, "uploaded run")
        start_replay(page)
