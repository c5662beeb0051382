"""Results of the Acceptance lab's batch and of the Lossless page's experiment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from specviz import charts, markup
from specviz.lessons import lab, lossless
from specviz.serving.jobs import Job

from .files import trace_download
from .prompt import prompt_picker
from .runner import BatchResult
from .server import shared_drafts_note
from .state import Settings, key, page_state, remember
from .viewer import legend

NO_BAR = {"displayModeBar": False}


@dataclass(frozen=True)
class LosslessChoice:
    """What the Lossless page's form asks: the context, the experiment's settings, and where its button goes."""

    prompt: str
    prefix: str
    temperature: float
    n: int
    seed: int
    alternatives: int
    broken: bool
    slot: Any


# --- Acceptance lab --------------------------------------------------------------------------------


def adopt_lab_runs(page: str, batch: BatchResult, job: Job) -> None:
    """Keep the batch's finished runs (also when one failed or the batch was stopped) and say why it ended early."""
    state = page_state(page)
    state.result = batch.runs
    for r in batch.runs:
        remember(r.trace, f"lab: {r.label}")
    if batch.failed:
        state.error = batch.failed
        st.error(batch.failed)  # this run has drawn the page's errors already; later runs show it there
    elif job.state == "cancelled":
        st.warning(f"Stopped: {markup.counted(len(batch.runs), 'run')} finished before the stop.")


def _chart_and_words(figure, chart_key: str, words: str) -> Any:
    a, b = st.columns([3, 2], gap="large")
    a.plotly_chart(figure, key=chart_key, config=NO_BAR)
    b.markdown(words)
    return b


def _drafter_tab(page: str, runs: list[lab.LabRun]) -> None:
    comparison = lab.drafter_comparison(runs)
    _chart_and_words(
        charts.group_figure(lab.group_stats(runs, lab.by_drafter), "By drafter"),
        key(page, "drafter"),
        "The **n-gram** drafter (prompt lookup) has no model: it copies what followed the last occurrence "
        "of the current words in the prompt or the text so far. It costs nothing, so even a low "
        "acceptance pays, and on tasks that repeat the prompt (renaming, fixing) it shines.",
    )
    if comparison:
        st.dataframe(comparison, hide_index=True, key=key(page, "comparison"))
    else:
        st.caption("Select both drafters to compare them prompt by prompt.")


def _gamma_tab(page: str, runs: list[lab.LabRun]) -> None:
    adaptive = [r for r in runs if r.trace.config.schedule == "adaptive"]
    if not adaptive:
        st.info("Add the **adaptive** schedule above to see γ change over a run.")
        return
    series = [(lab.short(r.label, 40), lab.gamma_series(r.trace)) for r in adaptive[:6]]
    st.plotly_chart(charts.gamma_figure(series), key=key(page, "gamma"), config=NO_BAR)
    st.markdown(
        "The adaptive schedule grows γ by 2 after a round whose drafts were all accepted and shrinks "
        "it by 1 otherwise: long drafts where the text is predictable, short ones where it is not."
    )


def lab_results(page: str, runs: list[lab.LabRun]) -> None:
    """The batch's table, the acceptance by position, category, temperature, drafter and γ, and one run's text."""
    st.subheader(markup.counted(len(runs), "run"))
    st.dataframe(lab.run_rows(runs), hide_index=True, key=key(page, "table"))
    t1, t2, t3, t4, t5 = st.tabs(
        ["By draft position", "By category", "By temperature", "N-gram vs draft model", "γ over time"]
    )
    with t1:
        _chart_and_words(
            charts.position_figure(lab.acceptance_by_position(r.trace for r in runs)),
            key(page, "pos"),
            "The share of drafted tokens accepted at each position of the draft, counting only tokens "
            "that were checked (a token after a rejection is never checked). The theory assumes one chance "
            "**a** (Leviathan's expected acceptance) for every position, each independent of the others. Real "
            "ones are not: position 1 is checked every round, a later one only when every guess before it was "
            "right, which happens mostly on easy stretches (boilerplate, a phrase copied from the prompt), so "
            "later positions often show a higher rate than the first.",
        )
    with t2:
        _chart_and_words(
            charts.group_figure(lab.group_stats(runs, lab.by_category), "By prompt category"),
            key(page, "cat"),
            "Code, translation of short fixed phrases, and tasks that repeat the "
            "prompt are easy to guess: the draft and the target agree on the obvious next token. "
            "Open-ended prose is not.",
        )
    with t3:
        words = _chart_and_words(
            charts.group_figure(lab.group_stats(runs, lab.by_temperature), "By temperature"),
            key(page, "temp"),
            "In greedy mode a guess is kept when it is the target's top "
            "token. With sampling it is kept with probability min(1, p/q); Leviathan's **a**, the expected "
            "acceptance of one drafted token, is the overlap of the two distributions:",
        )
        words.latex(r"a = \sum_x \min\big(p(x), q(x)\big) = 1 - \mathrm{TV}(p, q)")
        words.caption(markup.A_BRIDGE)  # the chart shows acceptance rates, the formula a
    with t4:
        _drafter_tab(page, runs)
    with t5:
        _gamma_tab(page, runs)
    st.subheader("One run's text, coloured by acceptance")
    labels = [r.label for r in runs]
    pick = st.selectbox("Run", range(len(runs)), format_func=lambda i: labels[i], key=key(page, "pick"))
    chosen = runs[pick if pick is not None and pick < len(runs) else 0]
    legend(("prompt", "accepted", "resampled", "bonus"))
    st.html(markup.text_html(chosen.prompt, chosen.trace.rounds))
    shared_drafts_note()
    st.caption("Hover a token to see its round and, for an accepted draft token, min(1, p/q).")
    trace_download(chosen.trace, page, label="Download this run (JSON)")


# --- Lossless ---------------------------------------------------------------------------------------


def lossless_form(page: str, settings: Settings) -> LosslessChoice:
    """The experiment's widgets: context, answer so far, temperature, samples, seed, alternatives, the break."""
    prompt = prompt_picker(page, label="Context (the prompt)", height=90)
    prefix = st.text_input(
        "The answer so far (optional): the next token is predicted after this text", key=key(page, "prefix")
    )
    # the run's row right under the context (the Run button on the first screen at 1024x768); what only draws
    # samples from the computed p and q below it
    slot, c2, c3 = st.columns([1.4, 2.6, 3], vertical_alignment="center")
    base_temperature = settings.config.temperature if settings.config and settings.config.temperature > 0 else 1.0
    temperature = c2.slider(
        "Temperature for this experiment",
        0.05,
        2.0,
        float(min(2.0, base_temperature)),
        0.05,
        key=key(page, "temperature"),
        help="Greedy decoding samples nothing, so this page always samples. Top-k and top-p "
        "come from the sidebar and are applied to p and q alike.",
    )
    c3.caption("One forward pass of each model over the context; the samples below are drawn from the result.")
    c1, c2 = st.columns([2, 1])
    n = c1.select_slider(
        "Samples",
        [1_000, 10_000, 50_000, 100_000, 200_000],
        value=50_000,
        key=key(page, "n"),
        format_func=lambda v: f"{v:,}",
    )
    seed = c2.number_input("Seed", value=0, step=1, key=key(page, "seed"))
    base_alternatives = settings.config.alternatives if settings.config else 0
    alternatives = st.slider(
        "Alternatives: after a rejection, up to this many more candidates drawn from q",
        0,
        4,
        base_alternatives,
        key=key(page, "alternatives"),
        help="As the engine's token tree does when sampling: each further candidate c ~ q is "
        "kept with probability min(1, r(c)/q(c)), where r is what the rejections so far "
        "left of p, and r shrinks again after each refusal (recursive rejection "
        "sampling). More tokens are kept by a candidate; the result is still p.",
    )
    broken = st.toggle(
        ":material/heart_broken: Break the algorithm: after a rejection, draw again from q instead of the residual",
        key=key(page, "broken"),
    )
    return LosslessChoice(
        prompt=prompt,
        prefix=prefix,
        temperature=float(temperature),
        n=int(n),
        seed=int(seed),
        alternatives=int(alternatives),
        broken=bool(broken),
        slot=slot,
    )


def _lossless_metrics(result: lossless.LosslessResult) -> None:
    m = st.columns(3) + st.columns(3)  # the samples' distances, then the exact values: six in a row split words
    m[0].metric(
        "TV(speculative, p)",
        f"{result.tv_spec:.4f}",
        help="Distance of the speculative samples' histogram from p: near the noise floor when correct.",
    )
    m[1].metric(
        "TV(direct samples of p, p)",
        f"{result.tv_direct:.4f}",
        help="The same number of samples drawn straight from p: the distance sampling noise alone gives.",
    )
    m[2].metric("TV(draft alone, p)", f"{result.tv_draft:.4f}", help="Samples of q alone, compared with p.")
    m[3].metric("TV(q, p) exact", f"{result.tv_pq:.4f}")
    m[4].metric("P(accept) exact", f"{result.acceptance:.1%}", help="Σ min(p, q) = 1 − TV(p, q).")
    if result.alternatives:
        m[5].metric(
            f"P(kept) with {result.alternatives} alternative{'s' if result.alternatives > 1 else ''}",
            f"{result.acceptance_any:.1%}",
            help="Exact chance that the draft or one of the further candidates is kept, so that no "
            "draw from the residual is needed.",
        )


def lossless_results(page: str, dist, *, n: int, seed: int, broken: bool, alternatives: int) -> None:
    """Sample the speculative way from p and q, and compare the histogram with p, q and direct samples of p."""
    result = lossless.lossless_experiment(dist, n=n, seed=seed, resample_residual=not broken, alternatives=alternatives)
    st.caption(
        f"Context: {dist.context_tokens} tokens · temperature {dist.temperature:g}"
        f"{f' · top-k {dist.top_k}' if dist.top_k else ''}{f' · top-p {dist.top_p:g}' if dist.top_p < 1 else ''}"
        f" · {result.n:,} samples each · the target in {markup.md(dist.precision)} (each precision is its own p: "
        "the samples must follow the loaded one's)"
    )
    _lossless_metrics(result)
    if broken:
        st.error(
            f"Broken: without the residual the samples drift towards q. TV from p is {result.tv_spec:.4f}, "
            f"against a noise floor of {result.tv_direct:.4f}."
        )
    elif result.tv_spec <= max(2.5 * result.tv_direct, 0.01):
        st.success(
            f"The speculative samples match p: TV {result.tv_spec:.4f}, as close as direct samples of p "
            f"({result.tv_direct:.4f}) — only sampling noise."
        )
    else:
        st.warning(f"TV {result.tv_spec:.4f} is above the noise floor {result.tv_direct:.4f}; try more samples.")
    st.plotly_chart(charts.lossless_figure(result), key=key(page, "chart"), config=NO_BAR)
    st.caption("Bars: the most likely tokens under p or q; the last bar pools every other token of the vocabulary.")
