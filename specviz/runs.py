"""One whole run from text: encode, run speculative (and optionally the baseline), collect a Trace.

The CLI and the app both call this; pages pass `on_event` to render rounds as they arrive.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .config import SpecConfig
from .errors import UserError
from .engine import autoregressive_generate, run_to_end, speculative_generate
from .trace import Event, RoundEvent, RunSummary, TokenEvent, Trace

MAX_PROMPT_CHARS = 8000
MAX_PROMPT_TOKENS = 2048


class PromptError(UserError, ValueError):
    """An empty or over-long prompt."""


def encode(pair, prompt: str, chat: bool = True) -> list[int]:
    """Prompt text -> token ids (through the chat template when chat is True), with the limits checked."""
    if not prompt or not prompt.strip():
        raise PromptError("the prompt is empty: type some text first")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(f"the prompt is {len(prompt)} characters long; the limit is {MAX_PROMPT_CHARS}")
    ids = pair.encode_prompt(prompt, chat=chat)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise PromptError(f"the prompt is {len(ids)} tokens long; the limit is {MAX_PROMPT_TOKENS}")
    return ids


class Cancelled(RuntimeError):
    """The user stopped a run while it was still waiting for the models."""


@contextmanager
def exclusive(pair, cancel: threading.Event | None = None,
              on_wait: Callable[[float], None] | None = None) -> Iterator[None]:
    """Hold the pair's lock for a whole run: runs on shared models never overlap, so every timing is honest.

    While another run holds it, on_wait(seconds waited) is called about twice a second (a page shows
    that it waits), and a set cancel flag gives up the wait.
    """
    started = time.perf_counter()
    while not pair.lock.acquire(timeout=0.5):
        if cancel is not None and cancel.is_set():
            raise Cancelled("stopped while waiting for another run to finish")
        if on_wait is not None:
            on_wait(time.perf_counter() - started)
    try:
        yield
    finally:
        pair.lock.release()


def _drain(events, on_event: Callable[[Event], None] | None) -> tuple[list, RunSummary]:
    steps: list = []
    for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, RunSummary):
            return steps, event
        steps.append(event)
    raise RuntimeError("the run ended without a summary")


def run_trace(pair, prompt: str, config: SpecConfig, *, chat: bool = True, baseline: bool = False,
              cancel: threading.Event | None = None, on_event: Callable[[Event], None] | None = None,
              prompt_ids: list[int] | None = None, on_wait: Callable[[float], None] | None = None) -> Trace:
    """Speculative run, then (if baseline) the target alone on the same prompt, one after the other,
    holding the pair's lock throughout."""
    config.validate()
    ids = prompt_ids if prompt_ids is not None else encode(pair, prompt, chat)
    with exclusive(pair, cancel, on_wait):
        rounds, summary = _drain(speculative_generate(pair, ids, config, cancel), on_event)
        tokens: list[TokenEvent] = []
        base_summary = None
        if baseline and summary.finish_reason != "cancelled":
            tokens, base_summary = _drain(autoregressive_generate(pair, ids, config, cancel), on_event)
    return Trace(config=config, pair=dict(pair.names), prompt=prompt, prompt_ids=tuple(ids),
                 rounds=tuple(r for r in rounds if isinstance(r, RoundEvent)), summary=summary,
                 baseline=tuple(tokens), baseline_summary=base_summary)


def speedup(trace: Trace) -> float | None:
    """Decode-rate ratio speculative / baseline, when the trace holds both."""
    if trace.baseline_summary is None or trace.baseline_summary.tokens_per_second <= 0:
        return None
    return trace.summary.tokens_per_second / trace.baseline_summary.tokens_per_second
