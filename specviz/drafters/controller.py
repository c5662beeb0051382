"""The controller's rule: each round, the source (traffic, draft model, or both) that is expected to commit the
most tokens per second, from each source's measured acceptance and the round's measured costs.

Expected tokens and seconds of a round come from the one cost model (decoding/costs.py): E(a, g) for each source's
measured acceptance, and RoundCosts' verify, draft-token and rest seconds, learned from the rounds' RoundCost (traffic
tokens cost no draft forward). Why: docs/DESIGN.md, "The traffic drafter".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from specviz.decoding.costs import Ewma, RoundCosts, expected_tokens

from .suffix import Proposal

Source = Literal["traffic", "model", "both"]  # who drafts a round (Draft.source, RoundEvent.draft_source)
SOURCES: tuple[Source, ...] = get_args(Source)
TRAFFIC, MODEL, BOTH = SOURCES
SOURCE_LABELS: dict[str, str] = {TRAFFIC: "traffic", MODEL: "draft model", BOTH: "traffic + draft model"}  # in words


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
    lengths: Ewma = field(default_factory=lambda: Ewma(0.8, MODEL_LENGTH_PRIOR))  # tokens per model draft

    @property
    def model_length(self) -> float:
        return self.lengths.value

    def observe_model_length(self, tokens: int) -> None:
        self.lengths.add(tokens)


MIN_CONFIDENCE = 0.5  # the traffic draft's first token: at least this share of the match's occurrences


def option_rates(
    drafted: int,
    room: int,
    ends: bool,
    traffic_rate: float,
    memory: ControllerMemory,
    costs: RoundCosts,
    first_rate: float | None = None,
) -> dict[Source, float]:
    """Expected tokens per second of each option for a traffic proposal of `drafted` tokens (0: none), whose first
    token holds with probability a_1 (first_rate; None: traffic_rate) and each next one with a_t:
    traffic  T = 1 + a_1 E(a_t, k - 1), which is E(a_t, k) when a_1 = a_t, in one verify of k tokens
    model    E(a_m, g), g = the model's usual length within the room, for g draft tokens and their verify
    both     the traffic run, then with probability a_1 a_t^(k-1) that all k hold the model's continuation of
             r = room - k tokens at most: T + a_1 a_t^(k-1) (E(a_m, r) - 1), for r draft tokens and a verify
             of k + r."""
    model_rate = memory.model_rate.rate
    first = traffic_rate if first_rate is None else first_rate
    if ends:
        room = drafted  # the proposal ends the text: no draft of any source goes usefully past it
    g = min(memory.model_length, room)
    rates: dict[Source, float] = {MODEL: expected_tokens(model_rate, g) / costs.round_seconds(g, g)}
    if drafted == 0:
        return rates
    from_traffic = 1 + first * expected_tokens(traffic_rate, drafted - 1)
    rates[TRAFFIC] = from_traffic / costs.round_seconds(drafted, 0)
    rest = min(memory.model_length, room - drafted)
    if rest > 0:
        tokens = from_traffic + first * traffic_rate ** (drafted - 1) * (expected_tokens(model_rate, rest) - 1)
        rates[BOTH] = tokens / costs.round_seconds(drafted + rest, rest)
    return rates


def choose_source(
    proposal: Proposal,
    room: int,
    ends: bool,
    traffic_rate: float,
    memory: ControllerMemory,
    costs: RoundCosts,
    first_rate: float | None = None,
) -> Source:
    """The option with the most expected tokens per second (option_rates); ties go to the cheaper draft (traffic,
    then both). No proposal, or one whose first token is unsure, leaves the model. `ends`: the proposal ends with
    an end of sequence (nothing can follow it). traffic_rate and first_rate: a_t and a_1 of option_rates."""
    if not proposal.ids or proposal.confidence[0] < MIN_CONFIDENCE:
        return MODEL
    rates = option_rates(len(proposal.ids), room, ends, traffic_rate, memory, costs, first_rate)
    return max((TRAFFIC, BOTH, MODEL), key=lambda source: rates.get(source, -1.0))
