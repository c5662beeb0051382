"""Edge rounds told as they happened, against the words and chips shown (issue 43): an accepted end of text (no
bonus after it, nothing kept struck through as rolled back, counts that match the round), a round that drafted
nothing (one plain target step, never "every draft was accepted"), and a stream stopped midway (its unfinished
request dropped, never plotted; the stop said).

The end-of-text and empty rounds are real ones, recorded on the built-in pair (assets/traces/), and one made from the
tiny trace's last round the way the issue's screenshot found it: a single drafted end of text, accepted."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

from specviz import markup
from specviz.bench.stream import Request, run_stream
from specviz.decoding.config import SpecConfig
from specviz.drafters.suffix import TrafficStore
from specviz.lessons import lab
from specviz.models.tiny import tiny_pair
from specviz.traces.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
TINY = load_trace(ROOT / "tests" / "data" / "tiny_trace.json")
RENAME = load_trace(ROOT / "assets" / "traces" / "3_rename_adaptive.json")  # round 9: <|im_end|> accepted at d3
LOOKAHEAD = load_trace(ROOT / "assets" / "traces" / "4_rename_auto_lookahead.json")  # round 4: γ = 0, one plain step


def words_of(event, greedy: bool, prompt_len: int, drafter: str = "model") -> dict[str, str]:
    """Everything a learner reads about one round, as plain text (tags dropped)."""
    return {
        "head": re.sub(r"<[^>]+>", " ", markup.round_head_html(event, 9)),
        "chips": re.sub(r"<[^>]+>", " ", markup.round_chips_html(event, greedy)),
        "round": markup.explain_round(event, greedy),
        "chart": markup.explain_chart(event, greedy),
        "kv": markup.kv_cache_html(event, prompt_len, drafter),
    }


def rollback_cells(kv_html: str) -> list[tuple[str, str]]:
    """(class, text) of the target cache's cells after the rollback."""
    target = kv_html.split("Draft", 1)[0]
    row = target.split("after rollback", 1)[1]
    return re.findall(r'<span class="sv-cell ([^"]*)">([^<]*)</span>', row)


def lone_end_of_text():
    """The tiny trace's last round (one draft, accepted, then a bonus) with its draft the end of text: the commit
    stops at it, as Run.commit does, and the target's cache keeps the committed tokens but the newest."""
    last = TINY.rounds[-1]
    assert len(last.drafted) == 1 and last.rejection_index is None and len(last.appended) == 2
    eos = dataclasses.replace(last.drafted[0], text="<|im_end|>")
    return dataclasses.replace(
        last, drafted=(eos,), appended=last.appended[:1], target_cache_after=last.target_cache_before + 1
    )


def test_a_lone_accepted_end_of_text_draws_no_bonus_and_rolls_nothing_kept_back():
    event = lone_end_of_text()
    shown = words_of(event, True, len(TINY.prompt_ids))
    text = " ".join(shown.values())
    assert "free **bonus**" not in shown["round"] and "no bonus token is added" in shown["round"], shown["round"]
    assert "bonus" not in shown["chart"], shown["chart"]
    assert "★" not in shown["chips"] and "end of text: nothing follows" in shown["chips"]
    assert "2 tokens" not in text  # the screenshot's "2 tokens for one target pass ... committed 1"
    assert "This round committed **1** token for one target pass." in shown["round"]
    assert "end of text accepted" in shown["head"] and "+1 token" in shown["head"] and "+ bonus" not in shown["head"]
    cells = rollback_cells(shown["kv"])
    assert ("accepted", "&lt;|im_end|&gt;") in cells, cells  # kept, not struck through
    assert not any("dropped" in cls for cls, _ in cells), cells
    assert "rolled back" not in shown["kv"].split("Draft", 1)[0]


def test_an_end_of_text_inside_the_accepted_prefix_counts_what_the_round_committed():
    event = RENAME.rounds[8]  # accepted ↵ ``` <|im_end|> ↵ <|endoftext|>, rejected **: committed 3
    assert len(event.appended) == 3 and event.n_accepted == 5
    shown = words_of(event, True, len(RENAME.prompt_ids))
    assert "This round committed **3** tokens" in shown["round"]
    assert "the 2 accepted tokens after it are dropped" in shown["round"]
    assert "`<|im_end|>` (d3) is the **end of text**" in shown["round"]
    assert "drawn from the residual" not in shown["round"] and "↻" not in shown["chips"]
    assert "+3 tokens" in shown["head"]
    cells = rollback_cells(shown["kv"])
    end = [cls for cls, text in cells if text == "&lt;|im_end|&gt;"]
    assert end == ["accepted"], cells  # the end of text is kept; the two accepted after it are dropped
    assert [cls for cls, _ in cells].count("accepted dropped") == 2


def test_a_round_that_drafted_nothing_is_one_plain_target_step():
    for event in (LOOKAHEAD.rounds[3], dataclasses.replace(LOOKAHEAD.rounds[3], gamma=5)):  # auto's γ 0; an n-gram miss
        assert not event.drafted and event.next_source == "bonus"
        shown = words_of(event, True, len(LOOKAHEAD.prompt_ids), drafter="ngram")
        for name in ("round", "chart", "head", "chips"):
            assert "every draft was accepted" not in shown[name].lower(), (name, shown[name])
            assert "bonus" not in shown[name], (name, shown[name])
        assert "one plain target step" in shown["round"] and "one plain target step" in shown["head"]
        assert "plain step" in shown["chips"]
        assert "This round committed **1** token for one target pass" in shown["round"]
    assert "γ was 0 this round" in markup.explain_round(LOOKAHEAD.rounds[3], True)


class StopsLater(threading.Event):
    """A Stop pressed midway: once armed, the `after`-th check reads set (the first is run_stream's own, between two
    requests; the later ones are the runs' checks between two rounds or steps)."""

    def __init__(self, after: int):
        super().__init__()
        self.after, self.armed = after, False

    def is_set(self) -> bool:
        if self.armed:
            self.after -= 1
            return self.after <= 0
        return False


def test_a_stream_stopped_midway_keeps_only_its_finished_requests():
    """Stop during the second request: its runs end within a round, and it is dropped, not plotted as a result
    (the screenshot's half-run request read "÷ model 0.10x"); the first request is kept whole."""
    pair = tiny_pair()
    stop = StopsLater(after=4)
    store = TrafficStore()
    requests = [Request("a b a b a b", "one"), Request("c d c d c d", "one")]
    rows = run_stream(
        pair,
        requests,
        SpecConfig(gamma=3, max_new_tokens=12),
        chat=False,
        store=store,
        cancel=stop,
        on_row=lambda done: setattr(stop, "armed", True),
    )
    assert [row["index"] for row in rows] == [0], "the request under way when Stop was pressed must be dropped"
    assert store.requests == 1  # it did not join the traffic either
    assert all(row[d]["tokens_per_second"] > 0 for row in rows for d in ("model", "traffic", "controller"))
    words = markup.stream_stopped_message(len(rows))
    assert words.startswith("Stopped: 1 request finished") and "dropped, not plotted" in words


def test_a_stopped_run_is_never_a_measured_point():
    """Theory plots this session's runs: a run stopped midway (or its baseline) is labelled stopped, not a point."""
    assert lab.measured_point(TINY) is not None
    stopped = dataclasses.replace(TINY, summary=dataclasses.replace(TINY.summary, finish_reason="cancelled"))
    assert lab.measured_point(stopped) is None
    plain_stopped = dataclasses.replace(
        TINY, baseline_summary=dataclasses.replace(TINY.baseline_summary, finish_reason="cancelled")
    )
    assert lab.measured_point(plain_stopped) is None
    assert markup.stopped_message(len(TINY.rounds)).startswith("Stopped: this run was cancelled")


def hit_lines(html: str) -> dict[int, str]:
    """The code view's marked lines: number -> the line's text (tags dropped)."""
    rows = re.findall(
        r'<span class="(sv-line(?: hit)?)"><span class="sv-ln">(\d+)</span>(.*?)(?=<span class="sv-line|</pre>)', html
    )
    found = [(n, text) for cls, n, text in rows if cls == "sv-line hit"]
    return {int(n): re.sub(r"<[^>]+>", "", text) for n, text in found}


def test_the_code_view_marks_the_lines_each_kind_of_round_took():
    """Accept, reject and resample, bonus, end of text, empty draft: each round marks its own path through the loop,
    with its tokens beside the lines (escaped)."""
    rejected = TINY.rounds[0]  # accepted 2, rejected d3, a correction
    lines = hit_lines(markup.round_code_html(rejected, True))
    assert {9, 10, 11, 12} <= set(lines) and not {13, 14} & set(lines)
    assert "×2:" in lines[11] and "d3 = " in lines[9] and "→ " in lines[10]
    bonus = TINY.rounds[2]  # all 4 accepted, a bonus
    lines = hit_lines(markup.round_code_html(bonus, True))
    assert {11, 12, 14} <= set(lines) and not {10, 13} & set(lines) and "×4:" in lines[11]
    end = RENAME.rounds[8]  # <|im_end|> accepted at d3: the loop returns there
    html = markup.round_code_html(end, True)
    lines = hit_lines(html)
    assert 13 in lines and not {10, 14} & set(lines) and "×3:" in lines[11]
    assert "&lt;|im_end|&gt;: the text ends" in html and "<|im_end|>" not in html
    empty = LOOKAHEAD.rounds[3]
    lines = hit_lines(markup.round_code_html(empty, True))
    assert set(lines) == {1, 2, 4, 5, 6, 7, 15} and "argmax(p[0])" in lines[7]
    sampled = markup.round_code_html(rejected, False)  # sampling: the ratio test and the residual
    assert "min(1, p[i][d[i]] / q[i][d[i]])" in sampled and "norm(max(0, p[i] - q[i]))" in sampled
    assert (
        len(markup.LOOP_LINES) == 16
    )  # fifteen in greedy mode (no residual); tests/markup/test_code_view.py runs them
