"""Refusals say their reason once, and counts take the right noun (issue 56: "not a usable trace file: not a usable
trace file: ..." repeated its prefix; the Acceptance lab said "1 runs")."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from specviz.markup import counted
from specviz.traces.check import MAX_JSON_KEYS
from specviz.traces.trace import TraceError, load_trace

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "not a usable trace file"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (json.dumps({f"k{i}": 1 for i in range(MAX_JSON_KEYS + 1)}), f"an object has {MAX_JSON_KEYS + 1} fields"),
        ('{"a": NaN}', "NaN is not a number a trace can hold"),
        ('{"a": Infinity}', "Infinity is not a number a trace can hold"),
        ('{"a": ' + "9" * 5_000 + "}", "Exceeds the limit"),
    ],
)
def test_a_refused_trace_says_its_prefix_once(text, reason):
    with pytest.raises(TraceError) as exc:
        load_trace(io.BytesIO(text.encode()))
    message = str(exc.value)
    assert message.count(PREFIX) == 1 and reason in message, message


def test_counts_take_the_right_noun():
    assert counted(1, "run") == "1 run"
    assert counted(0, "run") == "0 runs"
    assert counted(2, "run") == "2 runs"
    assert counted(1_024, "token") == "1,024 tokens"
    assert counted(1, "batch", "batches") == "1 batch" and counted(3, "batch", "batches") == "3 batches"


def test_no_page_writes_a_count_beside_a_fixed_plural():
    """A length written straight before a plural noun says "1 runs" when it is one: use markup.counted."""
    pattern = re.compile(r"\{len\([^{}]*\)\} runs\b")  # the lab's count; other nouns stand beside larger counts
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "specviz").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert found == []
