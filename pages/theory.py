"""Theory: Leviathan et al.'s expected tokens per round and speed-up, against this session's runs."""
import streamlit as st

from specviz import charts, lab, theory, ui

ui.page_guard()

st.html('<div class="sv-kicker">Leviathan, Kalman &amp; Matias (2023), section 3</div>')
st.title("Theory: how much faster can it be?")

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
    best = theory.optimal_gamma(a, c, 16)
    m1, m2, m3 = st.columns(3)
    m1.metric("Tokens per round", f"{theory.expected_tokens(a, g):.2f}")
    m2.metric("Speed-up", f"{theory.speedup(a, g, c):.2f}×")
    m3.metric("Optimal γ", best, help=f"Best speed-up {theory.speedup(a, best, c):.2f}× for this a and c (γ ≤ 16).")
    st.caption(f"At the optimal γ = {best}: {theory.expected_tokens(a, best):.2f} tokens per round, "
               f"speed-up {theory.speedup(a, best, c):.2f}×.")

points = [pt for label, trace in ui.history() if (pt := lab.measured_point(trace, label)) is not None]
f1, f2 = st.columns(2)
f1.plotly_chart(charts.speedup_figure(a, g, c, points), key="theory.speedup", config={"displayModeBar": False})
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
            "costs one plain step; on a CPU it costs more, which is why measured points can sit below the curve.")
        st.dataframe([{
            "run": pt.label, "a": round(pt.a, 3), "γ": round(pt.g, 2), "tokens / round": round(pt.tokens_per_round, 2),
            "c": round(pt.c, 3) if pt.c is not None else None,
            "formula speed-up": round(pt.predicted_speedup, 2) if pt.predicted_speedup is not None else None,
            "measured speed-up": round(pt.measured_speedup, 2) if pt.measured_speedup is not None else None,
        } for pt in points], hide_index=True, key="theory.table")
