"""The draft model: a small causal LM, sampled with the target's transform (q = its probabilities).

With lookahead, prompt lookup guesses how the text goes on and one draft forward scores the guesses at once
(staged speculation: the draft checks cheap guesses the way the target checks the draft).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specviz.decoding.batchcache import BatchCache
from specviz.decoding.costs import RoundCost
from specviz.decoding.kvcache import CachedModel
from specviz.decoding.proposal import Draft, DraftContext
from specviz.decoding.sampling import probabilities, sample

from .ngram import lookup_continuation


class ModelDrafter:
    """Per-run drafting state around a shared draft model, for every row of the run: its rows share each draft
    forward (one row: kvcache.CachedModel, as the engine steps through; more: batchcache.BatchCache, ragged)."""

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
    batches = True  # implements the batch protocol itself (its rows share each draft forward)
    EXPLORE_EVERY = 8  # while guesses mostly miss: one guess every this many draft forwards

    def __init__(
        self,
        model,
        vocab_width: int,
        lookahead: int = 0,
        max_ngram: int = 3,
        stop_ids: frozenset[int] = frozenset(),
        rows: int = 1,
    ):
        # q is over the target's ids (vocab_width): the draft never proposes an id the target cannot embed, and
        # reads the target's ids it has no row for as a stand-in (CachedModel.embedding_rows).
        embedding_rows = model.config.get_text_config().vocab_size
        if rows == 1:
            self.state = CachedModel(model, vocab_width, embedding_rows=embedding_rows)
        else:
            pads = torch.zeros(rows, dtype=torch.long)
            self.state = BatchCache(model, vocab_width, pads, embedding_rows=embedding_rows)
        self.stop_ids = stop_ids  # end-of-sequence ids: nothing after one can be kept, so drafting stops there
        self.lookahead = lookahead  # most prompt-lookup guesses scored per draft forward; 0: one token per forward
        self.max_ngram = max_ngram
        self.guesses = [Guesses() for _ in range(rows)]  # per row: how often its prompt-lookup guesses were drawn

    @classmethod
    def for_run(cls, context: DraftContext) -> ModelDrafter:
        config = context.config
        return cls(
            context.pair.draft,
            context.width,
            lookahead=config.lookahead,
            max_ngram=config.ngram_size,
            stop_ids=context.pair.eos_ids,
            rows=context.rows,
        )

    def cache_lengths(self) -> list[int]:
        return self.state.lengths()

    def prefill(self, rows: Sequence[list[int]]) -> None:
        if any(rows):
            self.state.feed_rows(rows)

    def propose(self, rows, gammas, warpers, generator, greedy, confidence) -> list[Draft]:
        # Autoregressive: q_i = transform(draft logits | x, d_1..d_{i-1}); d_i ~ q_i.
        # Lookahead: prompt lookup guesses g_1..g_m for the next positions and one forward over
        # [newest token, g_1..g_m] returns m + 1 rows of logits, row r conditioned on g_1..g_r.
        # d_i is always drawn from its own row; the next row is used only while the drawn tokens equal
        # the guesses it was conditioned on (then it is exactly q_{i+1}), else the draft runs a new
        # forward. Every d_i is a draw from the q it is recorded with, so verification stays exact. (A batched
        # forward can move q in the last bits, never p: see docs/DESIGN.md, "Lookahead drafting".)
        # A batch's rows step together: each draw takes one token for every row still drafting, and a forward feeds
        # the rows that need one (the others hold still: holes in that forward).
        started = time.perf_counter()
        drafts = [_Drafting() for _ in rows]
        drafting = [r for r, gamma in enumerate(gammas) if gamma > 0]
        if not drafting:
            return [Draft([], None, 0) for _ in rows]
        pending = self.state.pending_rows(rows)
        for r in drafting:
            drafts[r].guess = self._guess(r, rows[r], gammas[r])
        self._forward(
            drafts, drafting, [pending[r] + drafts[r].guess if r in drafting else [] for r in range(len(rows))]
        )
        while drafting:
            q = probabilities(torch.stack([drafts[r].logits[drafts[r].row] for r in drafting]), warpers)  # [A, V]
            tokens = sample(q, generator, greedy).tolist()
            refeed, still = [], []
            for r, token, q_row in zip(drafting, tokens, q, strict=True):
                draft = drafts[r]
                guessed_right = self._drawn(r, draft, int(token), q_row)
                # Stop early when the draft itself is unsure (its tokens would mostly be rejected) or has ended the text
                unsure = confidence > 0 and float(q_row.max()) < confidence
                if len(draft.ids) == gammas[r] or token in self.stop_ids or unsure:
                    continue
                still.append(r)
                if guessed_right:
                    draft.row += 1  # next row: context d_1..d_i, as needed
                    continue
                self.state.drop(r, len(draft.guess) - draft.row)  # drop the guesses not drawn
                draft.guess = self._guess(r, rows[r] + draft.ids, gammas[r] - len(draft.ids))
                refeed.append(r)
            drafting = still
            if refeed:
                feeds = [[drafts[r].ids[-1], *drafts[r].guess] if r in refeed else [] for r in range(len(rows))]
                self._forward(drafts, refeed, feeds)
        # the tokens were drawn, so the forwards are done: the clock needs no device sync
        seconds = time.perf_counter() - started
        return [
            Draft(
                d.ids,
                torch.stack(d.q) if d.ids else None,
                d.forwards,
                tuple(d.from_lookahead),
                model_tokens=len(d.ids),
                model_seconds=seconds if d.ids else 0.0,
            )
            for d in drafts
        ]

    def _drawn(self, r: int, draft: _Drafting, token: int, q_row: torch.Tensor) -> bool:
        """Record row r's drawn token with its q row; whether it is the guess its logits row was conditioned on."""
        draft.ids.append(token)
        draft.q.append(q_row)
        draft.from_lookahead.append(draft.row > 0)
        guessed_right = draft.row < len(draft.guess) and token == draft.guess[draft.row]
        self.guesses[r].taken += guessed_right and draft.row == 0
        return guessed_right

    def _forward(self, drafts: list[_Drafting], fed: list[int], feeds: list[list[int]]) -> None:
        """One draft forward over the rows in `fed` (each its feeds[r]); each keeps the rows of its guesses."""
        keep = max(len(drafts[r].guess) for r in fed) + 1
        logits = self.state.feed_rows(feeds, keep=keep)
        for r in fed:
            draft = drafts[r]
            draft.logits, draft.row, draft.forwards = logits[r, keep - len(draft.guess) - 1 :], 0, draft.forwards + 1

    def _guess(self, row: int, context: list[int], remaining: int) -> list[int]:
        """Prompt-lookup guesses for the positions after the next one (at most remaining - 1 are useful)."""
        if self.lookahead <= 0 or remaining <= 1:
            return []
        # A right guess saves a whole draft forward; a wrong one costs a little more work in the forward and, for
        # an int8 draft, blurs its other rows (activations are quantized once per forward, so one scale serves all
        # its tokens). So guesses go out while the first one is drawn at least half the time (prior: one in two);
        # otherwise (prose) forwards stay one token, with a single guess every EXPLORE_EVERY forwards to notice
        # when the text starts repeating.
        guesses = self.guesses[row]
        hit_rate = (guesses.taken + 1) / (guesses.offered + 2)
        if hit_rate >= 0.5:
            count = self.lookahead
        elif guesses.since >= self.EXPLORE_EVERY:
            count = 1
        else:
            guesses.since += 1
            return []
        guess = lookup_continuation(context, min(count, remaining - 1), self.max_ngram)
        if guess:
            guesses.offered += 1
            guesses.since = 0
        return guess

    def rollback(self, rows: Sequence[list[int]]) -> None:
        self.state.rollback_rows(rows)

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.state.keep_rows(rows)
        self.guesses = [self.guesses[r] for r in rows]

    def learn(self, costs: Sequence[RoundCost]) -> None:
        pass


@dataclass
class Guesses:
    """A row's prompt-lookup guesses: forwards that carried some, how often the first one was drawn, and forwards
    sent without since the last one with."""

    offered: int = 0
    taken: int = 0
    since: int = 0


@dataclass
class _Drafting:
    """One row's draft while it is drawn: its tokens, their q rows, and the logits of its last forward."""

    ids: list[int] = field(default_factory=list)
    q: list[torch.Tensor] = field(default_factory=list)
    from_lookahead: list[bool] = field(default_factory=list)
    guess: list[int] = field(default_factory=list)
    logits: torch.Tensor | None = None  # [len(guess) + 1, V] of the row's last forward
    row: int = 0  # the row of `logits` the next token is drawn from
    forwards: int = 0
