"""The facade the CLI, the bench and the app call: one whole run from text (encode, run speculative and optionally
the baseline, collect a Trace), and the engine's generators with the config's drafter from the registry.

Pages pass `on_event` to render rounds as they arrive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from specviz import drafters
from specviz.decoding import batch, engine
from specviz.decoding.batch import RAGGED, BatchResult
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end, vocab_width
from specviz.drafters.traffic import remember as remember_traffic
from specviz.errors import UserError
from specviz.traces.trace import Event, RoundEvent, RunSummary, TokenEvent, Trace

__all__ = ["autoregressive_generate", "batch_speculative", "run_to_end", "run_trace", "speculative_generate"]

MAX_PROMPT_CHARS = 8000
MAX_PROMPT_TOKENS = 2048


class PromptError(UserError, ValueError):
    """An empty or over-long prompt."""


def check_length(prompt: str, answer: str = "") -> None:
    """The checks that need no tokenizer (so they run before any model loads): a prompt with text, the whole
    context within MAX_PROMPT_CHARS, and text a tokenizer can encode.

    Bytes that are not UTF-8 reach Python's argv as lone surrogates (U+DC80..U+DCFF), which no tokenizer
    can encode; they are refused with the byte named rather than guessed at.
    """
    if not prompt or not prompt.strip():
        raise PromptError("the prompt is empty: type some text first")
    size = len(prompt) + len(answer)
    if size > MAX_PROMPT_CHARS:
        what = "the prompt and the answer so far are" if answer else "the prompt is"
        raise PromptError(f"{what} {size} characters long; the limit is {MAX_PROMPT_CHARS}")
    for name, text in (("prompt", prompt), ("answer so far", answer)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
            raise PromptError(
                f"the {name} is not valid UTF-8 text: {what} at character {exc.start + 1}; pass it as UTF-8"
            ) from None


def encode(pair, prompt: str, chat: bool = True, answer: str = "") -> list[int]:
    """Prompt text (through the chat template when chat is True), then the answer so far if any -> token ids,
    with the limits checked on the whole context: no part of it can walk around them."""
    check_length(prompt, answer)
    ids = pair.encode_prompt(prompt, chat=chat)
    if answer:
        ids = ids + list(pair.tokenizer(answer, add_special_tokens=False)["input_ids"])
    if len(ids) > MAX_PROMPT_TOKENS:
        what = "the prompt and the answer so far are" if answer else "the prompt is"
        raise PromptError(f"{what} {len(ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    return ids


class Cancelled(RuntimeError):
    """The user stopped a run while it was still waiting for the models."""


VISITOR: ContextVar[str] = ContextVar("specviz_visitor", default="")  # whom a run is for (a job's worker sets it)
MAX_VISITORS_KEPT = 4096  # visitors whose last turn a device lock remembers (the oldest are forgotten first)


@dataclass
class _Ticket:
    visitor: str
    order: int
    granted: bool = False


class DeviceLock:
    """One processor's lock, handed out in turns so that no visitor can hold it by queueing.

    A plain lock goes to whichever waiting thread wakes first, so a visitor who queues run after run (from several
    tabs or pages) could keep everyone else waiting. This one, when it frees, goes to the waiting run whose visitor
    was served least recently (never served first), and among one visitor's runs to the one that asked first: while
    others wait, each visitor gets one run per turn. A visitor is whatever VISITOR holds in the waiting thread
    (the app: the browser's address; everything else: "", one visitor).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._waiting: list[_Ticket] = []
        self._asked = 0
        self._turn = 0
        self._served: dict[str, int] = {}  # visitor -> the turn they last got, least recent first

    def locked(self) -> bool:
        return self._held

    def acquire(
        self, cancel: threading.Event | None = None, on_wait: Callable[[float], None] | None = None, every: float = 0.5
    ) -> None:
        """Wait for this visitor's turn; on_wait(seconds waited) about every `every` seconds meanwhile, and a set
        cancel gives up the place (Cancelled)."""
        started = time.perf_counter()
        with self._cond:
            ticket = _Ticket(VISITOR.get(), self._asked)
            self._asked += 1
            self._waiting.append(ticket)
            self._grant()
            try:
                while not ticket.granted:
                    self._cond.wait(every)
                    if ticket.granted:
                        break
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("stopped while waiting for another run to finish")
                    if on_wait is not None:
                        on_wait(time.perf_counter() - started)
            except BaseException:  # a stop, or on_wait failing: give the place up, or the turn if it just came
                if ticket.granted:
                    self._held = False
                    self._grant()
                else:
                    self._waiting.remove(ticket)
                raise

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._grant()

    def _grant(self) -> None:
        """The next turn, if the device is free: least recently served visitor first, then order of asking."""
        if self._held or not self._waiting:
            return
        ticket = min(self._waiting, key=lambda t: (self._served.get(t.visitor, -1), t.order))
        self._waiting.remove(ticket)
        ticket.granted, self._held = True, True
        self._served.pop(ticket.visitor, None)  # re-inserted last: the dict stays least recent first
        self._served[ticket.visitor] = self._turn
        self._turn += 1
        while len(self._served) > MAX_VISITORS_KEPT:
            del self._served[next(iter(self._served))]
        self._cond.notify_all()

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_DEVICE_LOCKS: dict[str, DeviceLock] = {}
_DEVICE_LOCKS_GUARD = threading.Lock()


def device_key(device) -> str:
    """ "cpu", "cuda:0", "mps": one name per processor (a CUDA device without an index is GPU 0)."""
    device = torch.device(device)
    if device.type == "cpu":
        return "cpu"
    return f"{device.type}:{0 if device.index is None else device.index}"


def device_lock(device) -> DeviceLock:
    """The one lock of this device, shared by every pair on it: two pairs on one processor never run at once
    (they would share its cores or memory, and both timings would be wrong)."""
    name = device_key(device)
    with _DEVICE_LOCKS_GUARD:
        return _DEVICE_LOCKS.setdefault(name, DeviceLock())


@contextmanager
def exclusive(
    pair, cancel: threading.Event | None = None, on_wait: Callable[[float], None] | None = None
) -> Iterator[None]:
    """Hold the lock of the pair's device for a whole run: runs on one device never overlap, whatever their
    pair, so every timing is honest and no two runs share a processor; waiting runs take turns by visitor
    (DeviceLock).

    While another run holds it, on_wait(seconds waited) is called about twice a second (a page shows
    that it waits), and a set cancel flag gives up the wait.
    """
    lock = device_lock(pair.device)
    lock.acquire(cancel, on_wait)
    try:
        yield
    finally:
        lock.release()


def speculative_generate(
    pair, prompt_ids: list[int], config: SpecConfig, cancel: threading.Event | None = None, traffic=None, heads=None
) -> Iterator[Event]:
    """The engine's speculative run with the config's drafter (the registry's factory); the traffic drafters read
    `traffic` (a TrafficStore; None: the pair's process-wide one), the heads' drafters `heads` (kind -> heads; a
    kind missing: the target's own, drafters/heads.py)."""
    factory = drafters.factory(config.drafter, traffic, heads)
    return engine.speculative_generate(pair, prompt_ids, config, factory, cancel)


def batch_speculative(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    stop_at_eos: bool = True,
    rule: str = RAGGED,
    cancel: threading.Event | None = None,
    traffic=None,
    heads=None,
) -> BatchResult:
    """The engine's round over a batch of prompts, with the config's drafter (traffic and heads as above)."""
    factory = drafters.factory(config.drafter, traffic, heads)
    return batch.batch_speculative(pair, prompts, config, factory, stop_at_eos, rule, cancel)


def _drain(events, on_event: Callable[[Event], None] | None) -> tuple[list, RunSummary]:
    steps: list = []
    for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, RunSummary):
            return steps, event
        steps.append(event)
    raise RuntimeError("the run ended without a summary")


def run_trace(
    pair,
    prompt: str,
    config: SpecConfig,
    *,
    chat: bool = True,
    baseline: bool = False,
    cancel: threading.Event | None = None,
    on_event: Callable[[Event], None] | None = None,
    prompt_ids: list[int] | None = None,
    on_wait: Callable[[float], None] | None = None,
    traffic=None,
    heads=None,
) -> Trace:
    """Speculative run, then (if baseline) the target alone on the same prompt, one after the other,
    holding the device's lock throughout. The traffic drafters read `traffic` and the finished run joins it (None:
    the pair's process-wide store); the heads' drafters read `heads` (speculative_generate)."""
    config.validate()
    ids = prompt_ids if prompt_ids is not None else encode(pair, prompt, chat)
    with exclusive(pair, cancel, on_wait):
        rounds, summary = _drain(speculative_generate(pair, ids, config, cancel, traffic, heads), on_event)
        # Every finished run teaches the traffic drafter (docs/DESIGN.md, "The traffic drafter").
        if summary.finish_reason != "cancelled":
            remember_traffic(pair, ids + list(summary.token_ids), traffic)
        tokens: list[TokenEvent] = []
        base_summary = None
        if baseline and summary.finish_reason != "cancelled":
            tokens, base_summary = _drain(autoregressive_generate(pair, ids, config, cancel), on_event)
    # The vocabulary goes along so that a loader can bound every id in the file (trace_check.vocab_size).
    names = {**pair.names, "vocab_size": str(vocab_width(pair))}
    return Trace(
        config=config,
        pair=names,
        prompt=prompt,
        prompt_ids=tuple(ids),
        rounds=tuple(r for r in rounds if isinstance(r, RoundEvent)),
        summary=summary,
        baseline=tuple(tokens),
        baseline_summary=base_summary,
    )


def speedup(trace: Trace) -> float | None:
    """Decode-rate ratio speculative / baseline, when the trace holds both."""
    if trace.baseline_summary is None or trace.baseline_summary.tokens_per_second <= 0:
        return None
    return trace.summary.tokens_per_second / trace.baseline_summary.tokens_per_second
