"""The traffic drafter and the controller on the real built-in pair: greedy output equal to the target alone, and
the second of two similar requests drafts from the first (run under flock /tmp/specviz-real.lock)."""

import pytest

from specviz.bench.stream import load_stream, run_stream
from specviz.config import SpecConfig
from specviz.prompts import ROOT

pytestmark = pytest.mark.real


def test_similar_requests_learn_from_each_other(builtin_pair):
    _, requests = load_stream(ROOT / "assets" / "streams" / "inventory_drift.json")
    same_template = [requests[0], requests[4]]  # get_price, then get_quantity: one template, another field
    config = SpecConfig(gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, max_new_tokens=24)
    rows = run_stream(builtin_pair, same_template, config)  # asserts greedy identity with the target alone
    first, second = rows
    assert second["store"]["hit_rate"] > 0
    assert second["traffic"]["mean_accepted_per_round"] > first["traffic"]["mean_accepted_per_round"]
    assert second["controller"]["sources"]["traffic"] + second["controller"]["sources"]["both"] > 0
