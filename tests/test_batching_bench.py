"""The batching benchmark's arithmetic (specviz/bench/batching.py): T(n) between measured points, the predicted
speed-up, the batch sizes a user may ask for, and the break-even."""

import pytest

from specviz.bench.batching import batch_prompts, break_even, interpolate, parse_batches, predicted_speedup
from specviz.decoding.config import ConfigError

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


def test_break_even_is_the_first_batch_that_loses():
    rows = [{"batch": b, "measured_speedup": s} for b, s in [(1, 1.8), (2, 1.1), (4, 0.7), (8, 1.01)]]
    assert break_even(rows) == 4
    assert break_even(rows[:2]) is None
