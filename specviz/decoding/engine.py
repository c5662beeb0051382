"""Speculative decoding and its baseline, as generators of trace events.

The engine knows token ids only. Per-run state (a Run: KV caches, the torch.Generator, the drafter, the
committed ids, the clock) lives in the call; the shared models are never mutated. Notation: p = target,
q = draft, gamma = draft length, x = the committed tokens.

One round (see docs/DESIGN.md, "The engine"):
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
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import LogitsProcessorList

from specviz.errors import UserError

from .acceptance import Decision, verify
from .config import SpecConfig
from .costs import RoundCost, RoundCosts
from .events import Event, FinishReason, RoundEvent, RunSummary, TokenEvent, TokenProb
from .kvcache import CachedModel
from .proposal import Draft, DraftContext, Drafter, DrafterFactory
from .recording import CacheLengths, Round, Totals, round_event
from .sampling import build_warpers, probabilities, sample
from .schedule import AUTO_CONFIDENCE, AutoSchedule, draft_confidence, make_schedule, next_gamma
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
class Run:
    """Per-run state of either generator; the shared pair is only read."""

    pair: Any
    config: SpecConfig
    committed: list[int]  # prompt, then every committed token
    prompt_length: int
    warpers: LogitsProcessorList  # the transform applied to p and q alike
    generator: torch.Generator
    target: CachedModel
    eos: frozenset[int]  # end-of-sequence ids
    drafter: Drafter | None = None  # speculative runs only
    confidence: float = 0.0  # the draft's confidence stop
    branching: bool = False  # alternatives are verified in the same target forward
    start: float = 0.0  # perf_counter() when the prompt pass began
    prefill_seconds: float = 0.0
    ended_at_eos: bool = False
    costs: RoundCosts = field(default_factory=RoundCosts)  # the run's one cost model: learned here, read by the
    # schedule and the drafter

    @property
    def produced(self) -> int:
        return len(self.committed) - self.prompt_length

    def now(self) -> float:
        """A clock read after the device's queued work is done."""
        synchronize(self.target.device)
        return time.perf_counter()

    def stop_reason(self, cancel: threading.Event | None) -> FinishReason | None:
        """Why the run ends before another round or step; None while it goes on."""
        if self.ended_at_eos:
            return "eos"
        if self.produced >= self.config.max_new_tokens:
            return "length"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        return None

    def commit(self, tokens: list[int]) -> list[int]:
        """Append tokens up to and including an end-of-sequence token; return those appended."""
        end = next((i + 1 for i, token in enumerate(tokens) if token in self.eos), None)
        self.ended_at_eos = end is not None
        appended = tokens[:end]
        self.committed.extend(appended)
        return appended

    def summary(self, totals: Totals, finish: FinishReason) -> RunSummary:
        new_ids = self.committed[self.prompt_length :]
        seconds = time.perf_counter() - self.start
        return totals.summary(
            token_ids=new_ids,
            text=self.pair.decode(new_ids),
            seconds=seconds,
            prefill_seconds=self.prefill_seconds,
            finish=finish,
        )


def start_run(pair, prompt_ids: list[int], config: SpecConfig, drafter: DrafterFactory | None = None) -> Run:
    """Check the settings and the prompt, make the per-run state (with a drafter: a speculative run), and process the
    prompt once (its last token goes into the first verify; with fuse_prompt, all of it goes into the first round)."""
    config.validate()
    if not prompt_ids:
        raise EngineError("the prompt is empty: type some text first")
    width = vocab_width(pair)
    run = Run(
        pair=pair,
        config=config,
        committed=list(prompt_ids),
        prompt_length=len(prompt_ids),
        warpers=build_warpers(config),
        generator=make_generator(pair.target.device, config.seed),
        target=CachedModel(pair.target, width, keep_hidden=drafter is not None and drafter.needs_hidden_states),
        eos=pair.eos_ids,
    )
    if drafter is not None:
        run.drafter = drafter(DraftContext(pair, config, width, run.target, costs=run.costs))
        run.confidence = draft_confidence(config)
        run.branching = config.alternatives > 0 and run.target.can_branch
    run.start = run.now()
    if len(run.committed) > 1 and not config.fuse_prompt:
        run.target.feed(run.committed[:-1])
        if run.drafter is not None:
            run.drafter.prefill(run.committed[:-1])
    run.prefill_seconds = run.now() - run.start
    return run


# ---------------------------------------------------------------- speculative decoding: one round


def draft_phase(run: Run, length: int) -> tuple[Draft, list[int]]:
    """1. d_i ~ q_i, i = 1..n <= length (the drafter stops early at low confidence or end of sequence), and
    alternatives c_1..c_k for d_n as its siblings in a token tree (checked only if d_n is rejected); draft heads
    hedge with a tree of their own."""
    if length <= 0:
        return Draft([], None, 0), []
    draft = run.drafter.propose(
        run.committed,
        gamma=length,
        warpers=run.warpers,
        generator=run.generator,
        greedy=run.config.greedy,
        confidence=run.confidence,
    )
    alternatives = pick_alternatives(
        draft,
        count=run.config.alternatives if run.branching and not run.drafter.drafts_tree else 0,
        confidence=run.confidence,
        generator=run.generator,
        greedy=run.config.greedy,
    )
    return with_alternatives(draft, alternatives), alternatives


def verify_phase(run: Run, draft: Draft) -> tuple[torch.Tensor, Decision]:
    """2. One target forward over [pending x, d_1..d_n] and the draft's tree nodes gives p_1..p_{n+1}, then one row
    after each node; 3. accept a prefix of the chain (or a path down the tree), then a correction or a bonus token."""
    n = len(draft.ids)
    pending = run.target.pending(run.committed)
    # Node i (-1: the root) is fed at len(pending) + i, so each parent index shifts by as much.
    nodes = [(node.token, node.parent + len(pending)) for node in draft.tree]
    fed = run.target.feed_tree(pending + draft.ids, nodes, chain_rows=n + 1, committed=len(pending))
    p = probabilities(fed, run.warpers)
    if draft.tree:
        return p, verify_tree(p, draft, generator=run.generator, greedy=run.config.greedy)
    return p, verify(p, draft, generator=run.generator, greedy=run.config.greedy)


def commit_phase(run: Run, decision: Decision) -> list[int]:
    """4. Commit the kept tokens and the next one (up to an end of sequence); crop both caches to them."""
    appended = run.commit(decision.kept + [decision.next_token])
    run.target.rollback(run.committed)
    run.drafter.rollback(run.committed)
    return appended


def speculative_round(run: Run, gamma: int) -> Round:
    """One round: the four phases, with the clock and the cache lengths around them."""
    position = run.produced
    before = CacheLengths(target=run.target.length, draft=run.drafter.cache_length)
    length = min(gamma, run.config.max_new_tokens - position - 1)  # never past the budget: the next token must fit
    started = time.perf_counter()
    draft, alternatives = draft_phase(run, length)
    drafted = run.now()
    p, decision = verify_phase(run, draft)
    verified = run.now()
    appended = commit_phase(run, decision)
    return Round(
        position=position,
        gamma=length,
        draft=draft,
        alternatives=alternatives,
        p=p,
        decision=decision,
        appended=appended,
        caches_before=before,
        caches_after=CacheLengths(target=run.target.length, draft=run.drafter.cache_length),
        draft_seconds=drafted - started,
        verify_seconds=verified - drafted,
        started=started,
        ended=time.perf_counter(),
    )


def _recorded(run: Run, done: Round, index: int) -> RoundEvent:
    """The round's event, stamped with the time spent building it (top-k lists, token text)."""
    event = round_event(
        done, index=index, elapsed=done.ended - run.start, record_top=run.config.record_top, text=run.pair.token_text
    )
    return replace(event, bookkeeping_seconds=time.perf_counter() - done.ended)


def _cost(run: Run, done: Round, event: RoundEvent) -> RoundCost:
    """What the cost model, the schedule and the drafter learn; the round's seconds end before the yield (the
    consumer's time is not ours)."""
    return RoundCost(
        drafted=len(done.draft.ids),
        chain_accepted=done.decision.chain_accepted,
        committed=len(done.appended),
        seconds=done.ended + event.bookkeeping_seconds - done.started,
        verify_seconds=done.verify_seconds,
        with_prompt=event.index == 0 and run.config.fuse_prompt,
        model_tokens=done.draft.model_tokens,
        model_seconds=done.draft.model_seconds,
    )


@torch.inference_mode()
def speculative_generate(
    pair, prompt_ids: list[int], config: SpecConfig, drafter: DrafterFactory, cancel: threading.Event | None = None
) -> Iterator[Event]:
    """Yield one RoundEvent per draft-and-verify round, then a RunSummary. `drafter` makes the run's drafter
    (specviz.drafters.factory; specviz.runs.speculative_generate picks the config's)."""
    run = start_run(pair, prompt_ids, config, drafter)
    schedule = make_schedule(config, run.costs)
    totals = Totals("speculative")
    while (finish := run.stop_reason(cancel)) is None:
        done = speculative_round(run, schedule.next())
        event = _recorded(run, done, index=totals.rounds)
        totals.add(event)
        yield event
        cost = _cost(run, done, event)
        run.costs.learn(cost)  # once: the schedule and a drafter that chooses (the controller) read run.costs
        schedule.learn(cost)
        run.drafter.learn(cost)
    yield run.summary(totals, finish)


# ---------------------------------------------------------------- the baseline


def target_step(run: Run) -> TokenEvent:
    """x_{t+1} ~ p(. | x_1..x_t): one target forward over the pending token, one draw (argmax when greedy)."""
    started = time.perf_counter()
    p = probabilities(run.target.feed(run.target.pending(run.committed)), run.warpers)
    token = int(sample(p, run.generator, run.config.greedy)[0])
    ended = run.now()
    run.commit([token])
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
    run = start_run(pair, prompt_ids, config)
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
