"""The one cost model of a round: what it commits, what it costs, and the running averages that learn both.

Leviathan et al. (2023): with each of g drafted tokens accepted with probability a, independently, a round commits

    E(a, g) = (1 - a^(g+1)) / (1 - a)            tokens (the accepted prefix, then the correction or bonus)

and, if a draft step costs c target steps and the verify v of them (v = 1 in the paper),

    speed-up = E(a, g) / (g c + v)               over plain decoding of the same target.

From measured seconds instead: E(a, g) t_target / (g t_draft + t_verify(g)). The schedule (schedule.py), the
controller (drafters/controller.py), the slow-run advice (lessons/advice.py) and Theory (lessons/theory.py) all read
these. Each run owns one RoundCosts (engine.Run.costs), which learns every round's RoundCost once; the schedule
and the drafter read it. Its running averages are the two below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RoundCost:
    """What one round measured, handed to the schedule and the drafter after it."""

    drafted: int  # tokens drafted
    chain_accepted: int  # drafted tokens accepted in their own place (a kept off-chain node not counted)
    committed: int  # tokens the round committed
    seconds: float  # the round's wall time: draft, verify, bookkeeping
    verify_seconds: float  # the target's verify forward
    with_prompt: bool = False  # the round also processed the prompt (fuse_prompt): not a fair timing
    model_tokens: int = 0  # tokens a draft model drafted (Draft.model_tokens; 0: no draft model ran)
    model_seconds: float = 0.0  # the draft model's seconds for them (Draft.model_seconds)


def expected_tokens(a: float, g: float) -> float:
    """E(a, g) = (1 - a^(g+1)) / (1 - a): tokens one round commits (g may be a mean length)."""
    if g <= 0:
        return 1.0
    if a >= 1.0:
        return g + 1.0
    return (1.0 - a ** (g + 1.0)) / (1.0 - a)


def expected_tokens_by_position(rates: Sequence[float | None], g: int) -> float:
    """1 + r_1 + r_1 r_2 + ... + r_1...r_g: tokens one round of g drafts commits when position i is kept with
    probability r_i given the positions before it were (the conditional rates a serving engine counts; None: no
    draft reached it, kept with probability 0). E(a, g) when every r_i = a."""
    tokens, kept = 1.0, 1.0
    for rate in list(rates)[:g]:
        kept *= rate or 0.0
        tokens += kept
    return tokens


def round_steps(g: float, c: float, verify_steps: float = 1.0) -> float:
    """g c + v: what a round of g drafts costs, in target steps (a draft step costs c, the verify v)."""
    return g * c + verify_steps


def speedup(a: float, g: float, c: float, verify_steps: float = 1.0) -> float:
    """E(a, g) / (g c + v): Leviathan et al.'s speed-up, with a verify that costs v target steps (1: theirs)."""
    return expected_tokens(a, g) / round_steps(g, c, verify_steps)


def measured_speedup(a: float, g: float, t_target: float, t_draft: float, t_verify: float) -> float:
    """The speed-up from measured seconds, without assuming a free verify: E(a, g) t_target / (g t_draft +
    t_verify(g)), t_verify(g) being one target forward over g + 1 tokens."""
    return expected_tokens(a, g) * t_target / (g * t_draft + t_verify)


def catch_up_share(a: float, g: int, rows: int) -> float:
    """1 - (1 - a^g)^rows: the share of a batch's rounds whose first draft forward takes two tokens of some row (its
    last draft and its bonus token), as it does after the row accepted all g drafts (decoding/batch.py)."""
    return 1.0 - (1.0 - a**g) ** rows


def batched_draft_seconds(a: float, g: int, rows: int, t_draft: float, t_catch_up: float) -> float:
    """A batched round's g draft forwards, expected: g steps of t_draft, the first one t_catch_up (the forward over
    two tokens per row) in catch_up_share of the rounds."""
    return g * t_draft + catch_up_share(a, g, rows) * (t_catch_up - t_draft)


class Discounted:
    """Running sums in which each older observation counts `discount` times less per new one."""

    def __init__(self, discount: float, size: int = 1):
        self.discount = discount
        self.sums = [0.0] * size

    def add(self, *values: float) -> None:
        self.sums = [self.discount * s + v for s, v in zip(self.sums, values, strict=True)]

    def fade(self, factor: float) -> None:
        """Forget some of everything without a new observation."""
        self.sums = [factor * s for s in self.sums]


class Ewma:
    """An exponentially weighted moving average: new = keep * old + (1 - keep) * x; the first x as it is."""

    def __init__(self, keep: float, value: float | None = None):
        self.keep = keep
        self.value = value

    def add(self, x: float) -> float:
        self.value = x if self.value is None else self.keep * self.value + (1 - self.keep) * x
        return self.value


class RoundCosts:
    """The run's cost model: seconds of a round's parts, learned once per round from its RoundCost (the engine calls
    learn) and read by the schedule and the drafter. Each older round is discounted by DISCOUNT:
      verify(n)    a least-squares line through (drafted tokens, verify seconds): a verify widens with n
      draft token  the draft model's seconds per token it drafted (the drafter times its model's calls)
      rest         the round's other seconds (lookup, acceptance, bookkeeping), paid by every round
      plain step   seconds per token of rounds that drafted nothing (a plain target step), measured
      shortest verify  the fastest verify of a speculative round: a plain step costs at most that
    Until measured, a verify costs one unit and a draft token DRAFT_PRIOR of it (only ratios matter).
    Per run: seconds are this machine's now, and a few rounds measure them (docs/DESIGN.md, "The cost model")."""

    DISCOUNT = 0.9
    DRAFT_PRIOR = 0.25
    REST_KEEP = 0.8
    PLAIN_KEEP = 0.7

    def __init__(self) -> None:
        self.fit = Discounted(self.DISCOUNT, 5)  # 1, n, n^2, v, n*v over the timed verifies
        self.draft = Discounted(self.DISCOUNT, 2)  # draft-model seconds and tokens
        self.rest = Ewma(self.REST_KEEP)
        self.plain = Ewma(self.PLAIN_KEEP)  # seconds per token of a plain step
        self.shortest_verify: float | None = None

    def learn(self, cost: RoundCost) -> None:
        if cost.with_prompt:
            return  # the prompt's pass is not a round's cost
        n, v = cost.drafted, cost.verify_seconds
        self.fit.add(1.0, n, n * n, v, n * v)
        if cost.model_tokens > 0:
            self.draft.add(cost.model_seconds, cost.model_tokens)
        self.rest.add(max(0.0, cost.seconds - v - cost.model_seconds))
        if n == 0:
            self.plain.add(cost.seconds / max(cost.committed, 1))
        else:
            self.shortest_verify = min(v, self.shortest_verify if self.shortest_verify is not None else v)

    @property
    def plain_step(self) -> float | None:
        """Seconds of a plain target step: measured, else at most the shortest verify seen, else unknown."""
        return self.plain.value if self.plain.value is not None else self.shortest_verify

    def verify(self, drafted: float) -> float:
        w, sn, snn, sv, snv = self.fit.sums
        if w == 0:
            return 1.0
        mean_n, mean_v = sn / w, sv / w
        spread = snn / w - mean_n**2
        slope = max(0.0, (snv / w - mean_n * mean_v) / spread) if spread > 0.5 else 0.0
        return max(mean_v + slope * (drafted - mean_n), 0.25 * mean_v)

    def draft_token(self) -> float:
        seconds, tokens = self.draft.sums
        return seconds / tokens if tokens > 0 else self.DRAFT_PRIOR * self.verify(1)

    def round_seconds(self, drafted: float, model_tokens: float) -> float:
        return self.verify(drafted) + model_tokens * self.draft_token() + (self.rest.value or 0.0)
