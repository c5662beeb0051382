"""A training report (per-head accuracy, the loss curve, the times) read strictly: from a shipped asset, from a
heads file's metadata, or from an upload. Every field is typed and bounded; anything else is refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specviz import ROOT
from specviz.errors import UserError

RECORDED = {kind: ROOT / "assets" / "heads" / f"{kind}_cpu.json" for kind in ("medusa", "eagle")}
MAX_HEADS = 8
MAX_CURVE = 20_000  # optimiser steps kept for the loss curve
MAX_BYTES = 2_000_000
COLLECT_DTYPES = ("float32", "bfloat16", "float16")  # the greedy answers' precisions (heads/greedy.py, torch names)
DATA = {"greedy": "the target's own greedy answers", "text": "teacher-forced source code"}  # how it was collected


class ReportError(UserError, ValueError):
    """A training report that is not what specviz writes."""


def _number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReportError(f"{name} must be a finite number, got {value!r}"[:200])
    if not low <= value <= high:
        raise ReportError(f"{name} must be between {low:g} and {high:g}, got {value:g}")
    return float(value)


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReportError(f"{name} must be an integer, got {value!r}"[:200])
    return int(_number(value, name, low, high))


def check_report(data: Any) -> dict[str, Any]:
    """The report, with only the known fields, each checked; raises ReportError."""
    if not isinstance(data, dict):
        raise ReportError("a training report is a JSON object")
    kind = data.get("kind", "medusa")
    if kind not in ("medusa", "eagle"):
        raise ReportError(f"kind must be 'medusa' or 'eagle', got {kind!r}"[:200])
    heads = _integer(data.get("heads"), "heads", 1, 1 if kind == "eagle" else MAX_HEADS)
    accuracy = {}
    for name in ("top1", "top5"):
        values = data.get(name)
        if not isinstance(values, list) or len(values) != heads:
            raise ReportError(f"{name} must list one accuracy per head ({heads})")
        accuracy[name] = [_number(v, f"{name}[{i}]", 0.0, 1.0) for i, v in enumerate(values)]
    data_kind = data.get("data", "text")  # reports from before the greedy data were all teacher-forced
    if data_kind not in DATA:
        raise ReportError(f"data must be one of {', '.join(DATA)}, got {data_kind!r}"[:200])
    collect_dtype = data.get("collect_dtype", "float32")  # reports from before the field: float32 answers
    if collect_dtype not in COLLECT_DTYPES:
        raise ReportError(f"collect_dtype must be one of {', '.join(COLLECT_DTYPES)}, got {collect_dtype!r}"[:200])
    curve = data.get("curve", [])
    if not isinstance(curve, list) or len(curve) > MAX_CURVE:
        raise ReportError(f"curve must be a list of at most {MAX_CURVE} steps")
    checked_curve = []
    for i, point in enumerate(curve):
        if not isinstance(point, dict):
            raise ReportError(f"curve[{i}] must be an object")
        checked_curve.append(
            {
                "step": _integer(point.get("step"), f"curve[{i}].step", 1, 10**9),
                "epoch": _integer(point.get("epoch"), f"curve[{i}].epoch", 1, 10**6),
                "loss": _number(point.get("loss"), f"curve[{i}].loss", 0.0, 1e6),
            }
        )
    return {
        "kind": kind,
        "heads": heads,
        **accuracy,
        "train_tokens": _integer(data.get("train_tokens"), "train_tokens", 0, 10**9),
        "heldout_tokens": _integer(data.get("heldout_tokens"), "heldout_tokens", 0, 10**9),
        "vocabulary": _integer(data.get("vocabulary"), "vocabulary", 0, 10**7),
        "collect_seconds": _number(data.get("collect_seconds"), "collect_seconds", 0.0, 1e7),
        "train_seconds": _number(data.get("train_seconds"), "train_seconds", 0.0, 1e7),
        "data": data_kind,
        "collect_dtype": collect_dtype,
        "curve": checked_curve,
        "where": str(data.get("where", ""))[:200],  # the machine and pair it was measured on (shown, escaped)
    }


def load_report(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"cannot read {path.name}: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise ReportError(f"{path.name} is larger than {MAX_BYTES // 1_000_000} MB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ReportError(f"{path.name} is not JSON: {exc}"[:300]) from exc
    return check_report(data)
