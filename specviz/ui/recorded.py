"""Recorded results every page opens on before its first run (docs/DESIGN.md, "Recorded results"): the lab's
batch, the Lossless page's distributions, the guided experiments' runs; and the banner that says so."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import streamlit as st

from specviz import markup
from specviz.lessons import experiments, lab, recorded
from specviz.lessons.lossless import Distributions
from specviz.traces.trace import Trace, TraceError, load_trace

from .files import recorded_traces, traces_dir
from .state import page_state

log = logging.getLogger(__name__)


def _directory(variable: str, default: str) -> Path:
    """A folder of recorded results: the environment variable's, else beside the recorded traces (assets/<default>;
    a test that moves the traces with SPECVIZ_TRACES_DIR moves these too, so "no recorded runs" means none)."""
    return Path(os.environ.get(variable) or traces_dir().parent / default)


def _stamp(directory: Path) -> tuple:
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.json"))) if directory.is_dir() else ()


@st.cache_resource(show_spinner=False)
def _first(directory: str, kind: str, stamp: tuple):
    """The first file of the folder that loads (damaged ones are logged and skipped)."""
    loader = {"lab": recorded.load_lab, "lossless": recorded.load_lossless}[kind]
    for name, _ in stamp:
        try:
            return loader(Path(directory) / name)
        except (OSError, recorded.RecordedError) as exc:
            log.warning("skipping recorded %s result %s: %s", kind, name, exc)
    return None


@st.cache_resource(show_spinner=False)
def _experiment_traces(directory: str, stamp: tuple) -> dict[str, Trace]:
    found = {}
    for name, _ in stamp:
        try:
            found[Path(name).stem] = load_trace(Path(directory) / name)
        except (OSError, TraceError) as exc:
            log.warning("skipping recorded experiment %s: %s", name, exc)
    return found


def recorded_lab() -> recorded.LabBatch | None:
    directory = _directory("SPECVIZ_LAB_DIR", "lab")
    return _first(str(directory), "lab", _stamp(directory))


def recorded_lossless() -> recorded.LosslessRecording | None:
    directory = _directory("SPECVIZ_LOSSLESS_DIR", "lossless")
    return _first(str(directory), "lossless", _stamp(directory))


def experiment_traces() -> dict[str, Trace]:
    """The guided experiments' recorded runs (assets/experiments/<id>.json), by experiment id."""
    directory = _directory("SPECVIZ_EXPERIMENTS_DIR", "experiments")
    return _experiment_traces(str(directory), _stamp(directory))


def recorded_banner(what: str, origin: str, button: str, tool: str = "") -> None:
    """Says that the page shows a recorded result, whose, and how to replace it; the tool that recorded it (a script
    or a command line) under its expander."""
    st.info(
        f"**Recorded result** — {what}: {origin}. Press **{button}** to compute your own.", icon=":material/history:"
    )
    if tool:
        how_recorded(tool)


def trace_banner(what: str, trace: Trace, button: str) -> None:
    """recorded_banner for a recorded run: its origin in words, the script that recorded it under the expander."""
    recorded_banner(what, trace_origin(trace), button, markup.note_words(trace.note or "")[1])


def recording_line(found: recorded.Recorded, precision: object) -> str:
    """A lab or lossless recording's pair, machine, precision and date (the script that wrote it goes apart)."""
    return f"{markup.md(found.pair)}, {markup.recorded_on(found.machine, precision, found.when)}"


def how_recorded(command: str, note: str = "", title: str = markup.HOW_RECORDED) -> None:
    """A command line or a script, under its expander: never in the learner's sentence (issue 55)."""
    with st.expander(title):
        st.code(command, language="bash")
        if note:
            st.caption(note)


def its_prompt(trace: Trace) -> str:
    """The recorded run's own prompt, said beside it: the prompt box above holds another until you pick this one."""
    return f"its prompt “{markup.md(lab.short(str(trace.prompt), 90))}”"


def shown_name(experiment_id: str) -> str:
    """How an experiment is named on screen: its page and its number there (the id is internal)."""
    found = next((e for e in experiments.EXPERIMENTS if e.id == experiment_id), None)
    if found is None:
        return "an earlier experiment"
    return f"{experiments.PAGE_TITLES[found.page]}, experiment {experiments.for_page(found.page).index(found) + 1}"


def shown_note(note: str) -> str:
    """A recording's note with the experiment it names as shown_name does ('guided experiment “<id>”')."""
    return re.sub(r"guided experiment “([^”]*)”", lambda m: f"guided experiment {shown_name(m.group(1))}", note)


def trace_origin(trace: Trace) -> str:
    """Which pair, which processor, and the recording's note (the experiments' notes name the machine and date)."""
    names = trace.pair if isinstance(trace.pair, dict) else {}
    note = markup.note_words(trace.note or "")[0] or "no note"
    unnamed = "" if markup.note_where(note)[0] else " (the recording names no machine or date)"
    return (
        f"{markup.md(names.get('target', '?'))} ← {markup.md(names.get('draft', '?'))} on "
        f"{markup.md(names.get('device', '?'))}, {markup.md(names.get('dtype', '?'))}; "
        f"{markup.md(shown_note(note))}{unnamed}"
    )


def lab_to_show(page: str) -> list[lab.LabRun] | None:
    """The page's batch; before any, the recorded one, with its banner."""
    state = page_state(page)
    if state.result:
        return state.result
    batch = recorded_lab()
    if batch is None:
        return None
    precision = next((r.trace.pair.get("dtype") for r in batch.runs if isinstance(r.trace.pair, dict)), None)
    line = recording_line(batch.recorded, precision)
    recorded_banner(markup.counted(len(batch.runs), "run"), line, "Run the batch", batch.recorded.by)
    return list(batch.runs)


def lossless_to_show(page: str) -> Distributions | None:
    """The page's p and q; before any, the recorded ones, with their banner (the context they were computed on)."""
    state = page_state(page)
    if state.result is not None:
        return state.result
    found = recorded_lossless()
    if found is None:
        return None
    context = markup.md(lab.short(found.prompt + found.prefix, 80))
    d = found.distributions  # recorded with top-k, so that only its support is stored; a run uses the sidebar's
    what = f"p and q after “{context}” (temperature {d.temperature:g}, top-k {d.top_k}; yours: the sidebar's settings)"
    recorded_banner(what, recording_line(found.recorded, d.precision), "Compute p and q", found.recorded.by)
    return found.distributions


def race_recording() -> Trace | None:
    """A recorded race: the Race page's first guided experiment's run, else the first recorded run that timed
    plain decoding."""
    found = experiment_traces()
    for name in ("identical", *found):
        if name in found and found[name].baseline_summary is not None:
            return found[name]
    return next((t for _, t in recorded_traces() if t.baseline_summary is not None), None)


def recorded_points() -> list[tuple[str, Trace]]:
    """The recorded runs that timed plain decoding, for the Theory page before this session has any."""
    runs = [(f"recorded: {name}", t) for name, t in recorded_traces()]
    runs += [(f"recorded: {shown_name(name)}", t) for name, t in experiment_traces().items()]
    return [(label, t) for label, t in runs if t.baseline_summary is not None]
