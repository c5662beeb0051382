"""A model plus one KV cache for B rows that hold different numbers of tokens: the cache of a batch.

The engine's one round (engine.py) runs on either cache: kvcache.CachedModel for one row (row-invariant attention,
token trees, the compiled decoder) and this one for B > 1. Both answer the same row-shaped calls (feed_rows,
pending_rows, rollback_rows, drop, keep_rows, lengths).

Ragged rows, as serving engines keep them: each row has its own cache length and positions. A cache column a row does
not hold (a rejected draft, left padding) is a hole: the row's attention mask hides it in every later forward, and
its position ids count only the columns it holds (the mask's cumsum, as generate() does for left padding). Rows that
feed fewer tokens than the longest row in one forward get holes on the left of that forward. A row that ends leaves:
its cache rows are dropped (DynamicCache.batch_select_indices).
Every forward here runs under fastpath.per_token_activations: the CPU's int8 draft then quantizes each token's
activations on their own, where torch's dynamic int8 takes one scale for the whole batch, which made a row's drafts
(and its acceptance) depend on its neighbours (docs/notes/2026-12-ragged-batching.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from ..models.attention import standard_attention
from ..models.fastpath import per_token_activations
from .kvcache import fit_width

PAD_ID = 0  # what a hole holds; the mask hides it, so any id the embedding has will do


@dataclass
class BatchCache:
    """One model's KV cache for a batch: `valid` [B, length] says which columns each row holds (False: a hole,
    left padding or a token the row did not keep), and `ids` the tokens each row holds, in order."""

    model: Any
    width: int  # logits are cut or padded to the target's vocabulary (kvcache.fit_width)
    pads: torch.Tensor  # [B] long: a rectangular feed (feed, feed_states) holds no column before pads[r]
    cache: DynamicCache = field(default_factory=DynamicCache)
    # a draft narrower than its target reads the target-only ids as token 0 (kvcache.CachedModel.embedding_rows)
    embedding_rows: int | None = None
    # a target that feeds draft heads keeps the final hidden states of its last forward (RowTarget.state_at)
    keep_hidden: bool = False
    valid: torch.Tensor = field(init=False)
    ids: list[list[int]] = field(init=False)
    hidden: torch.Tensor | None = field(default=None, repr=False)  # [B, k, H] of the last forward
    fed_at: list[dict[int, int]] = field(default_factory=list, repr=False)  # per row: position -> the last forward's
    # column that fed it

    def __post_init__(self) -> None:
        self.valid = torch.zeros(len(self.pads), 0, dtype=torch.bool)
        self.ids = [[] for _ in range(len(self.pads))]

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def rows(self) -> int:
        return len(self.ids)

    @property
    def length(self) -> int:
        """Columns in the cache, holes included."""
        return self.valid.shape[1]

    def lengths(self) -> list[int]:
        """Tokens each row holds."""
        return [len(row) for row in self.ids]

    def mask(self, extra: int) -> torch.Tensor:
        """[B, length + extra] attention mask of a rectangular feed: 0 on each row's holes and padding."""
        columns = torch.arange(self.length, self.length + extra)
        return torch.cat([self.valid, columns[None, :] >= self.pads[:, None]], dim=1).long()

    def _inputs(self, ids: torch.Tensor, new: torch.Tensor) -> dict[str, Any]:
        """The forward's inputs for ids [B, k] appended as columns length .. length + k - 1, new [B, k] saying which
        of them are the row's tokens. A token's position counts the columns its row holds before it."""
        if self.embedding_rows is not None:
            ids = torch.where(ids < self.embedding_rows, ids, torch.zeros_like(ids))
        held = self.valid.sum(dim=1, keepdim=True)
        positions = (held + new.long().cumsum(dim=1) - 1).clamp_min(0)
        device = self.model.device
        return {
            "input_ids": ids.to(device),
            "attention_mask": torch.cat([self.valid, new], dim=1).long().to(device),
            "position_ids": positions.to(device),
            "cache": self.cache,
            "use_cache": True,
        }

    def _new(self, ids: torch.Tensor) -> torch.Tensor:
        return self.mask(ids.shape[1])[:, self.length :].bool()

    def _appended(self, ids: torch.Tensor, new: torch.Tensor) -> None:
        self.valid = torch.cat([self.valid, new], dim=1)
        self.fed_at = []
        for r, row in enumerate(self.ids):
            columns = new[r].nonzero().flatten().tolist()
            self.fed_at.append({len(row) + i: column for i, column in enumerate(columns)})
            row.extend(ids[r, columns].tolist())

    @torch.inference_mode()
    def _logits(self, ids: torch.Tensor, new: torch.Tensor, keep: int) -> torch.Tensor:
        # per_token_activations: the int8 draft's rows never depend on the other rows. standard_attention: a batch
        # keeps transformers' sdpa (row-invariant attention would take B x k calls a layer; the Batching recording
        # was timed without it; docs/DESIGN.md, "Row-invariant attention")
        with per_token_activations(), standard_attention():
            if self.keep_hidden:  # as the causal LM's own forward: the base model, then the head on the kept columns
                self.hidden = self.model.base_model(**self._inputs(ids, new)).last_hidden_state
                logits = self.model.get_output_embeddings()(self.hidden[:, -keep:])
            else:
                logits = self.model(**self._inputs(ids, new), logits_to_keep=keep).logits
        self._appended(ids, new)
        return fit_width(logits, self.width)

    def feed(self, ids: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """Append ids [B, k] (each row's padding before pads[r] masked); the logits of the last `keep` columns (all
        by default), [B, keep, width]."""
        return self._logits(ids, self._new(ids), keep or ids.shape[1])

    def feed_rows(self, rows: Sequence[Sequence[int]], keep: int = 1) -> torch.Tensor:
        """Append each row's own tokens, at the right end of k = the longest row's count of columns (holes on the
        left of shorter rows); the logits of the last `keep` columns, [B, keep, width]."""
        k = max(len(row) for row in rows)
        ids = torch.full((len(rows), k), PAD_ID, dtype=torch.long)
        new = torch.zeros(len(rows), k, dtype=torch.bool)
        for r, row in enumerate(rows):
            if row:
                ids[r, k - len(row) :] = torch.tensor(row, dtype=torch.long)
                new[r, k - len(row) :] = True
        return self._logits(ids, new, keep)

    @torch.inference_mode()
    def feed_states(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids [B, k]; return their final hidden states [B, k, H] (the base model alone: no LM head)."""
        new = self._new(ids)
        with per_token_activations(), standard_attention():
            out = self.model.base_model(**self._inputs(ids, new))
        self._appended(ids, new)
        return out.last_hidden_state

    def pending_rows(self, committed: Sequence[Sequence[int]]) -> list[list[int]]:
        """Each row's committed tokens this cache does not hold yet (call after rollback)."""
        return [list(tokens[len(held) :]) for tokens, held in zip(committed, self.ids, strict=True)]

    def drop(self, row: int, count: int) -> None:
        """Row `row` no longer holds its last `count` tokens (the newest ones: rejected drafts, unused guesses)."""
        if count <= 0:
            return
        columns = self.valid[row].nonzero().flatten()[-count:]
        self.valid[row, columns] = False
        del self.ids[row][-count:]
        self.trim()

    def rollback_rows(self, committed: Sequence[Sequence[int]]) -> None:
        """Each row keeps the longest prefix of what it holds that agrees with its committed tokens, minus the newest
        committed token (the next forward needs its logits), as CachedModel.rollback does for one row."""
        for r, (held, tokens) in enumerate(zip(self.ids, committed, strict=True)):
            keep, limit = 0, min(len(held), len(tokens) - 1)
            while keep < limit and held[keep] == tokens[keep]:
                keep += 1
            if keep < len(held):
                columns = self.valid[r].nonzero().flatten()[keep:]
                self.valid[r, columns] = False
                del held[keep:]
        self.trim()

    def trim(self) -> None:
        """Crop the newest columns that no row holds."""
        held = self.valid.any(dim=0).nonzero()
        self.truncate(int(held[-1]) + 1 if len(held) else 0)

    def truncate(self, length: int) -> None:
        """Keep the first `length` columns; each row forgets the tokens it held beyond them."""
        if length < self.length:
            for row, count in zip(self.ids, self.valid[:, length:].sum(dim=1).tolist(), strict=True):
                del row[len(row) - count :]
            self.cache.crop(length - self.length)  # this transformers takes minus the count to remove
            self.valid = self.valid[:, :length]

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Drop every other row (finished ones) from the cache."""
        index = torch.tensor(list(rows), dtype=torch.long)
        self.cache.batch_select_indices(index.to(self.model.device))
        self.pads, self.valid = self.pads[index], self.valid[index]
        self.ids = [self.ids[r] for r in rows]
        self.fed_at = [self.fed_at[r] for r in rows] if self.fed_at else []
        if self.hidden is not None:
            self.hidden = self.hidden[index.to(self.hidden.device)]

    def state_at(self, row: int, committed: Sequence[int], position: int) -> torch.Tensor | None:
        """The target's final hidden state after committed[position] in row `row`, if the last forward fed that token
        there and the row still holds it after the committed tokens before it (a batch feeds chains only)."""
        column = self.fed_at[row].get(position) if self.hidden is not None and self.fed_at else None
        if column is None or self.ids[row][: position + 1] != list(committed[: position + 1]):
            return None
        return self.hidden[row, column]


@dataclass
class RowTarget:
    """One row of a batch's target, as a one-row drafter sees it (the heads read its hidden states). `row` follows
    the row as finished rows leave (the batch's drafter moves it)."""

    batch: BatchCache
    row: int
    can_branch: bool = False  # a batch verifies chains only

    @property
    def keep_hidden(self) -> bool:
        return self.batch.keep_hidden

    @property
    def model(self) -> Any:
        return self.batch.model

    @property
    def device(self) -> torch.device:
        return self.batch.device

    def state_at(self, committed: list[int], position: int) -> torch.Tensor | None:
        return self.batch.state_at(self.row, committed, position)

    def hidden_before(self, committed: list[int]) -> torch.Tensor | None:
        if len(committed) < 2:
            return None
        return self.state_at(committed, len(committed) - 2)


def left_padded(prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] ids with each prompt at the right end, [B] pads), L the longest prompt."""
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), PAD_ID, dtype=torch.long)
    for r, prompt in enumerate(prompts):
        ids[r, longest - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
    pads = torch.tensor([longest - len(p) for p in prompts], dtype=torch.long)
    return ids, pads
