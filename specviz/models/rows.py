"""Which rows of a target's forward must get the bits of a single step, and the Linear layers' share of it (issue 54).

Row-invariant attention (models/attention.py) is half of it; the other half is the Linear layers. oneDNN's prepacked
bfloat16 kernel gives a row the same bits alone or among up to 32 rows, not among 33 or more (it blocks larger inputs
differently); float32 and int8 held to 96 rows here (docs/notes/2026-12-precision.md, "Row-invariant attention").
So while a CachedModel feeds the target (`invariant_feed`), a Linear layer multiplies its rows in pieces: the
committed rows that open a feed on an empty cache (the prompt) as one piece, exactly as plain decoding's prompt pass
does, then the rest (drafts, tree nodes) in pieces of at most INVARIANT_ROWS. Outside a feed (training, a batch)
nothing changes.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import torch

INVARIANT_ROWS = 32
_COMMITTED: contextvars.ContextVar[int | None] = contextvars.ContextVar("committed_rows", default=None)


@contextlib.contextmanager
def invariant_feed(committed: int) -> Iterator[None]:
    """Within it, a forward is a CachedModel's feed: its first `committed` rows are committed tokens on an empty cache
    (0 on a cache that holds some: every row is then a draft or a step)."""
    token = _COMMITTED.set(committed)
    try:
        yield
    finally:
        _COMMITTED.reset(token)


def committed_rows() -> int | None:
    """The committed rows that open this feed (None outside a CachedModel's feed)."""
    return _COMMITTED.get()


def in_pieces(flat: torch.Tensor, multiply: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """multiply(flat) for [rows, in] inputs, in the pieces above: each row's output then has the bits it has alone."""
    block = _COMMITTED.get()
    rows = flat.shape[0]
    if block is None or rows <= INVARIANT_ROWS and block in (0, rows):
        return multiply(flat)
    first = min(block, rows)
    starts = ([0] if first else []) + list(range(first, rows, INVARIANT_ROWS))
    ends = starts[1:] + [rows]
    return torch.cat([multiply(flat[start:end]) for start, end in zip(starts, ends, strict=True)])
