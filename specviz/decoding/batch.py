"""Batched speculative decoding and batched plain decoding: B prompts at once, token ids only.

One round for the whole batch (see docs/DESIGN.md, "Batching"):
  1. draft   gamma draft forwards over [B, 1] (the first one over the draft's pending tokens), d_r,i ~ q_r,i
  2. verify  one target forward over [B, gamma + 1]: [x_r,last, d_r,1..d_r,gamma] gives p_r,1..p_r,gamma+1
  3. accept  per row, the ordinary rule (acceptance.verify): row r accepts j_r drafts, then a correction or bonus
  4. cut     m = min_r j_r; every row commits m + 1 tokens: d_r,1..d_r,m, then at position m + 1 the token the
             ordinary rule gave it there (its correction or bonus if j_r = m, else its accepted draft d_r,m+1)
Every row then has the same number of committed tokens, so both KV caches stay rectangular: one crop for all rows.
Prompts of different lengths are padded on the left; the attention mask hides the padding and the position ids
count each row's own tokens only (cumsum of the mask, as generate() does). A row that ends (end of sequence)
leaves the batch: its cache rows are dropped (DynamicCache.batch_select_indices).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache, LogitsProcessorList

from .acceptance import Decision, verify
from .config import SpecConfig
from .engine import EngineError, make_generator, synchronize, vocab_width
from .kvcache import fit_width
from .proposal import Draft
from .sampling import build_warpers, probabilities, sample

MAX_BATCH = 64  # rows one batched run takes (the bench's --batch and the app's batch list are capped here)
PAD_ID = 0  # what a padding slot holds; the mask hides it, so any id the embedding has will do


@dataclass
class BatchCache:
    """One model's KV cache for a batch of left-padded rows: every row has `length` columns, of which the first
    pads[r] are padding (masked out)."""

    model: Any
    width: int  # logits are cut or padded to the target's vocabulary (kvcache.fit_width)
    pads: torch.Tensor  # [B] long
    cache: DynamicCache = field(default_factory=DynamicCache)
    length: int = 0  # columns in the cache, padding included
    # a draft narrower than its target reads the target-only ids as token 0 (kvcache.CachedModel.embedding_rows)
    embedding_rows: int | None = None

    def mask(self, extra: int) -> torch.Tensor:
        """[B, length + extra] attention mask: 0 on each row's padding, 1 on its tokens."""
        columns = torch.arange(self.length + extra, device=self.pads.device)
        return (columns[None, :] >= self.pads[:, None]).long()

    def _inputs(self, ids: torch.Tensor) -> dict[str, Any]:
        """The forward's inputs for ids [B, k] appended at columns length .. length + k - 1.
        Position of column c in row r: c - pads[r] (a padding column gets 0; it is masked anyway)."""
        k = ids.shape[1]
        if self.embedding_rows is not None:
            ids = torch.where(ids < self.embedding_rows, ids, torch.zeros_like(ids))
        columns = torch.arange(self.length, self.length + k, device=ids.device)
        positions = (columns[None, :] - self.pads[:, None]).clamp_min(0)
        device = self.model.device
        return {
            "input_ids": ids.to(device),
            "attention_mask": self.mask(k).to(device),
            "position_ids": positions.to(device),
            "cache": self.cache,
            "use_cache": True,
        }

    @torch.inference_mode()
    def feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids [B, k]; return their logits [B, k, width]."""
        out = self.model(**self._inputs(ids), logits_to_keep=ids.shape[1])
        self.length += ids.shape[1]
        return fit_width(out.logits, self.width)

    @torch.inference_mode()
    def feed_states(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids [B, k]; return their final hidden states [B, k, H] (the base model alone: no LM head)."""
        out = self.model.base_model(**self._inputs(ids))
        self.length += ids.shape[1]
        return out.last_hidden_state

    def truncate(self, length: int) -> None:
        if length < self.length:
            self.cache.crop(length - self.length)  # this transformers takes minus the count to remove
            self.length = length

    def keep_rows(self, rows: list[int]) -> None:
        """Drop every other row (finished ones) from the cache."""
        index = torch.tensor(rows, dtype=torch.long)
        self.cache.batch_select_indices(index.to(self.model.device))
        self.pads = self.pads[index]


@dataclass(frozen=True)
class RowCheck:
    """Step 3 for one row: its draft, the target's rows p for it, and the ordinary rule's decision."""

    draft_ids: list[int]
    p: torch.Tensor  # [gamma + 1, V]
    decision: Decision


def cut_round(checks: Sequence[RowCheck]) -> list[list[int]]:
    """Step 4: every row commits m + 1 tokens, m = the shortest accepted prefix in the batch.

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
    tokens: torch.Tensor  # [B_active, columns]: left-padded prompts, then the committed tokens
    rows: list[int]  # original row index of each active row
    outputs: list[list[int]]  # new tokens per original row
    stop_at_eos: bool = True
    rounds: int = 0
    round_lengths: list[int] = field(default_factory=list)  # tokens committed per row, per round
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    prefill_seconds: float = 0.0

    @property
    def produced(self) -> int:
        """New tokens of every active row (they all advance together)."""
        return self.tokens.shape[1] - max(len(p) for p in self.prompts)

    def done(self) -> bool:
        return not self.rows or self.produced >= self.config.max_new_tokens

    def now(self) -> float:
        synchronize(self.target.model.device)
        return time.perf_counter()

    def commit(self, new: list[list[int]]) -> None:
        """Append each active row's tokens (equal counts); rows that reached an end of sequence leave the batch."""
        eos = self.pair.eos_ids if self.stop_at_eos else frozenset()
        finished = []
        for i, tokens in enumerate(new):
            end = next((k + 1 for k, t in enumerate(tokens) if t in eos), None)
            self.outputs[self.rows[i]].extend(tokens[:end])
            if end is not None:
                finished.append(i)
        block = torch.tensor(new, dtype=torch.long, device=self.tokens.device)
        self.tokens = torch.cat([self.tokens, block], dim=1)
        if finished:
            keep = [i for i in range(len(self.rows)) if i not in finished]
            self.rows = [self.rows[i] for i in keep]
            self.tokens = self.tokens[keep]
            for state in (self.target, self.draft):
                if state is not None and keep:
                    state.keep_rows(keep)


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
    pair, prompts: Sequence[Sequence[int]], config: SpecConfig, *, speculative: bool, stop_at_eos: bool = True
) -> BatchRun:
    """Check the settings, pad the prompts, and feed all but their last column to each model."""
    config.validate()
    if not prompts or any(len(p) == 0 for p in prompts):
        raise EngineError("every prompt of the batch needs at least one token")
    if len(prompts) > MAX_BATCH:
        raise EngineError(f"a batch holds at most {MAX_BATCH} prompts, got {len(prompts)}")
    if speculative and pair.draft is None:
        raise EngineError("batched speculative decoding needs a draft model")
    width = vocab_width(pair)
    ids, pads = left_padded(prompts)
    run = BatchRun(
        pair=pair,
        config=config,
        prompts=[list(p) for p in prompts],
        warpers=build_warpers(config),
        generator=make_generator(pair.target.device, config.seed),
        target=BatchCache(pair.target, width, pads.clone()),
        draft=BatchCache(pair.draft, width, pads.clone(), embedding_rows=draft_rows(pair)) if speculative else None,
        tokens=ids,
        rows=list(range(len(prompts))),
        outputs=[[] for _ in prompts],
        stop_at_eos=stop_at_eos,
    )
    start = run.now()
    if ids.shape[1] > 1:
        for state in (run.target, run.draft):
            if state is not None:
                state.feed(ids[:, :-1])
    run.prefill_seconds = run.now() - start
    return run


def draft_tokens(run: BatchRun, gamma: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """1. gamma batched draft forwards: ([B, gamma] drafts, [B, gamma, V] their q rows; None when gamma = 0)."""
    batch = len(run.rows)
    if gamma == 0:
        return torch.empty(batch, 0, dtype=torch.long), None
    pending = run.tokens[:, run.draft.length :]
    drafts, rows = [], []
    for _ in range(gamma):
        q = probabilities(run.draft.feed(pending)[:, -1], run.warpers)  # [B, V]
        token = sample(q, run.generator, run.config.greedy)  # one per row
        drafts.append(token)
        rows.append(q)
        pending = token[:, None]
    return torch.stack(drafts, dim=1).cpu(), torch.stack(rows, dim=1)


def check_rows(run: BatchRun, drafts: torch.Tensor, q: torch.Tensor | None) -> list[RowCheck]:
    """2. One target forward over [B, gamma + 1]; 3. the ordinary rule, row by row."""
    gamma = drafts.shape[1]
    chain = torch.cat([run.tokens[:, run.target.length :], drafts], dim=1)
    logits = run.target.feed(chain)[:, -(gamma + 1) :]
    p = probabilities(logits.reshape(-1, logits.shape[-1]), run.warpers).reshape(logits.shape)
    checks = []
    for r in range(len(run.rows)):
        ids = drafts[r].tolist()
        draft = Draft(ids, q[r] if q is not None else None, gamma)
        checks.append(RowCheck(ids, p[r], verify(p[r], draft, generator=run.generator, greedy=run.config.greedy)))
    return checks


def batch_round(run: BatchRun, gamma: int) -> int:
    """One round for the whole batch; returns m + 1, the tokens each row committed."""
    before = run.tokens.shape[1]
    length = min(gamma, run.config.max_new_tokens - run.produced - 1)  # the next token must fit the budget
    started = run.now()
    drafts, q = draft_tokens(run, length)
    drafted = run.now()
    new = cut_round(check_rows(run, drafts, q))
    run.verify_seconds += run.now() - drafted
    run.draft_seconds += drafted - started
    run.commit(new)
    step = len(new[0])
    # caches: keep the columns every row agrees with, minus the newest one (the next forward needs its logits)
    run.target.truncate(before + step - 1)
    run.draft.truncate(min(run.draft.length, before + step - 1))
    run.rounds += 1
    run.round_lengths.append(step)
    return step


def plain_step(run: BatchRun) -> None:
    """x_r,t+1 ~ p(. | x_r,1..x_r,t) for every row: one target forward over [B, pending], one draw per row."""
    logits = run.target.feed(run.tokens[:, run.target.length :])[:, -1]
    tokens = sample(probabilities(logits, run.warpers), run.generator, run.config.greedy)
    run.commit([[int(t)] for t in tokens])
    run.rounds += 1


@dataclass(frozen=True)
class BatchResult:
    token_ids: list[list[int]]  # new tokens per prompt, in the prompts' order
    seconds: float  # decoding only: from after the prompt pass to the end
    prefill_seconds: float
    rounds: int  # verify rounds (speculative) or target steps (plain)
    round_lengths: list[int]  # speculative: tokens each row committed per round (m + 1)
    draft_seconds: float
    verify_seconds: float

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.token_ids)

    @property
    def tokens_per_round(self) -> float:
        return sum(self.round_lengths) / len(self.round_lengths) if self.round_lengths else 1.0


def _result(run: BatchRun, started: float) -> BatchResult:
    return BatchResult(
        token_ids=run.outputs,
        seconds=run.now() - started,
        prefill_seconds=run.prefill_seconds,
        rounds=run.rounds,
        round_lengths=run.round_lengths,
        draft_seconds=run.draft_seconds,
        verify_seconds=run.verify_seconds,
    )


@torch.inference_mode()
def batch_speculative(
    pair, prompts: Sequence[Sequence[int]], config: SpecConfig, stop_at_eos: bool = True
) -> BatchResult:
    """Batched speculative decoding with a fixed draft length config.gamma."""
    run = start_batch(pair, prompts, config, speculative=True, stop_at_eos=stop_at_eos)
    started = run.now()
    while not run.done():
        batch_round(run, config.gamma)
    return _result(run, started)


@torch.inference_mode()
def batch_plain(pair, prompts: Sequence[Sequence[int]], config: SpecConfig, stop_at_eos: bool = True) -> BatchResult:
    """The baseline: the target alone over the same padded batch, one token per row per forward."""
    run = start_batch(pair, prompts, config, speculative=False, stop_at_eos=stop_at_eos)
    started = run.now()
    while not run.done():
        plain_step(run)
    return _result(run, started)
