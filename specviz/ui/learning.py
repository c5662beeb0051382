"""The Learning page's parts: the recorded stream's curve, a form to run your own requests (or replay the shipped
stream) through the real loop, and the curve of what you ran. The rows are bench/stream.py's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from specviz import charts, drafters, markup
from specviz.bench.stream import (
    ROLLING,
    WINDOW,
    Request,
    StreamError,
    load_stream,
    load_stream_result,
    run_stream,
    summarize,
)
from specviz.decoding.config import SpecConfig
from specviz.drafters import CONTROLLER, MODEL, TRAFFIC
from specviz.lessons.lab import short
from specviz.runs import exclusive
from specviz.serving import budgets
from specviz.serving.jobs import Job
from specviz.serving.pairs import PAIRS

from .files import ASSETS
from .pair import pair_override
from .runner import Work
from .server import bounded, session_learning
from .state import key, page_state

RECORDED = ASSETS / "learning" / "inventory_drift.json"  # the bench's --stream result, written with --json
STREAM = ASSETS / "streams" / "inventory_drift.json"


@st.cache_data(show_spinner=False)
def _recorded(path: str, stamp: float) -> dict[str, Any] | None:
    try:
        return load_stream_result(path)
    except StreamError:
        return None


def recorded_stream() -> dict[str, Any] | None:
    """The shipped result of the real run (SPECVIZ_LEARNING_FILE overrides, for tests); None when it is missing or
    damaged."""
    path = Path(os.environ.get("SPECVIZ_LEARNING_FILE") or RECORDED)
    return _recorded(str(path), path.stat().st_mtime) if path.exists() else None


def stream_requests() -> list[Request]:
    return load_stream(STREAM)[1]


def learning_view(rows: list[dict[str, Any]], summary: dict[str, Any], chart_key: str, explain: bool = True) -> None:
    """The curve, and beside it the numbers that matter and what they mean (the long explanation once a page)."""
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.plotly_chart(charts.learning_figure(rows), key=f"learning-{chart_key}", config={"displayModeBar": False})
    with right:
        headline(rows, summary)
        store = rows[-1]["store"]
        hits = sum(r["store"]["hit_rate"] for r in rows) / len(rows)
        st.caption(
            f"The traffic store after request {rows[-1]['index'] + 1}: {store['requests']} requests, "
            f"{store['tokens']:,} tokens. Store hit rate (drafts that found a match in earlier requests), mean over "
            f"requests: {hits:.0%}"
        )
        if "controller_choice_ms_per_round" in summary:  # results written before the field lack it
            st.caption(choice_words(summary))
        if "drift" in summary:
            d = summary["drift"]
            st.caption(
                f"The traffic changes at request {d['at'] + 1}. Over the {min(WINDOW, d['at'])} requests before it "
                f"the controller accepted {d['pre_drift_level']:.2f} draft tokens per round; its rolling mean over "
                f"{ROLLING} requests "
                + recovery_words(d.get("first_back_after"), d["recovered_after"])
                + traffic_at_drift(rows, d["at"])
            )
        if explain:
            st.markdown(EXPLANATION)


def headline(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """The controller's mean accepted tokens per round at the start and at the end, and its speed-up over the draft
    model's: over the first and last WINDOW requests when there are two windows' worth, else the first and the latest
    request (windows that overlap would compare a request with itself)."""
    if len(rows) >= 2 * WINDOW:
        c = summary[CONTROLLER]
        start, end = c["first_mean_accepted_per_round"], c["last_mean_accepted_per_round"]
        labels, over = (f"first {WINDOW}", f"last {WINDOW}"), f"the last {WINDOW} requests"
        ratio = summary["controller_over_model_last"]
    else:
        first, latest = rows[0], rows[-1]
        start, end = first[CONTROLLER]["mean_accepted_per_round"], latest[CONTROLLER]["mean_accepted_per_round"]
        labels, over = ("first request", "latest request"), "the latest request"
        model = latest[MODEL]["speedup"]
        ratio = latest[CONTROLLER]["speedup"] / model if model else 0.0
    st.markdown(
        "**Controller**: draft tokens accepted per round",
        help="The mean acceptance length (tokens per target pass) is one more: the bonus or correction token.",
    )
    c1, c2 = st.columns(2)  # two, not three: a third column cut the numbers off in a window 1024 px wide
    if len(rows) == 1:
        c1.metric("this request", f"{end:.2f}")
    else:
        c1.metric(labels[0], f"{start:.2f}")
        c2.metric(labels[1], f"{end:.2f}", f"{end - start:+.2f}")
    (c2 if len(rows) == 1 else c1).metric(
        "÷ model",  # with its help icon, a longer label is cut off in a narrow column
        f"{ratio:.2f}×",
        help=f"The controller's speed-up over the draft model's alone, on {over}. The two are timed apart, so on a "
        "shared machine the same rounds can differ by several percent.",
    )
    if len(rows) < 2 * WINDOW:
        st.caption(
            f"With {2 * WINDOW} or more requests these compare the first {WINDOW} with the last {WINDOW}, as the "
            "bench does."
        )


def choice_words(summary: dict[str, Any]) -> str:
    """What the controller's choosing costs, and where it ran the draft model's rounds what that allows."""
    ms, share = summary["controller_choice_ms_per_round"], summary["controller_choice_share_max"]
    words = (
        f"The controller's own work (its traffic lookup and choice) took {ms:.2f} ms per round, at most {share:.2%} "
        "of a request's time."
    )
    if summary["controller_over_model_by_work"] is not None:
        words += (
            f" On the {summary['controller_same_rounds']} of {summary['controller_timed']} requests where it ran the "
            f"draft model's rounds exactly, that work alone puts it at {summary['controller_over_model_by_work']:.3f}× "
            "the draft model: any larger gap between the two there is the machine's timing noise."
        )
    return words


def traffic_at_drift(rows: list[dict[str, Any]], at: int) -> str:
    """The traffic drafter's draft tokens accepted per round over the requests before the change and at it: the
    numbers the guided answer cites, in the text (the chart shows them only on hover)."""
    before = [r[TRAFFIC]["mean_accepted_per_round"] for r in rows[max(0, at - WINDOW) : at]]
    if not before or at >= len(rows):
        return ""
    return (
        f" The traffic drafter alone: {sum(before) / len(before):.2f} draft tokens accepted per round over the "
        f"{len(before)} requests before the change, {rows[at][TRAFFIC]['mean_accepted_per_round']:.2f} at "
        f"request {at + 1}."
    )


def request_count(n: int) -> str:
    return f"{n} request{'s' if n != 1 else ''}"


def recovery_words(first: int | None, stays: int | None) -> str:
    """How the rolling mean came back after the drift: first back within 10%, and back for good."""
    if stays and stays == first:
        return f"was back within 10% after {request_count(first)}, and stayed back."
    if stays:
        return f"was first back within 10% after {request_count(first)}, and back for good after {stays}."
    if first:
        return f"was back within 10% after {request_count(first)}, then fell below that line again."
    return "had not come back within 10% by the end of the stream."


EXPLANATION = (
    "**How to read it.** Each request runs four times on the same pair: the target alone (the speed-up's "
    "reference), then speculative decoding with the draft model, with the **traffic drafter** (a suffix match "
    "over every earlier request and this one: it proposes what followed the longest earlier match, no model), "
    "and with the **controller**, which each round takes whichever is expected to commit the most tokens per "
    "second: traffic drafts (free: no draft forward), the draft model, or both (the model goes on where the match "
    "ends), from each one's measured acceptance (traffic's by match length) and the measured costs. "
    "After each request its text joins the store. Repeated boilerplate makes later requests cheaper: acceptance "
    "climbs; when the traffic changes (a new language) old matches stop paying, the controller leans on the "
    "draft model, and the new kind of request is learned in turn. Every output is checked equal to the target's alone."
)


@dataclass(frozen=True)
class LearningChoice:
    requests: list[Request]
    slot: Any  # where the run button goes


def learning_form(page: str) -> LearningChoice:
    """Your request (it joins the stream), or the whole shipped stream replayed live."""
    count = len(stream_requests())
    # A shared server's budget refuses the whole stream: offering it would only lead to a refusal.
    stream_allowed = not (bounded() and budgets.stream_refusal(count))
    what = st.radio(
        "Run",
        ["mine", "stream"] if stream_allowed else ["mine"],
        key=key(page, "what"),
        horizontal=True,
        format_func=lambda v: "my request" if v == "mine" else f"the shipped stream, live ({count} requests: minutes)",
    )
    text = st.text_area(
        "Your request (it is run with each drafter, then joins the traffic every later request drafts from)",
        key=key(page, "request"),
        height=110,
        disabled=what == "stream",
    )
    requests = stream_requests() if what == "stream" else ([Request(text, "yours")] if text.strip() else [])
    if bounded():
        st.caption(
            f"This server is shared, so one run here takes {budgets.stated(budgets.STREAM)} (each runs four "
            "times); a longer one is refused before it starts."
            + ("" if stream_allowed else f" The shipped stream ({count} requests) is more: its recording is below.")
        )
    return LearningChoice(requests, st.columns([1, 4])[0])


def stream_budget(requests: list[Request]):
    """On an exposed server: the run's requests against the budget, checked before it starts (runner.launch)."""
    return (lambda pair: budgets.stream_refusal(len(requests))) if bounded() else None


def stream_work(requests: list[Request], config: SpecConfig, chat: bool, first_index: int) -> Work:
    """The requests in order, through run_stream on this session's traffic store (the server's, where it shares
    traffic), holding the device."""
    learning = session_learning()

    def work(job: Job, pair) -> list[dict[str, Any]]:
        def progress(rows: list[dict[str, Any]]) -> None:
            job.progress = f"request {len(rows)} of {len(requests)} done"
            job.fraction = len(rows) / len(requests)

        with exclusive(pair, job.cancel, job.on_wait):
            job.state = "running"
            rows = run_stream(
                pair,
                requests,
                config,
                chat=chat,
                store=learning.traffic(pair),
                on_row=progress,
                cancel=job.cancel,
                first_index=first_index,
            )
        return [{**row, "request": request.prompt} for row, request in zip(rows, requests, strict=False)]

    return work


def forget_button(page: str, settings) -> None:
    """Empty the traffic store this session reads: its own, or the server's where it shares traffic (and then its
    file in the model cache, when persistence is on)."""
    lease = PAIRS.lease(settings.spec, pair_override()) if settings.has_pair else None
    if lease is None:
        return
    learning = session_learning()
    with lease:
        store = learning.traffic(lease.pair)
        label = f"Forget the traffic ({request_count(store.requests)}, {store.tokens:,} tokens)"
        if st.button(label, key=key(page, "forget"), icon=":material/delete:"):
            learning.forget_traffic(lease.pair)
            st.rerun()
        st.caption(
            "This server shares its traffic store: every request run here, on any page and by any visitor, joins it, "
            "and Forget empties it for everyone. The curve below keeps the requests you ran."
            if learning.share_traffic
            else "The store is yours: the requests you ran in this tab, on any page. Nobody else drafts from it, and "
            "it is gone when you close the tab. The curve below keeps the requests you ran."
        )


SIDE_CHANNEL = (
    "A traffic draft is a copy: the traffic drafter proposes what followed the longest earlier match, and this page "
    "shows every drafted token, accepted or rejected. With one store for every visitor that would leak two ways. "
    "**Someone else's words in your drafts**: type the start of another visitor's request and your chips propose "
    "how theirs went on, even where the target rejects it. **Speed**: a request that repeats earlier text finds long "
    "matches, so more draft tokens are accepted per round and the answer comes faster; the speed alone tells that "
    "someone asked it before. So where the server listens beyond this machine, each tab drafts from its own "
    "requests only; whoever starts the server can share the store, and the sidebar says which it is."
)


def side_channel_section() -> None:
    """Why a shared traffic store is a side channel, and whose store this session reads."""
    st.markdown("#### Why your traffic is yours")
    st.markdown(SIDE_CHANNEL)
    if session_learning().share_traffic:
        st.caption("This server shares its store: what you run here can show up in another visitor's drafts.")
    else:
        st.caption("Here the store is yours: nobody else drafts from your requests.")


def stream_live(job: Job) -> None:
    st.progress(job.fraction, text=job.progress or "running the first request with each drafter…")


def your_rows(page: str) -> list[dict[str, Any]]:
    rows = page_state(page).result
    return rows if isinstance(rows, list) else []


def adopt_stream_rows(page: str, rows: list[dict[str, Any]], job: Job) -> None:
    """Your new requests join the ones you ran before on this page; a stopped stream keeps its finished requests
    only (run_stream drops the one under way) and says so."""
    state = page_state(page)
    state.result = your_rows(page) + list(rows)
    state.stopped = markup.stream_stopped_message(len(rows)) if job.state == "cancelled" else None


def stream_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return summarize(rows)


def your_requests_table(rows: list[dict[str, Any]]) -> None:
    """Which point is which request: the text (as plain cells, never markup) and each drafter's numbers."""
    st.dataframe(
        [
            {
                "#": row["index"]
                + 1,  # each drafter's numbers before the long request, on a narrow screen's first view
                **{f"{name}: accepted per round": round(row[d]["mean_accepted_per_round"], 2) for d, name in NAMES},
                **{f"{name}: speed-up": round(row[d]["speedup"], 2) for d, name in NAMES},
                "request": short(str(row.get("request", "")), 120),  # on one line
            }
            for row in rows
        ],
        hide_index=True,
    )


NAMES = tuple((name, drafters.label(name)) for name in (MODEL, TRAFFIC, CONTROLLER))
