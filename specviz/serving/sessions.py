"""What one browser session's runs learn from and teach: its traffic stores and its trained heads.

On a shared server one visitor's requests must never reach another's screen: a traffic draft shows the tokens it
copied, and a faster answer tells that someone asked the same. So by default each session drafts from its own
requests only (a store per tokenizer, kept in memory, gone with the session) and keeps the heads it trained to
itself; the server's process-wide store (drafters/traffic.py, traffic_store) and the heads every session drafts
with (drafters/heads.py) are used only where whoever started the server shares them (ui/server.py decides, from
the switches and the address). docs/DESIGN.md, "A shared server".
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from specviz.drafters.heads import use_heads
from specviz.drafters.suffix import TrafficStore
from specviz.drafters.traffic import forget, store_key, traffic_store

SESSION_REQUESTS = 64  # a session's own store: its LRU caps (the shared one holds 256 requests, 200,000 tokens)
SESSION_TOKENS = 50_000


@dataclass
class SessionLearning:
    """One browser session's traffic and heads, or the server's shared ones where sharing is on."""

    share_traffic: bool = False
    share_heads: bool = False
    stores: dict[str, TrafficStore] = field(default_factory=dict)  # store_key(pair) -> this session's store
    heads: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)  # target -> kind -> heads
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def traffic(self, pair) -> TrafficStore:
        """The store this session's runs on `pair` draft from and join."""
        if self.share_traffic:
            return traffic_store(pair)
        with self.guard:
            return self.stores.setdefault(store_key(pair), TrafficStore(SESSION_REQUESTS, SESSION_TOKENS))

    def forget_traffic(self, pair) -> None:
        """Empty what this session may read: its own store, or the shared one (and its file) where it is shared."""
        forget(pair, None if self.share_traffic else self.traffic(pair))

    def trained_heads(self, pair) -> dict[str, Any] | None:
        """The heads this session trained for the pair's target, by kind (None where heads are shared: the
        target's own serve every session)."""
        if self.share_heads:
            return None
        with self.guard:
            return dict(self.heads.get(pair.target, {}))

    def keep_heads(self, pair, kind: str, heads: Any) -> None:
        """A training's heads: this session drafts with them from now on (every session, where heads are shared)."""
        if self.share_heads:
            use_heads(pair.target, heads)
            return
        with self.guard:
            self.heads.setdefault(pair.target, {})[kind] = heads
