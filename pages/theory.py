"""Theory: Leviathan et al.'s expected tokens per round and speed-up, against the verify cost the benchmark
measured (assets/verify_curve_<device>.json) and this session's runs."""
import streamlit as st

from specviz import charts, lab, theory, ui

ui.page_guard()


def use_measured_c(value: float) -> None:
    # A callback, so that the slider takes the value before it is drawn; rounded to the slider's step.
    st.session_state["theory.c"] = min(1.0, round(value, 2))


st.html('<div class="sv-kicker">Leviathan, Kalman &amp; Matias (2023), section 3</div>')
st.title("Theory: how much faster can it be?")

curves, damaged = ui.verify_curves()   # the benchmark's measured verify costs, by device
left, right = st.columns([3, 2], gap="large")
with left:
    st.markdown(
        "Model each drafted token as accepted independently with probability **a** (the acceptance rate). "
        "A round drafts **γ** tokens, keeps a prefix of them, and always adds one token of the target's own. "
        "So the tokens per round (per target pass) are expected to be")
    st.latex(r"E[\text{tokens per round}] = \frac{1 - a^{\gamma + 1}}{1 - a}")
    st.markdown(
        "A round costs γ draft forwards plus one target pass. With **c** = (time of one draft forward) / "
        "(time of one target step), and assuming the verify pass costs one target step, the speed-up is")
    st.latex(r"\text{speed-up} = \frac{1 - a^{\gamma + 1}}{(1 - a)\,(\gamma c + 1)}")
    st.markdown(
        "Longer drafts gain tokens only while the draft keeps being right (a^γ shrinks fast) but cost γ·c every "
        "round, so there is a best γ. Cheap, accurate drafts (small c, large a) want long drafts.")
with right:
    a = st.slider("a: acceptance rate", 0.0, 0.99, 0.8, 0.01, key="theory.a")
    g = st.slider("γ: draft length", 1, 16, 4, key="theory.g")
    c = st.slider("c: draft cost / target cost", 0.0, 1.0, 0.1, 0.01, key="theory.c")
    curve = None
    if curves:
        device = st.selectbox("Measured verify-cost curve", list(curves), key="theory.curve",
                              format_func=lambda d: f"{d}: {curves[d].get('device_name', '?')}") \
            if len(curves) > 1 else next(iter(curves))
        curve = curves[device]
    c_measured = theory.measured_cost_ratio(curve) if curve is not None else None
    if c_measured is not None:
        st.button(f"Use the measured c = {c_measured:.3f}", key="theory.use_c", on_click=use_measured_c,
                  args=(c_measured,), help="One draft step ÷ one target step, as the benchmark timed them (see "
                                           "Measured on this machine, below); rounded to the slider's 0.01.")
    best = theory.optimal_gamma(a, c, 16)
    m1, m2, m3 = st.columns(3)
    m1.metric("Tokens per round", f"{theory.expected_tokens(a, g):.2f}")
    m2.metric("Speed-up", f"{theory.speedup(a, g, c):.2f}×")
    m3.metric("Optimal γ", best, help=f"Best speed-up {theory.speedup(a, best, c):.2f}× for this a and c (γ ≤ 16).")
    st.caption(f"At the optimal γ = {best}: {theory.expected_tokens(a, best):.2f} tokens per round, "
               f"speed-up {theory.speedup(a, best, c):.2f}×.")
    if c_measured is not None:
        best_m = theory.measured_optimal_gamma(a, curve, 16)
        n1, n2 = st.columns(2)
        n1.metric("Speed-up, measured times", f"{theory.measured_speedup(a, g, curve):.2f}×",
                  help="The same a and γ, with this machine's draft and target times and the verify cost it measured.")
        n2.metric("Optimal γ, measured times", best_m,
                  help=f"Best speed-up {theory.measured_speedup(a, best_m, curve):.2f}× with the measured times (γ ≤ 16).")
        st.caption(f"With the measured times (c = {c_measured:.3f}, verify as timed) the best γ is {best_m}; "
                   f"the formula says {best} at c = {c:.2f}. Set c to the measured value to compare like with like: "
                   "then only the verify cost differs.")

st.markdown("### Measured on this machine")
if curve is None:
    if damaged:
        st.warning(f"{', '.join(damaged)} in {ui.curves_dir()} is not a verify-cost curve (damaged, or from another "
                   "version of specviz), so it is not used.")
    st.info("No measured verify-cost curve yet. The formula above assumes that checking γ drafted tokens costs one "
            "target step; to see what it costs on this machine, run the benchmark: "
            "`.venv/bin/python -m specviz bench` (it loads the built-in pair and takes a few minutes). It writes "
            "assets/verify_curve_cpu.json (verify_curve_cuda.json on a GPU), and this section then shows it.")
else:
    v1, v2 = st.columns([2, 3], gap="large")
    with v1:
        last = len(curve["target_seconds"]) - 1          # the longest verify it timed
        draft_note = f"; one draft step costs c = {c_measured:.3f} target steps" if c_measured is not None else ""
        st.markdown(
            "The formula counts a verify pass as **one target step** whatever γ. The benchmark timed it: one "
            "KV-cached target forward over γ + 1 tokens, next to one plain step (γ = 0). Here verifying "
            f"γ = {last} drafted tokens costs **{theory.verify_cost_ratios(curve, [last])[0]:.2f}** target steps"
            f"{draft_note}. With the measured times themselves, the speed-up is")
        st.latex(r"\text{speed-up} = \frac{1 - a^{\gamma + 1}}{1 - a}\cdot"
                 r"\frac{t_\text{target}}{\gamma\, t_\text{draft} + t_\text{verify}(\gamma)}")
        st.markdown(
            f"- **Where:** {curve.get('device_name', '?')} ({curve.get('device', '?')}), {curve.get('threads', '?')} threads\n"
            f"- **Target (p):** {curve.get('target', '?')}, {curve.get('dtype', '?')}, linear layers "
            f"{'prepacked' if curve.get('target_prepacked') else 'as loaded'}\n"
            f"- **Draft (q):** {curve.get('draft', '?')}, quantization: {curve.get('draft_quantized', '?')}\n"
            f"- **When:** {str(curve.get('measured_at', '?')).replace('T', ' ')}, torch {curve.get('torch', '?')}, "
            f"transformers {curve.get('transformers', '?')}\n"
            f"- **Samples:** median of {curve.get('samples', '?')} per point, contexts of about "
            f"{curve.get('context_tokens', '?')} tokens")
        if c_measured is None:
            st.caption("This curve timed no draft model, so it gives no measured speed-up.")
    v2.plotly_chart(charts.verify_curve_figure(curve), key="theory.verify_curve", config={"displayModeBar": False})

points = [pt for label, trace in ui.history() if (pt := lab.measured_point(trace, label)) is not None]
f1, f2 = st.columns(2)
f1.plotly_chart(charts.speedup_figure(a, g, c, points, curve=curve), key="theory.speedup",
                config={"displayModeBar": False})
f2.plotly_chart(charts.expected_tokens_figure(a, g, points), key="theory.tokens", config={"displayModeBar": False})

h1, h2 = st.columns([3, 2], gap="large")
h1.plotly_chart(charts.optimal_gamma_map(a, c), key="theory.map", config={"displayModeBar": False})
with h2:
    st.markdown("#### Your runs on the same axes")
    if not points:
        st.info("No runs yet in this session. Run something on the Step through, Race or Acceptance lab page; "
                "its measured a, γ and c appear here as red diamonds.")
    else:
        st.markdown(
            "Each run gives **a** by inverting the expected accepted prefix per round, "
            "a(1 − a^γ)/(1 − a), **γ** as its mean draft length, and — when plain decoding was timed — "
            "**c** = draft time per draft forward ÷ target time per token. The formula assumes a verify pass "
            "costs one plain step; on a CPU it costs more, which is why measured points can sit below the curve. "
            "It also models a plain chain of drafts: runs with alternatives (a kept candidate and its bonus token) "
            "or lookahead (fewer draft passes) gain what it does not count, and can sit above it.")
        st.dataframe([{
            "run": pt.label, "a": round(pt.a, 3), "γ": round(pt.g, 2), "tokens / round": round(pt.tokens_per_round, 2),
            "c": round(pt.c, 3) if pt.c is not None else None,
            "formula speed-up": round(pt.predicted_speedup, 2) if pt.predicted_speedup is not None else None,
            "measured speed-up": round(pt.measured_speedup, 2) if pt.measured_speedup is not None else None,
        } for pt in points], hide_index=True, key="theory.table")
