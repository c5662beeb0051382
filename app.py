"""specviz: an interactive explainer of speculative decoding that runs the real thing.

Router only: page config, the shared sidebar, navigation over pages/. Run with `streamlit run app.py`.
"""

import logging

import streamlit as st

from specviz import markup, ui

st.set_page_config(
    page_title="specviz · speculative decoding, step by step",
    page_icon=":material/bolt:",
    layout="wide",
    initial_sidebar_state="expanded",
)
ui.inject_css()

PAGES = [
    st.Page("pages/step_through.py", title="Step through", icon=":material/footprint:", default=True),
    st.Page("pages/race.py", title="Race", icon=":material/sports_score:"),
    st.Page("pages/theory.py", title="Theory", icon=":material/functions:"),
    st.Page("pages/acceptance_lab.py", title="Acceptance lab", icon=":material/science:"),
    st.Page("pages/lossless.py", title="Lossless", icon=":material/verified:"),
    st.Page("pages/heads.py", title="Heads", icon=":material/hub:"),
    st.Page("pages/learning.py", title="Learning", icon=":material/trending_up:"),
    st.Page("pages/batching.py", title="Batching", icon=":material/stacks:"),
    st.Page("pages/your_server.py", title="Your server", icon=":material/monitoring:"),
]
page = st.navigation(PAGES)
ui.sidebar()
st.session_state[ui.ROUTER_KEY] = True  # pages check that they run under this router (ui.page_guard)
try:
    page.run()
except Exception as exc:  # noqa: BLE001 - never a traceback on the page; the app stays usable
    logging.getLogger("specviz").exception("page %s failed", page.title)
    st.error(
        f"Something went wrong on this page ({exc.__class__.__name__}: {markup.md(exc)}). "
        "The app is still usable: change the settings or reload the page."
    )
finally:
    st.session_state[ui.ROUTER_KEY] = False
