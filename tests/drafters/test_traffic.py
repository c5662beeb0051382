"""The traffic drafter and the controller: the suffix structure (matches, counts, eviction), the controller's rule on
scripted rates and confidences, greedy exactness on tiny random models, and traces with the controller's choices."""

import copy
import json
from dataclasses import replace

import pytest

from specviz import runs
from specviz.bench.stream import acceptance_metrics, drift_recovery, run_stream, summarize
from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.drafters.suffix import Proposal, SuffixIndex, TrafficStore, continuation, longest_match
from specviz.drafters.traffic import ControllerDrafter, TrafficDrafter, agreeing, controller_memory, traffic_store
from specviz.models.tiny import tiny_pair
from specviz.runs import speculative_generate
from specviz.traces.trace import TraceError, trace_from_json


def propose(store: TrafficStore, context: list[int], limit: int = 8, **kw) -> Proposal:
    m, found = longest_match([store.index], context)
    return continuation(found, m, limit, recency=store.recency(), **kw)


# ---------------------------------------------------------------- the suffix structure


def test_longest_match_and_its_counts():
    store = TrafficStore()
    store.add([1, 2, 3, 4, 5, 6])
    store.add([9, 2, 3, 4, 7, 8])
    store.add([9, 2, 3, 4, 7, 8])
    m, found = longest_match([store.index], [0, 2, 3, 4])
    assert m == 3 and len(found) == 3  # "2 3 4" occurs three times; "0 2 3 4" never
    p = propose(store, [0, 2, 3, 4])
    assert p.ids == (7, 8) and p.confidence == pytest.approx((2 / 3, 2 / 3))  # the most frequent continuation
    m, found = longest_match([store.index], [1, 2, 3, 4])
    assert m == 4 and len(found) == 1  # the longer match wins, even against more frequent shorter ones
    assert propose(store, [1, 2, 3, 4]).ids == (5, 6)
    assert longest_match([store.index], [4, 1]) == (0, [])  # a bigram never seen


def test_draft_length_grows_with_the_match_and_stops_at_unsure_tokens():
    store = TrafficStore()
    store.add(list(range(40)))
    assert len(propose(store, [10, 11], limit=30).ids) == 2  # m = 2: at most 2 tokens (max_spec_factor 1)
    assert len(propose(store, list(range(5, 15)), limit=30).ids) == 10
    assert len(propose(store, list(range(5, 15)), limit=3).ids) == 3
    store.add([50, 51, 1])
    store.add([50, 51, 2])
    store.add([50, 51, 3])
    assert propose(store, [50, 51], min_token_prob=0.5).ids == ()  # each continuation has a third of the count
    assert len(propose(store, [50, 51], min_token_prob=0.3).ids) == 1
    assert propose(store, [50, 51], min_token_prob=0.3).ids == (3,)  # a tie goes to the most recent request


def positions(store: TrafficStore) -> dict:
    """The index with each sequence id replaced by its ids (ids differ between stores, contents must not)."""
    seqs = store.index.sequences
    return {k: sorted((tuple(seqs[sid]), e) for sid, e in v) for k, v in store.index.positions.items()}


def test_eviction_removes_a_request_exactly():
    a, b, c = [5, 6, 7, 8, 5, 6, 9], [1, 5, 6, 7, 2], [3, 3, 3, 4]
    store = TrafficStore(max_requests=2)
    sa = store.add(a)
    store.add(b)
    store.add(c)  # over the cap: the least recently used, a, goes
    alone = TrafficStore()
    alone.add(b)
    alone.add(c)
    assert sa not in store.order and store.requests == 2
    assert positions(store) == positions(alone)
    assert store.tokens == len(b) + len(c)


def test_a_used_request_is_kept_and_the_token_cap_holds():
    store = TrafficStore(max_requests=2)
    first = store.add([1, 2, 3, 4])
    second = store.add([7, 8, 9, 10])
    drafter = TrafficDrafter(store)
    assert drafter.suggest([0, 1, 2], 4).ids == (3, 4)  # continues from the first request: it becomes recent
    store.add([11, 12, 13])
    assert first in store.order and second not in store.order
    capped = TrafficStore(max_tokens=10)
    for start in range(0, 40, 4):
        capped.add(list(range(start, start + 4)))
        assert capped.tokens <= 10
    assert capped.requests == 2


def test_the_live_request_is_matched_too_and_never_its_own_end():
    drafter = TrafficDrafter(TrafficStore())
    assert drafter.suggest([4, 5, 6, 4, 5], 4).ids == (6, 4)  # from earlier in this request (match "4 5")
    assert drafter.suggest([1, 2, 3], 4).ids == ()  # a new request: the old one's ids are gone


def test_persistence_round_trips(tmp_path):
    store = TrafficStore()
    store.add([1, 2, 3, 4])
    store.add([5, 6, 7, 8, 9])
    store.save(tmp_path / "t.json")
    again = TrafficStore()
    assert again.load(tmp_path / "t.json", vocab=10) == 2
    assert list(again.index.sequences.values()) == [[1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert TrafficStore().load(tmp_path / "missing.json", vocab=10) == 0  # a file that is not ours: the tests below


def test_suffix_index_remove_leaves_no_empty_keys():
    index = SuffixIndex()
    index.extend(0, [1, 2, 3, 1, 2, 3])
    index.remove(0)
    assert index.positions == {} and index.sequences == {}


# ---------------------------------------------------------- what the controller checks (its rule: test_controller.py)


def test_agreeing_counts_the_checked_tokens():
    assert agreeing([1, 2, 3], [1, 2, 9, 4]) == (2, 3)
    assert agreeing([1, 2, 3], [1, 2, 3, 4]) == (3, 3)
    assert agreeing([1, 2, 3], [1, 2]) == (2, 2)  # past the committed tokens: unchecked
    assert agreeing([], [1]) == (0, 0)


# ---------------------------------------------------------------- on tiny random models

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):"


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return pair.encode_prompt(PROMPT, chat=False)


@pytest.mark.parametrize("drafter", ["traffic", "controller"])
@pytest.mark.parametrize("schedule", ["constant", "auto"])
def test_greedy_equals_target_alone_and_learns_from_traffic(pair, prompt_ids, drafter, schedule):
    config = SpecConfig(gamma=6, gamma_max=12, schedule=schedule, drafter=drafter, max_new_tokens=40)
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    store = TrafficStore()
    cold_rounds, cold = run_to_end(speculative_generate(pair, prompt_ids, config, traffic=store))
    store.add(prompt_ids + list(base.token_ids))
    warm_rounds, warm = run_to_end(speculative_generate(pair, prompt_ids, config, traffic=store))
    assert cold.token_ids == base.token_ids == warm.token_ids
    assert warm.accepted > cold.accepted and len(warm_rounds) < len(cold_rounds)  # it learned the output
    assert {r.draft_source for r in warm_rounds} <= {"traffic", "model", "both", ""}
    assert any(r.draft_source == "traffic" for r in warm_rounds)


def test_the_controller_keeps_the_draft_cache_consistent(pair, prompt_ids, monkeypatch):
    """Force "both" every round: the model continues traffic drafts; its cache must hold a prefix of the committed
    ids after every rollback, and the output must not change."""
    import specviz.drafters.traffic as traffic

    monkeypatch.setattr(
        traffic,
        "choose_source",
        lambda p, room, ends, rate, memory, costs, first_rate=None: "both" if p.ids and not ends else "model",
    )
    seen: list[tuple[int, ...]] = []
    original = ControllerDrafter.rollback

    def checked(self, committed):
        original(self, committed)
        cached = self.model.state.ids
        assert cached == committed[: len(cached)] and len(cached) <= len(committed) - 1
        seen.append(tuple(self.choices))

    monkeypatch.setattr(ControllerDrafter, "rollback", checked)
    config = SpecConfig(gamma=6, drafter="controller", max_new_tokens=40)
    _, base = run_to_end(autoregressive_generate(pair, prompt_ids, config))
    store = TrafficStore()
    store.add(prompt_ids + list(base.token_ids[:20]))
    rounds, spec = run_to_end(speculative_generate(pair, prompt_ids, config, traffic=store))
    assert spec.token_ids == base.token_ids
    assert any(r.draft_source == "both" for r in rounds)
    assert all(r.draft_forwards >= 1 for r in rounds if r.draft_source == "both")


def test_traffic_runs_without_a_draft_model(prompt_ids):
    config = SpecConfig(gamma=4, drafter="traffic", max_new_tokens=12)
    no_draft = replace(tiny_pair(), draft=None)
    _, spec = run_to_end(speculative_generate(no_draft, prompt_ids, config, traffic=TrafficStore()))
    assert spec.new_tokens == 12


def test_run_trace_teaches_the_process_wide_store(pair):
    store = traffic_store(pair)
    before = store.requests
    runs.run_trace(pair, "1, 2, 3, 1, 2,", SpecConfig(gamma=3, max_new_tokens=8), chat=False)
    assert store.requests == before + 1 or store.requests == store.max_requests


def test_unknown_drafter_is_refused():
    with pytest.raises(ConfigError, match="traffic"):
        SpecConfig(drafter="suffix").validate()


# ---------------------------------------------------------------- traces and the stream


def controller_trace(pair):
    config = SpecConfig(gamma=5, drafter="controller", max_new_tokens=30)
    prompt = "1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2,"
    runs.run_trace(pair, prompt, config, chat=False)  # the store learns this output
    return runs.run_trace(pair, prompt, config, chat=False, baseline=True)


def test_a_controller_trace_round_trips_with_its_choices(pair):
    trace = controller_trace(pair)
    assert trace_from_json(trace.to_json()) == trace
    assert {r.draft_source for r in trace.rounds if r.drafted} <= {"traffic", "model", "both"}
    assert any(r.draft_source for r in trace.rounds)


def test_the_loader_refuses_a_bad_or_misplaced_source(pair):
    trace = controller_trace(pair)
    data = json.loads(trace.to_json())
    index = next(i for i, r in enumerate(data["rounds"]) if r["drafted"])
    data["rounds"][index]["draft_source"] = "oracle"
    with pytest.raises(TraceError, match="draft_source"):
        trace_from_json(json.dumps(data))
    data["rounds"][index]["draft_source"] = ""  # a controller round that drafted must name its source
    with pytest.raises(TraceError, match="draft_source"):
        trace_from_json(json.dumps(data))
    model = json.loads(runs.run_trace(pair, "1, 2, 3,", SpecConfig(gamma=3, max_new_tokens=8), chat=False).to_json())
    model["rounds"][0]["draft_source"] = "traffic"  # the model drafter never names one
    with pytest.raises(TraceError, match="draft_source"):
        trace_from_json(json.dumps(model))
    del model["rounds"][0]["draft_source"]  # older traces have no such field
    assert trace_from_json(json.dumps(model)).rounds[0].draft_source == ""


def test_stream_rows_and_metrics(pair):
    from specviz.bench.stream import Request

    requests = [Request("1, 2, 3, 1, 2, 3,", "a"), Request("1, 2, 3, 1, 2, 3,", "a"), Request("x y z x y", "b")]
    config = SpecConfig(gamma=4, max_new_tokens=16)
    rows = run_stream(pair, requests, config, chat=False)
    assert [r["store"]["requests"] for r in rows] == [1, 2, 3]
    assert rows[1]["traffic"]["mean_accepted_per_round"] > rows[0]["traffic"]["mean_accepted_per_round"]
    for r in rows:
        for drafter in ("model", "traffic", "controller"):
            m = r[drafter]
            assert m["mean_acceptance_length"] == pytest.approx(1 + m["accepted"] / max(m["drafts"], 1))
            rates = m["per_position_acceptance_rate"]
            assert rates == sorted(rates, reverse=True) and all(0 <= x <= 1 for x in rates)
    summary = summarize(rows)
    assert summary["drift"]["at"] == 2
    assert acceptance_metrics([])["mean_acceptance_length"] == 1.0


def test_drift_recovery_needs_a_rolling_mean_that_stays_back():
    values = [4, 4, 4, 4, 4, 1, 4, 1, 3.7, 3.7, 3.7, 3.7]
    rows = [{"phase": "ab"[i >= 5], "controller": {"mean_accepted_per_round": v}} for i, v in enumerate(values)]
    drift = drift_recovery(rows, 5)
    assert drift["pre_drift_level"] == 4 and drift["rolling"][:3] == pytest.approx([2, 2.9, 2.8])
    assert drift["recovered_after"] == 6 == drift["first_back_after"]  # the single 4.0 after the drift is no recovery
    rows[-1]["controller"]["mean_accepted_per_round"] = 1.0
    drift = drift_recovery(rows, 5)
    assert drift["recovered_after"] is None and drift["first_back_after"] == 6  # back, then down again at the end


def test_stream_repeats_keep_the_fastest_run_and_learn_each_request_once(pair, monkeypatch):
    import specviz.bench.stream as stream
    from specviz.bench.stream import Request

    config = SpecConfig(gamma=4, max_new_tokens=12)
    store = TrafficStore()
    run_stream(pair, [Request("1, 2, 3, 1, 2, 3,", "a")], config, chat=False, store=store)
    before = copy.deepcopy(controller_memory(store))
    order = []
    restored = []
    restore = stream.restore_controller_memory
    monkeypatch.setattr(
        stream,
        "restore_controller_memory",
        lambda s, m: (restored.append(copy.deepcopy(m)), order.append("restore"), restore(s, m)),
    )
    generate = stream.speculative_generate
    monkeypatch.setattr(
        stream,
        "speculative_generate",
        lambda p, i, c, cancel=None, traffic=None: (order.append(c.drafter), generate(p, i, c, cancel, traffic))[1],
    )
    row = run_stream(pair, [Request("1, 2, 3, 1, 2,", "a")], config, chat=False, store=store, repeats=3)[0]
    assert row["repeats"] == 3 and store.requests == 2  # the request joined the traffic once
    assert len(restored) == 2  # the second and third controller runs start where the first did
    for memory in restored:
        assert memory.traffic_rates == before.traffic_rates and memory.model_rate == before.model_rate
    for drafter in ("model", "traffic", "controller"):
        speedups = row[drafter]["repeat_speedups"]
        assert len(speedups) == 3 and row[drafter]["speedup"] == pytest.approx(max(speedups))
    pairs = zip(row["controller"]["repeat_speedups"], row["model"]["repeat_speedups"], strict=True)
    same_repeat = sorted(c / m for c, m in pairs)
    assert row["controller_over_model_paired"] == pytest.approx(same_repeat[1])  # the median of the three pairs
    # the drafters rotate each repeat, and each later controller run starts right after its memory is restored
    assert order == (
        ["model", "traffic", "controller"]
        + ["traffic", "restore", "controller", "model"]
        + ["restore", "controller", "model", "traffic"]
    )
    mean = run_stream(pair, [Request("1, 2, 3,", "a")], config, chat=False, repeats=2, aggregate="mean")[0]
    harmonic = 2 / sum(1 / x for x in mean["model"]["repeat_speedups"])  # tokens over seconds, as the methods bench
    assert mean["model"]["speedup"] == pytest.approx(harmonic)


def test_persistence_is_off_by_default_and_kept_in_the_model_cache_when_on(pair, monkeypatch, tmp_path):
    import specviz.drafters.traffic as traffic

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.delenv(traffic.PERSIST_ENV, raising=False)
    monkeypatch.setattr(traffic, "_STORES", {})
    assert traffic.persist_path(pair) is None
    traffic.remember(pair, [1, 2, 3, 4])
    assert not list(tmp_path.rglob("*.json"))  # off: nothing written
    monkeypatch.setenv(traffic.PERSIST_ENV, "1")
    traffic.remember(pair, [5, 6, 7, 8])
    path = traffic.persist_path(pair)
    assert path.is_file() and path.is_relative_to(tmp_path / "traffic")
    monkeypatch.setattr(traffic, "_STORES", {})  # a restart
    assert list(traffic_store(pair).index.sequences.values()) == [[1, 2, 3, 4], [5, 6, 7, 8]]
    traffic.forget(pair)
    assert traffic_store(pair).requests == 0 and not path.exists()


def test_same_repeat_ratio_is_the_median_of_each_repeats_ratio_and_0_without_a_rate():
    from types import SimpleNamespace

    from specviz.bench.stream import same_repeat_ratio

    def runs(*rates):
        return [([], SimpleNamespace(tokens_per_second=r)) for r in rates]

    assert same_repeat_ratio(runs(2.0, 3.0, 9.0), runs(2.0, 2.0, 3.0)) == pytest.approx(1.5)  # of 1, 1.5 and 3
    assert same_repeat_ratio(runs(2.0, 3.0), runs(2.0, 0.0)) == 0.0  # a run that decoded nothing: no ratio


def test_the_controller_times_its_own_work_apart_from_the_models(pair, prompt_ids, monkeypatch):
    """choice_seconds is the controller's lookup and choice only: a draft model slowed by 30 ms a call leaves it
    far below 30 ms while the round's draft time holds the 30 ms; other drafters record none."""
    import time

    from specviz.drafters.model import ModelDrafter

    slow = ModelDrafter.propose

    def slowed(self, *args, **kwargs):
        time.sleep(0.03)
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(ModelDrafter, "propose", slowed)
    config = SpecConfig(gamma=4, drafter="controller", max_new_tokens=16)
    rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, config, traffic=TrafficStore()))
    by_model = [r for r in rounds if r.draft_source == "model"]
    assert by_model and all(0 < r.choice_seconds < 0.01 and r.draft_seconds >= 0.03 for r in by_model)
    model_rounds, _ = run_to_end(speculative_generate(pair, prompt_ids, replace(config, drafter="model")))
    assert all(r.choice_seconds == 0.0 for r in model_rounds)


def test_choice_work_bounds_the_ratio_only_where_the_rounds_were_the_models():
    from specviz.bench.stream import choice_work

    def row(choice: float, seconds: float, same: bool) -> dict:
        return {
            "controller": {"choice_seconds": choice, "seconds": seconds, "rounds": 10},
            "controller_same_rounds": same,
        }

    work = choice_work([row(0.01, 2.0, True), row(0.02, 2.0, True), row(0.5, 2.0, False)])
    assert work["controller_same_rounds"] == 2 and work["controller_timed"] == 3
    assert work["controller_over_model_by_work"] == pytest.approx(0.99)  # 1 - 0.02 / 2; the third ran other rounds
    assert work["controller_choice_share_max"] == pytest.approx(0.25)
    assert work["controller_choice_ms_per_round"] == pytest.approx(1000 * 0.53 / 30)
    assert choice_work([row(0.5, 2.0, False)])["controller_over_model_by_work"] is None
    old = {"controller": {"rounds": 3, "seconds": 1.0}}  # a result written before the field
    assert choice_work([old]) == {}


def test_same_rounds_compares_what_was_drafted_and_committed(pair, prompt_ids):
    from specviz.bench.stream import same_rounds

    config = SpecConfig(gamma=4, max_new_tokens=16)
    first, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    again, _ = run_to_end(speculative_generate(pair, prompt_ids, config))
    rounds = [r for r in first if hasattr(r, "drafted")]
    assert same_rounds(rounds, [r for r in again if hasattr(r, "drafted")])
    shorter = replace(rounds[0], drafted=rounds[0].drafted[:-1])
    assert not same_rounds(rounds, [shorter, *rounds[1:]]) and not same_rounds(rounds, rounds[:-1])


# ---------------------------------------------------------------- issue 44: the saved store and poisoning


def test_the_saved_store_is_owner_only_and_written_atomically(tmp_path, monkeypatch):
    import os
    import stat

    store, path = TrafficStore(), tmp_path / "traffic" / "store.json"
    store.add([1, 2, 3, 4])
    store.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    before = path.read_bytes()
    store.add([5, 6, 7, 8])

    def interrupted(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(OSError, match="disk full"):
        store.save(path)
    assert path.read_bytes() == before and [p.name for p in path.parent.iterdir()] == ["store.json"]  # no half file
    monkeypatch.undo()
    again = TrafficStore()
    assert again.load(path, vocab=10) == 1 and again.load(tmp_path / "none.json", vocab=10) == 0


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"format": "specviz-traffic", "sequences": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"format": "specviz-traffic", "sequences": [[1, 2, 10]]}', "not a token id below 10"),
        ('{"format": "specviz-traffic", "sequences": [[1, -2, 3]]}', "not a token id below 10"),
        ('{"format": "specviz-traffic", "sequences": [[1, true, 3]]}', "not a token id below 10"),
        ('{"format": "specviz-traffic", "sequences": [[1, 2.0, 3]]}', "not a token id below 10"),
        ('{"format": "specviz-traffic", "sequences": [[1, 1e999]]}', "not a token id below 10"),
        ('{"format": "specviz-traffic", "sequences": [[1, ' + "9" * 5000 + "]]}", "not a traffic store file"),
        ('{"format": "specviz-traffic", "sequences": [[1, 2, 3]], "x": 1}', "the fields format, sequences"),
        ('{"format": "other", "sequences": []}', "format must be"),
        ('{"format": "specviz-traffic", "sequences": [1]}', r"sequences\[0\] must be a list of token ids"),
        ('{"format": "specviz-traffic", "sequences": "x"}', "sequences must be a list of token-id lists"),
        ('{"format": "specviz-traffic", "sequences": [[1], [2], [3], [4], [5]]}', "at most 4 sequences"),
        ('{"format": "specviz-traffic", "sequences": [[1, 2, 3, 4, 5, 6]]}', "at most 5 tokens"),
        ("not json", "not a traffic store file"),
    ],
)
def test_a_damaged_saved_store_is_refused_in_one_line(text, why, tmp_path):
    from specviz.drafters.suffix import TrafficFileError

    path = tmp_path / "store.json"
    path.write_text(text)
    store = TrafficStore(max_requests=4, max_tokens=5)
    with pytest.raises(TrafficFileError, match=why) as refused:
        store.load(path, vocab=10)
    assert "\n" not in str(refused.value) and store.requests == 0


def test_a_damaged_saved_store_refuses_the_run_until_it_is_dealt_with(pair, monkeypatch, tmp_path):
    import specviz.drafters.traffic as traffic
    from specviz.drafters.suffix import MAX_FILE_BYTES, TrafficFileError

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv(traffic.PERSIST_ENV, "1")
    monkeypatch.setattr(traffic, "_STORES", {})
    path = traffic.persist_path(pair)
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    for _ in range(2):
        with pytest.raises(TrafficFileError, match="refused .*over 16 MB.*delete it"):
            runs.run_trace(pair, "1, 2, 3,", SpecConfig(gamma=3, max_new_tokens=4, drafter="traffic"), chat=False)
    path.unlink()
    runs.run_trace(pair, "1, 2, 3,", SpecConfig(gamma=3, max_new_tokens=4), chat=False)
    assert traffic_store(pair).requests == 1 and path.is_file()


def test_a_lookup_reads_a_bounded_number_of_occurrences_the_latest_first():
    from specviz.drafters.suffix import MAX_SCAN

    store = TrafficStore()
    for _ in range(100):  # a visitor's 200,000 tokens of one repeated token
        store.add([5] * 2000)
    live = SuffixIndex()
    live.extend(-1, [5] * 30)
    m, found = longest_match([store.index, live], [5] * 30)
    assert MAX_SCAN <= 512 and m > 2 and len(found) <= 1024  # before issue 44: every one of ~200,000
    store.add([5, 5, 9, 9])  # the newest occurrence of (5, 5) is read first
    m, found = longest_match([store.index], [3, 5, 5])
    assert any(store.index.sequences[sid][e] == 9 for _, sid, e in found)
