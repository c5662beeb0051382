"""Batched speculative decoding (specviz/decoding/batch.py): every row exactly as that prompt run alone.

Greedy: each row's tokens equal the single-prompt baseline's at every batch size, under both commit rules, with
ragged acceptance (rows accept different numbers of drafts), prompts of different lengths (left padding, explicit
positions) and an end of sequence in one row; the ragged round keeps each row's own round length whatever B.
Sampling: at B = 4 the first two tokens of each row follow the target's exact joint distribution (chi-square per
row), under the ragged rule and the min-cut one; a ragged batch whose mask shows the holes (rejected drafts) and a cut
that throws an accepted draft away for a fresh draw from p are both caught.
"""

import pytest
import torch
from helpers.lossless import chi_square_pair, chi_square_rejects
from helpers.unequal_widths import unequal_pair

import specviz.decoding.batch as batch
import specviz.decoding.engine as engine
from specviz.decoding.acceptance import Decision
from specviz.decoding.batch import MIN_CUT, RAGGED, RowCheck, batch_plain
from specviz.decoding.batchcache import BatchCache, left_padded
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import EngineError, autoregressive_generate, run_to_end, speculative_generate
from specviz.decoding.metrics import SpecMetrics
from specviz.decoding.sampling import build_warpers, probabilities
from specviz.drafters import factory
from specviz.models.tiny import tiny_pair
from specviz.runs import batch_speculative

RAGGED_PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16], [20], [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41]]
MORE_PROMPTS = [[40 + i, 3 * i % 50 + 1, 7] for i in range(12)]  # with RAGGED_PROMPTS: 16 prompts


@pytest.fixture(scope="module")
def close_pair():
    return tiny_pair(seed=0, noise=0.02)  # a draft close to the target: long, ragged accepted prefixes


def alone(pair, prompt, config):
    return list(run_to_end(autoregressive_generate(pair, prompt, config))[1].token_ids)


def test_left_padding_puts_each_prompt_at_the_right_end():
    ids, pads = left_padded([[1, 2], [3, 4, 5, 6], [7]])
    assert ids.tolist() == [[0, 0, 1, 2], [3, 4, 5, 6], [0, 0, 0, 7]]
    assert pads.tolist() == [2, 0, 3]


@pytest.mark.parametrize("rule", [RAGGED, MIN_CUT])
@pytest.mark.parametrize("gamma", [1, 4, 7])
def test_greedy_rows_equal_each_prompt_alone(close_pair, gamma, rule):
    config = SpecConfig(gamma=gamma, max_new_tokens=24)
    expected = [alone(close_pair, prompt, config) for prompt in RAGGED_PROMPTS]
    spec = batch_speculative(close_pair, RAGGED_PROMPTS, config, rule=rule)
    plain = batch_plain(close_pair, RAGGED_PROMPTS, config)
    assert spec.token_ids == expected
    assert plain.token_ids == expected
    if gamma > 1:  # rows accepted different counts: some (row, round)s kept more than one token, some only one
        assert max(spec.row_rounds) > 1 and min(spec.row_rounds) == 1
    assert spec.rounds < plain.rounds or gamma == 1


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16])
def test_greedy_rows_are_each_prompt_alone_at_every_batch_size(close_pair, size):
    prompts = (RAGGED_PROMPTS + MORE_PROMPTS)[:size]
    config = SpecConfig(gamma=4, max_new_tokens=20)
    assert batch_speculative(close_pair, prompts, config).token_ids == [alone(close_pair, p, config) for p in prompts]


def test_the_ragged_round_keeps_each_rows_own_round_length(close_pair):
    """Ragged: a row commits in a batch of 16 exactly what it commits alone, round by round, so tokens per row per
    round do not shrink with B. Min-cut: the batch waits for its slowest row, and its rounds shrink."""
    prompts = RAGGED_PROMPTS + MORE_PROMPTS
    config = SpecConfig(gamma=4, max_new_tokens=20)
    alone_rounds = [n for p in prompts for n in batch_speculative(close_pair, [p], config).row_rounds]
    ragged = batch_speculative(close_pair, prompts, config)
    cut = batch_speculative(close_pair, prompts, config, rule=MIN_CUT)
    assert sorted(ragged.row_rounds) == sorted(alone_rounds)
    assert ragged.tokens_per_round == pytest.approx(sum(alone_rounds) / len(alone_rounds))
    assert cut.tokens_per_round < 0.75 * ragged.tokens_per_round
    assert ragged.expected_acceptance == pytest.approx(ragged.accepted / (ragged.accepted + ragged.rejected))
    assert ragged.metrics.accepted_tokens == ragged.accepted and ragged.metrics.rounds == len(ragged.row_rounds)


def test_a_batch_of_one_is_the_single_run(close_pair):
    """The batched path at B = 1 is the engine's own run: the same tokens in the same number of rounds."""
    config = SpecConfig(gamma=5, max_new_tokens=30, alternatives=0, lookahead=0, schedule="constant")
    for prompt in RAGGED_PROMPTS:
        events, summary = run_to_end(speculative_generate(close_pair, prompt, config, factory("model")))
        result = batch_speculative(close_pair, [prompt], config)
        assert result.token_ids == [alone(close_pair, prompt, config)] == [list(summary.token_ids)]
        assert result.rounds == summary.rounds
        assert result.metrics == SpecMetrics.from_events(events)  # the acceptance rate and the rest, as the engine's


def test_an_end_of_sequence_in_one_row_leaves_the_others_exact(close_pair):
    config = SpecConfig(gamma=4, max_new_tokens=24)
    free = [alone(close_pair, prompt, config) for prompt in RAGGED_PROMPTS]
    # a token that row 1 produces early and some other row never produces
    eos = next(t for t in free[1][2:12] if any(t not in row for row in free))
    close_pair.target.generation_config.eos_token_id = eos
    try:
        expected = [alone(close_pair, prompt, config) for prompt in RAGGED_PROMPTS]
        spec = batch_speculative(close_pair, RAGGED_PROMPTS, config)
        plain = batch_plain(close_pair, RAGGED_PROMPTS, config)
        unstopped = batch_speculative(close_pair, RAGGED_PROMPTS, config, stop_at_eos=False)
    finally:
        close_pair.target.generation_config.eos_token_id = None
    assert expected[1][-1] == eos and len(expected[1]) < 24
    assert any(len(row) == 24 for row in expected)  # a row that ran on after another one stopped
    assert spec.token_ids == expected
    assert plain.token_ids == expected
    assert unstopped.token_ids == free  # ignoring the end of sequence: every row to the budget


def test_an_empty_prompt_is_refused(close_pair):
    with pytest.raises(EngineError, match="at least one token"):
        batch_speculative(close_pair, [[1, 2], []], SpecConfig())


# ---------------------------------------------------------------- sampling: lossless per row

LOSSLESS_PROMPTS = ([1, 2, 3, 1, 2, 3, 1, 2], [4, 2, 5], [3], [5, 1, 4, 4, 2])  # B = 4, each row its own prompt
RUNS = 600  # batches: samples per row (the holes-shown control: 109 against 47 in row 1 at 500)
SAMPLING = SpecConfig(gamma=3, temperature=1.0, max_new_tokens=3)


@pytest.fixture(scope="module")
def far_pair():
    return chi_square_pair()  # vocabulary of 6; a draft far from the target


@torch.inference_mode()
def exact_joint(pair, prompt: list[int], config: SpecConfig) -> dict[tuple[int, int], float]:
    """P(t1, t2 | prompt) = p(t1 | prompt) p(t2 | prompt, t1) under the same transform, every t1 in one forward."""
    warpers = build_warpers(config)
    first = probabilities(pair.target(torch.tensor([prompt])).logits[0, -1:], warpers)[0]
    both = torch.tensor([prompt + [t1] for t1 in range(first.shape[0])])
    second = probabilities(pair.target(both).logits[:, -1], warpers)  # [V, V]: row t1 is p(t2 | prompt, t1)
    joint = first[:, None] * second
    return {(t1, t2): float(joint[t1, t2]) for t1, t2 in (joint > 0).nonzero().tolist()}


def batched_counts(pair, config: SpecConfig, rule: str) -> list[dict[tuple[int, int], int]]:
    prompts = [list(p) for p in LOSSLESS_PROMPTS]
    counts: list[dict] = [{} for _ in prompts]
    for seed in range(RUNS):
        result = batch_speculative(pair, prompts, SpecConfig(**{**config.to_dict(), "seed": seed}), rule=rule)
        for row, ids in enumerate(result.token_ids):
            key = tuple(ids[:2])
            counts[row][key] = counts[row].get(key, 0) + 1
    return counts


def verdicts(pair, config: SpecConfig, rule: str) -> list[tuple[bool, float, float]]:
    """Per row: (the chi-square test rejects, its statistic, its critical value at alpha = 0.001)."""
    counts = batched_counts(pair, config, rule)
    return [
        chi_square_rejects(exact_joint(pair, list(prompt), config), table, RUNS)
        for prompt, table in zip(LOSSLESS_PROMPTS, counts, strict=True)
    ]


@pytest.mark.parametrize("rule", [RAGGED, MIN_CUT])
def test_each_row_follows_the_target(far_pair, rule):
    for rejects, statistic, critical in verdicts(far_pair, SAMPLING, rule):
        assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


def holes_shown(original):
    """The broken ragged batch: its mask hides only each row's left padding, so a row's later tokens see the drafts
    it rejected (and the holes of shorter rows in a forward)."""

    def inputs(self, ids, new):
        out = original(self, ids, new)
        out["attention_mask"] = (out["attention_mask"].cumsum(dim=1) > 0).long()
        return out

    return inputs


def test_a_ragged_batch_that_shows_its_holes_is_detected(far_pair, monkeypatch):
    monkeypatch.setattr(BatchCache, "_inputs", holes_shown(BatchCache._inputs))
    results = verdicts(far_pair, SAMPLING, RAGGED)
    assert any(rejects for rejects, _, _ in results), f"the broken batch passed: {results}"


def fresh_draw_at_the_cut(checks):
    """The broken cut: a row that accepted its draft at position m + 1 throws it away and draws a fresh token from
    p_m+1, while the row that stopped there draws from its residual. The mix P(accept) p + P(reject) residual is
    not p."""
    m = min(check.decision.n_accepted for check in checks)
    out = []
    for check in checks:
        decision = check.decision
        if decision.n_accepted == m:
            out.append(decision.kept + [decision.next_token])
        else:
            out.append(check.draft_ids[:m] + [int(torch.multinomial(check.p[m], 1))])
    return out


def test_a_fresh_draw_at_the_cut_is_detected(far_pair, monkeypatch):
    torch.manual_seed(0)
    monkeypatch.setattr(engine, "cut_outcomes", fresh_draw_at_the_cut)
    results = verdicts(far_pair, SAMPLING, MIN_CUT)
    assert any(rejects for rejects, _, _ in results), f"the broken cut passed: {results}"


def test_the_broken_cut_differs_only_where_a_draft_was_kept():
    """Sanity of the negative control itself: with every row stopping at the same place it is the exact rule."""
    p = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    decision = Decision(
        kept=[], rejection_index=0, next_token=1, next_prob=0.5, next_row=0, u=[0.9], ratios=[0.5], residual_row=p[0]
    )
    checks = [RowCheck([0], p, decision), RowCheck([0], p, decision)]
    assert fresh_draw_at_the_cut(checks) == batch.cut_outcomes(checks) == [[1], [1]]


@pytest.mark.parametrize("target_rows, draft_rows", [(29, 32), (32, 29)], ids=["wider draft", "wider target"])
def test_unequal_widths_rows_equal_each_prompt_alone(target_rows, draft_rows):
    """A draft narrower than the target reads the target-only ids as token 0; a wider one's extra ids are cut."""
    pair = unequal_pair(target_rows, draft_rows, noise=0.05)
    prompts = [[3, 4, 5, 6], [7, 8], [1, 2, 3, 4, 5, 6, 7, target_rows - 1]]  # the last: target-only when wider
    config = SpecConfig(gamma=3, max_new_tokens=16)
    assert batch_speculative(pair, prompts, config).token_ids == [alone(pair, p, config) for p in prompts]
