"""Step 3 of a round: which drafted tokens the target keeps, and the token that follows them.

Speculative sampling (Leviathan et al. 2023, Chen et al. 2023): accept d_i while u_i < min(1, p_i(d_i) / q_i(d_i))
(u_i uniform on [0, 1), so P(accept) is exactly the ratio: with <= a token of p = 0 would pass when u_i = 0);
at the first rejection j draw from norm(max(0, p_j - q_j)); if all are accepted draw a bonus token from p_{n+1}.
Greedy: accept while d_i == argmax p_i; the correction or bonus is argmax p. Either way the committed tokens
follow p exactly, whatever q is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .proposal import Draft
from .sampling import acceptance_ratio, residual, sample


@dataclass(frozen=True)
class Decision:
    """The target's decision on one draft (trace.Verdict is the per-token label the events show)."""

    kept: list[int]  # drafted tokens the target kept: the accepted prefix, then a kept alternative
    rejection_index: int | None  # index into the draft of the first rejected token; None if all accepted
    next_token: int
    next_prob: float  # probability of next_token under the distribution it came from
    next_row: int  # the row of p the next token came from, if it is a bonus
    u: list[float | None]  # draws used, one per checked drafted token
    ratios: list[float]  # min(1, p/q) per drafted token
    residual_row: torch.Tensor | None  # the distribution a correction was drawn from (norm(max(0, p_j - q_j)))
    alternative: int | None = None  # index of the kept alternative
    alternative_u: list[float | None] = field(default_factory=list)  # per checked alternative
    alternative_ratios: list[float] = field(default_factory=list)
    # A tree draft (tree.py): the off-chain nodes kept, in path order; (ratio, u) of each off-chain node checked;
    # whether the walk ended in a correction; the row of q whose residual it was drawn from.
    tree_path: tuple[int, ...] = ()
    tree_checks: dict[int, tuple[float, float | None]] = field(default_factory=dict)
    tree_corrected: bool = False
    q_row: int | None = None

    @property
    def n_accepted(self) -> int:
        return len(self.kept)

    @property
    def corrected(self) -> bool:
        """The next token replaces a rejected draft (else it is a bonus, after all drafts, a kept alternative or the
        last node of a tree path)."""
        if self.tree_path:
            return self.tree_corrected
        return self.rejection_index is not None and self.alternative is None

    @property
    def chain_accepted(self) -> int:
        """Drafted tokens accepted in their own place: the accepted prefix, without a kept alternative."""
        return len(self.kept) if self.rejection_index is None else self.rejection_index


def draw_alternatives(
    q_last: torch.Tensor, chosen: int, count: int, generator: torch.Generator | None, greedy: bool
) -> list[int]:
    """Other candidates for the last drafted position, checked by the target only if the draft's own token fails.

    Greedy: q's next-best tokens after `chosen`. Sampling: `count` independent draws from q (repeats allowed;
    recursive rejection sampling needs i.i.d. candidates, and a repeat of a refused token is refused again).
    """
    if count <= 0:
        return []
    if greedy:
        ranked = torch.topk(q_last, min(count + 1, q_last.shape[-1])).indices.tolist()
        return [t for t in ranked if t != chosen and q_last[t] > 0][:count]
    return torch.multinomial(q_last, count, replacement=True, generator=generator).tolist()


def pick_alternatives(
    draft: Draft, *, count: int, confidence: float, generator: torch.Generator, greedy: bool
) -> list[int]:
    """Candidates besides the last drafted token d_n, when the draft was unsure of it (its top q below the
    confidence threshold; always without one): rejections happen mostly there, as the draft stops at its first
    unsure token. The target checks them in the same verify forward, where extra rows are nearly free (see
    docs/DESIGN.md, "Alternatives")."""
    if count <= 0 or not draft.ids or draft.q is None:
        return []
    q_last = draft.q[-1]
    if confidence > 0 and float(q_last.max()) >= confidence:
        return []
    return draw_alternatives(q_last, draft.ids[-1], count, generator, greedy)


def verify(
    p: torch.Tensor,
    draft: Draft,
    generator: torch.Generator | None,
    greedy: bool,
    alternatives: Sequence[int] = (),
    alternative_rows: dict[int, int] | None = None,
) -> Decision:
    """Accept a prefix of the draft, then resample or take the bonus token.

    p: [n + 1 (+ siblings), V] target probabilities at the n drafted positions and one more, then one row
    after each distinct alternative (alternative_rows: token -> its row).
    Alternatives c_1..c_k to the last drafted token d_n are checked only when d_n itself is rejected, by
    recursive rejection sampling: with r_0 = norm(max(0, p_n - q_n)), keep c_m with probability
    min(1, r_{m-1}(c_m) / q_n(c_m)), else r_m = norm(max(0, r_{m-1} - q_n)); if none is kept, the correction is
    drawn from r_k. Each step is speculative sampling of r_{m-1} with proposal q_n, so the token at position n
    still follows p_n exactly (greedy: keep the alternative that is argmax p_n, else correct to argmax p_n).
    A kept alternative is followed by a bonus token from the target's row after it.
    """
    n = len(draft.ids)
    ids = torch.tensor(draft.ids, dtype=torch.long, device=p.device)
    ratios, draws, j = _check_chain(p, draft, ids, generator=generator, greedy=greedy)
    if j == n:  # all accepted: a bonus token from p_{n+1}
        token = int(sample(p[n : n + 1], generator, greedy)[0])
        return Decision(
            kept=draft.ids,
            rejection_index=None,
            next_token=token,
            next_prob=float(p[n, token]),
            next_row=n,
            u=draws,
            ratios=ratios,
            residual_row=None,
        )
    q_j = draft.q[j] if draft.q is not None else torch.nn.functional.one_hot(ids[j], p.shape[-1]).to(p.dtype)
    return _after_rejection(
        p,
        draft,
        j,
        q_j,
        ratios=ratios,
        draws=draws,
        alternatives=alternatives,
        alternative_rows=alternative_rows,
        generator=generator,
        greedy=greedy,
    )


def _after_rejection(
    p: torch.Tensor,
    draft: Draft,
    j: int,
    q_j: torch.Tensor,
    *,
    ratios: list[float],
    draws: list[float | None],
    alternatives: Sequence[int],
    alternative_rows: dict[int, int] | None,
    generator: torch.Generator | None,
    greedy: bool,
) -> Decision:
    """d_j was rejected: its alternatives (only for the last drafted position), then the correction from the
    residual norm(max(0, p_j - q_j)) that the alternatives' rejections left."""
    n = len(draft.ids)
    res = residual(p[j], q_j)
    kept, res, alt_u, alt_ratios = _check_alternatives(
        p[j], q_j, res, alternatives=alternatives if j == n - 1 else (), generator=generator, greedy=greedy
    )
    if kept is not None:  # a bonus token from the target's row after the kept alternative
        row = alternative_rows[alternatives[kept]]
        token = int(sample(p[row : row + 1], generator, greedy)[0])
        return Decision(
            kept=draft.ids[:j] + [alternatives[kept]],
            rejection_index=j,
            next_token=token,
            next_prob=float(p[row, token]),
            next_row=row,
            u=draws[: j + 1],
            ratios=ratios,
            residual_row=None,
            alternative=kept,
            alternative_u=alt_u,
            alternative_ratios=alt_ratios,
        )
    # Greedy: the correction is argmax p_j, the token the target alone would have produced.
    token = int(p[j].argmax()) if greedy else int(sample(res[None], generator, False)[0])
    return Decision(
        kept=draft.ids[:j],
        rejection_index=j,
        next_token=token,
        next_prob=float(p[j, token] if greedy else res[token]),
        next_row=j,
        u=draws[: j + 1],
        ratios=ratios,
        residual_row=res,
        alternative_u=alt_u,
        alternative_ratios=alt_ratios,
    )


def _check_chain(
    p: torch.Tensor, draft: Draft, ids: torch.Tensor, *, generator: torch.Generator | None, greedy: bool
) -> tuple[list[float], list[float | None], int]:
    """(min(1, p_i(d_i) / q_i(d_i)) per drafted token, the draws u_i (None when greedy), the first rejected index j
    (n if none)). The n-gram drafter's q is a point mass: q_i(d_i) = 1."""
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


def _check_alternatives(
    p_j: torch.Tensor,
    q_j: torch.Tensor,
    res: torch.Tensor,
    *,
    alternatives: Sequence[int],
    generator: torch.Generator | None,
    greedy: bool,
) -> tuple[int | None, torch.Tensor, list[float | None], list[float]]:
    """Recursive rejection sampling over the alternatives, in order: (index of the kept one or None, what is left of
    p, r_m, after the refused ones, the draws, the ratios). Greedy keeps the alternative that is argmax p_j."""
    draws: list[float | None] = []
    ratios: list[float] = []
    target_token = int(p_j.argmax())
    for m, candidate in enumerate(alternatives):
        if greedy:
            ratios.append(float(acceptance_ratio(p_j[candidate], q_j[candidate])))
            draws.append(None)
            kept = candidate == target_token
        else:
            ratios.append(float(acceptance_ratio(res[candidate], q_j[candidate])))
            draws.append(float(torch.rand(1, generator=generator, device=p_j.device)))
            kept = draws[-1] < ratios[-1]
        if kept:
            return m, res, draws, ratios
        if not greedy:
            res = residual(res, q_j)  # r_m = norm(max(0, r_{m-1} - q_n))
    return None, res, draws, ratios
