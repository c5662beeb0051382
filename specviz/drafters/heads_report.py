"""A training report (per-head accuracy, the loss curve, the times) read strictly: from a shipped asset, from a
heads file's metadata, or from an upload. Every field is typed and bounded (a pydantic model); anything else is
refused with one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specviz import ROOT
from specviz.errors import UserError, refusal

RECORDED = {kind: ROOT / "assets" / "heads" / f"{kind}_cpu.json" for kind in ("medusa", "eagle")}
MAX_HEADS = 8
MAX_CURVE = 20_000  # optimiser steps kept for the loss curve
MAX_BYTES = 2_000_000
MAX_KEYS = 64  # fields of one object (a report has 13)
COLLECT_DTYPES = ("float32", "bfloat16", "float16")  # the greedy answers' precisions (heads/greedy.py, torch names)
DATA = {"greedy": "the target's own greedy answers", "text": "teacher-forced source code"}  # how it was collected


class ReportError(UserError, ValueError):
    """A training report that is not what specviz writes."""


class _Fields(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)


def _Number(low: float, high: float) -> Any:
    return Annotated[float, Field(ge=low, le=high)]


def _Integer(low: int, high: int) -> Any:
    return Annotated[int, Field(ge=low, le=high)]


_ACCURACIES = Annotated[list[_Number(0.0, 1.0)], Field(max_length=MAX_HEADS, fail_fast=True)]


class _Point(_Fields):
    step: _Integer(1, 10**9)
    epoch: _Integer(1, 10**6)
    loss: _Number(0.0, 1e6)


class _Report(_Fields):
    kind: Literal["medusa", "eagle"] = "medusa"
    heads: _Integer(1, MAX_HEADS)
    top1: _ACCURACIES
    top5: _ACCURACIES
    train_tokens: _Integer(0, 10**9)
    heldout_tokens: _Integer(0, 10**9)
    vocabulary: _Integer(0, 10**7)
    collect_seconds: _Number(0.0, 1e7)
    train_seconds: _Number(0.0, 1e7)
    data: Literal[tuple(DATA)] = "text"  # reports from before the greedy data were all teacher-forced
    collect_dtype: Literal[COLLECT_DTYPES] = "float32"  # reports from before the field: float32 answers
    curve: Annotated[list[_Point], Field(max_length=MAX_CURVE, fail_fast=True)] = []
    where: Annotated[str, Field(max_length=4096)] = ""  # the machine and pair it was measured on (shown, escaped)


def check_report(data: Any) -> dict[str, Any]:
    """The report, each field checked, and its heads agreeing with its kind and accuracies; raises ReportError."""
    if not isinstance(data, dict):
        raise ReportError("a training report is a JSON object")
    try:
        report = _Report.model_validate(data).model_dump()
    except ValidationError as exc:
        words = {"float_type": "{where} must be a finite number, got {got}"}
        raise ReportError(refusal(exc, _Report, "the report", words)) from None
    if report["kind"] == "eagle" and report["heads"] != 1:
        raise ReportError(f"heads must be between 1 and 1 for an EAGLE head, got {report['heads']}")
    for name in ("top1", "top5"):
        if len(report[name]) != report["heads"]:
            raise ReportError(f"{name} must list one accuracy per head ({report['heads']})")
    return {**report, "where": report["where"][:200]}


def load_report(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"cannot read {path.name}: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise ReportError(f"{path.name} is larger than {MAX_BYTES // 1_000_000} MB")
    try:
        data = json.loads(raw.decode("utf-8"), object_hook=_few_fields)
    except ReportError:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError, int()'s digit limit
        raise ReportError(f"{path.name} is not JSON: {exc}"[:300]) from exc
    return check_report(data)


def _few_fields(obj: dict) -> dict:
    if len(obj) > MAX_KEYS:  # each unknown field would be an error of its own
        raise ReportError(f"an object has {len(obj)} fields; the limit is {MAX_KEYS}")
    return obj
