"""The sampling settings against an independent computation.

The chi-square in test_lossless builds expected and observed with the same warpers, so a wrong warper would pass
there. Here the expected distribution is computed by hand with plain torch ops from the logits: divide by the
temperature, keep the k largest, then keep the smallest prefix (by descending probability) whose mass reaches top_p.
"""

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specviz.config import SpecConfig
from specviz.sampling import build_warpers, probabilities, sample


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
