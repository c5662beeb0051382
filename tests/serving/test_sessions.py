"""Issue 44: what each browser session learns from (serving/sessions.py) on the tiny pair: its own traffic store and
trained heads unless the server shares them, and the switches that decide it (ui/server.py, through AppTest)."""

from __future__ import annotations

import pytest
from helpers.heads import random_heads
from streamlit import config as st_config

from specviz import runs
from specviz.decoding.config import SpecConfig
from specviz.drafters.heads import forget_heads, heads_for
from specviz.drafters.traffic import traffic_store
from specviz.serving.sessions import SESSION_TOKENS, SessionLearning

SECRET = "My PIN is 7391, password hunter2!"
CONFIG = SpecConfig(gamma=4, max_new_tokens=8, drafter="traffic")


def drafted(trace) -> list[list[int]]:
    return [[t.id for t in r.drafted] for r in trace.rounds if r.drafted]


def test_a_private_session_drafts_only_from_its_own_requests(pair):
    shared_before = traffic_store(pair).requests
    a, b = SessionLearning(), SessionLearning()
    runs.run_trace(pair, SECRET, CONFIG, chat=False, traffic=a.traffic(pair))
    assert a.traffic(pair).requests == 1 and b.traffic(pair).requests == 0
    assert traffic_store(pair).requests == shared_before  # the server's store never saw it
    assert a.traffic(pair).max_tokens == SESSION_TOKENS
    probe = runs.run_trace(pair, "My PIN is", CONFIG, chat=False, traffic=b.traffic(pair))
    secret = pair.encode_prompt(SECRET, chat=False)
    assert not any(d and d == secret[9 : 9 + len(d)] for d in drafted(probe))
    mine = runs.run_trace(pair, "My PIN is", CONFIG, chat=False, traffic=a.traffic(pair))
    assert drafted(mine)[0] == secret[9 : 9 + len(drafted(mine)[0])]  # A's own store does continue A's secret
    b.forget_traffic(pair)
    assert b.traffic(pair).requests == 0 and a.traffic(pair).requests == 2  # B's Forget leaves A's store


def test_shared_sessions_read_and_forget_the_servers_store(pair):
    a, b = SessionLearning(share_traffic=True), SessionLearning(share_traffic=True)
    assert a.traffic(pair) is b.traffic(pair) is traffic_store(pair)
    runs.run_trace(pair, SECRET, CONFIG, chat=False, traffic=a.traffic(pair))
    probe = runs.run_trace(pair, "My PIN is", CONFIG, chat=False, traffic=b.traffic(pair))
    secret = pair.encode_prompt(SECRET, chat=False)
    assert drafted(probe)[0] == secret[9 : 9 + len(drafted(probe)[0])]  # as before issue 44: B drafts A's words
    b.forget_traffic(pair)
    assert traffic_store(pair).requests == 0


def test_trained_heads_serve_their_session_unless_shared(pair):
    width = pair.target.config.vocab_size
    heads = random_heads(pair, count=2)
    a, b = SessionLearning(), SessionLearning()
    a.keep_heads(pair, "medusa", heads)
    assert a.trained_heads(pair) == {"medusa": heads} and b.trained_heads(pair) == {}
    config = SpecConfig(gamma=2, max_new_tokens=6, drafter="medusa")
    trace = runs.run_trace(pair, "abc", config, chat=False, heads=a.trained_heads(pair))
    assert trace.summary.new_tokens == 6  # the session's heads drafted: the target has none of its own
    with pytest.raises(Exception, match="heads"):
        heads_for(pair.target, width, "medusa")  # nobody else's drafter sees them
    shared = SessionLearning(share_heads=True)
    try:
        shared.keep_heads(pair, "medusa", heads)
        assert shared.trained_heads(pair) is None and heads_for(pair.target, width, "medusa") is heads
    finally:
        forget_heads(pair.target)


@pytest.fixture
def address(monkeypatch):
    before = st_config.get_option("server.address")
    for env in ("SPECVIZ_SHARED_TRAFFIC", "SPECVIZ_SHARED_HEADS"):
        monkeypatch.delenv(env, raising=False)
    yield lambda value: st_config.set_option("server.address", value)
    st_config.set_option("server.address", before)


@pytest.mark.parametrize(
    "host, env, shared",
    [("localhost", None, True), ("0.0.0.0", None, False), ("", None, False), ("0.0.0.0", "1", True)]
    + [("localhost", "0", False), ("192.168.1.20", "yes", True)],
)
def test_the_switch_and_the_address_decide_and_the_sidebar_tells(app_factory, address, monkeypatch, host, env, shared):
    address(host)
    if env is not None:
        monkeypatch.setenv("SPECVIZ_SHARED_TRAFFIC", env)
    at = app_factory()
    learning = at.session_state["state.session_learning"]
    assert learning.share_traffic is shared and learning.share_heads is (host == "localhost")
    words = "\n".join(c.value for c in at.sidebar.caption)
    assert ("Traffic: shared by every visitor" in words) is shared
    assert ("Traffic: private" in words) is (not shared)
    assert "SPECVIZ_SHARED_TRAFFIC" in words and "SPECVIZ_SHARED_HEADS" in words


@pytest.fixture
def app_factory(monkeypatch, tmp_path):
    from helpers.app import open_app

    return lambda: open_app(monkeypatch, tmp_path)
