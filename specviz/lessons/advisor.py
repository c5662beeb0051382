"""The draft-length advisor: from the conditional acceptance rate of each position (a serving engine's counters, or
the app's own runs) and a round's cost, the expected tokens per verify and the speed-up of every draft length 1..K,
the best one, and one plain sentence. Leviathan et al.'s model (decoding/costs.py) with one rate per position in
place of one a for all: a draft of length k commits 1 + r_1 + r_1 r_2 + ... + r_1...r_k tokens per verify and costs
k c + 1 target steps (or, with a verify-cost curve the benchmark measured, its draft and verify times).

Only lengths up to K, the positions counted: the counts say nothing of what position K + 1 would accept. Shortening
a draft does not change what the kept positions accept (position i is checked only after 1..i-1 were kept), so the
rates measured at K hold for every shorter length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specviz.decoding.costs import expected_tokens_by_position, round_steps

from .theory import best_gamma, measured_cost_ratio, measured_round_steps

NEAR = 0.01  # a gain below 1% is "about as fast"


@dataclass(frozen=True)
class LengthRow:
    length: int
    tokens: float  # expected tokens per verify
    steps: float  # a round's cost in target steps
    speedup: float  # over plain decoding: tokens / steps


@dataclass(frozen=True)
class Advice:
    rows: tuple[LengthRow, ...]  # lengths 1..K
    current: int  # K: the draft length the counts come from
    best: int
    c: float
    measured: bool  # the round's cost from a verify-cost curve's measured times (else k c + 1)
    tail_rate: float | None  # positions after `best` keep this share of the drafts that reach them (None: best = K)
    sentence: str

    def row(self, length: int) -> LengthRow:
        return self.rows[length - 1]

    @property
    def gain(self) -> float:
        """How much faster the best length is than the current one (0.09: 9% faster)."""
        return self.row(self.best).speedup / self.row(self.current).speedup - 1.0


def _kept(rates: Sequence[float | None]) -> list[float]:
    """[i]: the share of drafts that keep positions 1..i (i = 0: all of them)."""
    kept = [1.0]
    for rate in rates:
        kept.append(kept[-1] * (rate or 0.0))
    return kept


def tail_rate(rates: Sequence[float | None], after: int) -> float | None:
    """Positions after `after`, together: what they keep / what reaches them (accepted at i / reached i, summed)."""
    kept = _kept(rates)
    reached = sum(kept[after : len(rates)])
    return sum(kept[after + 1 :]) / reached if after < len(rates) and reached > 0 else None


def advise(rates: Sequence[float | None], c: float, curve: dict | None = None) -> Advice | None:
    """The advice for conditional rates r_1..r_K (None: no draft reached that position) at cost ratio c, or with a
    verify-cost curve that timed a draft (then c is its measured ratio); None without positions."""
    k_max = len(rates)
    if k_max == 0:
        return None
    measured = curve is not None and measured_cost_ratio(curve) is not None
    if measured:
        c = measured_cost_ratio(curve)

    def steps(k: int) -> float:
        return measured_round_steps(k, curve) if measured else round_steps(k, c)

    rows = tuple(
        LengthRow(k, expected_tokens_by_position(rates, k), steps(k), expected_tokens_by_position(rates, k) / steps(k))
        for k in range(1, k_max + 1)
    )
    best = best_gamma(lambda k: rows[k - 1].speedup, k_max)
    tail = tail_rate(rates, best) if best < k_max else None
    advice = Advice(rows, k_max, best, c, measured, tail, "")
    return Advice(rows, k_max, best, c, measured, tail, sentence(advice, rates))


def sentence(advice: Advice, rates: Sequence[float | None]) -> str:
    """One plain sentence: which length, by how much, and why."""
    k, best = advice.current, advice.best
    if best < k:
        one = best + 1 == k
        after = f"position {k} accepts" if one else f"positions after {best} accept"
        reach = _kept(rates)[best]
        tail = f"{advice.tail_rate:.0%} of what reaches {'it' if one else 'them'} ({reach:.0%} of drafts get there)"
        if advice.gain < NEAR:
            return (
                f"{after.capitalize()} {tail}: a draft length of {best} would be about as fast as your {k} "
                f"(within 1%), with fewer draft steps."
            )
        return (
            f"{after.capitalize()} {tail}: a draft length of {best} would be about {advice.gain:.0%} faster "
            f"than your {k}."
        )
    last = rates[-1] or 0.0
    return (
        f"Every position pays for its draft step: your draft length of {k} is the best of 1 to {k}, and position {k} "
        f"still accepts {last:.0%} of what reaches it, so a longer draft may pay too (the counts cannot say what "
        f"position {k + 1} would accept)."
    )
