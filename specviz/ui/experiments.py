"""Guided experiments on a page (the data: specviz/lessons/experiments.py), and the ten-minute path on the home page.

Each experiment: its question, one button that sets its settings (and starts the page's run where it has one),
and, once that run has finished, what to look for and why (docs/DESIGN.md, "Guided experiments").
"""

from __future__ import annotations

import streamlit as st
import streamlit.components.v1 as components

from specviz.lessons import answers, experiments
from specviz.lessons.experiments import Experiment
from specviz.lessons.screen import Made, Screen, made_of

from .advice import apply_settings
from .links import query_number
from .quoted import quoted_words
from .screens import screen_of
from .settings import widget_values
from .state import key, page_state


def start_experiment(experiment: Experiment) -> None:
    """The button's on_click: set the experiment's settings, and ask for the page's run."""
    state = page_state(experiment.page)
    state.experiment, state.experiment_job = experiment.id, None
    apply_settings(experiment.page, widget_values(experiment.values), run=experiment.run)


def revealed(experiment: Experiment) -> bool:
    """Whether the answer shows: the experiment was started here, and its run (if it has one) has finished."""
    state = page_state(experiment.page)
    if state.experiment != experiment.id:
        return False
    if not experiment.run:
        return True
    job = state.experiment_job
    return job is not None and job.finished and job.state != "failed"


def computed_answer(experiment: Experiment, screen: Screen) -> str:
    """The answer from what the page shows right then (lessons/answers.py); "" where it shows nothing to read."""
    if screen.trace is None and not screen.runs and screen.data is None and not screen.values:
        return ""
    return answers.answer(experiment.id, screen)


def recorded_made(experiment: Experiment, screen: Screen) -> Made | None:
    """The recording an answer may quote: the experiment's recorded run (Step through, Race), else the result shown."""
    if experiment.page in ("step", "race"):
        return made_of(screen.recordings.get(experiment.id) or screen.recordings.get("identical"))
    return screen.made


def _experiment(experiment: Experiment, number: int) -> None:
    question, button = st.columns([5, 1.3], vertical_alignment="center")
    question.markdown(f"**{number}.** {experiment.question}")
    button.button(
        "Try it" if experiment.run else ("Set it" if experiment.settings else "Show"),
        icon=":material/play_arrow:" if experiment.run else ":material/tune:",
        key=key(experiment.page, f"exp_{experiment.id}"),
        on_click=start_experiment,
        args=(experiment,),
        width="stretch",
        help=experiments.changes_words(experiment) + (" Then starts the run." if experiment.run else "")
        if experiment.settings
        else "Shows what to look for in what this page shows.",
    )
    if page_state(experiment.page).experiment == experiment.id and experiment.settings:
        st.caption(experiments.changes_words(experiment))
    if revealed(experiment):
        screen = screen_of(experiment.page)
        found = computed_answer(experiment, screen)
        if (recording := quoted_words(experiment.id, found, recorded_made(experiment, screen))) is not None:
            st.caption(recording)  # the recording's numbers the answer quotes, beside it, named as a recording
        if found and (points := answers.beside(experiment.id, screen)) is not None:
            st.caption(points)  # numbers the page's chart shows only on hover
        st.success(f"**What you should see.** {experiment.observe} {found}\n\n**Why.** {experiment.reason}")
    elif page_state(experiment.page).experiment == experiment.id:
        st.caption("Running… what to look for appears here when the run has finished.")


PATH_PARAM = "path"  # ?path=<its number on the ten-minute path>: the page opens at that experiment


def path_step(page: str) -> int | None:
    """The number on the ten-minute path this page was opened at, if it names one of this page's experiments."""
    number = query_number(PATH_PARAM, 1, len(experiments.PATH), "a step on the ten-minute path")
    if number is None:
        return None
    return number if experiments.by_id(experiments.PATH[number - 1]).page == page else None


def _scroll_to(css_class: str) -> None:
    """Scroll the page to the element of that class once it is drawn (a zero-height script beside it), once per
    visit: the mark on the page's window stops a rerun's copy of the script from scrolling the reader back. It keeps
    it in view while the page is still being drawn (the page's height changed in the last 2 s; at most a minute: a
    page not yet tall enough cannot scroll that far), until the reader scrolls, clicks or types."""
    components.html(
        "<script>const w = window.parent, mark = '" + css_class + "@' + w.location.pathname + w.location.search;"
        "let stop = false, height = -1, still = 0; const halt = () => { stop = true; };"
        "for (const e of ['wheel', 'touchstart', 'keydown', 'mousedown']) w.addEventListener(e, halt, {once: true});"
        "const find = () => w.document.querySelector('." + css_class + "');"
        "const keep = (n) => { const el = find(), main = w.document.querySelector('[data-testid=\"stMain\"]');"
        "if (stop || !n) return; const now = main ? main.scrollHeight : 0;"
        "still = now === height ? still + 1 : 0; height = now;"
        "if (el) { w.__svPathScrolled = mark; el.scrollIntoView({block: 'center'}); if (still >= 8) return; }"
        "setTimeout(() => keep(n - 1), 250); };"
        "if (w.__svPathScrolled !== mark) keep(240);</script>",
        height=0,
    )


def experiments_section(page: str) -> None:
    """The page's guided experiments, in an expander that stays open while one of them is under way. Opened from
    the ten-minute path, the page scrolls to that experiment, which is framed and says its step."""
    found = experiments.for_page(page)
    if not found:
        return
    step = path_step(page)
    with st.expander(f"Guided experiments: {len(found)} questions to answer by doing one thing", expanded=True):
        for number, experiment in enumerate(found, start=1):
            on_path = step is not None and experiments.PATH[step - 1] == experiment.id
            with st.container(key=f"sv-exp-{experiment.id}", border=on_path):
                if on_path:
                    st.caption(f"Step {step} of {len(experiments.PATH)} on the ten-minute path: press the button.")
                _experiment(experiment, number)
    if step is not None:
        _scroll_to(f"st-key-sv-exp-{experiments.PATH[step - 1]}")


def ten_minute_path() -> None:
    """The ordered path through the whole app, each step a link to its page (the home page shows it)."""
    with st.expander("Ten minutes? Follow this path through the app", icon=":material/route:"):
        for number, experiment_id in enumerate(experiments.PATH, start=1):
            experiment = experiments.by_id(experiment_id)
            title = experiments.PAGE_TITLES[experiment.page]
            st.page_link(  # the page's name only: a whole question was cut off in a narrow window
                experiments.PAGE_FILES[experiment.page],
                label=f"{number}. {title}",
                icon=":material/arrow_forward:",
                query_params={PATH_PARAM: str(number)},  # lands on the experiment (experiments_section)
            )
            st.caption(experiment.question)
        st.caption("On each page, Guided experiments sits under the Run button: press the question's button.")
