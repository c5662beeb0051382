"""A batch: B prompts through the engine's one round (engine.speculative_round), and what the batch measured.

The round is the engine's, for B rows (see docs/DESIGN.md, "Batching"):
  1. draft   the run's drafter proposes for every row (the draft model: one batched forward per draft step over the
             rows still drafting, the first one over each row's pending tokens; a lookup or the heads row by row)
  2. verify  one target forward over every row's [x_r,last, d_r,1..d_r,n_r], right-aligned: p_r,1..p_r,n_r+1
  3. accept  per row, the ordinary rule (acceptance.verify): row r accepts j_r drafts, then a correction or bonus
  4. commit  ragged (what serving engines do): row r commits its own j_r + 1 tokens and keeps its own cache length
             (batchcache.py); min-cut (the page's comparison): every row commits m + 1 = min_r j_r + 1 tokens
             (acceptance.cut_outcomes); the batch waits for its slowest row.
A row that ends (end of sequence or its budget) leaves the batch. This module only drives the rounds and counts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .acceptance import MIN_CUT, RAGGED, RULES, RowCheck, cut_outcomes, ragged_outcomes
from .config import SpecConfig
from .engine import MAX_BATCH, Run, learn, plain_step, round_costs, speculative_round, start_run
from .metrics import SpecMetrics
from .proposal import DrafterFactory
from .schedule import make_schedule

__all__ = [
    "MAX_BATCH",
    "MIN_CUT",
    "RAGGED",
    "RULES",
    "BatchResult",
    "RowCheck",
    "batch_plain",
    "batch_speculative",
    "cut_outcomes",
    "expected_acceptance",
    "ragged_outcomes",
]


@dataclass(frozen=True)
class BatchResult:
    token_ids: list[list[int]]  # new tokens per prompt, in the prompts' order
    seconds: float  # decoding only: from after the prompt pass to the end
    prefill_seconds: float
    rounds: int  # verify rounds (speculative) or target steps (plain)
    row_rounds: list[int]  # speculative: tokens one row committed in one round, every (row, round)
    shapes: list[tuple[int, int, int]]  # (rows in the batch, most tokens a row drafted, the draft's first forward's
    # tokens per row) of each round or plain step (drafted 0): it shrinks as rows finish, the last round drafts to the
    # budget
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


@dataclass
class _Counts:
    rounds: int = 0
    accepted: int = 0
    rejected: int = 0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    metrics: SpecMetrics = SpecMetrics()
    row_rounds: list[int] = field(default_factory=list)
    shapes: list[tuple[int, int, int]] = field(default_factory=list)


def _shape(run: Run, gamma: int) -> tuple[int, int, int]:
    """(rows, most tokens a row may draft, the longest catch-up a draft cache takes in its first forward)."""
    budget = run.config.max_new_tokens
    length = max(min(gamma, budget - row.produced - 1) for row in run.active)
    catch_up = 0
    if length and run.drafter.keeps_cache:
        held = run.drafter.cache_lengths()
        catch_up = max(len(row.committed) - count for row, count in zip(run.active, held, strict=True))
    return len(run.active), length, catch_up


def _result(run: Run, counts: _Counts, seconds: float) -> BatchResult:
    return BatchResult(
        token_ids=[row.committed[row.prompt_length :] for row in run.rows],
        seconds=seconds,
        prefill_seconds=run.prefill_seconds,
        rounds=counts.rounds,
        row_rounds=counts.row_rounds,
        shapes=counts.shapes,
        accepted=counts.accepted,
        rejected=counts.rejected,
        draft_seconds=counts.draft_seconds,
        verify_seconds=counts.verify_seconds,
        metrics=counts.metrics,
    )


@torch.inference_mode()
def batch_speculative(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    drafter: DrafterFactory,
    stop_at_eos: bool = True,
    rule: str = RAGGED,
    cancel: threading.Event | None = None,
) -> BatchResult:
    """Speculative decoding of every prompt at once with `drafter` (specviz.runs.batch_speculative picks the
    config's); rule: ragged or min-cut. A set `cancel` ends it between two rounds (the rows as far as they got)."""
    run = start_run(pair, prompts, config, drafter, stop_at_eos=stop_at_eos, rule=rule)
    schedule, counts = make_schedule(config, run.costs), _Counts()
    started = run.now()
    while run.stop_reason(cancel) is None:
        run.retire()
        gamma = schedule.next()
        counts.shapes.append(_shape(run, gamma))
        rounds = speculative_round(run, gamma)
        counts.rounds += 1
        counts.row_rounds.extend(len(done.appended) for done in rounds)
        counts.accepted += sum(done.decision.n_accepted for done in rounds)
        counts.rejected += sum(done.decision.rejection_index is not None for done in rounds)
        counts.metrics += SpecMetrics.from_rounds((done.decision.n_accepted, len(done.draft.ids)) for done in rounds)
        counts.draft_seconds += rounds[0].draft_seconds
        counts.verify_seconds += rounds[0].verify_seconds
        learn(run, schedule, round_costs(run, rounds, counts.rounds - 1))
    return _result(run, counts, run.now() - started)


@torch.inference_mode()
def batch_plain(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    stop_at_eos: bool = True,
    cancel: threading.Event | None = None,
) -> BatchResult:
    """The baseline: the target alone over the same batch, one token per row per forward (`cancel` as above)."""
    run = start_run(pair, prompts, config, stop_at_eos=stop_at_eos)
    counts = _Counts()
    started = run.now()
    while run.stop_reason(cancel) is None:
        run.retire()
        counts.shapes.append((len(run.active), 0, 0))
        plain_step(run)
        counts.rounds += 1
    return _result(run, counts, run.now() - started)
