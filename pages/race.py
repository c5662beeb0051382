"""Race: plain decoding of the target against speculative decoding, same prompt and settings."""

import streamlit as st

from specviz import ui

ui.page_guard()

PAGE = "race"


def how_the_race_works() -> None:
    """The method and the speed-up's formula, under the race: its button stays on the first screen at 1024x768."""
    with st.expander("How the race is run, and what the speed-up measures", expanded=True):
        left, right = st.columns([3, 2], gap="large")
        with left:
            st.markdown(
                "The same prompt and settings run twice: first speculative decoding (draft + target), then plain "
                "decoding (the target alone, one pass per token). They run **one after the other**, never at the "
                "same time, so neither steals the other's processor. Then both are replayed side by side **on a "
                "shared clock**: each token appears at the moment it was actually produced."
            )
        with right:
            st.markdown(
                "The speed-up is the ratio of decode rates (the prompt is processed once by both, and left out):"
            )
            st.latex(
                r"\begin{gathered}\text{speed-up} = \\ "
                r"\frac{\text{tokens/s (speculative)}}{\text{tokens/s (plain)}}\end{gathered}"
            )
            st.markdown(
                "With temperature 0 (greedy) both texts must be **identical**: the check below proves it for this run."
            )


st.html('<div class="sv-kicker">Measured, not simulated</div>')
st.title("Race: plain decoding against speculative decoding")
st.markdown(
    "The same prompt runs twice, speculative decoding and then the big model alone, and both are replayed side by side "
    "as they happened. Press **Start the race**."
)

settings = ui.settings()
form = st.container(border=True)
with form:
    prompt = ui.prompt_picker(PAGE)
    c1, c2 = st.columns([1.2, 5], vertical_alignment="center")
    c2.caption("Uses the sidebar's settings. On a CPU the target is slow: 32 tokens take a while for each method.")
    errors = st.container()
    ui.race_upload(PAGE)

state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(c1, "Start the race", icon=":material/sports_score:"),
    lambda: ui.trace_work(prompt, settings.config, settings.chat, baseline=True),
    prompt=prompt,
    live=ui.race_live,
    errors=errors,
    on_result=ui.adopt_race,
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button
how_the_race_works()

if not state.busy:
    trace = ui.race_to_show(PAGE)
    if trace is None:
        st.info("Press **Start the race** to run both methods on the prompt above.")
    else:
        ui.show_race(PAGE, trace)
