"""Logits -> probabilities, and the accept/resample rule of speculative sampling.

The same transform (temperature, top-k, top-p: transformers' own logits warpers) is applied to the
target's logits (p) and the draft's (q). Speculative sampling then returns tokens distributed
exactly as the transformed p (Leviathan et al. 2023, Chen et al. 2023).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from .config import SpecConfig


def build_warpers(config: SpecConfig) -> LogitsProcessorList:
    """transformers' warpers, in generate()'s order: temperature, then top-k, then top-p."""
    warpers = LogitsProcessorList()
    if config.greedy:
        return warpers  # greedy decides by argmax; p and q are shown as the plain softmax
    if config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k > 0:
        warpers.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
    if config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
    return warpers


_NO_IDS = torch.empty(0, dtype=torch.long)  # the warpers we use never look at input_ids


def probabilities(logits: torch.Tensor, warpers: LogitsProcessorList) -> torch.Tensor:
    """[n, V] logits -> [n, V] probabilities: softmax(warp(logits)), in float32 whatever the model dtype."""
    return torch.softmax(warpers(_NO_IDS, logits.float()), dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None, greedy: bool) -> torch.Tensor:
    """One token per row: argmax when greedy, else a draw from probs. Returns [n] long."""
    if greedy:
        return probs.argmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def acceptance_ratio(p_of_d: torch.Tensor, q_of_d: torch.Tensor) -> torch.Tensor:
    """min(1, p(d) / q(d)). q(d) > 0 whenever d was drawn from q; guard the division anyway."""
    return torch.clamp(p_of_d / q_of_d.clamp_min(torch.finfo(torch.float32).tiny), max=1.0)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) along the last axis.

    It sums to zero only when p == q, and then a rejection has probability zero; fall back to p
    so that rounding can never produce NaNs.
    """
    diff = (p - q).clamp_min(0.0)
    total = diff.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, diff / total.clamp_min(torch.finfo(torch.float32).tiny), p)


def speculative_samples(
    p: torch.Tensor,
    q: torch.Tensor,
    n: int,
    generator: torch.Generator | None = None,
    resample_residual: bool = True,
    alternatives: int = 0,
) -> torch.Tensor:
    """n independent one-token speculative steps for one context, vectorised: the Lossless page's sampler.

    d ~ q; keep d with probability min(1, p(d)/q(d)); otherwise draw from norm(max(0, p - q)).
    The result is distributed exactly as p. With resample_residual=False a rejection draws from q
    again instead (a common mistake), and the result drifts away from p.
    With alternatives k (the engine's token tree), a rejection is followed by up to k more candidates
    c ~ q, each kept with probability min(1, r(c)/q(c)) where r is what the refusals left of p
    (r_0 = norm(max(0, p - q)), r_m = norm(max(0, r_{m-1} - q))); the final fallback draws from r_k.
    This recursive rejection sampling is still exactly p.
    """
    d = torch.multinomial(q, n, replacement=True, generator=generator)
    u = torch.rand(n, generator=generator, device=p.device)
    accepted = u < acceptance_ratio(p[d], q[d])
    left = residual(p, q) if resample_residual else q
    out, pending = d, ~accepted
    for _ in range(alternatives):
        candidate = torch.multinomial(q, n, replacement=True, generator=generator)
        u = torch.rand(n, generator=generator, device=p.device)
        keep = pending & (u < acceptance_ratio(left[candidate], q[candidate]))
        out, pending = torch.where(keep, candidate, out), pending & ~keep
        left = residual(left, q) if resample_residual else q
    other = torch.multinomial(left, n, replacement=True, generator=generator)
    return torch.where(pending, other, out)
