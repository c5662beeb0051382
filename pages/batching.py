"""Batching: speculative decoding's speed-up as the batch grows, measured (recorded for this CPU, or run live)."""

import streamlit as st

from specviz import ui

ui.page_guard()
PAGE = "batching"

st.html('<div class="sv-kicker">Serving many requests</div>')
st.title("Batching: when speculation stops paying")
st.markdown(
    "Speculative decoding spends spare compute. A batch of requests spends it too. Here B prompts run at once, "
    "plain and speculative (one draft forward per step for the whole batch, one batched verify, each row "
    "accepted by the ordinary rule and keeping what it accepted, as serving engines do), and the speed-up is "
    "measured at each B and each draft length γ next to what the measured forward times predict; beside it, "
    "a batch that waits for its slowest row."
)
ui.batching_page(ui.settings())

ui.experiments_section(PAGE)
