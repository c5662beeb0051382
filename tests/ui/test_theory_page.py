"""The Theory page against the benchmark's measured verify-cost curve: the speed-up predicted from measured
times (specviz.lessons.theory), its charts, and the page through AppTest with the real curve, with none and with a
damaged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.app import APP, ROOT, finish, go, state
from streamlit.testing.v1 import AppTest

from specviz import charts, markup, ui
from specviz.lessons import lab, theory
from specviz.lessons.advisor import advise

REAL_CURVE = ROOT / "assets" / "verify_curve_cpu.json"
A_GRID = [0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]
C_GRID = [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8]


def make_curve(target_seconds: list[float], draft: float | None) -> dict:
    """A curve as the benchmark saves one, reduced to what the theory reads."""
    return {
        "format": "specviz-verify-curve",
        "version": 1,
        "device": "cpu",
        "target_seconds": target_seconds,
        "target_step_seconds": target_seconds[0],
        "draft_step_seconds": draft,
    }


def flat(c: float, step: float = 1.0) -> dict:
    """Leviathan's assumption, measured: every verify costs one target step, whatever g."""
    return make_curve([step] * 9, c * step)


def linear(c: float, s: float, step: float = 1.0) -> dict:
    """A verify that costs s more target steps for every drafted token it checks."""
    return make_curve([step * (1 + s * g) for g in range(9)], c * step)


# --- the theory -----------------------------------------------------------------------------------


@pytest.mark.parametrize("a", A_GRID)
@pytest.mark.parametrize("c", C_GRID)
def test_flat_curve_is_leviathans_formula(a, c):
    curve = flat(c)  # a step of 1 s: the same arithmetic, to the bit
    assert theory.measured_optimal_gamma(a, curve, 16) == theory.optimal_gamma(a, c, 16)
    scaled = flat(c, step=0.237)  # the unit of time does not matter
    for g in range(1, 17):
        assert theory.measured_speedup(a, g, scaled) == pytest.approx(theory.speedup(a, g, c), rel=1e-12)
    best = theory.measured_optimal_gamma(a, scaled, 16)
    assert theory.speedup(a, best, c) == pytest.approx(theory.speedup(a, theory.optimal_gamma(a, c, 16), c), rel=1e-12)


@pytest.mark.parametrize("a", A_GRID)
@pytest.mark.parametrize("c", C_GRID)
@pytest.mark.parametrize("s", [0.05, 0.2, 0.5])
def test_a_verify_that_grows_per_token_acts_like_a_larger_c(a, c, s):
    curve = linear(c, s)
    for g in range(1, 17):  # past the 9 measured points too (linear extension)
        assert theory.measured_speedup(a, g, curve) == pytest.approx(theory.speedup(a, g, c + s), rel=1e-12)
    best = theory.measured_optimal_gamma(a, curve, 16)
    assert best <= theory.optimal_gamma(a, c, 16)
    assert theory.measured_speedup(a, best, curve) == pytest.approx(
        max(theory.speedup(a, g, c + s) for g in range(1, 17)), rel=1e-12
    )


def test_a_steep_verify_curve_shortens_the_best_draft():
    assert theory.optimal_gamma(0.8, 0.1, 16) == 6
    assert theory.measured_optimal_gamma(0.8, linear(0.1, 0.3), 16) == theory.optimal_gamma(0.8, 0.4, 16) == 2


@pytest.mark.parametrize("a", A_GRID)
@pytest.mark.parametrize("c", [0.02, 0.1, 0.3])
def test_a_fixed_extra_cost_per_verify_lengthens_the_best_draft(a, c):
    """Every verify costs k steps, whatever g: shared by more tokens when g is larger."""
    k = 2.5
    curve = make_curve([1.0] + [k] * 8, c)
    best = theory.measured_optimal_gamma(a, curve, 16)
    assert best >= theory.optimal_gamma(a, c, 16)
    assert best == theory.optimal_gamma(a, c / k, 16)  # E / (g c + k) = speedup(a, g, c / k) / k


@pytest.mark.parametrize("a", [0.3, 0.6, 0.8, 0.9, 0.99])
def test_measured_optimum_is_the_best_of_all_gammas(a):
    curve = theory.load_verify_curve(REAL_CURVE)
    assert curve is not None, "assets/verify_curve_cpu.json is missing or damaged"
    values = [theory.measured_speedup(a, g, curve) for g in range(1, 17)]
    assert theory.measured_speedup_curve(a, curve, range(1, 17)) == values
    best = theory.measured_optimal_gamma(a, curve, 16)
    assert values[best - 1] == max(values) and values.index(max(values)) == best - 1  # the first on a tie


def test_cost_ratio_and_verify_ratios_from_the_real_curve():
    curve = theory.load_verify_curve(REAL_CURVE)
    assert theory.measured_cost_ratio(curve) == pytest.approx(curve["cost_ratio_c"])
    assert theory.verify_cost_ratios(curve, range(len(curve["target_seconds"]))) == pytest.approx(
        curve["relative_to_one_token"]
    )
    assert theory.measured_cost_ratio(make_curve([1.0, 2.0], None)) is None


@pytest.mark.parametrize(
    "change",
    [
        {"format": "something-else"},
        {"target_seconds": []},
        {"target_seconds": "0.2"},
        {"target_seconds": [0.2, -0.1]},
        {"target_seconds": [0.2, float("nan")]},
        {"target_seconds": [0.2, True]},
        {"target_seconds": [0.2, "0.3"]},
        {"target_step_seconds": 0},
        {"target_step_seconds": None},
        {"draft_step_seconds": "fast"},
        {"draft_step_seconds": float("inf")},
    ],
)
def test_a_damaged_curve_is_not_loaded(tmp_path, change):
    path = tmp_path / "verify_curve_cpu.json"
    path.write_text(json.dumps({**make_curve([0.2, 0.25], 0.03), **change}))
    assert theory.load_verify_curve(path) is None


def test_curve_files_that_load(tmp_path):
    assert theory.load_verify_curve(tmp_path / "missing.json") is None
    (tmp_path / "broken.json").write_text("{not json")
    assert theory.load_verify_curve(tmp_path / "broken.json") is None
    (tmp_path / "list.json").write_text("[1, 2]")
    assert theory.load_verify_curve(tmp_path / "list.json") is None
    (tmp_path / "nodraft.json").write_text(json.dumps(make_curve([0.2, 0.25], None)))
    assert theory.load_verify_curve(tmp_path / "nodraft.json") is not None
    assert theory.load_verify_curve(REAL_CURVE)["target_seconds"]


# --- the charts -----------------------------------------------------------------------------------


def by_name(fig) -> dict:
    return {trace.name.replace("<br>", " "): trace for trace in fig.data}  # a long legend entry wraps


def test_verify_curve_figure_draws_the_assumption_and_the_draft_step():
    curve = theory.load_verify_curve(REAL_CURVE)
    traces = by_name(charts.verify_curve_figure(curve))
    assumption = traces["Leviathan's assumption: a verify costs one step"]
    assert set(assumption.y) == {1.0} and assumption.line.dash == "dash"
    c = theory.measured_cost_ratio(curve)
    assert set(traces[f"one draft step: c = {c:.3f}"].y) == {c}
    measured = traces["verify, measured"]
    assert list(measured.x) == [g + 1 for g in range(len(curve["target_seconds"]))]  # tokens verified: g + 1
    assert list(measured.y) == pytest.approx(curve["relative_to_one_token"])
    assert max(traces["extended linearly past the measured end"].x) == 17  # up to gamma 16
    without_draft = by_name(charts.verify_curve_figure(make_curve([0.2, 0.3], None)))
    assert not any(name.startswith("one draft step") for name in without_draft)


def test_speedup_figure_adds_the_measured_prediction():
    curve = theory.load_verify_curve(REAL_CURVE)
    a = 0.9
    plain = by_name(charts.speedup_figure(a, 4, 0.1))
    traces = by_name(charts.speedup_figure(a, 4, 0.1, curve=curve))
    added = set(traces) - set(plain)
    best = theory.measured_optimal_gamma(a, curve, 16)
    line = next(name for name in added if name.startswith("measured times"))
    assert list(traces[line].y) == theory.measured_speedup_curve(a, curve, range(1, 17))
    assert list(traces[f"measured optimal γ = {best}"].x) == [best]
    assert len(added) == 2
    no_draft = by_name(charts.speedup_figure(a, 4, 0.1, curve=make_curve([0.2, 0.3], None)))
    assert set(no_draft) == set(plain)  # no draft time, no measured speed-up


# --- the page -------------------------------------------------------------------------------------


def theory_page(monkeypatch, tmp_path, curves_dir: Path | None) -> AppTest:
    """The Theory page on the tiny pair; curves_dir=None leaves the real assets/ folder."""
    monkeypatch.setenv("SPECVIZ_PAIR", "tiny")
    monkeypatch.setenv("SPECVIZ_TRACES_DIR", str(tmp_path / "no-traces"))
    if curves_dir is not None:
        monkeypatch.setenv("SPECVIZ_CURVES_DIR", str(curves_dir))
    else:
        monkeypatch.delenv("SPECVIZ_CURVES_DIR", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/theory.py").run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str | None:
    return next((m.value for m in at.metric if m.label == label), None)


def chart_names(at: AppTest) -> list[set[str]]:
    return [
        {(t.get("name") or "").replace("<br>", " ") for t in json.loads(c.proto.spec)["data"]}
        for c in at.get("plotly_chart")
    ]


def page_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_page_shows_the_measured_curve(monkeypatch, tmp_path):
    curve = theory.load_verify_curve(REAL_CURVE)
    at = theory_page(monkeypatch, tmp_path, None)
    text = page_text(at)
    assert "### Measured by the benchmark: a recording" in text
    assert markup.curve_origin(curve) in text  # a recording names its machine, precision and date (issue 55)
    for fact in (
        curve["device_name"],
        f"{curve['threads']} threads",
        curve["target"],
        curve["draft"],
        curve["draft_quantized"],
        curve["measured_at"].replace("T", " "),
        f"median of {curve['samples']}",
    ):
        assert fact in text, fact
    assert not any(ui.curves.NO_CURVE in i.value for i in at.info)
    assert not any("python -m" in m for m in (*text.splitlines(), *(i.value for i in at.info)))  # in the expander
    names = chart_names(at)
    assert any("Leviathan's assumption: a verify costs one step" in n for n in names)
    assert any(f"measured optimal γ = {theory.measured_optimal_gamma(0.8, curve, 16)}" in n for n in names)
    # The formula's optimum and the measured one, side by side, at the defaults a = 0.8, g = 4, c = 0.1.
    assert metric(at, "Optimal γ") == str(theory.optimal_gamma(0.8, 0.1, 16))
    assert metric(at, "Optimal γ, measured times") == str(theory.measured_optimal_gamma(0.8, curve, 16))
    assert metric(at, "Speed-up, measured times") == f"{theory.measured_speedup(0.8, 4, curve):.2f}×"
    assert not at.selectbox or all(s.key != "theory.curve" for s in at.selectbox)  # one curve: no choice
    # "Use the measured c" puts the machine's c on the slider, and the formula follows it.
    c = round(theory.measured_cost_ratio(curve), 2)
    at.button(key="theory.use_c").click().run()
    assert not at.exception
    assert at.slider(key="theory.c").value == pytest.approx(c)
    assert metric(at, "Optimal γ") == str(theory.optimal_gamma(0.8, c, 16))


def test_page_explains_how_to_measure_when_there_is_no_curve(monkeypatch, tmp_path):
    at = theory_page(monkeypatch, tmp_path, tmp_path / "no-curves")
    assert any(ui.curves.NO_CURVE in i.value for i in at.info)
    assert any(c.value == ui.curves.BENCH_COMMAND for c in at.code)  # the command, under "How this was recorded"
    assert not at.warning
    assert metric(at, "Optimal γ") == "6"  # the formula still works
    assert metric(at, "Optimal γ, measured times") is None
    assert all(b.key != "theory.use_c" for b in at.button)
    assert not any("Leviathan's assumption: a verify costs one step" in n for n in chart_names(at))


def test_page_survives_a_damaged_curve(monkeypatch, tmp_path):
    (tmp_path / "verify_curve_cpu.json").write_text('{"format": "specviz-verify-curve", "target_seconds": [')
    at = theory_page(monkeypatch, tmp_path, tmp_path)
    assert any("verify_curve_cpu.json" in w.value for w in at.warning)
    assert any(ui.curves.NO_CURVE in i.value for i in at.info)
    assert any(c.value == ui.curves.BENCH_COMMAND for c in at.code)  # the command, under "How this was recorded"
    assert metric(at, "Optimal γ") == "6"
    assert metric(at, "Optimal γ, measured times") is None


def test_page_offers_a_choice_of_curves(monkeypatch, tmp_path):
    cpu = {**flat(0.15, step=0.2), "device_name": "A flat test CPU"}
    steep = {**linear(0.15, 0.5, step=0.2), "device": "cuda", "device_name": "A steep test GPU"}
    (tmp_path / "verify_curve_cpu.json").write_text(json.dumps(cpu))
    (tmp_path / "verify_curve_cuda.json").write_text(json.dumps(steep))
    at = theory_page(monkeypatch, tmp_path, tmp_path)
    assert at.selectbox(key="theory.curve").options == ["cpu: A flat test CPU", "cuda: A steep test GPU"]
    assert "A flat test CPU" in page_text(at)
    flat_best = theory.measured_optimal_gamma(0.8, cpu, 16)
    assert metric(at, "Optimal γ, measured times") == str(flat_best) == str(theory.optimal_gamma(0.8, 0.15, 16))
    at.selectbox(key="theory.curve").set_value("cuda").run()
    assert not at.exception
    assert "A steep test GPU" in page_text(at)
    best = theory.measured_optimal_gamma(0.8, steep, 16)
    assert metric(at, "Optimal γ, measured times") == str(best)
    assert best < flat_best
    assert metric(at, "Speed-up, measured times") == f"{theory.measured_speedup(0.8, 4, steep):.2f}×"


# --- Theory ---------------------------------------------------------------------------------------


def brute_force_optimal_gamma(a: float, c: float) -> int:
    values = {g: (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1)) for g in range(1, 17)}
    return max(values, key=values.get)


@pytest.mark.parametrize("a, g, c", [(0.8, 4, 0.1), (0.9, 3, 0.05), (0.5, 8, 0.3)])
def test_theory_shows_the_optimal_gamma(app, a, g, c):  # noqa: F811
    go(app, "theory")
    app.slider(key="theory.a").set_value(a)
    app.slider(key="theory.g").set_value(g)
    app.slider(key="theory.c").set_value(c).run()
    assert not app.exception
    assert metric(app, "Optimal γ") == str(brute_force_optimal_gamma(a, c))
    assert metric(app, "Speed-up") == f"{theory.speedup(a, g, c):.2f}×"
    assert metric(app, "Mean acceptance length") == f"{(1 - a ** (g + 1)) / (1 - a):.2f}"


def test_theory_known_value(app):  # noqa: F811
    go(app, "theory")  # defaults a = 0.8, c = 0.1: gamma 6 is best (2.47x against 2.40x at gamma 4)
    assert metric(app, "Optimal γ") == "6"


def test_theory_plots_this_sessions_runs(app):  # noqa: F811
    app.button(key="step.run").click().run()
    finish(app, "step")
    go(app, "theory")
    tables = app.dataframe
    assert tables, "the measured-runs table is missing"
    table = tables[0].value
    assert "measured speed-up" in table.columns and len(table) == 1
    assert table["c"].iloc[0] > 0 and 0 <= table["Leviathan's a"].iloc[0] <= 1
    trace = state(app, "step").trace
    metrics = lab.run_metrics(trace)
    assert table["mean acceptance length"].iloc[0] == round(metrics.mean_acceptance_length, 2)
    # The Your server page's advisor on this run: its own rates by position, its own c (issue 58).
    advice = advise(metrics.conditional_acceptance_rate, lab.measured_point(trace).c)
    assert any(s.value == advice.sentence for s in app.success), [s.value for s in app.success]
    assert any(f"own c = {advice.c:.3f}" in m for m in page_text(app).splitlines())
    assert any(f"best length = {advice.best}" in n for n in chart_names(app))
