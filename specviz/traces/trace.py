"""Whole runs saved as versioned JSON, and read back strictly: a trace file may come from anyone.

The events themselves are in events.py (re-exported here); check.py holds the field types and the checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from specviz.decoding.config import (
    GAMMA_LIMIT,
    MAX_ALTERNATIVES,
    MAX_NEW_TOKENS_LIMIT,
    MAX_TREE_NODES,
    Schedule,
    SpecConfig,
)
from specviz.decoding.events import (  # noqa: F401 - the events are read and written here, and importable from here
    TRACE_FORMAT,
    TRACE_VERSION,
    DraftedToken,
    DraftSource,
    Event,
    FinishReason,
    Method,
    NextSource,
    RoundEvent,
    RunSummary,
    TokenEvent,
    TokenProb,
    Trace,
    TreeToken,
    Verdict,
    decode_rate,
)
from specviz.drafters import all_sources
from specviz.errors import UserError, refusal

from . import check
from .check import Float, Int, Many, Record, Str


class TraceError(UserError, ValueError):
    """A trace file that is not ours, is from an unknown version, or is damaged."""


# --- reading: every field typed and bounded (pydantic), then the whole checked for agreement (check.py) ----------

_ID = Int(0, check.MAX_TOKEN_ID - 1)
_PROB = Float(0.0, 1.0 + check.PROB_SLACK)
_UNIT = Float(0.0, 1.0)
_SECONDS = Float(0.0, check.MAX_SECONDS)
_COUNT = Int(0, MAX_NEW_TOKENS_LIMIT * GAMMA_LIMIT)
_TOKEN = Record(TokenProb, {"id": _ID, "text": Str(check.MAX_TOKEN_CHARS), "prob": _PROB})
_TOP = Many(_TOKEN, check.MAX_TOP)
_CANDIDATE = {  # a drafted token, an alternative or a tree node
    "id": _ID,
    "text": Str(check.MAX_TOKEN_CHARS),
    "q": _PROB,
    "p": _PROB,
    "ratio": _UNIT,
    "u": _UNIT | None,
    "verdict": Verdict,
}
_DRAFTED = Record(DraftedToken, {**_CANDIDATE, "from_lookahead": bool})
_TREE = Record(TreeToken, {**_CANDIDATE, "parent": Int(-1, GAMMA_LIMIT * (MAX_ALTERNATIVES + 1))})
_CACHE = Int(0, check.MAX_CACHE)
_ROUND = Record(
    RoundEvent,
    {
        "index": Int(0, MAX_NEW_TOKENS_LIMIT - 1),
        "position": Int(0, MAX_NEW_TOKENS_LIMIT - 1),
        "gamma": Int(0, GAMMA_LIMIT),
        "drafted": Many(_DRAFTED, GAMMA_LIMIT),
        "n_accepted": Int(0, GAMMA_LIMIT),
        "rejection_index": Int(0, GAMMA_LIMIT - 1) | None,
        "next_token": _TOKEN,
        "next_source": NextSource,
        "top_p": _TOP,
        "top_q": _TOP,
        "top_residual": _TOP,
        "appended": Many(_ID, GAMMA_LIMIT + 1, min_len=1),
        "target_cache_before": _CACHE,
        "target_cache_after": _CACHE,
        "draft_cache_before": _CACHE,
        "draft_cache_after": _CACHE,
        "draft_seconds": _SECONDS,
        "verify_seconds": _SECONDS,
        "draft_forwards": Int(0, GAMMA_LIMIT),
        "elapsed": _SECONDS,
        "bookkeeping_seconds": _SECONDS,
        "alternatives": Many(_DRAFTED, MAX_ALTERNATIVES),
        "draft_source": Literal[("", *all_sources())],  # the registered drafters' sources
        "tree": Many(_TREE, MAX_TREE_NODES),
        "choice_seconds": _SECONDS,
    },
)
_STEP = Record(
    TokenEvent, {"index": Int(0, MAX_NEW_TOKENS_LIMIT - 1), "token": _TOKEN, "seconds": _SECONDS, "elapsed": _SECONDS}
)
_SUMMARY = Record(
    RunSummary,
    {
        "method": Method,
        "token_ids": Many(_ID, MAX_NEW_TOKENS_LIMIT),
        "text": Str(check.MAX_TEXT_CHARS),
        "new_tokens": Int(0, MAX_NEW_TOKENS_LIMIT),
        "rounds": Int(0, MAX_NEW_TOKENS_LIMIT),
        "drafted": _COUNT,
        "accepted": _COUNT,
        "acceptance_rate": _UNIT,
        "mean_accepted_per_round": Float(0.0, GAMMA_LIMIT),
        "seconds": _SECONDS,
        "prefill_seconds": _SECONDS,
        "tokens_per_second": Float(0.0, 1e12),
        "finish_reason": FinishReason,
        "draft_seconds": _SECONDS,
        "verify_seconds": _SECONDS,
        "draft_forwards": _COUNT,
        "bookkeeping_seconds": _SECONDS,
    },
)
# Settings: typed here, then SpecConfig.validate checks what they mean. Unknown keys are dropped and missing ones
# keep SpecConfig's defaults, so traces from before a setting existed still load.
_CONFIG = Record(
    SpecConfig,
    {
        "gamma": Int(1, GAMMA_LIMIT),
        "schedule": Schedule,
        "gamma_max": Int(1, GAMMA_LIMIT),
        "draft_confidence": _UNIT,
        "temperature": Float(0.0, 1e6),
        "top_k": Int(0, check.MAX_TOKEN_ID),
        "top_p": _UNIT,
        "seed": Int(0, 2**64 - 1),
        "max_new_tokens": Int(1, MAX_NEW_TOKENS_LIMIT),
        "drafter": Str(check.MAX_NAME_CHARS),  # SpecConfig.validate: a registered name
        "ngram_size": Int(1, 8),
        "lookahead": Int(0, GAMMA_LIMIT),
        "alternatives": Int(0, MAX_ALTERNATIVES),
        "record_top": Int(0, check.MAX_TOP),
        "fuse_prompt": bool,
    },
    lenient=True,
)
_NAME = Str(check.MAX_PAIR_CHARS)
_TRACE = Record(
    Trace,
    {
        "config": Annotated[_CONFIG, AfterValidator(SpecConfig.validate)],  # a ConfigError reads "config: <message>"
        "pair": Annotated[dict[_NAME, _NAME], Field(max_length=check.MAX_PAIR_ENTRIES)],
        "prompt": Str(check.MAX_PROMPT_CHARS),
        "prompt_ids": Many(_ID, check.MAX_PROMPT_IDS, min_len=1),
        "rounds": Many(_ROUND, MAX_NEW_TOKENS_LIMIT),
        "summary": _SUMMARY,
        "baseline": Many(_STEP, MAX_NEW_TOKENS_LIMIT),
        "baseline_summary": _SUMMARY | None,
        "note": Str(check.MAX_NOTE_CHARS),
    },
)
_READER = TypeAdapter(_TRACE)


def trace_from_json(text: str | bytes) -> Trace:
    """A trace from the text of a file anyone may have made: it loads only if every field has its type and range
    and the parts agree as in a recorded run; else TraceError says, in one line, which field and why."""
    try:
        data = check.parse_json(text)
    except check.Refused as exc:
        raise TraceError(str(exc)) from None
    return trace_from_data(data)


def trace_from_data(data: Any) -> Trace:
    """A trace from parsed JSON (check.parse_json's bounds already applied, e.g. to a file that holds several
    traces): the same checks as trace_from_json."""
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        raise TraceError('not a specviz trace: the file has no "format": "specviz-trace" field')
    if type(data.get("version")) is not int or data["version"] != TRACE_VERSION:  # true == 1.0 == 1 in Python
        raise TraceError(
            f"trace version {check.show(data.get('version'))} is not supported "
            f"(this specviz reads version {TRACE_VERSION})"
        )
    body = {k: v for k, v in data.items() if k not in ("format", "version")}
    try:
        trace = _READER.validate_python(body)
    except ValidationError as exc:
        raise TraceError(f"damaged trace: {refusal(exc, _TRACE, 'the trace')}") from None
    try:
        check.check_trace(trace)
    except check.Refused as exc:
        raise TraceError(f"inconsistent trace: {exc}") from None
    return trace


def save_trace(trace: Trace, path: str | Path) -> None:
    Path(path).write_text(trace.to_json(), encoding="utf-8")


def load_trace(source: str | Path | IO[bytes]) -> Trace:
    """A trace from a path or an open binary file, of which at most one byte more than a trace may hold is read."""
    if hasattr(source, "read"):
        return trace_from_json(source.read(check.MAX_FILE_BYTES + 1))
    with Path(source).open("rb") as f:
        return trace_from_json(f.read(check.MAX_FILE_BYTES + 1))
