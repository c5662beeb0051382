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
