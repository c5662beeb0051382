"""The Your server page's body: which endpoint it reads (the recording, the one whoever started the server named, or,
on a loopback server only, a typed one), the readings taken while the page is open (a fragment that reruns every
INTERVAL seconds), and what it shows of them: the table, the chart by position and the draft-length advice."""

from __future__ import annotations

import time

import streamlit as st

from specviz import markup
from specviz.charts.your_server import advice_figure, server_position_figure
from specviz.lessons import server_metrics
from specviz.lessons.advisor import advise
from specviz.lessons.server_metrics import SGLANG, History, ServerMetricsError, Window
from specviz.markup import your_server as words
from specviz.serving import scrape

from .files import verify_curves
from .recorded import how_recorded
from .safe import safe
from .server import is_loopback, server_address
from .state import key

PAGE = "your_server"
INTERVAL = 5.0  # seconds between readings while the page is open
RECENT = 300.0  # "the last minutes": five
RECORDING, CONFIGURED, TYPED = "The recording", "This server's endpoint", "An address you type"


def sources() -> list[str]:
    """What the page may read here: the recording always; the owner's endpoint where one is set; a typed address
    only where this server listens on a loopback address (on an exposed one a visitor could make it fetch
    addresses only it can reach)."""
    found = [RECORDING]
    if scrape.configured_url():
        found.append(CONFIGURED)
    if is_loopback(server_address()):
        found.append(TYPED)
    return found


def chosen_url() -> str | None:
    """The endpoint to read (None: the recording), from the radio and, on a loopback server, the address box."""
    options = sources()
    source = st.radio("Read", options, key=key(PAGE, "source"), horizontal=True)
    if source == CONFIGURED:
        return scrape.configured_url()
    if source == TYPED:
        typed = st.text_input(
            "Metrics endpoint",
            placeholder="http://localhost:8000/metrics",
            key=key(PAGE, "url"),
            help="vLLM's, SGLang's (--enable-metrics) or llama-server's (--metrics) /metrics address.",
        )
        return typed.strip() or None
    if not scrape.configured_url() and not is_loopback(server_address()):
        st.caption(
            f"Whoever starts this server can point the page at an engine's /metrics with "
            f"{markup.code(scrape.METRICS_URL_ENV + '=http://host:port/metrics')}."
        )
    return None


def _history(url: str) -> History:
    histories = st.session_state.setdefault("state.your_server", {})
    if url not in histories:
        histories.clear()  # one endpoint's readings at a time
        histories[url] = History()
    return histories[url]


@st.fragment(run_every=INTERVAL)
@safe
def live(url: str) -> None:
    """Reads the endpoint now, adds the reading, and shows everything so far; a failed reading is one line, and
    the readings before it stay on screen."""
    history = _history(url)
    try:
        history.add(scrape.scrape(url, history.series))
    except ServerMetricsError as exc:
        st.warning(f"Could not read the endpoint: {markup.md(exc)}", icon=":material/sensors_off:")
    latest = history.latest
    if latest is None:
        return
    own = latest.timing is not None  # only specviz's bench writes its times beside the counters
    st.caption(words.live_origin(latest.engine, url, INTERVAL, len(history.scrapes), bench=own))
    show(history, live_rows(history), latest.timing)  # specviz's bench writes its times beside its counters


def live_rows(history: History) -> list[dict[str, str]]:
    rows = [words.window_row(f"last {RECENT / 60:.0f} minutes", history.window(RECENT))]
    rows.append(words.window_row("since this page started reading", history.window()))
    lifetime, latest = history.lifetime(), history.latest
    if lifetime is not None and latest is not None:
        uptime = time.time() - latest.started_at if latest.started_at else 0.0
        rows.append(words.window_row("since the server started", Window(lifetime, uptime, sum(history.resets))))
    return rows


def recording() -> None:
    """The page's recording: specviz's own bench, in vLLM's format."""
    try:
        found = server_metrics.load_recording(server_metrics.RECORDING_FILE)
    except (OSError, ServerMetricsError) as exc:
        st.warning(f"The recording could not be read: {markup.md(exc)}")
        return
    st.info(
        f"**Recorded result** — {words.recording_origin(found.machine, found.precision, found.when)}. "
        "Point the page at your own server's /metrics to read it live.",
        icon=":material/history:",
    )
    how_recorded(found.by)
    history = found.history()
    curves, _ = verify_curves()
    show(history, [words.window_row("the recorded bench", history.window())], curves.get(found.device))


def _cost(curve: dict | None) -> tuple[float, dict | None, str]:
    if curve is not None and curve.get("draft_step_seconds"):
        return 0.0, curve, markup.curve_origin(curve)
    c = st.number_input(
        "c: one draft step ÷ one target step on your server",
        min_value=0.001,
        max_value=2.0,
        value=words.DEFAULT_C,
        step=0.01,
        format="%.3f",
        key=key(PAGE, "c"),
        help=f"Measure it on your server (a draft forward's time ÷ a plain decoding step's); {words.DEFAULT_C} is "
        "Theory's default, a small draft model's.",
    )
    source = "the stated default, Theory's" if c == words.DEFAULT_C else "typed by you"
    return c, None, source


COLUMNS = {  # the table's short names, said in full in their tooltips
    "drafted / s": st.column_config.TextColumn(help="Drafted tokens per second"),
    "accepted / s": st.column_config.TextColumn(help="Accepted drafted tokens per second"),
    "drafts": st.column_config.TextColumn(help="Verification steps that had a draft (vLLM's num_drafts)"),
}


def show(history: History, rows: list[dict[str, str]], curve: dict | None = None) -> None:
    """The table, the chart by position and the advice for a history of readings."""
    latest = history.latest
    if latest is None:
        return
    if latest.engine == SGLANG:
        st.caption(words.SGLANG)
        cols = st.columns(len(latest.gauges) or 1)
        for col, (name, value) in zip(cols, sorted(latest.gauges.items()), strict=False):
            col.metric(f"{name} (SGLang's)", f"{value:.1%}" if "rate" in name else f"{value:.2f}")
        return
    st.dataframe(rows, hide_index=True, width="stretch", column_config=COLUMNS)
    st.caption(words.series_words(latest.series, latest.others))
    lifetime = history.lifetime()
    metrics = lifetime.metrics() if lifetime is not None else None
    if metrics is None or not metrics.accepted_per_position:
        st.caption(words.NO_POSITIONS)
        return
    if metrics.reached_estimated:
        st.caption(words.ESTIMATED)
    left, right = st.columns(2, gap="large")
    with left:
        title = "By draft position, since the server started"  # longer wrapped onto the axis at 1024 px
        st.plotly_chart(server_position_figure(metrics, title), width="stretch", key=key(PAGE, "positions"))
    with right:
        c, timed, source = _cost(curve)
        advice = advise(metrics.conditional_acceptance_rate, c, timed)
        if advice is None:
            return
        st.plotly_chart(advice_figure(advice), width="stretch", key=key(PAGE, "advice"))
        st.caption(words.cost_words(advice, source))
    st.success(advice.sentence, icon=":material/tips_and_updates:")
