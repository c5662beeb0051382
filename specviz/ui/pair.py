"""The model pair: one background loader per pair, shared by all sessions; its status in the sidebar."""
from __future__ import annotations

import os
import time

import streamlit as st

from .. import markup
from ..jobs import PairLoader
from ..models import PairSpec
from .safe import safe
from .state import Settings, key


def pair_override() -> str:
    """SPECVIZ_PAIR=tiny makes every loader return the tiny random pair (tests, quick demos)."""
    return os.environ.get("SPECVIZ_PAIR", "").strip().lower()


@st.cache_resource(show_spinner=False, max_entries=2)
def _loader(target: str, draft: str | None, device: str, quantize: bool | None, trust: bool,
            override: str) -> PairLoader:
    return PairLoader(PairSpec(target, draft, device, quantize, trust), override)


def _loader_args(spec: PairSpec) -> tuple:
    return spec.target, spec.draft, spec.device, spec.quantize_draft, spec.trust_remote_code, pair_override()


def pair_loader(spec: PairSpec) -> PairLoader:
    """The (started) loader for this spec; a failed one is dropped by retry_pair so that the next call tries again."""
    return _loader(*_loader_args(spec))


def retry_pair(spec: PairSpec) -> None:
    _loader.clear(*_loader_args(spec))


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


def require_pair(settings: Settings):
    """The loaded pair, waiting for it with a progress bar; None (after an st.error) if it cannot load."""
    if not settings.has_pair:
        st.error("Choose a model pair in the sidebar first (custom pair: type its ids and press Load this pair).")
        return None
    loader = pair_loader(settings.spec)
    if loader.state == "loading":
        bar = st.progress(loader.fraction, text="Loading models…")
        while not loader.wait(0.25):
            seconds = time.monotonic() - loader.started
            bar.progress(loader.fraction, text=f"Loading models ({seconds:.0f} s): {loader.message}")
        bar.empty()
    if loader.state == "failed":
        st.error(f"The models could not be loaded: {loader.error} Change the pair in the sidebar, "
                 "or press Try again there.")
        return None
    return loader.pair
