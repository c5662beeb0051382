"""Guided experiments and the slow-run explanation through AppTest, on the tiny random pair (SPECVIZ_PAIR=tiny).

Each experiment's button must leave exactly its settings in session state (and start the page's run where it has
one); a recorded run slower than plain decoding must carry its explanation and a rerun that applies the suggestion.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.lessons import advice, experiments
from specviz.traces.trace import load_trace
from specviz.ui.settings import widget_values

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
SLOW_TRACE = ROOT / "tests" / "data" / "tiny_trace.json"  # the tiny pair's run: slower than plain decoding


def start(monkeypatch, traces: Path) -> AppTest:
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(traces))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def finish(at: AppTest, page: str) -> None:
    job = at.session_state[f"state.{page}"].job
    assert job is not None, f"no run started on {page}"
    assert job.join(180), f"the {page} run did not finish"
    at.run()
    assert not at.exception, at.exception
    assert job.state == "done", job.error


def page_text(at: AppTest) -> str:
    """Everything the page shows but its answers: metrics, words, captions, tables, HTML, alerts."""
    parts = [f"{m.label} {m.value}" for m in at.metric] + [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [h.value for h in at.html] + [e.value for e in (*at.info, *at.error, *at.warning)]
    parts += [" ".join(str(v) for v in d.value.to_numpy().ravel()) for d in at.dataframe]
    parts += [s.value for s in at.subheader] + [f"{s.value:.2f}" for s in at.slider if isinstance(s.value, float)]
    return " ".join(str(p) for p in parts)


def markdown_of(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_a_slow_recorded_run_carries_its_explanation_and_the_suggested_rerun(monkeypatch, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(SLOW_TRACE, traces / "slow.json")
    slow = advice.explain_slow(load_trace(SLOW_TRACE))
    assert slow is not None and slow.measured < 1
    at = start(monkeypatch, traces)
    words = markdown_of(at)
    assert "Why was this run slower than plain decoding" in words
    assert f"({slow.measured:.2f}×)" in words and f"c = {slow.c:.2f}" in words
    assert f"predicts {slow.formula:.2f}×" in words and slow.suggestion.why in words
    button = at.button(key="step.suggested_rerun")
    assert button.label == slow.suggestion.label
    button.click().run()
    assert not at.exception, at.exception
    for name, value in slow.suggestion.settings:
        assert at.session_state[f"cfg.{name}"] == value
    trace = load_trace(SLOW_TRACE)
    assert (
        at.session_state["step.prompt"] == trace.prompt and at.session_state["cfg.gamma_max"] == trace.config.gamma_max
    )
    finish(at, "step")
    rerun = at.session_state["state.step"].trace
    assert rerun.prompt == trace.prompt and rerun.baseline_summary is not None
    for name, value in slow.suggestion.settings:
        assert getattr(rerun.config, name) == value


def test_a_fast_run_has_no_slow_explanation(monkeypatch, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(ROOT / "assets" / "traces" / "1_code_greedy.json", traces / "fast.json")
    at = start(monkeypatch, traces)
    assert "Why was this run slower" not in markdown_of(at)
    assert not [b for b in at.button if b.key == "step.suggested_rerun"]


@pytest.mark.parametrize("experiment", experiments.EXPERIMENTS, ids=lambda e: f"{e.page}-{e.id}")
def test_each_experiment_button_sets_its_settings(monkeypatch, tmp_path, experiment):
    at = start(monkeypatch, tmp_path / "no-traces")
    at.switch_page(experiments.PAGE_FILES[experiment.page]).run()
    assert not at.exception, at.exception
    assert experiment.observe not in markdown_of(at) + "".join(s.value for s in at.success)
    at.button(key=f"{experiment.page}.exp_{experiment.id}").click().run()
    assert not at.exception, at.exception
    for name, value in widget_values(experiment.values).items():  # a SpecConfig field: its sidebar widget's key
        assert at.session_state[name] == value, name
    state = at.session_state[f"state.{experiment.page}"]
    assert state.experiment == experiment.id
    if experiment.run:
        assert state.experiment_job is not None and state.experiment_job is state.job
        finish(at, experiment.page)
        runs = (
            [state.trace] if experiment.page in ("step", "race") else [getattr(r, "trace", None) for r in state.result]
        )
        runs = [t for t in runs if t is not None]  # Learning's rows are no traces (and it sets no sidebar setting)
        for trace in runs:  # the run itself used the sidebar's settings the button set
            for name, value in experiment.config.items():
                assert getattr(trace.config, name) == value, name
    answers = "".join(s.value for s in at.success)
    assert experiment.observe in answers and experiment.reason in answers
    # the computed answer quotes only numbers the page shows beside it (issue 55): its metrics, tables, words
    from specviz.ui.quoted import numbers_in

    said = answers.split(experiment.observe, 1)[1].split("**Why.**", 1)[0]
    assert numbers_in(said) <= numbers_in(page_text(at) + experiment.question), (said, numbers_in(said))


# --- recorded results on every page --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> Path:
    """A folder laid out as assets/ is, with recordings of the tiny pair: traces/, lab/, lossless/, experiments/."""
    from specviz.decoding.config import SpecConfig
    from specviz.lessons import lab, recorded
    from specviz.lessons.lossless import next_token_distributions
    from specviz.models.tiny import tiny_pair

    root = tmp_path_factory.mktemp("assets")
    pair = tiny_pair()
    origin = recorded.Recorded("tiny ← tiny+noise", "test CPU (2 CPUs)", "2026-12-01 11:00", "tests/ui/test_guided.py")
    for folder in ("traces", "lab", "lossless", "experiments"):
        (root / folder).mkdir()
    shutil.copy(SLOW_TRACE, root / "traces" / "tiny.json")
    shutil.copy(SLOW_TRACE, root / "experiments" / "identical.json")
    base = SpecConfig(gamma=3, max_new_tokens=8, record_top=0)
    plan = lab.plan_batch({"code": ["def f(x):"]}, ["code"], 1, [0.0, 1.0], ["model"], ["constant"], base)
    (root / "lab" / "batch.json").write_text(recorded.lab_to_json(origin, lab.run_batch(pair, plan, chat=False)))
    dist = next_token_distributions(pair, "def f(x):", SpecConfig(temperature=1.0, top_k=20), chat=False)
    text = recorded.lossless_to_json(origin, "def f(x):", "", dist, pair.token_text)
    (root / "lossless" / "tiny.json").write_text(text)
    return root


STREAM_REQUESTS = len(json.loads((ROOT / "assets" / "learning" / "inventory_drift.json").read_text())["requests"])


@pytest.mark.parametrize("page", list(experiments.PAGE_FILES))
def test_every_page_opens_on_a_recorded_result_and_says_whose(monkeypatch, recordings, page):
    at = start(monkeypatch, recordings / "traces")
    at.switch_page(experiments.PAGE_FILES[page]).run()
    assert not at.exception, at.exception
    if page in ("heads", "batching", "learning"):  # their recordings are the shipped ones, named in their own lines
        recorded = {
            "heads": lambda: sum(c.value.startswith("Recorded: ") for c in at.caption) == 2,
            "batching": lambda: any("<b>recorded</b>" in h.value for h in at.html),
            "learning": lambda: any(
                h.value.startswith(f"Recorded: {STREAM_REQUESTS} code-editing") for h in at.subheader
            ),
        }
        assert recorded[page](), page
        return
    banners = [i.value for i in at.info if "Recorded" in i.value]
    assert banners, [i.value for i in at.info]
    if page in ("lab", "lossless"):  # the recording's own origin: pair, machine, date
        assert all(part in banners[0] for part in ("tiny ← tiny+noise", "test CPU (2 CPUs)", "2026-12-01")), banners[0]
    shown = {
        "step": lambda: any("Round 1</b>" in h.value for h in at.html),
        "race": lambda: any(m.label == "Speed-up" for m in at.metric),
        "theory": lambda: any(d for d in at.dataframe),
        "lab": lambda: any("2 runs" in s.value for s in at.subheader),
        "lossless": lambda: any(m.label == "TV(speculative, p)" for m in at.metric),
    }
    assert shown[page](), page
