"""A draft restricted to the most frequent tokens (FR-Spec's idea, arXiv 2502.14856): its LM head keeps those rows.

The draft's LM head is a 151,936 x 896 matrix, about a quarter of its weights; a draft step reads all of it for one
token. Kept to the K most frequent tokens, q is zero elsewhere (the head's other logits are -inf), and speculative
sampling stays exact for any q: a token the draft cannot propose is simply never drafted, and where the target wants
one, the verify rejects and the residual max(0, p - q) = p there gives it. The cost: fewer accepted tokens where the
text needs a rare one.

The ranking (assets/draft_vocabulary.json, made by scripts/draft_vocabulary.py) orders the tokenizer's ids by the
better of two ranks: the id itself (byte-pair merges are numbered in the order their pair was most frequent in the
tokenizer's training text) and the token's rank by count in a local corpus (Python's standard library, the
documentation and the translated messages installed on the machine that made it). Measured effects:
docs/notes/2026-12-precision.md, "A draft vocabulary of the most frequent tokens".
"""

from __future__ import annotations

import base64
import functools
import struct
import zlib
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from specviz import ASSETS

RANKING_FILE = ASSETS / "draft_vocabulary.json"


class Ranking(BaseModel):
    """assets/draft_vocabulary.json: token ids, most frequent first, for one tokenizer."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: str
    tokenizer_sha256: str  # of tokenizer.json: the ranking is only used with the tokenizer it was made for
    vocab_size: int
    source: str  # how it was made, in words
    created: str
    ids_zlib_base64: str  # uint32 little endian, most frequent first

    def ids(self) -> list[int]:
        raw = zlib.decompress(base64.b64decode(self.ids_zlib_base64))
        return list(struct.unpack(f"<{len(raw) // 4}I", raw))


@functools.cache
def load_ranking(path: Path = RANKING_FILE) -> Ranking:
    return Ranking.model_validate_json(path.read_text())


def frequent_ids(tokenizer_file: Path, keep: int, extra: set[int], path: Path = RANKING_FILE) -> list[int] | None:
    """The `keep` most frequent ids of that tokenizer plus `extra` (its special tokens: end of text must stay
    draftable), sorted; None when the ranking was made for another tokenizer."""
    import hashlib

    ranking = load_ranking(path)
    if hashlib.sha256(tokenizer_file.read_bytes()).hexdigest() != ranking.tokenizer_sha256:
        return None
    ids = ranking.ids()
    if keep > len(ids):
        raise ValueError(f"the ranking holds {len(ids)} ids: keep at most that many")
    return sorted(set(ids[:keep]) | extra)


class FrequentHead(nn.Module):
    """An LM head that computes only the kept ids' logits; every other id's logit is -inf (probability 0)."""

    def __init__(self, head: nn.Module, kept: torch.Tensor, width: int):
        super().__init__()
        self.register_buffer("kept", kept, persistent=False)
        self.width = width
        self.head = head

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        small = self.head(hidden)
        out = small.new_full((*small.shape[:-1], self.width), float("-inf"))
        return out.index_copy_(-1, self.kept, small)

    def extra_repr(self) -> str:
        return f"{len(self.kept)} of {self.width} ids"


def kept_rows(head: nn.Module, kept: torch.Tensor) -> nn.Module:
    """The head's rows for the kept ids as a module of the same kind (torch's dynamic int8, or a float Linear)."""
    from .fastpath import DraftLinear, dynamic_linear

    if isinstance(head, DraftLinear):
        weight, bias = head._weight_bias()
        rows = torch._make_per_tensor_quantized_tensor(weight.int_repr()[kept], weight.q_scale(), 0)
        return dynamic_linear(rows, None if bias is None else bias[kept])
    if type(head) is nn.Linear:
        small = nn.Linear(head.in_features, len(kept), bias=head.bias is not None, device="meta")
        small.weight = nn.Parameter(head.weight.detach()[kept].clone(), requires_grad=False)
        if head.bias is not None:
            small.bias = nn.Parameter(head.bias.detach()[kept].clone(), requires_grad=False)
        return small
    raise ValueError(f"cannot restrict a {type(head).__name__} LM head")


@torch.inference_mode()
def restrict_draft_vocabulary(model, ids: list[int]) -> None:
    """Replace the draft's LM head (in place) by one over `ids` only (the input embedding is untouched)."""
    head = model.get_output_embeddings()
    width = head.out_features if hasattr(head, "out_features") else model.config.get_text_config().vocab_size
    kept = torch.tensor(ids, dtype=torch.long, device=model.device)
    model.set_output_embeddings(FrequentHead(kept_rows(head, kept), kept, width))
    model.config.tie_word_embeddings = False  # the new head is its own module: never re-tie it to the embedding


def restrict_draft(model, source, tokenizer, keep: int) -> str:
    """Restrict a loaded draft to the `keep` most frequent ids where the ranking was made for its tokenizer; say
    what was done (a pair's names, so a trace records it). Special tokens (end of text among them) stay."""
    tokenizer_file = Path(source.path) / "tokenizer.json" if source.kind in ("builtin", "dir") else None
    ids = None
    if tokenizer_file is not None and tokenizer_file.is_file():
        ids = frequent_ids(tokenizer_file, keep, set(tokenizer.all_special_ids))
    if ids is None:
        return "all (no frequency ranking for this tokenizer)"
    restrict_draft_vocabulary(model, ids)
    return f"{len(ids)} most frequent"
