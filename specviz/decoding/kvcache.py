"""A model plus its per-run KV cache: feed new tokens, get logits, roll back to a committed prefix.

Optionally (enable_compiled_decoding), a model's one-token steps run through torch.compile with a
static KV cache: on a GPU, mode "reduce-overhead" replays a whole step as one CUDA graph, which is
what small models need there (a 0.5B draft otherwise spends most of a step launching kernels).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache, StaticCache

from specviz.models.attention import NAME as ROW_INVARIANT
from specviz.models.rows import invariant_feed

# Longest sequence a compiled decoder's static cache holds: the longest prompt the app accepts (2048
# tokens), the most new tokens (1024) and the longest draft (32) plus its bonus token.
COMPILED_MAX_LENGTH = 2048 + 1024 + 32 + 8
COMPILED_MAX_TOKENS = 33  # a verify of the longest draft (32) plus one; longer feeds (prompts) run eagerly


class CompiledDecoder:
    """One-token steps of one model through torch.compile, on a static KV cache.

    Every step then has the same tensor addresses, so the compiled step (CUDA graphs with mode
    "reduce-overhead") is captured once per token count and replayed: one-token steps (the baseline,
    the draft, plain rounds) and verifies of up to `max_tokens` tokens. The prompt pass runs eagerly
    on the same cache. A static cache is rolled back like a dynamic one (crop only moves
    its length; stale entries lie beyond the causal mask and are overwritten).

    The decoder and its cache belong to the model, not to a run: runs on a pair are serialised (the
    pair's lock), each one takes the cache and resets it. A second CachedModel on the same model while
    the first is alive gets an ordinary dynamic cache and eager steps instead.
    """

    def __init__(
        self,
        model: Any,
        max_length: int = COMPILED_MAX_LENGTH,
        mode: str | None = None,
        backend: str = "inductor",
        max_tokens: int = COMPILED_MAX_TOKENS,
    ):
        self.model = model
        self.max_length = max_length
        self.max_tokens = max_tokens  # feeds of up to this many tokens (steps, verifies) are compiled
        if backend != "inductor":  # "eager" (tests): no code generation, and no mode to pass on
            mode = "default"
        self.mode = mode or ("reduce-overhead" if model.device.type == "cuda" else "default")
        self.cache = StaticCache(config=model.config, max_cache_len=max_length)
        # dynamic=None: the first shape (one token) compiles static; the second makes the token count
        # symbolic, and CUDA graph trees record one graph per count met (1 .. gamma_max + 1).
        self.step = torch.compile(model.forward, mode=self.mode, backend=backend, dynamic=None)
        self._owner: weakref.ref | None = None
        self._lock = threading.Lock()
        self.steps = 0  # compiled steps taken (for tests and reports)

    def acquire(self, owner: "CachedModel") -> StaticCache | None:
        """The reset static cache for `owner`, or None when another live CachedModel holds it."""
        with self._lock:
            if self._owner is not None and self._owner() is not None and self._owner() is not owner:
                return None
            self._owner = weakref.ref(owner)
        with torch.inference_mode():  # its tensors were made in inference mode, by a forward
            self.cache.reset()
        return self.cache


_DECODERS: "weakref.WeakKeyDictionary[Any, CompiledDecoder]" = weakref.WeakKeyDictionary()


def enable_compiled_decoding(
    model: Any,
    max_length: int = COMPILED_MAX_LENGTH,
    mode: str | None = None,
    backend: str = "inductor",
    max_tokens: int = COMPILED_MAX_TOKENS,
) -> CompiledDecoder:
    """From now on, CachedModels of `model` take one-token steps through torch.compile on a static cache.

    The first steps compile (tens of seconds); warm it up before timing anything.
    """
    decoder = CompiledDecoder(model, max_length, mode, backend, max_tokens)
    _DECODERS[model] = decoder
    return decoder


def disable_compiled_decoding(model: Any) -> None:
    _DECODERS.pop(model, None)


def compiled_decoder(model: Any) -> CompiledDecoder | None:
    return _DECODERS.get(model)


def fit_width(logits: torch.Tensor, width: int) -> torch.Tensor:
    """[n, V] logits -> [n, width]: a narrower head's missing ids get -inf (probability 0), a wider head's extra ids
    are cut (the softmax then renormalises over the first `width` ids, as a mask to -inf would)."""
    if logits.shape[-1] < width:
        return F.pad(logits, (0, width - logits.shape[-1]), value=float("-inf"))
    return logits[..., :width] if logits.shape[-1] > width else logits


@dataclass
class CachedModel:
    """Per-run state for one model (never stored on the shared model itself).

    `ids` are the tokens whose keys and values are in `cache`, in order.
    """

    model: Any
    vocab_width: int  # logits are cut or padded to the pair's width, the target's (fit_width)
    cache: Any = field(default_factory=DynamicCache)  # DynamicCache, or a compiled decoder's StaticCache
    ids: list[int] = field(default_factory=list)
    decoder: CompiledDecoder | None = field(default=None, repr=False)
    # Set for a draft: ids from this one on (target-only ids, in a draft narrower than its target) have no
    # embedding row and are read as token 0. q may condition on anything without breaking exactness, and `ids`
    # keeps the true ids, so rollback still compares the committed text. None: every id must have a row.
    embedding_rows: int | None = None
    # Set for a target that feeds draft heads (Medusa, EAGLE): every forward also keeps the final hidden states
    # (after the last norm) of the tokens it fed, until the next forward (state_at). Runs eagerly.
    keep_hidden: bool = False
    hidden: torch.Tensor | None = field(default=None, repr=False)  # [fed, H]
    fed: list[tuple[int, int, int]] = field(default_factory=list, repr=False)  # (position, token, parent) per row
    fed_at: dict[int, list[int]] = field(default_factory=dict, repr=False)  # position -> its rows in `fed`
    device: torch.device = field(init=False, repr=False)  # the model's, read once: model.device walks its parameters

    def __post_init__(self) -> None:
        self.device = self.model.device
        decoder = compiled_decoder(self.model)
        if decoder is not None and not self.ids and not self.keep_hidden:
            cache = decoder.acquire(self)
            if cache is not None:
                self.cache, self.decoder = cache, decoder

    @property
    def length(self) -> int:
        return len(self.ids)

    @torch.inference_mode()
    def feed(self, new_ids: list[int], logits_to_keep: int = 1, committed: int | None = None) -> torch.Tensor:
        """Append new_ids to the cache; return the logits of the last `logits_to_keep` positions, [k, V].
        `committed`: how many of new_ids are committed tokens (all by default; a fused first round's prompt)."""
        input_ids = self._input_ids(new_ids)
        if self.decoder is not None and self.length + len(new_ids) > self.decoder.max_length:
            raise RuntimeError(f"the compiled decoder's cache holds {self.decoder.max_length} tokens")
        if self.decoder is not None and len(new_ids) <= self.decoder.max_tokens and self.ids:
            out = self.decoder.step(
                input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=logits_to_keep
            )
            self.decoder.steps += 1
            logits = out.logits[0, -logits_to_keep:].clone()  # a CUDA graph's output is overwritten by its next replay
        else:  # the prompt pass (and everything without a compiled decoder)
            positions = list(range(self.length, self.length + len(new_ids)))
            with self._feed_rows(len(new_ids) if committed is None else committed):
                logits = self._forward(new_ids, positions, logits_to_keep, input_ids=input_ids)
        self.ids.extend(new_ids)
        return fit_width(logits, self.vocab_width)

    def _input_ids(self, ids: list[int]) -> torch.Tensor:
        """[1, n] input ids; with embedding_rows, an id without a row is read as token 0."""
        if self.embedding_rows is not None and ids and max(ids) >= self.embedding_rows:
            ids = [token if token < self.embedding_rows else 0 for token in ids]
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    @property
    def can_branch(self) -> bool:
        """feed_tree works: an eager model on a dynamic cache whose attention takes a custom 4D mask."""
        implementation = getattr(self.model.config, "_attn_implementation", None)
        return self.decoder is None and implementation in ("sdpa", "eager", ROW_INVARIANT)

    def _feed_rows(self, committed: int) -> contextlib.AbstractContextManager:
        """Every row of a feed gets the bits of a single step, and on an empty cache the committed tokens (the prompt)
        those of plain decoding's prompt pass, whatever follows them in the same forward (models/rows.py)."""
        if self.decoder is not None:  # a static cache: its keys hold empty slots; transformers' attention slices them
            return contextlib.nullcontext()
        return invariant_feed(0 if self.ids else committed)

    @torch.inference_mode()
    def feed_tree(
        self, chain: list[int], nodes: list[tuple[int, int]], chain_rows: int = 1, committed: int | None = None
    ) -> torch.Tensor:
        """One forward over a token tree: `chain` appended as usual, plus `nodes`, each (token, parent) with parent
        an index into chain + nodes before it. Returns [chain_rows + len(nodes), V] logits: the rows of the last
        `chain_rows` chain tokens, then one row per node (the distribution after it).

        A custom 4D mask lets each node see the cache, its ancestors and itself only; position ids put it one
        after its parent. The nodes' keys and values are cropped right after the forward, so the cache holds the
        chain only (a node the target keeps is fed again next round, as any pending token is).
        """
        if not nodes:
            return self.feed(chain, logits_to_keep=chain_rows, committed=committed)
        past, n, k = self.length, len(chain), len(nodes)
        device = self.device
        parents = list(range(-1, n - 1)) + [parent for _, parent in nodes]
        if any(not 0 <= parent < n + j for j, (_, parent) in enumerate(nodes)):
            raise ValueError("a tree node's parent must be a chain token or a node before it")
        positions = list(range(past, past + n))
        allowed = torch.zeros(n + k, past + n + k, dtype=torch.bool, device=device)
        allowed[:, :past] = True  # everything sees the cache
        allowed[:n, past : past + n] = torch.ones(n, n, dtype=torch.bool, device=device).tril()  # the chain: causal
        for j in range(n, n + k):  # a node sees itself and its ancestors
            positions.append(positions[parents[j]] + 1)
            ancestor = j
            while ancestor >= 0:
                allowed[j, past + ancestor] = True
                ancestor = parents[ancestor]
        mask = allowed[None, None]
        if self.model.config._attn_implementation == "eager":  # eager attention adds the mask to its scores
            dtype = self.model.dtype
            mask = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, torch.finfo(dtype).min)
        fed = chain + [token for token, _ in nodes]
        with self._feed_rows(len(fed) if committed is None else committed):
            logits = self._forward(
                fed,
                positions,
                chain_rows + k,
                parents=parents,
                input_ids=self._input_ids(fed),
                attention_mask=mask,
                position_ids=torch.tensor([positions], device=device),
            )
        self.ids.extend(fed)
        self.truncate(past + n)
        return fit_width(logits, self.vocab_width)

    def _forward(
        self, fed: list[int], positions: list[int], logits_to_keep: int, parents: list[int] | None = None, **inputs
    ) -> torch.Tensor:
        """One eager forward: [logits_to_keep, V] logits. With keep_hidden it runs as the causal LM's own forward
        does (base model, then the LM head on the kept rows) and remembers each fed token's final hidden state,
        with its position and its parent among the fed tokens (-1: the cache), for state_at."""
        if not self.keep_hidden:
            return self.model(**inputs, cache=self.cache, use_cache=True, logits_to_keep=logits_to_keep).logits[0]
        states = self.model.base_model(**inputs, cache=self.cache, use_cache=True).last_hidden_state[0]
        self.hidden = states
        self.fed = [
            (position, token, parent)
            for position, token, parent in zip(positions, fed, parents or range(-1, len(fed) - 1), strict=True)
        ]
        self.fed_at = {}
        for i, position in enumerate(positions):
            self.fed_at.setdefault(position, []).append(i)
        return self.model.get_output_embeddings()(states[-logits_to_keep:])

    def state_at(self, committed: list[int], position: int) -> torch.Tensor | None:
        """The target's final hidden state after committed[position], if the last forward fed that token in that
        context (a tree forward may have fed the same token at the same position after different parents)."""
        for i in self.fed_at.get(position, ()):
            if self.fed[i][1] == committed[position] and self._on_path(i, committed):
                return self.hidden[i]
        return None

    def _on_path(self, index: int, committed: list[int]) -> bool:
        """The fed token `index` and its fed ancestors are the committed tokens at their positions."""
        while index >= 0:
            position, token, parent = self.fed[index]
            if position >= len(committed) or committed[position] != token:
                return False
            index = parent
        return True

    def hidden_before(self, committed: list[int]) -> torch.Tensor | None:
        """The target's final hidden state at the second-newest committed token (it predicted the newest one), if
        the last forward fed it: what Medusa's heads read to guess the tokens after the newest."""
        if len(committed) < 2:
            return None
        return self.state_at(committed, len(committed) - 2)

    def rollback(self, committed: list[int]) -> None:
        """Keep the longest prefix of the cache that agrees with the committed tokens (DynamicCache.crop),
        minus the newest committed token: the next forward needs its logits, so it is always fed again."""
        keep = 0
        limit = min(len(self.ids), len(committed) - 1)
        while keep < limit and self.ids[keep] == committed[keep]:
            keep += 1
        self.truncate(keep)

    @torch.inference_mode()  # on CUDA a static cache's length counter is an inference tensor: change it in that mode
    def truncate(self, length: int) -> None:
        """Keep the first `length` cached tokens (drop guesses that turned out wrong)."""
        if length < len(self.ids):
            self.cache.crop(length - len(self.ids))  # this transformers takes minus the count to remove
            del self.ids[length:]

    def pending(self, committed: list[int]) -> list[int]:
        """Committed tokens not yet in the cache (call after rollback)."""
        return committed[len(self.ids) :]

    # The row-shaped calls of a batch's cache (batchcache.BatchCache), for its one row: the engine's round runs on
    # either.

    @property
    def rows(self) -> int:
        return 1

    def lengths(self) -> list[int]:
        return [self.length]

    def feed_rows(self, rows: list[list[int]], keep: int = 1) -> torch.Tensor:
        """[1, keep, V]: feed(rows[0], keep) as a batch of one."""
        (row,) = rows
        return self.feed(row, logits_to_keep=keep)[None]

    def pending_rows(self, committed: list[list[int]]) -> list[list[int]]:
        (row,) = committed
        return [self.pending(row)]

    def rollback_rows(self, committed: list[list[int]]) -> None:
        (row,) = committed
        self.rollback(row)

    def drop(self, row: int, count: int) -> None:
        """Forget the newest `count` cached tokens (drafts or guesses that turned out wrong)."""
        self.truncate(self.length - count)

    def keep_rows(self, rows: list[int]) -> None:
        if list(rows) != [0]:
            raise ValueError("a one-row cache keeps its row")
