"""The model pair: the loaders every session shares (serving/pairs.py), its status in the sidebar, a run's hold on it.

On an exposed server the owner's pairs load when the first visitor arrives and stay (ui/owner.py): a visitor picks
among them. On a loopback server the pair a session changes to replaces the loaded one (a switch: one job, in the
device's turn): it starts when this session's sidebar choice changes or a run needs it, never because another tab's
sidebar asks for something else.
"""

from __future__ import annotations

import os
import time

import streamlit as st

from specviz import markup
from specviz.models.loading import PairSpec
from specviz.serving.pairs import PAIRS, Lease, PairLoader, Refused

from .safe import safe
from .server import custom_models_allowed, visitor
from .state import Settings, key

ASKED = "state.pair_asked"  # the pair this session's sidebar asked for at its last run


def pair_override() -> str:
    """SPECVIZ_PAIR=tiny makes every loader return the tiny random pair (tests, quick demos)."""
    return os.environ.get("SPECVIZ_PAIR", "").strip().lower()


def pair_loader(spec: PairSpec, retry_failed: bool = False, start: bool = True) -> PairLoader | Refused | None:
    """This spec's loader, shared by every session (serving.pairs.PAIRS); with `start` a pair not held loads now, in
    this visitor's turn. A failed one stays failed until retry_pair, or until a run asks again (retry_failed)."""
    return PAIRS.loader(spec, pair_override(), retry_failed=retry_failed, start=start, visitor=visitor())


def retry_pair(spec: PairSpec) -> None:
    PAIRS.retry(spec, pair_override())


def hold_owned(owned: list[PairSpec]) -> None:
    """An exposed server: the owner's pairs stay whatever is asked, and load (each in its turn) if not yet held; no
    other pair loads unless the owner allows custom pairs."""
    PAIRS.pin(owned, pair_override(), only=not custom_models_allowed())
    for spec in owned:
        pair_loader(spec)


def _asked(spec: PairSpec) -> PairLoader | Refused | None:
    """A loopback server: this session's pair, switched to now if this session has just changed to it or nothing is
    held; None while another tab's pair is held and this session has not changed its choice."""
    PAIRS.pin(())
    before, st.session_state[ASKED] = st.session_state.get(ASKED), spec  # as asked: "auto" stays "auto"
    found = pair_loader(spec, start=False)
    if found is None and ((before is not None and before != spec) or not PAIRS.held()):
        found = pair_loader(spec)
    return found


def pair_status(spec: PairSpec, owned: list[PairSpec] | None = None) -> None:
    """The chosen pair's state in the sidebar. `owned`: an exposed server's pairs (None on a loopback server)."""
    if owned is not None:
        hold_owned(owned)
    loader = pair_loader(spec) if owned is not None else _asked(spec)
    if loader is None:
        _held_elsewhere(spec)
    elif loader.state == "loading":
        _loading_fragment(spec)
    elif loader.state == "ready":
        st.caption(f":material/check_circle: Ready: {markup.pair_caption(loader.pair.names)}")
        st.caption(held_words())
    else:
        st.error(f"The models could not be loaded: {loader.error}")
        st.button("Try again", key=key("cfg", "retry"), on_click=retry_pair, args=(spec,))


def held_words() -> str:
    """Markdown: the pairs this server holds in memory now, as their loads resolved them ("auto" is its precision)."""
    held = [(loader.spec, loader.pair) for loader in PAIRS.loaded() if loader.pair is not None]
    names = "; ".join(
        f"{markup.code(spec.target)} at {spec.precision if spec.device == 'cpu' else pair.names.get('dtype', 'auto')}"
        for spec, pair in held
    )
    return f"Held in memory now: {len(held)} {'pair' if len(held) == 1 else 'pairs'} ({names or 'none'})."


def _held_elsewhere(spec: PairSpec) -> None:
    """Another tab's pair is held: say which, and offer the switch (it replaces that pair)."""
    held = [loader.pair.names for loader in PAIRS.loaded() if loader.pair is not None]
    shown = "; ".join(markup.pair_caption(names) for names in held) or "another pair"
    st.caption(f"The server holds {shown}, chosen in another tab. Running here loads your choice in its place.")
    st.button("Load this pair instead", key=key("cfg", "switch"), on_click=pair_loader, args=(spec,))


@st.fragment(run_every=1.0)
@safe
def _loading_fragment(spec: PairSpec) -> None:
    """While the models load, refresh the progress every second; rerun the app once they are ready."""
    loader = pair_loader(spec, start=False)
    if loader is None or loader.state != "loading":
        st.rerun()
    seconds = time.monotonic() - loader.started
    st.progress(loader.fraction, text=f"Loading models ({seconds:.0f} s): {loader.message}")
    st.caption("Recorded runs and uploads replay right away; running needs the models.")


def require_pair(settings: Settings) -> Lease | None:
    """A hold on the loaded pair for one run (release it when the run ends), waiting for the models with a
    progress bar; None (after an st.error) if they cannot load. A pair that failed is tried again here, and on a
    loopback server a pair not held is switched to."""
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
    if lease is None:  # let go for another session's pair in the meantime
        st.error("The models were let go for another pair in the meantime: press the button again to reload them.")
    return lease
