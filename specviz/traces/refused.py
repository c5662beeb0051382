"""Refusing a trace file: one line that names the field (check.py and tree.py raise it)."""

from __future__ import annotations

from specviz.errors import show  # noqa: F401 - the messages' way to show a value, importable from here


class Refused(ValueError):
    """Why a trace file is refused, in one line that names the field."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Refused(message)
