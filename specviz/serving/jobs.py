"""Background runs for the app: one worker thread per run, so a page stays responsive while it runs.

A Job runs a function that reports progress through the job (a run waits for its device's lock there:
runs.exclusive), and keeps the result or a one-line error a user can read. Stop sets `job.cancel`; the
engine checks it between rounds. The model pairs of every session: serving/pairs.py.
No Streamlit here: pages poll a job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from specviz.errors import UserError
from specviz.runs import VISITOR, Cancelled

log = logging.getLogger(__name__)

JobState = Literal["starting", "waiting", "running", "done", "cancelled", "failed"]
SESSION_GRACE = 2.0  # seconds a run's session may be gone (a closed tab) before the run is stopped


OOM_ADVICE = (
    "the GPU ran out of memory. The memory was released; pick a smaller model pair in the sidebar "
    "(or the built-in pair on CPU), or lower max new tokens, and run again."
)


def is_out_of_memory(exc: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


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
    return (
        f"unexpected error ({exc.__class__.__name__}: {exc}). The app is still usable; "
        "try other settings, and see the server log for details."
    )


@dataclass
class Job:
    """One run in a worker thread. The worker appends to `events`; the page reads them (appends are atomic)."""

    name: str
    cancel: threading.Event = field(default_factory=threading.Event)
    state: JobState = "starting"
    events: list = field(default_factory=list)
    progress: str = ""  # a short line, e.g. "run 3 of 12"
    meta: dict = field(default_factory=dict)  # what the page needs to show a live run (prompt, config)
    fraction: float = 0.0  # progress in [0, 1], for batches
    result: Any = None
    error: str | None = None
    created: float = field(default_factory=time.monotonic)
    waited_seconds: float = 0.0
    thread: threading.Thread | None = field(default=None, repr=False)
    consumed: bool = False  # the page has taken the result
    orphaned: bool = False  # stopped because its session went (the tab was closed)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "cancelled", "failed")

    def stop(self) -> None:
        self.cancel.set()

    def on_wait(self, seconds: float) -> None:
        """runs.exclusive calls this while another run holds the device's lock."""
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


def watch_session(job: Job, alive: Callable[[], bool], grace: float = SESSION_GRACE, every: float = 0.25) -> None:
    """Until the job finishes: once alive() has been False for `grace` seconds (its browser session is gone), stop
    it, as Stop would. A reconnect within the grace keeps it."""
    gone_since: float | None = None
    while not job.finished:
        if alive():
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since >= grace:
            job.orphaned = True
            job.stop()
            return
        time.sleep(every)


def start_job(
    name: str,
    work: Callable[[Job], Any],
    lock: threading.Lock | None = None,
    meta: dict | None = None,
    alive: Callable[[], bool] | None = None,
    visitor: str = "",
) -> Job:
    """Run work(job) in a daemon thread, optionally holding `lock` (try without blocking first, then wait,
    cancellable). Work that calls runs.run_trace needs no lock here: the run takes its device's lock itself, in
    `visitor`'s turn (runs.DeviceLock), and reports its wait through job.on_wait. With `alive` (is the session that
    started it still there?), the run is stopped once its session has gone (watch_session)."""
    job = Job(name, meta=dict(meta or {}))

    def worker() -> None:
        VISITOR.set(visitor)  # this thread's own context: the device lock gives turns by visitor
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
    if alive is not None:
        threading.Thread(target=watch_session, args=(job, alive), name=f"specviz-{name}-watch", daemon=True).start()
    return job
