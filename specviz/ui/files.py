"""Files the app reads and writes: the style sheet, example prompts, recorded runs, verify-cost curves,
and traces a user downloads or uploads."""

from __future__ import annotations

import io
import logging
import os
import time
from pathlib import Path

import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from specviz import ASSETS
from specviz.decoding.config import ConfigError
from specviz.lessons import prompts, theory
from specviz.markup import md
from specviz.traces.trace import Trace, TraceError, load_trace

from .server import visitor
from .state import key, page_state
from .uploads import keep_upload, release_upload, upload_refusal

log = logging.getLogger(__name__)

PROMPTS_FILE = ASSETS / "prompts.json"
CSS_FILE = ASSETS / "style.css"


def traces_dir() -> Path:
    """Recorded runs for the instant first screen (SPECVIZ_TRACES_DIR overrides, for tests)."""
    return Path(os.environ.get("SPECVIZ_TRACES_DIR") or ASSETS / "traces")


def curves_dir() -> Path:
    """Where the benchmark writes its verify-cost curves (SPECVIZ_CURVES_DIR overrides, for tests)."""
    return Path(os.environ.get("SPECVIZ_CURVES_DIR") or ASSETS)


def verify_curves() -> tuple[dict[str, dict], list[str]]:
    """The curves in curves_dir() by device (verify_curve_<device>.json), and the names of the files that
    are not one. Read on every run, not cached: they are small, and a new benchmark shows at once."""
    curves: dict[str, dict] = {}
    damaged: list[str] = []
    for path in sorted(curves_dir().glob("verify_curve_*.json")):
        curve = theory.load_verify_curve(path)
        if curve is None:
            damaged.append(path.name)
        else:
            curves[path.stem.removeprefix("verify_curve_")] = curve
    return curves, damaged


def inject_css() -> None:
    st.html(f"<style>{CSS_FILE.read_text(encoding='utf-8')}</style>")


@st.cache_data(show_spinner=False)
def load_prompts() -> dict[str, list[str]]:
    """assets/prompts.json: {"category": [prompt, ...]}, through the loader the bench uses."""
    try:
        return prompts.load_prompts(PROMPTS_FILE)
    except (OSError, ConfigError) as exc:
        log.warning("could not read %s: %s", PROMPTS_FILE, exc)
        return {"code": ["Write a Python function that reverses a string."]}


@st.cache_resource(show_spinner=False)
def _recorded(directory: str, stamp: tuple) -> list[tuple[str, Trace]]:
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            found.append((path.stem.replace("_", " "), load_trace(path)))
        except (OSError, TraceError) as exc:
            log.warning("skipping recorded trace %s: %s", path, exc)
    return found


def recorded_traces() -> list[tuple[str, Trace]]:
    """Recorded runs (assets/traces/*.json), loaded once with trace.load_trace; damaged files are skipped."""
    directory = traces_dir()
    if not directory.is_dir():
        return []
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.json")))
    return _recorded(str(directory), stamp)


def trace_download(trace: Trace, page: str, label: str = "Download this run (JSON)") -> None:
    name = f"specviz-{trace.summary.method}-{trace.summary.new_tokens}tok-{int(time.time())}.json"
    st.download_button(
        label,
        data=trace.to_json(),
        file_name=name,
        mime="application/json",
        key=key(page, "download"),
        on_click="ignore",
        help="Save the run; upload it later to replay it without any model.",
    )


def trace_upload(page: str) -> Trace | None:
    """A newly uploaded trace (once per file), or None. A bad file gives st.error with the reason, and is let go:
    its bytes leave the server and its uploader is emptied (ui/uploads.py bounds what a visitor holds)."""
    state = page_state(page)
    uploaded = st.file_uploader(
        "Replay a saved run (.json)",
        type=["json"],
        key=key(page, f"upload{state.upload_round or ''}"),  # a new key empties the uploader of a refused file
        help="A file from a Download button. Replays without loading any model.",
    )
    if not isinstance(uploaded, UploadedFile):  # none, or a file Streamlit has already let go
        state.upload_id = None
        if state.upload_error:  # the last file's refusal, until the next upload
            st.error(state.upload_error)
        return None
    if state.upload_id == uploaded.file_id:  # read already: a large file is not parsed again on each rerun
        return None
    state.upload_id, state.upload_error = uploaded.file_id, None
    who = visitor()
    trace, why = None, upload_refusal(who, uploaded.size)
    if why is None:
        try:
            trace = load_trace(io.BytesIO(uploaded.getvalue()))
        except TraceError as exc:
            why = md(exc, 600)  # the message may quote the file
    if trace is None:
        release_upload(uploaded.file_id)
        state.upload_round += 1
        state.upload_error = f"This file cannot be replayed: {why}"
        st.rerun()  # drawn again with an empty uploader (a new key) and the reason under it
    keep_upload(uploaded.file_id, uploaded.size, who)
    return trace
