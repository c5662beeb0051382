"""The Medusa drafter: the whole draft from one pass of the heads over the target's last hidden state, and a token
tree of every head's ranks combined (the heads: medusa_heads.py)."""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList

from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft
from specviz.decoding.sampling import probabilities, sample
from specviz.decoding.tree import build_tree

from .heads import HeadDrafter
from .medusa_heads import MedusaHeads


class MedusaDrafter(HeadDrafter):
    """Drafts with Medusa heads from the run's target: needs the target's CachedModel with keep_hidden on."""

    name = "medusa"
    title = "Medusa heads"
    label = "Medusa"
    description = "Medusa-1 heads guess from the target's own hidden state, no second model (train them first)"
    draft_passes = "one"  # one pass of all its heads: at most as many tokens as heads
    cache_note = "Medusa's heads read the target's hidden state; no draft model, no cache"
    keeps_cache = False

    def __init__(
        self, heads: MedusaHeads, target: CachedModel, stop_ids: frozenset[int] = frozenset(), tree_width: int = 1
    ):
        super().__init__(heads, target, stop_ids, tree_width)
        self.heads = heads

    @property
    def cache_length(self) -> int:
        return 0  # the heads keep no cache: each draft reads one hidden state of the target

    def prefill(self, ids: list[int]) -> None:
        pass

    @torch.inference_mode()
    def propose(
        self,
        committed: list[int],
        gamma: int,
        warpers: LogitsProcessorList,
        generator: torch.Generator | None,
        greedy: bool,
        confidence: float,
    ) -> Draft:
        # d_k ~ q_k = transform(head_k(h_{T-1})), k = 1..min(gamma, K). q_k does not depend on d_<k (the heads
        # guess all positions at once); speculative sampling only needs each d_k drawn from the q_k it is
        # checked with, so the output is still exactly p's.
        hidden = self.target.hidden_before(committed)
        if hidden is None:  # the prompt went into the first verify (fuse_prompt): nothing to read yet
            return Draft([], None, 0)
        q = probabilities(self.heads.full_logits(hidden.to(self.heads.lm_rows.dtype)), warpers)  # [K, V]
        ids: list[int] = []
        for k in range(min(gamma, self.heads.count)):
            token = int(sample(q[k : k + 1], generator, greedy)[0])
            ids.append(token)
            if token in self.stop_ids or (confidence > 0 and float(q[k].max()) < confidence):
                break
        # The tree: other ranks of every head, combined (Medusa's candidate tree); q_k does not depend on the path
        # above, so a node off the chain may have children too. As many nodes off the chain as the chain has times
        # the width beyond it, the most likely by the heads' own probabilities.
        n = len(ids)
        tree = build_tree(
            q[:n],
            ids,
            width=self.tree_width,
            budget=n * (self.tree_width - 1),
            siblings_only=False,
            greedy=greedy,
            generator=generator,
        )
        return Draft(ids, q[:n], 1, tree=tree)

    def rollback(self, committed: list[int]) -> None:
        pass
