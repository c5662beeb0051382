"""Events the engine yields, and the record of a whole run.

Every event is a frozen dataclass of plain values (ids, text, floats), so a page renders it and a
trace replays it without any model loaded. Reading and writing them as JSON is trace.py's job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal, Union

from .config import SpecConfig

TRACE_FORMAT = "specviz-trace"
TRACE_VERSION = 1

Verdict = Literal["accepted", "rejected", "unchecked"]  # unchecked: after the first rejection
NextSource = Literal["resampled", "bonus"]
FinishReason = Literal["eos", "length", "cancelled"]
Method = Literal["speculative", "autoregressive"]
DraftSource = str  # who drafted: one of a choosing drafter's `sources` (drafters/); "": one that does not choose


def decode_rate(tokens: int, seconds: float) -> float:
    """New tokens per second after the prompt pass (the same for both methods, so it is left out); 0 for no time."""
    return tokens / seconds if seconds > 0 and tokens else 0.0


@dataclass(frozen=True)
class TokenProb:
    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class DraftedToken:
    id: int
    text: str
    q: float  # q_i(d_i): the draft's probability of its own token (1.0 for the n-gram drafter)
    p: float  # p_i(d_i): the target's probability of the same token
    ratio: float  # min(1, p/q), the acceptance probability (a sampled alternative: min(1, r/q), r being
    # what the rejections before it left of p)
    u: float | None  # the uniform draw compared with ratio; None in greedy mode (argmax match)
    verdict: Verdict
    from_lookahead: bool = False  # its q came from a draft forward over prompt-lookup guesses (no forward of its own)


@dataclass(frozen=True)
class TreeToken:
    """An off-chain candidate of a tree draft (draft heads, decoding/tree.py), checked only if the walk reaches its
    parent: -1 the root (the newest committed token), 0..n-1 the drafted d_1..d_n, n + j the round's tree[j]."""

    id: int
    text: str
    q: float  # q_k of its token, k its depth
    p: float  # the target's probability of it after its parent
    ratio: float  # min(1, r/q), r being what the refusals of earlier siblings left of p (p itself when unchecked)
    u: float | None  # None in greedy mode, or unchecked
    verdict: Verdict
    parent: int


@dataclass(frozen=True)
class RoundEvent:
    index: int  # 0-based round number
    position: int  # new tokens committed before this round
    gamma: int  # draft length the schedule asked for
    drafted: tuple[DraftedToken, ...]  # can be shorter than gamma (confidence stop, n-gram miss, budget)
    n_accepted: int  # drafted tokens kept: the accepted prefix, plus a kept alternative
    rejection_index: int | None  # index into drafted of the first rejection, None if all accepted
    next_token: TokenProb  # the resampled token (prob from the residual) or the bonus (prob from p,
    # after the last draft or after a kept alternative)
    next_source: NextSource
    top_p: tuple[TokenProb, ...]  # top of p at the rejection (or bonus) position
    top_q: tuple[TokenProb, ...]  # top of q there (empty for a bonus or the n-gram drafter)
    top_residual: tuple[TokenProb, ...]  # top of norm(max(0, p - q)) there (empty for a bonus)
    appended: tuple[int, ...]  # token ids this round committed (accepted prefix + next, cut at EOS)
    target_cache_before: int  # KV cache lengths, before the round and after rollback
    target_cache_after: int
    draft_cache_before: int
    draft_cache_after: int
    draft_seconds: float  # device-synchronised wall time of the draft phase
    verify_seconds: float  # ... and of the target's single verify forward
    draft_forwards: int  # draft model forward passes this round (0 for n-gram)
    elapsed: float  # seconds since the run started, at the end of this round
    bookkeeping_seconds: float = 0.0  # time spent building this event (top-k lists, text)
    # Other candidates for the last drafted position, verified in the same target forward (a small token tree),
    # checked in order only if that draft was rejected; q and p are at that position. At most one is "accepted":
    # it is then appended in place of the rejected draft and the next token is a bonus after it.
    alternatives: tuple[DraftedToken, ...] = ()
    # The controller's choice this round (traffic.ControllerDrafter): its traffic drafter, the draft model, or both
    # (the model continuing the traffic draft); "traffic" for the traffic drafter; "" for the other drafters.
    draft_source: DraftSource = ""
    # A tree draft's off-chain candidates (draft heads with alternatives): the accepted ones form the path the walk
    # took after leaving the chain, each appended in turn; then the next token follows the last of them.
    tree: tuple[TreeToken, ...] = ()
    # The controller's own work this round, inside draft_seconds: its traffic lookup and its choice (and the previous
    # round's bookkeeping), outside the draft model's forwards; 0 for the other drafters.
    choice_seconds: float = 0.0

    @property
    def kept_alternative(self) -> DraftedToken | None:
        return next((a for a in self.alternatives if a.verdict == "accepted"), None)

    @property
    def tree_path(self) -> tuple[TreeToken, ...]:
        """The off-chain nodes kept, root side first."""
        return tuple(t for t in self.tree if t.verdict == "accepted")

    @property
    def chain_accepted(self) -> int:
        """Drafted tokens accepted in their own place (n_accepted without a kept alternative or tree path)."""
        return self.n_accepted - (self.kept_alternative is not None) - len(self.tree_path)


@dataclass(frozen=True)
class TokenEvent:
    index: int
    token: TokenProb  # the token the target produced and its probability under p
    seconds: float  # device-synchronised time of this one forward and sample
    elapsed: float  # seconds since the run started


@dataclass(frozen=True)
class RunSummary:
    method: Method
    token_ids: tuple[int, ...]
    text: str
    new_tokens: int
    rounds: int  # rounds (speculative) or steps (autoregressive)
    drafted: int
    accepted: int
    acceptance_rate: float  # accepted / drafted (0 when nothing was drafted)
    mean_accepted_per_round: float
    seconds: float  # wall time of the whole run, prefill included
    prefill_seconds: float
    tokens_per_second: float
    finish_reason: FinishReason
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    draft_forwards: int = 0
    bookkeeping_seconds: float = 0.0


Event = Union[RoundEvent, TokenEvent, RunSummary]


@dataclass(frozen=True)
class Trace:
    """One speculative run, optionally with the baseline run of the same prompt and settings."""

    config: SpecConfig
    pair: dict[str, str]  # target, draft, device, dtype: names only, for display
    prompt: str
    prompt_ids: tuple[int, ...]
    rounds: tuple[RoundEvent, ...]
    summary: RunSummary
    baseline: tuple[TokenEvent, ...] = ()
    baseline_summary: RunSummary | None = None
    note: str = ""  # free text, e.g. how a recorded trace was made

    def to_json(self) -> str:
        body = {"format": TRACE_FORMAT, "version": TRACE_VERSION, **asdict(self)}
        return json.dumps(body, ensure_ascii=False)
