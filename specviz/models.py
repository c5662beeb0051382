"""Model pairs: a target p and a draft q that share a vocabulary, loaded from one place.

Sources: the built-in offline pair ("builtin"), a hub id, a local model directory, a local .gguf file.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

BUILTIN = "builtin"

Progress = Callable[[str, float], None]  # (message, fraction done in [0, 1])


class ModelLoadError(RuntimeError):
    """A pair that cannot be loaded; the message says what to do about it."""


@dataclass(frozen=True)
class PairSpec:
    target: str = BUILTIN
    draft: str | None = BUILTIN        # None: no draft model (the n-gram drafter only)
    device: str = "auto"               # auto | cpu | cuda | cuda:N | mps
    quantize_draft: bool | None = None # int8 dynamic quantization of the draft's Linear layers; None: on CPU only
    trust_remote_code: bool = False


@dataclass
class ModelPair:
    """Loaded models. Shared between runs and sessions: per-run state never lives here."""
    target: Any                         # transformers PreTrainedModel (p)
    draft: Any | None                   # transformers PreTrainedModel (q), or None
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    spec: PairSpec
    names: dict[str, str] = field(default_factory=dict)  # target, draft, device, dtype: for display and traces
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # serialises runs on the models

    @property
    def eos_ids(self) -> frozenset[int]:
        ids = set()
        for source in (self.target.generation_config, self.target.config):
            eos = getattr(source, "eos_token_id", None)
            ids.update([eos] if isinstance(eos, int) else list(eos or []))
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return frozenset(ids)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def decode(self, token_ids: list[int] | tuple[int, ...]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def encode_prompt(self, text: str, chat: bool = True) -> list[int]:
        """Chat prompts go through the tokenizer's chat template; raw text is a plain continuation."""
        if chat and getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": text}]
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return list(ids)
        return list(self.tokenizer(text)["input_ids"])


def load_pair(spec: PairSpec, progress: Progress | None = None) -> ModelPair:
    raise NotImplementedError  # filled in by the loading work
