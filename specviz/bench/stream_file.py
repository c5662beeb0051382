"""A stream file, read as made by anyone (bench --stream takes any path): at most MAX_STREAM_BYTES read, the JSON
bounded as a trace's is (traces/check.parse_json: nesting, object and array counts, huge numbers), every field typed
and capped by strict pydantic models, every prompt within runs.py's limits, all before any model loads. Each refusal
is one StreamError line naming the field (docs/DESIGN.md, "Trace files", for the same rules on traces)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specviz.errors import UserError, refusal
from specviz.runs import MAX_PROMPT_CHARS, PromptError, check_length
from specviz.traces.check import Fields, Many, Str, parse_json
from specviz.traces.refused import Refused

MAX_STREAM_BYTES = 4 * 2**20  # the shipped stream is 16 kB
MAX_REQUESTS = 1000
MAX_NAME_CHARS = 200


class StreamError(UserError, ValueError):
    """A stream file that is not a list of requests."""


@dataclass(frozen=True)
class Request:
    prompt: str
    phase: str


class StreamRequest(Fields):
    prompt: Str(MAX_PROMPT_CHARS)
    phase: Str(MAX_NAME_CHARS) = ""


class StreamFile(Fields):
    name: Str(MAX_NAME_CHARS) = ""
    description: Str(4000) = ""
    requests: Many(StreamRequest, MAX_REQUESTS, min_len=1, read_as=list)


def _read(path: str | Path) -> Any:
    try:
        with Path(path).open("rb") as f:
            data = f.read(MAX_STREAM_BYTES + 1)
    except OSError as exc:
        raise StreamError(f"cannot read the stream {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_STREAM_BYTES:
        raise StreamError(f"{path}: over {MAX_STREAM_BYTES >> 20} MB, the most a stream file may hold")
    try:
        return parse_json(data)
    except Refused as exc:
        raise StreamError(f"{path}: {str(exc).replace('trace file', 'stream file')}") from None


def _prompt_file(path: str | Path, body: dict, first: int | None) -> list[Request]:
    """{"category": [prompts]}: each category's first prompts, its name as their phase."""
    if not body or not all(isinstance(k, str) and isinstance(v, list) for k, v in body.items()):
        raise StreamError(f"{path}: expected {{'requests': [...]}} or {{'category': [prompts]}}")
    if sum(map(len, body.values())) > MAX_REQUESTS:
        raise StreamError(f"{path}: over {MAX_REQUESTS} prompts, the most a stream may hold")
    for category, prompts in body.items():
        if len(category) > MAX_NAME_CHARS or not all(isinstance(p, str) for p in prompts):
            raise StreamError(f"{path}: {category[:40]!r} must be a short name with a list of prompts (strings)")
    return [Request(p, c) for c, prompts in body.items() for p in prompts[:first]]


def load_stream(path: str | Path, first: int | None = None) -> tuple[str, list[Request]]:
    """A stream file {"name", "requests": [{"prompt", "phase"}]}, or a prompt file {"category": [prompts]} read as a
    stream whose phases are its categories; `first`: only the first requests (of a prompt file: of each category)."""
    body = _read(path)
    if isinstance(body, dict) and "requests" in body:
        try:
            stream = StreamFile.model_validate(body)
        except ValidationError as exc:
            raise StreamError(f"{path}: {refusal(exc, StreamFile, 'the stream')}") from None
        name = stream.name or Path(path).stem
        requests = [Request(r.prompt, r.phase) for r in stream.requests[:first]]
    elif isinstance(body, dict):
        name, requests = Path(path).stem, _prompt_file(path, body, first)
    else:
        raise StreamError(f"{path}: expected {{'requests': [...]}} or {{'category': [prompts]}}")
    if not requests:
        raise StreamError(f"{path}: no requests")
    for i, request in enumerate(requests):
        try:
            check_length(request.prompt)
        except PromptError as exc:
            raise StreamError(f"{path}: request {i + 1} of {len(requests)}: {exc}") from None
    return name, requests
