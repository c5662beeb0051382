"""Errors a user can cause. Their message is the whole explanation: the CLI prints it as one line and
exits with status 2, the app shows it in place of a traceback. Each module's own error subclasses
UserError, so a caller catches them all with one class and no module imports the others for it."""

from __future__ import annotations

import re
from typing import Annotated, Any, get_args, get_origin


class UserError(Exception):
    """A mistake a user can make (a bad setting, prompt, file or model); the message says what to do."""


class ModelLoadError(UserError, RuntimeError):
    """A pair that cannot be loaded; the message says what to do about it."""


class OutputError(UserError, OSError):
    """An output file (a trace, a benchmark's JSON) that cannot be written where the user asked."""


def show(value: object) -> str:
    """A value for a message: short, and never a container's contents (they may be huge or deeply nested)."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# How a file reader (traces, batching results, training reports) words the first error pydantic found, by its type.
REFUSALS = {
    "int_type": "{where} must be an integer, got {got}",
    "float_type": "{where} must be a number, got {got}",
    "finite_number": "{where} must be a finite number, got {got}",
    "string_type": "{where} must be a string, got {got}",
    "bool_type": "{where} must be true or false, got {got}",
    "list_type": "{where} must be an array, got {got}",
    "dict_type": "{where} must be an object, got {got}",
    "model_type": "{where} must be an object, got {got}",
    "literal_error": "{where} must be one of {expected}, got {got}",
    "range": "{where} must be {bounds}, got {got}",
    "too_long": "{where} has {length} items; it must have {min_length} to {max_length}",
    "entries": "{where} has {length} entries; the limit is {max_length}",
    "string_too_long": "{where} is {length} characters long; the limit is {max_length}",
    "string_unicode": "{where} holds an unpaired surrogate (\\ud800-\\udfff)",
    "missing": "{where} lacks the fields: {names}",
    "extra_forbidden": "{where} has unknown fields: {shown}",
    "value_error": "{where}: {error}",  # a check of our own, e.g. SpecConfig.validate's
}
BOUNDS = ("greater_than_equal", "greater_than", "less_than_equal", "less_than")
LIMITS = ("ge", "gt", "le", "min_length", "max_length")
SHAPES = ("list_type", "too_short", "too_long", "model_type", "dict_type", "missing", "extra_forbidden")


def refusal(exc: Any, model: Any, root: str, words: dict[str, str] | None = None, indices: bool = True) -> str:
    """The first error of a pydantic ValidationError that `model` raised, as one line naming the field as the messages
    always have: "rounds[3].drafted[0].q must be between 0 and 1, got 1.5" (without indices: "rows.batch ..."); `root`
    names the whole file. `words` hold a reader's own wording: a template for an error type, or what the array or the
    object at a path (its indices written []) must be, said in place of what is wrong with it."""
    errors = exc.errors(include_url=False)  # a few: every list stops at its first bad item (fail_fast)
    kind, loc, value = errors[0]["type"], errors[0]["loc"], errors[0]["input"]
    grouped = kind in ("missing", "extra_forbidden")  # with the object's other missing or unknown fields
    where, limits = _path(model, loc[:-1] if grouped else loc, indices)
    where = where or root
    words = {**REFUSALS, **(words or {})}
    if (shape := words.get(re.sub(r"\[\d+\]", "[]", where))) and kind in SHAPES:
        return f"{where} must be {shape}"
    if kind in BOUNDS or (kind == "float_type" and type(value) is int):  # the latter: too large for a float
        kind = "range"
    elif kind in ("too_long", "too_short"):
        kind = "entries" if isinstance(value, dict) else "too_long"
    names = [e["loc"][-1] for e in errors if e["type"] == kind and e["loc"] and e["loc"][:-1] == loc[:-1]]
    low, high = (_number(limits.get(name)) for name in ("ge" if "ge" in limits else "gt", "le"))
    facts = {
        "where": where,
        "got": show(value),
        "length": len(value) if isinstance(value, (str, list, dict)) else 0,
        "bounds": f"between {low} and {high}" if "ge" in limits else f"above {low} and at most {high}",
        "names": ", ".join(map(str, names)),
        "shown": ", ".join(map(show, names[:5])),
        "msg": errors[0]["msg"],
        "min_length": 0,
        **limits,
        **errors[0].get("ctx", {}),
    }
    return words.get(kind, "{where}: {msg}").format(**facts)


def _number(bound: object) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def _path(model: Any, loc: tuple, indices: bool) -> tuple[str, dict[str, object]]:
    """(the field at a pydantic error's loc as the messages write it: fields joined by dots, [i] for an item, ['k']
    for a mapping's value; the bounds and lengths its type declares), walking the model's annotations along loc."""
    where, kind = "", model
    for key in loc:
        kind = _bare(kind)[0]
        if key == "[key]":  # the mapping's key itself
            where = where.rpartition("[")[0] + " key"
        elif isinstance(key, int):
            where, kind = where + f"[{key}]" * indices, get_args(kind)[0]
        elif key in getattr(kind, "model_fields", {}):
            where, kind = f"{where}.{key}".lstrip("."), kind.model_fields[key].rebuild_annotation()
        else:
            where, kind = f"{where}[{show(key)}]", get_args(kind)[-1]
    return where, _bare(kind)[1]


def _bare(kind: Any) -> tuple[Any, dict[str, object]]:
    """A type without its Annotated[...] and `| None`, and the constraints they held (a Field's in its .metadata)."""
    limits: dict[str, object] = {}
    while get_origin(kind) is Annotated or type(None) in get_args(kind):
        for item in getattr(kind, "__metadata__", ()):
            for constraint in getattr(item, "metadata", [item]):
                limits.update((name, getattr(constraint, name)) for name in LIMITS if hasattr(constraint, name))
        kind = get_args(kind)[0]
    return kind, limits
