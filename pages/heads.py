"""Heads: Medusa's heads and an EAGLE head on the target itself, trained here, racing the draft model."""

import streamlit as st

from specviz import ui
from specviz.training.features import TrainSettings, default_epochs, heldout_budget

ui.page_guard()

PAGE = "heads"
TOKEN_CHOICES = [2000, 5000, 10000, 16000, 20000, 40000]
k = ui.key

st.html('<div class="sv-kicker">No second model</div>')
st.title("Heads: speculation from the target's own hidden state")
st.markdown(
    "A draft model reads the **text** and runs a whole small network per guess. Draft **heads** read what the "
    "target has already computed: its last hidden state h, the vector its LM head turns into the next token. "
    "**Medusa** (Cai et al. 2024) puts K small heads on h; head k guesses the token k + 1 positions on, all in "
    "one cheap pass, blind to the guesses before its own (so its accuracy falls fast with k). **EAGLE** (Li et "
    "al. 2024) trains one decoder layer to predict the target's *next* hidden state from the current one and "
    "the token just chosen, and runs it autoregressively: it sees its own guesses, at the cost of one small "
    "layer per token. Neither needs a second model; both end in the target's own (frozen) LM head."
)
# side by side, in short lines: a narrow column beside the text cut them off in windows 1024 px wide
medusa, eagle = st.columns(2)
medusa.latex(
    r"\begin{gathered}\text{Medusa}: q_k = \operatorname{softmax}(W_{\text{LM}}\, r_k) \\ "
    r"r_k = h_t + \operatorname{SiLU}(A_k h_t + b_k)\end{gathered}"
)
eagle.latex(
    r"\begin{gathered}\text{EAGLE}: \hat f_{t+1} = \text{Layer}(u_t) \\ u_t = W\,[\,e(x_{t+1});\ f_t\,] \\ "
    r"q = \operatorname{softmax}(W_{\text{LM}}\, \hat f_{t+1})\end{gathered}"
)
st.caption(
    "Both learn from the target itself (self-distillation): its own greedy answers to requests about code from "
    "Python's standard library and requests to write such functions, the text it will later be asked to speed "
    "up. Medusa: sum of 0.8^k CE per head; EAGLE: SmoothL1 on the feature + 0.1 CE against the target's whole "
    "next-token distribution (EAGLE's soft labels), with noise on its input features, as it will read its own "
    "imperfect ones when drafting. W_LM is cut to the tokens the answers use; q is 0 on the others."
)
st.markdown(
    "The target checks a head's guesses exactly as it checks a draft model's: accept d with probability "
    "min(1, p/q), q being the head's own distribution, and resample from the residual on a rejection, so the "
    "text still follows p. Medusa's paper also offers **typical acceptance** (keep d if p(d) is above a "
    "threshold), which is faster but **not lossless**; specviz never uses it."
)

settings = ui.settings()
form = st.container(border=True)
with form:
    c0, c1, c2, c3 = st.columns(4)
    kind = c0.radio("Train", ["medusa", "eagle"], key=k(PAGE, "kind"), format_func=lambda x: ui.HEAD_NAMES[x])
    heads = c1.slider("Medusa heads K", 1, 6, 4, key=k(PAGE, "count"), disabled=kind == "eagle")
    tokens = c2.select_slider(
        "Training tokens (at least)",
        TOKEN_CHOICES,
        TrainSettings.train_tokens,
        key=k(PAGE, "tokens"),
        help=ui.HEADS_TOKENS_HELP,
    )
    epochs = c3.slider(  # each kind starts at its own default: EAGLE's fresh layer needs more passes
        "Epochs",
        1,
        24,
        default_epochs(kind),
        key=k(PAGE, f"epochs-{kind}"),
        help=f"as in train-heads: {default_epochs('medusa')} for Medusa, {default_epochs('eagle')} for EAGLE",
    )
    b1, b2 = st.columns([1.2, 5], vertical_alignment="center")
    b2.caption(
        "Trains on the loaded target (minutes on a CPU: most of it is the target writing its answers, kept in the "
        "model cache for the next training), saves the heads there and makes them the sidebar's **Medusa** or "
        "**EAGLE** drafter."
    )
    if note := ui.heads_budget_note():
        b2.caption(note)
    errors = st.container()

train = TrainSettings(heads=heads, train_tokens=tokens, heldout_tokens=heldout_budget(tokens), epochs=epochs)
state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(b1, "Train", icon=":material/model_training:"),
    lambda: ui.heads_train_work(train, kind),
    live=ui.heads_train_live,
    errors=errors,
    budget=ui.heads_train_budget(train),
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button

if not state.busy:
    ui.heads_result(PAGE, ui.heads_recorded(), settings)
    st.markdown(
        "Then pick **Medusa** or **EAGLE** as the drafter in the sidebar and run Step through or the Race: the chips "
        "show each head's q beside the target's p. `python -m specviz bench --compare-drafters "
        "model,ngram,medusa,eagle` races them all on the same prompts."
    )
    st.markdown(ui.HEADS_TREE_WORDS)
