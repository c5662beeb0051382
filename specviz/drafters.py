"""Drafters propose gamma tokens; the target verifies them.

Two kinds behind one small protocol:
- ModelDrafter: a small causal LM, sampled with the same transform as the target (q = its probabilities).
- NgramDrafter: prompt lookup, no model. Copies what followed the last occurrence of the current
  suffix; its q is a point mass, q(d) = 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from transformers import LogitsProcessorList

from .kvcache import CachedModel
from .sampling import probabilities, sample


@dataclass(frozen=True)
class Draft:
    ids: list[int]
    q: torch.Tensor | None   # [len(ids), V] draft probabilities; None for a point-mass drafter
    forwards: int            # model forward passes spent


class Drafter(Protocol):
    name: str

    @property
    def cache_length(self) -> int: ...

    def prefill(self, ids: list[int]) -> None: ...

    def propose(self, committed: list[int], gamma: int, warpers: LogitsProcessorList,
                generator: torch.Generator | None, greedy: bool, confidence: float) -> Draft: ...

    def rollback(self, committed: list[int]) -> None: ...


class ModelDrafter:
    """Per-run drafting state around a shared draft model."""
    name = "model"

    def __init__(self, model, vocab_width: int):
        self.state = CachedModel(model, vocab_width)

    @property
    def cache_length(self) -> int:
        return self.state.length

    def prefill(self, ids: list[int]) -> None:
        if ids:
            self.state.feed(ids)

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        # Autoregressive: q_i = transform(draft logits | x, d_1..d_{i-1}); d_i ~ q_i.
        logits = self.state.feed(self.state.pending(committed))
        ids: list[int] = []
        rows: list[torch.Tensor] = []
        forwards = 1
        for i in range(gamma):
            q = probabilities(logits, warpers)                      # [1, V]
            token = int(sample(q, generator, greedy)[0])
            ids.append(token)
            rows.append(q[0])
            # Stop early when the draft itself is unsure: its tokens would mostly be rejected.
            if i == gamma - 1 or (confidence > 0 and float(q.max()) < confidence):
                break
            logits = self.state.feed([token])
            forwards += 1
        return Draft(ids, torch.stack(rows), forwards)

    def rollback(self, committed: list[int]) -> None:
        self.state.rollback(committed)


class NgramDrafter:
    """Prompt lookup decoding (Saxena 2023): match the last n tokens earlier in the text, copy what followed."""
    name = "ngram"

    def __init__(self, max_ngram: int = 3):
        self.max_ngram = max_ngram

    @property
    def cache_length(self) -> int:
        return 0  # no model, no cache

    def prefill(self, ids: list[int]) -> None:
        pass

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        return Draft(lookup_continuation(committed, gamma, self.max_ngram), None, 0)

    def rollback(self, committed: list[int]) -> None:
        pass


def lookup_continuation(ids: list[int], gamma: int, max_ngram: int) -> list[int]:
    """Longest suffix n-gram (n = max_ngram..1) that occurred before: return up to gamma tokens after its latest match."""
    for n in range(min(max_ngram, len(ids) - 1), 0, -1):
        suffix = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):  # latest earlier occurrence first
            if ids[start:start + n] == suffix:
                return ids[start + n:start + n + gamma]
    return []
