"""Every file the app or the CLI reads is checked by a pydantic model: the shipped file reads back whole, and a
damaged one is refused in one line that names the file and the field (issue 57). Traces, batching results, heads
reports, stream files and saved traffic stores have their own modules' tests (test_trace, test_batching_file,
test_heads, test_cli, test_traffic)."""

import json
from pathlib import Path

import pytest

from specviz.bench.stream import StreamError, load_stream_result
from specviz.decoding.config import ConfigError
from specviz.lessons import experiments, theory
from specviz.lessons.prompts import read_prompts

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"


def refused(error: type[Exception], read, path: Path, *needles: str) -> str:
    with pytest.raises(error) as caught:
        read(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and all(n in message for n in needles), message
    return message


def test_the_shipped_prompts_read_whole():
    assert read_prompts() == json.loads((ASSETS / "prompts.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[1, 2]", '{"category": ["prompt", ...]}'),
        ('{"code": "x"}', "['code'] must be an array"),
        ('{"code": ["a", 3]}', "['code'][1] must be a string, got 3"),
        ('{"code": ["' + "a" * 8001 + '"]}', "['code'][0] is 8001 characters long"),
        ('{"code": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
        ("{not json", "not a JSON file"),
    ],
)
def test_a_damaged_prompt_file_is_refused_in_one_line(text, needle, tmp_path):
    path = tmp_path / "prompts.json"
    path.write_text(text)
    refused(ConfigError, read_prompts, path, needle)


def test_the_experiments_read_their_prompts_through_the_checked_reader(tmp_path, monkeypatch):
    assert experiments.CODE == read_prompts()["code"][0]
    path = tmp_path / "prompts.json"
    path.write_text('{"code": [5]}')
    monkeypatch.setattr(experiments, "PROMPTS_FILE", path)
    refused(ConfigError, lambda _: experiments._example("code"), path, "['code'][0] must be a string")


def test_the_shipped_verify_curve_reads_whole():
    raw = json.loads((ASSETS / "verify_curve_cpu.json").read_text(encoding="utf-8"))
    assert theory.read_verify_curve(ASSETS / "verify_curve_cpu.json") == raw


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"format": "other"}, "format must be one of 'specviz-verify-curve'"),
        ({"target_seconds": []}, "target_seconds has 0 items"),
        ({"target_seconds": [0.2, True]}, "target_seconds[1] must be a number, got true"),
        ({"target_step_seconds": 0}, "target_step_seconds must be above 0"),
        ({"draft_step_seconds": "fast"}, "draft_step_seconds must be a number"),
    ],
)
def test_a_damaged_verify_curve_is_refused_in_one_line(change, needle, tmp_path):
    raw = json.loads((ASSETS / "verify_curve_cpu.json").read_text(encoding="utf-8"))
    path = tmp_path / "verify_curve_cpu.json"
    path.write_text(json.dumps({**raw, **change}))
    refused(theory.CurveError, theory.read_verify_curve, path, needle)
    assert theory.load_verify_curve(path) is None  # the pages list it among the damaged curves


@pytest.mark.parametrize("path", sorted((ASSETS / "learning").glob("*.json")), ids=lambda p: p.stem)
def test_every_shipped_stream_result_reads_whole(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    doc = load_stream_result(path)
    assert doc["requests"] == raw["requests"]
    assert {k: doc["summary"][k] for k in raw["summary"]} == raw["summary"]  # recomputed (older files hold fewer)


def _damage(row: dict, where: str, value: object) -> None:
    *parents, last = where.split(".")
    for key in parents:
        row = row[key]
    if value is None:
        del row[last]
    else:
        row[last] = value


@pytest.mark.parametrize(
    "where, value, needle",
    [
        ("controller.acceptance_rate", 1.5, "requests[3].controller.acceptance_rate must be between 0 and 1, got 1.5"),
        ("controller", None, "requests[3] lacks the fields: controller"),
        ("traffic.rounds", "9", "requests[3].traffic.rounds must be an integer"),
        ("controller.sources", [1], "requests[3].controller.sources must be an object"),
        ("store.hit_rate", float("nan"), "NaN is not a number"),
    ],
)
def test_a_damaged_stream_result_is_refused_in_one_line(where, value, needle, tmp_path):
    raw = json.loads((ASSETS / "learning" / "inventory_drift.json").read_text(encoding="utf-8"))
    _damage(raw["requests"][3], where, value)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(raw))
    refused(StreamError, load_stream_result, path, needle)


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"curve"'])
def test_a_file_that_is_no_object_is_refused_in_one_line(text, tmp_path):
    path = tmp_path / "file.json"
    path.write_text(text)
    refused(theory.CurveError, theory.read_verify_curve, path, "the file must be a verify-cost curve (a JSON object)")
    refused(StreamError, load_stream_result, path, "the file must be a stream result (a JSON object)")
