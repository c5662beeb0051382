"""The EAGLE drafter: the head run autoregressively on the target's features, its own small KV cache, and leaves
beside its chain as a token tree (the head: eagle_head.py)."""

from __future__ import annotations

import torch
from transformers import DynamicCache, LogitsProcessorList

from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft
from specviz.decoding.sampling import probabilities, sample
from specviz.decoding.tree import build_tree

from .eagle_head import EagleHead
from .heads import HeadDrafter


class EagleDrafter(HeadDrafter):
    """Per-run state of an EAGLE head: its cache over true entries, and the feature it predicts next."""

    name = "eagle"
    title = "EAGLE head"
    label = "EAGLE"
    description = "an EAGLE-1 head run on the target's own features, no second model (train it first)"
    draft_passes = "per token"
    cache_lag = 1  # it holds one entry per committed token but the newest two before round 0
    leaves_beside_chain = True
    cache_note = (
        "the EAGLE head keeps a small cache of its own, over the target's features; its guesses' entries are "
        "rebuilt from the true features after each verify"
    )
    keeps_cache = True

    def __init__(
        self, head: EagleHead, target: CachedModel, stop_ids: frozenset[int] = frozenset(), tree_width: int = 1
    ):
        super().__init__(head, target, stop_ids, tree_width)
        self.head = head
        self.embedding = target.model.get_input_embeddings()
        self.cache = DynamicCache()
        self.entries: list[int] = []  # entry t (0-based): the token x_{t+2} fed with the true feature f_{t+1}
        self.next_feature: torch.Tensor | None = None  # f^ after the last true entry

    @property
    def cache_length(self) -> int:
        return len(self.entries)

    def prefill(self, ids: list[int]) -> None:
        self._catch_up(ids)

    @torch.inference_mode()
    def _catch_up(self, committed: list[int]) -> None:
        """Feed the entries (x_{t+1}, f_t) the cache lacks, t up to T - 1, from the target's last forward."""
        guessed = self.cache.get_seq_length() - len(self.entries)
        if guessed > 0:  # drop the draft steps' entries: their features were guesses (crop takes minus a count)
            self.cache.crop(-guessed)
        start, end = len(self.entries), len(committed) - 1
        if start >= end:
            return
        features = [self.target.state_at(committed, t) for t in range(start, end)]
        if any(f is None for f in features):  # not from the last forward (cannot happen in the engine's order)
            self.cache, self.entries, self.next_feature = DynamicCache(), [], None
            return
        tokens = committed[start + 1 : end + 1]
        ids = torch.tensor([tokens], device=self.embedding.weight.device)
        dtype = self.head.lm_rows.dtype
        out = self.head(self.embedding(ids).to(dtype), torch.stack(features)[None].to(dtype), self.cache)
        self.entries.extend(tokens)
        self.next_feature = out[0, -1]

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
        # d_1 ~ q(. | f^_T); then f^_{T+k} = head(emb(d_k), f^_{T+k-1}) and d_{k+1} ~ q(. | f^_{T+k}): autoregressive,
        # each d_k drawn from the q it is recorded with.
        self._catch_up(committed)
        if self.next_feature is None or len(self.entries) != len(committed) - 1:
            return Draft([], None, 0)
        feature, ids, rows, forwards = self.next_feature, [], [], 0
        while True:
            q = probabilities(self.head.full_logits(feature), warpers)
            token = int(sample(q, generator, greedy)[0])
            ids.append(token)
            rows.append(q[0])
            if len(ids) == gamma or token in self.stop_ids or (confidence > 0 and float(q.max()) < confidence):
                break
            embed = self.embedding(torch.tensor([[token]], device=self.embedding.weight.device))
            feature = self.head(embed.to(feature.dtype), feature[None, None], self.cache)[0, -1]
            forwards += 1
        # The tree: other candidates of each step's q beside the chain's token, as leaves (their children would need
        # head passes of their own: q here depends on the path above).
        q_rows = torch.stack(rows)
        tree = build_tree(
            q_rows,
            ids,
            width=self.tree_width,
            budget=len(ids) * (self.tree_width - 1),
            siblings_only=True,
            greedy=greedy,
            generator=generator,
        )
        return Draft(ids, q_rows, forwards + 1, tree=tree)

    def rollback(self, committed: list[int]) -> None:
        self._catch_up(committed)
