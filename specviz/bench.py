"""Benchmark: the target alone vs our speculative decoding vs transformers' assisted generation.

Answers two questions on one pair, device, prompt set, settings and seed, in one process:
does speculative decoding pay off here (speed-up over plain autoregressive decoding of the
target), and is our loop as fast as the standard one (ratio to `target.generate(assistant_model=draft)`).

Methods, run back to back on each prompt (the order rotates from prompt to prompt), after a warm-up:
  baseline       our autoregressive_generate: the target alone, KV-cached (what speed-ups are relative to)
  speculative    our speculative_generate with the given SpecConfig
  hf_assisted    transformers' assisted generation with its defaults (20 draft tokens, confidence 0.4)
  hf_matched     the same with our draft length and confidence threshold (constant schedule)
  hf_plain       (optional) target.generate() alone: a check that our baseline is not slow

Timing. Every method processes the same prompt with the same target first; that prompt pass is not
what speculative decoding speeds up, so tokens/s counts the new tokens over the wall time after it:
decode seconds = wall seconds of the whole call - P, where P is the target's prompt pass, timed on
its own just before the prompt's runs. The draft's own prompt pass stays in (it is a real cost of
speculation, paid by ours and by transformers' alike). Our methods fuse the prompt into their first
forward passes as transformers' generate does (SpecConfig.fuse_prompt; --no-fuse-prompt for a
separate pass). End-to-end rates (prompt included) are in the JSON too. Clocks are read after
synchronising the device.

Noise. The table's ratios are of summed rates. Because a shared machine drifts, each summary also pairs
the methods prompt by prompt ("paired": the geometric mean of ours' per-prompt rate ratios and its 95%
interval, Student t on the logs): a goal like "1.10x transformers" is met when the interval clears it.

Theory (Leviathan et al. 2023), per category from the speculative runs:
  a  = accepted / checked, the maximum-likelihood acceptance rate of the i.i.d. model (a drafted
       token after the first rejection is never checked, so accepted / drafted would understate it)
  E(a, g) = (1 - a^(g+1)) / (1 - a)  expected tokens of a round that drafts g tokens
  c  = t_draft / t_target, from the measured verify-cost curve (one draft step, one target step)
  predicted speed-up (measured times) = sum_r E(a, g_r) * t_target / sum_r (g_r t_draft + t_verify(g_r))
  Leviathan's (free verify)           = sum_r E(a, g_r) / sum_r (g_r c + 1)
  over the rounds r and the number g_r of tokens each one drafted (0 for a plain target step);
  with a constant gamma these are exactly E(a, g) t_target / (g t_draft + t_verify(g)) and
  (1 - a^(g+1)) / ((1 - a)(g c + 1)). Efficiency = measured speed-up / predicted.
"""
from __future__ import annotations

import argparse
import copy
import datetime as _dt
import gc
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from .cli_args import pair_spec
from .config import ConfigError, SpecConfig
from .engine import autoregressive_generate, run_to_end, speculative_generate, synchronize
from .progress import ConsoleProgress
from .prompts import DEFAULT_PROMPTS, ROOT, load_prompts  # noqa: F401 - re-exported for the CLI and scripts
from .theory import curve_time, expected_tokens

BENCH_FORMAT = "specviz-bench"
BENCH_VERSION = 1
CURVE_FORMAT = "specviz-verify-curve"
CURVE_VERSION = 1

CATEGORIES = ("code", "prose", "translation", "repetition", "math")
METHODS = ("baseline", "speculative", "hf_assisted", "hf_matched", "hf_plain")
DEFAULT_METHODS = ("baseline", "speculative", "hf_assisted", "hf_matched")
HF_DEFAULTS = {"num_assistant_tokens": 20, "assistant_confidence_threshold": 0.4,
               "num_assistant_tokens_schedule": "constant"}  # transformers' own defaults (5.x)
CURVE_GAMMAS = 8

# Our settings that the benchmark uses unless told otherwise: the tuned configuration.
BENCH_DEFAULTS = dict(gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, alternatives=2)

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# ---------------------------------------------------------------- memory

class PeakMemory:
    """Peak resident memory of this process (and peak GPU memory) over a stretch of code.

    Linux: writing 5 to /proc/self/clear_refs resets the peak (VmHWM), so each method gets its own;
    elsewhere ru_maxrss is the peak since the process started (flagged as not per method).
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.per_method = self._can_reset()

    @staticmethod
    def _can_reset() -> bool:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            return PeakMemory._vm_hwm() is not None
        except OSError:
            return False

    @staticmethod
    def _vm_hwm() -> int | None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def reset(self) -> None:
        if self.per_method:
            Path("/proc/self/clear_refs").write_text("5")
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def read(self) -> dict[str, int | None]:
        rss = self._vm_hwm() if self.per_method else None
        if rss is None:
            scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        gpu = torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None
        return {"peak_rss_bytes": rss, "peak_gpu_bytes": gpu}


# ---------------------------------------------------------------- verify-cost curve

def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@torch.inference_mode()
def _forward_samples(model, context: list[int], max_new: int, repeats: int, vocab: int,
                     seed: int = 0) -> list[list[float]]:
    """Seconds of KV-cached forwards over n = 1..max_new new tokens after `context` (`repeats` samples
    each, after one warm-up), through the engine's own CachedModel (so a compiled decoder's steps are
    what is timed)."""
    from .kvcache import CachedModel

    device = model.device
    generator = torch.Generator().manual_seed(seed)
    state = CachedModel(model, vocab)
    state.feed(list(context))
    samples: list[list[float]] = []
    for n in range(1, max_new + 1):
        times = []
        for _ in range(repeats + 1):
            ids = torch.randint(0, vocab, (n,), generator=generator).tolist()
            synchronize(device)
            start = time.perf_counter()
            state.feed(ids, logits_to_keep=n)
            synchronize(device)
            times.append(time.perf_counter() - start)
            state.cache.crop(-n)                           # this transformers takes minus the count to remove
            del state.ids[-n:]
        samples.append(times[1:])
    return samples


def _vocab(pair) -> int:
    return min(pair.target.config.get_text_config().vocab_size,
               pair.draft.config.get_text_config().vocab_size if pair.draft is not None else 10**9)


def measure_verify_curve(pair, context: list[int], max_gamma: int = CURVE_GAMMAS, repeats: int = 3) -> dict:
    """The target's time for one forward over g+1 tokens (g = 0..max_gamma: a verify of g drafted
    tokens; g = 0 is one plain decoding step), and the draft's time for one step, at `context`.
    Each figure is the median of its samples; add_curve_samples adds more (the benchmark takes one
    more set at every prompt, so that a noisy moment does not make the curve)."""
    vocab = _vocab(pair)
    curve = {
        "format": CURVE_FORMAT, "version": CURVE_VERSION,
        "device": pair.device.type, "device_name": device_name(pair.device), "threads": torch.get_num_threads(),
        "target": pair.names.get("target", "?"), "draft": pair.names.get("draft", "?"),
        "dtype": pair.names.get("dtype", "?"), "draft_quantized": pair.names.get("draft_quantized", "?"),
        "target_prepacked": is_prepacked(pair.target),
        "contexts": [len(context)], "context_tokens": len(context),
        "gamma": list(range(max_gamma + 1)), "tokens": [g + 1 for g in range(max_gamma + 1)],
        "target_samples": _forward_samples(pair.target, context, max_gamma + 1, repeats, vocab),
        "draft_samples": _forward_samples(pair.draft, context, 2, repeats, vocab) if pair.draft is not None else None,
        "torch": torch.__version__, "transformers": _transformers_version(),
    }
    return _summarize_curve(curve)


def add_curve_samples(pair, curve: dict, context: list[int], repeats: int = 1) -> dict:
    """One more set of samples at another context; the curve's figures become the medians of all."""
    vocab = _vocab(pair)
    more = _forward_samples(pair.target, context, len(curve["gamma"]), repeats, vocab)
    curve["target_samples"] = [old + new for old, new in zip(curve["target_samples"], more)]
    if curve.get("draft_samples") is not None:
        more = _forward_samples(pair.draft, context, 2, repeats, vocab)
        curve["draft_samples"] = [old + new for old, new in zip(curve["draft_samples"], more)]
    curve["contexts"].append(len(context))
    return _summarize_curve(curve)


def _summarize_curve(curve: dict) -> dict:
    target = [_median(s) for s in curve["target_samples"]]
    draft = [_median(s) for s in curve["draft_samples"]] if curve.get("draft_samples") else None
    t0 = target[0]
    curve.update(
        context_tokens=round(_median(curve["contexts"])), samples=len(curve["target_samples"][0]),
        target_seconds=target, relative_to_one_token=[t / t0 for t in target], target_step_seconds=t0,
        draft_step_seconds=draft[0] if draft else None, draft_two_token_seconds=draft[1] if draft else None,
        cost_ratio_c=draft[0] / t0 if draft else None, measured_at=_now())
    return curve


def format_curve(curve: dict) -> str:
    t0 = curve["target_step_seconds"]
    lines = [f"Verify-cost curve ({curve['device_name']}, {curve['threads']} threads, context {curve['context_tokens']} "
             f"tokens): the target's time for one forward over g+1 tokens, next to one token"]
    lines.append("   g  tokens   seconds   x one token")
    for g, t in zip(curve["gamma"], curve["target_seconds"]):
        lines.append(f"  {g:2d}  {g + 1:6d}  {t:8.4f}  {t / t0:6.2f}")
    if curve.get("draft_step_seconds"):
        lines.append(f"  draft step {curve['draft_step_seconds']:.4f} s, target step {t0:.4f} s: "
                     f"cost ratio c = {curve['cost_ratio_c']:.3f}")
    return "\n".join(lines)


@torch.inference_mode()
def measure_prompt_pass(pair, ids: list[int]) -> float:
    """Seconds of the target's KV-cached forward over the prompt (all but its last token, as the engine's
    separate prompt pass): the work every method does first, subtracted from each one's wall time."""
    from .kvcache import CachedModel

    if len(ids) < 2:
        return 0.0
    state = CachedModel(pair.target, pair.target.config.get_text_config().vocab_size)
    synchronize(pair.device)
    start = time.perf_counter()
    state.feed(ids[:-1])
    synchronize(pair.device)
    return time.perf_counter() - start


# ---------------------------------------------------------------- one run of one method

@dataclass
class Run:
    method: str
    category: str
    prompt_index: int
    repeat: int
    token_ids: list[int]
    new_tokens: int
    seconds: float                     # wall time of the whole call, prompt pass included
    prefill_seconds: float | None      # our methods: the prompt pass they measured themselves
    memory: dict[str, int | None]
    stats: dict[str, Any] = field(default_factory=dict)  # speculative: rounds, gammas, acceptance, timings


def _spec_stats(rounds, summary) -> dict[str, Any]:
    # The i.i.d. model of the theory is a chain of drafts: a kept alternative (a second candidate for a position
    # whose draft was rejected) is counted apart, as a gain that model does not predict.
    accepted = sum(r.chain_accepted for r in rounds)
    checked = sum(len(r.drafted) if r.rejection_index is None else r.rejection_index + 1 for r in rounds)
    return {
        "rounds": summary.rounds, "drafted": summary.drafted, "accepted": accepted, "checked": checked,
        "alternatives_kept": summary.accepted - accepted,
        "drafted_per_round": [len(r.drafted) for r in rounds],
        "accepted_per_round": [r.n_accepted for r in rounds],
        "draft_seconds": summary.draft_seconds, "verify_seconds": summary.verify_seconds,
        "draft_forwards": summary.draft_forwards, "bookkeeping_seconds": summary.bookkeeping_seconds,
        "engine_seconds": summary.seconds, "finish_reason": summary.finish_reason,
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
    kwargs: dict[str, Any] = dict(max_new_tokens=config.max_new_tokens, eos_token_id=eos or None,
                                  pad_token_id=pad, do_sample=not config.greedy)
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
        torch.manual_seed(config.seed)                    # transformers samples from the global generator
        synchronize(device)
        start = time.perf_counter()
        out = pair.target.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                   generation_config=generation_config, **kwargs)
        synchronize(device)
        seconds = time.perf_counter() - start
    finally:
        if saved is not None:
            pair.draft.generation_config = saved
    return out[0, len(ids):].tolist(), seconds


def hf_matched_settings(config: SpecConfig) -> dict:
    """transformers' assisted generation with our draft length and confidence threshold."""
    length = config.gamma if config.schedule == "constant" else config.gamma_max
    return {"num_assistant_tokens": length, "assistant_confidence_threshold": config.draft_confidence,
            "num_assistant_tokens_schedule": "constant"}


def run_method(pair, method: str, ids: list[int], config: SpecConfig, memory: PeakMemory,
               category: str = "", prompt_index: int = 0, repeat: int = 0) -> Run:
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
    return Run(method, category, prompt_index, repeat, tokens, len(tokens), seconds, prefill, memory.read(), stats)


# ---------------------------------------------------------------- aggregation

def _rate(tokens: int, seconds: float) -> float | None:
    return tokens / seconds if seconds > 0 else None


def decode_seconds(r: Run, prompt_pass: dict[tuple[str, int, int], float]) -> float:
    """A run's wall time after the target's prompt pass (the time speculative decoding can speed up); > 0."""
    return max(r.seconds - prompt_pass[(r.category, r.prompt_index, r.repeat)], 1e-9)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def representative(runs: list[Run], prompt_pass: dict[tuple[str, int, int], float], aggregate: str) -> list[Run]:
    """The runs whose times count: all of them ("mean"), or per prompt and method the repeat with the
    shortest time after the prompt pass ("min": the least disturbed by anything else on the machine)."""
    if aggregate == "mean":
        return runs
    best: dict[tuple, Run] = {}
    for r in runs:
        key = (r.category, r.prompt_index, r.method)
        decode = r.seconds - prompt_pass[(r.category, r.prompt_index, r.repeat)]
        if key not in best or decode < best[key].seconds - prompt_pass[(key[0], key[1], best[key].repeat)]:
            best[key] = r
    return [r for r in runs if best[(r.category, r.prompt_index, r.method)] is r]


# Student's t, two-sided 95%, for 1..30 degrees of freedom (beyond: the normal 1.96)
_T975 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11,
         2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04)


def paired_ratio(runs: list[Run], prompt_pass: dict[tuple[str, int, int], float], method: str,
                 other: str) -> dict[str, float | int | None] | None:
    """method's decode rate over other's, prompt by prompt: the geometric mean over prompts, with a 95% interval.

    Both methods ran each prompt back to back, so the machine's slow drifts (another job, the page cache)
    mostly cancel in a prompt's ratio, and the spread of the ratios across prompts says how far the mean can
    be trusted: log ratios l_i, mean m, interval exp(m -+ t_(n-1) s / sqrt(n)). The table's ratio of summed
    rates weighs long prompts more; this one weighs every prompt alike. Several repeats of a prompt: the mean
    of their log rates.
    """
    logs: dict[tuple[str, int], dict[str, list[float]]] = {}
    for r in runs:
        if r.method in (method, other) and r.new_tokens > 0:
            rate = r.new_tokens / decode_seconds(r, prompt_pass)
            logs.setdefault((r.category, r.prompt_index), {}).setdefault(r.method, []).append(math.log(rate))
    ratios = [statistics.fmean(m[method]) - statistics.fmean(m[other]) for m in logs.values() if method in m and other in m]
    if not ratios:
        return None
    mean = statistics.fmean(ratios)
    if len(ratios) < 2:
        return {"geo_mean": math.exp(mean), "low": None, "high": None, "prompts": 1}
    t = _T975[len(ratios) - 2] if len(ratios) - 1 <= len(_T975) else 1.96
    half = t * statistics.stdev(ratios) / math.sqrt(len(ratios))
    return {"geo_mean": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half),
            "prompts": len(ratios)}


def summarize(runs: list[Run], prompt_pass: dict[tuple[str, int, int], float], curve: dict | None,
              methods: Sequence[str], greedy: bool, aggregate: str = "min") -> dict[str, Any]:
    """Rates, speed-ups, ratios to transformers, acceptance and the theory for one group of runs."""
    out: dict[str, Any] = {"prompts": len({(r.category, r.prompt_index) for r in runs})}
    identical = _identical(runs) if greedy else None
    peak = {m: [r.memory for r in runs if r.method == m] for m in methods}
    runs = representative(runs, prompt_pass, aggregate)
    tps, e2e, tokens, memory = {}, {}, {}, {}
    for method in methods:
        mine = [r for r in runs if r.method == method]
        if not mine:
            continue
        n = sum(r.new_tokens for r in mine)
        wall = sum(r.seconds for r in mine)
        decode = sum(decode_seconds(r, prompt_pass) for r in mine)
        tokens[method] = n
        tps[method] = _rate(n, decode)
        e2e[method] = _rate(n, wall)
        rss = [m["peak_rss_bytes"] for m in peak[method] if m.get("peak_rss_bytes") is not None]
        gpu = [m["peak_gpu_bytes"] for m in peak[method] if m.get("peak_gpu_bytes") is not None]
        memory[method] = {"peak_rss_bytes": max(rss) if rss else None, "peak_gpu_bytes": max(gpu) if gpu else None}
    base = tps.get("baseline")
    out.update(new_tokens=tokens, tokens_per_second=tps, e2e_tokens_per_second=e2e,
               speedup={m: _ratio(v, base) for m, v in tps.items()},
               e2e_speedup={m: _ratio(v, e2e.get("baseline")) for m, v in e2e.items()},
               ratio_to_hf={"hf_assisted": _ratio(tps.get("speculative"), tps.get("hf_assisted")),
                            "hf_matched": _ratio(tps.get("speculative"), tps.get("hf_matched"))},
               memory=memory,
               paired={m: paired_ratio(runs, prompt_pass, "speculative", m)
                       for m in ("baseline", "hf_assisted", "hf_matched") if m in tps and "speculative" in tps})
    spec = [r for r in runs if r.method == "speculative"]
    if spec:
        out.update(_theory(spec, curve, out["speedup"].get("speculative")))
    if greedy:
        out["identical"] = identical
    return out


def _theory(spec: list[Run], curve: dict | None, measured: float | None) -> dict[str, Any]:
    accepted = sum(r.stats["accepted"] for r in spec)
    checked = sum(r.stats["checked"] for r in spec)
    drafted = sum(r.stats["drafted"] for r in spec)
    rounds = sum(r.stats["rounds"] for r in spec)
    gammas = [g for r in spec for g in r.stats["drafted_per_round"]]
    seconds = sum(r.stats["engine_seconds"] for r in spec)
    a = accepted / checked if checked else 0.0
    result: dict[str, Any] = {
        "acceptance_rate": a, "accepted_per_drafted": accepted / drafted if drafted else 0.0,
        "mean_accepted_per_round": accepted / rounds if rounds else 0.0,
        "alternatives_kept_per_round": sum(r.stats.get("alternatives_kept", 0) for r in spec) / rounds if rounds else 0.0,
        "mean_tokens_per_round": sum(r.new_tokens for r in spec) / rounds if rounds else 0.0,
        "mean_gamma": sum(gammas) / len(gammas) if gammas else 0.0,
        "plain_rounds": sum(1 for g in gammas if g == 0), "rounds": rounds,
        "bookkeeping_share": sum(r.stats["bookkeeping_seconds"] for r in spec) / seconds if seconds else 0.0,
        "draft_seconds_per_forward": (sum(r.stats["draft_seconds"] for r in spec)
                                      / max(1, sum(r.stats["draft_forwards"] for r in spec))),
        # below 1 when lookahead scored several drafted tokens in one draft forward
        "draft_forwards_per_drafted": sum(r.stats["draft_forwards"] for r in spec) / drafted if drafted else None,
    }
    if curve is None or not curve.get("draft_step_seconds"):
        return result
    t_target, t_draft = curve["target_step_seconds"], curve["draft_step_seconds"]
    c = t_draft / t_target
    expected = sum(expected_tokens(a, g) for g in gammas)
    cost = sum(g * t_draft + curve_time(curve, g) for g in gammas)
    free_verify_cost = sum(g * c + 1.0 for g in gammas)
    predicted = expected * t_target / cost if cost else None
    leviathan = expected / free_verify_cost if free_verify_cost else None
    result.update(cost_ratio_c=c, t_target=t_target, t_draft=t_draft,
                  predicted_speedup=predicted, leviathan_speedup=leviathan,
                  efficiency=_ratio(measured, predicted), efficiency_leviathan=_ratio(measured, leviathan))
    return result


def _identical(runs: list[Run]) -> bool:
    by_prompt: dict[tuple, list[tuple[int, ...]]] = {}
    for r in runs:
        by_prompt.setdefault((r.category, r.prompt_index, r.repeat), []).append(tuple(r.token_ids))
    return all(len(set(outputs)) == 1 for outputs in by_prompt.values())


# ---------------------------------------------------------------- the benchmark

@dataclass(frozen=True)
class BenchSettings:
    config: SpecConfig
    methods: tuple[str, ...] = DEFAULT_METHODS
    repeats: int = 1
    warmup: bool = True
    chat: bool = True
    curve_gammas: int = CURVE_GAMMAS
    curve_repeats: int = 3
    curve_every_prompt: bool = True    # one more set of curve samples at every prompt (medians of all)
    aggregate: str = "min"             # per prompt and method over the repeats: "min" (least disturbed) or "mean"

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
        if self.config.drafter != "model" and any(m.startswith("hf_") and m != "hf_plain" for m in self.methods):
            raise ConfigError("transformers' assisted generation needs the model drafter (use --methods to leave it out)")
        return self


def run_benchmark(pair, prompts: dict[str, list[str]], settings: BenchSettings, log: Log = _quiet) -> dict[str, Any]:
    """Run every method on every prompt, alternating prompt by prompt; return the JSON document."""
    from .runs import encode

    settings.validate()
    config = settings.config
    methods = [m for m in METHODS if m in settings.methods]
    if pair.draft is None:
        methods = [m for m in methods if m in ("baseline", "speculative", "hf_plain")]
        if config.drafter == "model" and "speculative" in methods:
            raise ConfigError("this pair has no draft model: choose --drafter ngram")
    encoded = {c: [encode(pair, p, chat=settings.chat) for p in ps] for c, ps in prompts.items()}
    memory = PeakMemory(pair.device)

    first = next(ids for ids_list in encoded.values() for ids in ids_list)
    log(f"measuring the verify-cost curve (g = 0..{settings.curve_gammas}) at a {len(first)}-token context ...")
    curve = measure_verify_curve(pair, first, settings.curve_gammas, settings.curve_repeats)
    if settings.warmup:
        log("warm-up: every method once on the first prompt")
        warm = replace(config, max_new_tokens=min(config.max_new_tokens, 16))
        for method in methods:
            run_method(pair, method, first, warm, memory)

    runs: list[Run] = []
    prompt_pass: dict[tuple[str, int, int], float] = {}
    started = time.perf_counter()
    total = settings.repeats * sum(len(v) for v in encoded.values())
    done = 0
    for repeat in range(settings.repeats):
        for category, id_lists in encoded.items():
            for index, ids in enumerate(id_lists):
                shift = done % len(methods)                       # rotate the order from prompt to prompt
                order = methods[shift:] + methods[:shift]
                prompt_pass[(category, index, repeat)] = measure_prompt_pass(pair, ids)
                if settings.curve_every_prompt:
                    add_curve_samples(pair, curve, ids)
                mine = {}
                for method in order:
                    mine[method] = run_method(pair, method, ids, config, memory, category, index, repeat)
                runs.extend(mine[m] for m in methods)
                done += 1
                base = mine["baseline"]
                parts = [f"{m} {mine[m].new_tokens / decode_seconds(mine[m], prompt_pass):.2f}"
                         for m in methods]
                log(f"[{done}/{total}] {category} #{index + 1} ({len(ids)} prompt tokens, {base.new_tokens} new): "
                    f"tok/s " + ", ".join(parts))
    elapsed = time.perf_counter() - started

    groups = {c: [r for r in runs if r.category == c] for c in encoded}
    document = {
        "format": BENCH_FORMAT, "version": BENCH_VERSION, "created": _now(),
        "environment": environment(pair),
        "pair": dict(pair.names, target_prepacked=str(is_prepacked(pair.target)).lower()),
        "settings": {"config": config.to_dict(), "methods": methods, "repeats": settings.repeats,
                     "warmup": settings.warmup, "chat": settings.chat, "aggregate": settings.aggregate,
                     "hf_assisted": dict(HF_DEFAULTS),
                     "hf_matched": hf_matched_settings(config),
                     "timing": "tokens/s = new tokens / (wall seconds - the target's prompt pass, timed alone); "
                               "e2e includes it",
                     "memory_per_method": memory.per_method},
        "verify_curve": curve,
        "categories": {c: summarize(rs, prompt_pass, curve, methods, config.greedy, settings.aggregate)
                       for c, rs in groups.items()},
        "overall": summarize(runs, prompt_pass, curve, methods, config.greedy, settings.aggregate),
        "runs": [_run_json(r, prompts, prompt_pass) for r in runs],
        "seconds": elapsed,
    }
    return document


def _run_json(r: Run, prompts: dict[str, list[str]], prompt_pass) -> dict[str, Any]:
    p = prompt_pass[(r.category, r.prompt_index, r.repeat)]
    return {"method": r.method, "category": r.category, "prompt_index": r.prompt_index,
            "prompt": prompts[r.category][r.prompt_index], "repeat": r.repeat, "new_tokens": r.new_tokens,
            "seconds": r.seconds, "prompt_pass_seconds": p,
            "tokens_per_second": _rate(r.new_tokens, decode_seconds(r, prompt_pass)),
            "e2e_tokens_per_second": _rate(r.new_tokens, r.seconds),
            "token_ids": r.token_ids, **r.memory, "stats": r.stats}


# ---------------------------------------------------------------- the table

def _paired_line(paired: dict[str, dict | None], short: dict[str, str]) -> str:
    parts = [f"{'over' if m == 'baseline' else 'to'} {short[m]} {v['geo_mean']:.2f}"
             + (f" [{v['low']:.2f}, {v['high']:.2f}]" if v["low"] is not None else "")
             for m, v in paired.items() if v is not None]
    if not parts:
        return "ours prompt by prompt: -"
    n = max(v["prompts"] for v in paired.values() if v is not None)
    return (f"ours prompt by prompt (geometric mean of the {n} prompts' ratios, 95% interval): " + ", ".join(parts))


def _f(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def format_table(doc: dict[str, Any]) -> str:
    methods = doc["settings"]["methods"]
    short = {"baseline": "base", "speculative": "ours", "hf_assisted": "hf", "hf_matched": "hf=", "hf_plain": "hf-ar"}
    head = (["category", "n"] + [f"{short[m]} t/s" for m in methods]
            + [f"{short[m]} x" for m in methods if m != "baseline"]
            + ["ours/hf", "ours/hf=", "a", "acc/rnd", "alt/rnd", "g", "fwd/d", "c", "pred", "eff", "same"])
    rows = []
    for name, s in list(doc["categories"].items()) + [("overall", doc["overall"])]:
        row = [name, str(s["prompts"])]
        row += [_f(s["tokens_per_second"].get(m)) for m in methods]
        row += [_f(s["speedup"].get(m), suffix="x") for m in methods if m != "baseline"]
        row += [_f(s["ratio_to_hf"].get("hf_assisted")), _f(s["ratio_to_hf"].get("hf_matched")),
                _f(s.get("acceptance_rate")), _f(s.get("mean_accepted_per_round")),
                _f(s.get("alternatives_kept_per_round")), _f(s.get("mean_gamma"), ".1f"),
                _f(s.get("draft_forwards_per_drafted")), _f(s.get("cost_ratio_c"), ".3f"), _f(s.get("predicted_speedup"), suffix="x"), _f(s.get("efficiency")),
                {True: "yes", False: "NO", None: "-"}[s.get("identical")]]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows[:-1]]
    out += [line(["-" * w for w in widths]), line(rows[-1])]
    o = doc["overall"]
    mem = ", ".join(f"{short[m]} {_gib(v['peak_rss_bytes'])}" + (f" (GPU {_gib(v['peak_gpu_bytes'])})"
                                                                  if v.get("peak_gpu_bytes") else "")
                    for m, v in o["memory"].items())
    per = "" if doc["settings"]["memory_per_method"] else " (process-wide: this OS cannot reset the peak)"
    notes = [
        "",
        "t/s: new tokens per second after the target's prompt pass (same for every method); x: speed-up over base.",
        "base = the target alone (ours), ours = our speculative decoding, hf = transformers' assisted generation "
        f"with its defaults ({HF_DEFAULTS['num_assistant_tokens']} tokens, confidence "
        f"{HF_DEFAULTS['assistant_confidence_threshold']}), hf= = the same with our settings "
        f"({doc['settings']['hf_matched']['num_assistant_tokens']} tokens, confidence "
        f"{doc['settings']['hf_matched']['assistant_confidence_threshold']}), hf-ar = target.generate() alone.",
        "a = accepted / checked drafted tokens; acc/rnd = accepted per round; alt/rnd = alternatives kept per "
        f"round (ours, {doc['settings']['config'].get('alternatives', 0)} other candidates verified with the draft's "
        "last token when the draft is unsure of it; not in a, acc/rnd or pred); g = mean drafted per round; "
        f"fwd/d = draft forwards per drafted token (ours, lookahead {doc['settings']['config'].get('lookahead', 0)}: "
        "prompt-lookup guesses scored in one draft forward; transformers drafts one token per forward); "
        "c = draft step / target step; pred = E(a,g) t_target / (g t_draft + t_verify(g)) from the measured curve; "
        "eff = measured ours x / pred.",
        _paired_line(o.get("paired") or {}, short),
        f"end-to-end (prompt pass included) speed-up: " + ", ".join(
            f"{short[m]} {_f(v, suffix='x')}" for m, v in o["e2e_speedup"].items() if m != "baseline"),
        f"bookkeeping for the trace: {_f(100 * o['bookkeeping_share'] if 'bookkeeping_share' in o else None, '.2f')}% "
        f"of our speculative runs' time; Leviathan's prediction with a free verify: "
        f"{_f(o.get('leviathan_speedup'), suffix='x')}",
        f"peak resident memory per method{per}: {mem}",
    ]
    return "\n".join(out + notes)


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


# ---------------------------------------------------------------- environment

def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} CPUs)"


def environment(pair) -> dict[str, Any]:
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": _transformers_version(), "device": str(pair.device),
            "device_name": device_name(pair.device), "threads": torch.get_num_threads(),
            "load_average": _load_average(), "argv": sys.argv}


def _load_average() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _transformers_version() -> str:
    import transformers
    return transformers.__version__


def _now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def is_prepacked(model) -> bool:
    from .fastpath import is_prepacked as check
    return check(model)


# ---------------------------------------------------------------- command line

def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SpecConfig(**BENCH_DEFAULTS)
    parser.add_argument("--prompts", default=str(DEFAULT_PROMPTS), help="JSON file {\"category\": [prompt, ...]}")
    parser.add_argument("--categories", default=",".join(CATEGORIES),
                        help="comma-separated categories of the prompt file (default: all five)")
    parser.add_argument("--per-category", type=int, default=None, help="use only the first N prompts of each category")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--drafter", choices=["model", "ngram"], default="model")
    parser.add_argument("--gamma", type=int, default=defaults.gamma, help="draft length (the start value if not constant)")
    parser.add_argument("--schedule", choices=["constant", "adaptive", "auto"], default=defaults.schedule,
                        help="auto: cost-aware, picks each round's draft length (0 = a plain target step)")
    parser.add_argument("--gamma-max", type=int, default=defaults.gamma_max)
    parser.add_argument("--lookahead", type=int, default=defaults.lookahead,
                        help="model drafter: prompt-lookup guesses scored per draft forward (0 = off)")
    parser.add_argument("--alternatives", type=int, default=defaults.alternatives,
                        help="model drafter: other candidates for the last draft token, verified in the same "
                             "target forward when the draft is unsure of it (0 = off)")
    parser.add_argument("--draft-confidence", type=float, default=defaults.draft_confidence,
                        help="stop drafting when the draft's top probability is below this (0 = off)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="times every prompt is run per method")
    parser.add_argument("--aggregate", choices=["min", "mean"], default="min",
                        help="over the repeats, per prompt and method: the least disturbed run (min) or all (mean)")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                        help=f"comma-separated, from {', '.join(METHODS)} (baseline is required)")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--no-fuse-prompt", action="store_true",
                        help="give the prompt its own forward pass in our methods (default: fused into the first round)")
    parser.add_argument("--raw", action="store_true", help="plain continuation, no chat template")
    parser.add_argument("--no-prepack", action="store_true",
                        help="keep MKL's linear layers in the float32 target on CPU (default: oneDNN prepacked weights)")
    parser.add_argument("--compile", action="store_true",
                        help="static KV cache + torch.compile for the one-token steps of the target and the draft "
                             "(CUDA graphs on a GPU; for ours and the baseline, not transformers' methods; "
                             "--alternatives is then off: a compiled step takes no token-tree mask)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--curve-gammas", type=int, default=CURVE_GAMMAS, help="largest g of the verify-cost curve")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="where to write the JSON (default: out/bench-<time>.json)")
    parser.add_argument("--curve-out", default=None, metavar="PATH",
                        help="also write the verify-cost curve here (default for the built-in pair: "
                             "assets/verify_curve_<device>.json; 'none' to skip)")


def _config_from(args: argparse.Namespace) -> SpecConfig:
    return SpecConfig(
        gamma=args.gamma, schedule=args.schedule,
        gamma_max=args.gamma_max if args.schedule != "constant" else max(args.gamma_max, args.gamma),
        draft_confidence=args.draft_confidence, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        seed=args.seed, max_new_tokens=args.max_new_tokens, drafter=args.drafter, lookahead=args.lookahead,
        alternatives=args.alternatives,
        fuse_prompt=not args.no_fuse_prompt,
    ).validate()


def main(args: argparse.Namespace) -> int:
    from .models import load_pair

    config = _config_from(args)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    settings = BenchSettings(config=config, methods=methods, repeats=args.repeats, warmup=not args.no_warmup,
                             chat=not args.raw, curve_gammas=args.curve_gammas, aggregate=args.aggregate).validate()
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    prompts = load_prompts(args.prompts, categories, args.per_category)
    if args.threads:
        torch.set_num_threads(args.threads)
    log = lambda message: print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    spec = replace(pair_spec(args), prepack_target=not args.no_prepack)   # load_pair prepacks by default
    pair = load_pair(spec, progress=ConsoleProgress())
    load_seconds = time.perf_counter() - started
    prepacked = is_prepacked(pair.target)
    if args.compile:
        from .kvcache import enable_compiled_decoding
        models = [pair.target]
        # torch.compile does not trace the CPU's int8 dynamic-quantized draft: that one stays eager
        if pair.draft is not None and pair.names.get("draft_quantized") != "int8":
            models.append(pair.draft)
        for model in models:
            enable_compiled_decoding(model)
        log("compiled decoding on: the warm-up compiles (tens of seconds)")
    log(f"pair loaded in {load_seconds:.1f} s ({pair.names.get('target')} <- {pair.names.get('draft')}, "
        f"{pair.device}; target linear layers {'prepacked for oneDNN' if prepacked else 'as loaded'})")

    doc = run_benchmark(pair, prompts, settings, log)
    doc["load_seconds"] = load_seconds
    table = format_table(doc)
    print(format_curve(doc["verify_curve"]))
    print()
    print(table)

    path = Path(args.json) if args.json else ROOT / "out" / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"\nJSON: {path}")
    curve_out = args.curve_out
    if curve_out is None and args.target == "builtin":
        curve_out = str(ROOT / "assets" / f"verify_curve_{pair.device.type}.json")
    if curve_out and curve_out.lower() != "none":
        Path(curve_out).parent.mkdir(parents=True, exist_ok=True)
        Path(curve_out).write_text(json.dumps(doc["verify_curve"], indent=1), encoding="utf-8")
        print(f"verify-cost curve: {curve_out}")
    return 0
