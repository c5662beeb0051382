"""What a page shows right then, as the guided experiments' answers read it (lessons/answers.py, issue 55).

A `Screen` holds the values a page renders (the live run, the batch, the sliders, the recording it shows), so that an
answer computed from it cannot disagree with the table or the metrics beside it. A recording is named by `Made`:
the machine, the precision and the date it was made on, never "this machine". The comparisons say better, worse
or about the same with a tolerance named here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specviz.runs import speedup
from specviz.traces.trace import Trace

from .advice import compared

SPEED_TOLERANCE = 0.05  # two speeds within 5% of each other are "about the same" (advice.ABOUT)
POINTS = 0.03  # two acceptance rates within 3 points are "about the same"
NOTE = re.compile(r", on (?P<machine>.+), (?P<date>\d{4}-\d\d-\d\d)")  # lessons/recorded.py's recorded_line


@dataclass(frozen=True)
class Made:
    """Where a recording was made: the answer quotes it as a recording, never as this machine's."""

    machine: str
    precision: str
    date: str

    @property
    def words(self) -> str:
        when = f" on {self.date}" if self.date else ""  # a stream's file names no date
        return f"on the recording, made on {self.machine} at {self.precision}{when}"


def precision_of(pair: object) -> str:
    """The target's precision a run names in its pair ("float32", "bfloat16"), or "an unnamed precision"."""
    names = pair if isinstance(pair, dict) else {}
    return str(names.get("dtype") or "an unnamed precision")


def made_of(trace: Trace | None) -> Made | None:
    """A recorded run's origin, from its note (recorded_line's words) and its pair; None if the note names none."""
    found = NOTE.search(trace.note or "") if trace is not None else None
    if found is None:
        return None
    return Made(found["machine"], precision_of(trace.pair), found["date"])


def made_at(machine: str, when: str, precision: str) -> Made:
    """A recording named by its machine and its date and time (lessons/recorded.py's Recorded, a stream's pair)."""
    return Made(machine, precision, when.split(" ")[0].split("T")[0])


@dataclass(frozen=True)
class Screen:
    """The numbers a page shows right then. Step through and Race: `trace`, the run shown (live once an experiment's
    run finished), and `recordings`, the experiments' recorded runs by id. Acceptance lab: `runs`, the batch shown.
    Theory and Lossless: `values`, the widgets' values, and `data` (the measured curve; the samples' result).
    Heads, Batching, Learning: `data`, the result shown. `made`: the recording `runs` or `data` is, None when live."""

    trace: Trace | None = None
    recordings: Mapping[str, Trace] = field(default_factory=dict)
    runs: tuple = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    data: Any = None
    made: Made | None = None


def pct(x: float) -> str:
    return f"{x:.0%}"


def times(x: float) -> str:
    return f"{x:.2f}×"


def rate_against(mine: float, theirs: float) -> str:
    """ "higher", "lower" or "about the same" (within POINTS)."""
    if abs(mine - theirs) <= POINTS:
        return "about the same"
    return "higher" if mine > theirs else "lower"


def speed_words(trace: Trace) -> str:
    """Who won a run that timed plain decoding, with its Speed-up as the page shows it."""
    measured = speedup(trace)
    if measured is None:
        return "Plain decoding was not timed, so no speed-up was measured: tick Also time plain decoding."
    verdict = compared(measured, 1.0, SPEED_TOLERANCE)
    if verdict == "better":
        return f"Speculation beat plain decoding: Speed-up {times(measured)}."
    if verdict == "worse":
        return f"Plain decoding won: Speed-up {times(measured)}; the box under the run says why."
    return f"About as fast as plain decoding: Speed-up {times(measured)}."


def live(trace: Trace) -> str:
    """How a live run is named: measured now, at its precision."""
    return f"yours, measured now at {precision_of(trace.pair)}"
