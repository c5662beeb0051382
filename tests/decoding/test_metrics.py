"""The metrics module's definitions (vLLM's), each checked on a hand-built set of rounds with empty drafts in it."""

from __future__ import annotations

import json

import pytest

from specviz.decoding.metrics import SpecMetrics

# (accepted, drafted) per round: two rounds with an empty draft, drafts of 3, 3, 2 and 1 tokens
ROUNDS = [(2, 3), (0, 0), (3, 3), (0, 2), (1, 1), (0, 0)]


def test_counters_of_hand_built_rounds():
    m = SpecMetrics.from_rounds(ROUNDS)
    assert (m.rounds, m.drafts, m.draft_tokens, m.accepted_tokens) == (6, 4, 9, 6)
    assert m.accepted_per_position == (3, 2, 1)  # position 0 kept by (2,3), (3,3), (1,1)
    assert m.reached_per_position == (4, 2, 2)  # position 1: (2,3), (3,3); (0,2) stopped at 0
    assert not m.reached_estimated


def test_each_definition_on_hand_built_rounds():
    m = SpecMetrics.from_rounds(ROUNDS)
    assert m.acceptance_rate == pytest.approx(6 / 9)
    assert m.mean_acceptance_length == pytest.approx(1 + 6 / 4)  # over drafts: 1 + 6 / 6 over all rounds is wrong
    assert m.accepted_per_round == pytest.approx(6 / 6)
    assert m.per_position_acceptance_rate == pytest.approx((3 / 4, 2 / 4, 1 / 4))
    assert m.conditional_acceptance_rate == pytest.approx((3 / 4, 2 / 2, 1 / 2))
    assert m.accepted_length_histogram == (1, 1, 1, 1)  # kept 0, 1, 2 and 3 tokens once each


def test_empty_drafts_count_in_rounds_only():
    with_empty = SpecMetrics.from_rounds(ROUNDS)
    without = SpecMetrics.from_rounds([r for r in ROUNDS if r[1]])
    assert with_empty.rounds == without.rounds + 2
    assert with_empty == SpecMetrics(**{**without.__dict__, "rounds": with_empty.rounds})
    nothing = SpecMetrics.from_rounds([(0, 0), (0, 0)])
    assert (nothing.rounds, nothing.drafts) == (2, 0)
    assert nothing.acceptance_rate is None and nothing.mean_acceptance_length is None
    assert nothing.per_position_acceptance_rate == () and nothing.accepted_length_histogram == ()


def test_sums_add_up_like_one_run():
    assert SpecMetrics.from_rounds(ROUNDS[:3]) + SpecMetrics.from_rounds(ROUNDS[3:]) == SpecMetrics.from_rounds(ROUNDS)
    assert SpecMetrics() + SpecMetrics.from_rounds(ROUNDS) == SpecMetrics.from_rounds(ROUNDS)


def test_from_counters_is_exact_for_fixed_length_drafts_only():
    fixed = [(2, 3), (0, 3), (3, 3), (1, 3), (0, 0)]
    counted = SpecMetrics.from_rounds(fixed)
    published = SpecMetrics.from_counters(4, 12, 6, counted.accepted_per_position)
    assert not published.reached_estimated
    assert published.conditional_acceptance_rate == pytest.approx(counted.conditional_acceptance_rate)
    assert published.accepted_length_histogram == counted.accepted_length_histogram
    # negative control: drafts of unequal length; the estimate counts (0,2) and (1,1) as reaching position 2
    mixed = SpecMetrics.from_counters(4, 9, 6, (3, 2, 1))
    assert mixed.reached_estimated
    assert mixed.conditional_acceptance_rate == pytest.approx((3 / 4, 2 / 3, 1 / 2))
    counted_mixed = SpecMetrics.from_rounds(ROUNDS).conditional_acceptance_rate
    assert mixed.conditional_acceptance_rate != pytest.approx(counted_mixed)


@pytest.mark.parametrize("bad", [(2, 1), (-1, 2)])
def test_a_round_that_keeps_more_than_it_drafted_is_refused(bad):
    with pytest.raises(ValueError, match="kept"):
        SpecMetrics.from_rounds([bad])


def test_json_round_trip():
    m = SpecMetrics.from_rounds(ROUNDS)
    assert SpecMetrics.from_json(json.loads(json.dumps(m.as_json()))) == m
