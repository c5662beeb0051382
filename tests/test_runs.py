"""Whole runs as the app and CLI make them: several users at once, cancelling, traces on disk."""

import dataclasses
import threading
import time

import pytest

from specviz.decoding.config import SpecConfig
from specviz.models.tiny import tiny_pair
from specviz.runs import Cancelled, PromptError, device_lock, encode, exclusive, run_trace, speedup
from specviz.traces.trace import TraceError, decode_rate, load_trace, save_trace, trace_from_json

PROMPTS = ["def square(x):\n    return x * x\n\ndef", "The quick brown fox jumps over", "1, 2, 3, 4, 5,"]


def test_concurrent_runs_match_solo_runs(pair):
    config = SpecConfig(gamma=3, max_new_tokens=30)
    solo = {p: run_trace(pair, p, config, chat=False, baseline=True).summary.token_ids for p in PROMPTS}
    results, waits, errors = {}, [], []

    def worker(prompt):
        try:
            trace = run_trace(pair, prompt, config, chat=False, baseline=True, on_wait=waits.append)
            results[prompt] = trace.summary.token_ids
        except Exception as exc:  # surfaced below; a thread would swallow it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(p,)) for p in PROMPTS * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert results == solo


def test_lock_serialises_and_reports_waiting(pair):
    holder_started, release = threading.Event(), threading.Event()
    spans = []

    def holder():
        with exclusive(pair):
            holder_started.set()
            spans.append(("holder", time.perf_counter()))
            release.wait(5)
            spans.append(("holder-end", time.perf_counter()))

    thread = threading.Thread(target=holder)
    thread.start()
    holder_started.wait(5)
    waited = []
    threading.Timer(1.2, release.set).start()
    with exclusive(pair, on_wait=waited.append):
        spans.append(("waiter", time.perf_counter()))
    thread.join()
    assert waited and max(waited) >= 0.5  # the waiting session was told it waits
    assert [name for name, _ in spans] == ["holder", "holder-end", "waiter"]


def test_cancel_while_waiting(pair):
    cancel = threading.Event()
    with exclusive(pair):
        cancel.set()
        with pytest.raises(Cancelled):
            with exclusive(pair, cancel=cancel):
                pass
    with exclusive(pair):  # and the lock is free again afterwards
        pass


def test_cancel_mid_run_leaves_the_pair_ready(pair):
    cancel = threading.Event()
    seen = []

    def on_event(event):
        seen.append(event)
        if len(seen) == 2:
            cancel.set()

    trace = run_trace(
        pair, PROMPTS[0], SpecConfig(max_new_tokens=200), chat=False, baseline=True, cancel=cancel, on_event=on_event
    )
    assert trace.summary.finish_reason == "cancelled"
    assert trace.baseline_summary is None and len(trace.rounds) == 2
    assert not device_lock(pair.device).locked()
    again = run_trace(pair, PROMPTS[0], SpecConfig(max_new_tokens=10), chat=False)
    assert again.summary.new_tokens == 10


@pytest.mark.parametrize("prompt, message", [("", "empty"), ("   \n", "empty"), ("x" * 9000, "limit")])
def test_bad_prompts(pair, prompt, message):
    with pytest.raises(PromptError, match=message):
        encode(pair, prompt)


def test_trace_round_trip(pair, tmp_path):
    trace = run_trace(
        pair, PROMPTS[1], SpecConfig(temperature=0.8, top_k=20, max_new_tokens=20, seed=4), chat=False, baseline=True
    )
    path = tmp_path / "run.json"
    save_trace(trace, path)
    again = load_trace(path)
    assert again == trace
    # The speed-up is the ratio of the two decode rates, each recounted from its run's tokens and times (prefill
    # excluded), so a speed-up from the wrong fields or times that did not survive the file would fail here.
    spec, base = again.summary, again.baseline_summary
    expected = decode_rate(spec.new_tokens, spec.seconds - spec.prefill_seconds) / decode_rate(
        base.new_tokens, base.seconds - base.prefill_seconds
    )
    assert speedup(again) == pytest.approx(expected, rel=1e-9) and expected > 0


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not json at all", "not a JSON file"),
        (b'{"hello": 1}', "not a specviz trace"),
        (b'{"format": "specviz-trace", "version": 99}', "version 99"),
        (b'{"format": "specviz-trace", "version": 1, "config": {}}', "damaged"),
        (b"\xff\xfe\x00", "not a JSON file"),
    ],
)
def test_bad_trace_files(content, message):
    with pytest.raises(TraceError, match=message):
        trace_from_json(content)


def test_trace_with_a_tampered_event_is_refused(pair):
    text = run_trace(pair, PROMPTS[2], SpecConfig(max_new_tokens=5), chat=False).to_json()
    with pytest.raises(TraceError):
        trace_from_json(text.replace('"n_accepted"', '"n_acepted"'))


def test_a_trace_names_its_vocabulary_and_the_loader_bounds_ids_by_it(tmp_path):
    pair = tiny_pair()
    trace = run_trace(pair, PROMPTS[0], SpecConfig(max_new_tokens=6), chat=False)
    width = pair.target.config.get_text_config().vocab_size
    assert trace.pair["vocab_size"] == str(width)
    assert trace_from_json(trace.to_json()) == trace
    bad = dataclasses.replace(trace, prompt_ids=(width,) + trace.prompt_ids[1:])
    with pytest.raises(TraceError, match="vocab"):
        trace_from_json(bad.to_json())
