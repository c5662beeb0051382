"""The verify-cost curve: the target's time for one forward over g+1 tokens, and the draft's step.

It gives the theory its costs: c = t_draft / t_target and t_verify(g) (see specviz.lessons.theory.curve_time).
Each figure is the median of its samples; the benchmark adds a set of samples at every prompt, so that
one noisy moment does not make the curve.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from specviz.decoding.engine import synchronize

from .environment import device_name, is_prepacked, now, transformers_version

CURVE_FORMAT = "specviz-verify-curve"
CURVE_VERSION = 1
CURVE_GAMMAS = 8


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@torch.inference_mode()
def _forward_samples(
    model, context: list[int], max_new: int, repeats: int, vocab: int, seed: int = 0
) -> list[list[float]]:
    """Seconds of KV-cached forwards over n = 1..max_new new tokens after `context` (`repeats` samples
    each, after one warm-up), through the engine's own CachedModel (so a compiled decoder's steps are
    what is timed)."""
    from specviz.decoding.kvcache import CachedModel

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
            state.cache.crop(-n)  # this transformers takes minus the count to remove
            del state.ids[-n:]
        samples.append(times[1:])
    return samples


def _vocab(pair) -> int:
    return min(
        pair.target.config.get_text_config().vocab_size,
        pair.draft.config.get_text_config().vocab_size if pair.draft is not None else 10**9,
    )


def measure_verify_curve(pair, context: list[int], max_gamma: int = CURVE_GAMMAS, repeats: int = 3) -> dict:
    """The target's time for one forward over g+1 tokens (g = 0..max_gamma: a verify of g drafted
    tokens; g = 0 is one plain decoding step), and the draft's time for one step, at `context`."""
    vocab = _vocab(pair)
    curve = {
        "format": CURVE_FORMAT,
        "version": CURVE_VERSION,
        "device": pair.device.type,
        "device_name": device_name(pair.device),
        "threads": torch.get_num_threads(),
        "target": pair.names.get("target", "?"),
        "draft": pair.names.get("draft", "?"),
        "dtype": pair.names.get("dtype", "?"),
        "draft_quantized": pair.names.get("draft_quantized", "?"),
        "target_prepacked": is_prepacked(pair.target),
        "contexts": [len(context)],
        "context_tokens": len(context),
        "gamma": list(range(max_gamma + 1)),
        "tokens": [g + 1 for g in range(max_gamma + 1)],
        "target_samples": _forward_samples(pair.target, context, max_gamma + 1, repeats, vocab),
        "draft_samples": _forward_samples(pair.draft, context, 2, repeats, vocab) if pair.draft is not None else None,
        "torch": torch.__version__,
        "transformers": transformers_version(),
    }
    return _summarize_curve(curve)


def add_curve_samples(pair, curve: dict, context: list[int], repeats: int = 1) -> dict:
    """One more set of samples at another context; the curve's figures become the medians of all."""
    vocab = _vocab(pair)
    more = _forward_samples(pair.target, context, len(curve["gamma"]), repeats, vocab)
    curve["target_samples"] = [old + new for old, new in zip(curve["target_samples"], more, strict=True)]
    if curve.get("draft_samples") is not None:
        more = _forward_samples(pair.draft, context, 2, repeats, vocab)
        curve["draft_samples"] = [old + new for old, new in zip(curve["draft_samples"], more, strict=True)]
    curve["contexts"].append(len(context))
    return _summarize_curve(curve)


def _summarize_curve(curve: dict) -> dict:
    target = [_median(s) for s in curve["target_samples"]]
    draft = [_median(s) for s in curve["draft_samples"]] if curve.get("draft_samples") else None
    t0 = target[0]
    curve.update(
        context_tokens=round(_median(curve["contexts"])),
        samples=len(curve["target_samples"][0]),
        target_seconds=target,
        relative_to_one_token=[t / t0 for t in target],
        target_step_seconds=t0,
        draft_step_seconds=draft[0] if draft else None,
        draft_two_token_seconds=draft[1] if draft else None,
        cost_ratio_c=draft[0] / t0 if draft else None,
        measured_at=now(),
    )
    return curve


def format_curve(curve: dict) -> str:
    t0 = curve["target_step_seconds"]
    lines = [
        f"Verify-cost curve ({curve['device_name']}, {curve['threads']} threads, "
        f"context {curve['context_tokens']} tokens): the target's time for one forward over g+1 tokens, "
        f"next to one token"
    ]
    lines.append("   g  tokens   seconds   x one token")
    for g, t in zip(curve["gamma"], curve["target_seconds"], strict=True):
        lines.append(f"  {g:2d}  {g + 1:6d}  {t:8.4f}  {t / t0:6.2f}")
    if curve.get("draft_step_seconds"):
        lines.append(
            f"  draft step {curve['draft_step_seconds']:.4f} s, target step {t0:.4f} s: "
            f"cost ratio c = {curve['cost_ratio_c']:.3f}"
        )
    return "\n".join(lines)


@torch.inference_mode()
def measure_prompt_pass(pair, ids: list[int]) -> float:
    """Seconds of the target's KV-cached forward over the prompt (all but its last token, as the engine's
    separate prompt pass): the work every method does first, subtracted from each one's wall time."""
    from specviz.decoding.kvcache import CachedModel

    if len(ids) < 2:
        return 0.0
    state = CachedModel(pair.target, pair.target.config.get_text_config().vocab_size)
    synchronize(pair.device)
    start = time.perf_counter()
    state.feed(ids[:-1])
    synchronize(pair.device)
    return time.perf_counter() - start
