"""Drafters propose gamma tokens; the target verifies them.

Two kinds behind one small protocol:
- ModelDrafter: a small causal LM, sampled with the same transform as the target (q = its probabilities).
  With lookahead, prompt lookup guesses how the text goes on and one draft forward scores the guesses
  at once (staged speculation: the draft checks cheap guesses the way the target checks the draft).
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
class TreeNode:
    """An off-chain candidate of a tree draft (tree.py): its token and its parent node (-1: the root, the newest
    committed token; 0..n-1: the chain's d_1..d_n; n + j: the draft's tree[j], always before this one)."""

    token: int
    parent: int


@dataclass(frozen=True)
class Draft:
    ids: list[int]
    q: torch.Tensor | None  # [len(ids), V] draft probabilities; None for a point-mass drafter
    forwards: int  # model forward passes spent
    from_lookahead: tuple[bool, ...] = ()  # per token: its q row came from a forward over lookup guesses
    source: str = ""  # who drafted, for drafters that choose: "traffic", "model" or "both" (traffic.py)
    tree: tuple[TreeNode, ...] = ()  # off-chain candidates (draft heads): a node at depth k is drawn from q[k - 1]
    choice_seconds: float = 0.0  # a choosing drafter's own work (lookup, choice), outside any model's forwards


class Drafter(Protocol):
    name: str

    @property
    def cache_length(self) -> int: ...

    def prefill(self, ids: list[int]) -> None: ...

    def propose(
        self,
        committed: list[int],
        gamma: int,
        warpers: LogitsProcessorList,
        generator: torch.Generator | None,
        greedy: bool,
        confidence: float,
    ) -> Draft: ...

    def rollback(self, committed: list[int]) -> None: ...


class ModelDrafter:
    """Per-run drafting state around a shared draft model."""

    name = "model"
    EXPLORE_EVERY = 8  # while guesses mostly miss: one guess every this many draft forwards

    def __init__(
        self, model, vocab_width: int, lookahead: int = 0, max_ngram: int = 3, stop_ids: frozenset[int] = frozenset()
    ):
        # q is over the target's ids (vocab_width): the draft never proposes an id the target cannot embed, and
        # reads the target's ids it has no row for as a stand-in (CachedModel.embedding_rows).
        self.state = CachedModel(model, vocab_width, embedding_rows=model.config.get_text_config().vocab_size)
        self.stop_ids = stop_ids  # end-of-sequence ids: nothing after one can be kept, so drafting stops there
        self.lookahead = lookahead  # most prompt-lookup guesses scored per draft forward; 0: one token per forward
        self.max_ngram = max_ngram
        self.guesses_offered = 0  # forwards that carried guesses, and how often the first one was drawn
        self.guesses_taken = 0
        self.forwards_since_guess = 0  # draft forwards sent without guesses since the last one with

    @property
    def cache_length(self) -> int:
        return self.state.length

    def prefill(self, ids: list[int]) -> None:
        if ids:
            self.state.feed(ids)

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        # Autoregressive: q_i = transform(draft logits | x, d_1..d_{i-1}); d_i ~ q_i.
        # Lookahead: prompt lookup guesses g_1..g_m for the next positions and one forward over
        # [newest token, g_1..g_m] returns m + 1 rows of logits, row r conditioned on g_1..g_r.
        # d_i is always drawn from its own row; the next row is used only while the drawn tokens equal
        # the guesses it was conditioned on (then it is exactly q_{i+1}), else the draft runs a new
        # forward. Every d_i is a draw from the q it is recorded with, so verification stays exact. (A batched
        # forward can move q in the last bits, never p: see docs/DESIGN.md, "Lookahead drafting".)
        ids: list[int] = []
        rows: list[torch.Tensor] = []
        from_lookahead: list[bool] = []
        guess = self._guess(committed, gamma)
        logits = self.state.feed(self.state.pending(committed) + guess, logits_to_keep=len(guess) + 1)
        forwards, row = 1, 0
        while True:
            q = probabilities(logits[row : row + 1], warpers)  # [1, V]
            token = int(sample(q, generator, greedy)[0])
            ids.append(token)
            rows.append(q[0])
            from_lookahead.append(row > 0)
            guessed_right = row < len(guess) and token == guess[row]
            self.guesses_taken += guessed_right and row == 0
            # Stop early when the draft itself is unsure (its tokens would mostly be rejected) or has ended the text.
            if len(ids) == gamma or token in self.stop_ids or (confidence > 0 and float(q.max()) < confidence):
                break
            if guessed_right:
                row += 1  # next row: context d_1..d_i, as needed
                continue
            self.state.truncate(self.state.length - (len(guess) - row))  # drop the guesses not drawn
            guess = self._guess(committed + ids, gamma - len(ids))
            logits = self.state.feed([token] + guess, logits_to_keep=len(guess) + 1)
            forwards, row = forwards + 1, 0
        return Draft(ids, torch.stack(rows), forwards, tuple(from_lookahead))

    def _guess(self, context: list[int], remaining: int) -> list[int]:
        """Prompt-lookup guesses for the positions after the next one (at most remaining - 1 are useful)."""
        if self.lookahead <= 0 or remaining <= 1:
            return []
        # A right guess saves a whole draft forward; a wrong one costs a little more work in the forward and, for
        # an int8 draft, blurs its other rows (activations are quantized once per forward, so one scale serves all
        # its tokens). So guesses go out while the first one is drawn at least half the time (prior: one in two);
        # otherwise (prose) forwards stay one token, with a single guess every EXPLORE_EVERY forwards to notice
        # when the text starts repeating.
        hit_rate = (self.guesses_taken + 1) / (self.guesses_offered + 2)
        if hit_rate >= 0.5:
            count = self.lookahead
        elif self.forwards_since_guess >= self.EXPLORE_EVERY:
            count = 1
        else:
            self.forwards_since_guess += 1
            return []
        guess = lookup_continuation(context, min(count, remaining - 1), self.max_ngram)
        if guess:
            self.guesses_offered += 1
            self.forwards_since_guess = 0
        return guess

    def rollback(self, committed: list[int]) -> None:
        self.state.rollback(committed)


class NgramDrafter:
    """Prompt lookup decoding (Saxena 2023): match the last n tokens earlier in the text, copy what followed."""

    name = "ngram"

    def __init__(self, max_ngram: int = 3, stop_ids: frozenset[int] = frozenset()):
        self.max_ngram = max_ngram
        self.stop_ids = stop_ids

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


def lookup_continuation(ids: list[int], gamma: int, max_ngram: int) -> list[int]:
    """Longest suffix n-gram (n = max_ngram..1) that occurred before: up to gamma tokens after its latest match."""
    for n in range(min(max_ngram, len(ids) - 1), 0, -1):
        suffix = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):  # latest earlier occurrence first
            if ids[start : start + n] == suffix:
                return ids[start + n : start + n + gamma]
    return []
