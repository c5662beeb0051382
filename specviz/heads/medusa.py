"""Medusa-1 heads (Cai et al. 2024): extra decoding heads on the target's own last hidden state.

Head k (k = 1..K) reads h_t, the target's final hidden state at position t (the one its LM head turns into
x_{t+1}), and guesses x_{t+k+1}:

    logits_k = W_lm[S] (h_t + SiLU(A_k h_t + b_k))      A_k zero-initialised: an untrained head is the LM head

W_lm is the target's LM head, frozen and shared; only the rows of S, the tokens the training data's labels use (a
reduced output vocabulary, as EAGLE-3 does), are kept, so a head costs K small matmuls instead of a pass over the
target's 151,936 rows. Mapped back to the target's ids, q_k is 0 outside S: speculative sampling is exact for any
q, so this only costs acceptance when the next token lies outside S.

In the engine the newest committed token x_T was decided by the last verify from h_{T-1}, so the heads read
h_{T-1} and head k proposes d_k = x_{T+k}: the whole draft from one cheap pass, no second model, no draft cache.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LogitsProcessorList

from ..drafters import Draft
from ..kvcache import CachedModel
from ..sampling import probabilities, sample
from ..tree import build_tree

MEDUSA_DECAY = 0.8  # loss weight of head k: 0.8^k (the Medusa paper's lambda_k)


class MedusaHeads(nn.Module):
    """K residual blocks and the target's LM head rows for the reduced vocabulary `token_ids`."""

    def __init__(self, hidden: int, count: int, lm_rows: torch.Tensor, token_ids: torch.Tensor, vocab_width: int):
        super().__init__()
        if lm_rows.shape != (len(token_ids), hidden):
            raise ValueError(f"LM head rows {tuple(lm_rows.shape)} do not match {len(token_ids)} ids x {hidden}")
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(count))
        for block in self.blocks:  # h + SiLU(0 h + 0) = h: each head starts as the target's own LM head
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)
        self.register_buffer("lm_rows", lm_rows.detach().clone())  # frozen: a buffer, not a parameter
        self.register_buffer("token_ids", token_ids.detach().clone().long())
        self.vocab_width = vocab_width

    @property
    def count(self) -> int:
        return len(self.blocks)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] hidden states -> [..., K, |S|] logits over the reduced vocabulary, one row per head."""
        residual = torch.stack([hidden + F.silu(block(hidden)) for block in self.blocks], dim=-2)
        return residual @ self.lm_rows.T

    def full_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[H] -> [K, V]: the heads' logits on the target's ids, -inf (probability 0) outside the reduced vocabulary."""
        reduced = self.forward(hidden)
        full = reduced.new_full((self.count, self.vocab_width), float("-inf"))
        full[:, self.token_ids] = reduced
        return full


class MedusaDrafter:
    """Drafts with Medusa heads from the run's target: needs the target's CachedModel with keep_hidden on."""

    name = "medusa"

    def __init__(
        self, heads: MedusaHeads, target: CachedModel, stop_ids: frozenset[int] = frozenset(), tree_width: int = 1
    ):
        if not target.keep_hidden:
            raise ValueError("Medusa heads read the target's hidden states: make its CachedModel with keep_hidden")
        self.heads = heads
        self.target = target
        self.stop_ids = stop_ids
        self.tree_width = tree_width  # candidates per position; above 1, the draft is a token tree (tree.py)

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
