"""The controller's rule: each round, the source (traffic, draft model, or both) that is expected to commit the
most tokens per second, from each source's measured acceptance and the round's measured costs.

Expected tokens of a round (Leviathan et al.): E(a, g) = (1 - a^(g+1)) / (1 - a) when each of g drafted tokens
is accepted with probability a. Seconds of a round: the verify of its drafted tokens, the draft model's forwards
for the tokens it drafts (traffic tokens cost none) and the rest of the round (lookup, bookkeeping), all learned
from the rounds' RoundCost, as the auto schedule learns its rates. Why: docs/DESIGN.md, "The traffic drafter".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from specviz.decoding.schedule import RoundCost

from .suffix import Proposal

Source = Literal["traffic", "model", "both"]


@dataclass
class SourceRate:
    """An acceptance rate, accepted / checked (per token, or per round for TrafficRates.first), each older round
    discounted by DISCOUNT; the prior is PRIOR observations at rate `prior`."""

    prior: float
    accepted: float = 0.0
    checked: float = 0.0

    DISCOUNT = 0.8
    PRIOR = 2.0

    @property
    def rate(self) -> float:
        return (self.accepted + self.PRIOR * self.prior) / (self.checked + self.PRIOR)

    def observe(self, accepted: int, checked: int) -> None:
        if checked > 0:
            self.accepted = self.DISCOUNT * self.accepted + accepted
            self.checked = self.DISCOUNT * self.checked + checked

    def lower(self, z: float) -> float:
        """A lower confidence bound on the rate: a - z sqrt(a (1 - a) / n), n = checked + PRIOR, the observations
        (discounted) and the prior's. Few observations give a wide margin; for a rate observed once a round (a_1) the
        0.8 discount keeps n below 7."""
        n = self.checked + self.PRIOR
        return max(0.0, self.rate - z * math.sqrt(self.rate * (1 - self.rate) / n))


@dataclass
class TrafficRates:
    """A match class's acceptance in two parts. `first`: whether a draft's first token holds, one observation per
    round, because the tokens of one traffic draft are not independent evidence: a match either goes on or it
    does not, and one accepted run of five would otherwise count as five successes. `next`: once the first token
    holds, each following token's, per token (it sets the draft's length)."""

    first: SourceRate
    next: SourceRate

    def observe(self, accepted: int, checked: int) -> None:
        if checked <= 0:
            return
        self.first.observe(int(accepted > 0), 1)
        if accepted > 0:
            self.next.observe(accepted - 1, checked - 1)


# The draft model is the floor (ATLAS's static speculator): a traffic option is weighed with a_1 at its lower bound
# (SourceRate.lower), so a match class outbids the model only once it has held often enough to be sure of. Caution
# costs no evidence, because the shadow checks measure every class in the model's rounds too.
FLOOR_Z = 1.0

MATCH_BUCKETS = (4, 8, 16)  # traffic acceptance is measured apart for matches of < 4, < 8, < 16 and more tokens
# A traffic source is unproven until measured; shadow checks measure it for free every round, so a low prior
# costs a round of waiting, a high one costs verifies of weak matches (the loss on non-repetitive text).
TRAFFIC_PRIOR = 0.3
MODEL_PRIOR = 0.7  # the confidence stop's threshold: a calibrated draft's tokens are accepted about that often
MODEL_LENGTH_PRIOR = 3.0  # tokens the model drafts per round before its confidence stop, until measured


def match_bucket(match_length: int) -> int:
    """A long match is much stronger evidence than a short one: each length class has its own measured rate."""
    return sum(match_length >= edge for edge in MATCH_BUCKETS)


def traffic_length(rate: float, room: int) -> int:
    """Longest traffic draft: twice the expected run of accepted tokens, a / (1 - a), plus one, within [2, room]
    (drafting past it only widens the verify)."""
    run = rate / (1 - rate) if rate < 1 else float(room)
    return max(1, min(room, max(2, math.ceil(2 * run) + 1)))


def expected_tokens(rate: float, drafted: float) -> float:
    """E(a, g): tokens a round commits (accepted drafts, then one from the target) when each of g drafted tokens
    is accepted with probability a, independently."""
    if drafted <= 0:
        return 1.0
    return drafted + 1 if rate >= 1 else (1 - rate ** (drafted + 1)) / (1 - rate)


class StepCosts:
    """Seconds of a round's parts, from the rounds' RoundCost, each older round discounted by DISCOUNT:
      verify(n)    a least-squares line through (drafted tokens, verify seconds): a verify widens with n
      draft token  the draft model's seconds per token it drafted (the controller times its calls)
      rest         the round's other seconds (traffic lookup, acceptance, bookkeeping), paid by every option
    Until measured, a verify costs one unit and a draft token DRAFT_PRIOR of it (only ratios matter)."""

    DISCOUNT = 0.9
    DRAFT_PRIOR = 0.25

    def __init__(self) -> None:
        self.fit = [0.0] * 5  # discounted sums of 1, n, n^2, v, n*v over the timed verifies
        self.draft = [0.0, 0.0]  # discounted draft-model seconds and tokens
        self.rest_seconds: float | None = None

    def learn(self, cost: RoundCost, model_tokens: int, model_seconds: float) -> None:
        if cost.with_prompt:
            return  # the prompt's pass is not a round's cost
        n, v = cost.drafted, cost.verify_seconds
        self.fit = [self.DISCOUNT * s + x for s, x in zip(self.fit, (1.0, n, n * n, v, n * v), strict=True)]
        if model_tokens > 0:
            self.draft = [self.DISCOUNT * s + x for s, x in zip(self.draft, (model_seconds, model_tokens), strict=True)]
        rest = max(0.0, cost.seconds - v - model_seconds)
        self.rest_seconds = rest if self.rest_seconds is None else 0.8 * self.rest_seconds + 0.2 * rest

    def verify(self, drafted: float) -> float:
        w, sn, snn, sv, snv = self.fit
        if w == 0:
            return 1.0
        mean_n, mean_v = sn / w, sv / w
        spread = snn / w - mean_n**2
        slope = max(0.0, (snv / w - mean_n * mean_v) / spread) if spread > 0.5 else 0.0
        return max(mean_v + slope * (drafted - mean_n), 0.25 * mean_v)

    def draft_token(self) -> float:
        seconds, tokens = self.draft
        return seconds / tokens if tokens > 0 else self.DRAFT_PRIOR * self.verify(1)

    def round_seconds(self, drafted: float, model_tokens: float) -> float:
        return self.verify(drafted) + model_tokens * self.draft_token() + (self.rest_seconds or 0.0)


@dataclass
class ControllerMemory:
    """What the controller has measured; kept per traffic store, so it carries from request to request."""

    traffic_rates: list[TrafficRates] = field(
        default_factory=lambda: [
            TrafficRates(SourceRate(prior=TRAFFIC_PRIOR), SourceRate(prior=TRAFFIC_PRIOR))
            for _ in range(len(MATCH_BUCKETS) + 1)
        ]
    )
    model_rate: SourceRate = field(default_factory=lambda: SourceRate(prior=MODEL_PRIOR))
    model_length: float = MODEL_LENGTH_PRIOR  # moving average of the tokens per model draft
    costs: StepCosts = field(default_factory=StepCosts)

    def observe_model_length(self, tokens: int) -> None:
        self.model_length = 0.8 * self.model_length + 0.2 * tokens


MIN_CONFIDENCE = 0.5  # the traffic draft's first token: at least this share of the match's occurrences


def option_rates(
    drafted: int, room: int, ends: bool, traffic_rate: float, memory: ControllerMemory, first_rate: float | None = None
) -> dict[Source, float]:
    """Expected tokens per second of each option for a traffic proposal of `drafted` tokens (0: none), whose first
    token holds with probability a_1 (first_rate; None: traffic_rate) and each next one with a_t:
    traffic  T = 1 + a_1 E(a_t, k - 1), which is E(a_t, k) when a_1 = a_t, in one verify of k tokens
    model    E(a_m, g), g = the model's usual length within the room, for g draft tokens and their verify
    both     the traffic run, then with probability a_1 a_t^(k-1) that all k hold the model's continuation of
             r = room - k tokens at most: T + a_1 a_t^(k-1) (E(a_m, r) - 1), for r draft tokens and a verify
             of k + r."""
    costs, model_rate = memory.costs, memory.model_rate.rate
    first = traffic_rate if first_rate is None else first_rate
    if ends:
        room = drafted  # the proposal ends the text: no draft of any source goes usefully past it
    g = min(memory.model_length, room)
    rates: dict[Source, float] = {"model": expected_tokens(model_rate, g) / costs.round_seconds(g, g)}
    if drafted == 0:
        return rates
    from_traffic = 1 + first * expected_tokens(traffic_rate, drafted - 1)
    rates["traffic"] = from_traffic / costs.round_seconds(drafted, 0)
    rest = min(memory.model_length, room - drafted)
    if rest > 0:
        tokens = from_traffic + first * traffic_rate ** (drafted - 1) * (expected_tokens(model_rate, rest) - 1)
        rates["both"] = tokens / costs.round_seconds(drafted + rest, rest)
    return rates


def choose_source(
    proposal: Proposal,
    room: int,
    ends: bool,
    traffic_rate: float,
    memory: ControllerMemory,
    first_rate: float | None = None,
) -> Source:
    """The option with the most expected tokens per second (option_rates); ties go to the cheaper draft (traffic,
    then both). No proposal, or one whose first token is unsure, leaves the model. `ends`: the proposal ends with
    an end of sequence (nothing can follow it). traffic_rate and first_rate: a_t and a_1 of option_rates."""
    if not proposal.ids or proposal.confidence[0] < MIN_CONFIDENCE:
        return "model"
    rates = option_rates(len(proposal.ids), room, ends, traffic_rate, memory, first_rate)
    return max(("traffic", "both", "model"), key=lambda source: rates.get(source, -1.0))
