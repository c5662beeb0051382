"""Why a run was slower than plain decoding, from that run's own numbers, and the one setting that would help.

Pure logic (no Streamlit): `explain_slow(trace)` reads the run's acceptance, its cost ratio c, the measured verify
cost, puts them into Leviathan et al.'s formula (specviz/lessons/theory.py) and picks one rerun by fixed rules
(docs/DESIGN.md, "Why a run was slow").
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.decoding import costs
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.runs import speedup
from specviz.traces.trace import Trace

from . import lab, theory

GAMMA_CHOICES = 16  # the shorter γ is chosen among 1..this
PAYS = 1.05  # a prediction below this is too close to plain decoding to recommend speculating at all
LOW_NGRAM_ACCEPTANCE = 0.3  # below it, the n-gram drafter found little to copy
CONFIDENCE_STOP = 0.5  # the draft-confidence stop a rerun tries
ABOUT = 0.05  # a measured speed-up within 5% of a prediction is "about the same" as it; beyond, better or worse


def compared(measured: float, prediction: float, tolerance: float = ABOUT) -> str:
    """How a measured speed-up stands against a prediction: "better", "worse" or "about the same" (within
    `tolerance` of the prediction, relative)."""
    if abs(measured - prediction) <= tolerance * prediction:
        return "about the same"
    return "better" if measured > prediction else "worse"


@dataclass(frozen=True)
class Suggestion:
    """One rerun: the SpecConfig fields it changes (the sidebar shows each: ui/settings.config_key) and why."""

    label: str  # the button's words
    settings: tuple[tuple[str, object], ...]  # (SpecConfig field, value)
    why: str


@dataclass(frozen=True)
class SlowRun:
    """A run slower than plain decoding, in Leviathan et al.'s terms (theory.py)."""

    measured: float  # measured speed-up (< 1)
    acceptance_rate: float  # accepted / drafted, as the summary counts it
    a: float  # the per-token acceptance a that explains the mean accepted prefix (lab.measured_point)
    gamma: float  # mean drafted tokens per round
    tokens_per_round: float
    c: float  # one draft forward / one plain target step
    verify_steps: float  # one verify pass / one plain target step (Leviathan et al. assume 1)
    formula: float  # theory.speedup(a, γ, c): the formula with a verify of one step
    with_verify: float  # the same with the measured verify cost
    best_gamma: int  # the γ the measured costs favour
    best_with_verify: float  # the speed-up they predict there
    suggestion: Suggestion

    @property
    def tolerance(self) -> float:
        """Within this share of a prediction the measured speed-up counts as about the same."""
        return ABOUT

    @property
    def against_formula(self) -> str:
        """The measured speed-up against the formula's (a verify of one step): better, worse or about the same."""
        return compared(self.measured, self.formula)

    @property
    def against_verify(self) -> str:
        """The measured speed-up against the prediction with the measured verify cost."""
        return compared(self.measured, self.with_verify)


def predicted(a: float, gamma: float, c: float, verify_steps: float) -> float:
    """E(a, γ) / (γ c + v): Leviathan et al.'s speed-up with a verify that costs v target steps (γ a mean)."""
    return costs.speedup(a, gamma, c, verify_steps)


def best_gamma(a: float, c: float, verify_steps: float, limit: int = GAMMA_CHOICES) -> int:
    """The γ in 1..limit with the largest predicted speed-up at this a, c and verify cost. The verify cost is held
    at its measured value: on a CPU a shorter verify is cheaper still, so a shorter γ only gains more."""
    return theory.best_gamma(lambda g: predicted(a, g, c, verify_steps), limit)


def suggest(trace: Trace, a: float, best: int, best_speedup: float) -> Suggestion:
    """The one rerun for a slow run, first rule that applies:
    1. the n-gram drafter found little to copy -> the draft model;
    2. a shorter constant γ is predicted to pay -> that γ;
    3. no γ pays at this acceptance -> the auto schedule (plain target steps while speculating does not pay);
       if it already ran -> the n-gram drafter, which costs no draft forward (c = 0);
    4. the formula says it should pay and it did not (the times outside it: bookkeeping, a draft pass that
       misses) -> stop drafting where the draft is unsure (confidence stop); if one already ran -> adaptive γ."""
    config = trace.config
    if config.drafter == NgramDrafter.name and a < LOW_NGRAM_ACCEPTANCE:
        return Suggestion(
            "Rerun with the draft model",
            (("drafter", ModelDrafter.name),),
            f"the n-gram drafter's guesses were accepted {a:.0%} of the time: the text repeats little of the prompt, "
            "so a model has to guess it",
        )
    if best_speedup >= PAYS and best < trace.summary.drafted / max(1, trace.summary.rounds):
        return Suggestion(
            f"Rerun with γ = {best}",
            (("gamma", best), ("schedule", "constant")),
            f"at this acceptance a long draft is mostly thrown away; γ = {best} is predicted to give "
            f"{best_speedup:.2f}× with this run's costs",
        )
    if best_speedup < PAYS and config.schedule != "auto":
        return Suggestion(
            "Rerun with the auto schedule",
            (("schedule", "auto"),),
            f"even the best γ ({best}) is predicted to give only {best_speedup:.2f}× at this acceptance: the auto "
            "schedule takes plain target steps while speculating does not pay, and drafts long where the draft "
            "is confident",
        )
    if best_speedup < PAYS:
        return Suggestion(
            "Rerun with the n-gram drafter",
            (("drafter", NgramDrafter.name), ("schedule", "constant")),
            "no draft length pays with this draft model here; the n-gram drafter costs no forward pass (c = 0), "
            "so any guess it gets right is a gain",
        )
    if config.draft_confidence >= CONFIDENCE_STOP or config.schedule == "auto":
        return Suggestion(
            "Rerun with the adaptive schedule",
            (("schedule", "adaptive"),),
            f"the formula predicts {best_speedup:.2f}× at γ = {best}, yet the run lost: the adaptive schedule "
            "shortens the draft after each rejection and lengthens it only while every guess is kept",
        )
    return Suggestion(
        f"Rerun with a confidence stop of {CONFIDENCE_STOP:g}",
        (("draft_confidence", CONFIDENCE_STOP),),
        f"the formula predicts {best_speedup:.2f}× at γ = {best}, yet the run lost: stopping the draft where it "
        "is unsure saves the forwards whose tokens the target would reject",
    )


def explain_slow(trace: Trace) -> SlowRun | None:
    """The explanation of a run slower than plain decoding; None when it was not slower or cannot be explained
    from its numbers (no plain decoding timed, nothing drafted)."""
    measured = speedup(trace)
    point = lab.measured_point(trace)
    costs = lab.cost_breakdown(trace)
    if measured is None or measured >= 1.0 or point is None or costs is None or costs.verify_in_steps is None:
        return None
    c = point.c if point.c is not None else 0.0
    verify = costs.verify_in_steps
    best = best_gamma(point.a, c, verify)
    best_speedup = predicted(point.a, best, c, verify)
    return SlowRun(
        measured=measured,
        acceptance_rate=trace.summary.acceptance_rate,
        a=point.a,
        gamma=point.g,
        tokens_per_round=point.tokens_per_round,
        c=c,
        verify_steps=verify,
        formula=predicted(point.a, point.g, c, 1.0),
        with_verify=predicted(point.a, point.g, c, verify),
        best_gamma=best,
        best_with_verify=best_speedup,
        suggestion=suggest(trace, point.a, best, best_speedup),
    )
