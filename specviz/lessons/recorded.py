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

from specviz.errors import UserError
from specviz.traces import check
from specviz.traces.check import Float, Int, Record, Refused, Str
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


def _fields(data: dict, names: set[str]) -> None:
    unknown, missing = sorted(data.keys() - names), sorted(names - data.keys())
    if unknown or missing:
        raise Refused(f"unknown fields {', '.join(map(check.show, unknown[:5]))}" if unknown else f"lacks {missing}")


def lab_from_json(text: str | bytes) -> LabBatch:
    """A recorded lab batch; RecordedError says in one line what is wrong with a damaged file."""
    data = _parse(text, LAB_FORMAT)
    try:
        _fields(data, {"format", "version", "recorded", "runs"})
        recorded = _RECORDED.read(data["recorded"], "recorded")
        runs = data["runs"]
        if type(runs) is not list or not 1 <= len(runs) <= MAX_LAB_RUNS:
            raise Refused(f"runs must be an array of 1 to {MAX_LAB_RUNS} runs")
        found = []
        for i, run in enumerate(runs):
            if type(run) is not dict or set(run) != {"category", "trace"}:
                raise Refused(f"runs[{i}] must be an object with a category and a trace")
            category = Str(MAX_CATEGORY_CHARS).read(run["category"], f"runs[{i}].category")
            try:
                trace = trace_from_data(run["trace"])
            except TraceError as exc:
                raise Refused(f"runs[{i}].trace: {exc}") from None
            found.append(LabRun(category, trace.prompt, trace))
    except Refused as exc:
        raise RecordedError(f"damaged lab batch: {exc}") from None
    return LabBatch(recorded, tuple(found))


def lab_to_json(recorded: Recorded, runs: list[LabRun]) -> str:
    body = [{"category": r.category, "trace": json.loads(r.trace.to_json())} for r in runs]
    return json.dumps({"format": LAB_FORMAT, "version": VERSION, "recorded": recorded.__dict__, "runs": body})


_LOSSLESS_FIELDS = {
    "prompt": Str(check.MAX_PROMPT_CHARS),
    "prefix": Str(check.MAX_PROMPT_CHARS),
    "temperature": Float(1e-3, 100.0),
    "top_k": Int(0, MAX_VOCAB),
    "top_p": Float(1e-6, 1.0),
    "context_tokens": Int(1, check.MAX_PROMPT_IDS),
    "vocab_size": Int(2, MAX_VOCAB),
}
_PROB = Float(0.0, 1.0 + check.PROB_SLACK)


def _support(tokens: Any, vocab: int) -> tuple[list[int], list[str], list[float], list[float]]:
    if type(tokens) is not list or not 1 <= len(tokens) <= MAX_SUPPORT:
        raise Refused(f"tokens must be an array of 1 to {MAX_SUPPORT} tokens")
    ids, texts, p, q = [], [], [], []
    for i, token in enumerate(tokens):
        if type(token) is not dict or set(token) != {"id", "text", "p", "q"}:
            raise Refused(f"tokens[{i}] must be an object with id, text, p and q")
        ids.append(Int(0, vocab - 1).read(token["id"], f"tokens[{i}].id"))
        texts.append(Str(check.MAX_TOKEN_CHARS).read(token["text"], f"tokens[{i}].text"))
        p.append(_PROB.read(token["p"], f"tokens[{i}].p"))
        q.append(_PROB.read(token["q"], f"tokens[{i}].q"))
    if len(set(ids)) != len(ids):
        raise Refused("tokens: an id appears twice")
    for name, values in (("p", p), ("q", q)):
        if not math.isclose(sum(values), 1.0, abs_tol=SUM_SLACK):
            raise Refused(f"tokens: {name} sums to {sum(values):.6f}, not 1")
    return ids, texts, p, q


def lossless_from_json(text: str | bytes) -> LosslessRecording:
    """A recorded pair of next-token distributions; RecordedError says what is wrong with a damaged file."""
    data = _parse(text, LOSSLESS_FORMAT)
    try:
        _fields(data, {"format", "version", "recorded", "tokens", *_LOSSLESS_FIELDS})
        recorded = _RECORDED.read(data["recorded"], "recorded")
        values = {name: kind.read(data[name], name) for name, kind in _LOSSLESS_FIELDS.items()}
        ids, texts, p, q = _support(data["tokens"], values["vocab_size"])
    except Refused as exc:
        raise RecordedError(f"damaged lossless recording: {exc}") from None
    full_p, full_q = torch.zeros(values["vocab_size"]), torch.zeros(values["vocab_size"])
    index = torch.tensor(ids)
    full_p[index], full_q[index] = torch.tensor(p), torch.tensor(q)
    dist = Distributions(
        full_p / full_p.sum(),
        full_q / full_q.sum(),
        dict(zip(ids, texts, strict=True)),
        values["context_tokens"],
        values["temperature"],
        values["top_k"],
        values["top_p"],
    )
    return LosslessRecording(recorded, values["prompt"], values["prefix"], dist)


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
