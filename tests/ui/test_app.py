"""Every page of the app through streamlit.testing.v1.AppTest, with the tiny random pair injected
(SPECVIZ_PAIR=tiny), and the inputs a user can get wrong. Nothing here may show a traceback."""

from __future__ import annotations

import json
import time

import pytest
from helpers.app import APP, TINY_TRACE, finish, go, html_of, metric, settings_of, state, texts
from streamlit.testing.v1 import AppTest

from specviz.traces.trace import load_trace

# --- Step through ---------------------------------------------------------------------------------


def test_home_page_explains_and_offers_a_run(app):
    assert "A small model writes ahead" in app.title[0].value
    assert any("u_i \\le \\min" in x.value for x in app.latex)
    assert app.button(key="step.run").label == "Run"
    assert any("press **Run**" in i.value for i in app.info)  # no recorded run in this test


def test_step_run_shows_chips_verdicts_and_speedup(app):
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    trace = state(app, "step").trace
    assert trace.summary.new_tokens == 32 and trace.baseline_summary is not None
    assert metric(app, "Speed-up").endswith("×")
    assert metric(app, "New tokens") == "32"
    # Go to a round with a rejection, with the slider.
    k = next(r.index for r in trace.rounds if r.rejection_index is not None)
    app.slider(key="step.slider").set_value(k + 1).run()
    assert not app.exception
    page = html_of(app)
    rejected = trace.rounds[k]
    assert f"Round {k + 1}</b> of {len(trace.rounds)}" in page
    assert "✗ rejected" in page and 'class="sv-chip sv-rejected"' in page
    assert ("✓ accepted" in page) == (rejected.n_accepted > 0)
    assert "↻ correction: argmax p" in page  # greedy: the correction is argmax p
    assert "Target (p) cache" in page and "rolled back" in page
    assert 'class="sv-t sv-accepted' in page or 'class="sv-t sv-resampled' in page
    # A round where everything was accepted shows the bonus token.
    full = [r.index for r in trace.rounds if r.rejection_index is None and r.drafted]
    if full:
        app.slider(key="step.slider").set_value(full[0] + 1).run()
        assert "★ bonus" in html_of(app)


def test_a_run_that_drafted_nothing_shows_no_acceptance_rate(app):
    """max new tokens = 1: the one round is a plain step, so there is no rate (issue 55: it said 0%)."""
    from specviz import markup

    app.number_input(key="cfg.max_new_tokens").set_value(1).run()
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    assert state(app, "step").trace.summary.drafted == 0
    assert metric(app, "Acceptance rate") == "—"
    assert any(c.value == markup.A_BRIDGE for c in app.caption)  # the rate beside a, bridged on screen


def test_step_run_with_lookahead_marks_the_shared_draft_passes(app):
    app.slider(key="cfg.lookahead").set_value(8).run()
    app.text_area(key="step.prompt").input("abcabcabcabcabcabcabcabc").run()
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    trace = state(app, "step").trace
    assert trace.config.lookahead == 8
    shared = [r.index for r in trace.rounds if any(d.from_lookahead for d in r.drafted)]
    assert shared, "prompt lookup never scored a guess on a repetitive prompt"
    app.slider(key="step.slider").set_value(shared[0] + 1).run()
    page = html_of(app)
    assert " ⇢</span>" in page  # the chip's position label
    explanation = " ".join(m.value for m in app.markdown)
    assert "prompt lookup guessed how the text goes on" in explanation


def test_step_run_with_alternatives_shows_the_token_tree(app):
    app.slider(key="cfg.alternatives").set_value(3).run()
    app.number_input(key="cfg.gamma").set_value(1).run()  # every rejection is then at the last drafted token
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    trace = state(app, "step").trace
    assert trace.config.alternatives == 3
    kept = [r for r in trace.rounds if r.kept_alternative is not None]
    assert kept, "no round kept an alternative (the tiny pair's greedy run does): nothing to show"
    r = kept[0]
    app.slider(key="step.slider").set_value(r.index + 1).run()
    page = html_of(app)
    assert 'class="sv-branch"' in page and "d1 alt 1" in page and "sv-alt" in page and "alternative kept" in page
    explanation = " ".join(m.value for m in app.markdown)
    assert "also scored the draft's other candidates for its last position, 1" in explanation
    assert "was kept in place of the rejected draft" in explanation
    assert f"most likely token there is `{r.kept_alternative.text}`" in explanation


def test_step_buttons_move_between_rounds(app):
    app.button(key="step.run").click().run()
    finish(app, "step")
    assert state(app, "step").index == 0
    app.button(key="step.next").click().run()
    assert state(app, "step").index == 1
    app.button(key="step.last").click().run()
    n = len(state(app, "step").trace.rounds)
    assert state(app, "step").index == n - 1
    app.button(key="step.prev").click().run()
    assert state(app, "step").index == n - 2
    app.button(key="step.first").click().run()
    assert state(app, "step").index == 0
    app.button(key="step.play").click().run()
    assert state(app, "step").playing is True
    app.button(key="step.pause").click().run()
    assert state(app, "step").playing is False
    assert not app.exception


def test_stop_cancels_between_rounds_and_leaves_the_app_ready(app):
    app.number_input(key="cfg.max_new_tokens").set_value(1024).run()
    app.button(key="step.run").click().run()
    job = state(app, "step").job
    assert app.button(key="step.stop")  # the live panel with its Stop button
    app.button(key="step.stop").click().run()
    finish(app, "step")
    assert job.state == "cancelled"
    trace = state(app, "step").trace
    assert trace.summary.finish_reason == "cancelled" and trace.summary.new_tokens < 1024
    assert any("Stopped" in w.value for w in app.warning)
    # Ready again: a normal run works.
    app.number_input(key="cfg.max_new_tokens").set_value(16).run()
    app.button(key="step.run").click().run()
    assert finish(app, "step").state == "done"


def test_a_session_that_must_wait_for_the_models_says_so(app):
    from specviz import ui

    app.button(key="step.run").click().run()
    finish(app, "step")
    from specviz.runs import device_lock

    pair = ui.pair_loader(settings_of(app).spec).pair
    assert pair is not None
    with device_lock(pair.device):  # another session's run holds the processor
        app.button(key="step.run").click().run()
        job = state(app, "step").job
        deadline = time.monotonic() + 10
        while job.state != "waiting" and time.monotonic() < deadline:
            time.sleep(0.05)
        app.run()
        assert job.state == "waiting"
        assert any("Another run" in i.value and "waiting" in i.value for i in app.info)
    assert finish(app, "step").state == "done"


def test_recorded_run_shows_at_once(monkeypatch):
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(TINY_TRACE.parent))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert any("recorded run “tiny trace”" in s.value for s in at.subheader)
    prompt = " ".join(load_trace(TINY_TRACE).prompt.split())[:40]  # the run's own prompt, not the box's
    assert any("its prompt “" in i.value and prompt in i.value.replace("\\", "") for i in at.info)
    page = html_of(at)
    assert 'class="sv-chip sv-' in page and "Round 1</b>" in page
    assert metric(at, "Speed-up").endswith("×")  # the recording includes plain decoding


def test_download_then_upload_replays_without_models(app):
    data = TINY_TRACE.read_bytes()
    app.button(key="step.run")  # the page is there
    uploader = app.get("file_uploader")[0]
    uploader.set_value(("run.json", data, "application/json")).run()
    assert not app.exception
    assert any("uploaded run" in s.value for s in app.subheader)
    assert state(app, "step").trace == load_trace(TINY_TRACE)


def test_an_upload_is_read_once_not_on_every_rerun(app, monkeypatch):
    import specviz.ui.files as files

    reads = []
    monkeypatch.setattr(files, "load_trace", lambda source: reads.append(1) or load_trace(source))
    app.get("file_uploader")[0].set_value(("run.json", TINY_TRACE.read_bytes(), "application/json")).run()
    app.run()
    app.run()
    assert not app.exception and len(reads) == 1
    assert state(app, "step").trace == load_trace(TINY_TRACE)
    assert app.get("download_button")  # any run can be downloaded again


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not a JSON file"),
        (json.dumps({"hello": 1}).encode(), "not a specviz trace"),
        (json.dumps({"format": "specviz-trace", "version": 99}).encode(), "version 99"),
    ],
)
def test_bad_trace_upload_gives_an_error(app, content, message):
    app.get("file_uploader")[0].set_value(("bad.json", content, "application/json")).run()
    assert not app.exception
    errors = texts(app.error)
    assert any(message in e and "cannot be replayed" in e for e in errors), errors
    app.run()  # the reason stays while the file stays
    assert any(message in e and "cannot be replayed" in e for e in texts(app.error)), texts(app.error)
    app.button(key="step.run").click().run()  # still usable
    assert finish(app, "step").state == "done"


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt, message", [("", "the prompt is empty"), ("   ", "the prompt is empty"), ("x" * 8001, "the limit is 8000")]
)
def test_bad_prompts_give_an_error(app, prompt, message):
    app.text_area(key="step.prompt").set_value(prompt).run()
    app.button(key="step.run").click().run()
    assert not app.exception
    assert state(app, "step").job is None
    assert any(message in e for e in texts(app.error)), texts(app.error)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("cfg.gamma", 40, "gamma must be between 1 and 32"),
        ("cfg.gamma", 0, "gamma must be between 1 and 32"),
        ("cfg.max_new_tokens", 5000, "max new tokens must be between 1 and 1024"),
        ("cfg.top_k", -3, "top-k must be >= 0"),
    ],
)
def test_settings_out_of_range_give_an_error(app, key, value, message):
    app.number_input(key=key).set_value(value).run()
    assert not app.exception
    assert any(message in e for e in texts(app.sidebar.error)), texts(app.sidebar.error)
    app.button(key="step.run").click().run()
    assert state(app, "step").job is None
    assert any("Fix the settings" in e and message in e for e in texts(app.main.error))


def test_unknown_model_gives_an_error_and_the_app_stays_usable(app, monkeypatch):
    monkeypatch.delenv("SPECVIZ_PAIR")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    app.selectbox(key="cfg.preset").set_value("Custom: hub ids or local paths").run()
    app.text_input(key="cfg.custom_target").set_value("no-such-org/no-such-model-xyz").run()
    app.button(key="cfg.apply").click().run()
    from specviz import ui

    loader = ui.pair_loader(settings_of(app).spec)
    assert loader.wait(60)
    app.run()
    assert not app.exception
    assert loader.state == "failed" and "no-such-model-xyz" in loader.error
    assert any("could not be loaded" in e for e in texts(app.sidebar.error))
    app.button(key="step.run").click().run()
    assert not app.exception and state(app, "step").job is None
    assert any("could not be loaded" in e for e in texts(app.main.error))


# --- Race -----------------------------------------------------------------------------------------


def test_race_runs_both_and_checks_greedy_identity(app):
    go(app, "race")
    app.button(key="race.run").click().run()
    job = finish(app, "race")
    assert job.state == "done"
    trace = state(app, "race").trace
    assert trace.summary.token_ids == trace.baseline_summary.token_ids
    assert any("Identical texts" in s.value for s in app.success)
    assert metric(app, "Speed-up").endswith("×")
    assert metric(app, "Plain tok/s") != ""
    page = html_of(app)
    assert "Speculative decoding (draft + target)" in page and "Plain decoding (target alone)" in page
    assert len(app.get("plotly_chart")) == 2  # the phase timeline and tokens over time


# --- Acceptance lab -------------------------------------------------------------------------------


def test_lab_batch_tables_and_drafter_comparison(app):
    go(app, "acceptance_lab")
    app.multiselect(key="lab.categories").set_value(["code", "repetition"])
    app.multiselect(key="lab.schedules").set_value(["constant", "adaptive"])
    app.number_input(key="cfg.max_new_tokens").set_value(16).run()
    app.button(key="lab.run").click().run()
    job = finish(app, "lab")
    assert job.state == "done", job.error
    runs = state(app, "lab").result
    assert len(runs) == 2 * 2 * 2  # categories x drafters x schedules
    tables = app.dataframe
    assert len(tables[0].value) == 8 and "acceptance rate" in tables[0].value.columns
    comparison = tables[1].value
    assert "draft model: acceptance" in comparison.columns and "n-gram lookup: acceptance" in comparison.columns
    assert len(app.get("plotly_chart")) >= 5  # position, category, temperature, drafter, gamma
    assert 'class="sv-t sv-' in html_of(app)  # one run's text coloured by acceptance


# --- Lossless -------------------------------------------------------------------------------------


def test_lossless_matches_p_and_the_broken_variant_drifts(app):
    go(app, "lossless")
    app.button(key="lossless.run").click().run()
    assert finish(app, "lossless").state == "done"
    tv_spec = float(metric(app, "TV(speculative, p)"))
    tv_direct = float(metric(app, "TV(direct samples of p, p)"))
    tv_pq = float(metric(app, "TV(q, p) exact"))
    assert tv_pq > 0.05  # the draft really differs from the target
    assert tv_spec < max(2.5 * tv_direct, 0.02)
    assert any("match p" in s.value for s in app.success)
    app.slider(key="lossless.alternatives").set_value(2).run()  # recursive rejection sampling: still p
    assert not app.exception
    assert float(metric(app, "TV(speculative, p)")) < max(2.5 * tv_direct, 0.02)
    kept = float(metric(app, "P(kept) with 2 alternatives").rstrip("%"))
    assert kept > float(metric(app, "P(accept) exact").rstrip("%"))
    app.slider(key="lossless.alternatives").set_value(0).run()
    app.toggle(key="lossless.broken").set_value(True).run()
    assert not app.exception
    broken = float(metric(app, "TV(speculative, p)"))
    assert broken > 2 * tv_spec and broken > tv_direct
    assert any("Broken" in e for e in texts(app.error))


def test_lossless_greedy_sidebar_still_samples(app):
    assert app.session_state["cfg.temperature"] == 0.0
    go(app, "lossless")
    assert app.slider(key="lossless.temperature").value == 1.0


# --- every page renders on its own ---------------------------------------------------------------


@pytest.mark.parametrize(
    "page, title",
    [
        ("step_through", "A small model"),
        ("race", "Race"),
        ("theory", "Theory"),
        ("acceptance_lab", "Acceptance lab"),
        ("lossless", "Lossless"),
        ("learning", "learns from the requests"),
        ("batching", "Batching"),
    ],
)
def test_every_page_renders(app, page, title):
    go(app, page)
    assert title in app.title[0].value
    assert app.sidebar.selectbox(key="cfg.preset")  # the shared sidebar is on every page


def test_a_run_that_fails_shows_its_message_and_the_app_stays_usable(app, monkeypatch):
    from specviz.decoding.engine import EngineError
    from specviz.ui import runner

    def failing(*args, **kwargs):
        raise EngineError("this pair has no draft model: choose the n-gram drafter or load a draft model")

    real = runner.run_trace
    monkeypatch.setattr(runner, "run_trace", failing)
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "failed"
    assert any("no draft model" in e for e in texts(app.error))
    app.run()
    assert any("no draft model" in e for e in texts(app.error))  # it stays until the next run
    monkeypatch.setattr(runner, "run_trace", real)
    app.button(key="step.run").click().run()
    assert finish(app, "step").state == "done"
    assert not any("no draft model" in e for e in texts(app.error))


# --- the prompt picker ----------------------------------------------------------------------------


def test_own_prompt_shows_in_the_example_boxes(app):
    from specviz.ui import load_prompts
    from specviz.ui.prompt import NO_EXAMPLE, OWN_CATEGORY

    prompts = load_prompts()
    first, second = list(prompts)[:2]
    category, example = app.selectbox(key="step.category"), app.selectbox(key="step.example")
    assert category.value == first and example.value == prompts[first][0]
    app.text_area(key="step.prompt").input("My own words, not an example.").run()
    assert not app.exception
    category, example = app.selectbox(key="step.category"), app.selectbox(key="step.example")
    assert category.value is None and example.value is None  # no stale "code" any more
    assert category.proto.placeholder == OWN_CATEGORY and example.proto.placeholder == NO_EXAMPLE
    app.selectbox(key="step.category").set_value(second).run()  # a category brings its first example back
    assert app.text_area(key="step.prompt").value == prompts[second][0]
    assert app.selectbox(key="step.example").value == prompts[second][0]
    app.text_area(key="step.prompt").input(prompts[first][-1]).run()  # typing an example's text selects it
    assert app.selectbox(key="step.category").value == first
    assert app.selectbox(key="step.example").value == prompts[first][-1]
    go(app, "race")  # the prompt and its boxes follow to other pages
    assert app.text_area(key="race.prompt").value == prompts[first][-1]
    assert app.selectbox(key="race.category").value == first


def test_a_hostile_upload_draws_no_markup_of_its_own(app):
    """Strings where numbers and verdicts belong, markup in token text: either the loader refuses the file, or
    every view shows the values as text (issue 14: an upload once drew a full-page link over the app)."""
    evil = '"><a href=x style="position:fixed;inset:0">'
    data = json.loads(TINY_TRACE.read_text())
    first = data["rounds"][0]
    first["gamma"], first["drafted"][0]["verdict"], first["drafted"][0]["text"] = evil, evil, "<script>x</script>"
    first["next_token"]["text"], data["pair"]["target"] = evil, evil
    app.get("file_uploader")[0].set_value(("evil.json", json.dumps(data).encode(), "application/json")).run()
    assert not app.exception
    page = html_of(app).lower()
    assert "<a " not in page and "<script" not in page
    refused = any("cannot be replayed" in e for e in texts(app.error))
    assert refused or any("uploaded run" in s.value for s in app.subheader)


def test_a_long_replay_is_sped_up_to_end_within_two_minutes():
    from specviz.ui.race import MAX_REPLAY_SECONDS, replay_speed

    assert replay_speed(1.0, 30.0) == 1.0 and replay_speed(5.0, 300.0) == 5.0
    assert replay_speed(1.0, 86_400.0) * MAX_REPLAY_SECONDS == 86_400.0  # a day-long trace replays in 2 minutes
