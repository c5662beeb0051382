"""What a head training adds to the loaded pair's memory, and a refusal before it starts when that is more than the
machine has available (the Heads page and train-heads say the same line).

Counted from the target's config and the settings, an upper bound: a lower-precision copy of the target where the
answers are decoded in another dtype (a float32 target on a bfloat16 CPU), the decoding's KV cache and logits for
`rows` answers at once, the collected features, and the heads with their gradients and Adam's two moments.
The built-in pair's measured peaks: docs/notes/2026-12-precision.md, "Training within the budget".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specviz.drafters import EAGLE
from specviz.drafters.eagle_head import EAGLE_INTERMEDIATE
from specviz.models.memory import available_memory, weight_counts

from .features import TrainSettings
from .greedy import collection_dtype

OVERHEAD = 300 << 20  # the optimiser's and the collection's own bookkeeping
PROMPT_TOKENS = 512  # a training prompt's length, at most (a def or class of a source file, and the question)
SMALLEST = TrainSettings(heads=1, train_tokens=2_000, heldout_tokens=1_000, epochs=1)


def training_bytes(model: Any, settings: TrainSettings, kind: str) -> int:
    text = model.config.get_text_config()
    hidden, layers, vocab = text.hidden_size, text.num_hidden_layers, text.vocab_size
    kv_width = getattr(text, "num_key_value_heads", text.num_attention_heads) * (hidden // text.num_attention_heads)
    dtype = collection_dtype(model, settings)
    copy = sum(weight_counts(model.config, False)) * dtype.itemsize if dtype != model.dtype else 0
    cache = settings.rows * (settings.new_tokens + PROMPT_TOKENS) * layers * 2 * kv_width * dtype.itemsize
    logits = settings.rows * vocab * 4 * 3  # float32 logits, their softmax and a temporary
    tokens = settings.train_tokens + settings.heldout_tokens
    features = tokens * (hidden * 4 + settings.heads * 8) * (2 if kind == EAGLE else 1)  # EAGLE: its windows too
    rows = min(vocab, tokens) * hidden  # the LM head's rows of the tokens the answers use
    if kind == EAGLE:
        params = 4 * hidden * hidden + 3 * hidden * EAGLE_INTERMEDIATE + 2 * hidden * hidden + rows
    else:
        params = settings.heads * (hidden * hidden + hidden) + rows
    return OVERHEAD + copy + cache + logits + features + 16 * params  # weights, gradients, two Adam moments


def check_training_memory(model: Any, settings: TrainSettings, kind: str) -> None:
    """Refuse, in one line naming both numbers and the smallest setting's need, a training that would not fit."""
    from .train import TrainError

    need, free = training_bytes(model, settings, kind), available_memory()
    if need <= free:
        return
    smallest = training_bytes(model, replace(SMALLEST, rows=settings.rows, collect_dtype=settings.collect_dtype), kind)
    advice = (
        f"the smallest (2,000 tokens, one head, one epoch) needs about {smallest / 2**30:.1f} GiB"
        if smallest <= free
        else "close other programs first (even the smallest setting would not fit)"
    )
    raise TrainError(
        f"Training at this setting needs about {need / 2**30:.1f} GiB more memory and {free / 2**30:.1f} GiB is "
        f"available: {advice}."
    )
