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
from transformers import DynamicCache, LogitsProcessorList, Qwen2Config, Qwen2Model

from ..drafters import Draft
from ..kvcache import CachedModel
from ..sampling import probabilities, sample
from ..tree import build_tree

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


class EagleDrafter:
    """Per-run state of an EAGLE head: its cache over true entries, and the feature it predicts next."""

    name = "eagle"

    def __init__(
        self, head: EagleHead, target: CachedModel, stop_ids: frozenset[int] = frozenset(), tree_width: int = 1
    ):
        if not target.keep_hidden:
            raise ValueError("the EAGLE head reads the target's hidden states: make its CachedModel with keep_hidden")
        self.head = head
        self.target = target
        self.stop_ids = stop_ids
        self.tree_width = tree_width  # candidates per position; above 1, the draft is a token tree (tree.py)
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
