"""Step 3 of a round, for a chain draft: which drafted tokens the target keeps, and the token that follows them.

Speculative sampling (Leviathan et al. 2023, Chen et al. 2023): accept d_i while u_i < min(1, p_i(d_i) / q_i(d_i))
(u_i uniform on [0, 1), so P(accept) is exactly the ratio: with <= a token of p = 0 would pass when u_i = 0);
at the first rejection j draw from norm(max(0, p_j - q_j)); if all are accepted draw a bonus token from p_{n+1}.
Greedy: accept while d_i == argmax p_i; the correction or bonus is argmax p. Either way the committed tokens
follow p exactly, whatever q is. A draft with candidates off the chain (alternatives, the heads' trees) is a token
tree, walked by tree.verify_tree; a chain is the tree without them, checked here in one vectorised step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .proposal import Draft
from .sampling import acceptance_ratio, residual, sample


@dataclass(frozen=True)
class Decision:
    """The target's decision on one draft (events.Verdict is the per-token label the events show)."""

    kept: list[int]  # drafted tokens the target kept: the accepted prefix, then the off-chain nodes kept
    rejection_index: int | None  # index into the chain of the first rejected token; None if all accepted
    next_token: int
    next_prob: float  # probability of next_token under the distribution it came from
    next_row: int  # the row of p the next token came from
    u: list[float | None]  # draws used, one per checked chain token
    ratios: list[float]  # min(1, p/q) per chain token
    residual_row: torch.Tensor | None  # the distribution a correction was drawn from (what is left of p); else None
    # A tree draft (tree.py): the off-chain nodes kept, in path order; (ratio, u) of each off-chain node checked;
    # the row of q whose residual a correction was drawn from.
    tree_path: tuple[int, ...] = ()
    tree_checks: dict[int, tuple[float, float | None]] = field(default_factory=dict)
    q_row: int | None = None

    @property
    def n_accepted(self) -> int:
        return len(self.kept)

    @property
    def corrected(self) -> bool:
        """The next token replaces a rejected candidate (else it is a bonus, after the last token kept)."""
        return self.residual_row is not None

    @property
    def chain_accepted(self) -> int:
        """Drafted tokens accepted in their own place: the accepted prefix, without the off-chain nodes kept."""
        return len(self.kept) - len(self.tree_path)


def verify(p: torch.Tensor, draft: Draft, generator: torch.Generator | None, greedy: bool) -> Decision:
    """Accept a prefix of the chain d_1..d_n, then resample or take the bonus token. p: [n + 1, V], the target's
    probabilities at the n drafted positions and one more."""
    n = len(draft.ids)
    ids = torch.tensor(draft.ids, dtype=torch.long, device=p.device)
    ratios, draws, j = _check_chain(p, draft, ids, generator=generator, greedy=greedy)
    if j == n:  # all accepted: a bonus token from p_{n+1}
        token = int(sample(p[n : n + 1], generator, greedy)[0])
        return Decision(draft.ids, None, token, float(p[n, token]), n, draws, ratios, residual_row=None)
    # Rejected at j: the correction from norm(max(0, p_j - q_j)); greedy: argmax p_j, the target's own token.
    q_j = draft.q[j] if draft.q is not None else torch.nn.functional.one_hot(ids[j], p.shape[-1]).to(p.dtype)
    left = residual(p[j], q_j)
    token = int(p[j].argmax()) if greedy else int(sample(left[None], generator, False)[0])
    prob = float(p[j, token] if greedy else left[token])
    return Decision(draft.ids[:j], j, token, prob, j, draws[: j + 1], ratios, residual_row=left)


def _check_chain(
    p: torch.Tensor, draft: Draft, ids: torch.Tensor, *, generator: torch.Generator | None, greedy: bool
) -> tuple[list[float], list[float | None], int]:
    """(min(1, p_i(d_i) / q_i(d_i)) per drafted token, the draws u_i (None when greedy), the first rejected index j
    (n if none)). A point-mass drafter's q (n-gram, traffic): q_i(d_i) = 1."""
    n = len(draft.ids)
    rows = torch.arange(n, device=p.device)
    p_of_d = p[rows, ids]
    q_of_d = draft.q[rows, ids] if draft.q is not None else torch.ones_like(p_of_d)
    ratios = acceptance_ratio(p_of_d, q_of_d).tolist()
    if greedy:
        matches = (p[:n].argmax(dim=-1) == ids).tolist()
        draws: list[float | None] = [None] * n
    else:
        u = torch.rand(n, generator=generator, device=p.device).tolist()
        matches = [u_i < r_i for u_i, r_i in zip(u, ratios, strict=True)]
        draws = list(u)
    return ratios, draws, next((i for i, ok in enumerate(matches) if not ok), n)


# ---------------------------------------------------------------- step 4 of a batch: how many tokens each row commits

RAGGED, MIN_CUT = "ragged", "min-cut"
RULES = (RAGGED, MIN_CUT)


@dataclass(frozen=True)
class RowCheck:
    """Step 3 for one row of a batch: its draft, the target's rows p for it, and the ordinary rule's decision."""

    draft_ids: list[int]
    p: torch.Tensor  # [n + 1, V]
    decision: Decision


def ragged_outcomes(checks: list[RowCheck]) -> list[list[int]]:
    """Ragged (what serving engines do): every row commits its own ordinary outcome, its accepted drafts and its
    correction or bonus; each row keeps its own cache length and positions."""
    return [check.decision.kept + [check.decision.next_token] for check in checks]


def cut_outcomes(checks: list[RowCheck]) -> list[list[int]]:
    """Min-cut (the Batching page's comparison): every row commits m + 1 tokens, m = the shortest accepted prefix.

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
