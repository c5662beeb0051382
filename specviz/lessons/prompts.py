"""The example prompts in assets/prompts.json: {"category": ["prompt", ...]}, shared by the app and the bench."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from specviz import ASSETS
from specviz.decoding.config import ConfigError
from specviz.runs import PromptError, check_length

DEFAULT_PROMPTS = ASSETS / "prompts.json"


def load_prompts(
    path: str | Path = DEFAULT_PROMPTS, categories: Sequence[str] | None = None, per_category: int | None = None
) -> dict[str, list[str]]:
    """{"category": [prompt, ...]} from a JSON file, restricted to categories (in that order)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no prompt file at {path}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"cannot read the prompts in {path}: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(p, str) for p in v) for v in data.values()
    ):
        raise ConfigError(f'{path} must hold {{"category": ["prompt", ...]}}')
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
