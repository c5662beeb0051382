"""The trained draft heads each target drafts with (Medusa-1 heads, an EAGLE-1 head): loaded once from the model
cache and checked (heads_file.py), or set by a training (use_heads)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from specviz.decoding.costs import RoundCost
from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import DraftContext

from .eagle_head import EagleHead
from .heads_file import Heads, HeadsError, kind_of, load_heads
from .medusa_heads import MedusaHeads

__all__ = ["EagleHead", "HeadsError", "MedusaHeads", "forget_heads", "heads_for", "use_heads"]


class HeadDrafter:
    """What the heads' drafters share: capabilities, and per run this target's trained heads (checked when first
    loaded) with, under alternatives, that many more candidates per position."""

    needs_draft_model = False
    needs_hidden_states = True
    point_mass = False
    drafts_tree = True
    learns = False
    sources: tuple[str, ...] = ()
    model_sources: tuple[str, ...] = ()
    cache_lag = 0
    leaves_beside_chain = False
    reads_ngram_size = False
    name: str
    title: str
    label: str
    description: str
    draft_passes: str
    cache_note: str

    def __init__(self, heads: Any, target: CachedModel, stop_ids: frozenset[int] = frozenset(), tree_width: int = 1):
        if not target.keep_hidden:
            raise ValueError(
                f"the {self.title} reads the target's hidden states: make its CachedModel with keep_hidden"
            )
        self.target = target
        self.stop_ids = stop_ids
        self.tree_width = tree_width  # candidates per position; above 1, the draft is a token tree (tree.py)

    @classmethod
    def for_run(cls, context: DraftContext) -> HeadDrafter:
        tree_width = 1 + context.config.alternatives if context.target.can_branch else 1
        heads = (context.heads or {}).get(cls.name) or heads_for(context.pair.target, context.width, cls.name)
        return cls(heads, context.target, context.pair.eos_ids, tree_width=tree_width)

    def learn(self, cost: RoundCost) -> None:
        pass


_LOADED: "weakref.WeakKeyDictionary[Any, dict[str, Heads]]" = weakref.WeakKeyDictionary()  # target -> kind -> heads
_LOCK = threading.Lock()


def heads_for(target: Any, vocab_width: int, kind: str = "medusa") -> Heads:
    """This target's heads of `kind`: loaded once from the model cache (checked), then kept beside it."""
    with _LOCK:
        loaded = _LOADED.setdefault(target, {})
        if kind not in loaded:
            heads, _ = load_heads(target, vocab_width, kind=kind)
            loaded[kind] = heads.to(target.get_input_embeddings().weight.device)
        return loaded[kind]


def use_heads(target: Any, heads: Heads) -> None:
    """Heads just trained (or built by a test) serve this target from now on."""
    with _LOCK:
        _LOADED.setdefault(target, {})[kind_of(heads)] = heads


def forget_heads(target: Any) -> None:
    with _LOCK:
        _LOADED.pop(target, None)
