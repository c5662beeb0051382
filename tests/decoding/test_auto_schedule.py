"""The cost-aware "auto" schedule and the fused prompt pass: exact outputs, and auto's rule on synthetic timings."""

import pytest
import torch

from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.costs import RoundCost, RoundCosts
from specviz.decoding.engine import AUTO_CONFIDENCE, AutoSchedule, autoregressive_generate, run_to_end
from specviz.runs import speculative_generate

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"


def always_speculate(self):
    """AutoSchedule.next as if speculation always paid."""
    return self.gamma_max


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return pair.encode_prompt(PROMPT, chat=False)


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("confidence", [0.0, 0.3])
def test_auto_greedy_equals_target_alone(pair, prompt_ids, drafter, confidence, monkeypatch):
    config = SpecConfig(schedule="auto", gamma_max=8, draft_confidence=confidence, drafter=drafter, max_new_tokens=48)
    observed, learn = [], AutoSchedule.learn

    def spy(self, cost):
        observed.append((cost.drafted, cost.committed))
        return learn(self, cost)

    monkeypatch.setattr(AutoSchedule, "learn", spy)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    # The schedule learns from every round, with what the round really drafted and committed.
    assert observed == [(len(r.drafted), len(r.appended)) for r in rounds]
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    assert spec.token_ids == base.token_ids and spec.new_tokens == 48
    assert rounds[0].gamma == 8  # it starts speculating
    assert all(r.gamma in (0, min(8, 48 - r.position - 1)) for r in rounds)


def test_auto_greedy_equals_transformers_generate(pair, prompt_ids, monkeypatch):
    monkeypatch.setattr(AutoSchedule, "next", always_speculate)
    config = SpecConfig(schedule="auto", gamma_max=6, max_new_tokens=40)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    out = pair.target.generate(torch.tensor([prompt_ids]), max_new_tokens=40, do_sample=False, min_new_tokens=40)
    assert list(spec.token_ids) == out[0, len(prompt_ids) :].tolist()
    assert all(r.gamma > 0 for r in rounds[:-1]) and spec.accepted > 0


def test_auto_sampling_keeps_the_seeded_stream_valid(pair, prompt_ids):
    config = SpecConfig(schedule="auto", gamma_max=6, temperature=1.0, seed=5, max_new_tokens=30)
    first = run_to_end(speculative_generate(pair, prompt_ids, config))[1]
    assert first.new_tokens == 30 and first.finish_reason == "length"


def test_auto_uses_its_confidence_stop_when_none_is_set(pair, prompt_ids, monkeypatch):
    seen = []
    from specviz.drafters.model import ModelDrafter

    original = ModelDrafter.propose

    def spy(self, committed, gamma, warpers, generator, greedy, confidence):
        seen.append(confidence)
        return original(self, committed, gamma, warpers, generator, greedy, confidence)

    monkeypatch.setattr(ModelDrafter, "propose", spy)
    monkeypatch.setattr(AutoSchedule, "next", always_speculate)
    run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(schedule="auto", max_new_tokens=12)))
    assert seen and set(seen) == {AUTO_CONFIDENCE}
    seen.clear()
    config = SpecConfig(schedule="auto", draft_confidence=0.4, max_new_tokens=12)
    run_to_end(speculative_generate(pair, prompt_ids, config))
    assert set(seen) == {0.4}


class Timed:
    """An AutoSchedule with its run's cost model, each taught as the engine does: the cost model first."""

    def __init__(self, gamma_max: int):
        self.costs = RoundCosts()
        self.auto = AutoSchedule(SpecConfig(schedule="auto", gamma_max=gamma_max), self.costs)

    def next(self) -> int:
        return self.auto.next()

    def rates(self) -> tuple[float, float]:
        return self.auto.rates()

    def t_plain(self) -> float | None:
        return self.costs.plain_step

    def observe(self, drafted, committed, seconds, with_prompt=False, verify_seconds=None) -> None:
        verify = seconds if verify_seconds is None else verify_seconds
        cost = RoundCost(drafted, 0, committed, seconds, verify, with_prompt)
        self.costs.learn(cost)
        self.auto.learn(cost)


def test_auto_rule_on_synthetic_timings():
    """rate_spec = (T + 2 * 2) / (S + 2 * t_plain) over the speculative rounds' discounted tokens T and
    seconds S; speculate while it is at least 1 / t_plain."""
    auto = Timed(9)
    assert auto.next() == 9  # nothing timed yet: speculate
    auto.observe(9, 6, 5.0, with_prompt=True, verify_seconds=4.0)  # the fused prompt round: not timed
    assert auto.t_plain() is None and auto.next() == 9
    auto.observe(9, 6, 2.0, verify_seconds=1.2)  # t_plain estimated as the shortest verify: 1.2 s
    assert auto.t_plain() == 1.2
    assert auto.rates() == pytest.approx(((6 + 4) / (2 + 2.4), 1 / 1.2))
    assert auto.next() == 9  # 2.27 tok/s, clearly ahead of 0.83
    auto.observe(9, 1, 4.0, verify_seconds=1.1)  # (0.9*6 + 1 + 4) / (0.9*2 + 4 + 2.2) = 1.3: not clearly ahead
    assert auto.next() == 0  # of 1/1.1 = 0.91 tok/s: time a plain step
    auto.observe(0, 1, 1.0)  # t_plain = 1 s from now on
    assert auto.t_plain() == 1.0
    assert auto.rates() == pytest.approx(((0.9 * 6.4 + 4) / (0.9 * 5.8 + 2), 1.0))
    assert auto.next() == 9  # 1.35 tok/s: pays
    auto.observe(9, 1, 8.0)  # (0.9*5.76 + 1 + 4) / (0.9*5.22 + 8 + 2) = 0.69: loses
    assert auto.next() == 0


def plain_rounds_before_a_probe(auto: Timed) -> int:
    count = 0
    while auto.next() == 0:
        auto.observe(0, 1, 1.0)
        count += 1
    return count


def test_auto_tries_again_after_plain_steps():
    auto = Timed(9)
    auto.observe(0, 1, 1.0)
    auto.observe(9, 1, 5.0)  # T = 1, S = 5: (1 + 4) / (5 + 2) < 1
    # after k plain steps (0.9^k + 4) / (5 * 0.9^k + 2) >= 1 once 0.9^k <= 1/2, at k = 7
    assert plain_rounds_before_a_probe(auto) == 7


def test_one_bad_round_does_not_stop_speculation_for_long():
    """A long draft wholly rejected first thing: 1 token in 3.3 plain steps' time."""
    auto = Timed(16)
    auto.observe(16, 1, 1.0, verify_seconds=0.3)
    # (1 + 4) / (1 + 0.6) = 3.1 tok/s, not clearly ahead of 1/0.3: a plain step times t_plain, and after
    # one more the faded round no longer outweighs the prior: (0.81 + 4) / (0.81 + 0.6) = 3.4 >= 3.3
    assert plain_rounds_before_a_probe_at(auto, 0.3) == 2


def plain_rounds_before_a_probe_at(auto: Timed, step: float) -> int:
    count = 0
    while auto.next() == 0:
        auto.observe(0, 1, step)
        count += 1
    return count


def test_auto_speculates_rarely_where_it_never_pays():
    auto = Timed(5)
    auto.observe(0, 1, 1.0)
    plans = []
    for _ in range(300):
        gamma = auto.next()
        plans.append(gamma)
        auto.observe(gamma, 1, 1.0 if gamma == 0 else 3.0)  # a round of speculation: 1 token in 3 steps' time
    speculative = sum(1 for g in plans if g) / len(plans)
    assert 0 < speculative < 0.2  # plain decoding's speed, less about a third of a fifth
    assert all(g in (0, 5) for g in plans)


def test_schedule_names():
    SpecConfig(schedule="auto").validate()
    with pytest.raises(ConfigError, match="auto"):
        SpecConfig(schedule="fastest").validate()


@pytest.mark.parametrize("schedule", ["constant", "auto"])
@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_fused_prompt_is_exact(pair, prompt_ids, schedule, drafter):
    fused = SpecConfig(gamma=4, schedule=schedule, drafter=drafter, max_new_tokens=40, fuse_prompt=True)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, fused))
    steps, base = run_to_end(autoregressive_generate(pair, prompt_ids, fused))
    out = pair.target.generate(torch.tensor([prompt_ids]), max_new_tokens=40, do_sample=False, min_new_tokens=40)
    assert list(spec.token_ids) == list(base.token_ids) == out[0, len(prompt_ids) :].tolist()
    assert spec.prefill_seconds == 0.0 or spec.prefill_seconds < 1e-3
    assert rounds[0].target_cache_before == 0
    assert rounds[0].target_cache_after == len(prompt_ids) + len(rounds[0].appended) - 1
    if drafter == "model":
        assert rounds[0].draft_cache_before == 0
    for before, after in zip(rounds, rounds[1:], strict=False):
        assert after.target_cache_before == before.target_cache_after


def test_fused_prompt_sampling_matches_the_separate_pass(pair, prompt_ids):
    """The same seed gives the same sampled tokens whether the prompt has its own pass or not."""
    config = SpecConfig(gamma=3, temperature=1.0, seed=11, max_new_tokens=30)
    _, separate = run_to_end(speculative_generate(pair, prompt_ids, config))
    fused_config = SpecConfig(**{**config.to_dict(), "fuse_prompt": True})
    _, fused = run_to_end(speculative_generate(pair, prompt_ids, fused_config))
    assert fused.token_ids == separate.token_ids
