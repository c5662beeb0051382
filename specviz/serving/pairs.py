"""The model pairs every session runs on: one loader per pair, process-wide (PAIRS), and what a switch releases.

- A pair is named by its spec as the load resolves it (canonical_spec): on the CPU "auto" is the precision it picks
  there, so "auto" and "bf16" are one pair where auto means bf16, and "auto" and "cpu" one device.
- Every load is one background Job that takes the device's turn (runs.device_lock, in the asking visitor's turn, as a
  run would): no run computes while weights are read, and a load waits for the run under way.
- A switch replaces the pair: before it reads anything, the pairs no run holds are released, unless the new pair's
  need, ROOM times over, is available now (both fit with room to spare: the old one stays while the new one loads);
  once it has loaded, every other pair goes as soon as no run holds it. A pair a run holds is never released under
  it. So the process holds one pair, plus the one loading at its peak.
- Pinned pairs stay whatever is asked: on an exposed server, the ones its owner chose at start (ui/owner.py), the
  only ones a visitor can reach there.
- A failed load keeps only its message; a refusal for memory words it with the memory read when it is shown, and
  the next ask tries again once the pair would fit.
No Streamlit here: pages poll a loader.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from specviz.errors import ModelLoadError
from specviz.models.loading import PairSpec, cpu_precision, resolve_device, resolve_quantize
from specviz.models.memory import MemoryRefusal, available_memory, builtin_need
from specviz.models.precision import PRECISIONS
from specviz.models.sources import BUILTIN
from specviz.progress import Progress
from specviz.runs import Cancelled, device_lock

from .jobs import Job, describe_error, start_job

ROOM = 2.0  # a held pair stays while another loads only if the new one's need, this many times over, is available
TINY_WEIGHT_ENV = "SPECVIZ_TINY_WEIGHT_MB"  # the tiny pair holds this many MB more (a real pair's weight, for tests)
TINY_WEIGHT_LIMIT = 16_384

LoadPair = Callable[[Any, Progress], Any]  # load(spec, progress) -> ModelPair
Key = tuple[Any, str]  # (canonical spec, SPECVIZ_PAIR override)
LoaderState = Literal["loading", "ready", "failed", "released"]


def canonical_spec(spec: Any) -> Any:
    """The spec as its load resolves it, so that two names of one pair are one pair: on the CPU the device "cpu",
    "auto" the precision it picks on this CPU and the draft's quantization decided; off the CPU the precision is the
    GPU's whatever was asked ("auto"). A spec the load would refuse stays as it is (the load says why)."""
    if not isinstance(spec, PairSpec):
        return spec
    try:
        device = resolve_device(spec.device)
        quantize = resolve_quantize(spec.quantize_draft, device) and spec.draft is not None
        precision = cpu_precision(spec.precision, device)
    except ModelLoadError:
        return spec
    if precision is None:
        return replace(spec, precision="auto", quantize_draft=quantize)
    return replace(spec, device="cpu", precision=precision.name, quantize_draft=quantize)


def estimated_need(spec: Any) -> int | None:
    """About what a (canonical) spec's pair holds once loaded, where that is known before anything is read: the
    built-in pair on the CPU. None elsewhere (a switch then releases the old pair before it loads)."""
    if not isinstance(spec, PairSpec) or spec.device != "cpu" or (spec.target, spec.draft) != (BUILTIN, BUILTIN):
        return None
    return builtin_need(PRECISIONS[spec.precision], bool(spec.quantize_draft))


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def release_memory() -> None:
    """Collect the pairs just let go, now, and give their pages back to the system (glibc's malloc_trim)."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def tiny_weight_bytes() -> int:
    """SPECVIZ_TINY_WEIGHT_MB as bytes (0 unless a whole number of MB up to TINY_WEIGHT_LIMIT)."""
    value = os.environ.get(TINY_WEIGHT_ENV, "").strip()
    return int(value) << 20 if value.isascii() and value.isdigit() and int(value) <= TINY_WEIGHT_LIMIT else 0


def load_real_or_tiny(override: str) -> LoadPair:
    """models.load_pair, or models.tiny.tiny_pair() for override "tiny" (tests and quick demos: SPECVIZ_PAIR=tiny),
    which then holds SPECVIZ_TINY_WEIGHT_MB more of filled memory: a stand-in for a real pair's weights, so that a
    test can see in the server's memory how many pairs it holds."""
    if override == "tiny":

        def tiny(spec, progress: Progress) -> Any:
            from specviz.models.tiny import tiny_pair

            progress("building the tiny random pair", 0.5)
            pair = tiny_pair()
            pair.tiny_weight = torch.ones(tiny_weight_bytes() // 4)  # written, so its pages are resident
            return pair

        return tiny
    from specviz.models.loading import load_pair

    return load_pair


Hook = Callable[["PairLoader"], None]


class PairLoader:
    """One pair's load: a Job (a worker thread) that waits for the device's turn in its visitor's turn, calls
    `before` (the registry makes room), loads with progress (message, fraction), then calls `after`. It holds the
    pair until the registry releases it; `users` counts the runs that hold it (PairRegistry.lease)."""

    def __init__(
        self,
        spec,
        override: str = "",
        load: LoadPair | None = None,
        visitor: str = "",
        before: Hook | None = None,
        after: Hook | None = None,
    ):
        self.spec = spec
        self.override = override
        self.message = "starting"
        self.fraction = 0.0
        self.pair = None
        self.exception: BaseException | None = None
        self._error: str | None = None
        self.users = 0
        self.retired = False  # to go once no run holds it
        self.released = False
        self.started = time.monotonic()
        self.finished_at: float | None = None
        self._load_pair = load or load_real_or_tiny(override)
        self._before, self._after = before, after
        self._done = threading.Event()
        self.job = start_job("load-pair", self._work, visitor=visitor)

    @property
    def state(self) -> LoaderState:
        if not self._done.is_set():
            return "loading"
        if self.released:
            return "released"
        return "ready" if self.pair is not None else "failed"

    @property
    def error(self) -> str | None:
        """Why the load failed, in one line; a refusal for memory names the memory available now."""
        if isinstance(self.exception, MemoryRefusal):
            return self.exception.describe()
        return self._error

    def refusal_lifted(self) -> bool:
        """A refusal for memory that would no longer hold (the memory read now)."""
        return isinstance(self.exception, MemoryRefusal) and not self.exception.holds()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def _progress(self, message: str, fraction: float) -> None:
        self.message = message
        self.fraction = min(1.0, max(0.0, float(fraction)))

    def _waiting(self, seconds: float) -> None:
        self.job.on_wait(seconds)
        self.message = f"waiting for the device: a run is under way ({seconds:.0f} s)"

    def _device(self) -> torch.device:
        return torch.device("cpu") if self.override == "tiny" else resolve_device(self.spec.device)

    def _work(self, job: Job) -> None:
        try:
            lock = device_lock(self._device())
            lock.acquire(job.cancel, self._waiting)
            try:
                self._progress("starting", 0.0)
                if self._before is not None:
                    self._before(self)
                self.pair = self._load_pair(self.spec, self._progress)
                self._progress("ready", 1.0)
            finally:
                lock.release()
        except NotImplementedError:
            self._error = "loading this pair is not implemented yet in this build of specviz (models.load_pair)"
        except Cancelled:
            self._error = "the load was stopped while it waited for the device"
        except BaseException as exc:  # noqa: BLE001 - shown to the user as one line, never a traceback
            self.exception, self._error = exc, describe_error(exc)
        finally:
            self.finished_at = time.monotonic()
            if self._after is not None:
                self._after(self)
            self._done.set()


NOT_OFFERED = "this server holds only the pairs its owner chose at start: pick one of those in the sidebar."


@dataclass
class Refused:
    """A pair this server does not load: failed at once, no job, no slot (what the pages read of a loader)."""

    spec: Any
    override: str
    error: str
    state: LoaderState = "failed"
    pair: Any = None
    message: str = "refused"
    fraction: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def wait(self, timeout: float | None = None) -> bool:
        return True


@dataclass
class Lease:
    """A run's hold on a loaded pair: the registry never releases it until every lease on it is let go."""

    pair: Any
    loader: PairLoader = field(repr=False)
    registry: PairRegistry = field(repr=False)
    released: bool = False

    def release(self) -> None:
        self.registry.let_go(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PairRegistry:
    """Every session's model pairs, one loader per (canonical spec, override), process-wide: see the module's
    docstring. Concurrent asks for one pair get one loader; a failed loader never holds a slot (it is kept aside for
    its message until asked again with retry_failed, or until a refusal for memory no longer holds)."""

    def __init__(
        self,
        load: LoadPair | None = None,
        failures_kept: int = 16,
        room: float = ROOM,
        need: Callable[[Any], int | None] = estimated_need,
        available: Callable[[], int] = available_memory,
    ):
        self.failures_kept = failures_kept
        self.room = room
        self._load = load
        self._need = need
        self._available = available
        self.pinned: frozenset[Key] = frozenset()
        self.only_pinned = False  # an exposed server without custom pairs: nothing else may load
        self._slots: dict[Key, PairLoader] = {}  # loading or loaded
        self._failed: dict[Key, PairLoader] = {}  # failed: their message only (no models)
        self._resolved: dict[Key, Key] = {}  # a spec as asked ("auto") -> the key its load resolved, while held
        self._guard = threading.Lock()

    def key(self, spec, override: str = "") -> Key:
        """The pair's name: its spec as the load resolves it. A spec asked with "auto" keeps the resolution of the
        pair it loaded while that pair is held: auto weighs the memory available, which that pair itself now takes."""
        resolved = self._resolved.get((spec, override))
        if resolved is not None and resolved in self._slots:
            return resolved
        return canonical_spec(spec), override

    def pin(self, specs: Iterable, override: str = "", only: bool = False) -> None:
        """The pairs that stay whatever anyone asks (an exposed server's owner's; none for an empty list); with
        `only`, no other pair loads (an ask for one is refused)."""
        pinned = frozenset(self.key(spec, override) for spec in specs)  # resolving "auto" may take a while
        with self._guard:
            self.pinned, self.only_pinned = pinned, only

    def loader(
        self, spec, override: str = "", retry_failed: bool = False, start: bool = True, visitor: str = ""
    ) -> PairLoader | Refused | None:
        """This pair's loader (loading, ready or failed). With `start`, a pair not held is loaded now (a switch, in
        `visitor`'s turn on the device) and a pair on its way out is kept again; without, None for a pair not held."""
        key = self.key(spec, override)
        with self._guard:
            self._sweep()
            failed = self._failed.get(key)
            if failed is not None and start and (retry_failed or failed.refusal_lifted()):
                del self._failed[key]
                failed = None
            if failed is not None:
                return failed
            found = self._slots.get(key)
            if found is not None or start:
                self._resolved[(spec, override)] = key
            if found is None and start and self.only_pinned and key not in self.pinned:
                return Refused(key[0], override, NOT_OFFERED)
            if found is None and start:
                found = PairLoader(key[0], override, self._load, visitor, self._make_room, self._loaded)
                self._slots[key] = found
            elif found is not None and start and found.retired:  # switched back to it while a run still held it
                found.retired = False
                self._retire_others(found)
                if self._sweep():
                    release_memory()  # under the guard: rare, and the pair is already unreachable
            return found

    def retry(self, spec, override: str = "") -> None:
        """Forget a failed loader: the next ask builds a new one."""
        with self._guard:
            self._failed.pop(self.key(spec, override), None)

    def lease(self, spec, override: str = "") -> Lease | None:
        """Hold this pair for a run (let it go when the run ends); None unless it is loaded."""
        with self._guard:
            found = self._slots.get(self.key(spec, override))
            if found is None or found.state != "ready":
                return None
            found.users += 1
            return Lease(found.pair, found, self)

    def let_go(self, lease: Lease) -> None:
        """A run's lease ends (twice is harmless); a pair on its way out goes once no run holds it."""
        with self._guard:
            if lease.released:
                return
            lease.released, lease.pair = True, None
            lease.loader.users -= 1
            dropped = self._sweep()
        if dropped:
            release_memory()

    def held(self) -> list[PairLoader]:
        """Every loader with a slot: loading, or holding its pair."""
        with self._guard:
            return list(self._slots.values())

    def loaded(self) -> list[PairLoader]:
        """The loaders whose pair is held now (ready, including those on their way out that a run still holds)."""
        with self._guard:
            return [loader for loader in self._slots.values() if loader.state == "ready"]

    def release_all(self) -> None:
        """Let every pair go as soon as no run holds it, pins and all (a fresh start: tests, a server stopping)."""
        with self._guard:
            self.pinned, self.only_pinned = frozenset(), False
            for loader in self._slots.values():
                loader.retired = True  # a load under way goes as it ends
            self._failed.clear()
            dropped = self._sweep()
        if dropped:
            release_memory()

    def _retire_others(self, keep: PairLoader) -> None:
        for key, loader in self._slots.items():
            if loader is not keep and key not in self.pinned and loader.state == "ready":
                loader.retired = True

    def _make_room(self, loader: PairLoader) -> None:
        """Before a load reads anything (its device turn held): the pairs no run holds go, unless this one's need,
        `room` times over, is available now."""
        with self._guard:
            others = [k for k, held in self._slots.items() if held is not loader and held.state == "ready"]
            if not [k for k in others if k not in self.pinned]:
                return
            need = None if loader.override else self._need(loader.spec)
            if need is not None and need * self.room <= self._available():
                return
            self._retire_others(loader)
            dropped = self._sweep()
        if dropped:
            release_memory()

    def _loaded(self, loader: PairLoader) -> None:
        """A load ended: a failed one leaves its slot (kept for its message); a loaded one replaces the others."""
        with self._guard:
            key = next((k for k, held in self._slots.items() if held is loader), None)
            if key is None:
                return
            if loader.pair is None:
                del self._slots[key]
                self._failed[key] = loader
            else:
                self._retire_others(loader)
            dropped = self._sweep()
        if dropped:
            release_memory()

    def _sweep(self) -> int:
        """Drop the retired pairs no run holds (their loaders let the pair go); keep the newest failures only.
        Returns how many pairs went."""
        dropped = 0
        for key, loader in list(self._slots.items()):
            if loader.retired and loader.users <= 0 and key not in self.pinned:
                del self._slots[key]
                loader.pair, loader.released = None, True
                dropped += 1
        while len(self._failed) > self.failures_kept:
            del self._failed[next(iter(self._failed))]
        for asked, key in list(self._resolved.items()):
            if key not in self._slots:
                del self._resolved[asked]
        return dropped


PAIRS = PairRegistry()
