"""The example prompts in assets/prompts.json: {"category": ["prompt", ...]}, shared by the app and the bench; a
prompt file is read by a pydantic type (PromptFile), whatever its path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from pydantic import Field

from specviz import ASSETS
from specviz.decoding.config import ConfigError
from specviz.runs import MAX_PROMPT_CHARS, PromptError, check_length
from specviz.traces.check import Many, Str, read_model

DEFAULT_PROMPTS = ASSETS / "prompts.json"
MAX_CATEGORIES = 64
MAX_PER_CATEGORY = 1000
MAX_BYTES = 4 * 2**20
# {"category": ["prompt", ...]}: a short name for each list of prompts, each prompt within runs.py's characters
PromptFile = Annotated[
    dict[Str(200), Many(Str(MAX_PROMPT_CHARS), MAX_PER_CATEGORY, read_as=list)], Field(max_length=MAX_CATEGORIES)
]
WORDS = {"the file": '{"category": ["prompt", ...]}'}


def read_prompts(path: str | Path = DEFAULT_PROMPTS) -> dict[str, list[str]]:
    """Every category of a prompt file, checked (ConfigError in one line naming the field; FileNotFoundError)."""
    try:
        return read_model(path, PromptFile, ConfigError, "a prompt file", MAX_BYTES, WORDS)
    except FileNotFoundError:
        raise FileNotFoundError(f"no prompt file at {path}") from None


def load_prompts(
    path: str | Path = DEFAULT_PROMPTS, categories: Sequence[str] | None = None, per_category: int | None = None
) -> dict[str, list[str]]:
    """{"category": [prompt, ...]} from a JSON file, restricted to categories (in that order)."""
    path = Path(path)
    data = read_prompts(path)
    wanted = list(categories) if categories else list(data)
    unknown = [c for c in wanted if c not in data]
    if unknown:
        raise ConfigError(
            f"unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
            f"{path.name} has {', '.join(data)}"
        )
    chosen = {
        c: [p for p in data[c] if p.strip()][:per_category] if per_category else [p for p in data[c] if p.strip()]
        for c in wanted
    }
    if not any(chosen.values()):
        raise ConfigError("no prompts selected")
    for category, prompts in chosen.items():
        for index, prompt in enumerate(prompts):
            try:
                check_length(prompt)
            except PromptError as exc:  # a file's content, as the other errors here (the app catches these)
                raise ConfigError(f"{path.name}, {category} prompt {index + 1}: {exc}") from None
    return {c: ps for c, ps in chosen.items() if ps}
