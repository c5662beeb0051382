"""An EAGLE-1-style head (Li et al. 2024, after SafeAILab/EAGLE's cnets1.py): a one-layer model that runs
autoregressively on the target's own features.

With f_t the target's final hidden state after x_t (the vector its LM head turns into x_{t+1}):

    f^_{t+1} = Layer(fc([emb(x_{t+1}), f_t]))         one decoder layer of the target's architecture (narrower MLP)
    q(x_{t+2}) = softmax(W_lm[S] f^_{t+1})            the target's frozen LM head, reduced vocabulary S

Unlike Medusa's heads it sees the tokens it guesses: each draft step feeds the token it just drew with the
feature it just predicted. It keeps a small KV cache of its own, over entries (x_{t+1}, f_t) for t = 1..T-1
built from the target's true features; its guesses' entries are dropped at every rollback and rebuilt from the
true features the verify computed.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache, Qwen2Config, Qwen2Model

EAGLE_INTERMEDIATE = 2048  # the head's MLP width (the target's own is 8960 for the built-in pair)


def head_config(target_config, intermediate: int) -> Qwen2Config:
    """One Qwen2 decoder layer shaped like the target's (width, attention heads, rotary settings)."""
    text = target_config.get_text_config()
    extra = {}
    if getattr(text, "rope_parameters", None):
        extra["rope_parameters"] = dict(text.rope_parameters)
    return Qwen2Config(
        vocab_size=1,  # inputs are given as vectors: the layer's own embedding is never used
        hidden_size=text.hidden_size,
        intermediate_size=intermediate,
        num_hidden_layers=1,
        num_attention_heads=text.num_attention_heads,
        num_key_value_heads=getattr(text, "num_key_value_heads", text.num_attention_heads),
        max_position_embeddings=getattr(text, "max_position_embeddings", 4096),
        rms_norm_eps=getattr(text, "rms_norm_eps", 1e-6),
        tie_word_embeddings=False,
        **extra,
    )


class EagleHead(nn.Module):
    def __init__(self, config: Qwen2Config, lm_rows: torch.Tensor, token_ids: torch.Tensor, vocab_width: int):
        super().__init__()
        hidden = config.hidden_size
        if lm_rows.shape != (len(token_ids), hidden):
            raise ValueError(f"LM head rows {tuple(lm_rows.shape)} do not match {len(token_ids)} ids x {hidden}")
        self.fc = nn.Linear(2 * hidden, hidden)
        self.layer = Qwen2Model(config)
        self.register_buffer("lm_rows", lm_rows.detach().clone())
        self.register_buffer("token_ids", token_ids.detach().clone().long())
        self.vocab_width = vocab_width

    def forward(self, embeds: torch.Tensor, features: torch.Tensor, cache: DynamicCache | None = None) -> torch.Tensor:
        """[B, n, H] token embeddings and features -> [B, n, H] predicted next features (causal over n)."""
        inputs = self.fc(torch.cat([embeds, features], dim=-1))
        return self.layer(inputs_embeds=inputs, cache=cache, use_cache=cache is not None).last_hidden_state

    def reduced_logits(self, features: torch.Tensor) -> torch.Tensor:
        return features @ self.lm_rows.T

    def full_logits(self, feature: torch.Tensor) -> torch.Tensor:
        """[H] -> [1, V] logits on the target's ids, -inf outside the reduced vocabulary."""
        full = feature.new_full((1, self.vocab_width), float("-inf"))
        full[0, self.token_ids] = self.reduced_logits(feature)
        return full
