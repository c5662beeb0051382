"""Row-invariant attention: a verify's rows get the bits single steps would (docs/DESIGN.md, "Row-invariant attention").

Greedy speculative text equals plain decoding only if the target's verify forward gives each of its n rows the
logits a one-token step at that position gives. Every Linear layer does, in every precision (models/precision.py);
attention does not: scaled_dot_product_attention over n query rows splits and sums in another order than over one
(and transformers packs a single query's heads as rows instead, `pack_gqa`), so a verify's logits differ from single
steps' in the last bits and a near-tie can flip the greedy text.

`row_invariant_attention` therefore computes every query row of a forward, the one-token steps' own included, by one
call of scaled_dot_product_attention: one query row in a plain step's layout against the keys that row may see, in
order, with no mask. For a causal chain those keys are a prefix of the cache; for a tree node (a 4D mask) they are
the cache, its ancestors and itself: the keys a plain step would see once that path is committed. A long prompt pass
on an empty cache runs as transformers' one call: plain decoding and speculation share it.

It works inside a CachedModel's feed on a dynamic cache (models/rows.py, `invariant_feed`), where the keys are the
cache and the feed; elsewhere (transformers' generate, a batch, a static cache, training) it is transformers' sdpa.
The price is n calls instead of one per layer (docs/notes/2026-12-precision.md, "Row-invariant attention").
Under torch.compile (the GPU's compiled steps on a static cache) it stays transformers' sdpa: a loop over
data-dependent key sets does not capture as one graph.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from .rows import committed_rows

NAME = "specviz_row_invariant"
# Feeds of more rows than this on an empty cache (prompt passes) run as one call: both methods share them.
PROMPT_ROWS = 64
_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("row_invariant_attention", default=True)


def row_invariant_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, heads, q, head_dim]
    key: torch.Tensor,  # [B, kv_heads, L, head_dim], the cache and this feed
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # None (causal), or [B, 1, q, L]: bool (True = seen) or additive float
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature; returns ([B, q, heads, head_dim], None)."""
    batch, heads, rows, width = query.shape
    keys = key.shape[2]
    committed = committed_rows()  # None outside a CachedModel's feed on a dynamic cache: transformers' own sdpa
    block = (committed or 0) if keys == rows else 0  # an empty cache: the prompt, then any fused drafts
    if (
        committed is None
        or not _ENABLED.get()
        or torch.compiler.is_compiling()
        or (keys == rows and rows > PROMPT_ROWS and block in (0, rows))
        or any(kwargs.get(name) is not None for name in ("softcap", "position_bias"))
        or (block > 1 and (batch > 1 or not _causal_block(attention_mask, block)))
    ):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    if block > 1:
        return _prompt_then_rows(module, query, key, value, attention_mask, block, scaling=scaling, **kwargs)
    gqa = heads != key.shape[1]
    by_row = query.transpose(1, 2)  # [B, q, heads, head_dim]: row i then has a plain step's layout
    outputs = []
    for b in range(batch):
        for i in range(rows):
            seen = _seen(attention_mask, b, i, keys - rows + i + 1)
            if isinstance(seen, int):  # a causal prefix of the keys, as the cache of a plain step holds it
                k, v = key[b : b + 1, :, :seen], value[b : b + 1, :, :seen]
            elif seen.numel() == 0:  # a padding row that sees nothing: its output is never read
                outputs.append(query.new_zeros(1, 1, heads, value.shape[-1]))
                continue
            else:
                k, v = key[b : b + 1].index_select(2, seen), value[b : b + 1].index_select(2, seen)
            # What transformers' sdpa_attention_forward does for one query row without a mask, on the CPU
            out = F.scaled_dot_product_attention(
                by_row[b : b + 1, i : i + 1].transpose(1, 2), k, v, scale=scaling, enable_gqa=gqa
            )
            outputs.append(out.transpose(1, 2))  # [1, 1, heads, head_dim]
    return torch.cat(outputs, dim=1).reshape(batch, rows, heads, width), None


def _prompt_then_rows(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    block: int,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """A feed on an empty cache: the prompt's `block` rows as plain decoding's prompt pass computes them (one call
    over their own keys), then each row after them (a fused first round's drafts) as a single step would."""
    head, _ = sdpa_attention_forward(
        module, query[:, :, :block], key[:, :, :block].contiguous(), value[:, :, :block].contiguous(), None, **kwargs
    )
    if block == query.shape[2]:
        return head, None
    mask = None if attention_mask is None else attention_mask[:, :, block:]
    tail, _ = row_invariant_attention(module, query[:, :, block:], key, value, mask, **kwargs)
    return torch.cat([head, tail], dim=1), None


def _causal_block(mask: torch.Tensor | None, block: int) -> bool:
    """The first `block` rows of the mask see exactly the keys before them and themselves (a prompt's rows)."""
    if mask is None:
        return True
    head = mask[:, 0, :block, :]
    seen = head if head.dtype == torch.bool else head == 0
    causal = torch.ones(block, block, dtype=torch.bool, device=seen.device).tril()
    return bool(torch.equal(seen[..., :block], causal.expand_as(seen[..., :block])) and not seen[..., block:].any())


def _seen(mask: torch.Tensor | None, b: int, i: int, causal: int) -> int | torch.Tensor:
    """The keys row i of batch row b sees: a count (a causal prefix) when there is no mask, else their indices."""
    if mask is None:
        return causal
    row = mask[b if mask.shape[0] > 1 else 0, 0, i]
    seen = row if row.dtype == torch.bool else row == 0  # an additive mask is 0 where a key is seen
    return seen.nonzero().flatten()


def register() -> None:
    """Make NAME an attention implementation transformers knows, with sdpa's masks (idempotent)."""
    AttentionInterface.register(NAME, row_invariant_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)


def make_row_invariant(model: Any) -> Any:
    """Switch a loaded model (an sdpa or eager one) to row-invariant attention, in place; returns it."""
    register()
    model.set_attn_implementation(NAME)
    return model


def is_row_invariant(model: Any) -> bool:
    return getattr(model.config, "_attn_implementation", None) == NAME


@contextlib.contextmanager
def standard_attention() -> Iterator[None]:
    """Within it, row-invariant models attend as transformers' sdpa does: what transformers' own generate measures
    (the bench's comparison), and the negative control of the tests."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)
