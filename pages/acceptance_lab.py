"""Acceptance lab: a batch of prompts, and what the acceptance depends on."""
import streamlit as st

from specviz import charts, lab, ui

ui.page_guard()

PAGE = "lab"

st.html('<div class="sv-kicker">Experiments</div>')
st.title("Acceptance lab: when does the draft guess right?")
st.markdown(
    "The speed-up lives and dies by the **acceptance rate**. It depends on the text (code and repetition are "
    "predictable, prose less so), on the temperature (sampling adds randomness the draft cannot foresee), on the "
    "position in the draft (a long guess must be right at every step), and on the drafter (a small model, or "
    "simply copying from the prompt). Run a batch and see.")

settings = ui.settings()
prompts = ui.load_prompts()
with st.container(border=True):
    c1, c2 = st.columns(2)
    categories = c1.multiselect("Prompt categories", list(prompts), default=list(prompts), key=f"{PAGE}.categories")
    per_category = c2.slider("Prompts per category", 1, max(len(v) for v in prompts.values()), 1, key=f"{PAGE}.per")
    own = st.text_area("Your own prompts (one per line, category “custom”)", key=f"{PAGE}.own", height=70)
    c1, c2, c3 = st.columns(3)
    base = settings.config
    temperatures = c1.multiselect("Temperatures (0 = greedy)", [0.0, 0.3, 0.7, 1.0],
                                  default=[base.temperature] if base and base.temperature in (0.0, 0.3, 0.7, 1.0) else [0.0],
                                  key=f"{PAGE}.temps", format_func=lambda t: "greedy (0)" if t == 0 else f"{t:g}")
    drafters = c2.multiselect("Drafters", ["model", "ngram"], default=["model", "ngram"], key=f"{PAGE}.drafters",
                              format_func=lab.drafter_name)
    schedules = c3.multiselect("Schedules", ["constant", "adaptive", "auto"], default=["constant"], key=f"{PAGE}.schedules")
    own_lines = [line.strip() for line in own.splitlines() if line.strip()]
    plan = (lab.plan_batch(prompts, categories, per_category, temperatures, drafters, schedules, base)
            + lab.plan_batch({"custom": own_lines}, ["custom"], len(own_lines), temperatures, drafters, schedules, base)
            ) if base else []
    c1, c2 = st.columns([1.2, 5], vertical_alignment="center")
    run = c1.button("Run the batch", icon=":material/science:", type="primary", key=f"{PAGE}.run",
                    disabled=ui.busy(PAGE) or (base is not None and not plan),
                    width="stretch")
    c2.caption(f"{len(plan)} runs of up to {base.max_new_tokens if base else '?'} new tokens each, one after the other "
               "(γ, top-k, top-p, seed and max new tokens come from the sidebar). Stop keeps the finished runs.")
    if run:
        ui.launch(PAGE, settings, ui.lab_work(plan, settings.chat))
    ui.show_error(PAGE)

ui.live_panel(PAGE, ui.lab_live)
finished = ui.take_finished(PAGE)
if finished is not None and finished.result is not None:
    st.session_state[f"{PAGE}.runs"] = finished.result
    for r in finished.result:
        ui.remember(r.trace, f"lab: {r.label}")
    if finished.state == "cancelled":
        st.warning(f"Stopped: {len(finished.result)} runs finished before the stop.")

runs = st.session_state.get(f"{PAGE}.runs") or []
if not ui.busy(PAGE) and not runs:
    st.info("Choose what to compare and press **Run the batch**.")
elif runs and not ui.busy(PAGE):
    st.subheader(f"{len(runs)} runs")
    st.dataframe(lab.run_rows(runs), hide_index=True, key=f"{PAGE}.table")
    t1, t2, t3, t4, t5 = st.tabs(["By draft position", "By category", "By temperature",
                                  "N-gram vs draft model", "γ over time"])
    with t1:
        a, b = st.columns([3, 2], gap="large")
        a.plotly_chart(charts.position_figure(lab.acceptance_by_position(r.trace for r in runs)),
                       key=f"{PAGE}.pos", config={"displayModeBar": False})
        b.markdown("The share of drafted tokens accepted at each position of the draft, counting only tokens that "
                   "were checked (a token after a rejection is never checked). The theory assumes one rate **a** for "
                   "every position; real drafts are often surer early on, or in the middle of a copied phrase.")
    with t2:
        a, b = st.columns([3, 2], gap="large")
        a.plotly_chart(charts.group_figure(lab.group_stats(runs, lab.by_category), "By prompt category"),
                       key=f"{PAGE}.cat", config={"displayModeBar": False})
        b.markdown("Code, translation of short fixed phrases, and tasks that repeat the prompt are easy to guess: "
                   "the draft and the target agree on the obvious next token. Open-ended prose is not.")
    with t3:
        a, b = st.columns([3, 2], gap="large")
        a.plotly_chart(charts.group_figure(lab.group_stats(runs, lab.by_temperature), "By temperature"),
                       key=f"{PAGE}.temp", config={"displayModeBar": False})
        b.markdown("In greedy mode a guess is kept when it is the target's top token. With sampling it is kept "
                   "with probability min(1, p/q); the expected acceptance is the overlap of the two distributions:")
        b.latex(r"P(\text{accept}) = \sum_x \min\big(p(x), q(x)\big) = 1 - \mathrm{TV}(p, q)")
    with t4:
        comparison = lab.drafter_comparison(runs)
        a, b = st.columns([3, 2], gap="large")
        a.plotly_chart(charts.group_figure(lab.group_stats(runs, lab.by_drafter), "By drafter"),
                       key=f"{PAGE}.drafter", config={"displayModeBar": False})
        b.markdown("The **n-gram** drafter (prompt lookup) has no model: it copies what followed the last occurrence "
                   "of the current words in the prompt or the text so far. It costs nothing, so even a low "
                   "acceptance pays, and on tasks that repeat the prompt (renaming, fixing) it shines.")
        if comparison:
            st.dataframe(comparison, hide_index=True, key=f"{PAGE}.comparison")
        else:
            st.caption("Select both drafters to compare them prompt by prompt.")
    with t5:
        adaptive = [r for r in runs if r.trace.config.schedule == "adaptive"]
        if adaptive:
            st.plotly_chart(charts.gamma_figure([(lab.short(r.label, 40), lab.gamma_series(r.trace)) for r in adaptive[:6]]),
                            key=f"{PAGE}.gamma", config={"displayModeBar": False})
            st.markdown("The adaptive schedule grows γ by 2 after a round whose drafts were all accepted and shrinks "
                        "it by 1 otherwise: long drafts where the text is predictable, short ones where it is not.")
        else:
            st.info("Add the **adaptive** schedule above to see γ change over a run.")

    st.subheader("One run's text, coloured by acceptance")
    labels = [r.label for r in runs]
    pick = st.selectbox("Run", range(len(runs)), format_func=lambda i: labels[i], key=f"{PAGE}.pick")
    chosen_run = runs[pick if pick is not None and pick < len(runs) else 0]
    ui.legend(("prompt", "accepted", "resampled", "bonus"))
    st.html(ui.text_html(chosen_run.prompt, chosen_run.trace.rounds))
    st.caption("Hover a token to see its round and, for an accepted draft token, min(1, p/q).")
    ui.trace_download(chosen_run.trace, key=f"{PAGE}.download", label="Download this run (JSON)")
