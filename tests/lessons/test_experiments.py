"""The slow-run advice (lessons/advice.py) and the guided experiments' data (lessons/experiments.py): the rules,
the numbers the Theory experiments quote, and the Step through and Race experiments' observations on the runs
recorded for them on the built-in pair (assets/experiments/, scripts/record_assets.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specviz.lessons import advice, experiments, theory
from specviz.runs import speedup
from specviz.traces.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
CURVE = theory.load_verify_curve(ROOT / "assets" / "verify_curve_cpu.json")
RECORDED = ROOT / "assets" / "experiments"
FAST = load_trace(ROOT / "assets" / "traces" / "1_code_greedy.json")


def slowed(trace, factor: float):
    """The same run with plain decoding `factor` times as fast as the speculative run."""
    base = dataclasses.replace(trace.baseline_summary, tokens_per_second=trace.summary.tokens_per_second * factor)
    return dataclasses.replace(trace, baseline_summary=base)


# --- advice -----------------------------------------------------------------------------------------------


def test_a_fast_run_or_one_without_plain_decoding_needs_no_explanation():
    assert speedup(FAST) > 1 and advice.explain_slow(FAST) is None
    assert advice.explain_slow(dataclasses.replace(FAST, baseline=(), baseline_summary=None)) is None


def test_a_slow_run_is_explained_from_its_own_numbers():
    trace = slowed(FAST, 1.25)
    slow = advice.explain_slow(trace)
    assert slow is not None and slow.measured == pytest.approx(0.8)
    assert slow.acceptance_rate == trace.summary.acceptance_rate
    assert slow.gamma == trace.summary.drafted / trace.summary.rounds
    assert 0 < slow.a < 1 and slow.c > 0 and slow.verify_steps > 0
    # Leviathan et al.'s formula for a whole γ, and the measured verify cost in place of its 1.
    assert advice.predicted(slow.a, 5, slow.c, 1.0) == pytest.approx(theory.speedup(slow.a, 5, slow.c))
    assert slow.with_verify == pytest.approx(
        slow.formula / (slow.gamma * slow.c + slow.verify_steps) * (slow.gamma * slow.c + 1)
    )
    assert slow.best_with_verify == max(advice.predicted(slow.a, g, slow.c, slow.verify_steps) for g in range(1, 17))


@pytest.mark.parametrize("a", [0.05, 0.3, 0.6, 0.9])
@pytest.mark.parametrize("c", [0.0, 0.05, 0.3, 1.0])
@pytest.mark.parametrize("v", [1.0, 1.5])
def test_best_gamma_is_the_best_of_all_gammas(a, c, v):
    best = advice.best_gamma(a, c, v)
    assert all(advice.predicted(a, best, c, v) >= advice.predicted(a, g, c, v) for g in range(1, 17))


def config_trace(**changes):
    return dataclasses.replace(FAST, config=dataclasses.replace(FAST.config, **changes))


@pytest.mark.parametrize(
    "changes, a, best, best_speedup, settings",
    [
        ({"drafter": "ngram"}, 0.1, 5, 0.9, (("drafter", "model"),)),  # 1. n-gram found little to copy
        ({}, 0.5, 2, 1.3, (("gamma", 2), ("schedule", "constant"))),  # 2. a shorter γ pays
        ({}, 0.2, 1, 0.7, (("schedule", "auto"),)),  # 3. nothing pays: auto
        ({"schedule": "auto"}, 0.2, 1, 0.7, (("drafter", "ngram"), ("schedule", "constant"))),  # ... auto ran: n-gram
        ({}, 0.8, 6, 1.8, (("draft_confidence", advice.CONFIDENCE_STOP),)),  # 4. it should have paid
        ({"draft_confidence": 0.5}, 0.8, 6, 1.8, (("schedule", "adaptive"),)),  # ... a stop ran already
    ],
)
def test_the_rules_pick_one_rerun(changes, a, best, best_speedup, settings):
    suggestion = advice.suggest(config_trace(**changes), a, best, best_speedup)
    assert suggestion.settings == settings and suggestion.label and suggestion.why


def test_the_tiny_pairs_slow_run_gets_the_auto_schedule():
    slow = advice.explain_slow(load_trace(ROOT / "tests" / "data" / "tiny_trace.json"))
    assert slow is not None and slow.best_with_verify < advice.PAYS
    assert dict(slow.suggestion.settings) == {"schedule": "auto"}


def test_the_words_quote_the_runs_numbers():
    from specviz import markup

    slow = advice.explain_slow(slowed(FAST, 1.25))
    words = markup.slow_run_markdown(slow)
    for number in (f"{slow.measured:.2f}×", f"c = {slow.c:.2f}", f"{slow.formula:.2f}×", f"{slow.with_verify:.2f}×"):
        assert number in words
    assert f"best γ is {slow.best_gamma}" in words and slow.suggestion.why in words


# --- the experiments' data ----------------------------------------------------------------------------------


def test_every_page_has_three_experiments_with_unique_ids_and_the_path_exists():
    ids = [e.id for e in experiments.EXPERIMENTS]
    assert len(ids) == len(set(ids))
    for page in experiments.PAGE_FILES:
        assert len(experiments.for_page(page)) >= 3, page
        assert (ROOT / experiments.PAGE_FILES[page]).is_file()
    assert experiments.PATH and all(experiments.by_id(i) for i in experiments.PATH)
    assert {experiments.by_id(i).page for i in experiments.PATH} == set(experiments.PAGE_FILES)


def test_the_readme_counts_the_path_and_the_pages_as_they_are():
    words = "zero one two three four five six seven eight nine ten eleven twelve".split()  # words[n] names n
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    stated = f"links {words[len(experiments.PATH)]} of them, across all {words[len(experiments.PAGE_FILES)]} pages"
    assert stated in readme


def test_experiments_set_only_settings_that_exist():
    """A sidebar setting is named by its SpecConfig field, which the ui maps to a widget it shows; the rest are the
    page's own widgets."""
    from specviz.ui.settings import DEFAULTS, config_key

    for e in experiments.EXPERIMENTS:
        for name, value in e.settings:
            if experiments.is_config(name):
                widget = config_key(name).partition(".")[2]
                assert type(value) is type(DEFAULTS[widget]), name
            else:
                assert name.partition(".")[0] == e.page, name


def test_an_experiment_that_names_a_widget_key_of_the_sidebar_is_refused():
    """The negative control of the test above: the sidebar's own keys ("cfg.gamma") are the ui's, not the lessons'."""
    with pytest.raises(ValueError, match="'cfg.gamma' is neither a SpecConfig field nor this page's"):
        experiments.Experiment("x", "step", "?", (("cfg.gamma", 5),), "", "")
    with pytest.raises(ValueError, match="'race.prompt' is neither"):
        experiments.Experiment("x", "step", "?", (("race.prompt", "p"),), "", "")
    from specviz.ui.settings import config_key

    with pytest.raises(KeyError, match="no widget for SpecConfig.record_top"):
        config_key("record_top")


def test_the_one_table_of_pages_is_the_apps_navigation_and_the_experiments_pages():
    """app.py's navigation and the experiments read experiments.PAGES: every page file is in it once, by its title."""
    import ast

    app = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    assert not [n.value for n in ast.walk(app) if isinstance(n, ast.Constant) and str(n.value).startswith("pages/")]
    paths = [p.path for p in experiments.PAGES]
    assert sorted(paths) == sorted(f"pages/{f.name}" for f in (ROOT / "pages").glob("*.py")) and len(set(paths)) == len(
        paths
    )
    for page in experiments.PAGES:
        source = (ROOT / page.path).read_text(encoding="utf-8")
        assert not page.name or f'PAGE = "{page.name}"' in source, page  # its widgets' keys: "<name>.<widget>"
    assert experiments.PAGE_TITLES == {p.name: p.title for p in experiments.PAGES if p.name}


# --- the observations, on the built-in pair's recorded runs --------------------------------------------------


def recorded(experiment_id: str):
    path = RECORDED / f"{experiment_id}.json"
    if not path.is_file():
        pytest.skip(f"{path} not recorded (scripts/record_assets.py)")
    return load_trace(path)


def test_the_recorded_runs_are_the_experiments_settings():
    from scripts.record_assets import config_of

    for e in experiments.EXPERIMENTS:
        if e.page in ("step", "race") and (RECORDED / f"{e.id}.json").is_file():
            trace = recorded(e.id)
            assert trace.config == config_of(e) and trace.prompt == e.values[f"{e.page}.prompt"]


def test_step_observations_hold_on_the_recorded_runs():
    code = recorded("identical")  # the same code prompt, greedy, γ 5
    prose = recorded("prose_defaults")
    assert prose.summary.acceptance_rate < code.summary.acceptance_rate
    hot = recorded("temperature")
    assert hot.summary.acceptance_rate < code.summary.acceptance_rate
    assert any(r.next_source == "resampled" for r in hot.rounds)
    rename = recorded("ngram_rename")
    assert any(r.drafted and r.rejection_index is None for r in rename.rounds)  # a whole draft kept, then a bonus
    assert any(not r.drafted or r.rejection_index == 0 for r in rename.rounds)  # nothing to copy, or wrong at once


def test_race_observations_hold_on_the_recorded_runs():
    identical = recorded("identical")
    assert identical.summary.token_ids == identical.baseline_summary.token_ids
    assert speedup(recorded("rename_auto")) > 2
    assert speedup(recorded("prose_long")) < speedup(recorded("rename_auto")) / 2


def pct(x: float) -> str:
    return f"{x:.0%}"


def lab_batch():
    from specviz.lessons import recorded as recordings

    path = ROOT / "assets" / "lab" / "batch.json"
    if not path.is_file():
        pytest.skip(f"{path} not recorded (scripts/record_assets.py)")
    return recordings.load_lab(path)


# --- Heads and Batching: the numbers quoted are the shipped recordings ----------------------------------------


def batching_cpu() -> dict:
    from specviz.traces.batching import load_batching

    return load_batching(ROOT / "assets" / "batching_cpu.json")


# --- Learning: the numbers quoted are the shipped recordings (assets/learning/) --------------------------------


def learning(name: str) -> dict:
    from specviz.bench.stream import load_stream_result

    return load_stream_result(ROOT / "assets" / "learning" / f"{name}.json")


def accepted(rows: list[dict], drafter: str) -> float:
    return sum(r[drafter]["mean_accepted_per_round"] for r in rows) / len(rows)


def hits(rows: list[dict]) -> str:
    return pct(sum(r["store"]["hit_rate"] for r in rows) / len(rows))


def test_the_learning_experiments_change_only_the_learning_page():
    """The recorded stream answers two of them (nothing to set); the third fills this page's form, never the sidebar
    or the shipped stream (a 'Set it' that started the 32-request stream with other settings was found)."""
    for e in experiments.for_page("learning"):
        assert all(name.startswith("learning.") for name, _ in e.settings), e.id
        assert e.values.get("learning.what") in (None, "mine"), e.id
    assert experiments.by_id("learning_bench").values["learning.what"] == "mine"
    for name in ("inventory_drift", "bench_prompts_amx"):
        config = learning(name)["config"]
        for setting, value in experiments.LEARNING_RECORDED:
            assert config[setting] == value, (name, setting)


def test_set_it_says_what_it_changes_and_where():
    """The button's words name every setting it sets, the sidebar's (every page) apart from the page's own."""
    for e in experiments.EXPERIMENTS:
        words = experiments.changes_words(e)
        sidebar = list(e.config)
        assert ("in the sidebar, for every page" in words) == bool(sidebar), e.id
        assert words.count("=") == len(e.settings), (e.id, words)
    assert experiments.changes_words(experiments.by_id("heads_medusa_k")) == (
        "Sets on this page kind of heads = medusa, number of heads = 4."
    )


@pytest.mark.parametrize(
    "measured, formula, with_verify, words",
    [
        (0.65, 0.62, 0.50, ("about the same as the first and better than the second", "gained more")),  # issue 55
        (0.70, 0.62, 0.50, ("better than the first and better than the second", "gained more")),
        (0.50, 0.62, 0.66, ("worse than the first and worse than the second", "outside the formula")),
        (0.60, 0.62, 0.50, ("about the same as the first and better than the second", "gained more")),
        (0.50, 0.62, 0.51, ("worse than the first and about the same as the second", "explains it")),
        (0.56, 0.50, 0.62, ("better than the first and worse than the second", "outside the formula")),
    ],
)
def test_the_why_box_compares_as_the_numbers_do(measured, formula, with_verify, words):
    """'Better', 'worse' or 'about the same' (within advice.ABOUT of the prediction) follow the numbers: the box once
    said 'the measured 0.65× is no better' beside predictions of 0.62× and 0.50×."""
    from specviz import markup

    slow = dataclasses.replace(
        advice.explain_slow(slowed(FAST, 1.25)), measured=measured, formula=formula, with_verify=with_verify
    )
    text = " ".join(markup.slow_run_markdown(slow).split())
    for expected in words:
        assert expected in text, (expected, text)
    assert "no better" not in text
    assert advice.compared(1.0, 0.96) == "about the same" and advice.compared(1.0, 0.94) == "better"
    assert advice.compared(0.9, 0.96) == "worse" and advice.ABOUT == 0.05


def test_on_the_shipped_recordings_the_answers_say_what_they_show():
    """Each answer computed from the recording its page opens on (or the experiment's recorded run, as if it were a
    live one) gives the verdict that recording supports (tests/lessons/test_answers.py tries both sides of each)."""
    from specviz.drafters.heads_report import RECORDED as HEADS
    from specviz.drafters.heads_report import load_report
    from specviz.lessons import answers
    from specviz.lessons.screen import Screen
    from specviz.traces.batching import load_batching

    recordings = {name: recorded(name) for name in ("identical", "prose_defaults", "temperature", "prose_long")}
    recordings["rename_auto"] = recorded("rename_auto")

    def said(experiment_id: str, screen: Screen) -> str:
        return " ".join(answers.answer(experiment_id, screen).split())

    assert "fewer drafts kept than on code" in said("prose_defaults", Screen(recordings["prose_defaults"], recordings))
    assert "lower than greedy" in said("temperature", Screen(recordings["temperature"], recordings))
    assert "a few rounds kept the whole draft" in said("ngram_rename", Screen(recorded("ngram_rename")))
    assert "Identical" in said("identical", Screen(recordings["identical"]))
    assert "plain decoding won" in said("prose_long", Screen(recordings["prose_long"], recordings))
    assert "Here speculation won: Speed-up 2.70×" in said("rename_auto", Screen(recordings["rename_auto"], recordings))
    runs = lab_batch().runs
    assert "code kept more" in said("lab_temperature", Screen(runs=runs))
    assert "No steady fall" in said("lab_position", Screen(runs=runs))
    heads = Screen(data={kind: load_report(HEADS[kind]) for kind in ("medusa", "eagle")})
    assert "falls at every head" in said("heads_medusa_k", heads)
    assert "EAGLE ahead" in said("heads_medusa_eagle", heads)
    batching = Screen(data=load_batching(ROOT / "assets" / "batching_cpu.json"))
    assert said("batching_break_even", batching).startswith("At B = 4")
    assert "Plain decoding serves more" in said("batching_throughput", batching)
    assert said("batching_knee", batching).startswith("After about 6 tokens")
    data = {"stream": learning("inventory_drift"), "bench": learning("bench_prompts_amx")}
    assert said("learning_traffic_learns", Screen(data=data)).startswith("It does")
    assert "At request 17 it falls" in said("learning_drift", Screen(data=data))
    assert said("learning_bench", Screen(data=data)).startswith("The draft model, every time")
    theory_screen = Screen(values=dict(experiments.by_id("gamma8_threshold").values), data=CURVE)
    assert "this is where γ 8 stops paying" in said("gamma8_threshold", theory_screen)
    cheap = Screen(values=dict(experiments.by_id("cheap_draft").values))
    assert "the optimal γ is 13" in said("cheap_draft", cheap) and "γ is set there" in said("cheap_draft", cheap)
    assert said("prose_gamma", Screen(values=dict(experiments.by_id("prose_gamma").values))).startswith("No: γ 8")
