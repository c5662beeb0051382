"""The app's helpers outside Streamlit: lab aggregations, the lossless experiment, background jobs,
chart builders, and the HTML pieces (which must escape whatever text a model or a file brings)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest
import torch

from specviz import charts
from specviz.decoding.config import ConfigError, SpecConfig
from specviz.lessons import lab, theory
from specviz.lessons.lossless import LosslessError, lossless_experiment, next_token_distributions
from specviz.models.loading import PairSpec
from specviz.models.tiny import tiny_pair
from specviz.runs import device_lock, run_trace
from specviz.serving.jobs import OOM_ADVICE, describe_error, start_job
from specviz.serving.pairs import PairLoader
from specviz.traces.trace import TokenProb, load_trace

TINY_TRACE = Path(__file__).resolve().parents[1] / "data" / "tiny_trace.json"


@pytest.fixture(scope="module")
def trace():
    return load_trace(TINY_TRACE)


# --- lab ------------------------------------------------------------------------------------------


def test_acceptance_by_position_counts_only_checked_tokens(trace):
    stats = lab.acceptance_by_position([trace])
    checked = sum(1 for r in trace.rounds for d in r.drafted if d.verdict != "unchecked")
    accepted = sum(r.n_accepted for r in trace.rounds)
    assert sum(s.reached for s in stats) == checked
    assert sum(s.accepted for s in stats) == accepted == trace.summary.accepted
    assert stats[0].position == 1 and stats[0].reached == sum(1 for r in trace.rounds if r.drafted)
    assert all(s.reached >= t.reached for s, t in zip(stats, stats[1:], strict=False))  # fewer reach later positions


def test_token_origins_rebuild_the_output(trace):
    origins = lab.token_origins(trace.rounds)
    assert len(origins) == trace.summary.new_tokens
    assert "".join(t.text for t in origins) == trace.summary.text
    for event in trace.rounds:
        mine = [t for t in origins if t.round == event.index]
        assert [t.origin for t in mine[: event.n_accepted]] == ["accepted"] * event.n_accepted
        assert mine[-1].origin == event.next_source


def test_group_stats_pool_sums(trace):
    other = dataclasses.replace(trace, config=dataclasses.replace(trace.config, temperature=0.7))
    runs = [lab.LabRun("code", "p1", trace), lab.LabRun("code", "p2", other), lab.LabRun("prose", "p3", trace)]
    by_cat = {s.group: s for s in lab.group_stats(runs, lab.by_category)}
    assert by_cat["code"].runs == 2 and by_cat["code"].drafted == 2 * trace.summary.drafted
    assert by_cat["code"].acceptance_rate == pytest.approx(trace.summary.acceptance_rate)
    by_temp = [s.group for s in lab.group_stats(runs, lab.by_temperature)]
    assert by_temp == ["greedy (T=0)", "T=0.7"]


def test_plan_batch_covers_every_combination():
    prompts = {"code": ["a", "b", "c"], "prose": ["d"]}
    plan = lab.plan_batch(prompts, ["code", "prose"], 2, [0.0, 1.0], ["model", "ngram"], ["constant"], SpecConfig())
    assert len(plan) == (2 + 1) * 2 * 2
    assert {(p.config.temperature, p.config.drafter) for p in plan} == {
        (0.0, "model"),
        (0.0, "ngram"),
        (1.0, "model"),
        (1.0, "ngram"),
    }
    for planned in plan:
        planned.config.validate()


def test_run_batch_and_the_drafter_comparison(pair):
    prompts = {"repetition": ["abc abc abc abc"]}
    plan = lab.plan_batch(
        prompts, ["repetition"], 1, [0.0], ["model", "ngram"], ["constant", "adaptive"], SpecConfig(max_new_tokens=12)
    )
    seen = []
    runs = lab.run_batch(pair, plan, chat=False, on_progress=lambda i, n, p: seen.append((i, n)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)] and len(runs) == 4
    rows = lab.drafter_comparison(runs)
    assert len(rows) == 2 and {"draft model: acceptance", "n-gram lookup: acceptance"} <= set(rows[0])
    adaptive = [r for r in runs if r.trace.config.schedule == "adaptive"]
    assert all(lab.gamma_series(r.trace) for r in adaptive)


def test_run_batch_stops_when_cancelled(pair):
    cancel = threading.Event()
    cancel.set()
    plan = lab.plan_batch({"x": ["hello"]}, ["x"], 1, [0.0], ["model"], ["constant"], SpecConfig(max_new_tokens=4))
    assert lab.run_batch(pair, plan, chat=False, cancel=cancel) == []


def test_measured_point_matches_theory(trace):
    point = lab.measured_point(trace, "tiny")
    s = trace.summary
    g = s.drafted / s.rounds
    assert point.g == pytest.approx(g)
    assert point.a * (1 - point.a**g) / (1 - point.a) == pytest.approx(s.accepted / s.rounds, rel=1e-6)
    t_target = sum(e.seconds for e in trace.baseline) / len(trace.baseline)
    assert point.c == pytest.approx(s.draft_seconds / s.draft_forwards / t_target)
    assert point.predicted_speedup == pytest.approx(theory.speedup(point.a, g, point.c))
    assert point.measured_speedup == pytest.approx(s.tokens_per_second / trace.baseline_summary.tokens_per_second)


def test_measured_point_counts_only_the_chain_in_a(pair):
    config = SpecConfig(gamma=2, alternatives=3, max_new_tokens=40)
    with_alternatives = run_trace(pair, "def add(a, b):\n    return a + b\n\ndef add(a, b):", config, chat=False)
    kept = sum(r.kept_alternative is not None for r in with_alternatives.rounds)
    assert kept > 0
    s = with_alternatives.summary
    point = lab.measured_point(with_alternatives)
    assert point.a * (1 - point.a**point.g) / (1 - point.a) == pytest.approx((s.accepted - kept) / s.rounds, rel=1e-6)


def test_race_helpers(trace):
    assert lab.greedy_identity(trace).checked and lab.greedy_identity(trace).identical
    phases = lab.round_phases(trace)
    assert len(phases) == 2 * len(trace.rounds)
    assert all(p.start <= p.end for p in phases)
    times = [t.time for t in lab.speculative_timeline(trace)]
    assert times == sorted(times) and len(times) == trace.summary.new_tokens
    costs = lab.cost_breakdown(trace)
    assert costs.verify_in_steps is not None and costs.tokens_per_round == pytest.approx(
        trace.summary.new_tokens / trace.summary.rounds
    )
    different = dataclasses.replace(
        trace,
        baseline_summary=dataclasses.replace(
            trace.baseline_summary, token_ids=(0,) + trace.baseline_summary.token_ids[1:]
        ),
    )
    assert lab.greedy_identity(different).first_difference == 0


# --- lossless -------------------------------------------------------------------------------------


def test_lossless_experiment_is_exact_and_the_broken_one_is_not():
    pair = tiny_pair("abcde", seed=1, noise=0.6)  # a draft far from the target
    dist = next_token_distributions(pair, "abcab", SpecConfig(temperature=1.0), chat=False)
    good = lossless_experiment(dist, n=200_000, seed=0)
    bad = lossless_experiment(dist, n=200_000, seed=0, resample_residual=False)
    assert sum(good.spec_counts) == 200_000 and sum(good.p) == pytest.approx(1.0)
    assert good.acceptance == pytest.approx(1 - good.tv_pq)
    assert good.tv_pq > 0.1
    assert good.tv_spec < 3 * good.tv_direct + 0.005
    assert bad.tv_spec > 5 * good.tv_spec and bad.tv_spec > 0.03
    assert good.tv_draft == pytest.approx(good.tv_pq, abs=0.01)


def test_lossless_refuses_greedy(pair):
    with pytest.raises(LosslessError, match="greedy"):
        next_token_distributions(pair, "abc", SpecConfig(temperature=0.0), chat=False)


# --- jobs -----------------------------------------------------------------------------------------


def test_job_reports_user_errors_as_one_line():
    def work(job):
        SpecConfig(gamma=99).validate()

    job = start_job("t", work)
    assert job.join(10) and job.state == "failed"
    assert job.error.startswith("gamma must be between 1 and 32")


def test_out_of_memory_is_explained_and_the_cache_released(monkeypatch):
    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # so release_device_memory reaches empty_cache
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert describe_error(oom) == OOM_ADVICE
    assert len(emptied) == 1, "the advice says the memory was released: it must be"

    def work(job):
        raise oom

    job = start_job("t", work)
    assert job.join(10) and job.state == "failed" and "ran out of memory" in job.error
    assert len(emptied) == 2  # the job's failure path releases it too
    assert describe_error(RuntimeError("CUDA error: out of memory")) == OOM_ADVICE and len(emptied) == 3
    describe_error(ValueError("something else"))
    assert len(emptied) == 3  # any other error leaves the cache alone


def test_unexpected_errors_never_escape_a_job():
    job = start_job("t", lambda job: 1 / 0)
    assert job.join(10) and job.state == "failed" and "ZeroDivisionError" in job.error


def test_job_waits_for_a_held_lock_and_can_give_up():
    lock = threading.Lock()
    lock.acquire()
    job = start_job("t", lambda job: "ran", lock)
    time.sleep(0.5)
    assert job.state == "waiting"
    job.stop()
    assert job.join(5) and job.state == "cancelled" and job.result is None
    lock.release()
    job = start_job("t", lambda job: "ran", lock)
    assert job.join(5) and job.result == "ran"


def test_job_reports_the_wait_of_a_run(pair):
    """run_trace takes the device's lock itself; the job shows the wait through on_wait."""
    with device_lock(pair.device):
        job = start_job(
            "t",
            lambda job: run_trace(
                pair,
                "abc",
                SpecConfig(max_new_tokens=4),
                chat=False,
                cancel=job.cancel,
                on_event=job.on_event,
                on_wait=job.on_wait,
            ),
        )
        deadline = time.monotonic() + 5
        while job.state != "waiting" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.state == "waiting" and job.waited_seconds >= 0.4  # on_wait reports after each 0.5 s try
    assert job.join(30) and job.state == "done" and job.result.summary.new_tokens == 4


def test_pair_loader_tiny_override_and_errors():
    loader = PairLoader(PairSpec(), override="tiny")
    assert loader.wait(60) and loader.state == "ready" and loader.fraction == 1.0
    bad = PairLoader(PairSpec(target="/no/such/dir", draft=None, device="cpu"))
    assert bad.wait(60) and bad.state == "failed" and "/no/such/dir" in bad.error


# --- charts and HTML ------------------------------------------------------------------------------


def test_charts_build_from_a_trace(trace):
    rejected = next(r for r in trace.rounds if r.rejection_index is not None)
    figure = charts.next_token_figure(rejected)
    assert {d.name.replace("<br>", " ") for d in figure.data} == {
        "p (target)",
        "q (draft)",
        "residual norm(max(0, p−q))",
    }
    assert {d.name for d in charts.next_token_figure(rejected, greedy=True).data} == {"p (target)", "q (draft)"}
    assert len(charts.timeline_figure(trace).data) == 3
    assert len(charts.progress_figure(trace).data) == 2
    point = lab.measured_point(trace)
    speed = charts.speedup_figure(0.8, 4, 0.1, [point])
    assert any(d.name == "measured runs" for d in speed.data)
    assert any(d.name == "optimal γ = 6" for d in speed.data)
    expected = {d.name: d for d in charts.expected_tokens_figure(0.8, 4, [point]).data}
    assert {"γ = 1", "γ = 4", "measured runs", "your a, γ"} <= set(expected)
    assert float(expected["your a, γ"].y[0]) == pytest.approx((1 - 0.8**5) / (1 - 0.8))  # E = (1 - a^(γ+1)) / (1 - a)
    gamma_map = charts.optimal_gamma_map(0.8, 0.1)
    assert [d.type for d in gamma_map.data] == ["heatmap", "scatter"] and len(gamma_map.data[0].x) > 1
    assert float(gamma_map.data[1].x[0]) == pytest.approx(0.8) and float(gamma_map.data[1].y[0]) == pytest.approx(0.1)
    by_position = lab.acceptance_by_position([trace])
    bars = charts.position_figure(by_position).data
    assert len(bars) == 1 and bars[0].type == "bar" and len(bars[0].x) == len(by_position) > 0


def test_visible_whitespace():
    assert charts.visible(" the\n") == "␣the↵"
    assert charts.visible("") == "∅"


def test_html_pieces_escape_model_and_file_text(trace):
    from specviz import markup as ui

    evil = "<img src=x onerror=alert(1)>"
    event = trace.rounds[0]
    drafted = tuple(dataclasses.replace(d, text=evil) for d in event.drafted)
    event = dataclasses.replace(event, drafted=drafted, next_token=TokenProb(1, evil, 0.5))
    for html in (
        ui.round_chips_html(event, greedy=False),
        ui.text_html(evil, [event]),
        ui.kv_cache_html(event, len(trace.prompt_ids), "model"),
    ):
        assert "<img" not in html and "&lt;img" in html


def test_chips_show_the_numbers_and_verdicts(trace):
    from specviz import markup as ui

    event = next(r for r in trace.rounds if r.rejection_index is not None)
    sampled = dataclasses.replace(
        event, drafted=tuple(dataclasses.replace(d, u=0.5 if d.verdict != "unchecked" else None) for d in event.drafted)
    )
    html = ui.round_chips_html(sampled, greedy=False)
    assert html.count('class="sv-chip sv-rejected"') == 1
    assert html.count('class="sv-chip sv-accepted"') == event.n_accepted
    d = event.drafted[event.rejection_index]
    assert ui.fmt_prob(d.q) in html and ui.fmt_prob(d.p) in html and ui.fmt_prob(d.ratio) in html
    assert "↻ resampled" in html and ">u<" in html


def test_config_errors_reach_the_user_as_their_message():
    with pytest.raises(ConfigError) as err:
        SpecConfig(max_new_tokens=0).validate()
    assert describe_error(err.value) == str(err.value)


def test_the_answer_so_far_cannot_walk_around_the_prompt_limits(pair):
    from specviz.runs import PromptError

    config = SpecConfig(temperature=1.0)
    with pytest.raises(PromptError, match="the prompt and the answer so far are 8003 characters long"):
        next_token_distributions(pair, "abc", config, chat=False, answer_prefix="x" * 8000)
    assert next_token_distributions(pair, "abc", config, chat=False, answer_prefix="x" * 100) is not None
