"""The Your server page's words: where its numbers come from, the table of each stretch of time, the cost ratio the
advice assumes, and what an engine that publishes less (SGLang's gauges) or estimates (vLLM's counters with drafts of
unequal length) means for the numbers. Every value a reader's server sent goes through md()."""

from __future__ import annotations

import urllib.parse

from specviz.decoding.config import SpecConfig
from specviz.decoding.metrics import SpecMetrics
from specviz.lessons.advisor import Advice
from specviz.lessons.server_metrics import Window

from .base import md
from .provenance import length_shown, recorded_on

DEFAULT_C = 0.1  # a draft model a tenth of its target's step: Theory's default; EAGLE and n-gram drafts cost less


def recording_origin(machine: object, precision: object, when: object) -> str:
    """A recorded scrape's provenance: whose runs, where, in whose format."""
    return (
        f"a recording of specviz's own runs of the built-in pair (the Acceptance lab's recorded batch), in vLLM's "
        f"format, {recorded_on(machine, precision, when)}: counted as vLLM counts its drafts"
    )


def endpoint_shown(url: str) -> str:
    """scheme://host:port/path of an endpoint, without what could be a secret (user, password, query)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return md(f"{parts.scheme}://{host}{port}{parts.path}", 120)


def live_origin(engine: str, url: str, every: float, scrapes: int, bench: bool = False) -> str:
    """A live reading's provenance: measured now, from which engine (or specviz's bench, in its names: `bench`) and
    endpoint, how often."""
    source = f"specviz's bench, in {md(engine)}'s names," if bench else f"a {md(engine)} server"
    return (
        f"measured now from {source} at {endpoint_shown(url)}, read every {every:g} s "
        f"({scrapes} reading{'' if scrapes == 1 else 's'} so far)"
    )


def series_words(series: str, others: tuple[str, ...]) -> str:
    """Which series of counters the numbers are (its labels), and the others the endpoint publishes."""
    shown = f"Counters of {md(series, 200)}" if series else "Counters without labels"
    if not others:
        return shown + "."
    rest = ", ".join(md(o, 120) for o in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return (
        f"{shown} (the series that had drafted most when the page first read it); the endpoint also publishes "
        f"{rest}, not added in."
    )


def _rate(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def window_row(label: str, window: Window | None) -> dict[str, str]:
    """One row of the table: a stretch of time and what the server counted in it."""
    if window is None:
        return {"over": label, "drafts": "—", "acceptance rate": "—", "mean acceptance length": "—",
                "drafted / s": "—", "accepted / s": "—"}  # fmt: skip
    m = window.metrics
    drafted, accepted = window.per_second(m.draft_tokens), window.per_second(m.accepted_tokens)
    restarts = f" ({window.restarts} restart{'' if window.restarts == 1 else 's'})" if window.restarts else ""
    return {  # the short columns first: at 1024 px the last ones need a scroll
        "over": (f"{label}: {window.seconds:,.0f} s" if window.seconds > 0 else label) + restarts,
        "drafts": f"{m.drafts:,}",
        "acceptance rate": _rate(m.acceptance_rate, ".1%"),
        "mean acceptance length": _rate(m.mean_acceptance_length, ".2f"),
        "drafted / s": _rate(drafted, ",.1f"),  # drafted tokens per second
        "accepted / s": _rate(accepted, ",.1f"),
    }


ESTIMATED = (
    "The counters do not say how long each draft was, and the drafted tokens are not the drafts times the positions "
    "counted: some drafts were shorter. A draft is taken to reach position i when it kept position i − 1, so the "
    "rates “÷ reached i” (and the advice built on them) are lower bounds."
)
NO_POSITIONS = (
    "This server publishes no per-position counts (…_num_accepted_tokens_per_pos), so there is no chart by position "
    "and no advice (llama.cpp publishes them once a speculative request has finished)."
)
SGLANG = (
    "SGLang publishes its acceptance rate and mean acceptance length as gauges, averaged over its own last logging "
    "interval, and nothing per position: they are shown as SGLang computes them, without a chart or advice."
)


def cost_words(advice: Advice, source: str) -> str:
    """Which cost ratio the advice assumes, and where it comes from."""
    if advice.measured:
        return (
            f"A round's cost from the bench's verify-cost curve of the same pair ({source}): c = {advice.c:.3f}, "
            "and a verify as timed for each length."
        )
    return (
        f"A round of k drafts costs k·c + 1 target steps (Leviathan et al.), with c = {advice.c:.2f} ({source}): "
        "one draft step ÷ one target step on your server."
    )


FEW_DRAFTS = 30  # below this many drafts, Theory's advice for a run says its rates are rough


def theory_advice_run(label: str, metrics: SpecMetrics) -> str:
    """Markdown: which run Theory's advice reads, how many drafts it counts, what its drafts kept on average."""
    words = (
        f"For **{md(label)}**: {metrics.drafts} {'draft' if metrics.drafts == 1 else 'drafts'}, mean acceptance "
        f"length {length_shown(metrics.mean_acceptance_length)}."
    )
    if metrics.drafts < FEW_DRAFTS:
        words += (
            f" With fewer than {FEW_DRAFTS} drafts the rates by position, and so the advice, are rough: a longer run "
            "gives steadier ones."
        )
    return words


def theory_advice_words(own_c: bool, c: float, config: SpecConfig, origin: str) -> str:
    """Markdown beside Theory's advice for one of the app's runs: what it is computed from (`origin`: where the run
    was measured, markup.trace_origin_words), and what it leaves out."""
    cost = (
        f"that run's own c = {c:.3f} (its draft forward ÷ its plain decoding step, {origin})"
        if own_c
        else f"the slider's c = {c:.2f} (the run timed no plain decoding)"
    )
    words = (
        "The advisor of the **Your server** page, on this run: its acceptance by position (accepted at i ÷ drafts "
        f"that reached i) gives each shorter draft's expected tokens per verify, and a round of k drafts costs "
        f"k·c + 1 target steps with {cost}."
    )
    settings = (
        ("lookahead", config.lookahead),
        ("alternatives", config.alternatives),
        (f"{config.schedule} schedule", config.schedule != "constant"),
    )
    unmodelled = [name for name, used in settings if used]
    if unmodelled:
        words += (
            f" It models a plain chain of drafts of one length: this run's {', '.join(unmodelled)} changed its drafts' "
            "lengths or what a round keeps, which the advice does not count."
        )
    return words
