"""Batched speculative decoding (specviz/decoding/batch.py): every row exactly as that prompt run alone.

Greedy: each row's tokens equal the single-prompt baseline's, with ragged acceptance (rows accept different
numbers of drafts, so the round cut matters), prompts of different lengths (left padding, explicit positions) and an
end of sequence in one row. Sampling: the first two tokens of each row follow the target's exact joint distribution
(chi-square), and a cut that throws an accepted draft away for a fresh draw from p is caught.
"""

import pytest
import torch
from helpers.lossless import chi_square_rejects
from unequal_widths import unequal_pair

import specviz.decoding.batch as batch
from specviz.decoding.batch import RowCheck, batch_plain, batch_speculative, left_padded
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import EngineError, autoregressive_generate, run_to_end
from specviz.decoding.sampling import build_warpers, probabilities
from specviz.models.tiny import tiny_pair

RAGGED = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16], [20], [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42]]


@pytest.fixture(scope="module")
def close_pair():
    return tiny_pair(seed=0, noise=0.02)  # a draft close to the target: long, ragged accepted prefixes


def alone(pair, prompt, config):
    return list(run_to_end(autoregressive_generate(pair, prompt, config))[1].token_ids)


def test_left_padding_puts_each_prompt_at_the_right_end():
    ids, pads = left_padded([[1, 2], [3, 4, 5, 6], [7]])
    assert ids.tolist() == [[0, 0, 1, 2], [3, 4, 5, 6], [0, 0, 0, 7]]
    assert pads.tolist() == [2, 0, 3]


@pytest.mark.parametrize("gamma", [1, 4, 7])
def test_greedy_rows_equal_each_prompt_alone(close_pair, gamma):
    config = SpecConfig(gamma=gamma, max_new_tokens=24)
    expected = [alone(close_pair, prompt, config) for prompt in RAGGED]
    spec = batch_speculative(close_pair, RAGGED, config)
    plain = batch_plain(close_pair, RAGGED, config)
    assert spec.token_ids == expected
    assert plain.token_ids == expected
    if gamma > 1:  # the cut was exercised: some rounds kept more than one token, some only one
        assert max(spec.round_lengths) > 1 and min(spec.round_lengths) == 1
    assert spec.rounds < plain.rounds or gamma == 1


def test_batch_of_one_is_the_single_run(close_pair):
    config = SpecConfig(gamma=5, max_new_tokens=30)
    for prompt in RAGGED:
        assert batch_speculative(close_pair, [prompt], config).token_ids == [alone(close_pair, prompt, config)]


def test_an_end_of_sequence_in_one_row_leaves_the_others_exact(close_pair):
    config = SpecConfig(gamma=4, max_new_tokens=24)
    free = [alone(close_pair, prompt, config) for prompt in RAGGED]
    # a token that row 1 produces early and some other row never produces
    eos = next(t for t in free[1][2:12] if any(t not in row for row in free))
    close_pair.target.generation_config.eos_token_id = eos
    try:
        expected = [alone(close_pair, prompt, config) for prompt in RAGGED]
        spec = batch_speculative(close_pair, RAGGED, config)
        plain = batch_plain(close_pair, RAGGED, config)
        unstopped = batch_speculative(close_pair, RAGGED, config, stop_at_eos=False)
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

LOSSLESS_PROMPTS = ([1, 2, 3, 1, 2, 3, 1, 2], [4, 2, 5])  # different lengths, so left padding is in play
COPIES = 3  # rows per prompt in one batch (rows are independent draws)
RUNS = 700  # batches; COPIES * RUNS = 2100 samples per prompt
SAMPLING = SpecConfig(gamma=3, temperature=1.0, max_new_tokens=3)


@pytest.fixture(scope="module")
def far_pair():
    return tiny_pair("abcde", seed=1, noise=0.6)  # vocabulary of 6; a draft far from the target


@torch.inference_mode()
def exact_joint(pair, prompt: list[int], config: SpecConfig) -> dict[tuple[int, int], float]:
    """P(t1, t2 | prompt) = p(t1 | prompt) p(t2 | prompt, t1) under the same transform."""
    warpers = build_warpers(config)
    first = probabilities(pair.target(torch.tensor([prompt])).logits[0, -1:], warpers)[0]
    joint = {}
    for t1 in range(first.shape[0]):
        second = probabilities(pair.target(torch.tensor([prompt + [t1]])).logits[0, -1:], warpers)[0]
        for t2 in range(second.shape[0]):
            if first[t1] * second[t2] > 0:
                joint[(t1, t2)] = float(first[t1] * second[t2])
    return joint


def batched_counts(pair, config: SpecConfig) -> list[dict[tuple[int, int], int]]:
    prompts = [list(p) for p in LOSSLESS_PROMPTS for _ in range(COPIES)]
    counts: list[dict] = [{} for _ in LOSSLESS_PROMPTS]
    for seed in range(RUNS):
        result = batch_speculative(pair, prompts, SpecConfig(**{**config.to_dict(), "seed": seed}))
        for row, ids in enumerate(result.token_ids):
            key = tuple(ids[:2])
            table = counts[row // COPIES]
            table[key] = table.get(key, 0) + 1
    return counts


def verdicts(pair, config: SpecConfig) -> list[tuple[bool, float, float]]:
    counts = batched_counts(pair, config)
    return [
        chi_square_rejects(exact_joint(pair, list(prompt), config), table, COPIES * RUNS)
        for prompt, table in zip(LOSSLESS_PROMPTS, counts, strict=True)
    ]


def test_each_row_follows_the_target(far_pair):
    for rejects, statistic, critical in verdicts(far_pair, SAMPLING):
        assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


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
    monkeypatch.setattr(batch, "cut_round", fresh_draw_at_the_cut)
    results = verdicts(far_pair, SAMPLING)
    assert any(rejects for rejects, _, _ in results), f"the broken cut passed: {results}"


def test_the_broken_cut_differs_only_where_a_draft_was_kept():
    """Sanity of the negative control itself: with every row stopping at the same place it is the exact rule."""
    p = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    decision = batch.Decision(
        kept=[], rejection_index=0, next_token=1, next_prob=0.5, next_row=0, u=[0.9], ratios=[0.5], residual_row=p[0]
    )
    checks = [RowCheck([0], p, decision), RowCheck([0], p, decision)]
    assert fresh_draw_at_the_cut(checks) == batch.cut_round(checks) == [[1], [1]]


@pytest.mark.parametrize("target_rows, draft_rows", [(29, 32), (32, 29)], ids=["wider draft", "wider target"])
def test_unequal_widths_rows_equal_each_prompt_alone(target_rows, draft_rows):
    """A draft narrower than the target reads the target-only ids as token 0; a wider one's extra ids are cut."""
    pair = unequal_pair(target_rows, draft_rows, noise=0.05)
    prompts = [[3, 4, 5, 6], [7, 8], [1, 2, 3, 4, 5, 6, 7, target_rows - 1]]  # the last: target-only when wider
    config = SpecConfig(gamma=3, max_new_tokens=16)
    assert batch_speculative(pair, prompts, config).token_ids == [alone(pair, p, config) for p in prompts]
