"""Heads: Medusa's extra decoding heads on the target itself, trained here, racing the draft model."""

import streamlit as st

from specviz import ui
from specviz.heads.train import TrainSettings

ui.page_guard()

PAGE = "heads"
k = ui.key

st.html('<div class="sv-kicker">No second model</div>')
st.title("Heads: speculation from the target's own hidden state")
left, right = st.columns([3, 2], gap="large")
with left:
    st.markdown(
        "A draft model reads the **text** and runs a whole small network per guess. **Medusa** (Cai et al. 2024) "
        "reads what the target has already computed: its last hidden state h, the vector its LM head turns into "
        "the next token. K small **heads** on h each guess one position further ahead: head k the token k + 1 "
        "positions on. One cheap pass gives the whole draft; there is no second model and no second KV cache. "
        "The price: a head guesses blind to the tokens before its own position, so its accuracy falls fast "
        "with k. **EAGLE** (a one-layer head run autoregressively on the target's features) fixes that; it is "
        "not built here yet."
    )
    st.markdown(
        "The target checks the heads' guesses exactly as it checks a draft model's: accept d with probability "
        "min(1, p/q), q being the head's own distribution, and resample from the residual on a rejection, so the "
        "text still follows p. Medusa's paper also offers **typical acceptance** (keep d if p(d) is above a "
        "threshold), which is faster but **not lossless**; specviz never uses it."
    )
with right:
    st.latex(r"\text{head}_k(h_t) = W_{\text{LM}}\,\big(h_t + \operatorname{SiLU}(A_k h_t + b_k)\big)")
    st.latex(r"\mathcal{L} = \sum_{k=1}^{K} 0.8^{k}\; \operatorname{CE}\!\big(\text{head}_k(h_t),\ a_{t+k}\big)")
    st.caption(
        "W_LM is the target's own LM head, frozen, cut to the tokens the training labels use; A_k starts at zero, "
        "so an untrained head is the LM head. a_t is the target's own argmax at t (self-distillation): the heads "
        "learn what the target would say, from one teacher-forced pass over Python's standard library."
    )

settings = ui.settings()
form = st.container(border=True)
with form:
    c1, c2, c3 = st.columns(3)
    heads = c1.slider("Heads K", 1, 6, 4, key=k(PAGE, "count"))
    tokens = c2.select_slider("Training tokens", [2000, 4000, 8000, 12000, 20000], 12000, key=k(PAGE, "tokens"))
    epochs = c3.slider("Epochs", 1, 8, 4, key=k(PAGE, "epochs"))
    b1, b2 = st.columns([1.2, 5], vertical_alignment="center")
    b2.caption(
        "Trains on the loaded target (minutes on a CPU: most of it is the target's own passes over the text), "
        "saves the heads in the model cache and makes them the sidebar's **Medusa heads** drafter."
    )
    errors = st.container()

train = TrainSettings(heads=heads, train_tokens=tokens, heldout_tokens=max(1000, tokens // 6), epochs=epochs)
state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(b1, "Train the heads", icon=":material/model_training:"),
    lambda: ui.heads_train_work(train),
    live=ui.heads_train_live,
    errors=errors,
)

if not state.busy:
    recorded, problem = ui.heads_recorded()
    ui.heads_result(PAGE, recorded, problem)
    st.markdown(
        "Then pick **Medusa heads** as the drafter in the sidebar and run Step through or the Race: each round "
        "drafts up to K tokens from one hidden state, and the chips show each head's q beside the target's p."
    )
