"""The trace loader: a shared file loads only if every field is typed and in range and its parts agree as in a
recorded run; anything else is one TraceError naming the field (issue 14)."""

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from specviz import runs
from specviz.decoding.config import SpecConfig
from specviz.traces import check
from specviz.traces.check import Int, Record
from specviz.traces.trace import DraftedToken, RoundEvent, TraceError, load_trace, save_trace, trace_from_json

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "assets" / "traces").glob("*.json"))
GREEDY = ROOT / "assets" / "traces" / "1_code_greedy.json"  # greedy, all-accepted and rejected rounds
SAMPLED = ROOT / "assets" / "traces" / "2_prose_sampling.json"  # sampling (draws), finish_reason eos
BRANCHED = ROOT / "assets" / "traces" / "5_prose_auto_alternatives.json"  # alternatives, a kept one in round 3
TINY = ROOT / "tests" / "data" / "tiny_trace.json"


def data_of(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def mutated(path: Path, where: tuple, value) -> str:
    """The file's JSON with one value replaced; where is a key path, e.g. ("rounds", 2, "gamma")."""
    data = data_of(path)
    *parents, last = where
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return json.dumps(data)


def refused(text: str | bytes, *fragments: str) -> str:
    with pytest.raises(TraceError) as caught:
        trace_from_json(text)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    return message


# --- what must load -------------------------------------------------------------------------------------


def test_the_shipped_traces_are_all_there():
    assert len(SHIPPED) >= 5


@pytest.mark.parametrize("path", SHIPPED + [TINY], ids=lambda p: p.name)
def test_every_shipped_trace_loads_and_round_trips(path, tmp_path):
    trace = load_trace(path)
    assert trace.rounds and trace.baseline_summary is not None
    save_trace(trace, tmp_path / "again.json")
    again = load_trace(tmp_path / "again.json")
    assert again == trace
    assert again.rounds[-1] == trace.rounds[-1] and again.config == trace.config  # dataclasses, field by field
    assert again is not trace


def test_a_file_object_and_a_string_load_like_the_path():
    trace = load_trace(GREEDY)
    with GREEDY.open("rb") as f:
        assert load_trace(f) == trace
    assert trace_from_json(GREEDY.read_text(encoding="utf-8")) == trace


def test_a_named_vocabulary_bounds_the_ids():
    data = data_of(TINY)
    data["pair"]["vocab_size"] = "101"  # the tiny pair: <unk> + 100 printable characters
    assert trace_from_json(json.dumps(data)).pair["vocab_size"] == "101"
    data["pair"]["vocab_size"] = str(max(data["prompt_ids"]))  # one too small for the prompt's largest id
    refused(json.dumps(data), "prompt_ids holds the id", "outside the vocabulary")
    data["pair"]["vocab_size"] = "lots"
    refused(json.dumps(data), "vocab_size")


def test_older_traces_without_newer_settings_load():
    data = data_of(GREEDY)
    for key in ("lookahead", "alternatives", "fuse_prompt"):
        data["config"].pop(key, None)
    for r in data["rounds"]:
        r.pop("alternatives", None)
        r.pop("bookkeeping_seconds", None)
        for d in r["drafted"]:
            d.pop("from_lookahead", None)
    assert trace_from_json(json.dumps(data)).config.alternatives == 0


def test_caps_cover_what_a_run_may_hold():
    assert check.MAX_PROMPT_CHARS >= runs.MAX_PROMPT_CHARS
    assert check.MAX_PROMPT_IDS >= runs.MAX_PROMPT_TOKENS
    biggest = max(path.stat().st_size for path in SHIPPED)
    assert check.MAX_FILE_BYTES > 100 * biggest


def test_a_reader_must_know_every_field():
    with pytest.raises(TypeError, match="out of step"):
        Record(DraftedToken, {"id": Int(0, 1)})


# Runs of every kind the engine makes: the agreement checks must hold for each, or a real trace is refused.
RUN_SETTINGS = [
    SpecConfig(gamma=4, max_new_tokens=30),
    SpecConfig(gamma=3, temperature=0.9, top_k=20, top_p=0.9, seed=3, max_new_tokens=30),
    SpecConfig(gamma=2, schedule="adaptive", gamma_max=8, max_new_tokens=30),
    SpecConfig(schedule="auto", gamma_max=16, draft_confidence=0.5, max_new_tokens=40),
    SpecConfig(schedule="auto", gamma_max=12, lookahead=6, max_new_tokens=40),
    SpecConfig(gamma=5, drafter="ngram", max_new_tokens=30),
    SpecConfig(gamma=5, drafter="ngram", temperature=1.0, seed=2, max_new_tokens=30),
    SpecConfig(gamma=4, alternatives=2, draft_confidence=0.9, max_new_tokens=30),
    SpecConfig(gamma=4, alternatives=3, temperature=1.0, seed=5, max_new_tokens=30),
    SpecConfig(gamma=4, fuse_prompt=True, max_new_tokens=30),
    SpecConfig(gamma=3, fuse_prompt=True, alternatives=2, temperature=0.7, lookahead=4, max_new_tokens=30),
    SpecConfig(gamma=6, max_new_tokens=1),
    SpecConfig(gamma=32, gamma_max=32, record_top=64, max_new_tokens=12),
]
RUN_PROMPT = "1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2,"


def loads_again(trace):
    again = trace_from_json(trace.to_json())
    assert again == trace
    return again


@pytest.mark.parametrize("config", RUN_SETTINGS, ids=range(len(RUN_SETTINGS)))
def test_every_kind_of_run_loads(pair, config):
    loads_again(runs.run_trace(pair, RUN_PROMPT, config, chat=False, baseline=True))
    loads_again(runs.run_trace(pair, "x", config, chat=False))  # a one-token prompt


@pytest.mark.parametrize("config", [RUN_SETTINGS[0], RUN_SETTINGS[1], RUN_SETTINGS[5], RUN_SETTINGS[8]], ids=range(4))
def test_runs_that_end_at_an_end_of_sequence_load(pair, config):
    free = runs.run_trace(pair, RUN_PROMPT, config, chat=False)
    ended = cut = 0
    for eos in dict.fromkeys([d.id for r in free.rounds for d in r.drafted] + list(free.summary.token_ids[3:8])):
        pair.target.generation_config.eos_token_id = eos
        try:
            trace = loads_again(runs.run_trace(pair, RUN_PROMPT, config, chat=False, baseline=True))
        finally:
            pair.target.generation_config.eos_token_id = None
        ended += trace.summary.finish_reason == "eos"
        cut += len(trace.rounds[-1].appended) <= trace.rounds[-1].n_accepted  # ended on an accepted draft
    assert ended and (cut or config.drafter == "ngram")  # the n-gram drafter seldom proposes the end here


def test_a_cancelled_run_loads(pair):
    import threading

    cancel, seen = threading.Event(), []

    def on_event(event):
        seen.append(event)
        if len(seen) == 2:
            cancel.set()

    trace = runs.run_trace(
        pair, RUN_PROMPT, SpecConfig(max_new_tokens=50), chat=False, baseline=True, cancel=cancel, on_event=on_event
    )
    assert loads_again(trace).summary.finish_reason == "cancelled"


# --- types and ranges: each field is checked, and the message names it -----------------------------------

FIRST = ("rounds", 0)
DRAFT = ("rounds", 0, "drafted", 0)


@pytest.mark.parametrize(
    "path, where, value, fragment",
    [
        (GREEDY, FIRST + ("gamma",), '5"><script>alert(1)</script>', "rounds[0].gamma must be an integer"),
        (GREEDY, FIRST + ("gamma",), True, "rounds[0].gamma must be an integer"),  # a bool is not a number
        (GREEDY, FIRST + ("gamma",), 5.0, "rounds[0].gamma must be an integer"),
        (GREEDY, FIRST + ("gamma",), 33, "rounds[0].gamma must be between 0 and 32"),
        (GREEDY, FIRST + ("position",), 10**9, "rounds[0].position must be between"),
        (GREEDY, DRAFT + ("verdict",), 'accepted" onmouseover="x', "rounds[0].drafted[0].verdict must be one of"),
        (GREEDY, DRAFT + ("verdict",), ["accepted"], "verdict must be one of"),
        (GREEDY, DRAFT + ("id",), -1, "rounds[0].drafted[0].id must be between 0"),
        (GREEDY, DRAFT + ("id",), 2**31, "rounds[0].drafted[0].id must be between 0"),
        (GREEDY, DRAFT + ("id",), "8420", "rounds[0].drafted[0].id must be an integer"),
        (GREEDY, DRAFT + ("q",), 1.5, "rounds[0].drafted[0].q must be between 0 and 1"),
        (GREEDY, DRAFT + ("p",), -0.01, "rounds[0].drafted[0].p must be between 0 and 1"),
        (GREEDY, DRAFT + ("ratio",), "1", "rounds[0].drafted[0].ratio must be a number"),
        (GREEDY, DRAFT + ("text",), 42, "rounds[0].drafted[0].text must be a string"),
        (GREEDY, DRAFT + ("text",), "x" * 2000, "rounds[0].drafted[0].text is 2000 characters long"),
        (GREEDY, DRAFT + ("from_lookahead",), 1, "from_lookahead must be true or false"),
        (SAMPLED, DRAFT + ("u",), 1.5, "rounds[0].drafted[0].u must be between 0 and 1"),
        (GREEDY, FIRST + ("next_source",), "<b>bonus</b>", "rounds[0].next_source must be one of"),
        (GREEDY, FIRST + ("next_token",), 5, "rounds[0].next_token must be an object"),
        (GREEDY, FIRST + ("next_token", "prob"), 2, "rounds[0].next_token.prob must be between"),
        (GREEDY, FIRST + ("elapsed",), -1.0, "rounds[0].elapsed must be between 0"),
        (GREEDY, FIRST + ("elapsed",), 1e300, "rounds[0].elapsed must be between 0"),
        (GREEDY, FIRST + ("verify_seconds",), None, "rounds[0].verify_seconds must be a number"),
        (GREEDY, FIRST + ("top_p",), [{"id": 1, "text": "a", "prob": 0.1}] * 65, "rounds[0].top_p has 65 items"),
        (GREEDY, FIRST + ("drafted",), {"id": 1}, "rounds[0].drafted must be an array"),
        (GREEDY, FIRST + ("appended",), [], "rounds[0].appended has 0 items"),
        (GREEDY, FIRST + ("rejection_index",), -1, "rounds[0].rejection_index must be between"),
        (GREEDY, ("rounds",), [{}] * 1025, "rounds has 1025 items"),
        (GREEDY, ("baseline", 0, "seconds"), "0.2", "baseline[0].seconds must be a number"),
        (GREEDY, ("summary", "finish_reason"), "done", "summary.finish_reason must be one of"),
        (GREEDY, ("summary", "method"), "magic", "summary.method must be one of"),
        (GREEDY, ("summary", "acceptance_rate"), 1.2, "summary.acceptance_rate must be between"),
        (GREEDY, ("summary", "text"), None, "summary.text must be a string"),
        (GREEDY, ("baseline_summary",), 3, "baseline_summary must be an object"),
        (GREEDY, ("prompt",), "x" * 40_000, "prompt is 40000 characters long"),
        (GREEDY, ("prompt_ids",), list(range(10_000)), "prompt_ids has 10000 items"),
        (GREEDY, ("prompt_ids",), [], "prompt_ids has 0 items"),
        (GREEDY, ("note",), {"a": 1}, "note must be a string"),
        (GREEDY, ("pair",), ["a"], "pair must be an object"),
        (GREEDY, ("pair", "target"), 7, "pair['target'] must be a string"),
        (GREEDY, ("pair",), {str(i): "x" for i in range(40)}, "pair has 40 entries"),
        (GREEDY, ("config", "gamma"), "5", "config.gamma must be an integer"),
        (GREEDY, ("config", "gamma"), 0, "config.gamma must be between 1"),
        (GREEDY, ("config", "schedule"), "<i>", "config.schedule must be one of"),
        (GREEDY, ("config", "temperature"), "hot", "config.temperature must be a number"),
        (GREEDY, ("config", "record_top"), 10**6, "config.record_top must be between 0 and 64"),
        (GREEDY, ("config", "fuse_prompt"), "yes", "config.fuse_prompt must be true or false"),
        (GREEDY, ("config", "gamma_max"), 3, "config: gamma_max must be between gamma"),  # SpecConfig.validate's word
        (GREEDY, ("config",), [], "config must be an object"),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_refused(path, where, value, fragment):
    refused(mutated(path, where, value), "damaged trace", fragment)


def test_unknown_and_missing_fields_are_refused():
    data = data_of(GREEDY)
    data["rounds"][0]["colour"] = "red"
    refused(json.dumps(data), "rounds[0] has unknown fields: 'colour'")
    data = data_of(GREEDY)
    del data["rounds"][1]["n_accepted"]
    refused(json.dumps(data), "rounds[1] lacks the fields: n_accepted")
    data = data_of(GREEDY)
    data["extra"] = 1
    refused(json.dumps(data), "the trace has unknown fields: 'extra'")


def test_a_lone_surrogate_is_refused():
    refused(mutated(GREEDY, DRAFT + ("text",), "\ud800"), "rounds[0].drafted[0].text holds an unpaired surrogate")


# --- agreement: a trace must be internally consistent ---------------------------------------------------


def bump(value):
    return value + 1


@pytest.mark.parametrize(
    "path, where, change, fragment",
    [
        (GREEDY, ("rounds", 1, "index"), bump, "rounds[1].index is 2"),
        (GREEDY, ("rounds", 1, "position"), bump, "rounds[1].position is 2; the rounds before it appended 1"),
        (GREEDY, ("rounds", 2, "n_accepted"), bump, "rounds[2].n_accepted is 2; its verdicts give 1"),
        (GREEDY, ("rounds", 2, "rejection_index"), lambda v: None, "rounds[2].drafted: the verdicts disagree"),
        (GREEDY, ("rounds", 2, "rejection_index"), lambda v: 4, "rounds[2].drafted: the verdicts disagree"),
        (GREEDY, ("rounds", 1, "rejection_index"), lambda v: 5, "rounds[1].rejection_index is 5, past its 5 drafted"),
        (GREEDY, ("rounds", 2, "next_source"), lambda v: "bonus", "rounds[2].next_source is 'bonus'"),
        (GREEDY, ("rounds", 2, "appended"), lambda v: v + [v[-1]], "rounds[2].appended is not the accepted drafts"),
        (GREEDY, ("rounds", 2, "appended"), lambda v: v[::-1], "rounds[2].appended is not the accepted drafts"),
        (GREEDY, ("rounds", 2, "gamma"), lambda v: 4, "rounds[2].gamma is 4, with 5 drafted"),
        (GREEDY, ("rounds", 2, "draft_forwards"), lambda v: 6, "rounds[2].draft_forwards is 6"),
        (GREEDY, ("rounds", 1, "top_q"), lambda v: [{"id": 1, "text": "a", "prob": 0.5}], "a bonus token has no top_q"),
        (GREEDY, ("rounds", 2, "target_cache_before"), bump, "rounds[2].target_cache_before"),
        (GREEDY, ("rounds", 2, "target_cache_after"), bump, "rounds[2].target_cache_after"),
        (GREEDY, ("rounds", 2, "draft_cache_before"), bump, "rounds[2].draft_cache_before"),
        (GREEDY, ("rounds", 2, "draft_cache_after"), lambda v: v + 5, "rounds[2].draft_cache_after"),
        (GREEDY, ("rounds", 3, "elapsed"), lambda v: 0.5, "rounds[3].elapsed (0.5 s) is before the one ahead of it"),
        (GREEDY, ("rounds", 0, "drafted", 0, "u"), lambda v: 0.5, "rounds[0].drafted[0].u is 0.5 for a rejected token"),
        (SAMPLED, ("rounds", 0, "drafted", 0, "u"), lambda v: None, "rounds[0].drafted[0].u is null"),
        (
            SAMPLED,
            ("rounds", 1, "drafted", 0, "ratio"),
            lambda v: 0.1,
            "rounds[1].drafted[0].verdict is 'accepted', but u",
        ),
        (SAMPLED, ("rounds", 11, "appended"), lambda v: v[:1], "rounds[11].appended stops at an end of sequence, yet"),
        (SAMPLED, ("summary", "finish_reason"), lambda v: "length", "summary: 29 tokens, finish_reason 'length'"),
        (GREEDY, ("summary", "token_ids"), lambda v: v[:-1] + [v[0]], "summary.token_ids are not the tokens"),
        (GREEDY, ("summary", "new_tokens"), lambda v: v - 1, "summary.new_tokens is 63; its events appended 64"),
        (GREEDY, ("summary", "rounds"), bump, "summary.rounds is 18; its events add up to 17"),
        (GREEDY, ("summary", "drafted"), bump, "summary.drafted is 84"),
        (GREEDY, ("summary", "accepted"), bump, "summary.accepted is 48"),
        (GREEDY, ("summary", "draft_forwards"), bump, "summary.draft_forwards is 84"),
        (GREEDY, ("summary", "acceptance_rate"), lambda v: v / 2, "summary.acceptance_rate"),
        (GREEDY, ("summary", "mean_accepted_per_round"), lambda v: v + 1, "summary.mean_accepted_per_round"),
        (GREEDY, ("summary", "tokens_per_second"), lambda v: v * 10, "summary.tokens_per_second"),
        (GREEDY, ("summary", "seconds"), lambda v: 1.0, "summary.seconds (1) ends before"),
        (GREEDY, ("summary", "method"), lambda v: "autoregressive", "summary.method must be 'speculative'"),
        (GREEDY, ("baseline", 5, "token", "id"), bump, "baseline_summary.token_ids are not the tokens"),
        (GREEDY, ("baseline", 5, "index"), bump, "baseline[5].index is 6"),
        (GREEDY, ("baseline", 5, "elapsed"), lambda v: 0.0, "baseline[5].elapsed"),
        (GREEDY, ("baseline_summary", "method"), lambda v: "speculative", "baseline_summary.method must be"),
        (GREEDY, ("summary", "finish_reason"), lambda v: "cancelled", "a cancelled run has no baseline"),
        (GREEDY, ("baseline_summary", "new_tokens"), bump, "baseline_summary.new_tokens is 65"),
        (GREEDY, ("baseline_summary", "seconds"), lambda v: 1.0, "baseline_summary.seconds (1) ends before"),
        (GREEDY, ("baseline_summary",), lambda v: None, "baseline has tokens but there is no baseline_summary"),
        (GREEDY, ("config", "max_new_tokens"), lambda v: 32, "finish_reason 'length', max_new_tokens 32"),
        (GREEDY, ("config", "record_top"), lambda v: 4, "rounds[0].top_p has 8 tokens; the settings' record_top is 4"),
        (
            GREEDY,
            ("config", "fuse_prompt"),
            lambda v: True,
            "rounds[0].target_cache_before is 48; the round before left 0",
        ),
        (GREEDY, ("config", "temperature"), lambda v: 0.8, "rounds[0].drafted[0].u is null for a rejected token"),
        (GREEDY, ("config", "drafter"), lambda v: "ngram", "rounds[0].draft_forwards is 5 for 5 tokens"),
        (BRANCHED, ("rounds", 3, "alternatives", 0, "verdict"), lambda v: "unchecked", "rounds[3].alternatives:"),
        (BRANCHED, ("rounds", 3, "n_accepted"), lambda v: v - 1, "rounds[3].n_accepted is 2; its verdicts give 3"),
        (BRANCHED, ("config", "alternatives"), lambda v: 1, "rounds[0].alternatives has 2"),
    ],
)
def test_a_trace_whose_parts_disagree_is_refused(path, where, change, fragment):
    data = data_of(path)
    *parents, last = where
    node = data
    for key in parents:
        node = node[key]
    node[last] = change(copy.deepcopy(node[last]))
    refused(json.dumps(data), "inconsistent trace", fragment)


def test_a_run_stopped_before_its_first_round():
    """Cancelled before round 0 it is a trace of no tokens; an end of sequence needs a token."""
    data = data_of(GREEDY)
    data.update(rounds=[], baseline=[], baseline_summary=None)
    data["summary"].update(
        token_ids=[],
        text="",
        new_tokens=0,
        rounds=0,
        drafted=0,
        accepted=0,
        acceptance_rate=0.0,
        mean_accepted_per_round=0.0,
        tokens_per_second=0.0,
        draft_forwards=0,
        finish_reason="cancelled",
    )
    assert trace_from_json(json.dumps(data)).summary.new_tokens == 0
    data["summary"]["finish_reason"] = "eos"
    refused(json.dumps(data), "summary.finish_reason is 'eos' but no token was made")


def test_the_branched_trace_keeps_an_alternative_where_the_check_expects_it():
    """The mutations above rely on round 3 of this trace keeping an alternative."""
    r = load_trace(BRANCHED).rounds[3]
    assert r.kept_alternative is not None and r.rejection_index == len(r.drafted) - 1


# --- the parser: nothing escapes, nothing huge is built --------------------------------------------------


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"not json at all", "not a JSON file"),
        (b"\xff\xfe\x00", "not a JSON file"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"format": "specviz-trace", "version": ' + b"9" * 5000 + b"}", "Exceeds the limit (4300 digits)"),
        (b'{"format": "specviz-trace", "version": 1e999}', "version inf is not supported"),
        (b'{"format": "specviz-trace", "version": NaN}', "NaN is not a number a trace can hold"),
        (b'{"format": "specviz-trace", "version": -Infinity}', "-Infinity is not a number"),
        (b"[" + b"[]," * 1_000_001 + b"[]]", "it has 1000003 '[' characters"),
        (b"[" + b"{}," * 1_000_001 + b"{}]", "objects"),
        (b" " * (32 * 2**20 + 1), "it is over 32 MB"),
        (b'{"format": "specviz-trace", "version": true}', "version true is not supported"),
        (b'{"format": "specviz-trace", "version": [[[1]]]}', "version an array is not supported"),
    ],
)
def test_hostile_json_is_one_trace_error(content, fragment):
    refused(content, fragment)


def test_non_finite_times_are_refused():
    text = mutated(GREEDY, ("rounds", 0, "elapsed"), float("inf"))  # json.dumps writes Infinity
    refused(text, "Infinity is not a number")
    refused(mutated(GREEDY, ("summary", "seconds"), float("nan")), "NaN is not a number")
    refused(
        mutated(GREEDY, ("rounds", 0, "elapsed"), 1.0).replace('"elapsed": 1.0', '"elapsed": 1e999', 1),
        "rounds[0].elapsed must be between 0 and 86400, got inf",
    )
    refused(mutated(GREEDY, ("summary", "tokens_per_second"), 10**400), "summary.tokens_per_second must be between")


def test_an_oversized_file_is_refused_without_being_read_whole(tmp_path):
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.truncate(2 * check.MAX_FILE_BYTES)  # sparse: cheap to make
    with pytest.raises(TraceError, match="it is over 32 MB"):
        load_trace(path)

    class Stream:
        asked = None

        def read(self, size=-1):
            Stream.asked = size
            return b" " * (size if size > 0 else 2 * check.MAX_FILE_BYTES)

    with pytest.raises(TraceError, match="it is over 32 MB"):
        load_trace(Stream())
    assert Stream.asked == check.MAX_FILE_BYTES + 1


def test_a_trace_that_agrees_with_itself_still_loads_after_a_consistent_edit():
    """The checks refuse disagreement, not edits: a note and pair names may change freely."""
    trace = load_trace(GREEDY)
    edited = replace(trace, note="<b>shared</b> by a user", pair={**trace.pair, "target": "x" * 1000})
    assert trace_from_json(edited.to_json()) == edited


def test_round_events_keep_their_fields():
    """The loader reads exactly the engine's fields (a renamed or added one fails the Record check at import)."""
    assert {"alternatives", "bookkeeping_seconds"} <= set(RoundEvent.__dataclass_fields__)
