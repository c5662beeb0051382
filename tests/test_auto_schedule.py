"""The cost-aware "auto" schedule: exact outputs, and its rule on synthetic timings."""
import pytest
import torch

from specviz.config import ConfigError, SpecConfig
from specviz.engine import AUTO_CONFIDENCE, AutoSchedule, autoregressive_generate, run_to_end, speculative_generate
from specviz.tiny import tiny_pair

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return pair.encode_prompt(PROMPT, chat=False)


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("confidence", [0.0, 0.3])
def test_auto_greedy_equals_target_alone(pair, prompt_ids, drafter, confidence):
    config = SpecConfig(schedule="auto", gamma_max=8, draft_confidence=confidence, drafter=drafter, max_new_tokens=48)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    assert spec.token_ids == base.token_ids and spec.new_tokens == 48
    assert rounds[0].gamma == 0 and rounds[0].drafted == ()     # round 0 measures a plain target step
    assert all(r.gamma in (0, min(8, 48 - r.position - 1)) for r in rounds)


def test_auto_greedy_equals_transformers_generate(pair, prompt_ids, monkeypatch):
    # Make speculation look free so that auto speculates every round after the first.
    monkeypatch.setattr(AutoSchedule, "observe", lambda self, drafted, committed, seconds: None)
    config = SpecConfig(schedule="auto", gamma_max=6, max_new_tokens=40)
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config))
    out = pair.target.generate(torch.tensor([prompt_ids]), max_new_tokens=40, do_sample=False, min_new_tokens=40)
    assert list(spec.token_ids) == out[0, len(prompt_ids):].tolist()
    assert all(r.gamma > 0 for r in rounds[1:-1]) and spec.accepted > 0


def test_auto_sampling_keeps_the_seeded_stream_valid(pair, prompt_ids):
    config = SpecConfig(schedule="auto", gamma_max=6, temperature=1.0, seed=5, max_new_tokens=30)
    first = run_to_end(speculative_generate(pair, prompt_ids, config))[1]
    assert first.new_tokens == 30 and first.finish_reason == "length"


def test_auto_uses_its_confidence_stop_when_none_is_set(pair, prompt_ids, monkeypatch):
    seen = []
    from specviz.drafters import ModelDrafter
    original = ModelDrafter.propose

    def spy(self, committed, gamma, warpers, generator, greedy, confidence):
        seen.append(confidence)
        return original(self, committed, gamma, warpers, generator, greedy, confidence)

    monkeypatch.setattr(ModelDrafter, "propose", spy)
    monkeypatch.setattr(AutoSchedule, "observe", lambda self, drafted, committed, seconds: None)
    run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(schedule="auto", max_new_tokens=12)))
    assert seen and set(seen) == {AUTO_CONFIDENCE}
    seen.clear()
    run_to_end(speculative_generate(pair, prompt_ids, SpecConfig(schedule="auto", draft_confidence=0.4, max_new_tokens=12)))
    assert set(seen) == {0.4}


def test_auto_rule_on_synthetic_timings():
    """1 s a plain step; a speculative round that commits 3 tokens in 2 s pays (1.5 tok/s), one that
    commits 1 token in 1.5 s does not: then 2, 4, 8 ... plain rounds, back to 2 after a paying probe."""
    auto = AutoSchedule(SpecConfig(schedule="auto", gamma_max=9))
    assert auto.next() == 0                       # round 0: plain
    auto.observe(0, 1, 1.0)
    assert auto.next() == 9
    auto.observe(9, 3, 2.0)                       # pays
    assert auto.next() == 9
    auto.observe(9, 1, 1.5)                       # EMA: 0.7*3+0.3*1 = 2.4 tokens / (0.7*2+0.3*1.5) = 1.85 s: still pays
    assert auto.next() == 9
    for _ in range(3):
        auto.observe(9, 1, 1.5)
    plans = [auto.next() for _ in range(3)]
    assert plans == [0, 0, 9]                     # lost: 2 plain rounds, then a probe
    auto.observe(0, 1, 1.0)
    auto.observe(0, 1, 1.0)
    auto.observe(9, 1, 1.5)                       # the probe loses too (its own average restarted)
    assert [auto.next() for _ in range(5)] == [0, 0, 0, 0, 9]
    auto.observe(9, 4, 2.0)                       # a paying probe resets the back-off
    assert auto.next() == 9
    auto.observe(9, 1, 3.0)
    auto.observe(9, 1, 3.0)
    assert [auto.next() for _ in range(3)] == [0, 0, 9]


def test_auto_backoff_is_bounded():
    auto = AutoSchedule(SpecConfig(schedule="auto"))
    auto.next()
    auto.observe(0, 1, 1.0)
    for _ in range(10):
        while auto.next() == 0:
            pass
        auto.observe(5, 1, 10.0)
    assert auto.backoff == AutoSchedule.MAX_BACKOFF


def test_schedule_names():
    SpecConfig(schedule="auto").validate()
    with pytest.raises(ConfigError, match="auto"):
        SpecConfig(schedule="fastest").validate()
