"""What a drafter hands the engine (a Draft), and the protocol every drafter follows.

The engine knows this protocol only; the concrete drafters and the registry of their capabilities live in
specviz.drafters, one layer up. A drafter is made per run, by a factory the caller passes in (the registry's),
once the run's target cache exists: the draft heads read the target's hidden states from it.

A run has B >= 1 rows (one row: the engine the pages step through; more: a batch), and the protocol is the batch's:
every call takes one list per row. A drafter whose rows share a forward (the draft model: one batched forward per
draft step) implements it itself; the others are one-row drafters (RowDrafter: lookups, a chooser, the heads), which
RowByRow runs one per row, their rows sharing the target's batched verify.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import LogitsProcessorList

from .config import SpecConfig
from .costs import RoundCost, RoundCosts


@dataclass(frozen=True)
class TreeNode:
    """An off-chain candidate of a tree draft (tree.py): its token and its parent node (-1: the root, the newest
    committed token; 0..n-1: the chain's d_1..d_n; n + j: the draft's tree[j], always before this one)."""

    token: int
    parent: int


@dataclass(frozen=True)
class Draft:
    ids: list[int]
    q: torch.Tensor | None  # [len(ids), V] draft probabilities; None for a point-mass drafter
    forwards: int  # model forward passes spent
    from_lookahead: tuple[bool, ...] = ()  # per token: its q row came from a forward over lookup guesses
    source: str = ""  # who drafted, for drafters that choose: "traffic", "model" or "both" (drafters/traffic.py)
    tree: tuple[TreeNode, ...] = ()  # off-chain candidates (draft heads): a node at depth k is drawn from q[k - 1]
    choice_seconds: float = 0.0  # a choosing drafter's own work (lookup, choice), outside any model's forwards
    model_tokens: int = 0  # tokens a draft model drafted (the cost model's draft-token seconds learn from these)
    model_seconds: float = 0.0  # the draft model's seconds for them


@dataclass(frozen=True)
class DraftContext:
    """What a drafter may be built from, per run."""

    pair: Any  # the loaded pair (its draft model, eos ids, tokenizer); only read
    config: SpecConfig
    width: int  # the target's vocabulary: q is over the target's ids
    target: Any  # the run's target cache (kvcache.CachedModel; a batch's row: batchcache.RowTarget): heads read it
    rows: int = 1  # rows of the run: a drafter that batches its own forwards makes its cache this wide
    traffic: Any = None  # the store the traffic drafters read; None: the pair's own (set by the caller's factory)
    heads: Any = None  # kind -> trained heads the heads' drafters read; None or a kind missing: the target's own
    costs: RoundCosts = field(default_factory=RoundCosts)  # the run's cost model (the engine teaches it); only read


class Capabilities(Protocol):
    """Class attributes, read before a run starts (by the registry, the CLI, the app and the trace checker) and by
    the engine."""

    name: str
    title: str  # who drafts, in a line of output; {draft} stands for the draft model's name
    needs_draft_model: bool  # a pair without a draft model cannot run it
    needs_hidden_states: bool  # the target's cache must keep its last hidden states (draft heads)
    point_mass: bool  # q(d) = 1 for every token it drafts (no q to draw other candidates from)
    drafts_tree: bool  # hedges with token trees of its own; else the engine may add alternatives for d_n
    keeps_cache: bool  # has a KV cache of its own (its length is recorded each round)
    learns: bool  # learn() changes what it drafts next
    sources: tuple[str, ...]  # the sources it chooses between each round (Draft.source); () when it never chooses


class Drafter(Capabilities, Protocol):
    """Proposes up to gammas[r] tokens for each row r of the run, per round (the rows: each one's committed ids)."""

    def cache_lengths(self) -> list[int]: ...

    def prefill(self, rows: Sequence[list[int]]) -> None: ...

    def propose(
        self,
        rows: Sequence[list[int]],
        gammas: Sequence[int],
        warpers: LogitsProcessorList,
        generator: torch.Generator | None,
        greedy: bool,
        confidence: float,
    ) -> list[Draft]: ...

    def rollback(self, rows: Sequence[list[int]]) -> None: ...

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Only these rows (their indices, in order) go on: the others finished."""

    def learn(self, costs: Sequence[RoundCost]) -> None:
        """Each row's measured cost, after each round (a no-op where nothing is learned)."""


class RowDrafter(Capabilities, Protocol):
    """A drafter of one row (RowByRow makes one per row of a batch)."""

    @property
    def cache_length(self) -> int: ...

    def prefill(self, ids: list[int]) -> None: ...

    def propose(
        self,
        committed: list[int],
        gamma: int,
        warpers: LogitsProcessorList,
        generator: torch.Generator | None,
        greedy: bool,
        confidence: float,
    ) -> Draft: ...

    def rollback(self, committed: list[int]) -> None: ...

    def learn(self, cost: RoundCost) -> None:
        """The round's measured cost, after each round (a no-op where nothing is learned)."""


class RowByRow:
    """The batch protocol over one-row drafters, one per row: for drafters whose rows share no draft forward (a
    lookup costs none; a chooser, the heads). Their rows still share the target's batched verify."""

    def __init__(self, drafters: Sequence[RowDrafter], targets: Sequence[Any] = ()):
        self.drafters = list(drafters)
        self.targets = list(targets)  # per row, the target view a drafter reads (batchcache.RowTarget), if any
        self.kind = type(self.drafters[0])

    def __getattr__(self, name: str) -> Any:  # the capabilities: the one-row class's attributes
        if name.startswith("__") or name == "kind":  # not set yet (a copy): never recurse
            raise AttributeError(name)
        return getattr(self.kind, name)

    def cache_lengths(self) -> list[int]:
        return [drafter.cache_length for drafter in self.drafters]

    def prefill(self, rows: Sequence[list[int]]) -> None:
        for drafter, ids in zip(self.drafters, rows, strict=True):
            drafter.prefill(ids)

    def propose(self, rows, gammas, warpers, generator, greedy, confidence) -> list[Draft]:
        return [
            drafter.propose(ids, gamma, warpers, generator, greedy, confidence) if gamma > 0 else Draft([], None, 0)
            for drafter, ids, gamma in zip(self.drafters, rows, gammas, strict=True)
        ]

    def rollback(self, rows: Sequence[list[int]]) -> None:
        for drafter, ids in zip(self.drafters, rows, strict=True):
            drafter.rollback(ids)

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.drafters = [self.drafters[r] for r in rows]
        self.targets = [self.targets[r] for r in rows] if self.targets else []
        for index, target in enumerate(self.targets):
            target.row = index  # the batch's cache renumbers its rows the same way

    def learn(self, costs: Sequence[RoundCost]) -> None:
        for drafter, cost in zip(self.drafters, costs, strict=True):
            drafter.learn(cost)


class DrafterFactory(Protocol):
    """Makes a run's drafter (the registry's factories: specviz.drafters.factory)."""

    needs_hidden_states: bool

    def __call__(self, context: DraftContext) -> Drafter: ...
