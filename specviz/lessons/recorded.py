"""Recorded results the Acceptance lab and the Lossless page open on (assets/lab/*.json, assets/lossless/*.json),
written by scripts/record_assets.py on the built-in pair and read back as strictly as a trace
(docs/DESIGN.md, "Recorded results").

A lab file: {"format": "specviz-lab-batch", "version": 1, "recorded": {...}, "runs": [{"category", "trace"}]},
each trace read by trace.trace_from_data. A lossless file: {"format": "specviz-lossless", "version": 1,
"recorded": {...}, "prompt", "prefix", "temperature", "top_k", "top_p", "context_tokens", "vocab_size",
"tokens": [{"id", "text", "p", "q"}]}: every token where p or q is above 0 (recorded with top-k, so that list is
short and exact); p and q are 0 elsewhere.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from specviz.errors import UserError, refusal
from specviz.traces import check
from specviz.traces.check import Fields, Float, Int, Many, Record, Refused, Str
from specviz.traces.trace import TraceError, trace_from_data

from .lab import LabRun
from .lossless import Distributions

LAB_FORMAT = "specviz-lab-batch"
LOSSLESS_FORMAT = "specviz-lossless"
VERSION = 1
MAX_LAB_RUNS = 64
MAX_CATEGORY_CHARS = 64
MAX_SUPPORT = 4096  # tokens of a recorded distribution (top-k of p and of q: at most 2k)
MAX_VOCAB = 1 << 20
SUM_SLACK = 1e-3  # p and q each sum to 1 within this (float32 sums over a few thousand entries)


class RecordedError(UserError, ValueError):
    """A recorded-results file that is not ours, is from another version, or is damaged."""


@dataclass(frozen=True)
class Recorded:
    """Where a recorded result comes from: the page says it until the user runs."""

    pair: str  # "target ← draft"
    machine: str  # the processor, as the benchmark names it
    when: str  # ISO date and time (UTC)
    by: str  # the script that wrote it


_RECORDED = Record(Recorded, {"pair": Str(check.MAX_PAIR_CHARS), "machine": Str(256), "when": Str(64), "by": Str(256)})


@dataclass(frozen=True)
class LabBatch:
    recorded: Recorded
    runs: tuple[LabRun, ...]


@dataclass(frozen=True)
class LosslessRecording:
    recorded: Recorded
    prompt: str
    prefix: str
    distributions: Distributions


def recorded_line(recorded: Recorded) -> str:
    """One line for the page: which pair, which machine, when, by what."""
    return f"{recorded.pair}, on {recorded.machine}, {recorded.when} UTC, by {recorded.by}"


def _parse(text: str | bytes, fmt: str) -> dict:
    try:
        data = check.parse_json(text)
    except Refused as exc:
        raise RecordedError(str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise RecordedError(f'not a recorded result: the file has no "format": "{fmt}" field')
    if type(data.get("version")) is not int or data["version"] != VERSION:
        raise RecordedError(
            f"version {check.show(data.get('version'))} is not supported (this specviz reads {VERSION})"
        )
    return data


class _Run(Fields):
    category: Str(MAX_CATEGORY_CHARS)
    trace: Any  # trace_from_data reads it


class _Lab(Fields):
    format: str  # format and version: checked first, by _parse
    version: int
    recorded: _RECORDED
    runs: Many(_Run, MAX_LAB_RUNS, min_len=1)


def _checked(model: Any, data: dict, words: dict[str, str]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Refused(refusal(exc, model, "the file", words)) from None


def lab_from_json(text: str | bytes) -> LabBatch:
    """A recorded lab batch; RecordedError says in one line what is wrong with a damaged file."""
    data = _parse(text, LAB_FORMAT)
    shapes = {"runs": f"an array of 1 to {MAX_LAB_RUNS} runs", "runs[]": "an object with a category and a trace"}
    try:
        lab = _checked(_Lab, data, shapes)
        found = []
        for i, run in enumerate(lab.runs):
            try:
                trace = trace_from_data(run.trace)
            except TraceError as exc:
                raise Refused(f"runs[{i}].trace: {exc}") from None
            found.append(LabRun(run.category, trace.prompt, trace))
    except Refused as exc:
        raise RecordedError(f"damaged lab batch: {exc}") from None
    return LabBatch(lab.recorded, tuple(found))


def lab_to_json(recorded: Recorded, runs: list[LabRun]) -> str:
    body = [{"category": r.category, "trace": json.loads(r.trace.to_json())} for r in runs]
    return json.dumps({"format": LAB_FORMAT, "version": VERSION, "recorded": recorded.__dict__, "runs": body})


_PROB = Float(0.0, 1.0 + check.PROB_SLACK)


class _Token(Fields):
    id: Int(0, MAX_VOCAB - 1)  # and below vocab_size: checked below
    text: Str(check.MAX_TOKEN_CHARS)
    p: _PROB
    q: _PROB


class _Lossless(Fields):
    format: str
    version: int
    recorded: _RECORDED
    prompt: Str(check.MAX_PROMPT_CHARS)
    prefix: Str(check.MAX_PROMPT_CHARS)
    temperature: Float(1e-3, 100.0)
    top_k: Int(0, MAX_VOCAB)
    top_p: Float(1e-6, 1.0)
    context_tokens: Int(1, check.MAX_PROMPT_IDS)
    vocab_size: Int(2, MAX_VOCAB)
    tokens: Many(_Token, MAX_SUPPORT, min_len=1)


def _support(tokens: tuple[_Token, ...], vocab: int) -> None:
    """Every token in the vocabulary, once; p and q each sum to 1."""
    for i, token in enumerate(tokens):
        if token.id >= vocab:
            raise Refused(f"tokens[{i}].id must be between 0 and {vocab - 1}, got {token.id}")
    if len({token.id for token in tokens}) != len(tokens):
        raise Refused("tokens: an id appears twice")
    for name in ("p", "q"):
        total = sum(getattr(token, name) for token in tokens)
        if not math.isclose(total, 1.0, abs_tol=SUM_SLACK):
            raise Refused(f"tokens: {name} sums to {total:.6f}, not 1")


def lossless_from_json(text: str | bytes) -> LosslessRecording:
    """A recorded pair of next-token distributions; RecordedError says what is wrong with a damaged file."""
    data = _parse(text, LOSSLESS_FORMAT)
    shapes = {"tokens": f"an array of 1 to {MAX_SUPPORT} tokens", "tokens[]": "an object with id, text, p and q"}
    try:
        found = _checked(_Lossless, data, shapes)
        _support(found.tokens, found.vocab_size)
    except Refused as exc:
        raise RecordedError(f"damaged lossless recording: {exc}") from None
    full_p, full_q = torch.zeros(found.vocab_size), torch.zeros(found.vocab_size)
    index = torch.tensor([token.id for token in found.tokens])
    full_p[index] = torch.tensor([token.p for token in found.tokens])
    full_q[index] = torch.tensor([token.q for token in found.tokens])
    dist = Distributions(
        full_p / full_p.sum(),
        full_q / full_q.sum(),
        {token.id: token.text for token in found.tokens},
        found.context_tokens,
        found.temperature,
        found.top_k,
        found.top_p,
    )
    return LosslessRecording(found.recorded, found.prompt, found.prefix, dist)


def lossless_to_json(recorded: Recorded, prompt: str, prefix: str, dist: Distributions, token_text) -> str:
    """The distributions' support (every id where p or q is above 0) with each token's text from token_text(id)."""
    support = torch.nonzero((dist.p > 0) | (dist.q > 0)).flatten().tolist()
    if len(support) > MAX_SUPPORT:
        raise RecordedError(f"{len(support)} tokens have p or q above 0; record with a top-k (at most {MAX_SUPPORT})")
    tokens = [{"id": i, "text": token_text(i), "p": float(dist.p[i]), "q": float(dist.q[i])} for i in support]
    body = {
        "format": LOSSLESS_FORMAT,
        "version": VERSION,
        "recorded": recorded.__dict__,
        "prompt": prompt,
        "prefix": prefix,
        "temperature": dist.temperature,
        "top_k": dist.top_k,
        "top_p": dist.top_p,
        "context_tokens": dist.context_tokens,
        "vocab_size": int(dist.p.numel()),
        "tokens": tokens,
    }
    return json.dumps(body, ensure_ascii=False)


def _read(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(check.MAX_FILE_BYTES + 1)


def load_lab(path: str | Path) -> LabBatch:
    return lab_from_json(_read(Path(path)))


def load_lossless(path: str | Path) -> LosslessRecording:
    return lossless_from_json(_read(Path(path)))
