"""A model plus its per-run KV cache: feed new tokens, get logits, roll back to a committed prefix."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache


@dataclass
class CachedModel:
    """Per-run state for one model (never stored on the shared model itself).

    `ids` are the tokens whose keys and values are in `cache`, in order.
    """
    model: Any
    vocab_width: int                    # logits are padded to the pair's common width
    cache: DynamicCache = field(default_factory=DynamicCache)
    ids: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.ids)

    @torch.inference_mode()
    def feed(self, new_ids: list[int], logits_to_keep: int = 1) -> torch.Tensor:
        """Append new_ids to the cache; return the logits of the last `logits_to_keep` positions, [k, V]."""
        device = self.model.device
        input_ids = torch.tensor([new_ids], dtype=torch.long, device=device)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=logits_to_keep)
        self.ids.extend(new_ids)
        logits = out.logits[0, -logits_to_keep:]
        if logits.shape[-1] < self.vocab_width:  # a smaller head than the partner: its missing ids have p or q = 0
            logits = F.pad(logits, (0, self.vocab_width - logits.shape[-1]), value=float("-inf"))
        return logits

    def rollback(self, committed: list[int]) -> None:
        """Keep the longest prefix of the cache that agrees with the committed tokens (DynamicCache.crop),
        minus the newest committed token: the next forward needs its logits, so it is always fed again."""
        keep = 0
        limit = min(len(self.ids), len(committed) - 1)
        while keep < limit and self.ids[keep] == committed[keep]:
            keep += 1
        if keep < len(self.ids):
            self.cache.crop(keep - len(self.ids))  # this transformers takes minus the count to remove
            del self.ids[keep:]

    def pending(self, committed: list[int]) -> list[int]:
        """Committed tokens not yet in the cache (call after rollback)."""
        return committed[len(self.ids):]
