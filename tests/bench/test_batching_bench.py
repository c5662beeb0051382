"""The batching benchmark's arithmetic (specviz/bench/batching.py): T(n) between measured points, the predicted
speed-up, the batch sizes and draft lengths a user may ask for, the same rows at every B, the best gamma and the
break-even; on the tiny pair, each B against its rows decoded alone, B = 1's repeats through both paths, and the
prediction from the batch's own timings."""

import json

import pytest

from specviz.bench.batching import (
    batch_prompts,
    batches_of,
    best_gamma,
    break_even,
    parse_batches,
    parse_gammas,
    run_batching,
)
from specviz.bench.batching_prediction import interpolate, median, predicted_speedup, shape_cost, shaped_speedup
from specviz.bench.batching_timing import median_costs
from specviz.decoding.batch import batch_plain
from specviz.decoding.config import ConfigError, SpecConfig
from specviz.models.tiny import tiny_pair
from specviz.runs import batch_speculative
from specviz.traces.batching import BatchingFileError, check_batching

TOKENS = [1, 2, 4, 8]
SECONDS = [0.10, 0.10, 0.12, 0.20]


def test_interpolation_hits_the_points_and_is_linear_between():
    for n, t in zip(TOKENS, SECONDS, strict=True):
        assert interpolate(TOKENS, SECONDS, n) == pytest.approx(t)
    assert interpolate(TOKENS, SECONDS, 6) == pytest.approx(0.16)
    assert interpolate(TOKENS, SECONDS, 16) == pytest.approx(0.36)  # on along the last segment
    assert interpolate(TOKENS, SECONDS, 0.5) == pytest.approx(0.10)


def test_prediction_is_the_round_length_when_verifying_is_free():
    # a verify that costs one step and a free draft: L tokens for the price of one
    assert predicted_speedup(3.2, 4, step=0.1, verify=0.1, draft=0.0) == pytest.approx(3.2)
    # compute-bound: a verify of gamma + 1 = 5 tokens costs 5 steps, so even L = 3 loses
    assert predicted_speedup(3.0, 4, step=0.1, verify=0.5, draft=0.01) == pytest.approx(3 * 0.1 / 0.54)
    assert predicted_speedup(3.0, 4, step=0.1, verify=0.5, draft=0.01) < 1


@pytest.mark.parametrize("text, sizes", [("1,2,4", (1, 2, 4)), (" 16, 1,4,4 ", (1, 4, 16)), ("64", (64,))])
def test_batch_sizes(text, sizes):
    assert parse_batches(text) == sizes


@pytest.mark.parametrize("text", ["", "0", "1,x", "65", "-1,2", "1.5"])
def test_bad_batch_sizes(text):
    with pytest.raises(ConfigError):
        parse_batches(text)


def test_prompts_cycle_to_fill_the_batch():
    assert batch_prompts([[1], [2, 3]], 5) == [[1], [2, 3], [1], [2, 3], [1]]


def test_every_batch_size_decodes_the_same_rows_first():
    prompts = [[1], [2], [3], [4], [5]]
    assert batches_of(prompts, 1, 4) == [[[1]], [[2]], [[3]], [[4]]]  # B = 1: four batches of one
    assert batches_of(prompts, 2, 4) == [[[1], [2]], [[3], [4]]]
    assert batches_of(prompts, 8, 4) == [[[1], [2], [3], [4], [5], [1], [2], [3]]]  # one batch, cycled


@pytest.mark.parametrize("text, gammas", [("1,2,4", (1, 2, 4)), ("6, 1,1", (1, 6))])
def test_draft_lengths(text, gammas):
    assert parse_gammas(text) == gammas


@pytest.mark.parametrize("text", ["", "0", "x", "33"])
def test_bad_draft_lengths(text):
    with pytest.raises(ConfigError):
        parse_gammas(text)


def test_the_best_gamma_is_0_when_none_pays():
    entries = [{"gamma": g, "measured_speedup": s} for g, s in [(1, 1.2), (2, 1.5), (4, 1.3)]]
    assert best_gamma(entries, "measured_speedup") == 2
    assert best_gamma([dict(e, measured_speedup=0.9) for e in entries], "measured_speedup") == 0


def test_break_even_is_the_first_batch_that_loses():
    measured = [(1, 1.8), (2, 1.1), (4, 0.7), (8, 1.01)]
    rows = [{"batch": b, "ragged": {"measured_speedup": s}} for b, s in measured]
    assert break_even(rows) == 4
    assert break_even(rows[:2]) is None


def test_a_prediction_adds_up_the_rounds_the_run_had():
    """Each round costs its own rows' and draft length's forwards, linear between the measured batch sizes and gammas
    (the plain step as gamma 0): rows that finished make the last rounds cheaper, as does a shorter last draft."""
    costs = {
        1: {"target_step_seconds": 0.1, "verify": {1: 0.12, 3: 0.2}, "draft_step_seconds": 0.02},
        4: {"target_step_seconds": 0.2, "verify": {1: 0.3, 3: 0.5}, "draft_step_seconds": 0.05},
    }
    cost = shape_cost(costs)
    assert cost(1, 0) == pytest.approx(0.1) and cost(4, 3) == pytest.approx(3 * 0.05 + 0.5)
    # two rows, two drafts: the draft step a third of the way from B = 1 to 4 (0.03); the verify at gamma 2, halfway
    # between gamma 1 and 3 at each size (0.16 and 0.4), then a third of the way (0.24)
    assert cost(2, 2) == pytest.approx(2 * 0.03 + 0.24)
    speculative = {"tokens": 8, "shapes": [(4, 3, 1), (2, 2, 1)]}
    plain = {"tokens": 8, "shapes": [(4, 0, 0), (4, 0, 0)]}  # priced by the same timings: two steps of 0.2 s
    assert shaped_speedup(speculative, plain, cost) == pytest.approx(0.4 / (0.65 + 0.30))
    slower = {size: {**c, "target_step_seconds": 2 * c["target_step_seconds"]} for size, c in costs.items()}
    assert shaped_speedup(speculative, plain, shape_cost(slower)) > 1.5 * shaped_speedup(speculative, plain, cost)
    drifted = {  # the whole machine twice as slow: the prediction stays, both sides are priced alike
        size: {k: ({g: 2 * t for g, t in v.items()} if k == "verify" else 2 * v) for k, v in c.items()}
        for size, c in costs.items()
    }
    assert shaped_speedup(speculative, plain, shape_cost(drifted)) == pytest.approx(0.4 / (0.65 + 0.30))
    assert shape_cost({4: costs[4]})(2, 3) == pytest.approx(0.65)  # one measured size: its costs for every B
    # a round whose first draft forward catches a row up by two tokens (it accepted its whole last draft)
    caught_up = {4: {**costs[4], "draft_catch_up_seconds": 0.11}}
    assert shape_cost(caught_up)(4, 3, 2) == pytest.approx(0.11 + 2 * 0.05 + 0.5)
    assert shape_cost(caught_up)(4, 3, 1) == pytest.approx(0.65)


def test_a_batch_records_the_draft_forwards_catch_up():
    """The first draft forward of a round takes two tokens of every row that accepted its whole draft: a draft equal
    to the target (noise 0) is always accepted, so every round after the first catches up by two."""
    pair = tiny_pair(seed=0, noise=0.0)
    run = batch_speculative(pair, [[5, 6, 7], [8, 9]], SpecConfig(gamma=2, max_new_tokens=9), stop_at_eos=False)
    assert run.shapes[0] == (2, 2, 1) and all(shape[2] == 2 for shape in run.shapes[1:] if shape[1])
    plain = batch_plain(pair, [[5, 6, 7], [8, 9]], SpecConfig(gamma=2, max_new_tokens=3), stop_at_eos=False)
    assert plain.shapes == [(2, 0, 0)] * 3


def test_timings_of_one_size_pool_into_their_medians():
    timings = [
        {"target_step_seconds": 0.1, "verify": {1: 0.2, 2: 0.3}, "draft_step_seconds": 0.01},
        {"target_step_seconds": 0.3, "verify": {2: 0.5}, "draft_step_seconds": 0.03},
        {"target_step_seconds": 0.2, "verify": {2: 0.4}, "draft_step_seconds": 0.02},
    ]
    timings = [dict(t, draft_catch_up_seconds=2 * t["draft_step_seconds"]) for t in timings]
    pooled = median_costs(timings)
    assert pooled == {
        "target_step_seconds": 0.2,
        "verify": {1: 0.2, 2: 0.4},
        "draft_step_seconds": 0.02,
        "draft_catch_up_seconds": 0.04,
    }
    assert median([3.0, 1.0]) == 2.0 and median([5.0, 1.0, 2.0]) == 2.0


def test_each_batch_against_its_rows_alone_and_b1_through_both_paths():
    pair = tiny_pair(seed=0, noise=0.02)
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [20], [30, 31]]
    config = SpecConfig(gamma=3, max_new_tokens=8)
    doc = run_batching(pair, prompts, config, (1, 2, 4), (1, 2, 4, 8, 16), 1, gammas=(1, 3), rows=3, engine_repeats=2)
    for row in doc["rows"]:  # fp32 tiny pair: every row's rounds are exactly its rounds alone
        assert row["ragged"]["tokens_per_round"] == pytest.approx(row["alone"]["tokens_per_round"])
        assert row["greedy_identical"] is True
        for entry in row["gammas"]:  # predicted from the timed forwards over the rounds the run had
            assert entry["batch_tokens_per_round"] <= entry["tokens_per_round"] + 1e-9
            assert 0 < entry["predicted_speedup"] < 10
    engine = doc["rows"][0]["single_row_engine"]
    assert len(engine["speedups"]) == 2 and len(engine["batched_speedups"]) == 2
    assert engine["batched_speedups"][0] == doc["rows"][0]["ragged"]["measured_speedup"]  # the table's own run first


def test_each_method_runs_as_often_as_asked_and_its_speedup_is_the_median():
    pair = tiny_pair(seed=0, noise=0.02)
    config = SpecConfig(gamma=2, max_new_tokens=6)
    doc = run_batching(pair, [[5, 6, 7], [8, 9]], config, (1, 2), (1, 2, 4), 1, gammas=(1,), rows=2, runs=3)
    assert doc["runs"] == 3 and check_batching(json.loads(json.dumps(doc)))["runs"] == 3
    for row in doc["rows"]:
        for entry in (*row["gammas"], row["min_cut"]):
            assert len(entry["speedups"]) == len(entry["predicted_speedups"]) == 3
            assert entry["measured_speedup"] == median(entry["speedups"])
            assert entry["predicted_speedup"] == median(entry["predicted_speedups"])
        assert row["greedy_identical"] is True  # every run of every pair
    single = doc["rows"][0]["single_row_engine"]  # B = 1's batched speed-ups are the table's three pairs
    assert single["batched_speedups"] == doc["rows"][0]["ragged"]["speedups"]
    broken = json.loads(json.dumps(doc))
    broken["rows"][1]["min_cut"]["speedups"].pop()
    with pytest.raises(BatchingFileError, match="one per run"):
        check_batching(broken)
