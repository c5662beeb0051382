"""Speculative decoding's metrics, defined once, as the serving engines define them (vLLM v1's spec_decode metrics,
SpecDecodingStats; llama.cpp's server and SGLang use the same words).

A round is one verification step. A draft is a round that drafted at least one token: a round with an empty draft
(an n-gram miss, a budget of 0) counts in `rounds` and in nothing else, as vLLM counts no draft for a step without
speculative tokens. Per round: `accepted` of its `drafted` tokens were kept (the accepted prefix; a kept alternative
or tree node counts at the position it took), 0 <= accepted <= drafted. Positions are 0-based here (position 0 is the
first drafted token, vLLM's `position="0"`); pages say "position 1" for it.

    acceptance rate             accepted tokens / drafted tokens
    mean acceptance length      1 + accepted tokens / drafts (tokens a verification step with a draft commits)
    per-position rate at i      drafts that kept position i / drafts
    conditional rate at i       drafts that kept position i / drafts that reached i (drafted at least i + 1 tokens
                                and kept the first i): P(keep i | i reached), what a longer draft would earn
    accepted-length histogram   [k]: drafts that kept exactly k tokens

Nothing here imports torch: the numbers are plain counters, added up across runs with `+`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Protocol


class _Round(Protocol):
    n_accepted: int
    drafted: tuple


def _ratio(top: int, bottom: int) -> float | None:
    return top / bottom if bottom else None


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    return tuple((a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n))


@dataclass(frozen=True)
class SpecMetrics:
    """The counters of a run, or of many: vLLM's four (num_drafts, num_draft_tokens, num_accepted_tokens,
    num_accepted_tokens_per_pos), plus the rounds and how many drafts reached each position."""

    rounds: int = 0  # verification steps, empty drafts included
    drafts: int = 0  # rounds that drafted at least one token (vLLM's num_drafts)
    draft_tokens: int = 0  # vLLM's num_draft_tokens
    accepted_tokens: int = 0  # vLLM's num_accepted_tokens
    accepted_per_position: tuple[int, ...] = ()  # [i]: drafts that kept position i (num_accepted_tokens_per_pos)
    reached_per_position: tuple[int, ...] = ()  # [i]: drafts at least i + 1 long whose first i tokens were kept
    reached_estimated: bool = False  # reached_per_position assumed every draft as long (from_counters)

    @classmethod
    def from_rounds(cls, rounds: Iterable[tuple[int, int]]) -> SpecMetrics:
        """From (accepted, drafted) per round."""
        pairs = list(rounds)
        longest = max((d for _, d in pairs), default=0)
        kept, reached = [0] * longest, [0] * longest
        for accepted, drafted in pairs:
            if not 0 <= accepted <= drafted:
                raise ValueError(f"a round kept {accepted} of {drafted} drafted tokens")
            for i in range(accepted):
                kept[i] += 1
            for i in range(min(accepted + 1, drafted)):
                reached[i] += 1
        return cls(
            rounds=len(pairs),
            drafts=sum(d > 0 for _, d in pairs),
            draft_tokens=sum(d for _, d in pairs),
            accepted_tokens=sum(a for a, _ in pairs),
            accepted_per_position=tuple(kept),
            reached_per_position=tuple(reached),
        )

    @classmethod
    def from_events(cls, events: Iterable[_Round]) -> SpecMetrics:
        """From a run's RoundEvents (n_accepted of its drafted tokens)."""
        return cls.from_rounds((e.n_accepted, len(e.drafted)) for e in events)

    @classmethod
    def from_counters(
        cls, drafts: int, draft_tokens: int, accepted_tokens: int, accepted_per_position: Iterable[int]
    ) -> SpecMetrics:
        """From what vLLM publishes, which says nothing of how long each draft was: the drafts that reached position
        i are then taken to be those that kept position i - 1 (all drafts for i = 0), exact when every draft was
        as long as the per-position list (num_speculative_tokens), so the conditional rate at i is
        accepted_per_position[i] / accepted_per_position[i - 1]. reached_estimated says whether that held:
        draft_tokens != drafts * len(accepted_per_position) means some drafts were shorter: they are counted as
        reaching positions they never drafted, so the conditional rates are then lower bounds, not counts. The rounds
        without a draft are not published: rounds is 0."""
        kept = tuple(int(k) for k in accepted_per_position)
        return cls(
            rounds=0,
            drafts=drafts,
            draft_tokens=draft_tokens,
            accepted_tokens=accepted_tokens,
            accepted_per_position=kept,
            reached_per_position=(drafts, *kept[:-1]) if kept else (),
            reached_estimated=draft_tokens != drafts * len(kept),
        )

    @classmethod
    def from_json(cls, counts: dict) -> SpecMetrics:
        """From as_json()'s dict (lists for the per-position counts, as JSON reads them back)."""
        positions = ("accepted_per_position", "reached_per_position")
        return cls(**{k: tuple(v) if k in positions else v for k, v in counts.items()})

    def as_json(self) -> dict:
        """The counters as plain JSON values."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def __add__(self, other: SpecMetrics) -> SpecMetrics:
        return SpecMetrics(
            rounds=self.rounds + other.rounds,
            drafts=self.drafts + other.drafts,
            draft_tokens=self.draft_tokens + other.draft_tokens,
            accepted_tokens=self.accepted_tokens + other.accepted_tokens,
            accepted_per_position=_add(self.accepted_per_position, other.accepted_per_position),
            reached_per_position=_add(self.reached_per_position, other.reached_per_position),
            reached_estimated=self.reached_estimated or other.reached_estimated,
        )

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted tokens / drafted tokens; None when nothing was drafted."""
        return _ratio(self.accepted_tokens, self.draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted tokens / drafts: the tokens a verification step with a draft commits; None without drafts."""
        return None if not self.drafts else 1 + self.accepted_tokens / self.drafts

    @property
    def accepted_per_round(self) -> float | None:
        """Accepted tokens / rounds, empty drafts included (ours, not the engines'); None without rounds."""
        return _ratio(self.accepted_tokens, self.rounds)

    @property
    def per_position_acceptance_rate(self) -> tuple[float, ...]:
        """[i]: drafts that kept position i / drafts (vLLM's per-position acceptance rate)."""
        return tuple(k / self.drafts for k in self.accepted_per_position) if self.drafts else ()

    @property
    def conditional_acceptance_rate(self) -> tuple[float | None, ...]:
        """[i]: drafts that kept position i / drafts that reached it (None where none reached it)."""
        return tuple(_ratio(k, r) for k, r in zip(self.accepted_per_position, self.reached_per_position, strict=True))

    @property
    def accepted_length_histogram(self) -> tuple[int, ...]:
        """[k]: drafts that kept exactly k tokens, k = 0 .. the longest position kept (from the per-position counts:
        a draft that kept k tokens kept positions 0 .. k - 1)."""
        kept = (self.drafts, *self.accepted_per_position, 0)
        return tuple(kept[k] - kept[k + 1] for k in range(len(kept) - 1)) if self.drafts else ()
