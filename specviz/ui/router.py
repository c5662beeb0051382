"""Routing: app.py is the router; every page makes sure it runs under it."""

from __future__ import annotations

import streamlit as st

from specviz import ROOT

ROUTER_KEY = "router.running"  # set by app.py while it runs a page


def page_guard() -> None:
    """Every page calls this first, so that it always runs under app.py's router.

    A Streamlit server that sees a pages/ folder starts in its old multipage mode, which executes a page
    file directly, without app.py (no sidebar, no style): on a fresh server when the first URL is a page's,
    and in AppTest. Then run the router here, in this same script run (widget clicks stay), switch the
    server to st.navigation for later runs, and stop: the router has drawn the page.
    """
    if st.session_state.get(ROUTER_KEY):
        return
    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
    except (ImportError, AttributeError):
        pass
    import runpy

    runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    st.stop()
