"""The batching benchmark's timings: a batch's forwards at its own shape, after its prompts, timed as often as asked
(the target's plain step [B, 1], its verify [B, g + 1], the draft's step [B, 1] and its catch-up [B, 2]), and the
medians that pool them."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from specviz.decoding.batchcache import BatchCache, left_padded
from specviz.decoding.engine import synchronize, vocab_width

from .batching_prediction import median


@torch.inference_mode()
def time_feed(state: BatchCache, width: int, rows: int, tokens: int, repeats: int, generator: torch.Generator) -> float:
    """Median seconds of state.feed over [rows, tokens] random ids after its cache (one warm-up first); the cache is
    cropped back after each."""
    times = []
    for _ in range(repeats + 1):
        ids = torch.randint(1, width, (rows, tokens), generator=generator)
        synchronize(state.model.device)
        start = time.perf_counter()
        state.feed(ids)
        synchronize(state.model.device)
        times.append(time.perf_counter() - start)
        state.truncate(state.length - tokens)
    return median(times[1:])


def prefilled(model, prompts: Sequence[Sequence[int]], width: int) -> BatchCache:
    ids, pads = left_padded(prompts)
    state = BatchCache(model, width, pads)
    # Nothing reads the prefill's logits: one column, not rows x tokens x vocabulary x 4 bytes (issue 44: 78 GB for
    # 64 rows of 2,000 tokens on the built-in pair)
    state.feed(ids, keep=1)
    return state


class ForwardTimer:
    """One batch's prompts prefilled in the target's and the draft's caches, kept to time the batch's forwards at its
    own shape as often as asked: the target's plain step [B, 1], its verify [B, g + 1], the draft's step [B, 1]."""

    def __init__(self, pair, prompts: Sequence[Sequence[int]], repeats: int, seed: int = 0) -> None:
        self.width, self.rows, self.repeats = vocab_width(pair), len(prompts), repeats
        self.generator = torch.Generator().manual_seed(seed)
        self.target = prefilled(pair.target, prompts, self.width)
        self.draft = prefilled(pair.draft, prompts, self.width)

    def time(self, state: BatchCache, tokens: int) -> float:
        return time_feed(state, self.width, self.rows, tokens, self.repeats, self.generator)

    def costs(self, gammas: Sequence[int]) -> dict:
        return {
            "target_step_seconds": self.time(self.target, 1),
            "verify": {g: self.time(self.target, g + 1) for g in gammas},
            "draft_step_seconds": self.time(self.draft, 1),
            # a round's first draft forward takes two tokens of a row that accepted its whole draft
            "draft_catch_up_seconds": self.time(self.draft, 2),
        }


def median_costs(timings: Sequence[dict]) -> dict:
    """Every timing of one batch size as one: each forward's median over the timings that have it."""
    gammas = sorted({g for t in timings for g in t["verify"]})
    return {
        "target_step_seconds": median([t["target_step_seconds"] for t in timings]),
        "verify": {g: median([t["verify"][g] for t in timings if g in t["verify"]]) for g in gammas},
        "draft_step_seconds": median([t["draft_step_seconds"] for t in timings]),
        "draft_catch_up_seconds": median([t["draft_catch_up_seconds"] for t in timings]),
    }
