"""The benchmark loop: every method on every prompt, back to back, the order rotating from prompt to prompt.

Before a prompt's runs: the target's prompt pass is timed alone (subtracted from every method's wall
time) and one more set of verify-curve samples is taken. The result is one JSON document.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specviz.decoding.config import ConfigError, SpecConfig
from specviz.drafters import needs_draft_model
from specviz.drafters.model import ModelDrafter

from .curve import CURVE_GAMMAS, add_curve_samples, measure_prompt_pass, measure_verify_curve
from .environment import PeakMemory, environment, is_prepacked, now
from .methods import DEFAULT_METHODS, HF_DEFAULTS, METHODS, Run, hf_matched_settings, run_method
from .stats import PromptPass, decode_seconds, rate, summarize

BENCH_FORMAT = "specviz-bench"
BENCH_VERSION = 1
WARMUP_TOKENS = 16

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class BenchSettings:
    config: SpecConfig
    methods: tuple[str, ...] = DEFAULT_METHODS
    repeats: int = 1
    warmup: bool = True
    chat: bool = True
    curve_gammas: int = CURVE_GAMMAS
    curve_repeats: int = 3
    curve_every_prompt: bool = True  # one more set of curve samples at every prompt (medians of all)
    aggregate: str = "min"  # per prompt and method over the repeats: "min" (least disturbed) or "mean"

    def validate(self) -> "BenchSettings":
        self.config.validate()
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ConfigError(f"unknown method {', '.join(unknown)}; choose from {', '.join(METHODS)}")
        if "baseline" not in self.methods:
            raise ConfigError("the baseline method is needed: speed-ups are relative to it")
        if not 1 <= self.repeats <= 20:
            raise ConfigError(f"repeats must be between 1 and 20, got {self.repeats}")
        if self.aggregate not in ("min", "mean"):
            raise ConfigError(f"aggregate must be 'min' or 'mean', got {self.aggregate!r}")
        if not 0 <= self.curve_gammas <= 32:
            raise ConfigError(f"the curve's largest gamma must be between 0 and 32, got {self.curve_gammas}")
        assisted = any(m.startswith("hf_") and m != "hf_plain" for m in self.methods)
        if self.config.drafter != ModelDrafter.name and assisted:
            raise ConfigError(
                "transformers' assisted generation needs the model drafter (use --methods to leave it out)"
            )
        return self


def _methods_for(pair, settings: BenchSettings, log: Log = _quiet) -> list[str]:
    """The chosen methods in METHODS' order; without a draft model only those that need none. transformers'
    assisted generation refuses a draft whose output head is not as wide as the target's (ours masks the
    extra ids): it is left out for such a pair, with a line saying so."""
    methods = [m for m in METHODS if m in settings.methods]
    if pair.draft is None:
        methods = [m for m in methods if m in ("baseline", "speculative", "hf_plain")]
        if needs_draft_model(settings.config.drafter) and "speculative" in methods:
            raise ConfigError("this pair has no draft model: choose --drafter ngram or traffic")
        return methods
    widths = {model.config.get_text_config().vocab_size for model in (pair.target, pair.draft)}
    assisted = [m for m in methods if m in ("hf_assisted", "hf_matched")]
    if len(widths) > 1 and assisted:
        log(
            f"leaving out {', '.join(assisted)}: transformers' assisted generation needs output heads of one width "
            f"(target {pair.target.config.get_text_config().vocab_size}, "
            f"draft {pair.draft.config.get_text_config().vocab_size})"
        )
        methods = [m for m in methods if m not in assisted]
    return methods


class _Loop:
    """The state of one benchmark: the runs so far, the prompt passes, the curve and the memory probe."""

    def __init__(self, pair, settings: BenchSettings, methods: list[str], curve: dict, log: Log):
        self.pair, self.settings, self.methods, self.curve, self.log = pair, settings, methods, curve, log
        self.memory = PeakMemory(pair.device)
        self.runs: list[Run] = []
        self.prompt_pass: PromptPass = {}
        self.done = 0

    def warm_up(self, ids: list[int]) -> None:
        warm = replace(self.settings.config, max_new_tokens=min(self.settings.config.max_new_tokens, WARMUP_TOKENS))
        for method in self.methods:
            run_method(self.pair, method, ids, warm, self.memory)

    def prompt(self, category: str, index: int, repeat: int, ids: list[int], total: int) -> None:
        shift = self.done % len(self.methods)  # rotate the order from prompt to prompt
        order = self.methods[shift:] + self.methods[:shift]
        self.prompt_pass[(category, index, repeat)] = measure_prompt_pass(self.pair, ids)
        if self.settings.curve_every_prompt:
            add_curve_samples(self.pair, self.curve, ids)
        mine = {
            m: run_method(
                self.pair,
                m,
                ids,
                self.settings.config,
                self.memory,
                category=category,
                prompt_index=index,
                repeat=repeat,
            )
            for m in order
        }
        self.runs.extend(mine[m] for m in self.methods)
        self.done += 1
        parts = [f"{m} {mine[m].new_tokens / decode_seconds(mine[m], self.prompt_pass):.2f}" for m in self.methods]
        self.log(
            f"[{self.done}/{total}] {category} #{index + 1} ({len(ids)} prompt tokens, "
            f"{mine['baseline'].new_tokens} new): tok/s " + ", ".join(parts)
        )


def run_benchmark(pair, prompts: dict[str, list[str]], settings: BenchSettings, log: Log = _quiet) -> dict[str, Any]:
    """Run every method on every prompt, alternating prompt by prompt; return the JSON document."""
    from specviz.runs import encode

    settings.validate()
    methods = _methods_for(pair, settings, log)
    encoded = {c: [encode(pair, p, chat=settings.chat) for p in ps] for c, ps in prompts.items()}
    first = next(ids for ids_list in encoded.values() for ids in ids_list)
    log(f"measuring the verify-cost curve (g = 0..{settings.curve_gammas}) at a {len(first)}-token context ...")
    curve = measure_verify_curve(pair, first, max_gamma=settings.curve_gammas, repeats=settings.curve_repeats)
    loop = _Loop(pair, settings, methods, curve, log)
    if settings.warmup:
        log("warm-up: every method once on the first prompt")
        loop.warm_up(first)
    started = time.perf_counter()
    total = settings.repeats * sum(len(v) for v in encoded.values())
    for repeat in range(settings.repeats):
        for category, id_lists in encoded.items():
            for index, ids in enumerate(id_lists):
                loop.prompt(category, index, repeat=repeat, ids=ids, total=total)
    return _document(loop, prompts, elapsed=time.perf_counter() - started)


def _document(loop: _Loop, prompts: dict[str, list[str]], elapsed: float) -> dict[str, Any]:
    pair, settings, methods, runs, prompt_pass = loop.pair, loop.settings, loop.methods, loop.runs, loop.prompt_pass
    config = settings.config

    def summary(group: list[Run]) -> dict[str, Any]:
        return summarize(group, prompt_pass, loop.curve, methods, config.greedy, settings.aggregate)

    return {
        "format": BENCH_FORMAT,
        "version": BENCH_VERSION,
        "created": now(),
        "environment": environment(pair),
        "pair": dict(pair.names, target_prepacked=str(is_prepacked(pair.target)).lower()),
        "settings": {
            "config": config.to_dict(),
            "methods": methods,
            "repeats": settings.repeats,
            "warmup": settings.warmup,
            "chat": settings.chat,
            "aggregate": settings.aggregate,
            "hf_assisted": dict(HF_DEFAULTS),
            "hf_matched": hf_matched_settings(config),
            "timing": "tokens/s = new tokens / (wall seconds - the target's prompt pass, timed alone); e2e includes it",
            "memory_per_method": loop.memory.per_method,
        },
        "process_peak_rss_bytes": loop.memory.process_peak(),  # VmHWM from the start: loading the pair included
        "verify_curve": loop.curve,
        "categories": {c: summary([r for r in runs if r.category == c]) for c in prompts},
        "overall": summary(runs),
        "runs": [_run_json(r, prompts, prompt_pass) for r in runs],
        "seconds": elapsed,
    }


def _run_json(r: Run, prompts: dict[str, list[str]], prompt_pass: PromptPass) -> dict[str, Any]:
    return {
        "method": r.method,
        "category": r.category,
        "prompt_index": r.prompt_index,
        "prompt": prompts[r.category][r.prompt_index],
        "repeat": r.repeat,
        "new_tokens": r.new_tokens,
        "seconds": r.seconds,
        "prompt_pass_seconds": prompt_pass[(r.category, r.prompt_index, r.repeat)],
        "tokens_per_second": rate(r.new_tokens, decode_seconds(r, prompt_pass)),
        "e2e_tokens_per_second": rate(r.new_tokens, r.seconds),
        "token_ids": r.token_ids,
        **r.memory,
        "stats": r.stats,
    }
