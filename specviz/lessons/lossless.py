"""The Lossless page: speculative samples of one next token are distributed exactly as the target's p.

p and q come once from the real models for one context (one forward each), through the same
transform as the engine (sampling.probabilities with build_warpers). Then sampling.speculative_samples
draws tens of thousands of one-step speculative samples in a vectorised call, and we compare
histograms with p by total variation: TV(x, y) = 1/2 * sum_v |x(v) - y(v)|.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import vocab_width
from specviz.decoding.kvcache import fit_width
from specviz.decoding.sampling import build_warpers, probabilities, residual, speculative_samples
from specviz.errors import UserError
from specviz.runs import encode, exclusive

SHOWN_TOKENS = 12  # bars on the chart: the most likely tokens under p or q, the rest pooled as "other"


class LosslessError(UserError, ValueError):
    """Settings under which the experiment says nothing (greedy decoding, no draft model)."""


@dataclass(frozen=True)
class Distributions:
    """p and q for one context, full vocabulary width, float32 on the CPU."""

    p: torch.Tensor
    q: torch.Tensor
    texts: dict[int, str]  # token texts for the most likely ids under p or q
    context_tokens: int
    temperature: float
    top_k: int
    top_p: float
    precision: str = "fp32"  # the target's weights (models.precision): each precision is its own p


@dataclass(frozen=True)
class LosslessResult:
    n: int
    seed: int
    resample_residual: bool
    token_ids: tuple[int, ...]  # shown tokens (the last bar, id -1, pools all others)
    token_texts: tuple[str, ...]
    p: tuple[float, ...]  # exact target probabilities of the shown tokens (+ other)
    q: tuple[float, ...]  # exact draft probabilities
    spec_counts: tuple[int, ...]  # speculative samples per shown token (+ other)
    draft_counts: tuple[int, ...]  # samples of the draft alone
    tv_spec: float  # TV(empirical speculative, p), over the whole vocabulary
    tv_draft: float  # TV(empirical draft-alone, p)
    tv_direct: float  # TV(empirical direct samples of p, p): the sampling-noise floor
    tv_pq: float  # exact TV(p, q)
    acceptance: float  # exact P(accept) = sum_v min(p(v), q(v)) = 1 - TV(p, q)
    alternatives: int = 0  # further candidates from q after a rejection (recursive rejection sampling)
    acceptance_any: float = 0.0  # exact P(the draft or one of the alternatives is kept)


def next_token_distributions(
    pair,
    prompt: str,
    config: SpecConfig,
    *,
    chat: bool = True,
    answer_prefix: str = "",
    cancel: threading.Event | None = None,
    on_wait: Callable[[float], None] | None = None,
) -> Distributions:
    """One forward of the target and of the draft over the context (prompt [+ the answer so far]),
    holding the device's lock (runs.exclusive) like any run on the shared models. Both rows are over the target's
    ids, as in the engine (engine.vocab_width): q is 0 where the draft has no id, and renormalised over the
    target's ids where the draft has more."""
    config.validate()
    if config.greedy:
        raise LosslessError("greedy decoding (temperature 0) draws nothing: choose a temperature above 0")
    if pair.draft is None:
        raise LosslessError("this pair has no draft model; the experiment needs q from a draft model")
    ids = encode(pair, prompt, chat, answer=answer_prefix)  # the limits hold for the whole context
    width = vocab_width(pair)
    warpers = build_warpers(config)
    with exclusive(pair, cancel, on_wait), torch.inference_mode():
        rows = []
        for model in (pair.target, pair.draft):
            logits = model(input_ids=torch.tensor([ids], device=model.device), logits_to_keep=1).logits[0, -1:]
            rows.append(probabilities(fit_width(logits, width), warpers)[0].cpu())
    p, q = rows
    top = set(torch.topk(p, min(64, width)).indices.tolist()) | set(torch.topk(q, min(64, width)).indices.tolist())
    texts = {i: pair.token_text(i) for i in top}
    precision = pair.names.get("precision", "fp32")
    return Distributions(p, q, texts, len(ids), config.temperature, config.top_k, config.top_p, precision)


def total_variation(x: torch.Tensor, y: torch.Tensor) -> float:
    """TV(x, y) = 1/2 * sum |x - y|."""
    return 0.5 * float((x - y).abs().sum())


def kept_probability(p: torch.Tensor, q: torch.Tensor, alternatives: int = 0) -> float:
    """Exact P(the draft or one of `alternatives` further candidates from q is kept).

    The draft is refused with probability beta_0 = sum (p - q)^+; candidate m, checked against what is left
    (r_0 = norm((p - q)^+), r_m = norm((r_{m-1} - q)^+)), is refused with probability sum (r_{m-1} - q)^+.
    """
    refused = float((p - q).clamp_min(0).double().sum())
    left = residual(p, q)
    for _ in range(alternatives):
        refused *= float((left - q).clamp_min(0).double().sum())
        left = residual(left, q)
    return 1.0 - refused


def lossless_experiment(
    dist: Distributions,
    n: int = 50_000,
    seed: int = 0,
    resample_residual: bool = True,
    shown: int = SHOWN_TOKENS,
    alternatives: int = 0,
) -> LosslessResult:
    """n one-token speculative samples, n draft-only samples and n direct samples of p; counts and distances."""
    if n < 1:
        raise LosslessError(f"the number of samples must be at least 1, got {n}")
    p, q = dist.p, dist.q
    width = p.shape[-1]
    generator = torch.Generator().manual_seed(seed)
    spec = speculative_samples(p, q, n, generator, resample_residual=resample_residual, alternatives=alternatives)
    draft = torch.multinomial(q, n, replacement=True, generator=generator)
    direct = torch.multinomial(p, n, replacement=True, generator=generator)
    spec_c, draft_c, direct_c = (torch.bincount(s, minlength=width) for s in (spec, draft, direct))

    # Shown tokens: most likely under max(p, q); everything else pooled.
    order = torch.topk(torch.maximum(p, q), min(shown, width)).indices.tolist()
    index = torch.tensor(order, dtype=torch.long)

    def pick(values: torch.Tensor, total: float) -> list:
        chosen = values[index].tolist()
        return chosen + [total - sum(chosen)]

    texts = [dist.texts.get(i, str(i)) for i in order]
    return LosslessResult(
        n=n,
        seed=seed,
        resample_residual=resample_residual,
        token_ids=tuple(order) + (-1,),
        token_texts=tuple(texts) + ("(all other tokens)",),
        p=tuple(max(0.0, v) for v in pick(p, 1.0)),
        q=tuple(max(0.0, v) for v in pick(q, 1.0)),
        spec_counts=tuple(int(round(v)) for v in pick(spec_c.double(), float(n))),
        draft_counts=tuple(int(round(v)) for v in pick(draft_c.double(), float(n))),
        tv_spec=total_variation(spec_c.double() / n, p.double()),
        tv_draft=total_variation(draft_c.double() / n, p.double()),
        tv_direct=total_variation(direct_c.double() / n, p.double()),
        tv_pq=total_variation(p.double(), q.double()),
        acceptance=float(torch.minimum(p, q).double().sum()),
        alternatives=alternatives,
        acceptance_any=kept_probability(p, q, alternatives),
    )
