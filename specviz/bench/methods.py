"""The benchmark's methods, one timed run each: ours (the target alone, speculative) and transformers' generate.

baseline       our autoregressive_generate: the target alone, KV-cached (what speed-ups are relative to)
speculative    our speculative_generate with the given SpecConfig
hf_assisted    transformers' assisted generation with its defaults (20 draft tokens, confidence 0.4)
hf_matched     the same with our draft length and confidence threshold (constant schedule)
hf_plain       (optional) target.generate() alone: a check that our baseline is not slow
"""

from __future__ import annotations

import copy
import gc
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end, synchronize
from specviz.models.attention import standard_attention
from specviz.runs import speculative_generate

from .environment import PeakMemory

METHODS = ("baseline", "speculative", "hf_assisted", "hf_matched", "hf_plain")
DEFAULT_METHODS = ("baseline", "speculative", "hf_assisted", "hf_matched")
HF_DEFAULTS = {
    "num_assistant_tokens": 20,
    "assistant_confidence_threshold": 0.4,
    "num_assistant_tokens_schedule": "constant",
}  # transformers' own defaults (5.x)


@dataclass
class Run:
    method: str
    category: str
    prompt_index: int
    repeat: int
    token_ids: list[int]
    new_tokens: int
    seconds: float  # wall time of the whole call, prompt pass included
    prefill_seconds: float | None  # our methods: the prompt pass they measured themselves
    memory: dict[str, int | None]
    stats: dict[str, Any] = field(default_factory=dict)  # speculative: rounds, gammas, acceptance, timings


def _spec_stats(rounds, summary) -> dict[str, Any]:
    # The i.i.d. model of the theory is a chain of drafts: a kept alternative (a second candidate for a position
    # whose draft was rejected) is counted apart, as a gain that model does not predict.
    accepted = sum(r.chain_accepted for r in rounds)
    checked = sum(len(r.drafted) if r.rejection_index is None else r.rejection_index + 1 for r in rounds)
    return {
        "rounds": summary.rounds,
        "drafted": summary.drafted,
        "accepted": accepted,
        "checked": checked,
        "alternatives_kept": summary.accepted - accepted,
        "drafted_per_round": [len(r.drafted) for r in rounds],
        "accepted_per_round": [r.n_accepted for r in rounds],
        "draft_seconds": summary.draft_seconds,
        "verify_seconds": summary.verify_seconds,
        "draft_forwards": summary.draft_forwards,
        "bookkeeping_seconds": summary.bookkeeping_seconds,
        "engine_seconds": summary.seconds,
        "finish_reason": summary.finish_reason,
    }


def _ours(pair, ids: list[int], config: SpecConfig, speculative: bool) -> tuple[list[int], float, float, dict]:
    device = pair.device
    synchronize(device)
    start = time.perf_counter()
    generate = speculative_generate if speculative else autoregressive_generate
    rounds, summary = run_to_end(generate(pair, ids, config))
    synchronize(device)
    seconds = time.perf_counter() - start
    stats = _spec_stats(rounds, summary) if speculative else {"finish_reason": summary.finish_reason}
    return list(summary.token_ids), seconds, summary.prefill_seconds, stats


def hf_generation_config(pair, config: SpecConfig, assisted: dict | None):
    """A fresh GenerationConfig with only our settings (the checkpoint's sampling defaults, such as a
    repetition penalty, would otherwise change the output)."""
    from transformers import GenerationConfig

    eos = sorted(pair.eos_ids)
    pad = pair.tokenizer.pad_token_id if pair.tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    kwargs: dict[str, Any] = dict(
        max_new_tokens=config.max_new_tokens, eos_token_id=eos or None, pad_token_id=pad, do_sample=not config.greedy
    )
    if not config.greedy:
        kwargs.update(temperature=config.temperature, top_k=config.top_k, top_p=config.top_p)
    return GenerationConfig(**kwargs)


@torch.inference_mode()
def _hf(pair, ids: list[int], config: SpecConfig, assisted: dict | None) -> tuple[list[int], float]:
    """target.generate(), with assistant_model=draft when `assisted` gives its settings."""
    device = pair.device
    generation_config = hf_generation_config(pair, config, assisted)
    input_ids = torch.tensor([ids], device=device)
    kwargs: dict[str, Any] = {}
    saved = None
    if assisted is not None:
        # transformers reads these from the assistant's own generation_config: set them for this call only.
        saved = pair.draft.generation_config
        draft_config = copy.deepcopy(saved)
        for key, value in assisted.items():
            setattr(draft_config, key, value)
        pair.draft.generation_config = draft_config
        kwargs["assistant_model"] = pair.draft
    try:
        torch.manual_seed(config.seed)  # transformers samples from the global generator
        synchronize(device)
        start = time.perf_counter()
        with standard_attention():  # transformers' own sdpa, as its users run it (models/attention.py)
            out = pair.target.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), generation_config=generation_config, **kwargs
            )
        synchronize(device)
        seconds = time.perf_counter() - start
    finally:
        if saved is not None:
            pair.draft.generation_config = saved
    return out[0, len(ids) :].tolist(), seconds


def hf_matched_settings(config: SpecConfig) -> dict:
    """transformers' assisted generation with our draft length and confidence threshold."""
    length = config.gamma if config.schedule == "constant" else config.gamma_max
    return {
        "num_assistant_tokens": length,
        "assistant_confidence_threshold": config.draft_confidence,
        "num_assistant_tokens_schedule": "constant",
    }


def run_method(
    pair,
    method: str,
    ids: list[int],
    config: SpecConfig,
    memory: PeakMemory,
    category: str = "",
    prompt_index: int = 0,
    repeat: int = 0,
) -> Run:
    gc.collect()
    memory.reset()
    prefill = None
    stats: dict[str, Any] = {}
    if method == "baseline":
        tokens, seconds, prefill, stats = _ours(pair, ids, config, speculative=False)
    elif method == "speculative":
        tokens, seconds, prefill, stats = _ours(pair, ids, config, speculative=True)
    elif method == "hf_assisted":
        tokens, seconds = _hf(pair, ids, config, HF_DEFAULTS)
    elif method == "hf_matched":
        tokens, seconds = _hf(pair, ids, config, hf_matched_settings(config))
    elif method == "hf_plain":
        tokens, seconds = _hf(pair, ids, config, None)
    else:
        raise ConfigError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return Run(
        method=method,
        category=category,
        prompt_index=prompt_index,
        repeat=repeat,
        token_ids=tokens,
        new_tokens=len(tokens),
        seconds=seconds,
        prefill_seconds=prefill,
        memory=memory.read(),
        stats=stats,
    )
