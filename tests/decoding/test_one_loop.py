"""One round for one row and many (issue 57): every registered drafter runs through engine.speculative_round at
B = 1, 2 and 4, and greedy, at fp32, each row is its prompt decoded alone by plain decoding; at B = 1 the batch is
the engine's own run, round for round. Sampling at B = 4 with a point-mass drafter (n-gram lookup): each row's first
two tokens follow the target (chi-square), and a residual that forgets the rejected token is caught; the draft
model's own check is tests/decoding/test_batch.py's."""

import pytest
import torch
from helpers.heads import random_head, random_heads
from helpers.lossless import chi_square_pair, chi_square_rejects

import specviz.decoding.acceptance as acceptance
from specviz import drafters, runs
from specviz.decoding.batch import RAGGED
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import EngineError, autoregressive_generate, run_to_end
from specviz.decoding.metrics import SpecMetrics
from specviz.decoding.sampling import build_warpers, probabilities
from specviz.drafters.suffix import TrafficStore
from specviz.models.tiny import tiny_pair

# repeats for the lookups, a one-token prompt, prompts of unequal lengths
PROMPTS = [[5, 6, 7, 5, 6, 7, 5], [8, 9, 10, 11, 12, 13], [20], [30, 31, 32, 30, 31, 32, 30, 31]]
GREEDY = SpecConfig(gamma=4, max_new_tokens=16)


@pytest.fixture(scope="module")
def close_pair():
    return tiny_pair(seed=0, noise=0.02)  # fp32, a draft close to the target: long, ragged accepted prefixes


@pytest.fixture(scope="module")
def heads(close_pair):
    return {drafters.MEDUSA: random_heads(close_pair), drafters.EAGLE: random_head(close_pair)}


def alone(pair, prompt: list[int], config: SpecConfig) -> list[int]:
    return list(run_to_end(autoregressive_generate(pair, prompt, config))[1].token_ids)


def traffic(pair) -> TrafficStore:
    """A store that has seen each prompt's continuation once (the traffic drafters then have something to copy)."""
    store = TrafficStore()
    for prompt in PROMPTS:
        store.add(prompt + alone(pair, prompt, GREEDY)[:8])
    return store


@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("name", list(drafters.REGISTRY))
def test_every_drafter_batches_and_each_row_is_its_prompt_alone(close_pair, heads, name, size):
    config = SpecConfig(**{**GREEDY.to_dict(), "drafter": name})
    prompts = PROMPTS[:size]
    result = runs.batch_speculative(close_pair, prompts, config, traffic=traffic(close_pair), heads=heads)
    assert result.token_ids == [alone(close_pair, prompt, config) for prompt in prompts]
    assert result.metrics.draft_tokens > 0 and result.metrics.rounds == len(result.row_rounds)
    assert result.shapes[0][0] == size and len(result.shapes) == result.rounds
    each = [
        run_to_end(runs.speculative_generate(close_pair, prompt, config, traffic=traffic(close_pair), heads=heads))
        for prompt in prompts
    ]
    if size == 1:  # the engine's own run: the same rounds as the events a page steps through
        assert result.rounds == each[0][1].rounds
    if name not in drafters.CHOOSERS:  # a row drafts in a batch what it drafts alone, round for round
        alone_metrics = sum((SpecMetrics.from_events(events) for events, _ in each), SpecMetrics())
        assert result.metrics == alone_metrics


@pytest.mark.parametrize(
    "options",
    [{"lookahead": 3}, {"draft_confidence": 0.6}, {"schedule": "adaptive"}, {"lookahead": 2, "draft_confidence": 0.5}],
    ids=["lookahead", "confidence stop", "adaptive", "both"],
)
def test_rows_that_draft_different_lengths_stay_exact(close_pair, options):
    """The draft model's rows step together: a row that stops early (unsure, or its guesses taken) holds still while
    the others draft on, and a row whose guess missed is fed again alone; greedy, each row is still its prompt alone,
    in the rounds it has alone."""
    config = SpecConfig(**{**GREEDY.to_dict(), "max_new_tokens": 24, **options})
    result = runs.batch_speculative(close_pair, PROMPTS, config)
    assert result.token_ids == [alone(close_pair, prompt, config) for prompt in PROMPTS]
    if "schedule" not in options:  # (the adaptive schedule follows the batch's acceptance, not each row's)
        each = [run_to_end(runs.speculative_generate(close_pair, prompt, config))[0] for prompt in PROMPTS]
        assert result.metrics == sum((SpecMetrics.from_events(events) for events in each), SpecMetrics())


def test_the_draft_model_batches_its_forwards(close_pair):
    """Its rows share each draft forward (one per draft step for the whole batch), where the lookups have none."""
    config = SpecConfig(gamma=3, max_new_tokens=9)
    calls = []
    forward = close_pair.draft.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    close_pair.draft.forward = counted
    try:
        result = runs.batch_speculative(close_pair, PROMPTS, config)
    finally:
        del close_pair.draft.forward
    assert calls[0] == len(PROMPTS)  # the prompts' pass: one forward over the four rows
    assert max(calls) == len(PROMPTS) and len(calls) <= 1 + 3 * result.rounds


def test_alternatives_need_one_prompt(close_pair):
    with pytest.raises(EngineError, match="alternatives"):
        runs.batch_speculative(close_pair, PROMPTS[:2], SpecConfig(alternatives=2))


# ---------------------------------------------------------------- sampling: a point-mass drafter, per row at B = 4

LOSSLESS_PROMPTS = ([1, 2, 3, 1, 2, 3, 1, 2], [4, 2, 4, 2, 4], [3, 5, 3, 5, 3], [5, 1, 4, 5, 1])  # each repeats
RUNS = 600
NGRAM = SpecConfig(gamma=3, temperature=1.0, max_new_tokens=3, drafter=drafters.NGRAM)


@pytest.fixture(scope="module")
def far_pair():
    return chi_square_pair()  # vocabulary of 6


@torch.inference_mode()
def exact_joint(pair, prompt: list[int], config: SpecConfig) -> dict[tuple[int, int], float]:
    """P(t1, t2 | prompt) = p(t1 | prompt) p(t2 | prompt, t1) under the same transform."""
    warpers = build_warpers(config)
    first = probabilities(pair.target(torch.tensor([prompt])).logits[0, -1:], warpers)[0]
    both = torch.tensor([prompt + [t1] for t1 in range(first.shape[0])])
    joint = first[:, None] * probabilities(pair.target(both).logits[:, -1], warpers)
    return {(t1, t2): float(joint[t1, t2]) for t1, t2 in (joint > 0).nonzero().tolist()}


def verdicts(pair, config: SpecConfig) -> list[tuple[bool, float, float]]:
    prompts = [list(p) for p in LOSSLESS_PROMPTS]
    counts: list[dict] = [{} for _ in prompts]
    drafted = 0
    for seed in range(RUNS):
        result = runs.batch_speculative(pair, prompts, SpecConfig(**{**config.to_dict(), "seed": seed}), rule=RAGGED)
        drafted += result.metrics.draft_tokens
        for row, ids in enumerate(result.token_ids):
            counts[row][tuple(ids[:2])] = counts[row].get(tuple(ids[:2]), 0) + 1
    assert drafted > RUNS * len(prompts), "the lookups drafted too little: the check proves little"
    return [
        chi_square_rejects(exact_joint(pair, prompt, config), table, RUNS)
        for prompt, table in zip(prompts, counts, strict=True)
    ]


def test_each_row_of_a_point_mass_batch_follows_the_target(far_pair):
    for rejects, statistic, critical in verdicts(far_pair, NGRAM):
        assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


def test_a_residual_that_keeps_the_rejected_token_is_caught(far_pair, monkeypatch):
    """The broken correction: after a rejection, draw from p itself (the rejected token not removed)."""
    monkeypatch.setattr(acceptance, "residual", lambda p, q: p)
    assert any(rejects for rejects, _, _ in verdicts(far_pair, NGRAM))
