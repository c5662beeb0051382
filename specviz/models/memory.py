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
    """Bytes the system can give this process without swapping (psutil's `available`), read now."""
    import psutil

    return int(psutil.virtual_memory().available)


def builtin_need(precision: Precision, quantize: bool) -> int:
    """About what the built-in pair holds once loaded on the CPU in this precision, from its models' float32 sizes
    (no config read): enough to tell whether a held pair can stay while this one loads (serving/pairs.py)."""
    from . import builtin

    target = builtin.TARGET.converted_size * precision.bytes_per_weight / 4
    draft_bytes = builtin.FORM_BYTES["int8"] if quantize else precision.dtype.itemsize
    return int(RUNTIME_BYTES + target + builtin.DRAFT.converted_size * draft_bytes / 4)


class MemoryRefusal(ModelLoadError):
    """A load refused because the pair would not fit. Its words are written when they are read (`describe`): the
    memory available is read then, never the figure of the moment it was refused."""

    def __init__(self, precision: str, need: int, smaller: dict[str, int]):
        self.precision, self.need, self.smaller = precision, need, dict(smaller)
        super().__init__(self.describe())

    def holds(self, free: int | None = None) -> bool:
        """Whether the pair would still not fit (the memory read now unless `free` is given)."""
        return self.need > (available_memory() if free is None else free)

    def describe(self, free: int | None = None) -> str:
        """The refusal in one line, naming what is needed, what is available now and the smaller choice."""
        free = available_memory() if free is None else free
        fits = [(name, size) for name, size in self.smaller.items() if size <= free]
        if fits:
            name, size = fits[0]
            advice = f"choose precision {name} (about {size / 2**30:.1f} GiB: --precision {name}, or the sidebar)"
        else:
            advice = "close other programs first (no smaller precision fits either)"
        return (
            f"Loading this pair in {self.precision} needs about {self.need / 2**30:.1f} GiB of memory and "
            f"{free / 2**30:.1f} GiB is available now: {advice}."
        )


def check_memory(configs: dict[str, Any], precision: Precision, quantize: bool, allow_code: bool) -> int:
    """Refuse a load that would not fit (MemoryRefusal: one line naming both numbers and the smaller choice); return
    the need. The memory available is read at the check, and again whenever the refusal is shown."""
    counts = pair_counts(configs, allow_code)
    smaller = {
        name: pair_footprint(counts, PRECISIONS[name], quantize)
        for name in ("bf16", "int8")
        if PRECISIONS[name].bytes_per_weight < precision.bytes_per_weight
    }
    refusal = MemoryRefusal(precision.name, pair_footprint(counts, precision, quantize), smaller)
    if refusal.holds():
        raise refusal
    return refusal.need
