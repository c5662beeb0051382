"""The Learning page through AppTest on the tiny pair: the recorded curve shows at once (marked as recorded), a
missing file is said so, and a typed request runs with each drafter, joins the traffic and is plotted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.bench.stream import Request, load_stream, run_stream
from specviz.decoding.config import SpecConfig
from specviz.models.tiny import tiny_pair

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A result in bench --stream's format, from the tiny pair (the shipped one comes from the real pair)."""
    rows = run_stream(
        tiny_pair(),
        [Request("a b a b a b", "one"), Request("a b a b a b", "one"), Request("c d c d", "two")],
        SpecConfig(gamma=4, max_new_tokens=12),
        chat=False,
    )
    path = tmp_path_factory.mktemp("learning") / "result.json"
    doc = {
        "stream": "t",
        "config": SpecConfig(max_new_tokens=12).to_dict(),
        "pair": {"target": "tiny", "device": "cpu"},
    }
    path.write_text(json.dumps({**doc, "requests": rows}), encoding="utf-8")
    return path


def open_page(monkeypatch, learning_file: Path) -> AppTest:
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_LEARNING_FILE", str(learning_file))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/learning.py").run()
    assert not at.exception, at.exception
    return at


def test_the_recorded_curve_shows_at_once(monkeypatch, recorded):
    at = open_page(monkeypatch, recorded)
    assert "learns from the requests" in at.title[0].value
    assert any(c.value.startswith("Recorded on ") for c in at.caption)  # its machine and precision, no command
    assert not any("python -m" in c.value for c in at.caption)
    assert any("python -m specviz bench --stream" in c.value for c in at.code)  # under "How this was recorded"
    # 3 requests: first and latest (windows of 5 would overlap), and a word on when the windows come
    assert sorted(m.label for m in at.metric) == ["first request", "latest request", "÷ model"]
    assert any("With 10 or more requests these compare the first 5 with the last 5" in c.value for c in at.caption)
    assert any(c.value.startswith("The traffic store after request 3: ") for c in at.caption)
    assert any("traffic changes at request 3" in c.value for c in at.caption)  # the phase switch
    # the traffic drafter's numbers at the switch, which the guided answer cites, in the text (not only on hover)
    rows = json.loads(recorded.read_text(encoding="utf-8"))["requests"]
    at_switch = 2  # request 3, as above
    before = [r["traffic"]["mean_accepted_per_round"] for r in rows[max(0, at_switch - 5) : at_switch]]
    said = (
        f"The traffic drafter alone: {sum(before) / len(before):.2f} draft tokens accepted per round over the "
        f"{len(before)} requests before the change, {rows[at_switch]['traffic']['mean_accepted_per_round']:.2f} at "
        f"request {at_switch + 1}."
    )
    assert any(said in c.value for c in at.caption)
    assert any("controller's own work" in c.value and "ms per round" in c.value for c in at.caption)


def test_ten_requests_compare_the_first_five_with_the_last_five(monkeypatch, recorded, tmp_path):
    doc = json.loads(recorded.read_text(encoding="utf-8"))
    rows = [{**row, "index": i} for i, row in enumerate(doc["requests"] * 4)]  # 12 requests
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps({**doc, "requests": rows}), encoding="utf-8")
    at = open_page(monkeypatch, longer)
    assert sorted(m.label for m in at.metric) == ["first 5", "last 5", "÷ model"]
    first = sum(r["controller"]["mean_accepted_per_round"] for r in rows[:5]) / 5
    assert at.metric[0].value == f"{first:.2f}"
    assert not any("With 10 or more requests" in c.value for c in at.caption)


def test_the_curve_has_a_tick_per_request_and_round_store_ticks(recorded):
    from specviz import charts

    rows = json.loads(recorded.read_text(encoding="utf-8"))["requests"]
    fig = charts.learning_figure(rows)
    assert fig.layout.xaxis2.dtick == 1 and fig.layout.xaxis2.tick0 == 1  # not 0.5, 1.5, ...
    assert fig.layout.yaxis2.tickmode == "auto"  # the store's axis does not sync its ticks to the left one's
    assert charts.learning_figure(rows * 5).layout.xaxis2.dtick is None  # many requests: plotly's own ticks


def test_a_missing_recording_is_said(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path / "none.json")
    assert any("missing or damaged" in w.value for w in at.warning)
    damaged = tmp_path / "bad.json"
    damaged.write_text('{"requests": [1, 2]}')
    at = open_page(monkeypatch, damaged)
    assert any("missing or damaged" in w.value for w in at.warning)


def test_your_request_runs_with_each_drafter_and_joins_the_traffic(monkeypatch, recorded):
    at = open_page(monkeypatch, recorded)
    assert at.button(key="learning.run").disabled  # nothing typed yet
    for _ in range(2):
        at.text_area(key="learning.request").set_value("x y z x y z x y").run()
        at.button(key="learning.run").click().run()
        job = at.session_state["state.learning"].job
        assert job.join(120)
        at.run()
        assert not at.exception, at.exception
        assert job.state == "done", job.error
    rows = at.session_state["state.learning"].result
    assert [r["index"] for r in rows] == [0, 1]
    assert all(set(r) >= {"model", "traffic", "controller", "baseline", "store"} for r in rows)
    assert rows[1]["traffic"]["mean_accepted_per_round"] >= rows[0]["traffic"]["mean_accepted_per_round"]
    assert len(at.get("plotly_chart")) == 2  # the recorded curve and yours
    table = at.dataframe[-1].value  # which point is which request
    assert list(table["#"]) == [1, 2] and list(table["request"]) == ["x y z x y z x y"] * 2
    assert sum("How to read it" in m.value for m in at.markdown) == 1  # said once, beside the recorded curve


def test_the_shipped_stream_loads():
    name, requests = load_stream(ROOT / "assets" / "streams" / "inventory_drift.json")
    assert len(requests) == 32 and {r.phase for r in requests} == {"python", "javascript"}
    shipped = json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))
    bench = [p for prompts in shipped.values() for p in prompts]
    assert not any(b[:40] in r.prompt or r.prompt[:40] in b for r in requests for b in bench)  # nothing shared


def test_step_through_shows_the_controllers_choice(monkeypatch, recorded):
    at = open_page(monkeypatch, recorded)
    at.switch_page("pages/step_through.py").run()
    at.sidebar.radio(key="cfg.drafter").set_value("controller").run()
    for _ in range(2):  # the second run drafts from the first one's output (the process-wide store)
        at.button(key="step.run").click().run()
        job = at.session_state["state.step"].job
        assert job.join(120)
        at.run()
        assert not at.exception, at.exception
        assert job.state == "done", job.error
    trace = at.session_state["state.step"].trace
    sources = {r.draft_source for r in trace.rounds if r.drafted}
    assert sources and sources <= {"traffic", "model", "both"}
    k = next(r.index for r in trace.rounds if r.drafted)
    at.slider(key="step.slider").set_value(k + 1).run()
    page = "\n".join(h.value for h in at.html)
    assert "· source " in page
    assert any("**Source:" in m.value for m in at.markdown)
    assert any("Choosing (the traffic lookup and the choice) took" in m.value for m in at.markdown)


def test_forget_empties_the_traffic_store(monkeypatch, recorded):
    at = open_page(monkeypatch, recorded)
    at.text_area(key="learning.request").set_value("p q p q p q").run()
    at.button(key="learning.run").click().run()
    assert at.session_state["state.learning"].job.join(120)
    at.run()
    forget = at.button(key="learning.forget")
    assert "Forget the traffic (" in forget.label and "(0 requests" not in forget.label
    assert any("Forget empties it for everyone" in c.value for c in at.caption)  # one store per server
    forget.click().run()
    assert not at.exception, at.exception
    assert "(0 requests, 0 tokens)" in at.button(key="learning.forget").label


def test_the_recovery_is_said_as_it_happened():
    from specviz.ui.learning import recovery_words

    assert recovery_words(3, 3) == "was back within 10% after 3 requests, and stayed back."
    assert "first back within 10% after 3 requests, and back for good after 9" in recovery_words(3, 9)
    assert "after 4 requests, then fell below" in recovery_words(4, None)
    assert recovery_words(1, 1) == "was back within 10% after 1 request, and stayed back."
    assert "had not come back" in recovery_words(None, None)
