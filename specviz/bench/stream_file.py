"""A stream file, read as made by anyone (bench --stream takes any path): at most MAX_STREAM_BYTES read, the JSON
bounded as a trace's is (traces/check.parse_json: nesting, object and array counts, huge numbers), every field typed
and capped by strict pydantic models, every prompt within runs.py's limits, all before any model loads. Each refusal
is one StreamError line naming the field (docs/DESIGN.md, "Trace files", for the same rules on traces)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError, create_model

from specviz.drafters import ALONE, CONTROLLER
from specviz.errors import UserError, refusal
from specviz.runs import MAX_PROMPT_CHARS, PromptError, check_length
from specviz.traces.check import Fields, Float, Int, Many, Str, read_file, read_model

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
        return read_file(path, StreamError, "a stream file", MAX_STREAM_BYTES)
    except FileNotFoundError:
        raise StreamError(f"cannot read the stream {path}: no such file") from None


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


# --- a result bench --stream wrote (its --json file; the Learning page's recordings) --------------------------------

MAX_RESULT_BYTES = 8 * 2**20  # the shipped results are under 100 kB
_COUNT = Int(0, 10**9)
_RATE = Float(0.0, 1.0)
_AMOUNT = Float(0.0, 1e9)  # seconds, tokens per second, a speed-up, tokens per round


class _Open(Fields):
    """Fields checked as typed; fields a later bench adds are kept, unread."""

    model_config = ConfigDict(extra="allow")


class DrafterRun(_Open):
    """One drafter's run of one request (stream.acceptance_metrics and the timings run_request adds)."""

    rounds: _COUNT
    drafts: _COUNT
    drafted: _COUNT
    accepted: _COUNT
    acceptance_rate: _RATE
    mean_acceptance_length: _AMOUNT
    per_position_acceptance_rate: Many(_RATE, 64, read_as=list)
    mean_accepted_per_round: _AMOUNT
    sources: Annotated[dict[Str(MAX_NAME_CHARS), _COUNT], Field(max_length=16)]
    tokens_per_second: _AMOUNT
    speedup: _AMOUNT
    repeat_speedups: Many(_AMOUNT, MAX_REQUESTS, read_as=list) = []
    seconds: _AMOUNT = 0.0  # absent in results written before the field (then unset: left out again)
    choice_seconds: _AMOUNT = 0.0


class _Timing(Fields):
    tokens_per_second: _AMOUNT
    seconds: _AMOUNT


class _Store(Fields):
    requests: _COUNT
    tokens: _COUNT
    hit_rate: _RATE


class _Row(_Open):
    index: _COUNT
    phase: Str(MAX_NAME_CHARS)
    prompt_tokens: _COUNT
    new_tokens: _COUNT
    repeats: Int(1, MAX_REQUESTS) = 1
    baseline: _Timing
    store: _Store
    controller_over_model_paired: _AMOUNT = 0.0
    controller_same_rounds: bool = False


# a request's row holds one DrafterRun under each drafter's name: the controller and the two it chooses between
StreamRow = create_model("StreamRow", __base__=_Row, **{name: (DrafterRun, ...) for name in (*ALONE, CONTROLLER)})


class StreamResult(_Open):
    requests: Many(StreamRow, MAX_REQUESTS, min_len=1, read_as=list)


def read_stream_result(path: str | Path) -> dict[str, Any]:
    """A result bench --stream wrote, every row checked (StreamResult); StreamError in one line naming the field.
    As a dict of what the file held (fields it left out stay out), for the readers of the shipped results."""
    try:
        result = read_model(path, StreamResult, StreamError, "a stream result", MAX_RESULT_BYTES)
    except FileNotFoundError:
        raise StreamError(f"no stream result at {path}") from None
    return result.model_dump(exclude_unset=True)
