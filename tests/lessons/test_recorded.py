"""Recorded lab batches and lossless distributions (lessons/recorded.py): written from real runs of the tiny pair,
read back identically, and refused, with a one-line reason, when a file is not one of ours or is damaged."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from specviz.decoding.config import SpecConfig
from specviz.lessons import lab, recorded
from specviz.lessons.lossless import next_token_distributions
from specviz.lessons.recorded import Recorded, RecordedError

ORIGIN = Recorded("tiny ← tiny+noise", "test CPU (2 CPUs)", "2026-12-01 11:00", "tests/lessons/test_recorded.py")


@pytest.fixture(scope="module")
def lab_text(pair) -> str:
    base = SpecConfig(gamma=3, max_new_tokens=8, record_top=0)
    plan = lab.plan_batch(
        {"code": ["def f(x):"], "prose": ["Once upon"]}, ["code", "prose"], 1, [0.0], ["model"], ["constant"], base
    )
    return recorded.lab_to_json(ORIGIN, lab.run_batch(pair, plan, chat=False))


@pytest.fixture(scope="module")
def lossless_text(pair) -> str:
    dist = next_token_distributions(pair, "def f(x):", SpecConfig(temperature=1.0, top_k=20), chat=False)
    return recorded.lossless_to_json(ORIGIN, "def f(x):", "", dist, pair.token_text)


def test_a_lab_batch_reads_back_as_recorded(lab_text):
    batch = recorded.lab_from_json(lab_text)
    assert batch.recorded == ORIGIN
    assert [r.category for r in batch.runs] == ["code", "prose"]
    assert all(r.trace.summary.new_tokens == 8 and r.prompt == r.trace.prompt for r in batch.runs)
    assert "test CPU" in recorded.recorded_line(batch.recorded) and "2026-12-01" in recorded.recorded_line(
        batch.recorded
    )


def test_lossless_distributions_read_back_exactly(pair, lossless_text):
    found = recorded.lossless_from_json(lossless_text)
    fresh = next_token_distributions(pair, "def f(x):", SpecConfig(temperature=1.0, top_k=20), chat=False)
    assert torch.allclose(found.distributions.p, fresh.p, atol=1e-6)
    assert torch.allclose(found.distributions.q, fresh.q, atol=1e-6)
    assert found.distributions.top_k == 20 and found.prompt == "def f(x):" and found.recorded == ORIGIN


def _edit(text: str, change) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


def _lab_bad_trace(d: dict) -> None:
    d["runs"][0]["trace"]["summary"]["new_tokens"] = 7


LAB_DAMAGE = [
    (lambda d: d.update(format="specviz-trace"), "not a recorded result"),
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d.update(version=True), "version true is not supported"),
    (lambda d: d.update(extra=1), "unknown fields"),
    (lambda d: d.pop("recorded"), "lacks"),
    (lambda d: d["recorded"].update(when=5), "recorded.when must be a string"),
    (lambda d: d.update(runs=[]), "runs must be an array of 1 to 64"),
    (lambda d: d.update(runs=d["runs"] * 33), "runs must be an array of 1 to 64"),
    (lambda d: d["runs"][0].update(category=["x"]), "runs[0].category must be a string"),
    (lambda d: d["runs"][1].pop("trace"), "runs[1] must be an object"),
    (_lab_bad_trace, "runs[0].trace: inconsistent trace"),
]


@pytest.mark.parametrize("change, message", LAB_DAMAGE)
def test_a_damaged_lab_batch_is_refused_with_its_reason(lab_text, change, message):
    with pytest.raises(RecordedError) as caught:
        recorded.lab_from_json(_edit(lab_text, change))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def _scale_p(d: dict) -> None:
    for token in d["tokens"]:
        token["p"] *= 0.5


LOSSLESS_DAMAGE = [
    (lambda d: d.update(format="specviz-lab-batch"), "not a recorded result"),
    (lambda d: d.update(temperature=0), "temperature must be between"),
    (lambda d: d.update(vocab_size="101"), "vocab_size must be an integer"),
    (lambda d: d["tokens"][0].update(id=d["vocab_size"]), "tokens[0].id must be between"),
    (lambda d: d["tokens"][1].update(id=d["tokens"][0]["id"]), "an id appears twice"),
    (lambda d: d["tokens"][0].update(p=1.5), "tokens[0].p must be between"),
    (lambda d: d["tokens"][0].update(q=-0.1), "tokens[0].q must be between"),
    (_scale_p, "p sums to"),
    (lambda d: d.update(tokens=[]), "tokens must be an array of 1 to"),
    (lambda d: d["tokens"][0].update(extra=1), "tokens[0] must be an object with id, text, p and q"),
    (lambda d: d.pop("prefix"), "lacks"),
]


@pytest.mark.parametrize("change, message", LOSSLESS_DAMAGE)
def test_a_damaged_lossless_recording_is_refused_with_its_reason(lossless_text, change, message):
    with pytest.raises(RecordedError) as caught:
        recorded.lossless_from_json(_edit(lossless_text, change))
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not a JSON file"),
        ('{"format": "specviz-lossless", "version": 1, "x": NaN}', "NaN"),
        ("[" * 100_000, "nest"),
    ],
)
def test_files_that_are_not_json_we_can_read_are_refused(text, message):
    for reader in (recorded.lab_from_json, recorded.lossless_from_json):
        with pytest.raises(RecordedError) as caught:
            reader(text)
        assert message in str(caught.value)


def test_an_oversized_file_is_refused_before_parsing(tmp_path):
    from specviz.traces import check as trace_check

    path = tmp_path / "big.json"
    path.write_bytes(b" " * (trace_check.MAX_FILE_BYTES + 1))
    with pytest.raises(RecordedError, match="over 32 MB"):
        recorded.load_lab(path)


def test_recording_a_distribution_without_top_k_is_refused(pair):
    dist = next_token_distributions(pair, "def f(x):", SpecConfig(temperature=1.0), chat=False)
    big = replace(dist, p=torch.full((5000,), 1 / 5000), q=torch.full((5000,), 1 / 5000))
    with pytest.raises(RecordedError, match="record with a top-k"):
        recorded.lossless_to_json(ORIGIN, "x", "", big, pair.token_text)
