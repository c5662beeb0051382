"""Issue 44: on an exposed server each long run has a budget per visitor, stated on its page and checked before it
starts (a batch's rows x tokens, a Learning run's requests, a training's tokens x epochs); every run stops once its
browser session has gone; the batching bench stops between two rounds. AppTest on the tiny pair, the server's
address set as streamlit's `server.address` option (the browser side: tests/test_batching_browser.py)."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.app import go, open_app, state
from streamlit import config as st_config

from specviz.bench.batching import run_batching
from specviz.decoding.config import SpecConfig
from specviz.models.tiny import tiny_pair
from specviz.runs import Cancelled
from specviz.serving import budgets
from specviz.serving.jobs import start_job


def test_the_bounds_and_their_one_line_refusals():
    assert budgets.batch_refusal(16, [500, 12], 12) is None  # 16 x 512 = 8,192: just fits
    line = budgets.batch_refusal(64, [500, 12], 64)
    assert line == (
        "This run would take 64 rows x (500 prompt + 64 new tokens) = 36,096 rows x tokens; this shared server allows "
        "8,192 per run. Make it smaller and run again."
    )
    assert budgets.stream_refusal(8) is None and "32 requests = 32 requests" in budgets.stream_refusal(32)
    assert budgets.training_refusal(16_000, 16) is None
    assert "40,000 tokens x 24 epochs = 960,000 tokens x epochs" in budgets.training_refusal(40_000, 24)


def test_a_run_whose_session_goes_is_stopped_within_the_grace():
    connected = threading.Event()
    connected.set()

    def work(job):
        while not job.cancel.is_set():
            time.sleep(0.02)
        raise Cancelled("stopped")

    job = start_job("t", work, alive=connected.is_set)
    time.sleep(1.0)
    assert job.state == "running"  # still connected
    connected.clear()  # the tab is closed
    gone = time.monotonic()
    assert job.join(10) and job.state == "cancelled" and job.orphaned
    assert time.monotonic() - gone < 4


def test_the_batching_bench_stops_between_two_rounds():
    pair = tiny_pair(seed=0, noise=0.02)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):  # without the check this run takes far longer than the stop
        run_batching(
            pair, [[5, 6, 7] * 20], SpecConfig(gamma=8, max_new_tokens=64), (1, 2, 4, 8, 16, 32, 64), cancel=cancel
        )
    assert time.monotonic() - start < 3


@pytest.fixture
def exposed(monkeypatch, tmp_path):
    """The app as a visitor of a server on 0.0.0.0 sees it."""
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    yield open_app(monkeypatch, tmp_path)
    st_config.set_option("server.address", before)


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_the_batching_page_states_its_budget_and_refuses_a_batch_beyond_it(exposed):
    at = go(exposed, "batching")
    assert "one run here takes at most 8,192 rows x tokens per run" in captions(at)
    at.text_input(key="batching.sizes").set_value("1,64")
    at.slider(key="batching.tokens").set_value(64)
    at.button(key="batching.run").click().run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("This run would take 64 rows x (") and "allows 8,192 per run" in error
    assert state(at, "batching").job is None  # refused before it started


def test_the_learning_page_refuses_the_whole_stream_and_a_single_request_is_named_plainly(exposed):
    at = go(exposed, "learning")
    assert "one run here takes at most 8 requests per run" in captions(at)
    at.radio(key="learning.what").set_value("stream").run()
    at.button(key="learning.run").click().run()
    (error,) = [e.value for e in at.error]
    assert "allows 8 per run" in error and state(at, "learning").job is None
    at.radio(key="learning.what").set_value("mine").run()
    at.text_area(key="learning.request").set_value("x" * 8_001).run()
    at.button(key="learning.run").click().run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("Prompt: ") and "of 1" not in error  # was "Prompt 1 of 1 of the batch"


def test_the_heads_page_refuses_a_training_beyond_its_budget(exposed):
    at = go(exposed, "heads")
    assert "at most 256,000 tokens x epochs per run" in captions(at)
    at.select_slider(key="heads.tokens").set_value(40_000)
    at.slider(key="heads.epochs-medusa").set_value(24)
    at.button(key="heads.run").click().run()
    (error,) = [e.value for e in at.error]
    assert "40,000 tokens x 24 epochs = 960,000 tokens x epochs" in error and state(at, "heads").job is None


def test_nothing_is_bounded_on_a_loopback_address(monkeypatch, tmp_path):
    at = go(open_app(monkeypatch, tmp_path), "batching")
    assert "rows x tokens" not in captions(at)
