"""The sampling settings against an independent computation.

The chi-square in test_lossless builds expected and observed with the same warpers, so a wrong warper would pass
there. Here the expected distribution is computed by hand with plain torch ops from the logits: divide by the
temperature, keep the k largest, then keep the smallest prefix (by descending probability) whose mass reaches top_p.
"""

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specviz.decoding.config import SpecConfig
from specviz.decoding.sampling import build_warpers, probabilities, residual, sample, speculative_samples


def by_hand(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """softmax after temperature, then top-k, then top-p (generate()'s order), one row at a time."""
    out = []
    for row in logits.float():
        z = row / temperature
        if top_k > 0:
            kth = torch.sort(z, descending=True).values[min(top_k, z.numel()) - 1]
            z = torch.where(z >= kth, z, torch.tensor(float("-inf")))
        probs = torch.softmax(z, -1)
        if top_p < 1.0:
            order = torch.argsort(probs, descending=True)
            before = torch.cumsum(probs[order], 0) - probs[order]  # mass of the tokens ranked above each one
            keep = torch.zeros_like(probs, dtype=torch.bool)
            keep[order] = before < top_p  # a token stays while the mass above it is still short of top_p
            probs = torch.where(keep, probs, torch.zeros_like(probs))
            probs = probs / probs.sum()
        out.append(probs)
    return torch.stack(out)


LOGITS = torch.randn(4, 40, generator=torch.Generator().manual_seed(0)) * 2.0

SETTINGS = [
    (1.0, 0, 1.0),
    (0.7, 0, 1.0),
    (1.6, 0, 1.0),
    (1.0, 5, 1.0),
    (1.0, 1, 1.0),  # top-k 1 is a setting of its own, not "off"
    (1.0, 0, 0.8),
    (0.7, 6, 1.0),
    (0.5, 0, 0.9),
    (2.0, 10, 0.6),
    (0.8, 3, 0.95),
]


@pytest.mark.parametrize("temperature, top_k, top_p", SETTINGS)
def test_probabilities_match_a_computation_by_hand(temperature, top_k, top_p):
    config = SpecConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    got = probabilities(LOGITS, build_warpers(config))
    expected = by_hand(LOGITS, temperature, top_k, top_p)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
    if top_k > 0:
        assert int((got[0] > 0).sum()) <= top_k
    if top_p < 1.0:
        assert bool(((got > 0).sum(-1) < LOGITS.shape[-1]).all())  # top-p removed something in every row


def test_greedy_is_the_plain_softmax_and_argmax():
    config = SpecConfig(temperature=0.0)
    got = probabilities(LOGITS, build_warpers(config))
    torch.testing.assert_close(got, torch.softmax(LOGITS, -1))
    assert sample(got, None, greedy=True).tolist() == LOGITS.argmax(-1).tolist()


def test_a_wrong_warper_order_is_detected():
    """top-p before temperature keeps a different set: the comparison with the hand computation must see it.
    (Temperature and top-k commute, a monotone rescaling keeps the same k, so their order cannot be wrong.)"""
    temperature, top_p = 0.5, 0.9
    wrong = LogitsProcessorList([TopPLogitsWarper(top_p=top_p), TemperatureLogitsWarper(temperature)])
    assert not torch.allclose(probabilities(LOGITS, wrong), by_hand(LOGITS, temperature, 0, top_p), atol=1e-3)
    right = LogitsProcessorList([TemperatureLogitsWarper(temperature), TopPLogitsWarper(top_p=top_p)])
    torch.testing.assert_close(probabilities(LOGITS, right), by_hand(LOGITS, temperature, 0, top_p))
    # top-p before top-k measures the nucleus on the full distribution, not on the k kept tokens.
    p_then_k = LogitsProcessorList([TopPLogitsWarper(top_p=0.6), TopKLogitsWarper(top_k=3)])
    assert not torch.allclose(probabilities(LOGITS, p_then_k), by_hand(LOGITS, 1.0, 3, 0.6), atol=1e-3)


def test_a_wrong_setting_is_detected():
    """Each setting matters: dropping or misreading one moves the distribution away from the hand computation."""
    expected = by_hand(LOGITS, 0.7, 6, 0.9)
    for temperature, top_k, top_p in [(1.0, 6, 0.9), (0.7, 0, 0.9), (0.7, 6, 1.0), (0.7, 7, 0.9), (1 / 0.7, 6, 0.9)]:
        got = probabilities(LOGITS, build_warpers(SpecConfig(temperature=temperature, top_k=top_k, top_p=top_p)))
        assert not torch.allclose(got, expected, atol=1e-3), (temperature, top_k, top_p)


def test_sampling_draws_follow_the_hand_computation():
    probs = by_hand(LOGITS[:1], 0.8, 3, 0.95)
    generator = torch.Generator().manual_seed(0)
    n = 20_000
    draws = sample(probs.expand(n, -1), generator, greedy=False)
    empirical = torch.bincount(draws, minlength=probs.shape[-1]).float() / n
    assert set(draws.tolist()) <= set(torch.nonzero(probs[0]).flatten().tolist())
    assert 0.5 * float((empirical - probs[0]).abs().sum()) < 0.02


def test_residual_by_hand():
    """norm(max(0, p - q)) along the last axis, each row on its own; p itself where p == q (nothing is left over,
    and a rejection there has probability zero, but a draw from it must still be possible)."""
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.1, 0.1, 0.4, 0.4])
    torch.testing.assert_close(residual(p, q), torch.tensor([2 / 3, 1 / 3, 0.0, 0.0]))
    torch.testing.assert_close(residual(p, p), p)
    rows = residual(torch.stack([p, q, p]), torch.stack([q, p, p]))
    torch.testing.assert_close(rows, torch.stack([residual(p, q), residual(q, p), p]))


P = torch.tensor([0.45, 0.25, 0.15, 0.1, 0.05])
Q = torch.tensor([0.1, 0.1, 0.3, 0.3, 0.2])


def test_speculative_samples_by_default_is_one_plain_step():
    """Without alternatives: d ~ q, keep d if u < min(1, p(d)/q(d)), else draw from the residual, with the same
    generator draws in the same order (what the Lossless page explains)."""
    n = 400
    got = speculative_samples(P, Q, n, torch.Generator().manual_seed(4))
    generator = torch.Generator().manual_seed(4)
    d = torch.multinomial(Q, n, replacement=True, generator=generator)
    u = torch.rand(n, generator=generator)
    left = torch.tensor([0.35, 0.15, 0.0, 0.0, 0.0]) / 0.5  # max(0, P - Q), normalised
    corrections = torch.multinomial(left, n, replacement=True, generator=generator)
    expected = torch.where(u < torch.clamp(P[d] / Q[d], max=1.0), d, corrections)
    assert torch.equal(got, expected)


def test_speculative_samples_with_an_exact_draft_follow_p():
    """q == p: every draft is kept, and the residual (nothing left over) must not break the draw."""
    got = speculative_samples(P, P.clone(), 20_000, torch.Generator().manual_seed(5), alternatives=2)
    empirical = torch.bincount(got, minlength=5).float() / got.numel()
    assert 0.5 * float((empirical - P).abs().sum()) < 0.02


def test_a_zero_draw_never_accepts_a_token_the_target_rules_out(monkeypatch):
    """u is uniform on [0, 1), and torch.rand can return exactly 0.0: a drafted token or an alternative with p = 0
    (ratio 0, e.g. outside top-k) must be refused even then, or the output would not follow p."""
    from specviz.decoding.proposal import Draft, TreeNode
    from specviz.decoding.tree import verify_tree

    monkeypatch.setattr(torch, "rand", lambda n, generator=None, device=None: torch.zeros(n, device=device))
    p = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]])
    q = torch.full((1, 4), 0.25)
    decision = verify_tree(p, Draft([2], q, 1, tree=(TreeNode(3, -1),)), None, greedy=False)  # 3: an alternative
    assert decision.kept == [] and decision.rejection_index == 0 and decision.tree_path == () and decision.corrected
    assert decision.u == [0.0] and decision.ratios == [0.0] and decision.next_token in (0, 1)

    samples = speculative_samples(p[0], q[0], 1000, alternatives=1)
    assert set(samples.tolist()) <= {0, 1}  # every draw is 0.0, yet no token of p = 0 comes out
