"""Sampling with the traffic drafter and the controller is lossless: the first two tokens of many seeded runs follow
the target's exact joint distribution (chi-square, as in test_lossless.py), with a store whose match proposes the
first two tokens. The controller is made to choose "both" (traffic tokens with point-mass rows, then the model's),
and a broken variant (uniform rows in place of the point masses) must be caught."""

from collections.abc import Iterator
from dataclasses import replace

import pytest
from helpers.lossless import PROMPT, RUNS, chi_square_pair, chi_square_rejects, detected, exact_joint, first_two_tokens

import specviz.drafters.traffic as traffic
from specviz.decoding.config import SpecConfig
from specviz.drafters.suffix import TrafficStore
from specviz.runs import speculative_generate

STORED = PROMPT + [4, 0]  # the whole prompt matches: the store proposes 4, 0 (fewer than gamma: room for the model)


@pytest.fixture(scope="module")
def pair():
    return chi_square_pair()  # vocabulary of 6; a draft far from the target


def store() -> TrafficStore:
    s = TrafficStore()
    s.add(STORED)
    return s


def draws(pair, config: SpecConfig, sources: dict[str, int]) -> Iterator[tuple[int, ...]]:
    """The first two tokens of the runs seeded 0, 1, ..., RUNS - 1, one at a time; `sources` counts which source
    drafted each run's round 0."""
    for seed in range(RUNS):
        key, rounds = first_two_tokens(speculative_generate(pair, PROMPT, replace(config, seed=seed), traffic=store()))
        sources[rounds[0].draft_source] = sources.get(rounds[0].draft_source, 0) + 1
        yield key


def joint(pair, config: SpecConfig) -> tuple[dict, dict[str, int]]:
    """Counts of the first two tokens over RUNS seeds, and how often each source drafted round 0."""
    counts: dict[tuple[int, ...], int] = {}
    sources: dict[str, int] = {}
    for key in draws(pair, config, sources):
        counts[key] = counts.get(key, 0) + 1
    return counts, sources


CONFIGS = {
    "traffic": SpecConfig(gamma=3, temperature=1.0, drafter="traffic", max_new_tokens=3),
    "controller, both": SpecConfig(gamma=3, temperature=1.0, drafter="controller", max_new_tokens=4),
    "controller, both, top-k 4": SpecConfig(gamma=3, temperature=0.8, top_k=4, drafter="controller", max_new_tokens=4),
}


def always_both(monkeypatch) -> None:
    """The controller builds on every traffic proposal (its cost rule would choose "both" only where it pays)."""
    monkeypatch.setattr(
        traffic,
        "choose_source",
        lambda p, room, ends, rate, memory, costs, first_rate=None: "both" if p.ids else "model",
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_first_two_tokens_follow_the_target(pair, name, monkeypatch):
    always_both(monkeypatch)
    config = CONFIGS[name]
    counts, sources = joint(pair, config)
    assert sources.get("traffic" if config.drafter == "traffic" else "both") == RUNS  # the path under test ran
    rejects, statistic, critical = chi_square_rejects(exact_joint(pair, config), counts, RUNS)
    assert not rejects, f"{name}: chi-square {statistic:.1f} > {critical:.1f}"


def test_traffic_tokens_recorded_with_a_wrong_q_are_detected(pair, monkeypatch):
    """The bug: the controller gives the traffic tokens of a "both" draft a spread-out q (uniform rows) instead of a
    point mass, so min(1, p/q) accepts them too often."""
    always_both(monkeypatch)
    monkeypatch.setattr(
        traffic, "point_mass_rows", lambda ids, like: like.new_full((len(ids), like.shape[-1]), 1 / like.shape[-1])
    )
    config = CONFIGS["controller, both"]
    sources: dict[str, int] = {}
    rejects, words = detected(exact_joint(pair, config), draws(pair, config, sources))
    assert rejects and sources.get("both"), f"the broken variant passed: {words}"
