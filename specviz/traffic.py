"""Drafters that learn from traffic: the traffic drafter (a suffix match over earlier requests and this one) and a
controller in the spirit of Together AI's ATLAS that picks, each round, the traffic drafter, the draft model, or
both (the model continues where the match ends), and sets the traffic draft's length from its measured acceptance.

Both keep per-run state only; the TrafficStore they read is shared (one per tokenizer: traffic_store) and is fed
by the runs layer after each run (runs.run_trace). Why these rules: docs/DESIGN.md, "The traffic drafter".
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch

from .builtin import cache_root
from .drafters import Draft, ModelDrafter
from .suffix import MAX_SPEC_FACTOR, MIN_TOKEN_PROB, Proposal, SuffixIndex, TrafficStore, continuation, longest_match

Source = Literal["traffic", "model", "both"]
LIVE = -1  # sequence id of the request being generated, in its own SuffixIndex (ranked most recent)

_STORES: dict[str, TrafficStore] = {}
_STORES_GUARD = threading.Lock()


PERSIST_ENV = "SPECVIZ_TRAFFIC_PERSIST"  # "1": keep each store in the model cache across restarts (off by default)


def _key(pair) -> str:
    return f"{pair.names.get('target', '')}|{pair.tokenizer.__class__.__name__}|{len(pair.tokenizer)}"


def persist_path(pair) -> Path | None:
    """Where this pair's store is kept when SPECVIZ_TRAFFIC_PERSIST=1: under the model cache, one file per tokenizer."""
    if os.environ.get(PERSIST_ENV) != "1":
        return None
    digest = hashlib.sha256(_key(pair).encode("utf-8")).hexdigest()[:16]
    return cache_root() / "traffic" / f"{digest}.json"


def traffic_store(pair) -> TrafficStore:
    """The process-wide store of this pair's tokenizer (ids mean nothing across tokenizers); read back from the
    model cache the first time when persistence is on."""
    key = _key(pair)
    with _STORES_GUARD:
        if key not in _STORES:
            _STORES[key] = TrafficStore()
            path = persist_path(pair)
            if path is not None:
                _STORES[key].load(path)
        return _STORES[key]


def remember(pair, ids: list[int]) -> None:
    """A finished request joins the pair's store (and its file, when persistence is on)."""
    store = traffic_store(pair)
    store.add(ids)
    path = persist_path(pair)
    if path is not None:
        store.save(path)


def forget(pair) -> None:
    """Empty the pair's store, and delete its file."""
    traffic_store(pair).clear()
    path = persist_path(pair)
    if path is not None:
        path.unlink(missing_ok=True)


class TrafficDrafter:
    """Proposes the most frequent continuation of the longest suffix match over the store and this request.

    q is a point mass on each proposed token (as for prompt lookup), so verification keeps the target's
    distribution exactly: see acceptance.verify, where q = None is read as one-hot rows."""

    name = "traffic"

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
        return Draft(list(self.suggest(committed, gamma).ids), None, 0, source="traffic")

    def rollback(self, committed: list[int]) -> None:
        pass


@dataclass
class SourceRate:
    """A source's per-token acceptance, accepted / checked, each older round discounted by DISCOUNT; the prior is
    PRIOR tokens checked at rate `prior`."""

    prior: float
    accepted: float = 0.0
    checked: float = 0.0

    DISCOUNT = 0.8
    PRIOR = 2.0

    @property
    def rate(self) -> float:
        return (self.accepted + self.PRIOR * self.prior) / (self.checked + self.PRIOR)

    def observe(self, accepted: int, checked: int) -> None:
        if checked > 0:
            self.accepted = self.DISCOUNT * self.accepted + accepted
            self.checked = self.DISCOUNT * self.checked + checked


MIN_CONFIDENCE = 0.5  # the traffic draft's first token: at least this share of the match's occurrences
MARGIN = 0.1  # traffic drafts cost no forward, so they win unless clearly less accepted than the model's
BOTH_RATE = 0.7  # the model continues a traffic draft only while traffic drafts are mostly accepted


def choose_source(proposal: Proposal, room: int, traffic_rate: float, model_rate: float, ends: bool) -> Source:
    """The controller's rule for one round.

    traffic: a proposal whose first token is confident, while the traffic drafter's measured acceptance is
             within MARGIN of the model's (its tokens are free: no draft forward)
    both:    traffic, but the proposal stopped before `room` tokens (its match ran out or became unsure) while
             traffic drafts are mostly accepted: the draft model continues where it ends
    model:   otherwise (no match, an unsure match, or traffic drafts measurably worse)
    `ends`: the proposal ends with an end of sequence (nothing can follow it)."""
    if not proposal.ids or proposal.confidence[0] < MIN_CONFIDENCE or traffic_rate < model_rate - MARGIN:
        return "model"
    if len(proposal.ids) < room and traffic_rate >= BOTH_RATE and not ends:
        return "both"
    return "traffic"


MATCH_BUCKETS = (4, 8, 16)  # traffic acceptance is measured apart for matches of < 4, < 8, < 16 and more tokens


def match_bucket(match_length: int) -> int:
    """A long match is much stronger evidence than a short one: each length class has its own measured rate."""
    return sum(match_length >= edge for edge in MATCH_BUCKETS)


def traffic_length(rate: float, room: int) -> int:
    """Longest traffic draft: twice the expected run of accepted tokens, a / (1 - a), plus one, within [2, room]
    (drafting past it only widens the verify)."""
    run = rate / (1 - rate) if rate < 1 else float(room)
    return max(1, min(room, max(2, math.ceil(2 * run) + 1)))


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
    """Per round: the traffic drafter, the draft model, or both, by choose_source; learns each source's acceptance.

    The traffic proposal is computed every round (it costs no forward), so its acceptance is measured even in
    rounds the model drafts ("shadow" checks against the committed tokens, exact for greedy decoding). The model's
    cache stays consistent on its own: CachedModel.rollback keeps the longest cached prefix that agrees with the
    committed ids, so traffic tokens fed before the model's continuation are kept when accepted."""

    name = "controller"

    def __init__(self, traffic: TrafficDrafter, model: ModelDrafter):
        self.traffic = traffic
        self.model = model
        self.traffic_rates = [SourceRate(prior=0.6) for _ in range(len(MATCH_BUCKETS) + 1)]  # by match length
        self.model_rate = SourceRate(prior=0.6)
        self.choices: list[Source] = []
        self._start = 0
        self._bucket = 0
        self._shadow: tuple[int, ...] = ()
        self._model_part: tuple[int, list[int]] | None = None  # (offset, model tokens) of the last draft

    @property
    def cache_length(self) -> int:
        return self.model.cache_length

    def prefill(self, ids: list[int]) -> None:
        self.model.prefill(ids)

    def propose(self, committed, gamma, warpers, generator, greedy, confidence) -> Draft:
        self._start = len(committed)
        proposal = self.traffic.suggest(committed, gamma)
        self._bucket = match_bucket(proposal.match_length)
        rate = self.traffic_rates[self._bucket].rate
        keep = traffic_length(rate, gamma)
        proposal = replace(proposal, ids=proposal.ids[:keep], confidence=proposal.confidence[:keep])
        ids = list(proposal.ids)
        ends = bool(ids) and ids[-1] in self.traffic.stop_ids
        choice = choose_source(proposal, gamma, rate, self.model_rate.rate, ends)
        if choice == "both" and len(ids) >= gamma:
            choice = "traffic"  # nothing left for the model to add
        self.choices.append(choice)
        self._shadow = proposal.ids
        if choice == "traffic":
            self._model_part = None
            return Draft(ids, None, 0, source="traffic")
        prefix = ids if choice == "both" else []
        rest = self.model.propose(committed + prefix, gamma - len(prefix), warpers, generator, greedy, confidence)
        self._model_part = (len(prefix), rest.ids)
        if not prefix:
            return replace(rest, source="model")
        return Draft(
            prefix + rest.ids,
            torch.cat([point_mass_rows(prefix, rest.q), rest.q]),
            rest.forwards,
            (False,) * len(prefix) + (rest.from_lookahead or (False,) * len(rest.ids)),
            source="both",
        )

    def rollback(self, committed: list[int]) -> None:
        new = committed[self._start :]
        accepted, checked = agreeing(self._shadow, new)
        self.traffic_rates[self._bucket].observe(accepted, checked)
        if self._model_part is not None:
            offset, ids = self._model_part
            if new[:offset] == list(self._shadow[:offset]):  # the model's tokens were reached
                self.model_rate.observe(*agreeing(ids, new[offset:]))
        self.model.rollback(committed)
