"""A probe for issue 54, not a form the app loads: the built-in target with every Linear layer as fbgemm's W8A8 int8
(per-channel int8 weights, per-token activation scales: fastpath.DraftLinear under per_token_activations, the draft's
batch path). It prints whether a verify's rows equal single steps bit for bit, what a step and a 9-token verify cost,
how long greedy text stays equal to float32's, and speculative decoding on it (speed-up over its own plain decoding,
greedy identity with and without the fused prompt). docs/notes/2026-12-precision.md, "A W8A8 int8 target, probed".

    flock -x /tmp/quiet.lock .venv/bin/python -m scripts.w8a8_probe [--tokens 48]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end, vocab_width
from specviz.decoding.kvcache import CachedModel
from specviz.models.fastpath import dynamic_linear, per_token_activations, replace_in_threads
from specviz.models.loading import PairSpec, load_pair
from specviz.runs import speculative_generate

PROMPTS = (
    "def quicksort(items):",
    "Explain in two sentences why the sky is blue.",
    "Write a Python function that checks whether a string is a palindrome.",
)


def w8a8(linear: torch.nn.Linear) -> torch.nn.Module:
    """One Linear as fbgemm's dynamic int8 with a symmetric int8 scale per output row."""
    weight = linear.weight.detach().float()
    scales = (weight.abs().amax(dim=1) / 127).clamp_min(1e-12).double()
    zeros = torch.zeros_like(scales, dtype=torch.int64)
    quantized = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
    return dynamic_linear(quantized, None if linear.bias is None else linear.bias.detach().float())


def plain(pair, ids: list[int], tokens: int, fuse: bool = False) -> tuple[list[int], float]:
    """Greedy plain decoding; fuse: the prompt's last token goes into the prompt pass (as a fused speculative run's
    first forward takes the whole prompt), else into the first step."""
    config = SpecConfig(max_new_tokens=tokens, temperature=0.0, fuse_prompt=fuse)
    started = time.perf_counter()
    _, summary = run_to_end(autoregressive_generate(pair, ids, config))
    return list(summary.token_ids), time.perf_counter() - started


def costs(pair, ids: list[int], label: str) -> None:
    """Median of 7: one token, then 9, fed after the same context (the cache cut back after each)."""
    cache = CachedModel(pair.target, vocab_width(pair))
    cache.feed(ids[:-9])
    length, one, nine = cache.length, [], []
    for _ in range(7):
        for fed, times in (([ids[-9]], one), (ids[-9:], nine)):
            started = time.perf_counter()
            cache.feed(fed, logits_to_keep=len(fed))
            times.append(time.perf_counter() - started)
            cache.truncate(length)
    step, verify = statistics.median(one), statistics.median(nine)
    print(f"{label}: step {step:.3f} s, 9 tokens {verify:.3f} s = {verify / step:.2f} steps")


def rows_equal_steps(pair, ids: list[int], rows: int) -> bool:
    together = CachedModel(pair.target, vocab_width(pair))
    together.feed(ids[:-rows])
    fed = together.feed(ids[-rows:], logits_to_keep=rows)
    alone = CachedModel(pair.target, vocab_width(pair))
    alone.feed(ids[:-rows])
    return torch.equal(fed, torch.cat([alone.feed([token]) for token in ids[-rows:]]))


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=48)
    tokens = parser.parse_args().tokens
    pair = load_pair(PairSpec(precision="fp32", prepack_target=False))  # plain Linear layers to convert
    ids = {prompt: pair.encode_prompt(prompt) for prompt in PROMPTS}
    reference = {prompt: plain(pair, ids[prompt], tokens)[0] for prompt in PROMPTS}
    costs(pair, ids[PROMPTS[2]], "float32 (not prepacked)")
    linears = [(name, module) for name, module in pair.target.named_modules() if type(module) is torch.nn.Linear]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager-mode quantization is marked deprecated
        replace_in_threads(pair.target, linears, w8a8)
    with per_token_activations():
        for rows in (9, 20, 40):
            print(
                f"W8A8: {rows} rows of a verify equal {rows} single steps, bit for bit: "
                f"{rows_equal_steps(pair, ids[PROMPTS[2]], rows)}"
            )
        costs(pair, ids[PROMPTS[2]], "W8A8")
        for prompt in PROMPTS:
            text, seconds = plain(pair, ids[prompt], tokens)
            print(
                f"{prompt[:24]!r}: W8A8 plain {len(text) / seconds:.2f} tok/s, equal to float32's first "
                f"{first_difference(text, reference[prompt])} of {len(reference[prompt])} tokens"
            )
            for fuse in (False, True):
                same_prompt_pass = plain(pair, ids[prompt], tokens, fuse)[0]  # plain decoding, the same prompt pass
                config = SpecConfig(
                    max_new_tokens=tokens,
                    temperature=0.0,
                    schedule="auto",
                    gamma_max=16,
                    draft_confidence=0.7,
                    lookahead=8,
                    alternatives=2,
                    fuse_prompt=fuse,
                )
                started = time.perf_counter()
                _, summary = run_to_end(speculative_generate(pair, ids[prompt], config))
                rate = len(summary.token_ids) / (time.perf_counter() - started)
                print(
                    f"  speculative, fused prompt {fuse}: {rate:.2f} tok/s ({rate * seconds / len(text):.2f}x its "
                    f"plain), identical to plain: {list(summary.token_ids) == same_prompt_pass}"
                )


if __name__ == "__main__":
    main()
