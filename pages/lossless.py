"""Lossless: speculative samples follow the target's distribution exactly (and a broken variant does not)."""
import streamlit as st

from specviz import charts, lossless, ui

ui.page_guard()

PAGE = "lossless"

st.html('<div class="sv-kicker">The guarantee</div>')
st.title("Lossless: exactly the target's distribution")
left, right = st.columns([1, 1], gap="large")
with left:
    st.markdown(
        "Speculative decoding is not an approximation. Take one context and look at the next token only. "
        "The target says it should be distributed as **p**. Draw the token the speculative way — let the draft propose "
        "d ~ q, keep it with probability min(1, p(d)/q(d)), otherwise draw from the residual — many thousands of "
        "times, and the histogram lands on **p**, not on the draft's **q**.\n\n"
        "Here p and q come from **one** forward pass of each real model over the context; the sampling itself is "
        "then cheap, so tens of thousands of samples take a moment. Distances are the **total variation**, "
        "TV(x, y) = ½ Σ |x(v) − y(v)|: 0 means identical, 1 means disjoint.")
with right:
    st.markdown("**Why it is exact.** Let β be the chance of a rejection. Token x comes out when the draft "
                "proposed x and it was kept, or after a rejection, from the residual:")
    st.latex(r"P(x) = q(x)\min\!\Big(1, \frac{p(x)}{q(x)}\Big) + \beta\, r(x)")
    st.latex(r"r(x) = \frac{(p(x) - q(x))^+}{\sum_v (p(v) - q(v))^+}")
    st.markdown("The rejection chance is exactly the residual's normaliser, so they cancel:")
    st.latex(r"\beta = 1 - \sum_v \min(p, q)(v) = \sum_v (p - q)^+(v)")
    st.latex(r"P(x) = \min(p, q)(x) + (p - q)^+(x) = p(x)")
    st.markdown("Skip the residual and redraw from q instead, and the second term takes q's shape: "
                "the result drifts towards q.")
    st.markdown("**Alternatives.** After a rejection the token must follow r. A further candidate c ~ q, kept "
                "with probability min(1, r(c)/q(c)), is the same step with r in place of p, so the same argument "
                "holds with the residual of r; and so on for every further candidate.")

settings = ui.settings()
with st.container(border=True):
    prompt = ui.prompt_picker(PAGE, label="Context (the prompt)", height=90)
    prefix = st.text_input("The answer so far (optional): the next token is predicted after this text",
                           key=f"{PAGE}.prefix")
    c1, c2, c3 = st.columns(3)
    base_temperature = settings.config.temperature if settings.config and settings.config.temperature > 0 else 1.0
    temperature = c1.slider("Temperature for this experiment", 0.05, 2.0, float(min(2.0, base_temperature)), 0.05,
                            key=f"{PAGE}.temperature",
                            help="Greedy decoding samples nothing, so this page always samples. Top-k and top-p "
                                 "come from the sidebar and are applied to p and q alike.")
    n = c2.select_slider("Samples", [1_000, 10_000, 50_000, 100_000, 200_000], value=50_000, key=f"{PAGE}.n",
                         format_func=lambda v: f"{v:,}")
    seed = c3.number_input("Seed", value=0, step=1, key=f"{PAGE}.seed")
    base_alternatives = settings.config.alternatives if settings.config else 0
    alternatives = st.slider("Alternatives: after a rejection, up to this many more candidates drawn from q", 0, 4,
                             base_alternatives, key=f"{PAGE}.alternatives",
                             help="As the engine's token tree does when sampling: each further candidate c ~ q is "
                                  "kept with probability min(1, r(c)/q(c)), where r is what the rejections so far "
                                  "left of p, and r shrinks again after each refusal (recursive rejection "
                                  "sampling). More tokens are kept by a candidate; the result is still p.")
    broken = st.toggle(":material/heart_broken: Break the algorithm: after a rejection, draw again from q instead of the residual",
                       key=f"{PAGE}.broken")
    c1, c2 = st.columns([1.4, 5], vertical_alignment="center")
    run = c1.button("Compute p and q", type="primary", key=f"{PAGE}.run", disabled=ui.busy(PAGE), width="stretch")
    c2.caption("One forward pass of each model over the context; the samples are drawn from the result.")
    if run and settings.config is not None:
        config = ui.with_temperature(settings.config, temperature)
        ui.launch(PAGE, settings, ui.lossless_work(prompt, config, settings.chat, prefix), prompt=prompt)
    elif run:
        ui.launch(PAGE, settings, ui.lossless_work(prompt, settings.config, settings.chat, prefix), prompt=prompt)
    ui.show_error(PAGE)

ui.live_panel(PAGE, ui.quiet_live)
finished = ui.take_finished(PAGE)
if finished is not None and finished.result is not None:
    st.session_state[f"{PAGE}.dist"] = finished.result

dist = st.session_state.get(f"{PAGE}.dist")
if dist is None and not ui.busy(PAGE):
    st.info("Press **Compute p and q** to run both models once on this context.")
elif dist is not None and not ui.busy(PAGE):
    result = lossless.lossless_experiment(dist, n=int(n), seed=int(seed), resample_residual=not broken,
                                          alternatives=int(alternatives))
    st.caption(f"Context: {dist.context_tokens} tokens · temperature {dist.temperature:g}"
               f"{f' · top-k {dist.top_k}' if dist.top_k else ''}{f' · top-p {dist.top_p:g}' if dist.top_p < 1 else ''}"
               f" · {result.n:,} samples each")
    m = st.columns(6 if result.alternatives else 5)
    m[0].metric("TV(speculative, p)", f"{result.tv_spec:.4f}",
                help="Distance of the speculative samples' histogram from p: near the noise floor when correct.")
    m[1].metric("TV(direct samples of p, p)", f"{result.tv_direct:.4f}",
                help="The same number of samples drawn straight from p: the distance sampling noise alone gives.")
    m[2].metric("TV(draft alone, p)", f"{result.tv_draft:.4f}", help="Samples of q alone, compared with p.")
    m[3].metric("TV(q, p) exact", f"{result.tv_pq:.4f}")
    m[4].metric("P(accept) exact", f"{result.acceptance:.1%}", help="Σ min(p, q) = 1 − TV(p, q).")
    if result.alternatives:
        m[5].metric(f"P(kept) with {result.alternatives} alternative{'s' if result.alternatives > 1 else ''}",
                    f"{result.acceptance_any:.1%}",
                    help="Exact chance that the draft or one of the further candidates is kept, so that no "
                         "draw from the residual is needed.")
    if broken:
        st.error(f"Broken: without the residual the samples drift towards q. TV from p is {result.tv_spec:.4f}, "
                 f"against a noise floor of {result.tv_direct:.4f}.")
    elif result.tv_spec <= max(2.5 * result.tv_direct, 0.01):
        st.success(f"The speculative samples match p: TV {result.tv_spec:.4f}, as close as direct samples of p "
                   f"({result.tv_direct:.4f}) — only sampling noise.")
    else:
        st.warning(f"TV {result.tv_spec:.4f} is above the noise floor {result.tv_direct:.4f}; try more samples.")
    st.plotly_chart(charts.lossless_figure(result), key=f"{PAGE}.chart", config={"displayModeBar": False})
    st.caption("Bars: the most likely tokens under p or q; the last bar pools every other token of the vocabulary.")
