"""The Batching page's parts: the recorded results (assets/batching_<device>.json), a live run on the loaded pair
with the user's batch sizes and prompts, and the figures, table and words for either."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from specviz import charts
from specviz.bench.batching import CURVE_TOKENS, DEFAULT_GAMMAS, DEFAULT_ROWS, parse_batches, run_batching
from specviz.decoding.batch import MAX_BATCH
from specviz.decoding.config import ConfigError
from specviz.markup import batching as words
from specviz.runs import encode, exclusive
from specviz.serving.budgets import (
    BATCH,
    BATCH_DECODED,
    BATCH_STEPS,
    batch_passes_refusal,
    batch_refusal,
    batch_work_refusal,
)
from specviz.serving.jobs import Job
from specviz.traces.batching import BatchingFileError, load_batching

from .files import curves_dir, load_prompts
from .recorded import how_recorded
from .runner import RunButton, Work, run_section
from .server import bounded
from .state import Settings, key, page_state

PAGE = "batching"
NO_BAR = {"displayModeBar": False}
MAX_LIVE_PROMPTS = 16
LIVE_TOKENS = 256  # T(n) up to here in a live run


def recorded_results() -> tuple[dict[str, dict], list[str]]:
    """The recorded results by device, and one message per file that is not one."""
    found: dict[str, dict] = {}
    refused: list[str] = []
    for path in sorted(curves_dir().glob("batching_*.json")):
        try:
            found[path.stem.removeprefix("batching_")] = load_batching(path)
        except BatchingFileError as exc:
            refused.append(words.failed_message(path.name, exc))
    return found, refused


def default_prompts() -> str:
    """The first example prompt of each category, one per line."""
    return "\n".join(prompts[0].replace("\n", " ") for prompts in load_prompts().values() if prompts)


def live_form(settings: Settings) -> None:
    """Batch sizes and prompts of the user's own run, and the run itself: a background job with Stop (runner). On the
    first screen, as every page's form (the recorded result follows it)."""
    with st.container(border=True):
        c1, c2 = st.columns([2, 3])
        sizes = c1.text_input("Batch sizes", "1,2,4", key=key(PAGE, "sizes"), help=f"comma-separated, 1 to {MAX_BATCH}")
        tokens = c1.slider("New tokens per row", 4, 64, 16, key=key(PAGE, "tokens"))
        texts = c2.text_area(
            "Prompts, one per line (cycled to fill the largest batch)",
            default_prompts(),
            key=key(PAGE, "prompts"),
            height=122,
        )
        prompts = [line.strip() for line in texts.splitlines() if line.strip()][:MAX_LIVE_PROMPTS]
        batches, problem = _batch_sizes(sizes)
        problem = problem or (None if prompts else "Type at least one prompt.")
        b1, b2 = st.columns([1.4, 5], vertical_alignment="center")
        b2.caption(
            "Greedy, γ from the sidebar, drafted by the draft model whichever drafter the sidebar has: first T(n), "
            "then plain and speculative decoding at each batch size. Minutes on a CPU with the built-in pair, seconds "
            "with the tiny pair."
        )
        if problem:
            st.error(problem)
        if bounded():
            st.caption(
                f"This server is shared, so a run here is bounded three ways: its largest batch takes at most "
                f"{BATCH.limit:,} {BATCH.what} (rows x (the longest prompt + the new tokens)); all its batch sizes "
                f"together decode at most {BATCH_DECODED.limit:,} {BATCH_DECODED.what} (each size decodes at least "
                f"{DEFAULT_ROWS} rows once per draft length and rule, each time after a plain run of the same rows); "
                "and it makes at most "
                f"{BATCH_STEPS.limit:,} {BATCH_STEPS.what} one after the other (counted as if every draft were "
                "rejected). A larger run is refused before it starts."
            )
        errors = st.container()
        run_section(
            PAGE,
            settings,
            RunButton(b1, "Run the batches", icon=":material/play_arrow:", disabled=bool(problem)),
            lambda: batching_work(prompts, batches, tokens, settings),
            live=batching_live,
            errors=errors,
            batch=prompts,
            budget=_budget(prompts, batches, tokens, settings),
            on_result=_show_your_run,
        )
        job = page_state(PAGE).job
        if job is not None and job.state == "cancelled" and not page_state(PAGE).busy:
            st.caption("Your run was stopped before it finished: nothing of it is shown.")


def _show_your_run(page: str, result: dict, job) -> None:
    """A finished run is kept and shown at once: the result radio (below, not yet drawn in this run) moves to it, or
    a user who had the recording selected would read the recording and take it for their run."""
    page_state(page).result = result
    st.session_state[key(PAGE, "shown")] = "your run"


def _batch_sizes(text: str) -> tuple[tuple[int, ...], str | None]:
    try:
        return parse_batches(text), None
    except ConfigError:
        return (), f"Batch sizes: whole numbers from 1 to {MAX_BATCH}, separated by commas (got {text.strip()!r})."


def _budget(prompts: list[str], batches: tuple[int, ...], tokens: int, settings: Settings):
    """On an exposed server: the largest batch's rows x (longest prompt + new tokens), the rows x tokens that all the
    run's decodes take (run_batching decodes each batch size ragged at every draft length of its sweep and min-cut,
    each right after a plain run of the same rows, over at least DEFAULT_ROWS rows), and its forward passes one after
    the other, every draft rejected (a small batch's time), checked before the run."""
    if not bounded() or not batches or settings.config is None:
        return None
    gamma = settings.config.gamma
    sweep = {*DEFAULT_GAMMAS, gamma}
    runs = 2 * (len(sweep) + 1)  # each speculative run and the plain run before it
    batches_per_size = [max(1, -(-DEFAULT_ROWS // size)) for size in batches]  # bench.batching.batches_of
    rows_decoded = [size * count for size, count in zip(batches, batches_per_size, strict=True)]
    # a plain run before each speculative one; ragged at each gamma; min-cut (drafts + a verify)
    passes = len(sweep) + 1 + sum(g + 1 for g in sweep) + gamma + 1
    # run_batching also decodes every distinct prompt alone (bench.batching.alone_runs; B = 1's own rows are those
    # runs already) and, at B = 1, each row through the single-row engine once: plain and ragged at gamma, 1 + gamma
    # + 1 passes per token. Rows cycle through the prompts.
    distinct = len(set(prompts))
    rows_at_one = rows_decoded[batches.index(1)] if 1 in batches else 0
    single_rows = min(distinct, max(rows_decoded)) - min(distinct, rows_at_one) + rows_at_one

    def refusal(pair) -> str | None:
        lengths = [len(encode(pair, p, settings.chat)) for p in prompts]
        return (
            batch_refusal(max(batches), lengths, tokens)
            or batch_work_refusal(rows_decoded, lengths, tokens, runs)
            or batch_passes_refusal(batches_per_size, tokens, passes, single_rows, gamma + 2)
        )

    return refusal


def batching_work(prompts: list[str], batches: tuple[int, ...], tokens: int, settings: Settings) -> Work:
    """T(n), then plain and speculative at each batch size, holding the device; Stop (or the session gone) ends it
    between two rounds."""
    config = replace(settings.config, temperature=0.0, max_new_tokens=tokens)
    curve = tuple(n for n in CURVE_TOKENS if n <= LIVE_TOKENS)
    chat = settings.chat

    def work(job: Job, pair) -> dict:
        steps = iter(range(len(batches) + 1))

        def log(message: str) -> None:
            job.fraction = next(steps, len(batches)) / (len(batches) + 1)
            job.progress = message.replace("gamma", "γ")

        with exclusive(pair, job.cancel, job.on_wait):
            job.state = "running"
            ids = [encode(pair, text, chat) for text in prompts]
            return run_batching(pair, ids, config, batches, curve, repeats=1, log=log, cancel=job.cancel)

    return work


def batching_live(job: Job) -> None:
    st.progress(job.fraction, text=job.progress or "Timing T(n), then both methods at each batch size…")


def chosen_result(recorded: dict[str, dict]) -> tuple[dict | None, bool]:
    """(the result to show, whether it is a recorded one): this session's run once there is one."""
    state = page_state(PAGE)
    options = (["your run"] if state.result is not None else []) + list(recorded)
    if not options:
        return None, False
    choice = st.radio(
        "Result shown",
        options,
        horizontal=True,
        key=key(PAGE, "shown"),
        format_func=lambda o: o if o == "your run" else f"recorded on {o}: {recorded[o]['device_name']}",
    )
    if choice == "your run" or choice not in recorded:
        return state.result, False
    return recorded[choice], True


def show_result(doc: dict, recorded: bool) -> None:
    st.html(words.source_html(doc, recorded))
    st.markdown(words.reading(doc))
    left, right = st.columns(2)
    left.plotly_chart(charts.speedup_vs_batch_figure(doc), key=key(PAGE, "speedup"), config=NO_BAR)
    right.plotly_chart(charts.round_length_figure(doc), key=key(PAGE, "rounds"), config=NO_BAR)
    left, right = st.columns(2)
    left.plotly_chart(charts.batch_gamma_figure(doc), key=key(PAGE, "gammas"), config=NO_BAR)
    right.plotly_chart(charts.throughput_figure(doc), key=key(PAGE, "throughput"), config=NO_BAR)
    st.plotly_chart(charts.forward_cost_figure(doc), key=key(PAGE, "curve"), config=NO_BAR)
    st.dataframe(
        [table_row(row, doc["gamma"]) for row in doc["rows"]],
        hide_index=True,
        key=key(PAGE, "table"),
        column_config=TABLE_HELP,
    )


COLUMN_HELP = {  # the table's number columns that need a word of explanation
    "speed-up, waiting": "the speed-up when the batch waits for its slowest row at every round: every row keeps only "
    "the batch's shortest accepted prefix (min-cut)",
    "tokens / row / round": "mean acceptance length per row: what one round commits to one row, bonus or correction "
    "included; every row keeps what it accepted",
    "… its rows alone": "the same rows, each decoded on its own (batch size 1): what the batched rows should match",
    "… waiting for the slowest row": "the same when every row keeps only the batch's shortest accepted prefix "
    "(min-cut)",
    "predicted speed-up": "the forwards timed at each batch size (a draft step, a verify), added up over the rounds "
    "this run had (rows leave the batch as they finish, the last round drafts only up to the budget), against the "
    "plain run's steps timed the same way",
    "a (kept ÷ checked)": "Leviathan's a, the expected acceptance, estimated at the fixed γ: the drafts the target "
    "kept over the drafts it checked (not the acceptance rate, accepted ÷ drafted)",
    "T(B) s": "one plain step of the whole batch: the target over B rows of one token",
    "best γ": "the draft length with the highest measured speed-up; 0 means off: no γ tried beats plain decoding",
    "its speed-up": "the highest speed-up among the γ tried; below 1 where plain decoding is faster (best γ 0, off)",
    "predicted best γ": "the γ the forward times, the draft's step and a predict to win; 0 means off",
}
TABLE_HELP = {name: st.column_config.NumberColumn(help=text) for name, text in COLUMN_HELP.items()} | {
    "greedy identical": st.column_config.CheckboxColumn(
        help="every run of these rows (plain, each γ, waiting for the slowest row) gave the text each prompt "
        "gives decoded alone"
    )
}


def table_row(row: dict, gamma: int) -> dict:
    """One B's row of the table: the columns the guided experiments read (the speed-up of both rules, the tokens a
    round gives a row against its rows alone) first, whole in a window 1024 px wide (tests/browser/test_layout.py), with
    short names; the predictions, best γ and the timings after. A version 2 file has no rows alone, so no such
    column."""
    ragged, cut = row["ragged"], row["min_cut"]
    best = max(row["gammas"], key=lambda e: e["measured_speedup"])
    cells = {
        "B": row["batch"],
        f"speed-up, γ = {gamma}": round(ragged["measured_speedup"], 2),
        "speed-up, waiting": round(cut["measured_speedup"], 2),
        "tokens / row / round": round(ragged["tokens_per_round"], 2),
        "… its rows alone": round(row["alone"]["tokens_per_round"], 2) if row.get("alone") else None,
        "… waiting for the slowest row": round(cut["tokens_per_round"], 2),
        "predicted speed-up": round(ragged["predicted_speedup"], 2),
        "a (kept ÷ checked)": round(row["acceptance"], 2),
        "rows": row["batch"] * row["batches"],
        "best γ": row["best_gamma"],
        "its speed-up": round(best["measured_speedup"], 2),
        "predicted best γ": row["predicted_best_gamma"],
        "plain tok/s": round(row["plain_tokens_per_second"], 1),
        "T(B) s": round(row["target_step_seconds"], 4),
        f"verify, B × {gamma + 1} tokens, s": round(ragged.get("verify_seconds") or row["verify_seconds"], 4),
        "draft step s": round(row["draft_step_seconds"], 4),
        "greedy identical": row["greedy_identical"],
    }
    return {name: value for name, value in cells.items() if name != "… its rows alone" or value is not None}


def batching_page(settings: Settings) -> None:
    """Everything below the page's title: the chosen result, the explanation, the live run."""
    recorded, refused = recorded_results()
    for message in refused:
        st.warning(message)
    live_form(settings)
    doc, is_recorded = chosen_result(recorded)
    if doc is None:
        st.info("No recorded result here yet: run the batches above, or record them with the benchmark.")
        how_recorded("python -m specviz bench --batch 1,2,4,8,16")
    else:
        show_result(doc, is_recorded)
    st.markdown("### Why the gain shrinks")
    st.markdown(words.EXPLANATION)
