"""Speculative decoding and its baseline, as generators of trace events.

The engine knows token ids only. Per-run state (a Run: KV caches, the torch.Generator, the drafter, each row's
committed ids, the clock) lives in the call; the shared models are never mutated. Notation: p = target,
q = draft, gamma = draft length, x = the committed tokens.

One round, the same for one row (the generators below, which the pages step through) and for B rows (batch.py): each
phase takes every row still decoding, on a CachedModel for one row and a BatchCache for more (see docs/DESIGN.md,
"The engine"):
  1. draft   d_i ~ q_i = transform(draft logits | x, d_<i),  i = 1..n <= gamma  (a Drafter, proposal.py); the
             draft heads hedge with a token tree of their own, a draft model with alternatives c_1..c_k to d_n
             when it is unsure of it: siblings of d_n in the same tree (tree.py)
  2. verify  one target forward over [x_last, d_1..d_n] and the tree's nodes, each seeing its own path, gives
             p_1..p_{n+1} and a row after each off-chain node
  3. accept  a prefix of the chain, or a path down the tree, then a correction or a bonus token (acceptance.verify
             for a chain; tree.verify_tree, the one walk, for anything with candidates off the chain)
  4. commit  the kept tokens, and roll both KV caches back to them (DynamicCache.crop)
gamma per round comes from a schedule (schedule.py); events are built beside the round (recording.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import LogitsProcessorList

from specviz.errors import UserError

from .acceptance import RAGGED, RULES, Decision, RowCheck, cut_outcomes, ragged_outcomes, verify
from .batchcache import BatchCache
from .config import SpecConfig
from .costs import RoundCost, RoundCosts
from .events import Event, FinishReason, RoundEvent, RunSummary, TokenEvent, TokenProb
from .kvcache import CachedModel
from .proposal import Draft, DraftContext, Drafter, DrafterFactory
from .recording import CacheLengths, Round, Totals, round_event
from .sampling import build_warpers, probabilities, sample
from .schedule import AUTO_CONFIDENCE, AutoSchedule, Schedule, draft_confidence, make_schedule, next_gamma
from .tree import pick_alternatives, verify_tree, with_alternatives

__all__ = [
    "AUTO_CONFIDENCE",
    "AutoSchedule",
    "EngineError",
    "autoregressive_generate",
    "make_generator",
    "next_gamma",
    "run_to_end",
    "speculative_generate",
    "synchronize",
    "vocab_width",
]


MAX_BATCH = 64  # rows one run takes (the bench's --batch and the app's batch list are capped here)


class EngineError(UserError, RuntimeError):
    """A run that cannot start with this pair and these settings."""


def vocab_width(pair) -> int:
    """Width of p and q: the target's ids. A narrower draft head gives q = 0 on the ids it lacks; a wider one's
    extra ids are cut, so the draft never proposes an id the target cannot embed (q is renormalised over the
    target's ids; speculative sampling stays exact for any q, and p would be 0 there anyway)."""
    return pair.target.config.get_text_config().vocab_size


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so that a clock read measures the work, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def make_generator(device: torch.device, seed: int) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


@dataclass
class Row:
    """One prompt of a run and what it has committed."""

    index: int  # its place among the run's prompts
    committed: list[int]  # prompt, then every committed token
    prompt_length: int
    ended_at_eos: bool = False

    @property
    def produced(self) -> int:
        return len(self.committed) - self.prompt_length

    def commit(self, tokens: list[int], eos: frozenset[int], budget: int) -> list[int]:
        """Append tokens within the budget, up to and including an end-of-sequence token; return those appended."""
        tokens = tokens[: budget - self.produced]
        end = next((i + 1 for i, token in enumerate(tokens) if token in eos), None)
        self.ended_at_eos = end is not None
        appended = tokens[:end]
        self.committed.extend(appended)
        return appended

    def finished(self, budget: int) -> bool:
        return self.ended_at_eos or self.produced >= budget

    def reason(self) -> FinishReason:
        return "eos" if self.ended_at_eos else "length"


@dataclass
class Run:
    """Per-run state of either generator, for B >= 1 rows; the shared pair is only read."""

    pair: Any
    config: SpecConfig
    rows: list[Row]  # every prompt's row, in the prompts' order
    warpers: LogitsProcessorList  # the transform applied to p and q alike
    generator: torch.Generator  # one for the whole run: a row's draws are exact whatever the other rows draw
    target: CachedModel | BatchCache  # one row: the row-invariant cache with trees; more: the ragged batch's
    eos: frozenset[int]  # end-of-sequence ids (none when a bench runs every row to its budget)
    active: list[Row] = field(default_factory=list)  # the rows still decoding, in the caches' row order
    drafter: Drafter | None = None  # speculative runs only
    rule: str = RAGGED  # how a batch's rows commit (acceptance.RULES); one row: the ordinary rule either way
    confidence: float = 0.0  # the draft's confidence stop
    branching: bool = False  # alternatives are verified in the same target forward
    start: float = 0.0  # perf_counter() when the prompt pass began
    prefill_seconds: float = 0.0
    costs: RoundCosts = field(default_factory=RoundCosts)  # the run's one cost model: learned here, read by the
    # schedule and the drafter

    @property
    def row(self) -> Row:
        """The one row of a run of one prompt (the engine a learner steps through)."""
        return self.rows[0]

    @property
    def committed(self) -> list[int]:
        return self.row.committed

    @property
    def produced(self) -> int:
        return self.row.produced

    def now(self) -> float:
        """A clock read after the device's queued work is done."""
        synchronize(self.target.device)
        return time.perf_counter()

    def stop_reason(self, cancel: threading.Event | None) -> FinishReason | None:
        """Why the run ends before another round or step; None while a row goes on. With several rows it ends
        "length" or "eos" as its first row did."""
        if all(row.finished(self.config.max_new_tokens) for row in self.active):
            return self.row.reason()
        if cancel is not None and cancel.is_set():
            return "cancelled"
        return None

    def retire(self) -> None:
        """Finished rows leave the batch: the caches drop their rows (a run of one row just ends)."""
        still = [i for i, row in enumerate(self.active) if not row.finished(self.config.max_new_tokens)]
        if len(still) == len(self.active):
            return
        if still:
            self.target.keep_rows(still)
            if self.drafter is not None:
                self.drafter.keep_rows(still)
        self.active = [self.active[i] for i in still]

    def committed_rows(self) -> list[list[int]]:
        return [row.committed for row in self.active]

    def summary(self, totals: Totals, finish: FinishReason) -> RunSummary:
        new_ids = self.committed[self.row.prompt_length :]
        seconds = time.perf_counter() - self.start
        return totals.summary(
            token_ids=new_ids,
            text=self.pair.decode(new_ids),
            seconds=seconds,
            prefill_seconds=self.prefill_seconds,
            finish=finish,
        )


def start_run(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    drafter: DrafterFactory | None = None,
    *,
    stop_at_eos: bool = True,
    rule: str = RAGGED,
) -> Run:
    """Check the settings and the prompts, make the per-run state (with a drafter: a speculative run), and process
    the prompts once (each one's last token goes into the first verify; with fuse_prompt, all of it goes into the
    first round). One prompt runs on kvcache.CachedModel, several on a batchcache.BatchCache."""
    config.validate()
    if not prompts or any(len(prompt) == 0 for prompt in prompts):
        raise EngineError(
            "the prompt is empty: type some text first"
            if len(prompts) <= 1
            else "every prompt of the batch needs at least one token"
        )
    if len(prompts) > MAX_BATCH:
        raise EngineError(f"a batch holds at most {MAX_BATCH} prompts, got {len(prompts)}")
    if rule not in RULES:
        raise EngineError(f"the batch's rule is one of {', '.join(RULES)}, got {rule!r}")
    if len(prompts) > 1 and config.alternatives:
        raise EngineError(
            "a batch verifies chains: alternatives (token trees) need one prompt, whose verify gives every node its "
            "own mask (set alternatives to 0)"
        )
    width = vocab_width(pair)
    keep_hidden = drafter is not None and drafter.needs_hidden_states
    if len(prompts) == 1:
        target: CachedModel | BatchCache = CachedModel(pair.target, width, keep_hidden=keep_hidden)
    else:
        target = BatchCache(pair.target, width, torch.zeros(len(prompts), dtype=torch.long), keep_hidden=keep_hidden)
    rows = [Row(index, list(prompt), len(prompt)) for index, prompt in enumerate(prompts)]
    run = Run(
        pair=pair,
        config=config,
        rows=rows,
        active=list(rows),
        warpers=build_warpers(config),
        generator=make_generator(pair.target.device, config.seed),
        target=target,
        eos=pair.eos_ids if stop_at_eos else frozenset(),
        rule=rule,
    )
    if drafter is not None:
        run.drafter = drafter(DraftContext(pair, config, width, target, costs=run.costs, rows=len(prompts)))
        run.confidence = draft_confidence(config)
        run.branching = config.alternatives > 0 and getattr(target, "can_branch", False)
    run.start = run.now()
    if max(map(len, prompts)) > 1 and not config.fuse_prompt:
        before_last = [row.committed[:-1] for row in rows]
        run.target.feed_rows(before_last)
        if run.drafter is not None:
            run.drafter.prefill(before_last)
    run.prefill_seconds = run.now() - run.start
    return run


# ---------------------------------------------------------------- speculative decoding: one round, B >= 1 rows


def draft_phase(run: Run, lengths: list[int]) -> tuple[list[Draft], list[list[int]]]:
    """1. d_r,i ~ q_r,i, i = 1..n_r <= lengths[r] for each row (the drafter stops early at low confidence or end of
    sequence), and alternatives c_1..c_k for d_n as its siblings in a token tree (one row; checked only if d_n is
    rejected); draft heads hedge with a tree of their own (one row)."""
    if not any(lengths):
        return [Draft([], None, 0) for _ in lengths], [[] for _ in lengths]
    config = run.config
    drafts = run.drafter.propose(
        run.committed_rows(), lengths, run.warpers, run.generator, config.greedy, run.confidence
    )
    out, alternatives = [], []
    for draft in drafts:
        picked = pick_alternatives(
            draft,
            count=run.config.alternatives if run.branching and not run.drafter.drafts_tree else 0,
            confidence=run.confidence,
            generator=run.generator,
            greedy=run.config.greedy,
        )
        out.append(with_alternatives(draft, picked))
        alternatives.append(picked)
    return out, alternatives


def verify_phase(run: Run, drafts: list[Draft]) -> list[tuple[torch.Tensor, Decision]]:
    """2. One target forward over each row's [pending x, d_1..d_n] (and, for one row, the draft's tree nodes) gives
    p_1..p_{n+1}, then one row after each node; 3. per row, accept a prefix of the chain (or a path down the tree),
    then a correction or a bonus token."""
    greedy = run.config.greedy
    if isinstance(run.target, CachedModel):  # one row: its verify may carry a tree
        (draft,) = drafts
        n = len(draft.ids)
        pending = run.target.pending(run.committed)
        # Node i (-1: the root) is fed at len(pending) + i, so each parent index shifts by as much.
        nodes = [(node.token, node.parent + len(pending)) for node in draft.tree]
        fed = run.target.feed_tree(pending + draft.ids, nodes, chain_rows=n + 1, committed=len(pending))
        p = probabilities(fed, run.warpers)
        if draft.tree:
            return [(p, verify_tree(p, draft, generator=run.generator, greedy=greedy))]
        return [(p, verify(p, draft, generator=run.generator, greedy=greedy))]
    # A batch: each row's chain at the right end of one forward (holes on the left of shorter ones).
    keep = max(len(draft.ids) for draft in drafts) + 1
    pending = run.target.pending_rows(run.committed_rows())
    chains = [tokens + draft.ids for tokens, draft in zip(pending, drafts, strict=True)]
    logits = run.target.feed_rows(chains, keep=keep)
    checked = []
    for r, draft in enumerate(drafts):
        p = probabilities(logits[r, keep - len(draft.ids) - 1 :], run.warpers)
        checked.append((p, verify(p, draft, generator=run.generator, greedy=greedy)))
    return checked


def commit_phase(run: Run, drafts: list[Draft], checked: list[tuple[torch.Tensor, Decision]]) -> list[list[int]]:
    """4. Each row commits its kept tokens and the next one (up to an end of sequence; a batch under min-cut: the
    shortest row's count); both caches roll back to what each row committed."""
    checks = [RowCheck(draft.ids, p, decision) for draft, (p, decision) in zip(drafts, checked, strict=True)]
    outcomes = ragged_outcomes(checks) if run.rule == RAGGED else cut_outcomes(checks)
    budget = run.config.max_new_tokens
    appended = [row.commit(tokens, run.eos, budget) for row, tokens in zip(run.active, outcomes, strict=True)]
    run.target.rollback_rows(run.committed_rows())
    run.drafter.rollback(run.committed_rows())
    return appended


def speculative_round(run: Run, gamma: int) -> list[Round]:
    """One round over the run's rows: the four phases, with the clock and the cache lengths around them."""
    run.retire()
    rows = run.active
    positions = [row.produced for row in rows]
    before = list(zip(run.target.lengths(), run.drafter.cache_lengths(), strict=True))
    # never past a row's budget: its next token must fit
    lengths = [min(gamma, run.config.max_new_tokens - position - 1) for position in positions]
    started = time.perf_counter()
    drafts, alternatives = draft_phase(run, lengths)
    drafted = run.now()
    checked = verify_phase(run, drafts)
    verified = run.now()
    appended = commit_phase(run, drafts, checked)
    after = list(zip(run.target.lengths(), run.drafter.cache_lengths(), strict=True))
    ended = time.perf_counter()
    return [
        Round(
            position=positions[r],
            gamma=lengths[r],
            draft=drafts[r],
            alternatives=alternatives[r],
            p=checked[r][0],
            decision=checked[r][1],
            appended=appended[r],
            caches_before=CacheLengths(*before[r]),
            caches_after=CacheLengths(*after[r]),
            draft_seconds=drafted - started,
            verify_seconds=verified - drafted,
            started=started,
            ended=ended,
        )
        for r in range(len(rows))
    ]


def _recorded(run: Run, done: Round, index: int) -> RoundEvent:
    """The round's event, stamped with the time spent building it (top-k lists, token text)."""
    event = round_event(
        done, index=index, elapsed=done.ended - run.start, record_top=run.config.record_top, text=run.pair.token_text
    )
    return replace(event, bookkeeping_seconds=time.perf_counter() - done.ended)


def round_costs(run: Run, rounds: list[Round], index: int, bookkeeping: float = 0.0) -> list[RoundCost]:
    """What each row's round cost: what the cost model, the schedule and the drafter learn. The round's seconds end
    before the yield (the consumer's time is not ours); the rows of a batch share its seconds."""
    return [
        RoundCost(
            drafted=len(done.draft.ids),
            chain_accepted=done.decision.chain_accepted,
            committed=len(done.appended),
            seconds=done.ended + bookkeeping - done.started,
            verify_seconds=done.verify_seconds,
            with_prompt=index == 0 and run.config.fuse_prompt,
            model_tokens=done.draft.model_tokens,
            model_seconds=done.draft.model_seconds,
        )
        for done in rounds
    ]


def learn(run: Run, schedule: Schedule, costs: list[RoundCost]) -> None:
    """Once per round: the run's cost model and the schedule learn the round (a batch's rows summed into one round of
    the batch), the drafter each row's."""
    whole = (
        costs[0]
        if len(costs) == 1
        else RoundCost(
            drafted=sum(c.drafted for c in costs),
            chain_accepted=sum(c.chain_accepted for c in costs),
            committed=sum(c.committed for c in costs),
            seconds=costs[0].seconds,
            verify_seconds=costs[0].verify_seconds,
            with_prompt=costs[0].with_prompt,
            model_tokens=sum(c.model_tokens for c in costs),
            model_seconds=max(c.model_seconds for c in costs),
        )
    )
    run.costs.learn(whole)  # once: the schedule and a drafter that chooses (the controller) read run.costs
    schedule.learn(whole)
    run.drafter.learn(costs)


@torch.inference_mode()
def speculative_generate(
    pair, prompt_ids: list[int], config: SpecConfig, drafter: DrafterFactory, cancel: threading.Event | None = None
) -> Iterator[Event]:
    """Yield one RoundEvent per draft-and-verify round, then a RunSummary. `drafter` makes the run's drafter
    (specviz.drafters.factory; specviz.runs.speculative_generate picks the config's). The same round as a batch's
    (batch.py), for one row."""
    run = start_run(pair, [prompt_ids], config, drafter)
    schedule = make_schedule(config, run.costs)
    totals = Totals("speculative")
    while (finish := run.stop_reason(cancel)) is None:
        (done,) = speculative_round(run, schedule.next())
        event = _recorded(run, done, index=totals.rounds)
        totals.add(event)
        yield event
        learn(run, schedule, round_costs(run, [done], event.index, event.bookkeeping_seconds))
    yield run.summary(totals, finish)


# ---------------------------------------------------------------- the baseline


def plain_step(run: Run) -> list[tuple[list[int], torch.Tensor]]:
    """x_r,t+1 ~ p(. | x_r,1..x_r,t) for each row: one target forward over the rows' pending tokens, one draw per row
    (argmax when greedy). Returns each row's (appended tokens, p)."""
    run.retire()
    pending = run.target.pending_rows(run.committed_rows())
    p = probabilities(run.target.feed_rows(pending)[:, -1], run.warpers)
    tokens = sample(p, run.generator, run.config.greedy).tolist()
    budget = run.config.max_new_tokens
    return [
        (row.commit([int(token)], run.eos, budget), p[r : r + 1])
        for r, (row, token) in enumerate(zip(run.active, tokens, strict=True))
    ]


def target_step(run: Run) -> TokenEvent:
    """One plain step of a one-row run, as an event."""
    started = time.perf_counter()
    ((appended, p),) = plain_step(run)
    ended = run.now()
    token = appended[0]
    return TokenEvent(
        index=run.produced - 1,
        token=TokenProb(token, run.pair.token_text(token), float(p[0, token])),
        seconds=ended - started,
        elapsed=ended - run.start,
    )


@torch.inference_mode()
def autoregressive_generate(
    pair, prompt_ids: list[int], config: SpecConfig, cancel: threading.Event | None = None
) -> Iterator[Event]:
    """The baseline: the target alone, same transform, KV cache, one TokenEvent per token, then a RunSummary."""
    run = start_run(pair, [prompt_ids], config)
    totals = Totals("autoregressive")
    while (finish := run.stop_reason(cancel)) is None:
        event = target_step(run)
        totals.add(event)
        yield event
    yield run.summary(totals, finish)


def run_to_end(events: Iterator[Event]) -> tuple[list, RunSummary]:
    """Drain a generator: (the per-round or per-token events, the summary)."""
    steps = []
    for event in events:
        if isinstance(event, RunSummary):
            return steps, event
        steps.append(event)
    raise EngineError("the run ended without a summary")
