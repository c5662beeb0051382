"""Acceptance lab: a batch of prompts, and what the acceptance depends on."""

import streamlit as st

from specviz import drafters as registry
from specviz import ui
from specviz.lessons import lab

ui.page_guard()

PAGE = "lab"
k = ui.key

st.html('<div class="sv-kicker">Experiments</div>')
st.title("Acceptance lab: when does the draft guess right?")
st.markdown(
    "The speed-up lives and dies by the **acceptance rate**. It depends on the text (code and repetition are "
    "predictable, prose less so), on the temperature (sampling adds randomness the draft cannot foresee), on the "
    "position in the draft (a long guess must be right at every step), and on the drafter (a small model, or "
    "simply copying from the prompt). Run a batch and see."
)

settings = ui.settings()
prompts = ui.load_prompts()
form = st.container(border=True)
with form:
    c1, c2 = st.columns(2)
    categories = c1.multiselect("Prompt categories", list(prompts), default=list(prompts), key=k(PAGE, "categories"))
    per_category = c2.slider("Prompts per category", 1, max(len(v) for v in prompts.values()), 1, key=k(PAGE, "per"))
    own = st.text_area("Your own prompts (one per line, category “custom”)", key=k(PAGE, "own"), height=70)
    c1, c2, c3 = st.columns(3)
    base = settings.config
    listed = (0.0, 0.3, 0.7, 1.0)
    temperatures = c1.multiselect(
        "Temperatures (0 = greedy)",
        list(listed),
        default=[base.temperature] if base and base.temperature in listed else [0.0],
        key=k(PAGE, "temps"),
        format_func=lambda t: "greedy (0)" if t == 0 else f"{t:g}",
    )
    drafters = c2.multiselect(
        "Drafters",
        list(registry.standalone()),
        default=list(registry.standalone()),
        key=k(PAGE, "drafters"),
        format_func=registry.label,
    )
    schedules = c3.multiselect(
        "Schedules", ["constant", "adaptive", "auto"], default=["constant"], key=k(PAGE, "schedules")
    )
    own_lines = [line.strip() for line in own.splitlines() if line.strip()]
    plan = (
        (
            lab.plan_batch(prompts, categories, per_category, temperatures, drafters, schedules, base)
            + lab.plan_batch({"custom": own_lines}, ["custom"], len(own_lines), temperatures, drafters, schedules, base)
        )
        if base
        else []
    )
    c1, c2 = st.columns([1.2, 5], vertical_alignment="center")
    c2.caption(
        f"{len(plan)} runs of up to {base.max_new_tokens if base else '?'} new tokens each, one after the other "
        "(γ, top-k, top-p, seed and max new tokens come from the sidebar). Stop keeps the finished runs."
        + ui.lab_budget_note()
    )

state = ui.run_section(
    PAGE,
    settings,
    ui.RunButton(c1, "Run the batch", icon=":material/science:", disabled=base is not None and not plan),
    lambda: ui.lab_work(plan, settings.chat),
    batch=[p.prompt for p in plan],
    live=ui.lab_live,
    errors=form,
    on_result=ui.adopt_lab_runs,
    budget=ui.lab_budget(plan),
)
ui.experiments_section(PAGE)  # beside the run: the answer shows under the Run button

runs = None if state.busy else ui.lab_to_show(PAGE)  # before a run: the recorded batch
if not state.busy and runs is None:
    st.info("Choose what to compare and press **Run the batch**.")
elif runs is not None:
    ui.lab_results(PAGE, runs)
