"""Progress reporting: a callback (message, fraction done in [0, 1]) that loaders call, and its plumbing.

The library code reports through a plain callable; the app draws it as a Streamlit bar, the CLI through
tqdm on a terminal and as one log line per stage elsewhere (no carriage-return floods in a log file).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

Progress = Callable[[str, float], None]  # (message, fraction done in [0, 1])


def scaled(progress: Progress | None, start: float, width: float) -> Progress:
    """A callback over [0, 1] that reports into [start, start + width] of the caller's bar (or nowhere)."""
    if progress is None:
        return lambda message, fraction: None
    return lambda message, fraction: progress(message, start + width * fraction)


def monotone(progress: Progress | None) -> Progress | None:
    """Never move the bar backwards (transformers runs more than one bar inside a stage)."""
    if progress is None:
        return None
    best = [0.0]

    def report(message: str, fraction: float) -> None:
        best[0] = max(best[0], fraction)
        progress(message, best[0])

    return report


class ConsoleProgress:
    """A Progress for the command line: a tqdm bar on a terminal; in a log, a line when the stage changes
    (its message with the numbers left out) or every `every` seconds, never a carriage return."""

    def __init__(self, stream: IO[str] | None = None, every: float = 15.0):
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.bar: Any = None
        self.stage: str | None = None
        self.printed_at = 0.0

    def __call__(self, message: str, fraction: float) -> None:
        percent = round(100 * max(0.0, min(1.0, fraction)), 1)
        if self.interactive:
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(
                    total=100, file=self.stream, bar_format="{l_bar}{bar:30}| {n:.1f}% [{elapsed}]", leave=True
                )
            self.bar.set_description_str(message[:60], refresh=False)
            self.bar.n = percent
            self.bar.refresh()
            if fraction >= 1.0:
                self.close()
        else:
            stage = re.sub(r"[\d.,]+", "#", message)
            now = time.monotonic()
            if stage != self.stage or now - self.printed_at >= self.every or fraction >= 1.0:
                print(f"[{percent:5.1f}%] {message}", file=self.stream, flush=True)
                self.stage, self.printed_at = stage, now

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@contextlib.contextmanager
def relay_tqdm(report: Callable[[float], None]) -> Iterator[None]:
    """Send transformers' progress bars to our callback instead of the console (GGUF conversion, loading).

    Two bars exist: the GGUF dequantizing loop uses tqdm directly (module global, swapped here), the
    generic loading loops go through transformers' tqdm hook. Either may be absent in other versions.
    """
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    relay = lambda *args, **kwargs: _Relay(report, *args, **kwargs)
    set_hook = getattr(hf_logging, "set_tqdm_hook", None)
    previous_hook = set_hook(lambda factory, args, kwargs: relay(*args, **kwargs)) if set_hook else None
    previous_tqdm = getattr(gguf_utils, "tqdm", None)
    if previous_tqdm is not None:
        gguf_utils.tqdm = relay
    try:
        yield
    finally:
        if set_hook:
            set_hook(previous_hook)
        if previous_tqdm is not None:
            gguf_utils.tqdm = previous_tqdm


class _Relay:
    """Just enough of tqdm's interface for transformers' loading loops."""

    def __init__(
        self, report: Callable[[float], None], iterable: Any = None, *args: Any, total: int | None = None, **kwargs: Any
    ):
        self.report, self.iterable, self.n = report, iterable, 0
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)

    def __iter__(self) -> Iterator[Any]:
        for item in self.iterable:
            yield item
            self.update(1)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.total:
            self.report(min(self.n / self.total, 1.0))

    def __enter__(self) -> _Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None
