"""Speculative sampling is lossless: its output is distributed exactly as the (transformed) target.

The exact joint distribution of the first two generated tokens is enumerated from the target over a
6-token vocabulary and compared with many seeded speculative runs by a chi-square test. The same
test, with the residual resample replaced by a draw from q (a classic mistake), must fail, and so must each
feature's broken variant, on the pair its positive test samples (one layer; the lookahead's on two).
"""

import pytest
import torch
from helpers.lossless import RUNS, chi_square_pair, chi_square_rejects, detected, empirical_joint, exact_joint, outcomes
from helpers.unequal_widths import PROMPT as UNEQUAL_PROMPT
from helpers.unequal_widths import unequal_pair

import specviz.decoding.acceptance as acceptance
import specviz.decoding.engine as engine
import specviz.decoding.tree as tree_walk
import specviz.drafters.model as drafters
from specviz.decoding.config import SpecConfig
from specviz.decoding.sampling import build_warpers, speculative_samples
from specviz.lessons.lossless import lossless_experiment, next_token_distributions


@pytest.fixture(scope="module")
def pair():
    return chi_square_pair()  # vocabulary of 6; a draft far from the target; one layer


@pytest.fixture(scope="module")
def deep_pair():
    """chi_square_pair with two layers: the lookahead's stale-q control is caught on it and not on one layer (its
    chi-square stayed at 19.8 <= 62.6 after 2,000 runs), so the lookahead's positive test runs on it too."""
    return chi_square_pair(layers=2)


ON_TWO_LAYERS = {"model drafter with lookahead"}  # the configurations whose control needs deep_pair


CONFIGS = {
    "temperature 1": SpecConfig(gamma=3, temperature=1.0, max_new_tokens=3),
    "temperature 0.7, top-k 4": SpecConfig(gamma=2, temperature=0.7, top_k=4, max_new_tokens=3),
    "top-p 0.8": SpecConfig(gamma=3, temperature=1.0, top_p=0.8, max_new_tokens=3),
    "n-gram drafter": SpecConfig(gamma=3, temperature=1.0, drafter="ngram", max_new_tokens=3),
    "model drafter with lookahead": SpecConfig(gamma=3, temperature=1.0, lookahead=3, max_new_tokens=3),
    # gamma 1: the alternatives compete for the very first token; gamma 2: for the second
    "3 alternatives, gamma 1": SpecConfig(gamma=1, temperature=1.0, alternatives=3, max_new_tokens=3),
    "2 alternatives, gamma 2, top-k 4": SpecConfig(gamma=2, temperature=0.8, top_k=4, alternatives=2, max_new_tokens=3),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_first_two_tokens_follow_the_target(request, name):
    config = CONFIGS[name]
    pair = request.getfixturevalue("deep_pair" if name in ON_TWO_LAYERS else "pair")
    exact = exact_joint(pair, config)
    counts = empirical_joint(pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"{name}: chi-square {statistic:.1f} > {critical:.1f}"


UNEQUAL = pytest.mark.parametrize("target_rows, draft_rows", [(29, 32), (32, 29)], ids=["wider draft", "wider target"])


@UNEQUAL
def test_unequal_widths_follow_the_target(target_rows, draft_rows):
    """q is over the target's ids: 0 where the draft has no id, renormalised where it has more. Sampling stays exact."""
    pair = unequal_pair(target_rows, draft_rows, noise=0.3)
    config = SpecConfig(gamma=3, temperature=1.0, alternatives=2, lookahead=2, max_new_tokens=3)
    exact = exact_joint(pair, config)
    counts = empirical_joint(pair, config, RUNS)
    rejects, statistic, critical = chi_square_rejects(exact, counts, RUNS)
    assert not rejects, f"chi-square {statistic:.1f} > {critical:.1f}"


@UNEQUAL
def test_lossless_page_with_unequal_widths(target_rows, draft_rows):
    pair = unequal_pair(target_rows, draft_rows, noise=0.3)
    dist = next_token_distributions(pair, UNEQUAL_PROMPT, SpecConfig(temperature=1.0), chat=False)
    assert dist.p.shape == dist.q.shape == (target_rows,)
    assert float(dist.q.sum()) == pytest.approx(1.0, abs=1e-5)
    ids = pair.encode_prompt(UNEQUAL_PROMPT, chat=False)
    with torch.inference_mode():
        own = torch.softmax(pair.draft(torch.tensor([ids])).logits[0, -1], -1)  # the draft's own q, all its ids
    if draft_rows > target_rows:
        assert float(own[target_rows:].sum()) > 0.1  # mass the draft may not propose
        torch.testing.assert_close(dist.q, own[:target_rows] / own[:target_rows].sum())
    else:
        assert (dist.q[draft_rows:] == 0).all()
        torch.testing.assert_close(dist.q[:draft_rows], own)
    result = lossless_experiment(dist, n=100_000, seed=0, alternatives=1)
    assert result.tv_pq > 0.05 and result.tv_spec < 3 * result.tv_direct + 0.005


def test_skipping_the_residual_resample_is_detected(pair, monkeypatch):
    config = CONFIGS["temperature 1"]
    exact = exact_joint(pair, config)
    monkeypatch.setattr(acceptance, "residual", lambda p, q: q)  # on rejection, draw from q again: biased
    rejects, words = detected(exact, outcomes(pair, config))
    assert rejects, f"the biased sampler passed: {words}"


def test_vectorised_sampler_is_lossless_and_the_broken_one_is_not():
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(50, generator=generator) * 2, -1)
    q = torch.softmax(torch.randn(50, generator=generator) * 2, -1)
    n = 200_000

    def total_variation(samples):
        empirical = torch.bincount(samples, minlength=50).double() / n
        return 0.5 * float((empirical - p.double()).abs().sum())

    good = total_variation(speculative_samples(p, q, n, generator))
    broken = total_variation(speculative_samples(p, q, n, generator, resample_residual=False))
    assert good < 0.01  # sampling noise alone: about 0.5 * sum sqrt(p / n) ~ 0.007
    assert broken > 0.05
    for alternatives in (1, 3):  # recursive rejection sampling over further candidates from q
        assert total_variation(speculative_samples(p, q, n, generator, alternatives=alternatives)) < 0.01
        assert total_variation(speculative_samples(p, q, n, generator, False, alternatives)) > 0.05


def test_alternatives_keep_more_candidates_and_the_exact_rate_matches():
    from specviz.decoding.sampling import residual
    from specviz.lessons.lossless import kept_probability

    generator = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(20, generator=generator) * 2, -1)
    q = torch.softmax(torch.randn(20, generator=generator) * 2, -1)
    q[:4] = 0.0  # tokens 0-3: the draft never proposes them,
    q /= q.sum()  # only the final fallback can produce them
    rates = [kept_probability(p, q, k) for k in range(4)]
    assert rates[0] == pytest.approx(float(torch.minimum(p, q).sum()), abs=1e-6)
    assert all(a < b for a, b in zip(rates, rates[1:], strict=False))  # each further candidate can only help
    # Monte Carlo: tokens 0-3 come out exactly when no candidate was kept, as a draw from the final residual.
    n, k = 200_000, 2
    left = residual(residual(residual(p, q), q), q)
    samples = speculative_samples(p, q, n, generator, alternatives=k)
    share = float((samples < 4).double().mean())
    assert share == pytest.approx((1 - rates[k]) * float(left[:4].sum()), abs=0.005)
    assert share == pytest.approx(float(p[:4].sum()), abs=0.005)  # and, as it must, that is p's own mass there


def _rejects_with(pair, config: SpecConfig, monkeypatch, target, name, broken) -> None:
    exact = exact_joint(pair, config)
    monkeypatch.setattr(target, name, broken)
    rejects, words = detected(exact, outcomes(pair, config))
    assert rejects, f"the broken variant passed: {words}"


def test_ngram_keeping_the_rejected_lookup_token_is_detected(pair, monkeypatch):
    """The n-gram's q is a point mass on d, so after a rejection the residual is p without d. The bug: draw from p,
    where d can come back. Only the n-gram path meets this residual in this configuration (no draft model)."""
    _rejects_with(pair, CONFIGS["n-gram drafter"], monkeypatch, acceptance, "residual", lambda p, q: p)


@pytest.mark.parametrize("name", ["3 alternatives, gamma 1", "2 alternatives, gamma 2, top-k 4"])
def test_alternatives_checked_against_p_instead_of_the_residual_are_detected(pair, monkeypatch, name):
    """The alternatives' positives on this pair, with the walk's one bug: a refused candidate leaves p as it was (the
    next one is checked against p, not the residual). tests/decoding/test_alternatives.py catches it on raw p and q."""
    _rejects_with(pair, CONFIGS[name], monkeypatch, tree_walk, "residual", lambda left, q: left)


def test_lookahead_recording_a_stale_q_row_is_detected(deep_pair, monkeypatch):
    """With lookahead a token after a right guess is drawn from the next row of the same forward. The bug: record
    the row before it as its q (the row the guess was conditioned on), so verification divides by the wrong q."""
    propose = drafters.ModelDrafter.propose
    used = []

    def stale_row(draft):
        if not any(draft.from_lookahead):
            return draft
        used.append(True)
        q = draft.q.clone()
        for i, guessed in enumerate(draft.from_lookahead):
            if guessed:
                q[i] = q[i - 1]
        return drafters.Draft(draft.ids, q, draft.forwards, draft.from_lookahead)

    def stale(self, *args, **kwargs):  # the model drafter drafts for every row of the run at once
        return [stale_row(draft) for draft in propose(self, *args, **kwargs)]

    config = CONFIGS["model drafter with lookahead"]
    _rejects_with(deep_pair, config, monkeypatch, drafters.ModelDrafter, "propose", stale)
    assert used, "no token ever came from a lookahead row: the control proves nothing"


@pytest.mark.parametrize(
    "name, dropped",
    [("temperature 0.7, top-k 4", {"temperature": 1.0}), ("temperature 0.7, top-k 4", {"top_k": 0})]
    + [("top-p 0.8", {"top_p": 1.0})],
    ids=["temperature", "top-k", "top-p"],
)
def test_engine_ignoring_a_sampling_setting_is_detected(pair, monkeypatch, name, dropped):
    """The engine transforms p and q with a setting left out: the same chi-square, with the expected joint under the
    full transform, must reject. (tests/decoding/test_sampling.py checks the transform itself against a computation by
    hand.)"""
    config = CONFIGS[name]
    partial = build_warpers(SpecConfig(**{**config.to_dict(), **dropped}))
    _rejects_with(pair, config, monkeypatch, engine, "build_warpers", lambda _config: partial)
