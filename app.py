"""specviz: an interactive explainer of speculative decoding that runs the real thing.

Router only: page config, the shared sidebar, navigation over pages/. Run with `streamlit run app.py`.
"""

import logging

import streamlit as st

from specviz import markup, ui
from specviz.lessons import experiments

st.set_page_config(
    page_title="specviz · speculative decoding, step by step",
    page_icon=":material/bolt:",
    layout="wide",
    initial_sidebar_state="expanded",
)
ui.inject_css()

PAGES = [  # the one table of pages (specviz/lessons/experiments.py), the first the home page
    st.Page(p.path, title=p.title, icon=p.icon, default=i == 0) for i, p in enumerate(experiments.PAGES)
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
