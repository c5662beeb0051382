"""The traffic drafter and the controller on the real built-in pair: greedy output equal to the target alone, and
the second of two similar requests drafts from the first (the traffic drafter; the controller gathers the evidence
its floor asks for). Run under flock /tmp/specviz-real.lock."""

import pytest

from specviz import ROOT
from specviz.bench.stream import load_stream, run_stream
from specviz.decoding.config import SpecConfig
from specviz.drafters.controller import TRAFFIC_PRIOR
from specviz.drafters.suffix import TrafficStore
from specviz.drafters.traffic import controller_memory

pytestmark = pytest.mark.real


def test_similar_requests_learn_from_each_other(builtin_pair):
    _, requests = load_stream(ROOT / "assets" / "streams" / "inventory_drift.json")
    same_template = [requests[0], requests[4]]  # get_price, then get_quantity: one template, another field
    config = SpecConfig(gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, max_new_tokens=24)
    store = TrafficStore()
    rows = run_stream(builtin_pair, same_template, config, store=store)  # asserts greedy identity with the target
    first, second = rows
    assert second["store"]["hit_rate"] > 0
    assert second["traffic"]["mean_accepted_per_round"] > first["traffic"]["mean_accepted_per_round"]
    # The controller keeps the draft model as its floor until a match class has held several times: in the shipped
    # recording it first drafts from traffic at request 5. What two requests show is the evidence building up: the
    # shadow checks measured some class in the model's rounds, and one class's first token held more often than
    # the prior says.
    rates = controller_memory(store).traffic_rates
    assert sum(r.first.checked for r in rates) > 0
    assert max(r.first.rate for r in rates if r.first.checked) > TRAFFIC_PRIOR
