"""Learning: a speculator that learns from traffic; acceptance climbs request after request, falls and recovers."""

import streamlit as st

from specviz import markup, ui

ui.page_guard()

PAGE = "learning"

st.html('<div class="sv-kicker">Drafting from traffic</div>')
st.title("A speculator that learns from the requests it serves")
st.markdown(
    "A drafter with no model of its own: it remembers the answers it has served, and when a new request starts to "
    "repeat one it guesses that the rest repeats too. Its guesses improve request after request; a controller picks, "
    "each round, between it and the draft model. Type a request and press **Run**, or read the recorded stream below."
)

st.subheader("Your requests")
settings = ui.settings()
form = st.container(border=True)
with form:
    choice = ui.learning_form(PAGE)
mine = ui.your_rows(PAGE)
state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(choice.slot, "Run", icon=":material/play_arrow:", disabled=not choice.requests),
    lambda: ui.stream_work(choice.requests, settings.config, settings.chat, first_index=len(mine)),
    batch=[r.prompt for r in choice.requests],
    live=ui.stream_live,
    errors=form,
    on_result=ui.adopt_stream_rows,
    budget=ui.stream_budget(choice.requests),
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button
with st.expander("How the traffic drafter works, and where it comes from", expanded=True):
    st.markdown(
        "Production systems do not keep one fixed draft. Together AI's ATLAS keeps a static speculator as a floor, "
        "adds one that learns from live traffic, and lets a controller choose between them; SuffixDecoding (vLLM's "
        "*suffix* method) drafts from a suffix tree over earlier outputs. Here the **traffic drafter** matches the "
        "end of the current text against every request you have run here (and the current one), and proposes the "
        "most frequent continuation of the longest match; the **controller** picks, each round, traffic, the draft "
        "model, or both. Drafts are point masses, so the output is still exactly the target's."
    )

recorded = ui.recorded_stream()
if recorded is None:
    st.warning("The recorded stream is missing or damaged, so it is not shown.")
else:
    st.subheader(f"Recorded: {len(recorded['requests'])} code-editing requests, Python then JavaScript")
    pair = recorded["pair"]
    origin = markup.recorded_on(pair.get("device"), pair.get("dtype"), None)
    st.caption(
        f"{origin[:1].upper()}{origin[1:]}: "
        f"{markup.md(pair.get('target', ''))} ← {markup.md(pair.get('draft', ''))}, greedy, "
        f"{recorded['config']['max_new_tokens']} new tokens per request."
    )
    ui.how_recorded("python -m specviz bench --stream assets/streams/inventory_drift.json")
    ui.learning_view(recorded["requests"], recorded["summary"], "recorded")

ui.side_channel_section()
mine = ui.your_rows(PAGE)
if state.stopped and not state.busy:
    st.warning(state.stopped)
if not state.busy:
    ui.forget_button(PAGE, settings)
if mine and not state.busy:
    ui.learning_view(mine, ui.stream_summary(mine), "yours", explain=recorded is None)  # else it is above
    ui.your_requests_table(mine)
elif not state.busy:
    st.info(
        "Type a request and press **Run**: it runs with the target alone and with each drafter, then joins the "
        "traffic. Run a few similar ones and watch the traffic drafter's acceptance climb."
    )
