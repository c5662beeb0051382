"""Issue 44: on an exposed server each long run has a budget per visitor, stated on its page and checked before it
starts (a batch's rows x tokens, a Learning run's requests, a training's tokens x epochs); every run stops once its
browser session has gone; the batching bench stops between two rounds. AppTest on the tiny pair, the server's
address set as streamlit's `server.address` option (the browser side: tests/browser/test_batching_browser.py)."""

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
    assert budgets.stream_refusal(8) is None
    assert budgets.stream_refusal(32).startswith("This run would take 32 requests; this shared server allows 8 per")
    assert budgets.batch_work_refusal([16], [448], 64, 8) is None  # the largest batch, decoded 8 times: just fits
    assert "36 rows over its batch sizes x (500 prompt + 12 new tokens) x 7 runs each = 129,024" in (
        budgets.batch_work_refusal([4, 4, 4, 8, 16], [500, 12], 12, 7)
    )
    assert budgets.batch_passes_refusal([4, 2, 1], 16, 34) is None  # the page's default run: 3,808 passes
    assert "4 batches x 64 new tokens x 88 passes per token = 22,528 forward passes" in (
        budgets.batch_passes_refusal([4], 64, 88)  # one row at a time, gamma 32
    )
    assert budgets.batch_passes_refusal([4], 64, 20) is None  # 5,120 passes, and the same prompts decoded alone:
    assert "+ 4 prompts alone x 64 new tokens x 34 passes per token = 13,824" in budgets.batch_passes_refusal(
        [4], 64, 20, 4, 34
    )
    assert budgets.lab_refusal(64, 64) is None and "480 runs x 64 new tokens = 30,720" in budgets.lab_refusal(480, 64)
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
    assert "its largest batch takes at most 8,192 rows x tokens" in captions(at)
    at.text_input(key="batching.sizes").set_value("1,64")
    at.slider(key="batching.tokens").set_value(64)
    at.button(key="batching.run").click().run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("This run would take 64 rows x (") and "allows 8,192 per run" in error
    assert state(at, "batching").job is None  # refused before it started


def test_a_batching_run_of_every_batch_size_is_refused_though_its_largest_batch_fits(exposed):
    """Sizes 1..64 of a short prompt: the largest batch fits the memory bound, but the run decodes 64 batch sizes 14
    times each (7 speculative runs, each after a plain one: minutes on the tiny pair, hours on the built-in one):
    refused by the bound on all its runs."""
    at = go(exposed, "batching")
    assert "all its batch sizes together decode at most 65,536 rows x tokens decoded" in captions(at)
    at.number_input(key="cfg.gamma").set_value(32)
    at.text_input(key="batching.sizes").set_value(",".join(str(n) for n in range(1, 65)))
    at.text_area(key="batching.prompts").set_value("abc")
    at.slider(key="batching.tokens").set_value(64).run()
    at.button(key="batching.run").click().run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("This run would take 2,088 rows over its batch sizes x (3 prompt + 64 new tokens) x 14 run")
    assert state(at, "batching").job is None
    at.text_input(key="batching.sizes").set_value("1").run()  # one row at a time with long drafts: passes, not rows
    at.button(key="batching.run").click().run()
    (error,) = [e.value for e in at.error]
    # the rows through the single-row engine at B = 1 count too (B = 1's own rows are the rows-alone reference)
    assert "4 batches x 64 new tokens x 94 passes per token + 4 prompts alone x 64 new tokens x 34 passes" in error
    assert "= 32,768 forward passes" in error
    assert state(at, "batching").job is None


def test_an_acceptance_lab_batch_beyond_its_budget_is_refused(exposed):
    at = go(exposed, "acceptance_lab")
    assert "one batch here takes at most 4,096 runs x new tokens per run" in captions(at)
    at.text_area(key="lab.own").set_value("\n".join(f"prompt {i}" for i in range(100))).run()
    at.button(key="lab.run").click().run()
    (error,) = [e.value for e in at.error]
    assert "210 runs x 32 new tokens" in error and "allows 4,096 per run" in error and state(at, "lab").job is None


def test_the_learning_page_offers_no_stream_beyond_its_budget_and_a_single_request_is_named_plainly(exposed):
    at = go(exposed, "learning")
    said = captions(at)
    assert "one run here takes at most 8 requests per run" in said
    assert "The shipped stream (32 requests) is more" in said
    assert at.radio(key="learning.what").options == ["my request"]  # was offered, then refused
    assert budgets.stream_refusal(32) and "allows 8 per run" in budgets.stream_refusal(32)
    at.radio(key="learning.what").set_value("mine").run()
    at.text_area(key="learning.request").set_value("x" * 8_001).run()
    at.button(key="learning.run").click().run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("Prompt: ") and "of 1" not in error  # was "Prompt 1 of 1 of the batch"


def test_the_heads_page_refuses_a_training_beyond_its_budget(exposed):
    at = go(exposed, "heads")
    assert "at most 256,000 tokens x epochs per run" in captions(at)
    assert "yours only, for this browser session" in captions(at)  # heads are private on an exposed server
    at.select_slider(key="heads.tokens").set_value(40_000)
    at.slider(key="heads.epochs-medusa").set_value(24)
    at.button(key="heads.run").click().run()
    (error,) = [e.value for e in at.error]
    assert "40,000 tokens x 24 epochs = 960,000 tokens x epochs" in error and state(at, "heads").job is None


def test_nothing_is_bounded_on_a_loopback_address(monkeypatch, tmp_path):
    at = go(open_app(monkeypatch, tmp_path), "batching")
    assert "rows x tokens" not in captions(at)


def test_the_device_goes_to_visitors_in_turns_so_queued_runs_cannot_hold_it():
    """Visitor H holds the device and queues three more runs (more tabs or pages), then F queues two: as the device
    frees, F's first run goes before H's queued ones and the two visitors alternate (a plain lock hands it to
    whichever waiting run wakes first, so H's queue could keep F waiting)."""
    from types import SimpleNamespace

    from specviz.runs import exclusive

    pair, order, release = SimpleNamespace(device="cpu"), [], threading.Event()

    def work(job):
        with exclusive(pair, job.cancel, job.on_wait):
            order.append(job.name)
            if job.name == "H0":
                release.wait(10)

    jobs = [start_job("H0", work, visitor="address H")]
    while order != ["H0"]:
        time.sleep(0.01)
    for name in ("H1", "H2", "H3", "F1", "F2"):  # each asks in this order
        jobs.append(start_job(name, work, visitor=f"address {name[0]}"))
        time.sleep(0.1)
    release.set()
    assert all(job.join(10) for job in jobs)
    assert order == ["H0", "F1", "H1", "F2", "H2", "H3"]


def test_the_sidebar_says_runs_are_bounded_and_take_turns_and_whether_traffic_is_saved(exposed):
    at = exposed
    sidebar = "\n".join(c.value for c in at.sidebar.caption)
    assert "Runs: bounded per run" in sidebar and "visitors take turns" in sidebar
    assert "Saved traffic: none" in sidebar and "SPECVIZ_TRAFFIC_PERSIST=1" in sidebar


def test_a_waiting_run_that_fails_gives_its_place_up():
    """A run whose wait ends in an error (its on_wait failing) leaves the queue: the device is not handed to it."""
    from specviz.runs import DeviceLock

    lock, failed = DeviceLock(), []

    def broken(seconds: float) -> None:
        raise RuntimeError("the page went away")

    def wait_broken() -> None:
        try:
            lock.acquire(on_wait=broken, every=0.05)
        except RuntimeError as exc:
            failed.append(exc)

    lock.acquire()
    waiter = threading.Thread(target=wait_broken)
    waiter.start()
    waiter.join(5)
    lock.release()
    later = threading.Thread(target=lock.acquire)  # free again, not held by the run that failed
    later.start()
    later.join(5)
    assert failed and not later.is_alive() and lock.locked()
    lock.release()
