"""What this server lets a browser user do. The person who starts the server decides, never a widget:

- custom model pairs (typed paths or hub ids) are open while the server listens on a loopback address only
  (localhost, 127.x, ::1), and on any other address (an empty one and 0.0.0.0 included) only with
  SPECVIZ_ALLOW_CUSTOM_MODELS=1; a path typed while they are off is never touched;
- a model's own code runs only when the server was started with SPECVIZ_TRUST_REMOTE_CODE=1;
- one session's traffic store and trained heads are every session's only where the server shares them:
  SPECVIZ_SHARED_TRAFFIC and SPECVIZ_SHARED_HEADS, on by default on a loopback address only (serving/sessions.py).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable

import streamlit as st

from specviz.drafters.traffic import PERSIST_ENV
from specviz.markup import code
from specviz.models.loading import TRUST_REMOTE_CODE_ENV, PairSpec, allow_remote_code
from specviz.serving.sessions import SessionLearning

ALLOW_CUSTOM_ENV = "SPECVIZ_ALLOW_CUSTOM_MODELS"
SHARED_TRAFFIC_ENV = "SPECVIZ_SHARED_TRAFFIC"
SHARED_HEADS_ENV = "SPECVIZ_SHARED_HEADS"
YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def is_loopback(address: str) -> bool:
    """True for an address only this machine can reach; an empty address or 0.0.0.0 listens everywhere."""
    host = address.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_address() -> str:
    return str(st.get_option("server.address") or "")


def custom_models_allowed() -> bool:
    """Loopback only, or the server's own opt-in (the same spellings as SPECVIZ_TRUST_REMOTE_CODE)."""
    opt_in = os.environ.get(ALLOW_CUSTOM_ENV, "").strip().lower() in YES
    return is_loopback(server_address()) or opt_in


def shared(env: str) -> bool:
    """A sharing switch: "1" shares, "0" keeps each session's to itself, unset shares on a loopback address only
    (one person's machine), never on an exposed one."""
    value = os.environ.get(env, "").strip().lower()
    return value in YES or (value not in NO and is_loopback(server_address()))


def bounded() -> bool:
    """Whether runs have a budget per visitor (serving/budgets.py): on an exposed server, never on a loopback one."""
    return not is_loopback(server_address())


def session_alive() -> Callable[[], bool] | None:
    """Whether this browser session is still connected, asked from a run's thread (a closed tab stops its run);
    None where no server runs the script (AppTest)."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    if ctx is None or not runtime.exists():
        return None
    instance, session = runtime.get_instance(), ctx.session_id
    return lambda: instance.is_active_session(session)


UNKNOWN_VISITOR = "address unknown"  # every visitor whose address the server is not told: one visitor


def visitor_of(address: str | None) -> str:
    """Whom a run is for, as the device's turns tell visitors apart (runs.DeviceLock): the browser's address, so
    that several tabs or pages of one machine are one visitor. Streamlit gives no address for a loopback connection
    (localhost, an SSH tunnel, a proxy on the same host without X-Forwarded-For): all of those are one visitor, whose
    runs go in the order asked. (One visitor per browser session let a new tab, never served, go before a visitor
    already waiting.) Behind a proxy or a shared NAT every visitor has the proxy's address: one visitor too."""
    return f"address {address}" if address else UNKNOWN_VISITOR


def visitor() -> str:
    """This session's visitor (visitor_of its browser's address)."""
    return visitor_of(st.context.ip_address)


def session_learning() -> SessionLearning:
    """This browser session's traffic and heads (kept in its state, gone with it), under the server's switches."""
    found = st.session_state.get("state.session_learning")
    if not isinstance(found, SessionLearning):
        found = SessionLearning()
        st.session_state["state.session_learning"] = found
    found.share_traffic, found.share_heads = shared(SHARED_TRAFFIC_ENV), shared(SHARED_HEADS_ENV)
    return found


def remote_code_allowed() -> bool:
    """As models.load_pair decides it: the widgets never set PairSpec.trust_remote_code."""
    return allow_remote_code(PairSpec())


def _listening_on() -> str:
    address = server_address()
    return code(address) if address else "every address"


def custom_models_note() -> str:
    """Markdown: whether custom pairs are allowed here, why, and how to allow them."""
    switch = code(f"{ALLOW_CUSTOM_ENV}=1")
    if is_loopback(server_address()):
        return (
            f"Custom model pairs: allowed, because this server listens on {_listening_on()} only. "
            f"On any other address they are off unless it is started with {switch}."
        )
    if custom_models_allowed():
        return f"Custom model pairs: allowed on this exposed server ({switch} at its start)."
    return (
        f"Custom model pairs are off on this server: it listens on {_listening_on()}, where a typed path "
        f"would let anyone probe its files. Whoever starts it can allow them with {switch}, or run it on "
        f"localhost."
    )


def remote_code_note() -> str:
    """Markdown: whether a model's own code may run here, and how to change it."""
    switch = code(f"{TRUST_REMOTE_CODE_ENV}=1")
    if remote_code_allowed():
        return (
            f"Remote code: on ({switch} at server start): Python code shipped with a model repository runs "
            "on this machine. Restart the server without it to turn it off."
        )
    return (
        "Remote code: off. A model whose repository ships its own Python code does not load; whoever starts "
        f"the server can allow it with {switch}."
    )


SHARED_DRAFTS_WORDS = (
    "Traffic is shared on this server: anyone's requests can show up in anyone's drafts (the traffic drafter and "
    "the controller copy earlier requests and answers, of every visitor)."
)


def shared_drafts_note() -> None:
    """Beside drafts on every page that shows them, where the server shares its traffic store: one caption (the
    sidebar's "Device and loading" section, collapsed, is not where a reader of the drafts looks)."""
    if session_learning().share_traffic:
        st.caption(SHARED_DRAFTS_WORDS)


def sharing_note() -> str:
    """Markdown: whose requests a traffic draft reads, whose trained heads a run drafts with, how to change it."""
    learning = session_learning()  # this session's, with the switches read again
    words = []
    for on, env, what, mine, everyone in (
        (
            learning.share_traffic,
            SHARED_TRAFFIC_ENV,
            "Traffic",
            "private: the traffic drafters read only your own requests",
            "shared by every visitor: anyone's requests can show up in anyone's drafts",
        ),
        (
            learning.share_heads,
            SHARED_HEADS_ENV,
            "Trained heads",
            "private: heads you train serve only you",
            "shared: a training by any visitor replaces the heads everyone drafts with",
        ),
    ):
        if on:
            words.append(f"{what}: {everyone} ({code(f'{env}=0')} at server start keeps them apart).")
        else:
            words.append(f"{what}: {mine} ({code(f'{env}=1')} at server start shares them).")
    words.append(_persistence_words(learning.share_traffic))
    words.append(_bounds_words())
    return "  \n".join(words)


def _persistence_words(shared_traffic: bool) -> str:
    switch = code(f"{PERSIST_ENV}=1")
    if os.environ.get(PERSIST_ENV) != "1":
        return f"Saved traffic: none; every store goes with the server ({switch} at its start saves the shared one)."
    if shared_traffic:
        return f"Saved traffic: the shared store is kept in the model cache across restarts ({switch} at server start)."
    return f"Saved traffic: none for you, a tab's own store is never saved (only the shared one is, with {switch})."


def _bounds_words() -> str:
    if bounded():
        return (
            f"Runs: bounded per run (each page states its bound), and visitors take turns on the device, because this "
            f"server listens on {_listening_on()}."
        )
    return f"Runs: unbounded, because this server listens on {_listening_on()} only."
