"""How many tokens to draft each round (gamma), per run.

  constant  gamma = config.gamma every round
  adaptive  +2 after a round whose drafts were all accepted, -1 otherwise, within [1, gamma_max]
  auto      AutoSchedule: drafts up to gamma_max tokens while the draft is confident, and takes plain target
            steps (gamma 0) while speculation measurably does not pay

Each schedule answers next() before a round and learns from the round's RoundCost after it.
"""

from __future__ import annotations

from typing import Protocol

from .config import SpecConfig
from .costs import Discounted, RoundCost, RoundCosts

AUTO_CONFIDENCE = 0.7  # the auto schedule's draft-confidence stop when the config leaves it at 0


class Schedule(Protocol):
    def next(self) -> int: ...

    def learn(self, cost: RoundCost) -> None: ...


def next_gamma(config: SpecConfig, gamma: int, drafted: int, accepted: int) -> int:
    """Adaptive schedule: +2 after a round whose drafts were all accepted, -1 otherwise, within [1, gamma_max]."""
    if config.schedule == "constant":
        return config.gamma
    if drafted > 0 and accepted == drafted:
        return min(config.gamma_max, gamma + 2)
    return max(1, gamma - 1)


class StepSchedule:
    """Schedules "constant" and "adaptive": gamma from the last round's acceptance alone (next_gamma)."""

    def __init__(self, config: SpecConfig):
        self.config = config
        self.gamma = config.gamma

    def next(self) -> int:
        return self.gamma

    def learn(self, cost: RoundCost) -> None:
        self.gamma = next_gamma(self.config, self.gamma, cost.drafted, cost.chain_accepted)


class AutoSchedule:
    """Schedule "auto": speculate while it measurably pays, else take plain target steps (gamma 0).

    Per run, from the rounds' own wall-clock times:
      rate_spec  = (T + w * PRIOR_TOKENS) / (S + w * t_plain)   tokens per second of speculative rounds:
                   T and S are the tokens committed and the seconds spent (draft, verify, bookkeeping) by
                   the speculative rounds so far, each older round discounted by DISCOUNT; the prior is
                   w = PRIOR_ROUNDS imagined rounds that each commit PRIOR_TOKENS in a plain step's time
      rate_plain = 1 / t_plain   t_plain: the run's cost model's plain step (costs.RoundCosts.plain_step): a
                   moving average of plain rounds' seconds; until one is timed, the shortest verify seen (a
                   verify of g+1 tokens costs at least one step)
    Every round speculates while rate_spec >= rate_plain, else it is a plain step (which times t_plain);
    during plain steps T and S fade (PLAIN_DISCOUNT) toward the optimistic prior, so speculation is tried
    again after a while. While t_plain is only estimated and speculation is not clearly ahead
    (rate_spec < CLEAR_LEAD * rate_plain), one plain step is taken to time it: where a verify costs several
    steps the estimate flatters plain decoding's rival. Rounds that processed the prompt are not timed.
    A speculative round drafts up to gamma_max tokens and stops at the first token whose draft top
    probability is below the confidence threshold: a calibrated draft's confidence sets each draft's length.
    Why this rule and not Leviathan's i.i.d. optimum or a cumulative-confidence stop: see docs/DESIGN.md,
    "The auto schedule".
    """

    DISCOUNT = 0.9
    PLAIN_DISCOUNT = 0.9
    PRIOR_TOKENS = 2.0
    PRIOR_ROUNDS = 2.0
    CLEAR_LEAD = 1.5

    def __init__(self, config: SpecConfig, costs: RoundCosts):
        self.gamma_max = config.gamma_max
        self.costs = costs  # the run's: the engine teaches it each round, before this schedule's learn
        self.speculative = Discounted(self.DISCOUNT, 2)  # T and S: discounted tokens and seconds of speculative rounds

    def rates(self) -> tuple[float, float]:
        """(rate_spec, rate_plain) in tokens per second; only defined once t_plain is known or estimated."""
        (tokens, seconds), t_plain, w = self.speculative.sums, self.costs.plain_step, self.PRIOR_ROUNDS
        return (tokens + w * self.PRIOR_TOKENS) / (seconds + w * t_plain), 1.0 / t_plain

    def next(self) -> int:
        if self.costs.plain_step is None:
            return self.gamma_max
        spec, plain = self.rates()
        if self.costs.plain.value is None and spec < self.CLEAR_LEAD * plain:
            return 0  # time one plain step (once: then it is measured)
        return self.gamma_max if spec >= plain else 0

    def learn(self, cost: RoundCost) -> None:
        if cost.with_prompt:
            return
        if cost.drafted == 0:
            self.speculative.fade(self.PLAIN_DISCOUNT)
        else:
            self.speculative.add(cost.committed, cost.seconds)


def make_schedule(config: SpecConfig, costs: RoundCosts) -> Schedule:
    """The config's schedule; `costs` is the run's cost model, which the auto schedule reads."""
    return AutoSchedule(config, costs) if config.schedule == "auto" else StepSchedule(config)


def draft_confidence(config: SpecConfig) -> float:
    """The draft's confidence stop: the config's, else AUTO_CONFIDENCE for the auto schedule, else none (0)."""
    return config.draft_confidence or (AUTO_CONFIDENCE if config.schedule == "auto" else 0.0)
