"""The controller's rule on scripted rates and costs: expected tokens per second of traffic, the draft model and
both (controller.option_rates), the run's cost model it reads, and its memory from request to request."""

import pytest

from specviz.decoding import engine
from specviz.decoding.config import SpecConfig
from specviz.decoding.costs import Ewma, RoundCost, RoundCosts, expected_tokens
from specviz.decoding.engine import make_generator, run_to_end, vocab_width
from specviz.decoding.sampling import build_warpers
from specviz.drafters import traffic
from specviz.drafters.controller import (
    FLOOR_Z,
    ControllerMemory,
    SourceRate,
    TrafficRates,
    choose_source,
    match_bucket,
    option_rates,
    traffic_length,
)
from specviz.drafters.model import ModelDrafter
from specviz.drafters.suffix import Proposal, TrafficStore
from specviz.drafters.traffic import ControllerDrafter, TrafficDrafter, controller_memory
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate

CPU = (0.2, 0.045)  # seconds of a verify and of a draft token on this CPU (built-in pair: ~195 ms, ~43 ms)
CHEAP_DRAFT = (0.2, 0.01)  # a draft token at 5% of a verify (a GPU with a much smaller draft)


class FixedCosts(RoundCosts):
    def __init__(self, verify: float, draft_token: float):
        super().__init__()
        self.fixed = (verify, draft_token)

    def verify(self, drafted: float) -> float:
        return self.fixed[0]

    def draft_token(self) -> float:
        return self.fixed[1]


def memory(model_rate: float, model_length: float, costs: tuple[float, float]) -> tuple[ControllerMemory, RoundCosts]:
    """What choose_source and option_rates read: the controller's memory and the run's cost model."""
    return ControllerMemory(model_rate=SourceRate(prior=model_rate), lengths=Ewma(0.8, model_length)), FixedCosts(
        *costs
    )


def proposal(n: int, first: float = 0.9) -> Proposal:
    return Proposal(tuple(range(n)), (first,) * n, match_length=n, occurrences=3)


@pytest.mark.parametrize(
    "n, first, traffic, model, length, costs, expected",
    [
        (0, 0.9, 0.9, 0.75, 3, CPU, "model"),  # no match
        (4, 0.3, 0.9, 0.75, 3, CPU, "model"),  # an unsure first token
        (2, 0.9, 0.1, 0.75, 3, CPU, "model"),  # a weak match, measured weak (prose): the model pays
        (2, 0.9, 0.6, 0.75, 3, CPU, "traffic"),  # less reliable than the model, but free: 9.8 against 8.1 tok/s
        (16, 0.9, 0.95, 0.75, 3, CPU, "traffic"),  # a long strong match
        (2, 0.9, 0.9, 0.9, 8, CPU, "traffic"),  # the model could go on, but 8 draft tokens cost more than they add
        (2, 0.9, 0.9, 0.9, 8, CHEAP_DRAFT, "both"),  # ... unless draft tokens are cheap: then it continues
        (2, 0.9, 0.6, 0.9, 8, CHEAP_DRAFT, "model"),  # a cheap reliable draft beats a short middling match
    ],
)
def test_choose_source_on_scripted_rates_and_costs(n, first, traffic, model, length, costs, expected):
    assert choose_source(proposal(n, first), 16, False, traffic, *memory(model, length, costs)) == expected


def test_the_old_margin_rule_would_fail_here():
    """The rule before issue 17's fix chose traffic only within 0.1 of the model's rate, and "both" whenever a short
    proposal came from a source accepted >= 0.7: cost-blind both ways."""
    cpu = memory(0.75, 3, CPU)
    assert choose_source(proposal(2), 16, False, 0.6, *cpu) == "traffic"  # old: model (0.6 < 0.75 - 0.1)
    assert choose_source(proposal(2), 16, False, 0.9, *memory(0.9, 8, CPU)) == "traffic"  # old: both


def test_nothing_follows_an_end_of_sequence():
    rates = option_rates(2, 16, True, 0.9, *memory(0.9, 8, CHEAP_DRAFT))
    assert "both" not in rates
    assert choose_source(proposal(2), 16, True, 0.9, *memory(0.9, 8, CHEAP_DRAFT)) == "traffic"


def test_option_rates_are_expected_tokens_per_second():
    rates = option_rates(2, 16, False, 0.6, *memory(0.75, 3, CPU))
    assert rates["traffic"] == pytest.approx((1 + 0.6 + 0.36) / 0.2)
    assert rates["model"] == pytest.approx(expected_tokens(0.75, 3) / (0.2 + 3 * 0.045))
    both = expected_tokens(0.6, 2) + 0.6**2 * (expected_tokens(0.75, 3) - 1)
    assert rates["both"] == pytest.approx(both / (0.2 + 3 * 0.045))
    assert set(option_rates(14, 16, False, 0.6, *memory(0.75, 3, CPU))) == {"traffic", "model", "both"}
    assert "both" not in option_rates(16, 16, False, 0.6, *memory(0.75, 3, CPU))  # no room left for the model


def test_expected_tokens_is_leviathans():
    assert expected_tokens(0.0, 5) == 1.0
    assert expected_tokens(1.0, 5) == 6.0
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)
    assert expected_tokens(0.9, 0) == 1.0


def cost(
    drafted: int, verify: float, seconds: float, with_prompt: bool = False, model_tokens: int = 0, model_seconds=0.0
) -> RoundCost:
    return RoundCost(drafted, 0, 1, seconds, verify, with_prompt, model_tokens, model_seconds)


def test_step_costs_learn_a_widening_verify_and_the_draft_tokens():
    costs = RoundCosts()
    assert costs.verify(4) == 1.0 and costs.draft_token() == RoundCosts.DRAFT_PRIOR  # unmeasured: ratios only
    for n in (2, 16, 4, 12, 8, 0):
        model_tokens = n // 2
        verify, model_seconds = 0.2 + 0.015 * n, 0.04 * model_tokens
        costs.learn(
            cost(n, verify, verify + model_seconds + 0.01, model_tokens=model_tokens, model_seconds=model_seconds)
        )
    assert costs.verify(10) == pytest.approx(0.35)
    assert costs.verify(0) == pytest.approx(0.2)
    assert costs.draft_token() == pytest.approx(0.04)
    assert costs.rest.value == pytest.approx(0.01)
    before = list(costs.fit.sums)
    costs.learn(cost(30, 9.0, 9.5, with_prompt=True))  # the prompt's pass is not a round
    assert costs.fit.sums == before


def test_traffic_length_follows_measured_acceptance():
    assert traffic_length(0.3, 16) == 2
    assert traffic_length(0.5, 16) == 3
    assert traffic_length(0.9, 16) == 16
    assert traffic_length(1.0, 6) == 6
    lengths = [traffic_length(a / 10, 32) for a in range(10)]
    assert lengths == sorted(lengths)


def test_a_traffic_round_is_one_observation_of_its_first_token():
    """A match either goes on or it does not: one accepted run of five is one success of the first token (and four
    of the next ones), not five independent ones."""
    rates = TrafficRates(SourceRate(prior=0.3), SourceRate(prior=0.3))
    rates.observe(5, 5)  # all five held
    rates.observe(0, 1)  # the first token failed
    assert rates.first.rate == pytest.approx((0.8 + 0 + 0.6) / (0.8 + 1 + 2))
    assert rates.next.rate == pytest.approx((4 + 0.6) / (4 + 2))  # only rounds whose first token held
    rates.observe(0, 0)  # nothing checked: nothing learned
    assert rates.first.checked == pytest.approx(1.8)


def test_an_unproven_match_class_does_not_outbid_a_proven_model():
    """The bench prompts' run (issue 17): a 6-token match class had held once, a five-token run, and failed once;
    per token that read as 0.65, enough to outbid a draft model kept at 0.88; it failed again."""
    costs = (0.19, 0.018)  # that run's verify and draft-token seconds, about
    model = memory(0.884, 2.78, costs)
    assert choose_source(proposal(5), 16, False, 0.647, *model) == "traffic"  # the per-token reading
    first = (0.8 + 0.6) / (1.8 + 2)  # one success, one failure, prior 0.3 on 2 rounds
    assert choose_source(proposal(5), 16, False, 0.647, *model, first_rate=first) == "model"
    assert option_rates(5, 16, False, 0.6, *model, first_rate=0.6) == option_rates(5, 16, False, 0.6, *model)
    assert choose_source(proposal(16), 16, False, 0.95, *model, first_rate=0.8) == "traffic"  # a long proven match


def test_match_length_classes():
    assert [match_bucket(m) for m in (2, 3, 4, 7, 8, 15, 16, 24)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_source_rate_forgets_old_rounds():
    rate = SourceRate(prior=0.6)
    for _ in range(20):
        rate.observe(4, 4)
    assert rate.rate > 0.9
    for _ in range(10):
        rate.observe(0, 1)
    assert rate.rate < 0.4  # below its prior: ten misses outweigh twenty old full rounds


def test_the_memory_carries_from_request_to_request():
    pair = tiny_pair()
    store = TrafficStore()
    config = SpecConfig(gamma=6, drafter="controller", max_new_tokens=24)
    ids = pair.encode_prompt("1, 2, 3, 1, 2, 3, 1, 2,", chat=False)
    remembered = controller_memory(store)
    run_to_end(speculative_generate(pair, ids, config, traffic=store))
    checked = [r.first.checked for r in remembered.traffic_rates]
    assert controller_memory(store) is remembered and sum(checked) > 0  # the rounds' acceptance was learned
    run_to_end(speculative_generate(pair, ids, config, traffic=store))
    assert sum(r.first.checked for r in remembered.traffic_rates) != sum(checked)  # the second run went on learning
    assert controller_memory(TrafficStore()) is not remembered  # another store, its own memory


def test_one_cost_model_per_run_learned_once_a_round_read_by_schedule_and_controller(monkeypatch):
    """Under the auto schedule and the controller, both decide from the run's one RoundCosts, which the engine
    teaches once per round (there were two learners of the same RoundCost before)."""
    pair = tiny_pair()
    learned, read = [], set()
    learn, choose = RoundCosts.learn, traffic.choose_source

    def learn_spy(self, cost):
        learned.append(id(self))
        return learn(self, cost)

    def choose_spy(proposal, room, ends, rate, memory, costs, first_rate=None):
        read.add(id(costs))
        return choose(proposal, room, ends, rate, memory, costs, first_rate)

    monkeypatch.setattr(RoundCosts, "learn", learn_spy)
    monkeypatch.setattr(traffic, "choose_source", choose_spy)
    schedules, make = [], engine.make_schedule

    def make_spy(config, costs):
        schedules.append(make(config, costs))
        return schedules[-1]

    monkeypatch.setattr(engine, "make_schedule", make_spy)
    config = SpecConfig(schedule="auto", gamma_max=6, drafter="controller", max_new_tokens=24)
    ids = pair.encode_prompt("1, 2, 3, 1, 2, 3, 1, 2,", chat=False)
    rounds, _ = run_to_end(speculative_generate(pair, ids, config, traffic=TrafficStore()))
    assert len(learned) == len(rounds) and len(set(learned)) == 1  # one model, one lesson per round
    assert read == set(learned) and id(schedules[0].costs) in read  # the controller and the schedule read it


def test_the_lower_bound_narrows_with_evidence_and_never_passes_the_rate():
    rate = SourceRate(prior=0.3)
    assert rate.lower(FLOOR_Z) < rate.rate  # the prior alone: wide
    margins, bounds = [], {}
    for holds in range(1, 13):
        rate.observe(1, 1)  # a first token that held, round after round
        bounds[holds] = rate.lower(FLOOR_Z)
        assert 0.0 <= bounds[holds] < rate.rate
        margins.append(rate.rate - bounds[holds])
    assert margins == sorted(margins, reverse=True)  # more rounds, surer
    assert rate.lower(0.0) == rate.rate
    # a - sqrt(a (1 - a) / n) after 1, 5 and 12 holds (n = discounted rounds + 2): the values docs/DESIGN.md quotes
    assert [round(bounds[k], 3) for k in (1, 5, 12)] == [0.245, 0.549, 0.632]
    assert SourceRate(prior=0.0).lower(FLOOR_Z) == 0.0


def test_the_model_is_the_floor_until_a_match_class_has_proven_itself():
    """The bench prompts' run with a_1 at its mean (issue 17): a class that had held in one of its first rounds
    outbid a draft model the prose prompts had pulled down to 0.58, failed at the first token, and the translation
    request ran at 0.75x the model. At the lower bound one hold is not enough for such a class; two are. A long
    match's drafts are free and long: one hold lets it outbid even a good model."""
    costs = (0.19, 0.018)
    model = memory(0.58, 2.78, costs)
    rates = TrafficRates(SourceRate(prior=0.3), SourceRate(prior=0.3))
    rates.observe(5, 5)
    assert choose_source(proposal(5), 16, False, 0.647, *model, first_rate=rates.first.rate) == "traffic"  # the mean
    assert choose_source(proposal(5), 16, False, 0.647, *model, first_rate=rates.first.lower(FLOOR_Z)) == "model"
    rates.observe(5, 5)
    assert choose_source(proposal(5), 16, False, 0.647, *model, first_rate=rates.first.lower(FLOOR_Z)) == "traffic"
    long_match = TrafficRates(SourceRate(prior=0.3), SourceRate(prior=0.3))
    long_match.observe(16, 16)
    proven = memory(0.884, 2.78, costs)  # a long match wins against a good model after one hold
    assert (
        choose_source(proposal(16), 16, False, 0.95, *proven, first_rate=long_match.first.lower(FLOOR_Z)) == "traffic"
    )


def test_the_controller_weighs_the_first_token_at_its_lower_bound(monkeypatch):
    """What ControllerDrafter.propose hands choose_source: a_t's mean (it sets the length) and a_1's lower bound."""
    pair = tiny_pair()
    store = TrafficStore()
    ids = pair.encode_prompt("1, 2, 3, 1, 2, 3, 1, 2,", chat=False)
    store.add(ids * 2)
    seen = []

    def spy(p, room, ends, rate, memory, costs, first_rate=None):
        seen.append((p.match_length, rate, first_rate))
        return "model"

    monkeypatch.setattr(traffic, "choose_source", spy)
    model = ModelDrafter(pair.draft, vocab_width(pair))
    drafter = ControllerDrafter(TrafficDrafter(store), model, RoundCosts(), ControllerMemory())
    bucket = drafter.memory.traffic_rates[match_bucket(len(ids))]
    bucket.first.observe(1, 1)
    drafter.prefill(ids[:-1])
    drafter.propose(ids, 6, build_warpers(SpecConfig()), make_generator(pair.device, 0), True, 0.0)
    [(length, rate, first)] = seen
    assert match_bucket(length) == match_bucket(len(ids))
    assert rate == bucket.next.rate
    assert first == pytest.approx(bucket.first.lower(FLOOR_Z)) and first < bucket.first.rate
