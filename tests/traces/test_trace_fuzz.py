"""Fuzzing the trace loader (issue 14): mutated and hostile versions of real traces either load or are refused
with one TraceError whose message is one short line; no other exception escapes, and whatever loads saves and
loads again unchanged."""

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specviz.traces.trace import Trace, TraceError, trace_from_json

ROOT = Path(__file__).resolve().parents[2]
BASES = [
    ROOT / "tests" / "data" / "tiny_trace.json",  # greedy, tiny pair
    ROOT / "assets" / "traces" / "2_prose_sampling.json",  # sampling: draws u, an end of sequence
    ROOT / "assets" / "traces" / "5_prose_auto_alternatives.json",
]  # auto schedule, lookahead, alternatives
TEXTS = [path.read_text(encoding="utf-8") for path in BASES]
FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def paths_in(node, prefix=()):
    """Every key path in a JSON value (the root excluded)."""
    if prefix:
        yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield from paths_in(child, prefix + (key,))


PATHS = [list(paths_in(json.loads(text))) for text in TEXTS]


def get(data, path):
    for key in path:
        data = data[key]
    return data


def put(data, path, value):
    get(data, path[:-1])[path[-1]] = value
    return data


def outcome(text: str | bytes) -> Trace | None:
    """The property: a trace, or None after exactly one TraceError with a one-line message."""
    try:
        trace = trace_from_json(text)
    except TraceError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 400, message
        return None
    assert trace_from_json(trace.to_json().encode("utf-8")) == trace
    return trace


MARKUP = st.sampled_from(
    [
        "<script>alert(1)</script>",
        '5" onmouseover="alert(1)',
        "' style='x",
        "</div><div>",
        "&lt;&amp;",
        "\u202e",
        "\x00",
        "\ud800",
        "\\",
        "{{x}}",
        "x" * 5000,
    ]
)
VALUES = st.one_of(
    MARKUP,
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),  # json.dumps writes NaN and Infinity
    st.booleans(),
    st.none(),
    st.lists(st.integers(-5, 200), max_size=40),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.lists(st.fixed_dictionaries({"id": st.integers(0, 200), "text": MARKUP, "prob": st.floats(0, 1)}), max_size=3),
)


@st.composite
def base_and_path(draw, of_types: tuple[type, ...] = ()):
    """A base trace's JSON and one key path in it (only to values of these types, if given)."""
    which = draw(st.integers(0, len(BASES) - 1))
    data = json.loads(TEXTS[which])
    candidates = PATHS[which]
    if of_types:
        candidates = [p for p in candidates if type(get(data, p)) in of_types]
    return data, draw(st.sampled_from(candidates))


@FUZZ
@given(base_and_path(), VALUES)
def test_any_value_replaced_by_anything(target, value):
    data, path = target
    outcome(json.dumps(put(data, path, value)))


@FUZZ
@given(base_and_path(of_types=(int, float)), st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 2.0, 1e-9, 1e12])))
def test_numbers_nudged(target, change):
    """Small, plausible edits: mostly refused as inconsistent, sometimes (a time) still a trace."""
    data, path = target
    value = get(data, path)
    nudged = value + change if isinstance(change, int) else value * change
    if type(value) is int and isinstance(change, int):
        nudged = int(nudged)
    outcome(json.dumps(put(data, path, nudged)))


@FUZZ
@given(
    base_and_path(of_types=(str,)), st.one_of(MARKUP, st.text(max_size=30), st.integers(0xD800, 0xDFFF).map(chr))
)  # a lone surrogate
def test_any_text_replaced_by_markup_or_any_text(target, text):
    """Markup in a text field is data (the pages escape it); text no page can encode is refused."""
    data, path = target
    if outcome(json.dumps(put(data, path, text))) is not None:
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@FUZZ
@given(base_and_path(), st.booleans(), st.text(max_size=12))
def test_fields_dropped_or_added(target, drop, name):
    data, path = target
    parent = get(data, path[:-1])
    if drop:
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[name or "extra"] = 1
    else:
        parent.append(parent[-1])
    outcome(json.dumps(data))


RAW = "\u0000raw\u0000"


@FUZZ
@given(
    base_and_path(),
    st.one_of(
        st.integers(10, 3000).map(lambda depth: "[" * depth + "]" * depth),
        st.integers(10, 3000).map(lambda depth: '{"a":' * depth + "1" + "}" * depth),
        st.integers(1, 6000).map(lambda digits: "9" * digits),
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "-0", "0.0", "1E400"]),
    ),
)
def test_deep_nesting_and_extreme_literals_anywhere(target, literal):
    data, path = target
    text = json.dumps(put(data, path, RAW)).replace(json.dumps(RAW), literal, 1)
    outcome(text)


@FUZZ
@given(st.integers(0, len(BASES) - 1), st.floats(0, 1))
def test_truncated_files(which, fraction):
    text = TEXTS[which]
    cut = int(fraction * len(text))
    result = outcome(text[:cut])
    assert (result is not None) == (cut == len(text))


@FUZZ
@given(st.integers(0, len(BASES) - 1), st.floats(0, 1), st.binary(min_size=1, max_size=40))
def test_random_bytes_spliced_in(which, fraction, junk):
    data = TEXTS[which].encode("utf-8")
    at = int(fraction * len(data))
    outcome(data[:at] + junk + data[at:])


@settings(max_examples=200, deadline=None, database=None)
@given(st.binary(max_size=2000))
def test_random_bytes(junk):
    assert outcome(junk) is None


def test_the_bases_load():
    for text in TEXTS:
        assert outcome(text) is not None
