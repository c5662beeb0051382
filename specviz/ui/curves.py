"""The Theory page's measured parts: the benchmark's verify-cost curve, and this session's runs on the
formula's axes."""

from __future__ import annotations

import streamlit as st

from specviz import charts, markup
from specviz.charts.your_server import advice_figure
from specviz.lessons import lab, theory
from specviz.lessons.advisor import advise
from specviz.markup import your_server as your_server_words
from specviz.traces.trace import Trace

from .files import curves_dir
from .recorded import how_recorded, recorded_points
from .state import history, key

NO_BAR = {"displayModeBar": False}
NO_CURVE = (
    "No recorded verify-cost curve yet. The formula above assumes that checking γ drafted tokens costs one "
    "target step; the benchmark times what it costs (it loads the built-in pair and takes a few minutes), and this "
    "section then shows its recording."
)
# Short lines in the code block: a path in a caption broke mid-word in Theory's narrow column at 1024 px.
BENCH_COMMAND = (
    "# writes assets/verify_curve_cpu.json\n# (verify_curve_cuda.json on a GPU)\n.venv/bin/python -m specviz bench"
)
RUNS_WORDS = (
    "Each run gives **a** by inverting the expected accepted prefix per round, "
    "a(1 − a^γ)/(1 − a), **γ** as its mean draft length, and — when plain decoding was timed — "
    "**c** = draft time per draft forward ÷ target time per token. The formula assumes a verify pass "
    "costs one plain step; on a CPU it costs more, which is why measured points can sit below the curve. "
    "It also models a plain chain of drafts: runs with alternatives (a kept candidate and its bonus token) "
    "or lookahead (fewer draft passes) gain what it does not count, and can sit above it."
)


def is_recorded(label: str) -> bool:
    """A run the history names as a recording (ui.recorded and the viewer label them so)."""
    return label.startswith(("the recorded run", "recorded"))


def use_measured_c(value: float) -> None:
    """A callback, so that the slider takes the value before it is drawn; rounded to the slider's step."""
    st.session_state[key("theory", "c")] = min(1.0, round(value, 2))


def _curve_facts(curve: dict) -> str:
    return (
        f"- **Where:** {curve.get('device_name', '?')} ({curve.get('device', '?')}), "
        f"{curve.get('threads', '?')} threads\n"
        f"- **Target (p):** {curve.get('target', '?')}, {curve.get('dtype', '?')}, linear layers "
        f"{'prepacked' if curve.get('target_prepacked') else 'as loaded'}\n"
        f"- **Draft (q):** {curve.get('draft', '?')}, quantization: {curve.get('draft_quantized', '?')}\n"
        f"- **When:** {str(curve.get('measured_at', '?')).replace('T', ' ')}, torch {curve.get('torch', '?')}, "
        f"transformers {curve.get('transformers', '?')}\n"
        f"- **Samples:** median of {curve.get('samples', '?')} per point, contexts of about "
        f"{curve.get('context_tokens', '?')} tokens"
    )


def measured_section(curve: dict | None, damaged: list[str], c_measured: float | None) -> None:
    """What the benchmark recorded, named as a recording (or how to record it)."""
    st.markdown("### Measured by the benchmark: a recording")
    if curve is None:
        if damaged:
            st.warning(
                f"{', '.join(damaged)} in {curves_dir()} is not a verify-cost curve (damaged, or from another "
                "version of specviz), so it is not used."
            )
        st.info(NO_CURVE)
        how_recorded(BENCH_COMMAND)
        return
    v1, v2 = st.columns([2, 3], gap="large")
    with v1:
        last = len(curve["target_seconds"]) - 1  # the longest verify it timed
        draft_note = f"; one draft step costs c = {c_measured:.3f} target steps" if c_measured is not None else ""
        st.markdown(
            f"The formula counts a verify pass as **one target step** whatever γ. The benchmark timed it, "
            f"**{markup.curve_origin(curve)}** (your machine's own times differ: a run's Why box measures them "
            "now): one KV-cached target forward over γ + 1 tokens, next to one plain step (γ = 0). There verifying "
            f"γ = {last} drafted tokens costs **{theory.verify_cost_ratios(curve, [last])[0]:.2f}** target steps"
            f"{draft_note}. With the measured times themselves, the speed-up is"
        )
        st.latex(
            r"\begin{gathered}\text{speed-up} = \frac{1 - a^{\gamma + 1}}{1 - a} \\ \times"  # two lines
            r"\frac{t_\text{target}}{\gamma\, t_\text{draft} + t_\text{verify}(\gamma)}\end{gathered}"
        )
        st.markdown(_curve_facts(curve))
        if c_measured is None:
            st.caption("This curve timed no draft model, so it gives no measured speed-up.")
        how_recorded(BENCH_COMMAND)
    v2.plotly_chart(charts.verify_curve_figure(curve), key=key("theory", "verify_curve"), config=NO_BAR)


def runs_section(a: float, g: int, c: float, curve: dict | None) -> None:
    """The formula's charts with this session's runs as points, the best-γ map, and the runs' table."""
    runs = history() or recorded_points()  # before this session's first run, the recorded runs
    shown_recorded = bool(runs) and all(is_recorded(label) for label, _ in runs)
    found = [(pt, trace) for label, trace in runs if (pt := lab.measured_point(trace, label)) is not None]
    points = [pt for pt, _ in found]
    f1, f2 = st.columns(2)
    f1.plotly_chart(charts.speedup_figure(a, g, c, points, curve=curve), key=key("theory", "speedup"), config=NO_BAR)
    f2.plotly_chart(charts.expected_tokens_figure(a, g, points), key=key("theory", "tokens"), config=NO_BAR)
    h1, h2 = st.columns([3, 2], gap="large")
    h1.plotly_chart(charts.optimal_gamma_map(a, c), key=key("theory", "map"), config=NO_BAR)
    with h2:
        st.markdown("#### Your runs on the same axes")
        if not points:
            st.info(
                "No runs yet in this session. Run something on the Step through, Race or Acceptance lab page; "
                "its measured a, γ and c appear here as red diamonds."
            )
            return
        if shown_recorded:
            st.info(
                "**Recorded runs** — the built-in pair's recordings (the Step through page's and the guided "
                "experiments'), each measured where the table's last column says, until you run something on the "
                "Step through, Race or Acceptance lab page.",
                icon=":material/history:",
            )
        st.markdown(RUNS_WORDS)
        st.dataframe(
            [
                {  # what the chart compares first: the measured speed-up against the formula's
                    "run": pt.label,
                    "measured speed-up": round(pt.measured_speedup, 2) if pt.measured_speedup is not None else None,
                    "formula speed-up": round(pt.predicted_speedup, 2) if pt.predicted_speedup is not None else None,
                    "Leviathan's a": round(pt.a, 3),
                    "γ": round(pt.g, 2),
                    "c": round(pt.c, 3) if pt.c is not None else None,
                    "mean acceptance length": lab.mean_acceptance_length(trace),
                    "measured": markup.trace_origin_words(trace, not is_recorded(pt.label), plain=True),
                }
                for pt, trace in found
            ],
            hide_index=True,
            key=key("theory", "table"),
        )
    advice_section(found[-1], c)


def advice_section(latest: tuple[lab.MeasuredPoint, Trace], c_slider: float) -> None:
    """The Your server page's draft-length advisor (lessons/advisor.py) on the latest run's own acceptance by
    position, with that run's own c where it timed plain decoding (else the slider's)."""
    point, trace = latest
    metrics = lab.run_metrics(trace)
    advice = advise(metrics.conditional_acceptance_rate, point.c if point.c is not None else c_slider)
    if advice is None:
        return
    st.markdown("#### Which draft length would have been fastest?")  # no run's text in a heading: it becomes an id
    a1, a2 = st.columns(2, gap="large")  # the words run long: half the width, not two fifths
    a1.plotly_chart(advice_figure(advice), key=key("theory", "advice"), config=NO_BAR)
    with a2:
        origin = markup.trace_origin_words(trace, not is_recorded(point.label))
        words = your_server_words.theory_advice_words(point.c is not None, advice.c, trace.config, origin)
        st.markdown(your_server_words.theory_advice_run(point.label, metrics) + " " + words)
        st.success(advice.sentence, icon=":material/tips_and_updates:")
