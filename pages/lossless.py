"""Lossless: speculative samples follow the target's distribution exactly (and a broken variant does not)."""

import streamlit as st

from specviz import ui

ui.page_guard()

PAGE = "lossless"


def why_it_is_exact() -> None:
    """The method and the proof, under the run: its button stays on the first screen at 1024x768."""
    with st.expander("How it is measured, and why it is exact", expanded=True):
        left, right = st.columns([1, 1], gap="large")
        with left:
            st.markdown(
                "Take one context and look at the next token only. The target says it should be distributed as "
                "**p**. Draw the token the speculative way — let the draft propose d ~ q, keep it with probability "
                "min(1, p(d)/q(d)), otherwise draw from the residual — many thousands of times, and the histogram "
                "lands on **p**, not on the draft's **q**.\n\n"
                "Here p and q come from **one** forward pass of each real model over the context; the sampling "
                "itself is then cheap, so tens of thousands of samples take a moment. Distances are the **total "
                "variation**, "
                "TV(x, y) = ½ Σ |x(v) − y(v)|: 0 means identical, 1 means disjoint."
            )
        with right:
            st.markdown(
                "**Why it is exact.** Let β be the chance of a rejection. Token x comes out when the draft "
                "proposed x and it was kept, or after a rejection, from the residual:"
            )
            st.latex(
                r"\begin{aligned}P(x) &= q(x)\min\!\Big(1, \frac{p(x)}{q(x)}\Big) \\ &\quad + \beta\, r(x)\end{aligned}"
            )
            st.latex(r"r(x) = \frac{(p(x) - q(x))^+}{\sum_v (p(v) - q(v))^+}")
            st.markdown("The rejection chance is exactly the residual's normaliser, so they cancel:")
            st.latex(r"\begin{aligned}\beta &= 1 - \sum_v \min(p, q)(v) \\ &= \sum_v (p - q)^+(v)\end{aligned}")
            st.latex(r"\begin{aligned}P(x) &= \min(p, q)(x) + (p - q)^+(x) \\ &= p(x)\end{aligned}")
            st.markdown(
                "Skip the residual and redraw from q instead, and the second term takes q's shape: the result "
                "drifts towards q."
            )
            st.markdown(
                "**Alternatives.** After a rejection the token must follow r. A further candidate c ~ q, kept "
                "with probability min(1, r(c)/q(c)), is the same step with r in place of p, so the same argument "
                "holds with the residual of r; and so on for every further candidate."
            )


st.html('<div class="sv-kicker">The guarantee</div>')
st.title("Lossless: exactly the target's distribution")
st.markdown(
    "Speculative decoding is not an approximation: the tokens it writes follow the big model's probabilities **p** "
    "exactly, not the draft's **q**. Here one context's next token is drawn many thousands of times the speculative "
    "way; press **Compute p and q** and watch the histogram land on p."
)

settings = ui.settings()
form = st.container(border=True)
with form:
    choice = ui.lossless_form(PAGE, settings)

state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(choice.slot, "Compute p and q"),
    lambda: ui.lossless_work(
        choice.prompt, ui.with_temperature(settings.config, choice.temperature), settings.chat, choice.prefix
    ),
    prompt=choice.prompt,
    answer=choice.prefix,
    live=ui.quiet_live,
    errors=form,
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button
why_it_is_exact()

dist = None if state.busy else ui.lossless_to_show(PAGE)  # before a run: the recorded p and q
if dist is None and not state.busy:
    st.info("Press **Compute p and q** to run both models once on this context.")
elif dist is not None:
    ui.lossless_results(
        PAGE, dist, n=choice.n, seed=choice.seed, broken=choice.broken, alternatives=choice.alternatives
    )
