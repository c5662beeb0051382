"""Theory: Leviathan et al.'s expected tokens per round and speed-up, against the verify cost the benchmark
measured (assets/verify_curve_<device>.json) and this session's runs."""

import streamlit as st

from specviz import markup, ui
from specviz.lessons import theory

ui.page_guard()
PAGE = "theory"
k = ui.key


st.html('<div class="sv-kicker">Leviathan, Kalman &amp; Matias (2023), section 3</div>')
st.title("Theory: how much faster can it be?")

curves, damaged = ui.verify_curves()  # the benchmark's measured verify costs, by device
left, right = st.columns([4, 3], gap="large")  # [3, 2] left three metrics 54 px each at 1024 px
with left:
    st.markdown(
        "Model each drafted token as accepted independently with probability **a** (Leviathan's a). "
        "A round drafts **γ** tokens, keeps a prefix of them, and always adds one token of the target's own. "
        "So the mean acceptance length (tokens per target pass, bonus included) is expected to be"
    )
    st.latex(r"E[\text{tokens per pass}] = \frac{1 - a^{\gamma + 1}}{1 - a}")
    st.caption(markup.A_BRIDGE)
    st.markdown(
        "A round costs γ draft forwards plus one target pass. With **c** = (time of one draft forward) / "
        "(time of one target step), and assuming the verify pass costs one target step, the speed-up is"
    )
    st.latex(r"\text{speed-up} = \frac{1 - a^{\gamma + 1}}{(1 - a)\,(\gamma c + 1)}")
    st.markdown(
        "Longer drafts gain tokens only while the draft keeps being right (a^γ shrinks fast) but cost γ·c every "
        "round, so there is a best γ. Cheap, accurate drafts (small c, large a) want long drafts."
    )
with right:
    a = st.slider("a: chance a drafted token is kept", 0.0, 0.99, 0.8, 0.01, key=k(PAGE, "a"))
    g = st.slider("γ: draft length", 1, 16, 4, key=k(PAGE, "g"))
    c = st.slider("c: draft cost / target cost", 0.0, 1.0, 0.1, 0.01, key=k(PAGE, "c"))
    curve = None
    if curves:
        device = (
            st.selectbox(
                "Measured verify-cost curve",
                list(curves),
                key=k(PAGE, "curve"),
                format_func=lambda d: f"{d}: {curves[d].get('device_name', '?')}",
            )
            if len(curves) > 1
            else next(iter(curves))
        )
        curve = curves[device]
    c_measured = theory.measured_cost_ratio(curve) if curve is not None else None
    if c_measured is not None:
        st.button(
            f"Use the recorded c = {c_measured:.3f}",
            key=k(PAGE, "use_c"),
            on_click=ui.use_measured_c,
            args=(c_measured,),
            help=f"One draft step ÷ one target step, as the benchmark timed them, {markup.curve_origin(curve)} "
            "(see Measured by the benchmark, below); rounded to the slider's 0.01.",
        )
    best = theory.optimal_gamma(a, c, 16)
    st.metric("Mean acceptance length", f"{theory.expected_tokens(a, g):.2f}", help="Tokens per target pass.")
    m2, m3 = st.columns(2)  # two to a row: three split "acceptance" and "Optimal" in a window 1024 px wide
    m2.metric("Speed-up", f"{theory.speedup(a, g, c):.2f}×")
    m3.metric("Optimal γ", best, help=f"Best speed-up {theory.speedup(a, best, c):.2f}× for this a and c (γ ≤ 16).")
    st.caption(
        f"At the optimal γ = {best}: {theory.expected_tokens(a, best):.2f} tokens per target pass, "
        f"speed-up {theory.speedup(a, best, c):.2f}×."
    )
    if c_measured is not None:
        best_m = theory.measured_optimal_gamma(a, curve, 16)
        n1, n2 = st.columns(2)
        n1.metric(
            "Speed-up, measured times",
            f"{theory.measured_speedup(a, g, curve):.2f}×",
            help="The same a and γ, with the recording's draft and target times and the verify cost it measured.",
        )
        n2.metric(
            "Optimal γ, measured times",
            best_m,
            help=f"Best speed-up {theory.measured_speedup(a, best_m, curve):.2f}× with the measured times (γ ≤ 16).",
        )
        st.caption(
            f"With the recorded times (c = {c_measured:.3f}, {markup.curve_origin(curve)}; verify as timed) the "
            f"best γ is {best_m}; "
            f"the formula says {best} at c = {c:.2f}. Set c to the measured value to compare like with like: "
            "then only the verify cost differs."
        )

ui.experiments_section(PAGE)  # beside the sliders they set
ui.measured_section(curve, damaged, c_measured)
ui.runs_section(a, g, c, curve)
