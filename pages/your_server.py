"""Your server: a serving engine's own speculative-decoding counters (vLLM, llama.cpp, SGLang), read from its /metrics
while the page is open, shown as the app shows its own runs, with the draft length they argue for."""

import streamlit as st

from specviz import ui
from specviz.ui import your_server

ui.page_guard()

st.html('<div class="sv-kicker">vLLM · llama.cpp · SGLang, read from /metrics</div>')
st.title("Your server: its speculation, read live")
st.markdown(
    "Serving engines count their speculation as this app counts its own: drafts, drafted tokens, accepted tokens, "
    "and how many drafts kept each position. Read from a server's /metrics every few seconds, those counters give "
    "its **acceptance rate** (accepted ÷ drafted), its **mean acceptance length** (1 + accepted ÷ drafts: tokens "
    "per verify), and by position both the share of all drafts that kept it and the share of those that *reached* "
    "it (kept every position before). The second is what a longer draft would earn: it says where drafting stops "
    "paying for itself."
)
url = your_server.chosen_url()
if url is None:
    your_server.recording()
else:
    your_server.live(url)
