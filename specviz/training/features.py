"""What the heads' trainers share: the collection settings and the collected features (heads/train.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.drafters import EAGLE

IGNORE = -100  # label of a position whose k-th next token lies beyond its chunk
# A fresh decoder layer needs more passes than Medusa's zero-initialised blocks (docs/notes/2026-12-heads.md).
EAGLE_EPOCHS = 16


@dataclass(frozen=True)
class TrainSettings:
    heads: int = 4
    train_tokens: int = 16_000  # one batch of 64 answers and a smaller second one (docs/notes/2026-12-heads.md)
    heldout_tokens: int = 2_000
    chunk: int = 512  # tokens per teacher-forced forward
    epochs: int = 4
    batch: int = 256
    learning_rate: float = 1e-3
    seed: int = 0
    data: str = "greedy"  # the target's own greedy continuations (heads/greedy.py), or "text": teacher-forced source
    new_tokens: int = 256  # greedy: new tokens per prompt
    rows: int = 64  # greedy: prompts decoded at once
    collect_dtype: str = "auto"  # greedy: the answers' precision (heads/greedy.py, collection_dtype)


def heldout_budget(train_tokens: int) -> int:
    """Held-out tokens for a training of train_tokens (the Heads page): a fifth of them, at least 1,000 and at most
    TrainSettings' default, so a training at the default size reads back train-heads' cached collection."""
    return min(TrainSettings.heldout_tokens, max(1000, train_tokens // 5))


def default_epochs(kind: str) -> int:
    """Passes over the data when none are asked for: EAGLE_EPOCHS for the EAGLE head, TrainSettings' for Medusa."""
    return EAGLE_EPOCHS if kind == EAGLE else TrainSettings.epochs


@dataclass(frozen=True)
class Features:
    hidden: torch.Tensor  # [N, H] the target's final hidden states
    labels: torch.Tensor  # [N, K] the target's argmax k positions on (its guess for x_{t+k+1}); IGNORE past a chunk
    ids: torch.Tensor  # [N] the text's tokens
    lengths: tuple[int, ...] = ()  # the chunks' lengths, in order (N in all)
