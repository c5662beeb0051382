"""The recording an experiment's answer quotes, named by its machine, precision and date, and the numbers it quotes,
read from the shipped file and drawn beside the answer (issues 43, 55): a learner can check every number of an answer
against the screen. The answer itself is computed from what the page shows (ui/screens.py, lessons/answers.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from specviz.bench.stream import load_stream_result
from specviz.drafters import TRAFFIC
from specviz.drafters.heads_report import RECORDED as HEADS
from specviz.drafters.heads_report import load_report
from specviz.drafters.medusa import MedusaDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.lessons import lab
from specviz.lessons.answers_results import model_rounds
from specviz.lessons.recorded import load_lab
from specviz.lessons.screen import Made
from specviz.runs import speedup
from specviz.traces.batching import load_batching
from specviz.traces.trace import Trace, load_trace

from .files import ASSETS

BUILTIN = "the built-in pair (1.5B target, 0.5B draft)"
MODEL, NGRAM = ModelDrafter.name, NgramDrafter.name  # the recorded lab batch's drafters
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> set[str]:
    """The numbers a text quotes, as a reader checks them against the screen (a lone 0 or 1 counts as a word)."""
    return {n.rstrip(".,") for n in NUMBER.findall(text) if len(n.rstrip(".,")) > 1 or n in "23456789"}


def _pct(x: float) -> str:
    return f"{x:.0%}"


@cache
def _trace(name: str) -> Trace:
    return load_trace(ASSETS / "experiments" / f"{name}.json")


def _rate(name: str) -> str:
    return _pct(_trace(name).summary.acceptance_rate)


def _lab_rate(category: str, drafter: str, temperature: float) -> str:
    (run,) = [
        r.trace
        for r in load_lab(ASSETS / "lab" / "batch.json").runs
        if (r.category, r.trace.config.drafter, r.trace.config.temperature) == (category, drafter, temperature)
    ]
    return _pct(run.summary.acceptance_rate)


def _positions() -> list[str]:
    greedy = [
        r.trace
        for r in load_lab(ASSETS / "lab" / "batch.json").runs
        if r.trace.config.drafter == MODEL and r.trace.config.greedy
    ]
    found = lab.acceptance_by_position(greedy)
    return [f"position {i} {_pct(found[i - 1].rate)}" for i in (1, 4)]


@cache
def _batching() -> dict:
    doc = load_batching(ASSETS / "batching_cpu.json")
    return {**doc, "by_batch": {r["batch"]: r for r in doc["rows"]}}


def _curve(n: int) -> str:
    doc = _batching()["curve"]
    return f"T({n}) = {dict(zip(doc['tokens'], doc['seconds'], strict=True))[n]:.3f} s"


@cache
def _learning(name: str) -> dict:
    return load_stream_result(ASSETS / "learning" / f"{name}.json")


def _traffic() -> dict:
    return _learning("inventory_drift")["summary"][TRAFFIC]


def _drift() -> list[str]:
    rows = _learning("inventory_drift")["requests"]
    at = _learning("inventory_drift")["summary"]["drift"]["at"]
    before = sum(r[TRAFFIC]["mean_accepted_per_round"] for r in rows[at - 5 : at]) / 5
    return [
        f"the 5 Python requests before it {before:.2f}",
        f"request {at + 1} {rows[at][TRAFFIC]['mean_accepted_per_round']:.2f}",
    ]


def bench_prompts() -> dict:
    """The recorded bench of prompts that share nothing, the Learning page's third experiment quotes."""
    return _learning("bench_prompts_amx")


def _bench() -> list[str]:
    doc = _learning("bench_prompts_amx")
    model, rounds = model_rounds(doc)
    return [
        f"rounds drafted from the model {model} of {rounds}",
        f"speed against the draft model alone, last 5 prompts {doc['summary']['controller_over_model_last']:.2f}×",
    ]


# experiment id: (which recording, in words; what it shows, each number as the answer quotes it)
QUOTED: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "prose_defaults": (
        f"the recorded runs on {BUILTIN}, greedy, γ 5: acceptance rate",
        lambda: [f"this prose prompt {_rate('prose_defaults')}", f"the code prompt {_rate('identical')}"],
    ),
    "temperature": (
        f"the recorded runs on {BUILTIN}, this code prompt: acceptance rate",
        lambda: [f"temperature 1.2 {_rate('temperature')}", f"greedy {_rate('identical')}"],
    ),
    "prose_long": (
        f"the recorded race on {BUILTIN}",
        lambda: [f"acceptance rate {_rate('prose_long')}", f"speed-up {speedup(_trace('prose_long')):.2f}×"],
    ),
    "rename_auto": (
        f"the recorded race on {BUILTIN}",
        lambda: [f"acceptance rate {_rate('rename_auto')}", f"speed-up {speedup(_trace('rename_auto')):.2f}×"],
    ),
    "lab_temperature": (
        f"the recorded batch on {BUILTIN}: acceptance rate",
        lambda: [
            f"code greedy {_lab_rate('code', MODEL, 0.0)}, at 1.0 {_lab_rate('code', MODEL, 1.0)}",
            f"prose greedy {_lab_rate('prose', MODEL, 0.0)}, at 1.0 {_lab_rate('prose', MODEL, 1.0)}",
        ],
    ),
    "lab_ngram": (
        f"the recorded batch on {BUILTIN}, greedy: acceptance rate",
        lambda: [
            f"n-gram on the rename prompt {_lab_rate('repetition', NGRAM, 0.0)}",
            f"n-gram on prose {_lab_rate('prose', NGRAM, 0.0)}",
            f"draft model on the rename prompt {_lab_rate('repetition', MODEL, 0.0)}",
        ],
    ),
    "lab_position": (f"the recorded batch on {BUILTIN}, greedy: per-position acceptance", _positions),
    "heads_medusa_k": (
        "the recorded training of 4 Medusa heads: how often each head's guess is the target's own token",
        lambda: [f"head {i} {_pct(a)}" for i, a in enumerate(load_report(HEADS[MedusaDrafter.name])["top1"], start=1)],
    ),
    "batching_break_even": (
        "the recorded result this page shows: speed-up at γ = 4, the middle of three runs",
        lambda: [f"B = {b} {_batching()['by_batch'][b]['ragged']['measured_speedup']:.2f}×" for b in (1, 2, 4)],
    ),
    "batching_throughput": (
        "the recorded result this page shows: tokens per second",
        lambda: [
            f"plain decoding at B = 16 {_batching()['by_batch'][16]['plain_tokens_per_second']:.1f}",
            f"speculative decoding at B = 1 {_batching()['by_batch'][1]['ragged']['tokens_per_second']:.1f}",
        ],
    ),
    "batching_knee": (
        "the recorded result this page shows: one forward over n tokens",
        lambda: [_curve(1), _curve(6), _curve(8), _curve(16)],
    ),
    "learning_traffic_learns": (
        "the recorded stream this page shows: the traffic drafter's draft tokens accepted per round",
        lambda: [
            f"first 5 requests {_traffic()['first_mean_accepted_per_round']:.2f}",
            f"last 5 {_traffic()['last_mean_accepted_per_round']:.2f}",
        ],
    ),
    "learning_drift": (
        "the recorded stream this page shows: the traffic drafter's draft tokens accepted per round",
        _drift,
    ),
    "learning_bench": (f"the recorded bench of 10 prompts that share nothing, on {BUILTIN}", _bench),
}


def quoted_words(experiment_id: str, answer: str, made: Made | None) -> str | None:
    """'The answer below quotes <the recording, made on ...>, <what>: <fact> · <fact>', or None when the answer quotes
    no recording (only what the page itself shows, measured now)."""
    if made is None or "on the recording" not in answer:
        return None
    if experiment_id not in QUOTED:
        return f"**The answer below quotes** the result {made.words}."  # "… the result on the recording, made on …"
    label, facts = QUOTED[experiment_id]
    return f"**The answer below quotes** {made.words[3:]}, {label}: " + " · ".join(facts())
