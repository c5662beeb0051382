"""What the engine records: a Round (what one round did, tensors included) becomes a RoundEvent of plain
numbers and text; running Totals become the RunSummary of either generator. Nothing here touches a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .acceptance import Decision
from .events import (
    DraftedToken,
    FinishReason,
    Method,
    RoundEvent,
    RunSummary,
    TokenEvent,
    TokenProb,
    TreeToken,
    decode_rate,
)
from .metrics import SpecMetrics
from .proposal import Draft
from .sampling import acceptance_ratio
from .tree import depths

TokenText = Callable[[int], str]


@dataclass(frozen=True)
class CacheLengths:
    target: int
    draft: int


@dataclass(frozen=True)
class Round:
    """What one draft-and-verify round did."""

    position: int  # new tokens committed before the round
    gamma: int  # draft length asked for (the schedule's, within the token budget)
    draft: Draft
    alternatives: list[int]  # candidates for the last drafted position: the draft's tree nodes, when there are any
    p: torch.Tensor  # target probabilities: p_1..p_{n+1}, then one row after each tree node
    decision: Decision
    appended: list[int]  # committed this round: kept drafts and the next token, cut at end of sequence
    caches_before: CacheLengths
    caches_after: CacheLengths  # after the rollback
    draft_seconds: float
    verify_seconds: float
    started: float  # perf_counter() at the round's start and after its rollback
    ended: float


def round_event(done: Round, *, index: int, elapsed: float, record_top: int, text: TokenText) -> RoundEvent:
    """Turn one round into an event: plain numbers and text only."""
    decision, draft, p = done.decision, done.draft, done.p
    at = decision.next_row  # the row of p the next token came from: the rejection, the bonus row, or a tree node's
    corrected = decision.corrected
    q_at = decision.q_row if decision.q_row is not None else at
    return RoundEvent(
        index=index,
        position=done.position,
        gamma=done.gamma,
        drafted=_drafted(done, text),
        n_accepted=decision.n_accepted,
        rejection_index=decision.rejection_index,
        next_token=TokenProb(decision.next_token, text(decision.next_token), decision.next_prob),
        next_source="resampled" if corrected else "bonus",
        top_p=_top(p[at], record_top, text),
        top_q=_top(draft.q[q_at], record_top, text) if corrected and draft.q is not None else (),
        top_residual=_top(decision.residual_row, record_top, text) if corrected else (),
        appended=tuple(done.appended),
        target_cache_before=done.caches_before.target,
        target_cache_after=done.caches_after.target,
        draft_cache_before=done.caches_before.draft,
        draft_cache_after=done.caches_after.draft,
        draft_seconds=done.draft_seconds,
        verify_seconds=done.verify_seconds,
        draft_forwards=draft.forwards,
        elapsed=elapsed,
        alternatives=_branch(done, text),
        draft_source=draft.source,
        tree=_tree(done, text),
        choice_seconds=draft.choice_seconds,
    )


def _drafted(done: Round, text: TokenText) -> tuple[DraftedToken, ...]:
    """Each drafted token with q_i(d_i), p_i(d_i), its ratio, its draw and its verdict."""
    ids, decision = done.draft.ids, done.decision
    rows = torch.arange(len(ids), device=done.p.device)
    id_tensor = torch.tensor(ids, dtype=torch.long, device=done.p.device)
    p_of_d = done.p[rows, id_tensor].tolist() if ids else []
    q = done.draft.q
    q_of_d = q[rows, id_tensor].tolist() if q is not None and ids else [1.0] * len(ids)  # n-gram: a point mass
    rejection = decision.rejection_index if decision.rejection_index is not None else len(ids)
    lookahead = done.draft.from_lookahead
    return tuple(
        DraftedToken(
            token,
            text(token),
            q_of_d[i],
            p_of_d[i],
            decision.ratios[i],
            decision.u[i] if i < len(decision.u) else None,
            "accepted" if i < rejection else ("rejected" if i == rejection else "unchecked"),
            i < len(lookahead) and lookahead[i],
        )
        for i, token in enumerate(ids)
    )


def _branch(done: Round, text: TokenText) -> tuple[DraftedToken, ...]:
    """The alternatives (tree nodes 0..k-1, siblings of d_n), with p and q at the last drafted position, where they
    compete with d_n; (ratio, u) as the walk checked them."""
    decision, q, p_last = done.decision, done.draft.q, done.p[len(done.draft.ids) - 1]
    branch = []
    for m, token in enumerate(done.alternatives):
        unchecked = (float(acceptance_ratio(p_last[token], q[-1, token])), None)
        ratio, u = decision.tree_checks.get(m, unchecked)
        verdict = "accepted" if m in decision.tree_path else ("rejected" if m in decision.tree_checks else "unchecked")
        branch.append(DraftedToken(token, text(token), float(q[-1, token]), float(p_last[token]), ratio, u, verdict))
    return tuple(branch)


def _tree(done: Round, text: TokenText) -> tuple[TreeToken, ...]:
    """A tree draft's off-chain nodes with p after their parent and q at their depth (tree.py's numbering)."""
    draft, decision = done.draft, done.decision
    if done.alternatives:  # the tree is the alternatives: shown beside d_n (_branch)
        return ()
    n = len(draft.ids)
    nodes = []
    for j, (node, depth) in enumerate(zip(draft.tree, depths(n, draft.tree), strict=True)):
        p_of, q_of = float(done.p[node.parent + 1, node.token]), float(draft.q[depth - 1, node.token])
        ratio, u = decision.tree_checks.get(j, (float(acceptance_ratio(torch.tensor(p_of), torch.tensor(q_of))), None))
        verdict = "accepted" if j in decision.tree_path else ("rejected" if j in decision.tree_checks else "unchecked")
        nodes.append(TreeToken(node.token, text(node.token), q_of, p_of, ratio, u, verdict, node.parent))
    return tuple(nodes)


def _top(probs: torch.Tensor, k: int, text: TokenText) -> tuple[TokenProb, ...]:
    values, indices = torch.topk(probs, min(k, probs.shape[-1]))
    pairs = zip(values.tolist(), indices.tolist(), strict=True)
    return tuple(TokenProb(int(i), text(int(i)), float(v)) for v, i in pairs)


@dataclass
class Totals:
    """A run's running totals, from its events; summary() makes the RunSummary of either generator."""

    method: Method
    rounds: int = 0  # rounds (speculative) or steps (autoregressive)
    metrics: SpecMetrics = SpecMetrics()  # the rounds' drafts, as the serving engines count them (metrics.py)
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    draft_forwards: int = 0
    bookkeeping_seconds: float = 0.0

    def add(self, event: RoundEvent | TokenEvent) -> None:
        self.rounds += 1
        if isinstance(event, RoundEvent):
            self.metrics += SpecMetrics.from_rounds([(event.n_accepted, len(event.drafted))])
            self.draft_seconds += event.draft_seconds
            self.verify_seconds += event.verify_seconds
            self.draft_forwards += event.draft_forwards
            self.bookkeeping_seconds += event.bookkeeping_seconds

    def summary(
        self, *, token_ids: list[int], text: str, seconds: float, prefill_seconds: float, finish: FinishReason
    ) -> RunSummary:
        decode_seconds = seconds - prefill_seconds
        return RunSummary(
            method=self.method,
            token_ids=tuple(token_ids),
            text=text,
            new_tokens=len(token_ids),
            rounds=self.rounds,
            drafted=self.metrics.draft_tokens,
            accepted=self.metrics.accepted_tokens,
            acceptance_rate=self.metrics.acceptance_rate or 0.0,
            mean_accepted_per_round=self.metrics.accepted_per_round or 0.0,
            seconds=seconds,
            prefill_seconds=prefill_seconds,
            tokens_per_second=decode_rate(len(token_ids), decode_seconds),
            finish_reason=finish,
            draft_seconds=self.draft_seconds,
            draft_forwards=self.draft_forwards,
            # the baseline has one phase: all its decoding time is the target's
            verify_seconds=self.verify_seconds if self.method == "speculative" else decode_seconds,
            bookkeeping_seconds=self.bookkeeping_seconds,
        )
