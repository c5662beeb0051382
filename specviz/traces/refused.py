"""Refusing a trace file: one line that names the field (trace_check.py and trace_tree.py raise it)."""

from __future__ import annotations

import json
from typing import Any


class Refused(ValueError):
    """Why a trace file is refused, in one line that names the field."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Refused(message)


def show(value: Any) -> str:
    """A value for a message: short, and never a container's contents (they may be huge or deeply nested)."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
