"""Heads: Medusa's heads and an EAGLE head on the target itself, trained here, racing the draft model."""

import streamlit as st

from specviz import ui
from specviz.drafters import drafter_class, with_capability
from specviz.training.features import TrainSettings, default_epochs, heldout_budget
from specviz.ui import heads as heads_ui  # the page's own parts, by their own names

ui.page_guard()

PAGE = "heads"
TOKEN_CHOICES = [2000, 5000, 10000, 16000, 20000, 40000]
k = ui.key


st.html('<div class="sv-kicker">No second model</div>')
st.title("Heads: speculation from the target's own hidden state")
st.markdown(
    "No second model: a few small extra layers on the big model itself guess the next tokens from what it has "
    "already computed. **Medusa** puts several small *heads* on it, each guessing one position further on, all at "
    "once; **EAGLE** trains one small layer that guesses one token after another, seeing its own earlier guesses. "
    "Press **Train** to train them here on the loaded model, or read the recorded training below."
)

settings = ui.settings()
form = st.container(border=True)
with form:
    c0, c1, c2, c3 = st.columns(4)
    kinds = with_capability("needs_hidden_states")  # the drafters whose heads are trained here
    kind = c0.radio("Train", kinds, key=k(PAGE, "kind"), format_func=lambda x: drafter_class(x).title)
    # K heads: a drafter whose one pass drafts a token per head
    heads = c1.slider(
        "Medusa heads K", 1, 6, 4, key=k(PAGE, "count"), disabled=drafter_class(kind).draft_passes != "one"
    )
    tokens = c2.select_slider(
        "Training tokens (at least)",
        TOKEN_CHOICES,
        TrainSettings.train_tokens,
        key=k(PAGE, "tokens"),
        help=heads_ui.TOKENS_HELP,
    )
    epochs = c3.slider(  # each kind starts at its own default: EAGLE's fresh layer needs more passes
        "Epochs",
        1,
        24,
        default_epochs(kind),
        key=k(PAGE, f"epochs-{kind}"),
        help="as in train-heads: " + ", ".join(f"{default_epochs(n)} for {drafter_class(n).label}" for n in kinds),
    )
    b1, b2 = st.columns([1.2, 5], vertical_alignment="center")
    b2.caption(
        "Trains on the loaded target (minutes on a CPU: most of it is the target writing its answers, kept in the "
        "model cache for the next training), then makes the heads the sidebar's **Medusa** or **EAGLE** drafter: "
        + heads_ui.kept_for()
    )
    if note := heads_ui.budget_note():
        b2.caption(note)
    errors = st.container()

train = TrainSettings(heads=heads, train_tokens=tokens, heldout_tokens=heldout_budget(tokens), epochs=epochs)
state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(b1, "Train", icon=":material/model_training:"),
    lambda: heads_ui.train_work(train, kind),
    live=heads_ui.train_live,
    errors=errors,
    budget=heads_ui.train_budget(train),
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button
heads_ui.explained()

if not state.busy:
    heads_ui.heads_result(PAGE, heads_ui.recorded_reports(), settings)
    st.markdown(
        "Then pick **Medusa** or **EAGLE** as the drafter in the sidebar and run Step through or the Race: the chips "
        "show each head's q beside the target's p. The benchmark can also race all four drafters on the same "
        "prompts."
    )
    ui.how_recorded("python -m specviz bench --compare-drafters model,ngram,medusa,eagle", title="How to race them")
    st.markdown(heads_ui.TREE_WORDS)
