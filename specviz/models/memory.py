"""What a pair will hold in memory once loaded on the CPU, and a refusal, before any weights are read, when that is
more than the machine has available (psutil's `available`: what it can give without swapping).

Counted on the meta device (nothing allocated): Linear weights at the precision's bytes, embeddings and the rest at
theirs, plus RUNTIME_BYTES for torch, transformers, the tokenizer and a run. Measured against /usr/bin/time -v in
docs/notes/2026-12-precision.md.
"""

from __future__ import annotations

from typing import Any

import torch

from specviz.errors import ModelLoadError

from .precision import PRECISIONS, Precision

RUNTIME_BYTES = 700 << 20  # torch, transformers, the tokenizer, caches and logits of a run (measured: the note)


def weight_counts(config: Any, allow_code: bool) -> tuple[int, int, int]:
    """(weights in Linear layers, in embeddings, elsewhere) of a model, counted on the meta device."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights():
        empty = AutoModelForCausalLM.from_config(config, trust_remote_code=allow_code)
    linear = embedding = 0
    for module in empty.modules():
        if isinstance(module, torch.nn.Linear):
            linear += module.weight.numel()
        elif isinstance(module, torch.nn.Embedding):
            embedding += module.weight.numel()
    return linear, embedding, sum(p.numel() for p in empty.parameters()) - linear - embedding


def model_footprint(counts: tuple[int, int, int], precision: Precision, draft: bool, quantize: bool) -> int:
    """Bytes a model holds once loaded on the CPU in this precision."""
    linear, embedding, rest = counts
    if draft and quantize:  # int8 Linear weights, a bfloat16 embedding, float32 for the rest
        return linear + 2 * embedding + 4 * rest
    if not draft and precision.name == "int8":  # int8 Linear weights and embedding, bfloat16 elsewhere
        return linear + embedding + 2 * rest
    itemsize = precision.dtype.itemsize
    return itemsize * (linear + embedding + rest)


def pair_counts(configs: dict[str, Any], allow_code: bool) -> dict[str, tuple[int, int, int]]:
    """weight_counts of each role's config (a meta model each: built once per load, then priced per precision)."""
    return {role: weight_counts(config, allow_code) for role, config in configs.items()}


def pair_footprint(counts: dict[str, tuple[int, int, int]], precision: Precision, quantize: bool) -> int:
    return RUNTIME_BYTES + sum(
        model_footprint(c, precision, role == "draft", quantize and role == "draft") for role, c in counts.items()
    )


def available_memory() -> int:
    """Bytes the system can give this process without swapping (psutil's `available`)."""
    import psutil

    return int(psutil.virtual_memory().available)


def check_memory(configs: dict[str, Any], precision: Precision, quantize: bool, allow_code: bool) -> int:
    """Refuse a load that would not fit, in one line naming both numbers and the smaller choice; return the need."""
    counts = pair_counts(configs, allow_code)
    need, free = pair_footprint(counts, precision, quantize), available_memory()
    if need <= free:
        return need
    smaller = [
        (name, pair_footprint(counts, PRECISIONS[name], quantize))
        for name in ("bf16", "int8")
        if PRECISIONS[name].bytes_per_weight < precision.bytes_per_weight
    ]
    fits = [(name, size) for name, size in smaller if size <= free]
    if fits:
        name, size = fits[0]
        advice = f"choose precision {name} (about {size / 2**30:.1f} GiB: --precision {name}, or the sidebar)"
    else:
        advice = "close other programs first (no smaller precision fits either)"
    raise ModelLoadError(
        f"Loading this pair in {precision.name} needs about {need / 2**30:.1f} GiB of memory and "
        f"{free / 2**30:.1f} GiB is available: {advice}."
    )
