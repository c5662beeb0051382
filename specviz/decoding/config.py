"""Run settings shared by the engine, the CLI and the app."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from specviz.errors import UserError

Schedule = Literal["constant", "adaptive", "auto"]

MAX_NEW_TOKENS_LIMIT = 1024
GAMMA_LIMIT = 32
MAX_ALTERNATIVES = 8
MAX_TREE_NODES = 64  # a draft heads' token tree: nodes off the chain per round (n x alternatives, at most this)
RECORD_TOP_LIMIT = 64  # top tokens of p, q and the residual an event may keep (the trace loader caps the same)
SEED_LIMIT = 2**64 - 1  # torch's manual_seed takes [-2**63, 2**64 - 1] and maps a negative seed onto a large one


class ConfigError(UserError, ValueError):
    """A setting a user can get wrong; the message says which and what is allowed."""


# The drafters' names belong to their registry (specviz.drafters), a layer above this one
# (docs/DESIGN.md, "Folders and layers"): it hands them here when it loads. Until then no name is checked and the
# default is "".
_registered: tuple[Callable[[], Sequence[str]], str] = (tuple, "")


def accept_drafters(names: Callable[[], Sequence[str]], default: str) -> None:
    """The registry's names (read at each check, so a drafter registered later is accepted) and its default."""
    global _registered
    _registered = (names, default)


def drafter_names() -> tuple[str, ...]:
    return tuple(_registered[0]())


def default_drafter() -> str:
    return _registered[1]


@dataclass(frozen=True)
class SpecConfig:
    gamma: int = 5  # draft length (the start value under the adaptive schedule)
    schedule: Schedule = "constant"  # auto: cost-aware, speculates only while it pays (schedule.AutoSchedule)
    gamma_max: int = 12  # ceiling of the adaptive schedule; the draft length of auto's speculative rounds
    draft_confidence: float = 0.0  # stop drafting when the draft's top probability falls below this
    # (auto uses AUTO_CONFIDENCE when this is 0)
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 means off
    top_p: float = 1.0  # 1 means off
    seed: int = 0
    max_new_tokens: int = 64
    drafter: str = field(default_factory=default_drafter)  # a name in specviz.drafters.REGISTRY
    ngram_size: int = 3  # longest n-gram the prompt-lookup drafter matches
    lookahead: int = 0  # model drafter: up to this many prompt-lookup guesses scored in one draft
    # forward (each token still drawn from its own q row; fewer forwards); 0: off
    alternatives: int = 0  # also verify this many other candidates for the last drafted token when the
    # draft was unsure of it (a token tree, same target forward); 0: off
    record_top: int = 8  # how many top tokens of p, q and the residual each event keeps
    fuse_prompt: bool = False  # process the prompt inside the first round's forwards (as transformers'
    # generate does) instead of a separate pass: one target and one draft forward
    # fewer per run; round 0 then starts from empty caches, its times include
    # the prompt and prefill_seconds is 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self) -> "SpecConfig":
        if not 1 <= self.gamma <= GAMMA_LIMIT:
            raise ConfigError(f"gamma must be between 1 and {GAMMA_LIMIT}, got {self.gamma}")
        if self.schedule not in ("constant", "adaptive", "auto"):
            raise ConfigError(f"schedule must be 'constant', 'adaptive' or 'auto', got {self.schedule!r}")
        if not self.gamma <= self.gamma_max <= GAMMA_LIMIT:
            raise ConfigError(f"gamma_max must be between gamma ({self.gamma}) and {GAMMA_LIMIT}, got {self.gamma_max}")
        if not 0.0 <= self.draft_confidence < 1.0:
            raise ConfigError(f"draft confidence threshold must be in [0, 1), got {self.draft_confidence}")
        if not self.temperature >= 0.0:  # also catches NaN
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ConfigError(f"top-k must be >= 0 (0 turns it off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top-p must be in (0, 1], got {self.top_p}")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT:
            raise ConfigError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS_LIMIT}, got {self.max_new_tokens}")
        names = drafter_names()
        if names and self.drafter not in names:
            raise ConfigError(f"drafter must be one of {', '.join(names)}, got {self.drafter!r}")
        if not 0 <= self.lookahead <= GAMMA_LIMIT:
            raise ConfigError(f"lookahead must be between 0 (off) and {GAMMA_LIMIT}, got {self.lookahead}")
        if not 0 <= self.alternatives <= MAX_ALTERNATIVES:
            raise ConfigError(f"alternatives must be between 0 (off) and {MAX_ALTERNATIVES}, got {self.alternatives}")
        if not 0 <= self.seed <= SEED_LIMIT:
            raise ConfigError(f"seed must be between 0 and {SEED_LIMIT} (2**64 - 1), got {self.seed}")
        if not 0 <= self.record_top <= RECORD_TOP_LIMIT:
            raise ConfigError(f"record top must be between 0 and {RECORD_TOP_LIMIT}, got {self.record_top}")
        if not 1 <= self.ngram_size <= 8:
            raise ConfigError(f"n-gram size must be between 1 and 8, got {self.ngram_size}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SpecConfig":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
