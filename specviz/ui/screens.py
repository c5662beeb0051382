"""What each page shows right then, as its guided experiments' answers read it (lessons/screen.py's Screen): the same
sources the page renders from (the run it shows, the batch, the widgets' values, the result shown), read without
drawing anything, so that an answer cannot disagree with the table or the metrics beside it (issue 55)."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from specviz.lessons import lossless
from specviz.lessons.screen import Made, Screen, made_at, precision_of

from .batching import recorded_results
from .files import verify_curves
from .heads import cached_reports, recorded_reports
from .learning import recorded_stream, your_rows
from .quoted import bench_prompts
from .recorded import experiment_traces, recorded_lab, recorded_lossless
from .state import page_state, shared

THEORY_DEFAULTS = {"theory.a": 0.8, "theory.g": 4, "theory.c": 0.1}  # pages/theory.py's sliders' defaults
LOSSLESS_DEFAULTS = {"n": 50_000, "seed": 0, "broken": False, "alternatives": 0}  # ui/results.py's lossless_form


def _value(name: str, default: Any) -> Any:
    found = st.session_state.get(name)
    return default if found is None else found


def _step(page: str) -> Screen:
    trace = page_state(page).trace
    if page == "race":
        trace = trace or shared().last_with_baseline  # ui/race.py's race_to_show, without its banner
    return Screen(trace=trace, recordings=experiment_traces())


def _lab(page: str) -> Screen:
    runs = page_state(page).result
    if runs:
        return Screen(runs=tuple(runs))
    batch = recorded_lab()
    if batch is None:
        return Screen()
    made = made_at(batch.recorded.machine, batch.recorded.when, precision_of(batch.runs[0].trace.pair))
    return Screen(runs=batch.runs, made=made)


def _theory(page: str) -> Screen:
    values = {name: _value(name, default) for name, default in THEORY_DEFAULTS.items()}
    curves, _ = verify_curves()
    if not curves:
        return Screen(values=values)
    curve = curves.get(_value("theory.curve", ""), next(iter(curves.values())))
    made = made_at(curve.get("device_name", "?"), str(curve.get("measured_at", "")), curve.get("dtype", "?"))
    return Screen(values=values, data=curve, made=made)


def _lossless(page: str) -> Screen:
    dist, made = page_state(page).result, None
    if dist is None:
        found = recorded_lossless()
        if found is None:
            return Screen()
        dist, made = (
            found.distributions,
            made_at(found.recorded.machine, found.recorded.when, found.distributions.precision),
        )
    v = {name: _value(f"lossless.{name}", default) for name, default in LOSSLESS_DEFAULTS.items()}
    result = lossless.lossless_experiment(  # as ui/results.py's lossless_results draws it
        dist, n=int(v["n"]), seed=int(v["seed"]), resample_residual=not v["broken"], alternatives=int(v["alternatives"])
    )
    return Screen(data=result, made=made)


def _heads(page: str) -> Screen:
    """Per kind what heads_result shows: this session's training, the heads in use, else the recorded training."""
    trained, settings = page_state(page).result, shared().settings
    in_use = cached_reports(settings) if settings is not None else {}
    shown: dict[str, dict] = {}
    recorded = False
    for kind, report in recorded_reports().items():
        if trained and trained["kind"] == kind:
            shown[kind] = trained
        elif kind in in_use:
            shown[kind] = in_use[kind]
        elif isinstance(report, dict):
            shown[kind], recorded = report, True
    where = next((r["where"] for r in shown.values() if "where" in r), "")
    date = re.search(r"\d{4}-\d\d-\d\d", where)
    made = made_at(where.split(",")[0], date[0] if date else "", "its precision") if recorded else None
    return Screen(data=shown, made=made)


def _batching(page: str) -> Screen:
    recorded, _ = recorded_results()
    choice, mine = st.session_state.get("batching.shown"), page_state(page).result
    if (choice == "your run" or not recorded) and mine is not None:
        return Screen(data=mine)
    if not recorded:
        return Screen()
    doc = recorded.get(choice, next(iter(recorded.values())))
    return Screen(data=doc, made=made_at(doc["device_name"], str(doc.get("measured_at", "")), doc["dtype"]))


def _learning(page: str) -> Screen:
    stream = recorded_stream()
    pair = (stream or {}).get("pair", {})
    made = Made(pair.get("device", "?"), precision_of(pair), "")
    return Screen(data={"stream": stream, "bench": bench_prompts(), "yours": your_rows(page)}, made=made)


SCREENS = {
    "step": _step,
    "race": _step,
    "lab": _lab,
    "theory": _theory,
    "lossless": _lossless,
    "heads": _heads,
    "batching": _batching,
    "learning": _learning,
}


def screen_of(page: str) -> Screen:
    """What `page` shows right then, for its experiments' answers."""
    return SCREENS[page](page)
