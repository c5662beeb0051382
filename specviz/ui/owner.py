"""What a server holds in memory is its owner's choice on an exposed server, and a visitor's switch on a loopback one.

- Exposed (any address but loopback: ui/server.py): whoever starts the server names the pairs and the precisions,
  SPECVIZ_PAIRS (the listed pairs by their target: builtin, Qwen/Qwen2.5-7B-Instruct, meta-llama/Llama-3.1-8B-Instruct,
  openai-community/gpt2-xl) and SPECVIZ_PRECISIONS (auto, fp32, bf16, int8), comma-separated; unset, the built-in
  pair at the default precision. Every pair x precision is loaded when the first visitor arrives and stays
  (serving/pairs.py pins them); the sidebar offers only those, with the server's device and draft quantization,
  and nothing a visitor picks loads anything (custom pairs aside, where the owner allows them).
- Loopback (one person's machine): the sidebar offers everything, and a choice replaces the loaded pair.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specviz.markup import code
from specviz.models.loading import BUILTIN, PairSpec
from specviz.models.precision import PRECISIONS

from .server import is_loopback, server_address

PAIRS_ENV = "SPECVIZ_PAIRS"
PRECISIONS_ENV = "SPECVIZ_PRECISIONS"
PRECISION_NAMES = ("auto", *PRECISIONS)
NAMES_LIMIT = 16  # names read from one variable (a pair each loads: more is a mistake)

Preset = tuple[str, str | None]


@dataclass(frozen=True)
class OwnerChoice:
    """The pairs (a preset's target and draft) and precisions an exposed server holds, and the names it ignored."""

    pairs: tuple[Preset, ...]
    precisions: tuple[str, ...]
    ignored: tuple[tuple[str, str], ...] = ()  # (variable, name)

    def specs(self) -> list[PairSpec]:
        """Every pair x precision, on the server's device with its draft quantization: what the server holds."""
        return [PairSpec(target, draft, precision=name) for target, draft in self.pairs for name in self.precisions]


def exposed() -> bool:
    """Whether the server listens beyond this machine's loopback (an empty address and 0.0.0.0 included)."""
    return not is_loopback(server_address())


def _names(value: str) -> list[str]:
    return list(dict.fromkeys(name for name in re.split(r"[,\s]+", value.strip()) if name))[:NAMES_LIMIT]


def owner_choice(presets: Iterable[Preset], environ: Mapping[str, str]) -> OwnerChoice:
    """SPECVIZ_PAIRS and SPECVIZ_PRECISIONS read from `environ`; a name that is neither a listed pair's target nor a
    precision is ignored (and named), and an empty or wholly ignored variable means its default."""
    by_target = {target.lower(): (target, draft) for target, draft in presets}
    pairs, precisions, ignored = [], [], []
    for name in _names(environ.get(PAIRS_ENV, "")):
        found = by_target.get(name.lower())
        (pairs if found else ignored).append(found or (PAIRS_ENV, name))
    for name in _names(environ.get(PRECISIONS_ENV, "")):
        found = name.lower() in PRECISION_NAMES
        (precisions if found else ignored).append(name.lower() if found else (PRECISIONS_ENV, name))
    return OwnerChoice(
        tuple(dict.fromkeys(pairs)) or ((BUILTIN, BUILTIN),),
        tuple(dict.fromkeys(precisions)) or ("auto",),
        tuple(ignored),
    )


def choice_here(presets: Iterable[Preset]) -> OwnerChoice | None:
    """The owner's choice on an exposed server (from this process's environment); None on a loopback one."""
    return owner_choice(presets, os.environ) if exposed() else None


def offered(labels: Mapping[str, Any], chosen: Iterable | None, extra: Iterable[str] = ()) -> list[str]:
    """A sidebar box's options: every label where nothing is chosen (a loopback server); else the labels whose value
    is chosen, in the owner's order, then `extra` (the custom pair, where the owner allows it)."""
    if chosen is None:
        return list(labels)
    return [label for value in chosen for label, mine in labels.items() if mine == value] + list(extra)


def owner_note(choice: OwnerChoice) -> str:
    """Markdown: what this exposed server holds, who chose it, and how."""
    pairs = ", ".join(code(target) for target, _ in choice.pairs)
    precisions = ", ".join(code(name) for name in choice.precisions)
    return (
        f"This server holds {pairs} at {precisions}, chosen by whoever started it ({code(PAIRS_ENV)}, "
        f"{code(PRECISIONS_ENV)}): you pick among them, and nothing you pick loads another pair."
    )


def ignored_note(choice: OwnerChoice, presets: Iterable[Preset]) -> str | None:
    """Markdown: the names the server was started with that name no listed pair or precision (they were ignored)."""
    if not choice.ignored:
        return None
    names = ", ".join(f"{code(name)} in {env}" for env, name in choice.ignored)
    targets = ", ".join(code(target) for target, _ in presets)
    return (
        f"Ignored at server start: {names}. A pair is named by its target ({targets}), a precision by "
        f"{', '.join(map(code, PRECISION_NAMES))}."
    )


SWITCH_NOTE = (
    "On this loopback server a choice of pair or precision replaces the loaded pair: the old one is let go before "
    "the new one loads (unless both fit with room to spare), and the load waits for the run under way. A server "
    f"on any other address holds only the pairs its owner chose at start ({code(PAIRS_ENV)}, {code(PRECISIONS_ENV)})."
)
