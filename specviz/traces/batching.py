"""Reading a batching result (python -m specviz bench --batch writes them; assets/batching_<device>.json ships one):
bounded parsing, typed fields, caps. Anything else is refused with one line naming the field, so the Batching page
can trust every number it draws (docs/DESIGN.md, "Batching").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from specviz.decoding.batch import MAX_BATCH
from specviz.decoding.config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT
from specviz.errors import UserError, refusal

from .check import MAX_NOTE_CHARS, Fields, Float, Int, Many, Str

FORMAT = "specviz-batching"
VERSION = 4  # 2: ragged and min-cut rows, the gamma sweep per batch size; 3: the rows alone, own-shape timings;
# 4: every method run several times, each after its own plain run, the speed-ups and predictions their medians
VERSIONS = (2, 3, 4)  # read: an older file lacks what later versions added (None), and the page says less about it
MAX_RUNS = 10  # bench --batch-runs
MAX_FILE_BYTES = 1 << 20  # a real result is about 10 kB
MAX_ROWS = 32  # batch sizes in one result
MAX_CURVE_POINTS = 256
MAX_CURVE_TOKENS = 65_536  # n of T(n): the GPU check goes to 4096
MAX_SECONDS = 86_400.0
MAX_TEXT = 200  # names, versions, dates
MAX_PROMPTS = 10_000
MAX_PROMPT_TOKENS = 8192
MAX_KEYS = 64  # fields of one object (a row has 18)


class BatchingFileError(UserError, ValueError):
    """A batching result that cannot be used; the message names the field."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise BatchingFileError(f"not a usable batching result: {message}")


_TEXT = Str(MAX_TEXT)
_SECONDS = Annotated[float, Field(gt=0.0, le=MAX_SECONDS)]
_RATE = Annotated[float, Field(gt=0.0, le=1e9)]


class _Curve(Fields):
    tokens: Many(Int(1, MAX_CURVE_TOKENS), MAX_CURVE_POINTS, read_as=list)
    seconds: Many(_SECONDS, MAX_CURVE_POINTS, read_as=list)


class _Speculative(Fields):
    """One speculative method at one batch size (ragged at a gamma, or min-cut at the fixed one)."""

    gamma: Int(1, GAMMA_LIMIT)
    tokens: Int(1, MAX_BATCH * MAX_BATCH * MAX_NEW_TOKENS_LIMIT)
    seconds: _SECONDS
    tokens_per_second: _RATE
    rounds: Int(1, MAX_BATCH * MAX_NEW_TOKENS_LIMIT)
    tokens_per_round: Annotated[float, Field(gt=0.0, le=GAMMA_LIMIT + 1.0)]  # at most gamma + 1: below
    acceptance: Float(0.0, 1.0)
    measured_speedup: _RATE
    verify_seconds: _SECONDS | None = None  # 3: the verify at this batch's own shape, [B, gamma + 1]
    curve_verify_seconds: _SECONDS  # T(B (gamma + 1)) read off the one-row curve
    # 3: the tokens the batch committed per row per round it ran (a finished row idles until its last round)
    batch_tokens_per_round: Annotated[float, Field(gt=0.0, le=GAMMA_LIMIT + 1.0)] | None = None
    predicted_speedup: _RATE
    expected_speedup: _RATE | None = None  # from E(a, gamma): the ragged sweep only
    speedups: Many(_RATE, MAX_RUNS, min_len=1, read_as=list) | None = None  # 4: each run's; measured is their median
    predicted_speedups: Many(_RATE, MAX_RUNS, min_len=1, read_as=list) | None = None  # 4: each run's prediction


class _Engine(Fields):
    plain_tokens_per_second: _RATE
    speculative_tokens_per_second: _RATE
    measured_speedup: _RATE  # the median of speedups
    speedups: Many(_RATE, 100, min_len=1, read_as=list) | None = None  # 3: the single-row engine's, per repeat
    batched_speedups: Many(_RATE, 100, min_len=1, read_as=list) | None = None  # 3: the batched path's at B = 1


class _Alone(Fields):
    """The rows of one B, each decoded alone (B = 1), pooled."""

    tokens_per_round: Annotated[float, Field(ge=1.0, le=GAMMA_LIMIT + 1.0)]
    acceptance: Float(0.0, 1.0)


class _Row(Fields):
    batch: Int(1, MAX_BATCH)
    batches: Int(1, MAX_BATCH)
    tokens: Int(1, MAX_BATCH * MAX_BATCH * MAX_NEW_TOKENS_LIMIT)
    plain_seconds: _SECONDS
    plain_tokens_per_second: _RATE
    acceptance: Float(0.0, 1.0)
    alone: _Alone | None = None  # 3
    greedy_identical: bool | None = None  # every method's rows at this B equal to each prompt decoded alone
    curve_step_seconds: _SECONDS
    target_step_seconds: _SECONDS
    verify_seconds: _SECONDS
    draft_step_seconds: _SECONDS
    draft_catch_up_seconds: _SECONDS | None = None  # 4: the draft over two tokens per row (a round's first forward)
    ragged: _Speculative
    min_cut: _Speculative
    gammas: Many(_Speculative, GAMMA_LIMIT, min_len=1, read_as=list)
    best_gamma: Int(0, GAMMA_LIMIT)
    predicted_best_gamma: Int(0, GAMMA_LIMIT)
    single_row_engine: _Engine | None = None


class _Batching(Fields):
    format: str  # format and version: checked first
    version: int
    device: _TEXT
    device_name: _TEXT
    target: _TEXT
    draft: _TEXT
    dtype: _TEXT
    draft_quantized: _TEXT
    torch: _TEXT
    transformers: _TEXT
    measured_at: _TEXT
    threads: Int(1, 4096)
    gamma: Int(1, GAMMA_LIMIT)
    gammas: Many(Int(1, GAMMA_LIMIT), GAMMA_LIMIT, min_len=1, read_as=list)
    rows_per_batch_size: Int(1, MAX_BATCH)
    runs: Int(1, MAX_RUNS) = 1  # 4: each method's runs per batch size
    max_new_tokens: Int(1, MAX_NEW_TOKENS_LIMIT)
    temperature: Float(0.0, 100.0)
    prompts: Int(1, MAX_PROMPTS)
    prompt_tokens: Many(Int(0, MAX_PROMPT_TOKENS), MAX_PROMPTS, read_as=list) = []
    target_prepacked: bool = False
    curve: _Curve
    rows: Many(_Row, MAX_ROWS, min_len=1, read_as=list)
    break_even_batch: Int(1, MAX_BATCH) | None = None
    note: Str(MAX_NOTE_CHARS) = ""  # scripts/gpu_batching.py's, on random-weight models


def _no_constant(name: str) -> Any:
    raise BatchingFileError(f"not a usable batching result: {name} is not a number")


def parse(data: bytes | str) -> Any:
    expect(len(data) <= MAX_FILE_BYTES, f"the file is over {MAX_FILE_BYTES >> 10} kB")
    try:
        return json.loads(data, parse_constant=_no_constant, object_hook=_few_fields)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, BatchingFileError):
            raise
        raise BatchingFileError(f"not a usable batching result: not JSON ({exc.__class__.__name__})") from None


def _few_fields(obj: dict) -> dict:
    expect(len(obj) <= MAX_KEYS, f"an object has {len(obj)} fields; the limit is {MAX_KEYS}")
    return obj


def check_batching(data: Any) -> dict:
    """The checked result: each field typed and bounded (a pydantic model), then its parts checked together."""
    expect(isinstance(data, dict), "the top level must be an object")
    expect(data.get("format") == FORMAT, f"format must be {FORMAT!r}")
    expect(type(data.get("version")) is int and data["version"] in VERSIONS, f"version must be {VERSION} (or 2, 3)")
    try:
        out = _Batching.model_validate(data).model_dump()
    except ValidationError as exc:
        message = refusal(exc, _Batching, "the top level", indices=False)
        raise BatchingFileError(f"not a usable batching result: {message}") from None
    tokens, seconds = out["curve"]["tokens"], out["curve"]["seconds"]
    expect(len(tokens) == len(seconds), "curve.tokens and curve.seconds must have the same length")
    expect(2 <= len(tokens), f"curve must have 2 to {MAX_CURVE_POINTS} points")
    expect(all(a < b for a, b in zip(tokens, tokens[1:], strict=False)), "curve.tokens must increase")
    for row in out["rows"]:
        _check_row(row, out)
    batches = [row["batch"] for row in out["rows"]]
    expect(all(a < b for a, b in zip(batches, batches[1:], strict=False)), "rows.batch must increase")
    even = out["break_even_batch"]
    expect(even is None or even in batches, "break_even_batch must be null or one of the rows' batch sizes")
    return out


def _check_row(row: dict, doc: dict) -> None:
    """A row's parts agree: its sweep is the file's gammas, ragged and min-cut at the fixed gamma, the ragged entry
    one of the sweep's, best gammas among them (or 0: none pays), each round at most gamma + 1 tokens per row."""
    gamma, gammas = doc["gamma"], doc["gammas"]
    expect(gamma in gammas, "gamma must be one of gammas")
    expect([e["gamma"] for e in row["gammas"]] == gammas, "rows.gammas must be the file's gammas, in order")
    expect(row["ragged"]["gamma"] == gamma and row["min_cut"]["gamma"] == gamma, "rows.ragged and rows.min_cut: gamma")
    expect(row["ragged"] == row["gammas"][gammas.index(gamma)], "rows.ragged must be the sweep's entry at gamma")
    for name in ("best_gamma", "predicted_best_gamma"):
        expect(row[name] == 0 or row[name] in gammas, f"rows.{name} must be 0 or one of gammas")
    for entry in (*row["gammas"], row["min_cut"]):
        length = entry["tokens_per_round"]
        expect(1.0 <= length <= entry["gamma"] + 1, f"rows.tokens_per_round must be from 1 to gamma + 1, got {length}")
    if doc["version"] >= 3:  # what version 3 added is there
        engine = row["single_row_engine"]
        expect(row["alone"] is not None, "rows.alone is missing")
        expect(engine is None or None not in (engine["speedups"], engine["batched_speedups"]), "rows: speed-up lists")
        for entry in (*row["gammas"], row["min_cut"]):
            expect(None not in (entry["verify_seconds"], entry["batch_tokens_per_round"]), "rows: own-shape timings")
    if doc["version"] >= 4:  # each run's speed-up and prediction, as many as the file's runs
        for entry in (*row["gammas"], row["min_cut"]):
            runs = [len(entry[name] or ()) for name in ("speedups", "predicted_speedups")]
            expect(runs == [doc["runs"]] * 2, "rows: speedups and predicted_speedups must hold one per run")


def load_batching(path: str | Path) -> dict:
    """A checked batching result from a file; BatchingFileError when it is missing, too big or not one."""
    path = Path(path)
    try:
        size = path.stat().st_size
        expect(size <= MAX_FILE_BYTES, f"the file is over {MAX_FILE_BYTES >> 10} kB")
        data = path.read_bytes()
    except OSError as exc:
        raise BatchingFileError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return check_batching(parse(data))
