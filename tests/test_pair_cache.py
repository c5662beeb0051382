"""The process-wide pair registry (jobs.PairRegistry) and the one lock per device (runs.exclusive), with a fake
load function and stand-in pairs: no Streamlit and no model needed.

The issue's bug: a two-entry loader cache let other presets or failed custom paths evict the built-in pair,
the next run built a second copy with its own lock, and two runs overlapped on the CPU with double the memory.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest
import torch

from specviz.errors import ModelLoadError
from specviz.models.loading import PairSpec
from specviz.runs import Cancelled, device_key, device_lock, exclusive
from specviz.serving.jobs import PairRegistry

BUILTIN = PairSpec()
OTHERS = [
    PairSpec("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    PairSpec("openai-community/gpt2-xl", "distilbert/distilgpt2"),
]
MISSING = [PairSpec("/no/such/target", None), PairSpec("/no/such/other", None)]


@dataclass
class FakePair:
    spec: PairSpec
    device: torch.device = torch.device("cpu")


class FakeLoad:
    """Counts how often each spec is built; a path under /no/such fails like a missing directory."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.built: list[PairSpec] = []
        self.guard = threading.Lock()

    def __call__(self, spec: PairSpec, progress) -> FakePair:
        progress("loading", 0.5)
        time.sleep(self.delay)
        if spec.target.startswith("/no/such"):
            raise ModelLoadError(f"The target model directory {spec.target} does not exist.")
        with self.guard:
            self.built.append(spec)
        return FakePair(spec)


def ready(registry: PairRegistry, spec: PairSpec, **kw):
    loader = registry.loader(spec, **kw)
    assert loader.wait(10)
    return loader


def test_the_issues_scenario_keeps_the_builtin_pair():
    load = FakeLoad()
    registry = PairRegistry(load=load)
    first = ready(registry, BUILTIN)
    for spec in OTHERS + MISSING:
        ready(registry, spec)
    assert registry.loader(BUILTIN) is first and first.state == "ready"
    assert load.built.count(BUILTIN) == 1
    assert [ready(registry, s).state for s in MISSING] == ["failed", "failed"]  # still failed, shown as such
    assert {loader.spec for loader in registry.loaded()} == {BUILTIN, *OTHERS}  # no slot for the failures


def test_failed_loads_never_take_a_slot_and_are_retried():
    load = FakeLoad()
    registry = PairRegistry(capacity=1, load=load)
    first = ready(registry, BUILTIN)
    for _ in range(3):
        failed = ready(registry, MISSING[0])
        assert failed.state == "failed" and "/no/such/target" in failed.error
        assert ready(registry, MISSING[0]) is failed  # shown until someone asks again
        assert ready(registry, MISSING[0], retry_failed=True) is not failed
        registry.retry(MISSING[0])
    assert registry.loader(BUILTIN) is first and load.built == [BUILTIN]


class LateSweep(PairRegistry):
    """Every load finishes just after the sweep looked: the window where a load fails between the sweep and
    the state check (seen once in CI as a failed loader that was returned but kept nowhere)."""

    def _sweep(self) -> None:
        super()._sweep()
        for loader in list(self._slots.values()):
            loader.wait(10)


def test_a_load_that_fails_after_the_sweep_is_still_kept_as_failed():
    load = FakeLoad(delay=0.2)
    registry = LateSweep(load=load)
    loading = registry.loader(MISSING[0])
    assert loading.state == "loading"
    failed = registry.loader(MISSING[0])  # failed between this call's sweep and its state check
    assert failed is loading and failed.state == "failed"
    assert registry.loader(MISSING[0]) is failed  # not silently retried
    assert registry.loader(MISSING[0], retry_failed=True) is not failed


def test_concurrent_requests_build_once():
    load = FakeLoad(delay=0.2)
    registry = PairRegistry(load=load)
    start = threading.Barrier(8)
    found = []

    def ask():
        start.wait()
        found.append(registry.loader(BUILTIN))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(found) == 8 and all(loader is found[0] for loader in found)
    assert found[0].wait(10) and load.built == [BUILTIN]


def test_eviction_takes_the_least_recently_used_idle_pair():
    load = FakeLoad()
    registry = PairRegistry(capacity=2, load=load)
    builtin = ready(registry, BUILTIN)
    ready(registry, OTHERS[0])
    registry.loader(BUILTIN)  # used again: OTHERS[0] is now the oldest
    ready(registry, OTHERS[1])
    assert {loader.spec for loader in registry.loaded()} == {BUILTIN, OTHERS[1]}
    assert registry.loader(BUILTIN) is builtin


def test_a_pair_in_use_is_never_evicted_nor_built_twice():
    load = FakeLoad()
    registry = PairRegistry(capacity=1, load=load)
    builtin = ready(registry, BUILTIN)
    lease = registry.lease(BUILTIN)
    assert lease is not None and lease.pair is builtin.pair
    refused = ready(registry, OTHERS[0])  # no room next to a pair a run holds
    assert refused.state == "failed" and "runs are using" in refused.error
    assert registry.loader(BUILTIN) is builtin
    lease.release()
    lease.release()  # twice is harmless
    assert builtin.users == 0
    assert ready(registry, OTHERS[0], retry_failed=True).state == "ready"  # now the idle pair makes room
    assert load.built == [BUILTIN, OTHERS[0]]


def test_eviction_skips_a_pair_a_run_holds():
    registry = PairRegistry(capacity=2, load=FakeLoad())
    builtin = ready(registry, BUILTIN)
    lease = registry.lease(BUILTIN)
    ready(registry, OTHERS[0])
    ready(registry, OTHERS[1])  # the built-in pair is the oldest, but in use
    assert {loader.spec for loader in registry.loaded()} == {BUILTIN, OTHERS[1]}
    assert registry.loader(BUILTIN) is builtin
    lease.release()


def test_lease_needs_a_loaded_pair():
    registry = PairRegistry(load=FakeLoad(delay=0.3))
    registry.loader(BUILTIN)
    assert registry.lease(BUILTIN) is None  # still loading
    assert registry.lease(OTHERS[0]) is None  # never asked for
    assert registry.loader(BUILTIN).wait(10)
    with registry.lease(BUILTIN) as lease:
        assert lease.loader.users == 1
    assert lease.loader.users == 0


def test_one_lock_per_device():
    assert device_key("cpu") == "cpu" and device_key(torch.device("cuda")) == "cuda:0"
    assert device_key("cuda:1") == "cuda:1"
    assert device_lock("cpu") is device_lock(torch.device("cpu"))
    assert device_lock("cuda:0") is not device_lock("cuda:1") and device_lock("cpu") is not device_lock("cuda:0")


def test_two_runs_on_two_pairs_on_one_device_never_overlap():
    """Each 'run' records when it holds the device; the second pair's run starts only after the first ends."""
    a, b = FakePair(BUILTIN), FakePair(OTHERS[0])
    spans: dict[str, tuple[float, float]] = {}
    a_inside, release_a = threading.Event(), threading.Event()
    waits = []

    def run(pair, name, hold: threading.Event | None):
        with exclusive(pair, on_wait=waits.append):
            began = time.perf_counter()
            if hold is not None:
                a_inside.set()
                hold.wait(10)
            spans[name] = (began, time.perf_counter())

    first = threading.Thread(target=run, args=(a, "a", release_a))
    first.start()
    assert a_inside.wait(10)
    second = threading.Thread(target=run, args=(b, "b", None))
    second.start()
    second.join(0.8)
    assert second.is_alive() and "b" not in spans  # b waits while a holds the CPU
    release_a.set()
    first.join(10)
    second.join(10)
    assert spans["a"][1] <= spans["b"][0]
    assert waits  # the waiting run was told it waits


def test_cancel_while_waiting_for_the_device():
    cancel = threading.Event()
    with exclusive(FakePair(BUILTIN)):
        cancel.set()
        with pytest.raises(Cancelled):
            with exclusive(FakePair(OTHERS[0]), cancel=cancel):
                pass
    with exclusive(FakePair(OTHERS[0])):  # free again
        pass
