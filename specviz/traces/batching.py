"""Reading a batching result (python -m specviz bench --batch writes them; assets/batching_<device>.json ships one):
bounded parsing, typed fields, caps. Anything else is refused with one line naming the field, so the Batching page
can trust every number it draws (docs/DESIGN.md, "Batching").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specviz.decoding.batch import MAX_BATCH
from specviz.decoding.config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT
from specviz.errors import UserError

FORMAT = "specviz-batching"
VERSION = 1
MAX_FILE_BYTES = 1 << 20  # a real result is about 10 kB
MAX_ROWS = 32  # batch sizes in one result
MAX_CURVE_POINTS = 256
MAX_CURVE_TOKENS = 65_536  # n of T(n): the GPU check goes to 4096
MAX_SECONDS = 86_400.0
MAX_TEXT = 200  # names, versions, dates
MAX_PROMPTS = 10_000
MAX_PROMPT_TOKENS = 8192
TEXT_FIELDS = ("device", "device_name", "target", "draft", "dtype", "draft_quantized", "torch", "transformers")
ROW_SECONDS = (
    "plain_seconds",
    "speculative_seconds",
    "curve_step_seconds",
    "curve_verify_seconds",
    "target_step_seconds",
    "verify_seconds",
    "draft_step_seconds",
)
ROW_RATES = (
    "plain_tokens_per_second",
    "speculative_tokens_per_second",
    "measured_speedup",
    "predicted_speedup",
    "predicted_speedup_batch_shapes",
)


class BatchingFileError(UserError, ValueError):
    """A batching result that cannot be used; the message names the field."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise BatchingFileError(f"not a usable batching result: {message}")


def _integer(value: Any, name: str, low: int, high: int) -> int:
    expect(isinstance(value, int) and not isinstance(value, bool), f"{name} must be a whole number")
    expect(low <= value <= high, f"{name} must be between {low} and {high}, got {value}")
    return value


def _number(value: Any, name: str, low: float, high: float, *, open_low: bool = True) -> float:
    expect(isinstance(value, (int, float)) and not isinstance(value, bool), f"{name} must be a number")
    expect(math.isfinite(value), f"{name} must be finite")
    expect((value > low if open_low else value >= low) and value <= high, f"{name} is out of range ({value})")
    return float(value)


def _text(value: Any, name: str) -> str:
    expect(isinstance(value, str) and len(value) <= MAX_TEXT, f"{name} must be a text of at most {MAX_TEXT} chars")
    return value


def _no_constant(name: str) -> Any:
    raise BatchingFileError(f"not a usable batching result: {name} is not a number")


def parse(data: bytes | str) -> Any:
    expect(len(data) <= MAX_FILE_BYTES, f"the file is over {MAX_FILE_BYTES >> 10} kB")
    try:
        return json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, BatchingFileError):
            raise
        raise BatchingFileError(f"not a usable batching result: not JSON ({exc.__class__.__name__})") from None


def check_curve(curve: Any) -> dict:
    expect(isinstance(curve, dict), "curve must be an object")
    tokens, seconds = curve.get("tokens"), curve.get("seconds")
    expect(isinstance(tokens, list) and isinstance(seconds, list), "curve.tokens and curve.seconds must be arrays")
    expect(2 <= len(tokens) <= MAX_CURVE_POINTS, f"curve must have 2 to {MAX_CURVE_POINTS} points")
    expect(len(tokens) == len(seconds), "curve.tokens and curve.seconds must have the same length")
    tokens = [_integer(n, "curve.tokens", 1, MAX_CURVE_TOKENS) for n in tokens]
    expect(all(a < b for a, b in zip(tokens, tokens[1:], strict=False)), "curve.tokens must increase")
    seconds = [_number(t, "curve.seconds", 0.0, MAX_SECONDS) for t in seconds]
    return {"tokens": tokens, "seconds": seconds}


def check_row(row: Any, gamma: int) -> dict:
    expect(isinstance(row, dict), "every row must be an object")
    out: dict[str, Any] = {"batch": _integer(row.get("batch"), "rows.batch", 1, MAX_BATCH)}
    out["tokens"] = _integer(row.get("tokens"), "rows.tokens", 1, MAX_BATCH * MAX_NEW_TOKENS_LIMIT)
    out["rounds"] = _integer(row.get("rounds"), "rows.rounds", 1, MAX_NEW_TOKENS_LIMIT)
    out["tokens_per_round"] = _number(row.get("tokens_per_round"), "rows.tokens_per_round", 0.0, gamma + 1.0)
    expect(out["tokens_per_round"] >= 1.0, "rows.tokens_per_round must be at least 1")
    for name in ROW_SECONDS:
        out[name] = _number(row.get(name), f"rows.{name}", 0.0, MAX_SECONDS)
    for name in ROW_RATES:
        out[name] = _number(row.get(name), f"rows.{name}", 0.0, 1e9)
    identical = row.get("greedy_identical")
    expect(identical is None or isinstance(identical, bool), "rows.greedy_identical must be true, false or null")
    out["greedy_identical"] = identical
    return out


def check_batching(data: Any) -> dict:
    """The checked result, with only the fields the page reads."""
    expect(isinstance(data, dict), "the top level must be an object")
    expect(data.get("format") == FORMAT, f"format must be {FORMAT!r}")
    expect(data.get("version") == VERSION, f"version must be {VERSION}")
    out: dict[str, Any] = {name: _text(data.get(name), name) for name in TEXT_FIELDS}
    out["measured_at"] = _text(data.get("measured_at"), "measured_at")
    out["threads"] = _integer(data.get("threads"), "threads", 1, 4096)
    out["gamma"] = gamma = _integer(data.get("gamma"), "gamma", 1, GAMMA_LIMIT)
    out["max_new_tokens"] = _integer(data.get("max_new_tokens"), "max_new_tokens", 1, MAX_NEW_TOKENS_LIMIT)
    out["temperature"] = _number(data.get("temperature"), "temperature", 0.0, 100.0, open_low=False)
    out["prompts"] = _integer(data.get("prompts"), "prompts", 1, MAX_PROMPTS)
    out["target_prepacked"] = data.get("target_prepacked") is True
    out["curve"] = check_curve(data.get("curve"))
    rows = data.get("rows")
    expect(isinstance(rows, list) and 1 <= len(rows) <= MAX_ROWS, f"rows must be an array of 1 to {MAX_ROWS} rows")
    out["rows"] = [check_row(row, gamma) for row in rows]
    batches = [row["batch"] for row in out["rows"]]
    expect(all(a < b for a, b in zip(batches, batches[1:], strict=False)), "rows.batch must increase")
    even = data.get("break_even_batch")
    expect(even is None or even in batches, "break_even_batch must be null or one of the rows' batch sizes")
    out["break_even_batch"] = even
    return out


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
