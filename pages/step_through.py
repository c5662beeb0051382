"""Step through: one real speculative run, round by round (the home page)."""

import streamlit as st

from specviz import ui

ui.page_guard()

PAGE = "step"
k = ui.key


def how_a_round_works() -> None:
    """The four steps and the rule, under the run: the Run button stays on the first screen at 1024x768."""
    with st.expander("How a round works, and the rule that keeps the text exact", expanded=True):
        intro, formulas = st.columns([3, 2], gap="large")
        with intro:
            st.markdown(
                "The draft model's probabilities are called **q**, the target's **p**; each round the draft "
                "guesses **γ** tokens.\n\n"
                "1. **Draft** — the draft model proposes d₁ … d_γ, one after the other.\n"
                "2. **Verify** — one target pass scores every guess at once.\n"
                "3. **Accept or reject** — guesses are kept from the left while the target agrees; "
                "the first rejection ends the round.\n"
                "4. **Next token** — the target adds one token of its own: a *resampled* one in place of the "
                "rejection, or a *bonus* one if every guess was kept. Both models then forget (roll back) what was "
                "rejected.\n\n"
                "Every round costs one target pass but can commit up to γ + 1 tokens. And the text is **exactly** "
                "what the target alone would write — same distribution, or the very same text in greedy mode."
            )
        with formulas:
            st.markdown("**The rule** (Leviathan et al. 2023; Chen et al. 2023). Keep the guess dᵢ when")
            st.latex(
                r"\begin{gathered}u_i \le \min\!\Big(1,\ \frac{p(d_i)}{q(d_i)}\Big) \\ u_i \sim U(0, 1)\end{gathered}"
            )
            st.markdown("After a rejection, draw the replacement from the **residual**, what the draft under-weighted:")
            st.latex(r"x \sim \operatorname{norm}\big(\max(0,\ p - q)\big)")
            st.markdown(
                "In **greedy** mode (temperature 0) a guess is kept when it is the target's top token, "
                "and the replacement is that top token."
            )
            ui.legend()


st.html('<div class="sv-kicker">Speculative decoding, step by step</div>')
st.title("A small model writes ahead, a big model checks")

st.markdown(
    "A big language model writes one **token** (a piece of a word) at a time, one slow pass each. Here a small, fast "
    "**draft** model guesses the next few tokens and the big **target** model checks all of them in **one** pass; "
    "the text stays exactly what the target alone would write. Press **Run** to watch it, round by round."
)
ui.ten_minute_path()

settings = ui.settings()
form = st.container(border=True)
with form:
    prompt = ui.prompt_picker(PAGE)
    c1, c2, c3 = st.columns([1.2, 1.2, 4], vertical_alignment="center")
    baseline = c3.checkbox(
        "Also time plain decoding of the target, to measure the speed-up (about doubles the run time)",
        value=True,
        key=k(PAGE, "baseline"),
    )
    with c2.popover("Replay a file", width="stretch"):
        uploaded = ui.trace_upload(PAGE)
        ui.recorded_picker(PAGE)
    if uploaded is not None:
        ui.adopt_trace(PAGE, uploaded, "the uploaded run")

state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(c1, "Run", icon=":material/play_arrow:"),
    lambda: ui.trace_work(prompt, settings.config, settings.chat, bool(baseline)),
    prompt=prompt,
    live=ui.live_rounds,
    errors=form,
    on_result=lambda page, trace, job: ui.adopt_trace(page, trace, "your run"),
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button
how_a_round_works()

if not state.busy:
    trace, label = ui.trace_to_show(PAGE)
    if trace is None:
        st.info(
            "Pick an example prompt (or type your own) and press **Run**. Rounds appear here as they are "
            "computed; then step through them, forward and back."
        )
    else:
        ui.show_trace(PAGE, trace, label)
