"""Lossless: speculative samples follow the target's distribution exactly (and a broken variant does not)."""
import streamlit as st

from specviz import ui

ui.page_guard()

PAGE = "lossless"
k = ui.key

st.html('<div class="sv-kicker">The guarantee</div>')
st.title("Lossless: exactly the target's distribution")
left, right = st.columns([1, 1], gap="large")
with left:
    st.markdown(
        "Speculative decoding is not an approximation. Take one context and look at the next token only. "
        "The target says it should be distributed as **p**. Draw the token the speculative way — let the draft propose "
        "d ~ q, keep it with probability min(1, p(d)/q(d)), otherwise draw from the residual — many thousands of "
        "times, and the histogram lands on **p**, not on the draft's **q**.\n\n"
        "Here p and q come from **one** forward pass of each real model over the context; the sampling itself is "
        "then cheap, so tens of thousands of samples take a moment. Distances are the **total variation**, "
        "TV(x, y) = ½ Σ |x(v) − y(v)|: 0 means identical, 1 means disjoint.")
with right:
    st.markdown("**Why it is exact.** Let β be the chance of a rejection. Token x comes out when the draft "
                "proposed x and it was kept, or after a rejection, from the residual:")
    st.latex(r"P(x) = q(x)\min\!\Big(1, \frac{p(x)}{q(x)}\Big) + \beta\, r(x)")
    st.latex(r"r(x) = \frac{(p(x) - q(x))^+}{\sum_v (p(v) - q(v))^+}")
    st.markdown("The rejection chance is exactly the residual's normaliser, so they cancel:")
    st.latex(r"\beta = 1 - \sum_v \min(p, q)(v) = \sum_v (p - q)^+(v)")
    st.latex(r"P(x) = \min(p, q)(x) + (p - q)^+(x) = p(x)")
    st.markdown("Skip the residual and redraw from q instead, and the second term takes q's shape: "
                "the result drifts towards q.")
    st.markdown("**Alternatives.** After a rejection the token must follow r. A further candidate c ~ q, kept "
                "with probability min(1, r(c)/q(c)), is the same step with r in place of p, so the same argument "
                "holds with the residual of r; and so on for every further candidate.")

settings = ui.settings()
form = st.container(border=True)
with form:
    prompt = ui.prompt_picker(PAGE, label="Context (the prompt)", height=90)
    prefix = st.text_input("The answer so far (optional): the next token is predicted after this text",
                           key=k(PAGE, "prefix"))
    c1, c2, c3 = st.columns(3)
    base_temperature = settings.config.temperature if settings.config and settings.config.temperature > 0 else 1.0
    temperature = c1.slider("Temperature for this experiment", 0.05, 2.0, float(min(2.0, base_temperature)), 0.05,
                            key=k(PAGE, "temperature"),
                            help="Greedy decoding samples nothing, so this page always samples. Top-k and top-p "
                                 "come from the sidebar and are applied to p and q alike.")
    n = c2.select_slider("Samples", [1_000, 10_000, 50_000, 100_000, 200_000], value=50_000, key=k(PAGE, "n"),
                         format_func=lambda v: f"{v:,}")
    seed = c3.number_input("Seed", value=0, step=1, key=k(PAGE, "seed"))
    base_alternatives = settings.config.alternatives if settings.config else 0
    alternatives = st.slider("Alternatives: after a rejection, up to this many more candidates drawn from q", 0, 4,
                             base_alternatives, key=k(PAGE, "alternatives"),
                             help="As the engine's token tree does when sampling: each further candidate c ~ q is "
                                  "kept with probability min(1, r(c)/q(c)), where r is what the rejections so far "
                                  "left of p, and r shrinks again after each refusal (recursive rejection "
                                  "sampling). More tokens are kept by a candidate; the result is still p.")
    broken = st.toggle(":material/heart_broken: Break the algorithm: after a rejection, draw again from q instead of "
                       "the residual",
                       key=k(PAGE, "broken"))
    c1, c2 = st.columns([1.4, 5], vertical_alignment="center")
    c2.caption("One forward pass of each model over the context; the samples are drawn from the result.")

state = ui.run_section(
    PAGE, settings, ui.RunButton(c1, "Compute p and q"),
    lambda: ui.lossless_work(prompt, ui.with_temperature(settings.config, temperature), settings.chat, prefix),
    prompt=prompt, answer=prefix, live=ui.quiet_live, errors=form)

if state.result is None and not state.busy:
    st.info("Press **Compute p and q** to run both models once on this context.")
elif state.result is not None and not state.busy:
    ui.lossless_results(PAGE, state.result, n=int(n), seed=int(seed), broken=broken, alternatives=int(alternatives))
