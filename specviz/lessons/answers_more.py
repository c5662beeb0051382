"""The guided experiments' answers on the pages without a run of the models in them (lessons/answers.py has the
others): Theory (the sliders and the recorded verify-cost curve), Lossless (the samples' distances), Heads,
Batching and Learning (the result each page shows). Pure functions of a Screen (lessons/screen.py)."""

from __future__ import annotations

from collections.abc import Callable

from . import theory
from .answers_results import ANSWERS as RESULTS
from .screen import Screen, times

NOISE_FLOOR = 2.5  # ui/results.py's test: speculative samples at most this many times the direct ones' TV...
NOISE_MIN = 0.01  # ... or under this, are "as close to p as direct samples"
BREAK_EVEN = 0.005  # a speed-up that shows as 1.00× breaks even


def _made(screen: Screen, default: str) -> str:
    return screen.made.words if screen.made is not None else default


# --- Theory: the sliders a, γ, c and the measured curve ------------------------------------------------------


def _slider(screen: Screen) -> tuple[float, int, float]:
    v = screen.values
    return float(v["theory.a"]), int(v["theory.g"]), float(v["theory.c"])


def gamma8_threshold(screen: Screen) -> str:
    a, g, c = _slider(screen)
    formula = theory.speedup(a, g, c)
    curve = screen.data
    if curve is None:
        return f"At a = {a:.2f} the Speed-up shows {times(formula)} (no measured curve loaded to compare with)."
    measured = theory.measured_speedup(a, g, curve)
    where = (
        "this is where γ {g} stops paying: lower a and it loses"
        if abs(measured - 1) <= BREAK_EVEN
        else "γ {g} still pays here: lower a to find where it stops"
        if measured > 1
        else "γ {g} already loses here: raise a to find where it starts paying"
    ).format(g=g)
    side = "above" if formula > 1 + BREAK_EVEN else "at or below"
    # "also" only where the measured one is on the same side (it read "also above 1×" beside a measured 1.00×)
    formula_words = f"also {side}" if (measured > 1 + BREAK_EVEN) == (side == "above") else side
    return (
        f"At a = {a:.2f} the Speed-up, measured times shows {times(measured)} (the verify costs "
        f"{_made(screen, 'measured here')}): {where}. The formula's Speed-up, which counts a verify as "
        f"one plain step, shows {times(formula)}, {formula_words} 1×."
    )


def cheap_draft(screen: Screen) -> str:
    a, g, c = _slider(screen)
    best = theory.optimal_gamma(a, c, 16)
    length = "long" if best >= 8 else "short"
    at = "γ is set there" if g == best else f"γ {g} gives {times(theory.speedup(a, g, c))}"
    return (
        f"At a = {a:.2f}, c = {c:.2f} the optimal γ is {best}, for a speed-up of {times(theory.speedup(a, best, c))}: "
        f"a {length} draft pays; {at}."
    )


def prose_gamma(screen: Screen) -> str:
    a, g, c = _slider(screen)
    best = theory.optimal_gamma(a, c, 16)
    here, top = theory.speedup(a, g, c), theory.speedup(a, best, c)
    verdict = (
        f"No: γ {g} gives {times(here)}, less than the optimal γ {best}'s {times(top)}"
        if g > best
        else f"γ {g} is the optimum here, at {times(top)}"
        if g == best
        else f"Yes, up to γ {best}: γ {g} gives {times(here)}, the optimum {times(top)}"
    )
    if screen.data is not None:
        verdict += f"; with the measured times the best γ is {theory.measured_optimal_gamma(a, screen.data, 16)}"
    return verdict + "."


# --- Lossless: the samples' distances as the metrics show them -----------------------------------------------


def _floor(result) -> bool:
    return result.tv_spec <= max(NOISE_FLOOR * result.tv_direct, NOISE_MIN)


def broken(screen: Screen) -> str:
    r = screen.data
    if r.resample_residual:
        return "Break the algorithm is off: turn it on (the button does) to see the bar move."
    if _floor(r):
        return (
            f"TV(speculative, p) stays at {r.tv_spec:.4f}, near the noise floor {r.tv_direct:.4f}: on this context "
            f"q is close to p (TV(q, p) exact {r.tv_pq:.4f}), so redrawing from q barely shows. Try another context."
        )
    return (
        f"TV(speculative, p) jumps to {r.tv_spec:.4f}, far above the noise floor {r.tv_direct:.4f}, towards "
        f"TV(draft alone, p) {r.tv_draft:.4f}: the red bars leave p's where q differs from p."
    )


def few_samples(screen: Screen) -> str:
    r = screen.data
    if _floor(r):
        return (
            f"About equal: TV(speculative, p) {r.tv_spec:.4f} against direct samples' {r.tv_direct:.4f} with "
            f"{r.n:,} samples: both carry the same sampling noise."
        )
    return f"TV(speculative, p) {r.tv_spec:.4f} is above the direct samples' {r.tv_direct:.4f}" + (
        ": Break the algorithm is on." if not r.resample_residual else ": rare at this size; draw again."
    )


def alternatives(screen: Screen) -> str:
    r = screen.data
    if not r.alternatives:
        return "No alternatives are set: set 2 (the button does) to see P(kept)."
    kept = "above" if r.acceptance_any > r.acceptance else "equal to"
    exact = "stays at the noise floor" if _floor(r) else "is above the noise floor"
    return (
        f"P(kept) {r.acceptance_any:.1%} is {kept} P(accept) {r.acceptance:.1%}, and TV(speculative, p) "
        f"{r.tv_spec:.4f} {exact} ({r.tv_direct:.4f})."
    )


ANSWERS: dict[str, Callable[[Screen], str]] = {
    "gamma8_threshold": gamma8_threshold,
    "cheap_draft": cheap_draft,
    "prose_gamma": prose_gamma,
    "broken": broken,
    "few_samples": few_samples,
    "alternatives": alternatives,
    **RESULTS,
}
