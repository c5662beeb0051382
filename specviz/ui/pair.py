"""The model pair: one background loader per pair, shared by all sessions; its status in the sidebar."""

from __future__ import annotations

import os
import time

import streamlit as st

from specviz import markup
from specviz.models.loading import PairSpec
from specviz.serving.jobs import PAIRS, Lease, PairLoader

from .safe import safe
from .state import Settings, key


def pair_override() -> str:
    """SPECVIZ_PAIR=tiny makes every loader return the tiny random pair (tests, quick demos)."""
    return os.environ.get("SPECVIZ_PAIR", "").strip().lower()


def pair_loader(spec: PairSpec, retry_failed: bool = False) -> PairLoader:
    """The (started) loader for this spec, shared by every session (jobs.PAIRS). A failed one stays failed
    until retry_pair, or until a run asks again (retry_failed)."""
    return PAIRS.loader(spec, pair_override(), retry_failed=retry_failed)


def retry_pair(spec: PairSpec) -> None:
    PAIRS.retry(spec, pair_override())


def pair_status(spec: PairSpec) -> None:
    loader = pair_loader(spec)
    if loader.state == "loading":
        _loading_fragment(spec)
    elif loader.state == "ready":
        st.caption(f":material/check_circle: Ready: {markup.pair_caption(loader.pair.names)}")
    else:
        st.error(f"The models could not be loaded: {loader.error}")
        st.button("Try again", key=key("cfg", "retry"), on_click=retry_pair, args=(spec,))


@st.fragment(run_every=1.0)
@safe
def _loading_fragment(spec: PairSpec) -> None:
    """While the models load, refresh the progress every second; rerun the app once they are ready."""
    loader = pair_loader(spec)
    if loader.state != "loading":
        st.rerun()
    seconds = time.monotonic() - loader.started
    st.progress(loader.fraction, text=f"Loading models ({seconds:.0f} s): {loader.message}")
    st.caption("Recorded runs and uploads replay right away; running needs the models.")


def require_pair(settings: Settings) -> Lease | None:
    """A hold on the loaded pair for one run (release it when the run ends), waiting for the models with a
    progress bar; None (after an st.error) if they cannot load. A pair that failed is tried again here."""
    if not settings.has_pair:
        st.error("Choose a model pair in the sidebar first (custom pair: type its ids and press Load this pair).")
        return None
    loader = pair_loader(settings.spec, retry_failed=True)
    if loader.state == "loading":
        bar = st.progress(loader.fraction, text="Loading models…")
        while not loader.wait(0.25):
            seconds = time.monotonic() - loader.started
            bar.progress(loader.fraction, text=f"Loading models ({seconds:.0f} s): {loader.message}")
        bar.empty()
    if loader.state == "failed":
        st.error(
            f"The models could not be loaded: {loader.error} Change the pair in the sidebar, or press Try again there."
        )
        return None
    lease = PAIRS.lease(settings.spec, pair_override())
    if lease is None:  # unloaded for another session's pair in the meantime
        st.error("The models were unloaded to make room for another pair: press the button again to reload them.")
    return lease
