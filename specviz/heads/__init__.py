"""Draft heads on the target itself (Medusa-1): the module, its training, its file, and the per-target registry."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .medusa import MedusaDrafter, MedusaHeads
from .store import HeadsError, load_heads

__all__ = ["HeadsError", "MedusaDrafter", "MedusaHeads", "forget_heads", "heads_for", "use_heads"]

_LOADED: "weakref.WeakKeyDictionary[Any, MedusaHeads]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def heads_for(target: Any, vocab_width: int) -> MedusaHeads:
    """The Medusa heads of this target model: loaded once from the model cache (checked), then kept beside it."""
    with _LOCK:
        if target not in _LOADED:
            heads, _ = load_heads(target, vocab_width)
            _LOADED[target] = heads.to(target.get_input_embeddings().weight.device)
        return _LOADED[target]


def use_heads(target: Any, heads: MedusaHeads) -> None:
    """Heads just trained (or built by a test) serve this target from now on."""
    with _LOCK:
        _LOADED[target] = heads


def forget_heads(target: Any) -> None:
    with _LOCK:
        _LOADED.pop(target, None)
