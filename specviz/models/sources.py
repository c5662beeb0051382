"""Where a model comes from: the built-in pair, a hub id, a local directory or a .gguf file, resolved to a
Source; and reading its config and tokenizer through from_pretrained, with every failure a user can cause
turned into a ModelLoadError that says what to do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from specviz.errors import ModelLoadError

from . import builtin

BUILTIN = "builtin"
TRUST_REMOTE_CODE_ENV = "SPECVIZ_TRUST_REMOTE_CODE"  # "1" is an explicit opt-in, like PairSpec.trust_remote_code


@dataclass(frozen=True)
class Source:
    """Where one model comes from, resolved: what from_pretrained gets, and what the UI shows."""

    role: str  # "target" | "draft"
    given: str  # as the user typed it
    kind: str  # builtin | hub | dir | gguf
    path: str  # hub id or local directory
    label: str
    gguf_file: str | None = None

    def file_kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}


def resolve_source(given: str, role: str) -> Source:
    """Decide what a model string means: 'builtin', a .gguf file, a local directory, or else a hub id.

    A built-in source gets its path from prepare_builtin_sources (converting takes minutes, so it
    runs after every cheap check of the other source).
    """
    if given == BUILTIN:
        name = (builtin.TARGET if role == "target" else builtin.DRAFT).name
        return Source(role, given, "builtin", "", name)
    path = Path(given).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ModelLoadError(f"The {role} GGUF file {given} does not exist.")
        return Source(role, given, "gguf", str(path.parent), path.name, gguf_file=path.name)
    if path.is_dir():
        return Source(role, given, "dir", str(path), given)
    if path.exists():
        raise ModelLoadError(
            f"The {role} model {given} is a file: give a model directory, a .gguf file, "
            f"a Hugging Face hub id or 'builtin'."
        )
    if given.startswith(("/", "./", "../", "~", ".\\")) or "\\" in given:
        raise ModelLoadError(f"The {role} model directory {given} does not exist.")
    return Source(role, given, "hub", given, given)


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def call_pretrained(source: Source, loader: Callable[..., Any]) -> Any:
    """Run one from_pretrained-like loader; turn what a user can cause into a ModelLoadError.

    Hub ids try the local cache first: a cached model then loads without a network round trip
    (with no network, retries cost tens of seconds before failing: see
    docs/notes/2026-12-bench-and-loading.md, "Loading: hub ids").
    """
    try:
        if source.kind != "hub":
            return loader()
        try:
            return loader(local_files_only=True)
        except OSError:
            if hub_offline():
                raise
        return loader()
    except ValueError as exc:
        if "trust_remote_code" in str(exc):
            raise remote_code_error(source) from None
        raise ModelLoadError(f"The {source.role} model {source.given} could not be loaded: {first_line(exc)}") from exc
    except OSError as exc:
        raise not_found_error(source, exc) from exc
    except SafetensorError as exc:
        raise damaged_weights_error(source, exc) from None


def damaged_weights_error(source: Source, exc: Exception) -> ModelLoadError:
    """A safetensors file that is not one (truncated by a full disk or an interrupted copy, overwritten)."""
    detail = first_line(exc)
    if source.kind == "builtin":
        return ModelLoadError(
            f"The built-in {source.role} model's converted weights in {source.path} are damaged "
            f"({detail}): delete that folder and run python -m specviz prepare again."
        )
    return ModelLoadError(
        f"The {source.role} model {source.given} has a damaged safetensors file ({detail}): "
        f"save or download the model again."
    )


def remote_code_error(source: Source) -> ModelLoadError:
    return ModelLoadError(
        f"The {source.role} model {source.given} needs custom code from its repository (trust_remote_code), "
        f"which specviz does not run unless asked. If you trust that code, set the environment variable "
        f"{TRUST_REMOTE_CODE_ENV}=1 (or PairSpec(trust_remote_code=True)) and load again."
    )


def not_found_error(source: Source, exc: OSError) -> ModelLoadError:
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    role, given = source.role, source.given
    if source.kind != "hub":
        return ModelLoadError(f"The {role} model in {given} could not be loaded: {first_line(exc)}")
    if isinstance(exc, GatedRepoError):
        return ModelLoadError(
            f"The {role} model '{given}' is gated on the Hugging Face hub: accept its license "
            f"on huggingface.co and log in (hf auth login, or HF_TOKEN), then load again."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return ModelLoadError(
            f"The {role} model id '{given}' was not found on the Hugging Face hub "
            f"(check the spelling; private models need a login)."
        )
    offline = " (offline mode is on: HF_HUB_OFFLINE=1)" if hub_offline() else ""
    return ModelLoadError(
        f"The {role} model id '{given}' was not found: it is not a local path and not in the Hugging Face "
        f"cache ({constants.HF_HUB_CACHE}); downloading it needs network access{offline}. Use the built-in "
        f"pair, a local model directory or a .gguf file, or connect and load again."
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_config(source: Source, allow_code: bool) -> Any:
    from transformers import AutoConfig

    return call_pretrained(
        source,
        lambda **kw: AutoConfig.from_pretrained(
            source.path, trust_remote_code=allow_code, **source.file_kwargs(), **kw
        ),
    )


def load_tokenizer(source: Source, allow_code: bool) -> Any:
    from transformers import AutoTokenizer

    return call_pretrained(
        source,
        lambda **kw: AutoTokenizer.from_pretrained(
            source.path, trust_remote_code=allow_code, **source.file_kwargs(), **kw
        ),
    )
