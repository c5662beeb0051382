"""Prompt lookup decoding (Saxena 2023), no model: copy what followed the last occurrence of the current suffix.
Its q is a point mass, q(d) = 1."""

from __future__ import annotations

from specviz.decoding.costs import RoundCost
from specviz.decoding.proposal import Draft, DraftContext


class NgramDrafter:
    """Prompt lookup decoding (Saxena 2023): match the last n tokens earlier in the text, copy what followed."""

    name = "ngram"
    title = "n-gram lookup"
    label = "n-gram lookup"
    description = (
        "copies what followed the last occurrence of the current text (prompt lookup): no model, q is a point mass"
    )
    draft_passes = "none"
    model_sources: tuple[str, ...] = ()
    cache_lag = 0
    leaves_beside_chain = False
    reads_ngram_size = True
    cache_note = "the n-gram drafter has no model and no cache"
    needs_draft_model = False
    needs_hidden_states = False
    point_mass = True
    drafts_tree = False
    keeps_cache = False
    learns = False
    sources: tuple[str, ...] = ()

    def __init__(self, max_ngram: int = 3, stop_ids: frozenset[int] = frozenset()):
        self.max_ngram = max_ngram
        self.stop_ids = stop_ids

    @classmethod
    def for_run(cls, context: DraftContext) -> NgramDrafter:
        return cls(context.config.ngram_size, context.pair.eos_ids)

    @property
    def cache_length(self) -> int:
        return 0  # no model, no cache

    def prefill(self, ids: list[int]) -> None:
        pass

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        ids = lookup_continuation(committed, gamma, self.max_ngram)
        end = next((i + 1 for i, token in enumerate(ids) if token in self.stop_ids), len(ids))
        return Draft(ids[:end], None, 0)  # up to and including an end-of-sequence token

    def rollback(self, committed: list[int]) -> None:
        pass

    def learn(self, cost: RoundCost) -> None:
        pass


def lookup_continuation(ids: list[int], gamma: int, max_ngram: int) -> list[int]:
    """Longest suffix n-gram (n = max_ngram..1) that occurred before: up to gamma tokens after its latest match."""
    for n in range(min(max_ngram, len(ids) - 1), 0, -1):
        suffix = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):  # latest earlier occurrence first
            if ids[start : start + n] == suffix:
                return ids[start + n : start + n + gamma]
    return []
