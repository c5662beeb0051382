"""Where a number comes from, in words: a recording names its machine, precision and date; a live number says it was
measured on this machine now; the command or script that made a recording goes under "How this was recorded"
(issue 55), never in the learner's sentence. Also the acceptance rate of a run that drafted nothing."""

from __future__ import annotations

import re

from specviz.traces.trace import Trace

from .base import md

HOW_RECORDED = "How this was recorded"
LIVE = "measured on this machine now"
NOTHING_DRAFTED = "nothing drafted"

# the tail of a recording's note that names the tool: ", by scripts/record_assets.py", " with scripts/x.py",
# " with python -m specviz bench ..."
_TOOL = re.compile(r"[,;]?\s+(?:by|with)\s+((?:\S*scripts/\S+\.py|(?:\S*/)?python\S* -m specviz)\b.*)$")


def note_words(note: str) -> tuple[str, str]:
    """A recording's note split into its words and the tool that wrote it ('' when it names none)."""
    found = _TOOL.search(note)
    if found is None:
        return note, ""
    return note[: found.start()], found.group(1)


def recorded_on(machine: object, precision: object, when: object, plain: bool = False) -> str:
    """'recorded on <machine>, <precision>, <date>': each part markdown-escaped (plain: as it is, for a table's
    cell); a part the file lacks is said so."""
    shown = str if plain else md
    parts = [shown(x) if x not in (None, "", "?") else "(not recorded)" for x in (machine, precision)]
    date = str(when).replace("T", " ")[:10] if when not in (None, "", "?") else ""
    return f"recorded on {parts[0]}, {parts[1]}, " + (shown(date) if date else "date not recorded")


_NOTE_WHERE = re.compile(r"\bon (?P<machine>[^,]+), (?P<when>\d{4}-\d{2}-\d{2})")


def trace_origin_words(trace: Trace, live: bool, plain: bool = False) -> str:
    """Where a run's numbers were measured: this session's run now, or its recording's machine (from the note the
    recording scripts write: '..., on <machine>, <date> ...'), precision and date."""
    if live:
        return LIVE
    names = trace.pair if isinstance(trace.pair, dict) else {}
    machine, when = note_where(trace.note or "")
    return recorded_on(machine or names.get("device"), names.get("dtype"), when, plain)


def note_where(note: str) -> tuple[str | None, str | None]:
    """(machine, date) from a recording's note, where it names them ('..., on <machine>, <date> ...')."""
    found = _NOTE_WHERE.search(note)
    return (found["machine"], found["when"]) if found else (None, None)


def curve_origin(curve: dict) -> str:
    """A verify-cost curve's provenance: the benchmark's file is a recording, whoever ran it."""
    return recorded_on(curve.get("device_name"), curve.get("dtype"), curve.get("measured_at"))


def length_shown(length: float | None) -> str:
    """A run's mean acceptance length (1 + accepted / drafts); '—' where it never drafted (no drafts: 0 / 0)."""
    return "—" if length is None else f"{length:.2f}"


def rate_shown(drafted: int, rate: float) -> str:
    """A run's acceptance rate (accepted / drafted) as a percentage; '—' where it drafted nothing (no rate: 0 / 0)."""
    return "—" if not drafted else f"{rate:.0%}"
