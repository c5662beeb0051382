"""The device's turns hold when the visitor's address is unknown (issue 56).

Streamlit gives no address for a loopback connection (an SSH tunnel, a proxy on the same host without
X-Forwarded-For). Visitor B, served once before, waits behind A's run; A then opens two more tabs and runs in each.
B must go next: a new tab never goes first. The lock is used directly, with threads and fake work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from specviz.runs import VISITOR, DeviceLock
from specviz.ui.server import UNKNOWN_VISITOR, visitor_of


def finishing_order(identity: Callable[[str | None, str], str]) -> list[str]:
    """Who finished in what order after B's earlier run: A1 holds the device, B asks, then A2 and A3 (new tabs);
    `identity(address, tab)` is whom the lock sees for that browser tab (every address unknown here)."""
    lock, order, hold = DeviceLock(), [], threading.Event()

    def run(tab: str, visitor: str) -> None:
        VISITOR.set(visitor)  # as a job's worker does
        with lock:
            order.append(tab)
            if tab == "A1":
                hold.wait(10)

    def start(tab: str) -> threading.Thread:
        thread = threading.Thread(target=run, args=(tab, identity(None, tab[0] if tab[0] == "B" else tab)))
        thread.start()
        return thread

    start("B0").join(10)  # B's earlier run: B has been served once
    threads = [start("A1")]
    while order != ["B0", "A1"]:
        time.sleep(0.005)
    for tab in ("B1", "A2", "A3"):  # each asks in this order, while A1 holds the device
        waiting = len(lock._waiting)
        threads.append(start(tab))
        while len(lock._waiting) == waiting:
            time.sleep(0.005)
    hold.set()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    return order[1:]


def test_unknown_addresses_are_one_visitor_whose_runs_go_in_the_order_asked():
    assert visitor_of(None) == visitor_of("") == UNKNOWN_VISITOR
    assert visitor_of("10.0.0.7") == "address 10.0.0.7" != visitor_of("10.0.0.8")
    assert finishing_order(lambda address, tab: visitor_of(address)) == ["A1", "B1", "A2", "A3"]


def test_one_visitor_per_tab_let_new_tabs_jump_ahead():
    """The negative control: the old identity (one visitor per browser session) finishes B last, as observed."""
    assert finishing_order(lambda address, tab: f"session {tab}") == ["A1", "A2", "A3", "B1"]


def test_known_addresses_still_alternate():
    """Where the addresses are known, A's new tabs are A: B, waiting, still goes before them."""
    assert finishing_order(lambda address, tab: visitor_of(f"10.0.0.{1 if tab[0] == 'A' else 2}")) == [
        "A1",
        "B1",
        "A2",
        "A3",
    ]
