"""Background runs for the app: one worker thread per run, so a page stays responsive while it runs.

A Job runs a function that reports progress through the job (a run waits for its device's lock there:
runs.exclusive), and keeps the result or a one-line error a user can read. Stop sets `job.cancel`; the
engine checks it between rounds. The model pairs of every session come from one PairRegistry (PAIRS).
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
from specviz.progress import Progress
from specviz.runs import VISITOR, Cancelled

log = logging.getLogger(__name__)

JobState = Literal["starting", "waiting", "running", "done", "cancelled", "failed"]
MAX_LOADED_PAIRS = 3  # pairs held in memory at once by the app (the built-in pair and two others)
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


LoadPair = Callable[[Any, Progress], Any]  # load(spec, progress) -> ModelPair


def load_real_or_tiny(override: str) -> LoadPair:
    """models.load_pair, or models.tiny.tiny_pair() for override "tiny" (tests and quick demos: SPECVIZ_PAIR=tiny)."""
    if override == "tiny":

        def tiny(spec, progress: Progress) -> Any:
            from specviz.models.tiny import tiny_pair

            progress("building the tiny random pair", 0.5)
            return tiny_pair()

        return tiny
    from specviz.models.loading import load_pair

    return load_pair


class PairLoader:
    """Loads one model pair in a background thread, once, and reports progress (message, fraction).

    The app gets its loaders from PAIRS (a PairRegistry), so the models load once for all sessions and the
    first screen does not wait for them. `users` counts the runs that hold the pair (PairRegistry.lease).
    """

    def __init__(self, spec, override: str = "", load: LoadPair | None = None):
        self.spec = spec
        self.override = override
        self.message = "starting"
        self.fraction = 0.0
        self.pair = None
        self.error: str | None = None
        self.users = 0
        self.started = time.monotonic()
        self.finished_at: float | None = None
        self._load_pair = load or load_real_or_tiny(override)
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
            self.pair = self._load_pair(self.spec, self._progress)
            self._progress("ready", 1.0)
        except NotImplementedError:
            self.error = "loading this pair is not implemented yet in this build of specviz (models.load_pair)"
        except BaseException as exc:  # noqa: BLE001 - shown to the user as one line, never a traceback
            self.error = describe_error(exc)
        finally:
            self.finished_at = time.monotonic()
            self._done.set()


class RegistryFull(UserError):
    """Every slot holds a pair that a run is using: a new pair would not fit next to them."""


@dataclass
class Lease:
    """A run's hold on a loaded pair: the registry never evicts it until every lease on it is released."""

    pair: Any
    loader: PairLoader = field(repr=False)
    guard: threading.Lock = field(repr=False)
    released: bool = False

    def release(self) -> None:
        with self.guard:
            if not self.released:
                self.released = True
                self.loader.users -= 1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PairRegistry:
    """Every session's model pairs, one loader per (spec, override), process-wide.

    - a pair is built once: concurrent requests for one spec get the same loader;
    - a failed loader never takes a slot: it is kept aside only for its message, and the next explicit
      request (`retry`, or `loader(..., retry_failed=True)` when a run asks for it) starts a new one;
    - at most `capacity` pairs stay loaded: once a new pair has loaded, the least recently used pair that no
      run holds (`lease`) is evicted, never a pair in use; when every slot is loading or in use, a new pair
      is refused (RegistryFull). While a new pair loads, the old ones are still there (a failed load evicts
      nothing).
    """

    def __init__(self, capacity: int = MAX_LOADED_PAIRS, load: LoadPair | None = None, failures_kept: int = 16):
        self.capacity = capacity
        self.failures_kept = failures_kept
        self._load = load
        self._slots: dict[tuple, PairLoader] = {}  # loading or loaded, least recently used first
        self._failed: dict[tuple, PairLoader] = {}  # failed: their message only (no models)
        self._guard = threading.Lock()

    def loader(self, spec, override: str = "", retry_failed: bool = False) -> PairLoader:
        """The started loader of this spec (loading, ready or failed), started now if there is none."""
        key = (spec, override)
        with self._guard:
            self._sweep()
            if retry_failed:
                self._failed.pop(key, None)
            if key in self._failed:
                return self._failed[key]
            found = self._slots.pop(key, None) or self._start(key)
            if found.state == "failed":  # a refusal, or a load that failed since the sweep: never a slot
                self._failed[key] = found
            else:
                self._slots[key] = found  # most recently used last
            return found

    def retry(self, spec, override: str = "") -> None:
        """Forget a failed loader: the next request builds a new one."""
        with self._guard:
            self._sweep()
            self._failed.pop((spec, override), None)

    def lease(self, spec, override: str = "") -> Lease | None:
        """Hold this spec's loaded pair for a run (release it when the run ends); None unless it is loaded."""
        with self._guard:
            self._sweep()
            found = self._slots.get((spec, override))
            if found is None or found.state != "ready":
                return None
            found.users += 1
            return Lease(found.pair, found, self._guard)

    def loaded(self) -> list[PairLoader]:
        with self._guard:
            self._sweep()
            return [loader for loader in self._slots.values() if loader.state == "ready"]

    def _sweep(self) -> None:
        """Failed loaders leave the slots; then, while more than `capacity` pairs are loaded, the least recently
        used one that no run holds goes. Only a load that succeeded evicts: one that fails leaves every pair."""
        for key, loader in list(self._slots.items()):
            if loader.state == "failed":
                del self._slots[key]
                self._failed[key] = loader
        while len(self._failed) > self.failures_kept:
            del self._failed[next(iter(self._failed))]
        ready = [k for k, loader in self._slots.items() if loader.state == "ready"]
        idle = [k for k in ready if self._slots[k].users == 0]
        for key in idle[: max(0, len(ready) - self.capacity)]:
            del self._slots[key]

    def _start(self, key: tuple) -> PairLoader:
        """A new loader; refused (failed at once) when every slot holds a pair that is loading or in use."""
        spec, override = key
        if sum(loader.state == "loading" or loader.users > 0 for loader in self._slots.values()) >= self.capacity:
            loader = PairLoader(spec, override, load=self._refuse)
            loader.wait()
            self._failed[key] = loader
            return loader
        return PairLoader(spec, override, load=self._load)

    def _refuse(self, spec, progress: Progress) -> Any:
        raise RegistryFull(
            f"this server already holds {self.capacity} model pairs that runs are using or loading; "
            "pick one of those, or try again when a run has finished"
        )


PAIRS = PairRegistry()
