"""The Batching page through AppTest, on the tiny pair: a recorded result shows at once (ragged against min-cut, γ per
B, the charts, the table, the reading), a damaged file is refused with a warning, a live run with the user's batch
sizes shows as "your run", and bad batch sizes give an error, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.bench.batching import run_batching
from specviz.decoding.config import SpecConfig
from specviz.models.tiny import tiny_pair

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def tiny_result() -> dict:
    pair = tiny_pair(seed=0, noise=0.02)
    config = SpecConfig(gamma=3, max_new_tokens=8)
    doc = run_batching(
        pair, [[5, 6, 7], [8, 9]], config, (1, 2, 4), (1, 2, 4, 8, 16), 1, gammas=(1, 3), rows=2, engine_repeats=2
    )
    return json.loads(json.dumps(doc))


def open_page(monkeypatch, folder: Path) -> AppTest:
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_CURVES_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/batching.py").run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [h.value for h in at.html])


SHIPPED = json.loads((ROOT / "assets" / "batching_cpu.json").read_text())


def chart(at: AppTest, name: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"batching.{name}")]
    return json.loads(found.proto.spec)


def test_the_shipped_result_shows_at_once(monkeypatch):
    at = open_page(monkeypatch, ROOT / "assets")
    assert "recorded" in texts(at)
    assert len(at.get("plotly_chart")) == 5
    assert not at.warning
    rows, gamma = SHIPPED["rows"], SHIPPED["gamma"]
    for row in rows:  # the reading's line for each B is the file's numbers
        assert f"**B = {row['batch']}: {row['ragged']['measured_speedup']:.2f}×** at γ = {gamma}" in texts(at)
    table = at.dataframe[0].value  # the table is the file's rows
    assert list(table["B"]) == [r["batch"] for r in rows]
    assert list(table[f"speed-up, γ = {gamma}"]) == [round(r["ragged"]["measured_speedup"], 2) for r in rows]
    assert list(table["tokens / row / round"]) == [round(r["ragged"]["tokens_per_round"], 2) for r in rows]
    assert list(table["… waiting for the slowest row"]) == [round(r["min_cut"]["tokens_per_round"], 2) for r in rows]
    assert list(table["best γ"]) == [r["best_gamma"] for r in rows]
    traces = {t["name"].replace("<br>", " "): t for t in chart(at, "speedup")["data"]}  # a legend entry wraps
    ragged = traces[f"every row keeps what it accepted, γ = {gamma}"]
    assert ragged["y"] == [r["ragged"]["measured_speedup"] for r in rows]
    assert traces[f"the batch waits for its slowest row, γ = {gamma}"]["y"] == [
        r["min_cut"]["measured_speedup"] for r in rows
    ]
    even = SHIPPED["break_even_batch"]
    if even is not None:
        marker = traces[f"speculation stops paying at γ = {gamma}: B = {even}"]
        assert marker["x"] == [even, even]  # in data units: the break-even B itself, not its log
    lengths = {t["name"].replace("<br>", " "): t["y"] for t in chart(at, "rounds")["data"]}
    assert lengths["every row keeps what it accepted"] == [r["ragged"]["tokens_per_round"] for r in rows]


def test_the_forward_cost_axes_label_every_tick_in_full(monkeypatch):
    """Plotly's own log ticks read "5" and "2" for 0.5 s and 0.2 s; every tick says its value and unit."""
    at = open_page(monkeypatch, ROOT / "assets")
    layout = chart(at, "curve")["layout"]
    assert layout["yaxis"]["ticktext"][:3] == ["0.1 s", "0.2 s", "0.5 s"]
    assert layout["yaxis"]["tickvals"][:3] == [0.1, 0.2, 0.5]
    assert layout["xaxis"]["tickvals"] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def with_ragged(doc: dict, **changes: list) -> dict:
    """doc with the named fields of its rows' ragged entries replaced, one value per row."""
    rows = [
        dict(row, ragged=dict(row["ragged"], **{name: values[i] for name, values in changes.items()}))
        for i, row in enumerate(doc["rows"])
    ]
    return dict(doc, rows=rows)


def test_the_reading_names_the_factor_that_ended_the_gain():
    from specviz.markup.batching import reading

    rows = SHIPPED["rows"]
    words = reading(SHIPPED)
    first, last = rows[0], rows[-1]
    assert (
        f"Every row keeps what it accepted: {first['ragged']['tokens_per_round']:.2f} tokens per row per round at "
        f"B = 1, {last['ragged']['tokens_per_round']:.2f} at B = {last['batch']}" in words
    )
    assert f"{last['min_cut']['tokens_per_round']:.2f} at B = {last['batch']}." in words
    assert (
        "Measured best: "
        + ", ".join(
            ("off" if r["best_gamma"] == 0 else f"γ = {r['best_gamma']}") + f" at B = {r['batch']}" for r in rows
        )
        in words
    )
    n = len(rows)
    stop = dict(with_ragged(SHIPPED, measured_speedup=[2.0] + [0.8] * (n - 1)), break_even_batch=rows[1]["batch"])
    steady = with_ragged(stop, batch_tokens_per_round=[3.2] * n)  # the same yield at every B: only the cost grows
    steady = with_ragged(steady, verify_seconds=[rows[0]["target_step_seconds"]] + [9.0] * (n - 1))
    words = reading(steady)
    assert "The verify's cost ends the gain here" in words and "yield ends" not in words
    shrinking = with_ragged(stop, batch_tokens_per_round=[3.2] + [1.1] * (n - 1))
    shrinking = with_ragged(shrinking, verify_seconds=[r["target_step_seconds"] for r in rows])
    assert "The rounds' yield ends the gain here" in reading(shrinking)
    never = dict(SHIPPED, break_even_batch=None)
    assert "it still pays at γ" in reading(never) and "no longer pays" not in reading(never)


def test_a_result_shows_each_b_against_its_rows_alone_and_b1_through_both_paths(monkeypatch, tmp_path, tiny_result):
    """Version 3 (bench --batch now): the rows alone beside each B, in the chart, the table and the reading; at B = 1
    the single-row engine's and the batched path's repeats, so their spread shows."""
    (tmp_path / "batching_cpu.json").write_text(json.dumps(tiny_result))
    at = open_page(monkeypatch, tmp_path)
    rows = tiny_result["rows"]
    lengths = {t["name"].replace("<br>", " "): t["y"] for t in chart(at, "rounds")["data"]}
    assert lengths["the same rows, each decoded alone"] == [r["alone"]["tokens_per_round"] for r in rows]
    assert list(at.dataframe[0].value["… its rows alone"]) == [round(r["alone"]["tokens_per_round"], 2) for r in rows]
    words = texts(at)
    assert f"against {rows[-1]['alone']['tokens_per_round']:.2f} for the same rows decoded one at a time" in words
    engine = rows[0]["single_row_engine"]
    assert "The single-row engine on the same prompts: " + ", ".join(f"{v:.2f}×" for v in engine["speedups"]) in words
    assert "this batched path: " + ", ".join(f"{v:.2f}×" for v in engine["batched_speedups"]) in words
    own = {t["name"].replace("<br>", " "): t for t in chart(at, "curve")["data"]}
    marks = own[f"the same verify timed at its own shape, B rows of {tiny_result['gamma'] + 1}"]
    assert marks["y"] == [r["ragged"]["verify_seconds"] for r in rows]


def test_a_damaged_file_is_refused_and_the_good_one_shows(monkeypatch, tmp_path, tiny_result):
    (tmp_path / "batching_cpu.json").write_text(json.dumps(tiny_result))
    (tmp_path / "batching_cuda.json").write_text('{"format": "specviz-batching", "version": 1, "rows": "x"}')
    at = open_page(monkeypatch, tmp_path)
    assert any("cuda" in w.value and "not a usable" in w.value for w in at.warning)
    assert "recorded" in texts(at) and len(at.get("plotly_chart")) == 5
    table = at.dataframe[0].value
    assert list(table["B"]) == [1, 2, 4]


def test_a_live_run_shows_as_your_run(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path)  # nothing recorded here
    assert any("No recorded result" in i.value for i in at.info)
    at.text_input(key="batching.sizes").set_value("1,3")
    at.text_area(key="batching.prompts").set_value("abc\nhello there\nx")
    at.slider(key="batching.tokens").set_value(6)
    at.button(key="batching.run").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    job = at.session_state["state.batching"].job  # a background job, like every page's run
    assert job.join(120) and job.state == "done", (job.state, job.error)
    at.run()
    assert "your run" in texts(at)
    table = at.dataframe[0].value
    assert list(table["B"]) == [1, 3]
    assert all(table["greedy identical"])


def test_a_finished_run_is_shown_though_the_recording_was_selected(monkeypatch, tmp_path, tiny_result):
    (tmp_path / "batching_cpu.json").write_text(json.dumps(tiny_result))  # recorded at B = 1, 2, 4
    at = open_page(monkeypatch, tmp_path)
    at.text_input(key="batching.sizes").set_value("1,3")
    at.text_area(key="batching.prompts").set_value("abc\nx")
    at.slider(key="batching.tokens").set_value(4)
    at.button(key="batching.run").click().run()
    job = at.session_state["state.batching"].job
    assert job.join(120) and job.state == "done", (job.state, job.error)
    at.run()
    assert at.radio(key="batching.shown").value == "your run"
    at.radio(key="batching.shown").set_value("cpu").run()  # the reader goes back to the recording, then runs again
    assert list(at.dataframe[0].value["B"]) == [1, 2, 4]
    at.button(key="batching.run").click().run()
    job = at.session_state["state.batching"].job
    assert job.join(120) and job.state == "done", (job.state, job.error)
    at.run()
    assert at.radio(key="batching.shown").value == "your run" and list(at.dataframe[0].value["B"]) == [1, 3]


@pytest.mark.parametrize("sizes", ["0,2", "a,b", "1," + str(10**6)])
def test_bad_batch_sizes_give_an_error(monkeypatch, tmp_path, sizes):
    at = open_page(monkeypatch, tmp_path)
    at.text_input(key="batching.sizes").set_value(sizes).run()
    assert not at.exception, at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("Batch sizes: whole numbers from 1 to 64") and "takes" not in error
    assert at.button(key="batching.run").disabled


def test_a_prompt_over_the_limit_is_refused_in_one_line_before_the_run(monkeypatch, tmp_path):
    """Issue 44: it showed "Something went wrong on this page (PromptError...)" after taking the device's lock."""
    at = open_page(monkeypatch, tmp_path)
    at.text_area(key="batching.prompts").set_value("short one\n" + "x" * 8_001)
    at.button(key="batching.run").click().run()
    assert not at.exception, at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("Prompt 2 of 2 of the batch") and "went wrong" not in error and "\n" not in error
    assert at.session_state["state.batching"].job is None  # never started


def test_the_recorded_file_is_the_benchs_output(tmp_path):
    """The shipped file is what bench --batch writes (format, rows for B = 1, 2, 4, 8, 16)."""
    path = tmp_path / "copy.json"
    shutil.copy(ROOT / "assets" / "batching_cpu.json", path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "specviz-batching"
    assert [row["batch"] for row in doc["rows"]] == [1, 2, 4, 8, 16]


def test_the_readings_round_cost_prices_the_wide_first_draft_forward_as_often_as_a_row_accepted_all():
    from specviz.markup.batching import reading

    row = SHIPPED["rows"][0]
    step, verify, gamma = row["target_step_seconds"], row["ragged"]["verify_seconds"], SHIPPED["gamma"]
    a, draft, wide = row["ragged"]["acceptance"], row["draft_step_seconds"], row["draft_catch_up_seconds"]
    share = a**gamma  # B = 1: 1 - (1 - a^gamma)^1
    cost = (verify + gamma * draft + share * (wide - draft)) / step
    words = reading(SHIPPED)
    assert f"A round costs {cost:.2f} plain steps of the batch" in words
    assert f"the first one {wide:.3f} s in the {share:.0%} of rounds" in words
    older = dict(SHIPPED, rows=[{k: v for k, v in r.items() if k != "draft_catch_up_seconds"} for r in SHIPPED["rows"]])
    narrow = (verify + gamma * draft) / step  # a file without the catch-up timing: every draft step one token wide
    assert f"A round costs {narrow:.2f} plain steps" in reading(older) and "the first one" not in reading(older)


def test_the_gamma_chart_has_one_legend_entry_for_every_bs_star_and_it_names_no_b():
    from specviz.charts.batching import batch_gamma_figure

    rows = [dict(r, predicted_best_gamma=0) if i == 0 else r for i, r in enumerate(SHIPPED["rows"])]
    stars = [t for t in batch_gamma_figure(dict(SHIPPED, rows=rows)).data if t.legendgroup == "predicted"]
    assert len(stars) == sum(r["predicted_best_gamma"] > 0 for r in rows) >= 1  # off at B = 1: no star there
    assert [t.showlegend for t in stars] == [True] + [False] * (len(stars) - 1)
    assert "B =" not in stars[0].name


def test_the_latency_chart_writes_each_bs_best_gamma_under_it_off_where_the_table_says_0():
    """Each B's best γ under its tick, not beside its point in the plot (issue 55: 'γ = 2' and 'off off' were written
    over the lines and each other); nothing written in the plot."""
    from specviz.charts.batching import speedup_vs_batch_figure

    fig = speedup_vs_batch_figure(SHIPPED)
    rows = SHIPPED["rows"]
    assert list(fig.layout.xaxis.ticktext) == [
        f"{r['batch']}<br>γ {r['best_gamma']}" if r["best_gamma"] else f"{r['batch']}<br>off" for r in rows
    ]
    assert any(t.endswith("off") for t in fig.layout.xaxis.ticktext)  # the shipped recording has B where none pays
    assert not fig.layout.annotations and not any("text" in t.mode for t in fig.data)
