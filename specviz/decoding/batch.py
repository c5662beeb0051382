"""Batched speculative decoding and batched plain decoding: B prompts at once, token ids only.

One round for the whole batch (see docs/DESIGN.md, "Batching"):
  1. draft   gamma draft forwards over the batch (the first one over each row's pending tokens), d_r,i ~ q_r,i
  2. verify  one target forward over [B, gamma + 1]: [x_r,last, d_r,1..d_r,gamma] gives p_r,1..p_r,gamma+1
  3. accept  per row, the ordinary rule (acceptance.verify): row r accepts j_r drafts, then a correction or bonus
  4. commit  ragged (what serving engines do): row r commits its own j_r + 1 tokens. The batch stays ragged: each
             row keeps its own cache length and positions. A cache column a row did not keep (a rejected draft) is a
             hole: the row's attention mask hides it in every later forward, and its position ids count only the
             columns it holds (the mask's cumsum, as generate() does for left padding). Rows that fed fewer tokens
             than the longest row in one forward get holes on the left of that forward (the draft's pending tokens
             are one or two: a row whose whole draft was accepted has not fed its last draft yet).
             min-cut (the page's comparison): m = min_r j_r, every row commits m + 1 tokens, its correction or bonus
             where j_r = m, else its accepted d_r,m+1; the batch waits for its slowest row.
Prompts of different lengths are padded on the left (holes, too). A row that ends (end of sequence or its budget)
leaves the batch: its cache rows are dropped (DynamicCache.batch_select_indices).
Every forward here runs under fastpath.per_token_activations: the CPU's int8 draft then quantizes each token's
activations on their own, where torch's dynamic int8 takes one scale for the whole batch, which made a row's drafts
(and its acceptance) depend on its neighbours (docs/notes/2026-12-ragged-batching.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache, LogitsProcessorList

from ..models.attention import standard_attention
from ..models.fastpath import per_token_activations
from .acceptance import Decision, verify
from .config import SpecConfig
from .engine import EngineError, make_generator, synchronize, vocab_width
from .kvcache import fit_width
from .metrics import SpecMetrics
from .proposal import Draft
from .sampling import build_warpers, probabilities, sample

MAX_BATCH = 64  # rows one batched run takes (the bench's --batch and the app's batch list are capped here)
PAD_ID = 0  # what a hole holds; the mask hides it, so any id the embedding has will do
RAGGED, MIN_CUT = "ragged", "min-cut"
RULES = (RAGGED, MIN_CUT)


@dataclass
class BatchCache:
    """One model's KV cache for a batch: `valid` [B, length] says which columns each row holds (False: a hole,
    left padding or a token the row did not keep), so rows hold different numbers of tokens."""

    model: Any
    width: int  # logits are cut or padded to the target's vocabulary (kvcache.fit_width)
    pads: torch.Tensor  # [B] long: a rectangular feed (feed, feed_states) holds no column before pads[r]
    cache: DynamicCache = field(default_factory=DynamicCache)
    # a draft narrower than its target reads the target-only ids as token 0 (kvcache.CachedModel.embedding_rows)
    embedding_rows: int | None = None
    valid: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.valid = torch.zeros(len(self.pads), 0, dtype=torch.bool)

    @property
    def length(self) -> int:
        """Columns in the cache, holes included."""
        return self.valid.shape[1]

    def counts(self) -> list[int]:
        """Tokens each row holds."""
        return self.valid.sum(dim=1).tolist()

    def mask(self, extra: int) -> torch.Tensor:
        """[B, length + extra] attention mask of a rectangular feed: 0 on each row's holes and padding."""
        columns = torch.arange(self.length, self.length + extra)
        return torch.cat([self.valid, columns[None, :] >= self.pads[:, None]], dim=1).long()

    def _inputs(self, ids: torch.Tensor, new: torch.Tensor) -> dict[str, Any]:
        """The forward's inputs for ids [B, k] appended as columns length .. length + k - 1, new [B, k] saying which
        of them are the row's tokens. A token's position counts the columns its row holds before it."""
        if self.embedding_rows is not None:
            ids = torch.where(ids < self.embedding_rows, ids, torch.zeros_like(ids))
        held = self.valid.sum(dim=1, keepdim=True)
        positions = (held + new.long().cumsum(dim=1) - 1).clamp_min(0)
        device = self.model.device
        return {
            "input_ids": ids.to(device),
            "attention_mask": torch.cat([self.valid, new], dim=1).long().to(device),
            "position_ids": positions.to(device),
            "cache": self.cache,
            "use_cache": True,
        }

    def _new(self, ids: torch.Tensor) -> torch.Tensor:
        return self.mask(ids.shape[1])[:, self.length :].bool()

    @torch.inference_mode()
    def _logits(self, ids: torch.Tensor, new: torch.Tensor, keep: int) -> torch.Tensor:
        # per_token_activations: the int8 draft's rows never depend on the other rows. standard_attention: a batch
        # keeps transformers' sdpa (row-invariant attention would take B x k calls a layer; the Batching recording
        # was timed without it; docs/DESIGN.md, "Row-invariant attention")
        with per_token_activations(), standard_attention():
            out = self.model(**self._inputs(ids, new), logits_to_keep=keep)
        self.valid = torch.cat([self.valid, new], dim=1)
        return fit_width(out.logits, self.width)

    def feed(self, ids: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """Append ids [B, k] (each row's padding before pads[r] masked); the logits of the last `keep` columns (all
        by default), [B, keep, width]."""
        return self._logits(ids, self._new(ids), keep or ids.shape[1])

    def feed_rows(self, rows: Sequence[Sequence[int]], keep: int = 1) -> torch.Tensor:
        """Append each row's own tokens, at the right end of k = the longest row's count of columns (holes on the
        left of shorter rows); the logits of the last `keep` columns, [B, keep, width]."""
        k = max(len(row) for row in rows)
        ids = torch.full((len(rows), k), PAD_ID, dtype=torch.long)
        new = torch.zeros(len(rows), k, dtype=torch.bool)
        for r, row in enumerate(rows):
            if row:
                ids[r, k - len(row) :] = torch.tensor(row, dtype=torch.long)
                new[r, k - len(row) :] = True
        return self._logits(ids, new, keep)

    @torch.inference_mode()
    def feed_states(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids [B, k]; return their final hidden states [B, k, H] (the base model alone: no LM head)."""
        new = self._new(ids)
        with per_token_activations(), standard_attention():
            out = self.model.base_model(**self._inputs(ids, new))
        self.valid = torch.cat([self.valid, new], dim=1)
        return out.last_hidden_state

    def drop(self, row: int, count: int) -> None:
        """Row `row` no longer holds its last `count` columns (the newest ones: rejected drafts)."""
        if count > 0:
            self.valid[row, self.length - count :] = False

    def trim(self) -> None:
        """Crop the newest columns that no row holds."""
        held = self.valid.any(dim=0).nonzero()
        self.truncate(int(held[-1]) + 1 if len(held) else 0)

    def truncate(self, length: int) -> None:
        if length < self.length:
            self.cache.crop(length - self.length)  # this transformers takes minus the count to remove
            self.valid = self.valid[:, :length]

    def keep_rows(self, rows: list[int]) -> None:
        """Drop every other row (finished ones) from the cache."""
        index = torch.tensor(rows, dtype=torch.long)
        self.cache.batch_select_indices(index.to(self.model.device))
        self.pads, self.valid = self.pads[index], self.valid[index]


@dataclass(frozen=True)
class RowCheck:
    """Step 3 for one row: its draft, the target's rows p for it, and the ordinary rule's decision."""

    draft_ids: list[int]
    p: torch.Tensor  # [gamma + 1, V]
    decision: Decision


def ragged_round(checks: Sequence[RowCheck]) -> list[list[int]]:
    """Step 4, ragged: every row commits its own ordinary outcome, its accepted drafts and its correction or bonus."""
    return [check.decision.kept + [check.decision.next_token] for check in checks]


def cut_round(checks: Sequence[RowCheck]) -> list[list[int]]:
    """Step 4, min-cut (the comparison): every row commits m + 1 tokens, m = the shortest accepted prefix.

    A row with j_r = m keeps its whole ordinary outcome (accepted drafts, then its correction or bonus token); a row
    with j_r > m keeps its first m + 1 accepted drafts: the prefix of its ordinary outcome. Lossless, because m is
    fixed by the other rows' draws, never by this row's token at the cut (docs/DESIGN.md, "Batching").
    """
    m = min(check.decision.n_accepted for check in checks)
    out = []
    for check in checks:
        decision = check.decision
        if decision.n_accepted == m:
            out.append(decision.kept + [decision.next_token])
        else:
            out.append(check.draft_ids[: m + 1])
    return out


@dataclass
class BatchRun:
    """Per-run state of a batched generation; the shared models are only read."""

    pair: Any
    config: SpecConfig
    prompts: list[list[int]]
    warpers: LogitsProcessorList
    generator: torch.Generator
    target: BatchCache
    draft: BatchCache | None
    tokens: list[list[int]]  # per active row: its prompt, then its committed tokens
    rows: list[int]  # original row index of each active row
    outputs: list[list[int]]  # new tokens per original row
    rule: str = RAGGED
    stop_at_eos: bool = True
    rounds: int = 0
    row_rounds: list[int] = field(default_factory=list)  # tokens one row committed in one round, every (row, round)
    # (rows in the batch, tokens drafted, tokens the draft's first forward took per row) of each round: that forward
    # takes each row's pending tokens, two where a row accepted its whole draft (0 drafted: a plain step)
    shapes: list[tuple[int, int, int]] = field(default_factory=list)
    accepted: int = 0  # drafts accepted by the ordinary rule, over every row and round (before a cut)
    rejected: int = 0  # (row, round)s that ended on a rejection
    metrics: SpecMetrics = SpecMetrics()  # every (row, round) as a verification step, as the serving engines count
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    prefill_seconds: float = 0.0

    def left(self, i: int) -> int:
        """New tokens active row i may still commit."""
        return self.config.max_new_tokens - len(self.outputs[self.rows[i]])

    def done(self) -> bool:
        return not self.rows

    def now(self) -> float:
        synchronize(self.target.model.device)
        return time.perf_counter()

    def pending(self, state: BatchCache) -> list[list[int]]:
        """Each active row's committed tokens this cache does not hold yet."""
        return [tokens[held:] for tokens, held in zip(self.tokens, state.counts(), strict=True)]

    def commit(self, new: list[list[int]], drafted: int = 0) -> list[int]:
        """Append each active row's tokens (cut to its budget and at an end of sequence); each cache then drops the
        drafts a row did not keep (of the `drafted` the target was fed); finished rows leave the batch. Returns the
        tokens each row committed."""
        eos = self.pair.eos_ids if self.stop_at_eos else frozenset()
        finished, counts = [], []
        for i, tokens in enumerate(new):
            tokens = tokens[: self.left(i)]
            end = next((k + 1 for k, t in enumerate(tokens) if t in eos), None)
            tokens = tokens[:end]
            self.outputs[self.rows[i]].extend(tokens)
            self.tokens[i].extend(tokens)
            counts.append(len(tokens))
            if end is not None or self.left(i) == 0:
                finished.append(i)
        for state, fed in ((self.target, drafted), (self.draft, max(drafted - 1, 0))):
            if state is not None and fed:  # a row keeps the drafts it committed, but not its newest token
                for i, count in enumerate(counts):
                    state.drop(i, fed - min(fed, count - 1))
                state.trim()
        if finished:
            keep = [i for i in range(len(self.rows)) if i not in finished]
            self.rows = [self.rows[i] for i in keep]
            self.tokens = [self.tokens[i] for i in keep]
            for state in (self.target, self.draft):
                if state is not None and keep:
                    state.keep_rows(keep)
        return counts


def draft_rows(pair) -> int:
    return pair.draft.config.get_text_config().vocab_size


def left_padded(prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] ids with each prompt at the right end, [B] pads), L the longest prompt."""
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), PAD_ID, dtype=torch.long)
    for r, prompt in enumerate(prompts):
        ids[r, longest - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
    pads = torch.tensor([longest - len(p) for p in prompts], dtype=torch.long)
    return ids, pads


def start_batch(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    *,
    speculative: bool,
    stop_at_eos: bool = True,
    rule: str = RAGGED,
) -> BatchRun:
    """Check the settings, and feed each model every prompt but its last token."""
    config.validate()
    if not prompts or any(len(p) == 0 for p in prompts):
        raise EngineError("every prompt of the batch needs at least one token")
    if len(prompts) > MAX_BATCH:
        raise EngineError(f"a batch holds at most {MAX_BATCH} prompts, got {len(prompts)}")
    if speculative and pair.draft is None:
        raise EngineError("batched speculative decoding needs a draft model")
    if rule not in RULES:
        raise EngineError(f"the batch's rule is one of {', '.join(RULES)}, got {rule!r}")
    width, none = vocab_width(pair), torch.zeros(len(prompts), dtype=torch.long)
    run = BatchRun(
        pair=pair,
        config=config,
        prompts=[list(p) for p in prompts],
        warpers=build_warpers(config),
        generator=make_generator(pair.target.device, config.seed),
        target=BatchCache(pair.target, width, none),
        draft=BatchCache(pair.draft, width, none.clone(), embedding_rows=draft_rows(pair)) if speculative else None,
        tokens=[list(p) for p in prompts],
        rows=list(range(len(prompts))),
        outputs=[[] for _ in prompts],
        rule=rule,
        stop_at_eos=stop_at_eos,
    )
    start = run.now()
    if max(len(p) for p in prompts) > 1:
        for state in (run.target, run.draft):
            if state is not None:
                state.feed_rows([p[:-1] for p in prompts])
    run.prefill_seconds = run.now() - start
    return run


def draft_tokens(run: BatchRun, gamma: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """1. gamma batched draft forwards: ([B, gamma] drafts, [B, gamma, V] their q rows; None when gamma = 0)."""
    if gamma == 0:
        return torch.empty(len(run.rows), 0, dtype=torch.long), None
    pending = run.pending(run.draft)
    drafts, rows = [], []
    for _ in range(gamma):
        q = probabilities(run.draft.feed_rows(pending)[:, -1], run.warpers)  # [B, V]
        token = sample(q, run.generator, run.config.greedy)  # one per row
        drafts.append(token)
        rows.append(q)
        pending = [[t] for t in token.tolist()]
    return torch.stack(drafts, dim=1).cpu(), torch.stack(rows, dim=1)


def check_rows(run: BatchRun, drafts: torch.Tensor, q: torch.Tensor | None) -> list[RowCheck]:
    """2. One target forward over each row's pending token and its drafts; 3. the ordinary rule, row by row."""
    gamma = drafts.shape[1]
    chains = [pending + row for pending, row in zip(run.pending(run.target), drafts.tolist(), strict=True)]
    logits = run.target.feed_rows(chains, keep=gamma + 1)
    p = probabilities(logits.reshape(-1, logits.shape[-1]), run.warpers).reshape(logits.shape)
    checks = []
    for r in range(len(run.rows)):
        ids = drafts[r].tolist()
        draft = Draft(ids, q[r] if q is not None else None, gamma)
        checks.append(RowCheck(ids, p[r], verify(p[r], draft, generator=run.generator, greedy=run.config.greedy)))
    return checks


def batch_round(run: BatchRun, gamma: int) -> list[int]:
    """One round for the whole batch; returns the tokens each row committed."""
    length = min(gamma, max(run.left(i) for i in range(len(run.rows))) - 1)  # the next token must fit the budget
    catch_up = max(map(len, run.pending(run.draft))) if length else 0
    run.shapes.append((len(run.rows), length, catch_up))
    started = run.now()
    drafts, q = draft_tokens(run, length)
    drafted = run.now()
    checks = check_rows(run, drafts, q)
    new = (ragged_round if run.rule == RAGGED else cut_round)(checks)
    run.verify_seconds += run.now() - drafted
    run.draft_seconds += drafted - started
    run.accepted += sum(check.decision.n_accepted for check in checks)
    run.rejected += sum(check.decision.rejection_index is not None for check in checks)
    run.metrics += SpecMetrics.from_rounds((check.decision.n_accepted, length) for check in checks)
    counts = run.commit(new, drafted=length)
    run.rounds += 1
    run.row_rounds.extend(counts)
    return counts


def plain_step(run: BatchRun) -> None:
    """x_r,t+1 ~ p(. | x_r,1..x_r,t) for every row: one target forward over [B, pending], one draw per row."""
    run.shapes.append((len(run.rows), 0, 0))
    logits = run.target.feed_rows(run.pending(run.target))[:, -1]
    tokens = sample(probabilities(logits, run.warpers), run.generator, run.config.greedy)
    run.commit([[int(t)] for t in tokens])
    run.rounds += 1


@dataclass(frozen=True)
class BatchResult:
    token_ids: list[list[int]]  # new tokens per prompt, in the prompts' order
    seconds: float  # decoding only: from after the prompt pass to the end
    prefill_seconds: float
    rounds: int  # verify rounds (speculative) or target steps (plain)
    row_rounds: list[int]  # speculative: tokens one row committed in one round, every (row, round)
    shapes: list[tuple[int, int, int]]  # (rows in the batch, tokens drafted, the draft's first forward's tokens per
    # row) of each round or plain step (drafted 0): it shrinks as rows finish, the last round drafts to the budget
    accepted: int  # drafts the ordinary rule accepted, every (row, round), before any cut
    rejected: int  # (row, round)s that ended on a rejection
    draft_seconds: float
    verify_seconds: float
    metrics: SpecMetrics = SpecMetrics()  # the acceptance rate and the rest, every (row, round) a step (metrics.py)

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.token_ids)

    @property
    def tokens_per_round(self) -> float:
        """Tokens per row per round: what one row gains from one round."""
        return sum(self.row_rounds) / len(self.row_rounds) if self.row_rounds else 1.0

    @property
    def expected_acceptance(self) -> float | None:
        return expected_acceptance([self])


def expected_acceptance(results: Sequence[BatchResult]) -> float | None:
    """Leviathan's a, the expected acceptance, estimated: accepted drafts over accepted drafts plus rejections (for
    drafts accepted one after another, each with probability a, until the first rejection). Not the acceptance rate
    (accepted / drafted, metrics.acceptance_rate), which also counts the drafts left unchecked after a rejection."""
    accepted, rejected = sum(r.accepted for r in results), sum(r.rejected for r in results)
    return accepted / (accepted + rejected) if accepted + rejected else None


def _result(run: BatchRun, started: float) -> BatchResult:
    return BatchResult(
        token_ids=run.outputs,
        seconds=run.now() - started,
        prefill_seconds=run.prefill_seconds,
        rounds=run.rounds,
        row_rounds=run.row_rounds,
        shapes=run.shapes,
        accepted=run.accepted,
        rejected=run.rejected,
        draft_seconds=run.draft_seconds,
        verify_seconds=run.verify_seconds,
        metrics=run.metrics,
    )


@torch.inference_mode()
def batch_speculative(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    stop_at_eos: bool = True,
    rule: str = RAGGED,
    cancel: threading.Event | None = None,
) -> BatchResult:
    """Batched speculative decoding with a fixed draft length config.gamma; rule: ragged or min-cut. A set `cancel`
    ends it between two rounds (the rows as far as they got)."""
    run = start_batch(pair, prompts, config, speculative=True, stop_at_eos=stop_at_eos, rule=rule)
    started = run.now()
    while not run.done() and not (cancel is not None and cancel.is_set()):
        batch_round(run, config.gamma)
    return _result(run, started)


@torch.inference_mode()
def batch_plain(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    stop_at_eos: bool = True,
    cancel: threading.Event | None = None,
) -> BatchResult:
    """The baseline: the target alone over the same batch, one token per row per forward (`cancel` as above)."""
    run = start_batch(pair, prompts, config, speculative=False, stop_at_eos=stop_at_eos)
    started = run.now()
    while not run.done() and not (cancel is not None and cancel.is_set()):
        plain_step(run)
    return _result(run, started)
