"""Batching: speculative decoding's speed-up as the batch grows, measured (a recording, or your run live)."""

import streamlit as st

from specviz import ui

ui.page_guard()
PAGE = "batching"

st.html('<div class="sv-kicker">Serving many requests</div>')
st.title("Batching: when speculation stops paying")
st.markdown(
    "A server answers many requests at once, in a **batch**. Speculative decoding spends the processor's spare "
    "compute, and so does a batch: here B prompts run together, plain and speculative, each row keeping the guesses "
    "it got right, as serving engines do. Press **Run the batches** to see where speculation stops paying here."
)
ui.batching_page(ui.settings())

ui.experiments_section(PAGE)
