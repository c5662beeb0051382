"""The draft model: a small causal LM, sampled with the target's transform (q = its probabilities).

With lookahead, prompt lookup guesses how the text goes on and one draft forward scores the guesses at once
(staged speculation: the draft checks cheap guesses the way the target checks the draft).
"""

from __future__ import annotations

import time

import torch

from specviz.decoding.costs import RoundCost
from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft, DraftContext
from specviz.decoding.sampling import probabilities, sample

from .ngram import lookup_continuation


class ModelDrafter:
    """Per-run drafting state around a shared draft model."""

    name = "model"
    title = "{draft}"  # who drafts, in a line of output: the draft model's name
    label = "draft model"  # the sidebar's radio, the CLI's help, tables
    description = "a small causal model run before the target, its q under the target's sampling transform"
    draft_passes = "per token"  # a draft of n tokens costs 1 to n passes (lookahead shares some)
    model_sources: tuple[str, ...] = ()  # a chooser's sources in which a draft model drafts
    cache_lag = 0  # before round 0 its cache holds this many fewer tokens than the target's
    leaves_beside_chain = False  # a tree's leaves hang beside the chain only
    reads_ngram_size = False  # the setting "longest n-gram to match" is its own
    cache_note = ""  # the cache view's line for a drafter with no draft model
    needs_draft_model = True
    needs_hidden_states = False
    point_mass = False
    drafts_tree = False
    keeps_cache = True
    learns = False
    sources: tuple[str, ...] = ()
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

    @classmethod
    def for_run(cls, context: DraftContext) -> ModelDrafter:
        config = context.config
        return cls(
            context.pair.draft,
            context.width,
            lookahead=config.lookahead,
            max_ngram=config.ngram_size,
            stop_ids=context.pair.eos_ids,
        )

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
        started = time.perf_counter()
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
        # the tokens were drawn, so the forwards are done: the clock needs no device sync
        seconds = time.perf_counter() - started
        return Draft(
            ids, torch.stack(rows), forwards, tuple(from_lookahead), model_tokens=len(ids), model_seconds=seconds
        )

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

    def learn(self, cost: RoundCost) -> None:
        pass
