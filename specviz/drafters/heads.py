"""The trained draft heads each target drafts with (Medusa-1 heads, an EAGLE-1 head): loaded once from the model
cache and checked (heads_file.py), or set by a training (use_heads)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .eagle_head import EagleHead
from .heads_file import Heads, HeadsError, kind_of, load_heads
from .medusa_heads import MedusaHeads

__all__ = ["EagleHead", "HeadsError", "MedusaHeads", "forget_heads", "heads_for", "use_heads"]

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
