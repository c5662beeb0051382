"""The process-wide pair registry (serving/pairs.py) and the one lock per device (runs.exclusive), with a fake load
function and stand-in pairs: no Streamlit and no model needed.

Issue 56: any visitor could make the server hold three pairs at once for the life of the process (bf16 -> fp32 ->
int8 took its VmHWM from 4.78 to 12.51 to 14.74 GiB), "auto" and "bf16" were two pairs, and the loads took no turn on
the device. Now a switch replaces the pair (the old one is let go before the new one loads unless both fit with room
to spare), every load is a job in the device's turn, and an exposed server's owner's pairs are pinned.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, replace

import pytest
import torch

from specviz.errors import ModelLoadError
from specviz.models import memory
from specviz.models.choice import auto_choice
from specviz.models.loading import PairSpec
from specviz.runs import Cancelled, device_key, device_lock, exclusive
from specviz.serving import pairs
from specviz.serving.pairs import NOT_OFFERED, PairRegistry, canonical_spec

BUILTIN = PairSpec()
OTHERS = [
    PairSpec("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    PairSpec("openai-community/gpt2-xl", "distilbert/distilgpt2"),
]
MISSING = [PairSpec("/no/such/target", None), PairSpec("/no/such/other", None)]
GiB = 1 << 30


@dataclass(eq=False)
class FakePair:
    spec: PairSpec
    device: torch.device = torch.device("cpu")


class FakeLoad:
    """Counts how often each spec is built and which earlier pairs were still alive as each load began; a path under
    /no/such fails like a missing directory, and `refuse` raises a refusal for memory."""

    def __init__(self, delay: float = 0.0, refuse: memory.MemoryRefusal | None = None):
        self.delay = delay
        self.refuse = refuse
        self.built: list[PairSpec] = []
        self.made: list[weakref.ref] = []
        self.alive_at_start: list[int] = []
        self.guard = threading.Lock()

    def __call__(self, spec: PairSpec, progress) -> FakePair:
        self.alive_at_start.append(self.alive())
        progress("loading", 0.5)
        time.sleep(self.delay)
        if self.refuse is not None:
            raise self.refuse
        if spec.target.startswith("/no/such"):
            raise ModelLoadError(f"The target model directory {spec.target} does not exist.")
        pair = FakePair(spec)
        with self.guard:
            self.built.append(spec)
            self.made.append(weakref.ref(pair))
        return pair

    def alive(self) -> int:
        return sum(ref() is not None for ref in self.made)


@pytest.fixture(autouse=True)
def collections(monkeypatch) -> list[int]:
    """How often the registry collected let-go pairs (gc.collect takes most of a second beside torch: not here, where
    a FakePair is freed by its last reference going)."""
    calls: list[int] = []
    monkeypatch.setattr(pairs, "release_memory", lambda: calls.append(1))
    return calls


def ready(registry: PairRegistry, spec: PairSpec, **kw):
    loader = registry.loader(spec, **kw)
    assert loader.wait(10)
    return loader


def tight(load: FakeLoad, need: int = 4 * GiB, free: int = 6 * GiB) -> PairRegistry:
    """A registry where a new pair's need, twice over, is not available: a switch lets the old pair go first."""
    return PairRegistry(load=load, need=lambda spec: need, available=lambda: free)


def test_auto_is_the_precision_it_picks_so_auto_and_that_precision_are_one_pair():
    picked = auto_choice().precision
    assert canonical_spec(BUILTIN) == canonical_spec(replace(BUILTIN, precision=picked, device="cpu"))
    assert canonical_spec(BUILTIN).precision == picked and canonical_spec(BUILTIN).device == "cpu"
    other = "fp32" if picked != "fp32" else "bf16"
    assert canonical_spec(BUILTIN) != canonical_spec(replace(BUILTIN, precision=other))
    load = FakeLoad()
    registry = tight(load)
    first = ready(registry, BUILTIN)
    assert ready(registry, replace(BUILTIN, precision=picked)) is first and load.built == [canonical_spec(BUILTIN)]
    assert first.spec.precision == picked  # the load is handed the precision it resolves to


def test_auto_keeps_the_precision_it_loaded_while_that_pair_is_held(monkeypatch):
    """auto weighs the memory available (models/choice.py), which the pair it loaded then takes: while that pair is
    held, an ask for auto is still that pair, not a switch to what auto would pick now."""
    picks = iter(["fp32"] + ["int8"] * 100)
    monkeypatch.setattr(
        pairs, "canonical_spec", lambda spec: replace(spec, precision=next(picks)) if spec.precision == "auto" else spec
    )
    load = FakeLoad()
    registry = tight(load)
    first = ready(registry, BUILTIN)
    assert first.spec.precision == "fp32"
    assert registry.loader(BUILTIN, start=False) is first and registry.loader(BUILTIN) is first
    with registry.lease(BUILTIN) as lease:
        assert lease.pair is first.pair
    ready(registry, replace(BUILTIN, precision="bf16"))  # a switch: the pair auto loaded goes
    assert ready(registry, BUILTIN).spec.precision == "int8"  # and auto is resolved again
    assert [spec.precision for spec in load.built] == ["fp32", "bf16", "int8"]


def test_a_switch_lets_the_old_pair_go_before_the_new_one_loads(collections):
    load = FakeLoad()
    registry = tight(load)
    ready(registry, BUILTIN)
    for spec in [replace(BUILTIN, precision="fp32"), replace(BUILTIN, precision="int8"), *OTHERS]:
        assert ready(registry, spec).state == "ready"
        assert load.alive_at_start[-1] == 0  # the pair before was gone when this one began to load
        assert load.alive() == 1 and [held.spec for held in registry.loaded()] == [canonical_spec(spec)]
    assert len(load.built) == 5 and len(collections) == 4  # the memory given back at each switch


def test_the_old_pair_stays_while_the_new_one_loads_only_with_room_to_spare():
    load = FakeLoad()
    registry = PairRegistry(load=load, need=lambda spec: 4 * GiB, available=lambda: 8 * GiB)  # twice the need
    old = ready(registry, BUILTIN)
    new = ready(registry, OTHERS[0])
    assert load.alive_at_start == [0, 1]  # both fit with room to spare: the old one stayed during the load
    assert load.alive() == 1 and registry.loaded() == [new] and old.state == "released" and old.pair is None
    unknown = PairRegistry(load=load, need=lambda spec: None, available=lambda: 1 << 60)  # a need not known
    ready(unknown, OTHERS[1])
    ready(unknown, BUILTIN)
    assert load.alive_at_start[-1] == 1  # the registry above still holds its pair: this one let its own go first


def test_a_pair_a_run_holds_is_never_let_go_under_it():
    load = FakeLoad()
    registry = tight(load)
    builtin = ready(registry, BUILTIN)
    lease = registry.lease(BUILTIN)
    assert lease is not None and lease.pair is builtin.pair
    ready(registry, OTHERS[0])
    assert load.alive_at_start[-1] == 1 and load.alive() == 2  # held by the run, so it stayed
    assert registry.lease(OTHERS[0]) is not None and builtin.state == "ready" and builtin.retired
    lease.release()
    lease.release()  # twice is harmless
    assert builtin.state == "released" and load.alive() == 1  # gone once the run let it go


def test_switching_back_to_a_pair_a_run_still_holds_keeps_it():
    load = FakeLoad()
    registry = tight(load)
    builtin = ready(registry, BUILTIN)
    lease = registry.lease(BUILTIN)
    other = ready(registry, OTHERS[0])
    assert ready(registry, BUILTIN) is builtin and not builtin.retired  # no second copy
    assert other.state == "released" and load.built == [canonical_spec(BUILTIN), canonical_spec(OTHERS[0])]
    lease.release()
    assert registry.loaded() == [builtin]


def test_pinned_pairs_stay_and_only_they_load_where_the_owner_says_so():
    load = FakeLoad()
    registry = tight(load)
    owners = [replace(BUILTIN, precision="bf16"), replace(BUILTIN, precision="int8")]
    registry.pin(owners, only=True)
    for spec in owners:
        ready(registry, spec)
    refused = ready(registry, OTHERS[0])
    assert refused.state == "failed" and refused.error == NOT_OFFERED and registry.lease(OTHERS[0]) is None
    assert refused.pair is None and len(load.built) == 2
    registry.pin(owners)  # the owner also allows other pairs (custom ones): they replace each other only
    ready(registry, OTHERS[0])
    ready(registry, OTHERS[1])
    assert {held.spec for held in registry.loaded()} == {canonical_spec(s) for s in [*owners, OTHERS[1]]}


def test_failed_loads_never_take_a_slot_and_are_retried():
    load = FakeLoad()
    registry = tight(load)
    first = ready(registry, BUILTIN)
    for _ in range(3):
        failed = ready(registry, MISSING[0])
        assert failed.state == "failed" and "/no/such/target" in failed.error
        assert ready(registry, MISSING[0]) is failed  # shown until someone asks again
        assert ready(registry, MISSING[0], retry_failed=True) is not failed
        registry.retry(MISSING[0])
    assert registry.loaded() == [] and first.state == "released"  # the switch let the old pair go first
    assert MISSING[0] not in {held.spec for held in registry.held()}


def test_a_refusal_for_memory_says_the_memory_available_when_it_is_shown(monkeypatch):
    free = [3 * GiB]
    monkeypatch.setattr(memory, "available_memory", lambda: free[0])
    refusal = memory.MemoryRefusal("fp32", 8 * GiB, {"bf16": 5 * GiB, "int8": 3 * GiB})
    registry = tight(FakeLoad(refuse=refusal))
    failed = ready(registry, BUILTIN)
    assert "8.0 GiB of memory and 3.0 GiB is available now: choose precision int8" in failed.error
    free[0] = int(7.8 * GiB)  # memory freed since: the words follow, with no retry
    assert "and 7.8 GiB is available now: choose precision bf16" in failed.error
    assert registry.loader(BUILTIN, start=False) is failed  # a look asks nothing again
    free[0] = 9 * GiB  # it would fit now: the next ask tries again
    assert registry.loader(BUILTIN) is not failed


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
    assert found[0].wait(10) and load.built == [canonical_spec(BUILTIN)]


def test_a_load_takes_the_devices_turn():
    load = FakeLoad()
    registry = tight(load)
    with exclusive(FakePair(BUILTIN)):  # a run holds the CPU
        loader = registry.loader(BUILTIN)
        assert not loader.wait(0.8) and loader.state == "loading" and load.built == []
        assert loader.message.startswith("waiting for the device")
    assert loader.wait(10) and loader.state == "ready"
    with exclusive(FakePair(BUILTIN)):
        cancelled = registry.loader(OTHERS[0])
        cancelled.job.stop()  # stopped while it waits: it gives its place up
        assert cancelled.wait(10)
    assert cancelled.state == "failed" and "stopped" in cancelled.error and loader.state == "ready"


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
