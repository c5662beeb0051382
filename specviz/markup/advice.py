"""A slow run's explanation in words (markdown), from advice.SlowRun: the run's own numbers, the formula, the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import md_fmt

if TYPE_CHECKING:  # the words need only its fields; markup imports no engine code
    from specviz.lessons.advice import SlowRun

WHY_GAP = {  # by how the measured speed-up stands against the prediction with the measured verify cost
    "about the same": "the formula with this run's own costs explains it",
    "worse": "the rest of the gap is time outside the formula (bookkeeping, the caches' roll-back)",
    "better": "the formula takes one a, one γ and one c for every round, and this run's rounds gained more "
    "than those averages predict",
}


def _than(comparison: str) -> str:
    """ "better than", "worse than", "about the same as"."""
    return "about the same as" if comparison == "about the same" else f"{comparison} than"


def slow_run_markdown(slow: SlowRun) -> str:
    """Why this run was slower than plain decoding, in four short paragraphs; every number is the run's own."""
    f = md_fmt
    gap = (
        f"the measured {f(slow.measured, '.2f')}× is {_than(slow.against_formula)} the first and "
        f"{_than(slow.against_verify)} the second (within {f(slow.tolerance * 100, '.0f')}% counts as about the same): "
        + WHY_GAP[slow.against_verify]
    )
    return "\n\n".join(
        [
            f"**Why was this run slower than plain decoding ({f(slow.measured, '.2f')}×)?**",
            f"**Acceptance.** Acceptance rate {f(slow.acceptance_rate * 100, '.0f')}%: with "
            f"γ ≈ {f(slow.gamma, '.1f')} drafted per round, a round committed {f(slow.tokens_per_round, '.2f')} "
            f"tokens (new tokens ÷ rounds), which Leviathan's a = {f(slow.a, '.2f')} explains. "
            "The rate is accepted ÷ drafted; a is the chance one drafted token is kept, higher because the rate "
            "also counts the tokens thrown away unchecked after a rejection.",
            f"**Costs.** One draft forward cost c = {f(slow.c, '.2f')} of a plain target step, so a round's "
            f"drafting cost γ·c = {f(slow.gamma * slow.c, '.2f')} steps; one verify pass cost "
            f"{f(slow.verify_steps, '.2f')} steps (Leviathan et al. assume 1).",
            f"**The formula.** (1 − a^(γ+1)) / ((1 − a)(γc + 1)) predicts {f(slow.formula, '.2f')}×; with the "
            f"measured verify cost in place of the 1, {f(slow.with_verify, '.2f')}×; {gap}. "
            f"With these costs the best γ is {slow.best_gamma}, at {f(slow.best_with_verify, '.2f')}×.",
            f"**What would help:** {slow.suggestion.why}.",
        ]
    )
