"""Drafters that learn from traffic: the traffic drafter (a suffix match over earlier requests and this one) and a
controller in the spirit of Together AI's ATLAS that picks, each round, the traffic drafter, the draft model, or
both (the model continues where the match ends), by expected tokens per second (controller.py), and sets the
traffic draft's length from its measured acceptance.

The TrafficStore they read is the run's (DraftContext.traffic: the app gives each browser session its own, see
serving/sessions.py), or the process-wide one of the pair's tokenizer (traffic_store: the command line's, and the
app's where the server shares traffic); the runs layer feeds it after each run (runs.run_trace). What the
controller measured is kept beside its store (controller_memory). Why these rules: docs/DESIGN.md, "The traffic
drafter" and "A shared server".
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import weakref
from dataclasses import replace
from pathlib import Path

import torch

from specviz.decoding.costs import RoundCost, RoundCosts
from specviz.decoding.engine import vocab_width
from specviz.decoding.proposal import Draft, DraftContext
from specviz.models.builtin import cache_root

from .controller import (
    BOTH,
    FLOOR_Z,
    MODEL,
    SOURCES,
    TRAFFIC,
    ControllerMemory,
    Source,
    choose_source,
    match_bucket,
    traffic_length,
)
from .model import ModelDrafter
from .suffix import (
    MAX_SPEC_FACTOR,
    MIN_TOKEN_PROB,
    Proposal,
    SuffixIndex,
    TrafficFileError,
    TrafficStore,
    continuation,
    longest_match,
)

LIVE = -1  # sequence id of the request being generated, in its own SuffixIndex (ranked most recent)

_STORES: dict[str, TrafficStore] = {}
_STORES_GUARD = threading.Lock()
_MEMORIES: weakref.WeakKeyDictionary[TrafficStore, ControllerMemory] = weakref.WeakKeyDictionary()


PERSIST_ENV = "SPECVIZ_TRAFFIC_PERSIST"  # "1": keep each store in the model cache across restarts (off by default)


def store_key(pair) -> str:
    """One name per tokenizer: token ids mean nothing across tokenizers, so each has its own store."""
    return f"{pair.names.get('target', '')}|{pair.tokenizer.__class__.__name__}|{len(pair.tokenizer)}"


def persist_path(pair) -> Path | None:
    """Where this pair's store is kept when SPECVIZ_TRAFFIC_PERSIST=1: under the model cache, one file per tokenizer."""
    if os.environ.get(PERSIST_ENV) != "1":
        return None
    digest = hashlib.sha256(store_key(pair).encode("utf-8")).hexdigest()[:16]
    return cache_root() / "traffic" / f"{digest}.json"


def traffic_store(pair) -> TrafficStore:
    """The process-wide store of this pair's tokenizer (ids mean nothing across tokenizers); read back from the
    model cache the first time when persistence is on."""
    key = store_key(pair)
    with _STORES_GUARD:
        if key not in _STORES:
            store, path = TrafficStore(), persist_path(pair)
            if path is not None:
                try:
                    store.load(path, vocab_width(pair))
                except TrafficFileError as exc:  # nothing kept: every run says so until the file is dealt with
                    raise TrafficFileError(
                        f"the saved traffic store {path} is refused ({exc}): delete it, or start without "
                        f"{PERSIST_ENV}=1"
                    ) from None
            _STORES[key] = store
        return _STORES[key]


def remember(pair, ids: list[int], store: TrafficStore | None = None) -> None:
    """A finished request joins `store` (a session's own: kept in memory only), or with none the pair's
    process-wide store (and its file, when persistence is on)."""
    if store is not None:
        store.add(ids)
        return
    store = traffic_store(pair)
    store.add(ids)
    path = persist_path(pair)
    if path is not None:
        store.save(path)


def controller_memory(store: TrafficStore) -> ControllerMemory:
    """What controllers measured while drafting from this store: it carries over from request to request (a
    32-token request has too few rounds to learn each match class anew; the seconds are the run's own cost model's,
    re-measured in a few rounds). Concurrent runs may update
    it at once; a lost update only delays learning, never changes an output."""
    with _STORES_GUARD:
        return _MEMORIES.setdefault(store, ControllerMemory())


def restore_controller_memory(store: TrafficStore, memory: ControllerMemory) -> None:
    """Put back what controllers on this store had measured (the stream bench repeats a request's controller run
    from the same start)."""
    with _STORES_GUARD:
        _MEMORIES[store] = memory


def forget(pair, store: TrafficStore | None = None) -> None:
    """Empty `store` (a session's own), or with none the pair's process-wide store and its file; with it what the
    controller measured on it."""
    own = store is None
    store = traffic_store(pair) if own else store
    store.clear()
    with _STORES_GUARD:
        _MEMORIES.pop(store, None)
    path = persist_path(pair) if own else None
    if path is not None:
        path.unlink(missing_ok=True)


class TrafficDrafter:
    """Proposes the most frequent continuation of the longest suffix match over the store and this request.

    q is a point mass on each proposed token (as for prompt lookup), so verification keeps the target's
    distribution exactly: see acceptance.verify, where q = None is read as one-hot rows."""

    name = "traffic"
    title = "traffic (earlier requests)"  # who drafts, in a line of output
    label = "traffic"
    description = (
        "the most frequent continuation of the longest match in earlier requests (every visitor's, where the "
        "server shares traffic) and this one (a suffix match; q is a point mass)"
    )
    draft_passes = "none"
    model_sources: tuple[str, ...] = ()
    cache_lag = 0
    leaves_beside_chain = False
    reads_ngram_size = False
    cache_note = "the traffic drafter has no model and no cache"
    needs_draft_model = False
    needs_hidden_states = False
    point_mass = True
    drafts_tree = False
    keeps_cache = False
    learns = False  # its store learns between runs (runs.run_trace), not from a round
    sources: tuple[str, ...] = (TRAFFIC,)

    def __init__(
        self,
        store: TrafficStore,
        stop_ids: frozenset[int] = frozenset(),
        max_spec_factor: float = MAX_SPEC_FACTOR,
        min_token_prob: float = MIN_TOKEN_PROB,
    ):
        self.store = store
        self.stop_ids = stop_ids
        self.max_spec_factor = max_spec_factor
        self.min_token_prob = min_token_prob
        self.live = SuffixIndex()  # this request: prompt and committed output

    @classmethod
    def for_run(cls, context: DraftContext) -> TrafficDrafter:
        return cls(context.traffic or traffic_store(context.pair), context.pair.eos_ids)

    @property
    def cache_length(self) -> int:
        return 0  # no model, no cache

    def prefill(self, ids: list[int]) -> None:
        pass  # the live index follows the committed ids in suggest

    def suggest(self, committed: list[int], limit: int) -> Proposal:
        """The proposal for the next tokens, at most `limit` of them, cut after an end of sequence."""
        seen = self.live.sequences.get(LIVE, [])
        if len(committed) < len(seen) or committed[: len(seen)] != seen:
            self.live = SuffixIndex()  # not this request's ids any more: start again
            seen = []
        self.live.extend(LIVE, committed[len(seen) :])
        with self.store.lock:
            match, found = longest_match([self.store.index, self.live], committed)
            recency = {**self.store.recency(), LIVE: self.store.next_sid}
            proposal = continuation(
                found,
                match,
                limit,
                max_spec_factor=self.max_spec_factor,
                min_token_prob=self.min_token_prob,
                recency=recency,
            )
            self.store.lookups += 1
            self.store.hits += any(index is self.store.index for index, _, _ in found)
            self.store.touch(proposal.sources)
        end = next((i + 1 for i, t in enumerate(proposal.ids) if t in self.stop_ids), len(proposal.ids))
        return replace(proposal, ids=proposal.ids[:end], confidence=proposal.confidence[:end])

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        return Draft(list(self.suggest(committed, gamma).ids), None, 0, source=TRAFFIC)

    def rollback(self, committed: list[int]) -> None:
        pass

    def learn(self, cost: RoundCost) -> None:
        pass


def agreeing(drafted: list[int] | tuple[int, ...], committed: list[int]) -> tuple[int, int]:
    """(accepted, checked) of a draft against what was committed after it: the target kept the agreeing prefix
    and checked one token more, unless the draft or the committed tokens ran out first."""
    accepted = 0
    while accepted < min(len(drafted), len(committed)) and drafted[accepted] == committed[accepted]:
        accepted += 1
    return accepted, accepted + (accepted < len(drafted) and accepted < len(committed))


def point_mass_rows(ids: list[int], like: torch.Tensor) -> torch.Tensor:
    """q of traffic tokens: one-hot rows (q(d) = 1), the q acceptance.verify uses for a point-mass drafter."""
    point = torch.nn.functional.one_hot(torch.tensor(ids, device=like.device), like.shape[-1])
    return point.to(like.dtype)


class ControllerDrafter:
    """Per round: the traffic drafter, the draft model, or both, by choose_source; learns each source's acceptance
    into the store's ControllerMemory and reads the round's seconds from the run's cost model (context.costs).

    The traffic proposal is computed every round (it costs no forward), so its acceptance is measured even in
    rounds the model drafts ("shadow" checks against the committed tokens, exact for greedy decoding). The model's
    cache stays consistent on its own: CachedModel.rollback keeps the longest cached prefix that agrees with the
    committed ids, so traffic tokens fed before the model's continuation are kept when accepted."""

    name = "controller"
    title = "controller: traffic or {draft}"
    label = "controller"
    description = (
        "each round, whichever of traffic, the draft model, or traffic then the model is expected to commit the "
        "most tokens per second, from their measured acceptance and costs"
    )
    draft_passes = "per token"  # the draft model's, in the rounds it drafts
    model_sources: tuple[str, ...] = (MODEL, BOTH)
    cache_lag = 0
    leaves_beside_chain = False
    reads_ngram_size = False
    cache_note = ""
    needs_draft_model = True
    needs_hidden_states = False
    point_mass = False  # the draft model's q where it drafts
    drafts_tree = False
    keeps_cache = True  # the draft model's
    learns = True
    sources: tuple[str, ...] = SOURCES

    def __init__(
        self, traffic: TrafficDrafter, model: ModelDrafter, costs: RoundCosts, memory: ControllerMemory | None = None
    ):
        self.traffic = traffic
        self.model = model
        self.costs = costs  # the run's cost model, taught by the engine each round: only read here
        self.memory = memory if memory is not None else controller_memory(traffic.store)
        self.choices: list[Source] = []
        self._start = 0
        self._bucket = 0
        self._shadow: tuple[int, ...] = ()  # the traffic proposal of the round, checked in rollback
        self._model_part: tuple[int, list[int]] | None = None  # (offset, model tokens) of the round's draft
        self._model_seconds = 0.0  # the draft model's time in the round: not the controller's own
        self._carried = 0.0  # own work since the last draft (rollback, learn): counted in the next one's

    @classmethod
    def for_run(cls, context: DraftContext) -> ControllerDrafter:
        return cls(TrafficDrafter.for_run(context), ModelDrafter.for_run(context), context.costs)

    @property
    def cache_length(self) -> int:
        return self.model.cache_lengths()[0]

    def prefill(self, ids: list[int]) -> None:
        self.model.prefill([ids])  # its draft model is a batch of this one row

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        entered = time.perf_counter()
        draft = self._propose(committed, gamma, warpers, generator, greedy, confidence)
        own = time.perf_counter() - entered - self._model_seconds + self._carried
        self._carried = 0.0
        return replace(draft, choice_seconds=own)

    def _propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        self._start = len(committed)
        self._model_seconds = 0.0
        proposal = self.traffic.suggest(committed, gamma)
        self._bucket = match_bucket(proposal.match_length)
        rates = self.memory.traffic_rates[self._bucket]
        rate = rates.next.rate  # each token's once the match holds: it sets the length
        keep = traffic_length(rate, gamma)
        proposal = replace(proposal, ids=proposal.ids[:keep], confidence=proposal.confidence[:keep])
        ids = list(proposal.ids)
        ends = bool(ids) and ids[-1] in self.traffic.stop_ids
        first = rates.first.lower(FLOOR_Z)  # the model is the floor: traffic must be sure of its first token
        choice = choose_source(proposal, gamma, ends, rate, self.memory, self.costs, first_rate=first)
        if choice == BOTH and len(ids) >= gamma:
            choice = TRAFFIC  # nothing left for the model to add (choose_source never asks it; a patched one may)
        self.choices.append(choice)
        self._shadow = proposal.ids
        if choice == TRAFFIC:
            self._model_part = None
            return Draft(ids, None, 0, source=TRAFFIC)
        prefix = ids if choice == BOTH else []
        started = time.perf_counter()
        (rest,) = self.model.propose(
            [committed + prefix], [gamma - len(prefix)], warpers, generator, greedy, confidence
        )
        self._model_seconds = time.perf_counter() - started  # its tokens were drawn: the forwards are done
        self._model_part = (len(prefix), rest.ids)
        if not prefix:
            return replace(rest, source=MODEL)
        return Draft(
            prefix + rest.ids,
            torch.cat([point_mass_rows(prefix, rest.q), rest.q]),
            rest.forwards,
            (False,) * len(prefix) + (rest.from_lookahead or (False,) * len(rest.ids)),
            source=BOTH,
            model_tokens=rest.model_tokens,
            model_seconds=rest.model_seconds,
        )

    def rollback(self, committed: list[int]) -> None:
        entered = time.perf_counter()
        new = committed[self._start :]
        accepted, checked = agreeing(self._shadow, new)
        self.memory.traffic_rates[self._bucket].observe(accepted, checked)
        if self._model_part is not None:
            offset, ids = self._model_part
            self.memory.observe_model_length(len(ids))
            if new[:offset] == list(self._shadow[:offset]):  # the model's tokens were reached
                self.memory.model_rate.observe(*agreeing(ids, new[offset:]))
        self._shadow = ()  # a plain round (no propose) comes next at times: nothing of this one is checked again
        self._carried += time.perf_counter() - entered
        self.model.rollback([committed])

    def learn(self, cost: RoundCost) -> None:
        """Nothing: the round's seconds went into the run's cost model (the engine's), its acceptance into the
        memory in rollback."""
        self._model_part, self._model_seconds = None, 0.0
