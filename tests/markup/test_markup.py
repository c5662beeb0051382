"""specviz.markup on hostile traces: every string and number field of a round or a trace holds values an
uploaded file could carry (markup, quotes, huge or non-finite numbers, strings where numbers belong), and
every builder must escape them, draw class names only from its own fixed set, and stay small."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specviz import markup
from specviz.traces.trace import DraftedToken, RoundEvent, TokenProb, Trace, load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = load_trace(ROOT / "tests" / "data" / "tiny_trace.json")
LIMIT = 5_000_000  # bytes of HTML one builder may produce, whatever the trace says

HOSTILE = [
    '"><a href=x style="position:fixed;inset:0">',
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "' onmouseover='alert(1)",
    "`` [link](javascript:alert(1)) ``",
    'accepted" onclick="x',
    'sv-x"><a',
]
texts = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40), st.sampled_from(HOSTILE).map(lambda s: s * 3))
numbers = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.just(10**18),
    st.just(-1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)
anything = st.one_of(texts, numbers, st.none(), st.booleans())
verdicts = st.one_of(st.sampled_from(["accepted", "rejected", "unchecked"]), texts)


@st.composite
def tokens(draw) -> TokenProb:
    return TokenProb(id=draw(anything), text=draw(texts), prob=draw(anything))


@st.composite
def drafted(draw) -> DraftedToken:
    return DraftedToken(
        id=draw(anything),
        text=draw(texts),
        q=draw(anything),
        p=draw(anything),
        ratio=draw(anything),
        u=draw(anything),
        verdict=draw(verdicts),
        from_lookahead=draw(st.booleans()),
    )


@st.composite
def rounds(draw) -> RoundEvent:
    base = TRACE.rounds[draw(st.integers(0, len(TRACE.rounds) - 1))]
    changes = dict(
        index=draw(anything),
        position=draw(anything),
        gamma=draw(anything),
        drafted=tuple(draw(st.lists(drafted(), max_size=6))),
        n_accepted=draw(anything),
        rejection_index=draw(anything),
        next_token=draw(tokens()),
        next_source=draw(texts | st.just("resampled")),
        appended=tuple(range(draw(st.integers(0, 8)))),
        alternatives=tuple(draw(st.lists(drafted(), max_size=3))),
        target_cache_before=draw(anything),
        target_cache_after=draw(anything),
        draft_cache_before=draw(anything),
        draft_cache_after=draw(anything),
        draft_forwards=draw(anything),
        elapsed=draw(anything),
    )
    keep = draw(st.sets(st.sampled_from(sorted(changes))))
    return dataclasses.replace(base, **{k: v for k, v in changes.items() if k not in keep})


def builders(event: RoundEvent, prompt: object) -> dict[str, str]:
    return {
        "round_chips": markup.round_chips_html(event, greedy=True) + markup.round_chips_html(event, greedy=False),
        "round_head": markup.round_head_html(event, 12),
        "text": markup.text_html(prompt, [event], current=0, caret=True),
        "text_all": markup.text_html(prompt, [event, event], show_future=True, current=0),
        "plain": markup.plain_text_html(prompt, [event.next_token.text, *(d.text for d in event.drafted)], caret=True),
        "kv_model": markup.kv_cache_html(event, 7, "model"),
        "code": markup.round_code_html(event, True) + markup.round_code_html(event, False),
        "kv_ngram": markup.kv_cache_html(event, event.position, "ngram"),
        "lane": markup.lane_html(
            name="Speculative", kind="speculative", body=markup.text_html(prompt, [event]), done=3, total=5, rate=1.5
        ),
    }


ALLOWED_CLASSES = {
    "sv-code",
    "sv-line",
    "hit",
    "sv-ln",
    "sv-src",
    "sv-note",
    "sv-code-foot",
    "sv-chip",
    "sv-accepted",
    "sv-rejected",
    "sv-unchecked",
    "sv-resampled",
    "sv-bonus",
    "sv-alt",
    "sv-pos",
    "sv-tok",
    "sv-verdict",
    "sv-nums",
    "k",
    "v",
    "q",
    "p",
    "muted",
    "pass",
    "fail",
    "sv-branch",
    "sv-chips",
    "sv-arrow",
    "sv-round-head",
    "sv-step",
    "sv-text",
    "sv-follow",
    "sv-prompt",
    "sv-t",
    "sv-current",
    "sv-future",
    "sv-caret",
    "sv-plain",
    "nl",
    "sv-more",
    "sv-kv",
    "group",
    "lbl",
    "row",
    "len",
    "kv-note",
    "sv-cell",
    "old",
    "pending",
    "accepted",
    "rejected",
    "unchecked",
    "alt",
    "dropped",
    "more",
    "sv-lane",
    "sv-lane-head",
    "name",
    "spec",
    "plain",
    "stats",
    "bar",
    "sv-legend",
    "sw",
    "resampled",
    "bonus",
    "prompt",
}


def assert_safe(html: str) -> None:
    assert len(html.encode()) < LIMIT
    lowered = html.lower()
    for raw in ("<a", "<script", "<img"):
        assert raw not in lowered, raw
    for tag in re.findall(r"<[^>]*>", html):  # every attribute is one of ours, fully quoted
        assert not re.search(r"\bon[a-z]+=", re.sub(r"\"[^\"]*\"", '""', tag)), tag
        assert re.fullmatch(r'</?[a-z]+(\s+[a-z]+(="[^"<>]*"|=[a-z-]+)?)*\s*/?>', tag), tag
    for classes in re.findall(r'class="([^"]*)"', html) + re.findall(r"class=([a-z-]+)", html):
        assert set(classes.split()) <= ALLOWED_CLASSES, classes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=rounds(), prompt=anything)
def test_every_builder_escapes_hostile_rounds(event, prompt):
    for html in builders(event, prompt).values():
        assert_safe(html)
    for words in (
        markup.explain_round(event, True),
        markup.explain_round(event, False),
        markup.explain_chart(event, True),
        markup.explain_chart(event, False),
    ):
        assert_plain_markdown(words)


def outside_code(words: str) -> str:
    """The text markdown reads as markdown, CommonMark's way: a backslash-escaped character is literal (here "_"),
    a run of backticks opens a code span closed by the next run of the same length (whose content is shown as it
    is, backslashes included: "`\\`" is a span holding one backslash), an unclosed run is literal."""
    out, i = [], 0
    while i < len(words):
        if words[i] == "\\" and i + 1 < len(words):
            out.append("_")
            i += 2
        elif words[i] == "`":
            fence = re.match(r"`+", words[i:]).group()
            close = re.compile(rf"(?<!`){fence}(?!`)").search(words, i + len(fence))
            i = close.end() if close else i + len(fence)
        else:
            out.append(words[i])
            i += 1
    return "".join(out)


def assert_plain_markdown(words: str) -> None:
    """No HTML and no link outside code spans (markdown shows a code span's content as it is)."""
    outside = outside_code(words)
    assert not re.search(r"<[A-Za-z/!?]", outside) and "](" not in outside


def test_the_markdown_reader_sees_what_markdown_sees():
    """A span holding one backslash does not swallow the span after it; an escaped backtick opens nothing."""
    assert outside_code("`\\` and ``<a>``") == " and "
    assert outside_code("\\`<a `x`") == "_<a "
    assert outside_code("\\<a") == "_a" and outside_code("``a`b``<i>") == "<i>"


@settings(max_examples=100, deadline=None)
@given(
    pair=st.dictionaries(st.sampled_from(["target", "draft", "device", "dtype"]), texts),
    note=texts,
    gamma=anything,
    temperature=anything,
    seed=anything,
)
def test_captions_escape_markdown(pair, note, gamma, temperature, seed):
    config = dataclasses.replace(TRACE.config, gamma=gamma, temperature=temperature, seed=seed)
    trace = dataclasses.replace(TRACE, pair=pair, note=note, config=config)
    for line in (markup.trace_caption(trace), markup.pair_caption(pair)):
        assert_plain_markdown(line)
        assert "\n" not in line


def test_a_huge_position_draws_a_capped_cache():
    """One large `position` once built 160 MB of "new" cells."""
    event = dataclasses.replace(TRACE.rounds[3], position=10**9, target_cache_before=0, draft_cache_before=0)
    html = markup.kv_cache_html(event, 10**9, "model")
    assert len(html) < 100_000 and "more</span>" in html


def test_huge_prompts_and_many_tokens_are_capped():
    """Millions of prompt characters and tokens once built GBs of HTML per rerun."""
    many = dataclasses.replace(TRACE.rounds[0], appended=tuple(range(2_000_000)))
    html = markup.text_html("<x>" * 3_000_000, [many] * 3)
    assert len(html.encode()) < LIMIT and "more tokens not drawn" in html and "more characters" in html
    plain = markup.plain_text_html("p", ["<b>"] * 1_000_000)
    assert len(plain.encode()) < LIMIT and "<b>" not in plain
    chips = markup.round_chips_html(
        dataclasses.replace(
            TRACE.rounds[0], drafted=TRACE.rounds[0].drafted * 100_000, alternatives=TRACE.rounds[0].drafted * 1000
        ),
        True,
    )
    assert len(chips.encode()) < LIMIT


def test_a_long_token_is_clipped():
    event = dataclasses.replace(TRACE.rounds[0], next_token=TokenProb(1, "x" * 10_000_000, 0.5))
    assert len(markup.round_chips_html(event, False)) < 50_000


@pytest.mark.parametrize("text, expected", [("a", "`a`"), ("```", "```` ``` ````"), ("a`b", "`` a`b ``")])
def test_code_spans_hold_backticks(text, expected):
    assert markup.code(text) == expected


def test_valid_traces_render_as_before():
    """The escaping changes nothing for ordinary values: numbers, verdicts and classes as the engine writes them."""
    event = next(r for r in TRACE.rounds if r.rejection_index is not None)
    html = markup.round_chips_html(event, greedy=True)
    assert html.count('class="sv-chip sv-rejected"') == 1 and "↻ correction: argmax p" in html
    assert markup.fmt_prob(0.0004) == "&lt;0.001" or markup.fmt_prob(0.0004) == "<0.001"
    assert markup.esc(3) == "3" and markup.esc('"') == "&quot;"
    assert isinstance(TRACE, Trace)


@pytest.mark.parametrize(
    "text",
    [
        "https://evil.example/x",
        "see www.evil.example",
        "mail me@evil.example",
        "HTTP://EVIL.EXAMPLE",
        "WWW.Evil.example",
    ],
)
def test_bare_urls_and_addresses_stay_text_in_markdown(text):
    # Streamlit's markdown links these even with every special character escaped (found in the browser).
    shown = markup.md(text)
    for linkable in ("://evil", "www.", "WWW.", "@evil"):
        assert linkable not in shown
    assert shown.replace("\u2060", "").replace("\\", "") == text


def test_a_round_in_words_counts_its_tokens_in_good_grammar():
    """One token after a rejection 'is' thrown away; a draft shorter than gamma says so."""
    event = next(r for r in TRACE.rounds if r.rejection_index is not None)
    j = event.rejection_index
    for rest, verb in ((1, "is"), (2, "are")):
        drafted = event.drafted[: j + 1] + (event.drafted[j],) * rest  # the tokens after d_j are never checked
        words = markup.explain_round(dataclasses.replace(event, drafted=drafted, gamma=len(drafted)), True)
        assert f"The {rest} token{'s' if rest > 1 else ''} after it {verb} thrown away unchecked." in words
        assert " it could (" not in words  # it drafted all gamma asked for
    short = dataclasses.replace(event, drafted=event.drafted[: j + 1], gamma=j + 4)
    assert f"**{j + 1}** token{'s' if j else ''} of the γ = {j + 4} it could" in markup.explain_round(short, True)


def test_an_all_accepted_round_says_its_token_count_once():
    event = next(r for r in TRACE.rounds if r.rejection_index is None and len(r.appended) == len(r.drafted) + 1)
    words = markup.explain_round(event, True)
    assert f"{len(event.drafted) + 1} tokens for one target pass." in words and "This round committed" not in words
    cut = dataclasses.replace(event, appended=event.appended[:-1])  # an end of sequence cut the round short
    assert f"This round committed **{len(cut.appended)}**" in markup.explain_round(cut, True)


def test_a_round_cut_by_the_token_budget_says_so():
    event = next(r for r in TRACE.rounds if r.drafted)
    budget = event.position + event.gamma + 1  # the round could just fill the budget
    words = markup.explain_round(event, True, asked=event.gamma + 2, budget=budget)
    assert words.startswith(f"γ is {event.gamma} here, not {event.gamma + 2}: a round commits up to γ + 1 tokens")
    assert f"only {event.gamma + 1} of the {budget}-token budget were left" in words
    for asked, room in ((event.gamma, budget), (None, budget), (event.gamma + 2, budget + 1)):  # schedule's own gamma
        assert "budget" not in markup.explain_round(event, True, asked=asked, budget=room)
