"""Background runs for the app: one worker thread per run, so a page stays responsive while it runs.

A Job waits for the pair's lock (several tabs share one pair: runs never overlap), runs a function
that reports progress through the job, and keeps the result or a one-line error a user can read.
Stop sets `job.cancel`; the engine checks it between rounds. No Streamlit here: pages poll a job.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from .errors import UserError
from .runs import Cancelled

log = logging.getLogger(__name__)

JobState = Literal["starting", "waiting", "running", "done", "cancelled", "failed"]


OOM_ADVICE = ("the GPU ran out of memory. The memory was released; pick a smaller model pair in the sidebar "
              "(or the built-in pair on CPU), or lower max new tokens, and run again.")


def is_out_of_memory(exc: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


def release_device_memory() -> None:
    """Give cached CUDA blocks back after an out-of-memory error, so the next (smaller) run can start."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def describe_error(exc: BaseException) -> str:
    """One line a user can act on; unexpected errors are logged with their traceback, never shown."""
    if isinstance(exc, UserError):
        return str(exc)
    if is_out_of_memory(exc):
        release_device_memory()
        return OOM_ADVICE
    log.exception("unexpected error in a specviz run", exc_info=exc)
    return (f"unexpected error ({exc.__class__.__name__}: {exc}). The app is still usable; "
            "try other settings, and see the server log for details.")


@dataclass
class Job:
    """One run in a worker thread. The worker appends to `events`; the page reads them (appends are atomic)."""
    name: str
    cancel: threading.Event = field(default_factory=threading.Event)
    state: JobState = "starting"
    events: list = field(default_factory=list)
    progress: str = ""                  # a short line, e.g. "run 3 of 12"
    meta: dict = field(default_factory=dict)  # what the page needs to show a live run (prompt, config)
    fraction: float = 0.0               # progress in [0, 1], for batches
    result: Any = None
    error: str | None = None
    created: float = field(default_factory=time.monotonic)
    waited_seconds: float = 0.0
    thread: threading.Thread | None = field(default=None, repr=False)
    consumed: bool = False              # the page has taken the result

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled", "failed")

    def stop(self) -> None:
        self.cancel.set()

    def on_wait(self, seconds: float) -> None:
        """runs.exclusive calls this while another run holds the pair's lock."""
        self.state = "waiting"
        self.waited_seconds = seconds

    def on_event(self, event: Any) -> None:
        """The engine's events, as they come; the first one also means the wait is over."""
        if self.state == "waiting":
            self.state = "running"
        self.events.append(event)

    def join(self, timeout: float | None = None) -> bool:
        if self.thread is not None:
            self.thread.join(timeout)
        return self.finished


def start_job(name: str, work: Callable[[Job], Any], lock: threading.Lock | None = None,
              meta: dict | None = None) -> Job:
    """Run work(job) in a daemon thread, optionally holding `lock` (try without blocking first, then wait,
    cancellable). Work that calls runs.run_trace needs no lock here: the run takes the pair's lock itself
    and reports its wait through job.on_wait."""
    job = Job(name, meta=dict(meta or {}))

    def worker() -> None:
        if lock is not None and not lock.acquire(blocking=False):
            job.state = "waiting"
            start = time.monotonic()
            while not lock.acquire(timeout=0.2):
                job.waited_seconds = time.monotonic() - start
                if job.cancel.is_set():
                    job.state = "cancelled"
                    return
        try:
            job.state = "running"
            job.result = work(job)
            job.state = "cancelled" if job.cancel.is_set() else "done"
        except Cancelled:
            job.state = "cancelled"
        except BaseException as exc:  # noqa: BLE001 - a worker thread must never die with a traceback
            job.error = describe_error(exc)
            job.state = "failed"
        finally:
            if lock is not None:
                lock.release()

    job.thread = threading.Thread(target=worker, name=f"specviz-{name}", daemon=True)
    job.thread.start()
    return job


class PairLoader:
    """Loads one model pair in a background thread, once, and reports progress (message, fraction).

    The app keeps one loader per pair spec (st.cache_resource), so the models load once for all sessions
    and the first screen does not wait for them. `override="tiny"` returns specviz.tiny.tiny_pair()
    instead (tests and quick demos: SPECVIZ_PAIR=tiny).
    """

    def __init__(self, spec, override: str = ""):
        self.spec = spec
        self.override = override
        self.message = "starting"
        self.fraction = 0.0
        self.pair = None
        self.error: str | None = None
        self.started = time.monotonic()
        self.finished_at: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._load, name="specviz-load-pair", daemon=True)
        self._thread.start()

    @property
    def state(self) -> Literal["loading", "ready", "failed"]:
        if not self._done.is_set():
            return "loading"
        return "ready" if self.pair is not None else "failed"

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def _progress(self, message: str, fraction: float) -> None:
        self.message = message
        self.fraction = min(1.0, max(0.0, float(fraction)))

    def _load(self) -> None:
        try:
            if self.override == "tiny":
                from .tiny import tiny_pair
                self._progress("building the tiny random pair", 0.5)
                self.pair = tiny_pair()
            else:
                from .models import load_pair
                self.pair = load_pair(self.spec, progress=self._progress)
            self._progress("ready", 1.0)
        except NotImplementedError:
            self.error = "loading this pair is not implemented yet in this build of specviz (models.load_pair)"
        except BaseException as exc:  # noqa: BLE001 - shown to the user as one line, never a traceback
            self.error = describe_error(exc)
        finally:
            self.finished_at = time.monotonic()
            self._done.set()
