"""What the traffic drafter learns from: token-id sequences, indexed so that a context's longest earlier match and
the counts of what followed it are found quickly (SuffixDecoding, arXiv 2411.04975; vLLM's method "suffix").

SuffixIndex keeps every position e >= 2 of every sequence under the bigram (seq[e-2], seq[e-1]) before it. The
occurrences of a context's longest matched suffix s (|s| = m, at most MAX_MATCH) are then the bigram's positions,
narrowed one token further back while any remain. These are exactly the leaves below s's node in a suffix tree
of the sequences, and counting the tokens that follow them gives that node's children's counts; nothing is
precomputed beyond the positions, so adding or removing a sequence is exact and costs its length. A lookup reads
at most MAX_SCAN of the bigram's positions per index, the most recent first, so repeated text cannot make lookups slow.

TrafficStore holds finished requests (prompt and output) in one SuffixIndex under a least-recently-used cap on
requests and on tokens; see docs/DESIGN.md, "The traffic drafter". Its file (save, load) is owner-only, written
atomically and read as strictly as a trace: a damaged one is a TrafficFileError, one line.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from specviz.errors import UserError, refusal

KEY = 2  # tokens of the index's key: matches shorter than this are not used
MAX_MATCH = 24  # longest suffix matched (vLLM's suffix_decoding_max_tree_depth is 24)
MAX_SPEC_FACTOR = 1.0  # draft at most this many tokens per matched token (vLLM's default)
MIN_TOKEN_PROB = 0.1  # stop drafting when the continuation's count share falls below this (vLLM's default)
FORMAT = "specviz-traffic"
MAX_FILE_BYTES = 16 * 2**20  # a full store (200,000 ids of up to 6 digits) is under 1.5 MB
MAX_SCAN = 512  # occurrences of a bigram a lookup reads per index, the most recent first: repeated text (a visitor's
# 200,000 tokens of "a") cannot make every later lookup read all of them while it holds the store's lock

Occurrence = tuple["SuffixIndex", int, int]  # (index, sequence id, position of the next token)


class SuffixIndex:
    """Sequences of token ids and, per bigram, the positions that follow it."""

    def __init__(self) -> None:
        self.sequences: dict[int, list[int]] = {}
        # per bigram, its positions in the order they were added (a dict as an ordered set: the newest last)
        self.positions: dict[tuple[int, int], dict[tuple[int, int], None]] = {}

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sequences.values())

    def extend(self, sid: int, tokens: Iterable[int]) -> None:
        """Append tokens to sequence sid (created if new), indexing each new position."""
        seq = self.sequences.setdefault(sid, [])
        for token in tokens:
            seq.append(int(token))
            e = len(seq) - 1
            if e >= KEY:
                self.positions.setdefault((seq[e - 2], seq[e - 1]), {})[(sid, e)] = None

    def remove(self, sid: int) -> None:
        """Forget sequence sid and every position it added (exactly: the index is as if it was never added)."""
        seq = self.sequences.pop(sid, [])
        for e in range(KEY, len(seq)):
            key = (seq[e - 2], seq[e - 1])
            found = self.positions[key]
            found.pop((sid, e), None)
            if not found:
                del self.positions[key]

    def matches(self, context: Sequence[int], length: int) -> list[tuple[int, int]]:
        """(sid, e) where the `length` tokens before e equal the context's last `length` tokens."""
        if length < KEY or len(context) < length:
            return []
        found = self.positions.get((context[-2], context[-1]), {})
        tail = list(context[-length:])
        return [(sid, e) for sid, e in found if e >= length and self.sequences[sid][e - length : e] == tail]


def latest(positions: dict[tuple[int, int], None]) -> list[tuple[int, int]]:
    """At most MAX_SCAN of a bigram's positions, the most recently added first."""
    return list(itertools.islice(reversed(positions), MAX_SCAN))


def longest_match(indexes: Sequence[SuffixIndex], context: Sequence[int]) -> tuple[int, list[Occurrence]]:
    """The longest m (KEY <= m <= MAX_MATCH) such that the context's last m tokens occur in some index with a
    token after them, and those occurrences; (0, []) when not even the last bigram occurred."""
    if len(context) < KEY:
        return 0, []
    found: list[Occurrence] = [
        (index, sid, e) for index in indexes for sid, e in latest(index.positions.get((context[-2], context[-1]), {}))
    ]
    m = KEY
    # Narrow one token further back while some occurrences still agree: s grows, its node goes deeper.
    while found and m < min(MAX_MATCH, len(context)):
        before = context[-m - 1]
        narrower = [(i, sid, e) for i, sid, e in found if e > m and i.sequences[sid][e - m - 1] == before]
        if not narrower:
            break
        found, m = narrower, m + 1
    return (m, found) if found else (0, [])


@dataclass(frozen=True)
class Proposal:
    """The most frequent continuation of the longest match."""

    ids: tuple[int, ...]
    confidence: tuple[float, ...]  # per token: the share of the match's occurrences that continue this way
    match_length: int
    occurrences: int  # occurrences of the matched suffix
    sources: frozenset[int] = frozenset()  # sequence ids of the store that the continuation came from


def continuation(
    found: list[Occurrence],
    match_length: int,
    limit: int,
    *,
    max_spec_factor: float = MAX_SPEC_FACTOR,
    min_token_prob: float = MIN_TOKEN_PROB,
    recency: dict[int, int] | None = None,
) -> Proposal:
    """Walk down from the matched node, each step to its most frequent child (ties: the most recent sequence).

    confidence_j = count(s + d_1..d_j) / count(s): the share of the match's occurrences that go on as drafted
    (the product of the children's count shares down the path). Drafting stops at `limit`, at
    ceil(max_spec_factor * m) tokens (a short match is weak evidence), or before a token whose confidence is
    below min_token_prob."""
    total = len(found)
    length = min(limit, math.ceil(max_spec_factor * match_length))
    ids: list[int] = []
    confidence: list[float] = []
    rank = recency or {}
    while found and len(ids) < length:
        nexts = [(i.sequences[sid][e], (i, sid, e)) for i, sid, e in found if e < len(i.sequences[sid])]
        if not nexts:
            break
        counts = Counter(token for token, _ in nexts)
        latest: dict[int, int] = {}
        for token, (_, sid, _) in nexts:
            latest[token] = max(latest.get(token, -1), rank.get(sid, sid))
        token = max(counts, key=lambda t: (counts[t], latest[t]))
        share = counts[token] / total
        if share < min_token_prob:
            break
        ids.append(token)
        confidence.append(share)
        found = [(i, sid, e + 1) for t, (i, sid, e) in nexts if t == token]
    sources = frozenset(sid for _, sid, _ in found)
    return Proposal(tuple(ids), tuple(confidence), match_length, total, sources)


class TrafficStore:
    """Finished requests (prompt + output ids) of one tokenizer, process-wide and thread-safe, with an LRU cap:
    adding a request beyond max_requests or max_tokens forgets the least recently used ones (a request is used
    when a draft continues from it), exactly (SuffixIndex.remove)."""

    def __init__(self, max_requests: int = 256, max_tokens: int = 200_000):
        if max_requests < 1 or max_tokens < 1:
            raise ValueError("a traffic store holds at least one request and one token")
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.index = SuffixIndex()
        self.order: OrderedDict[int, int] = OrderedDict()  # sid -> length, least recently used first
        self.next_sid = 0
        self.lookups = 0  # proposals asked of the store, and those that found a match in it
        self.hits = 0
        self.lock = threading.RLock()

    @property
    def requests(self) -> int:
        return len(self.order)

    @property
    def tokens(self) -> int:
        return sum(self.order.values())

    def add(self, ids: Sequence[int]) -> int | None:
        """Remember one request's tokens; returns its id (None for a sequence too short to index)."""
        ids = [int(t) for t in ids][-self.max_tokens :]
        if len(ids) <= KEY:
            return None
        with self.lock:
            sid = self.next_sid
            self.next_sid += 1
            self.index.extend(sid, ids)
            self.order[sid] = len(ids)
            while len(self.order) > self.max_requests or self.tokens > self.max_tokens:
                self.evict(next(iter(self.order)))
            return sid

    def evict(self, sid: int) -> None:
        with self.lock:
            self.order.pop(sid, None)
            self.index.remove(sid)

    def touch(self, sids: Iterable[int]) -> None:
        with self.lock:
            for sid in sids:
                if sid in self.order:
                    self.order.move_to_end(sid)

    def clear(self) -> None:
        with self.lock:
            self.index = SuffixIndex()
            self.order.clear()
            self.lookups = self.hits = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def recency(self) -> dict[int, int]:
        """Rank of each stored request, least recently used first (ties in counts go to the latest)."""
        return {sid: rank for rank, sid in enumerate(self.order)}

    def save(self, path: Path) -> None:
        """Write the requests' ids as JSON, least recently used first (load adds them back in that order): readable
        by the owner only (0600, in a 0700 folder), and atomically (a temporary file beside it, then renamed over it,
        so a reader never sees half a file)."""
        with self.lock:
            body = {"format": FORMAT, "sequences": [self.index.sequences[sid] for sid in self.order]}
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # made 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(body, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def load(self, path: Path, vocab: int) -> int:
        """Add the requests of a file save wrote; returns how many (0 when there is none). Anything else is refused
        with one TrafficFileError line: a file over MAX_FILE_BYTES, JSON that is not save's (nesting, fields, types),
        more requests or tokens than this store holds, an id at or above `vocab`."""
        try:
            with path.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise TrafficFileError(f"cannot read {path}: {exc.strerror or exc}") from None
        sequences = _checked(data, self.max_requests, self.max_tokens, vocab)
        for seq in sequences:
            self.add(seq)
        return len(sequences)


class TrafficFileError(UserError, ValueError):
    """A saved traffic store that save did not write (damaged, or made by hand)."""


class SavedStore(BaseModel):
    """save's JSON: its format, and the requests' token ids within the store's caps and the vocabulary (the
    validation's context: {"requests", "tokens", "vocab"})."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    format: Literal["specviz-traffic"]
    sequences: list[list[int]]

    @field_validator("sequences")
    @classmethod
    def _within(cls, sequences: list[list[int]], info: ValidationInfo) -> list[list[int]]:
        limits = info.context
        if len(sequences) > limits["requests"]:
            raise ValueError(f"at most {limits['requests']} sequences")
        if sum(map(len, sequences)) > limits["tokens"]:
            raise ValueError(f"at most {limits['tokens']:,} tokens in all")
        for i, seq in enumerate(sequences):
            if (bad := next((t for t in seq if not 0 <= t < limits["vocab"]), None)) is not None:
                raise ValueError(f"sequence {i} holds {bad}, not a token id below {limits['vocab']}")
        return sequences


def _checked(data: bytes, max_requests: int, max_tokens: int, vocab: int) -> list[list[int]]:
    """save's JSON, read by SavedStore, before anything joins a store."""
    if len(data) > MAX_FILE_BYTES:
        raise TrafficFileError(f"not a traffic store file: it is over {MAX_FILE_BYTES >> 20} MB")
    try:
        body = json.loads(data)
    except RecursionError:
        raise TrafficFileError("not a traffic store file: the JSON is nested too deeply") from None
    except ValueError as exc:  # not JSON, not UTF-8, or an integer past int()'s digit limit
        raise TrafficFileError(f"not a traffic store file: {str(exc)[:120]}") from None
    limits = {"requests": max_requests, "tokens": max_tokens, "vocab": vocab}
    try:
        return SavedStore.model_validate(body, context=limits).sequences
    except ValidationError as exc:
        token = f"{{where}} holds {{got}}, not a token id below {vocab}"
        words = {
            "the file": "an object with the fields format, sequences",
            "sequences": "a list of token-id lists",  # not "at most 256 sequences" for "x"
            "sequences[]": "a list of token ids",
            "int_type": token,
        }
        raise TrafficFileError(f"not a traffic store file: {refusal(exc, SavedStore, 'the file', words)}") from None
