"""A serving engine's speculative-decoding counters, read from its Prometheus text and followed over time (the Your
server page; serving/scrape.py fetches the text). Parsed by prometheus-client's own parser; every definition
(acceptance rate, mean acceptance length, per-position and conditional rates) is decoding/metrics.py's.

What each engine publishes (their /metrics, as of 2026):
  vLLM       counters vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens (each sample with
             "_total") and vllm:spec_decode_num_accepted_tokens_per_pos{position="0".."K-1"}; one series per engine
             (data-parallel rank) and model_name label: the engines summed here, one model (series) read.
  llama.cpp  llama-server --metrics, since ggml-org/llama.cpp#26389: the same four counters and position label under
             llamacpp:spec_decode_*; its other counters (llamacpp:prompt_tokens_total, ...) say it is llama.cpp when
             speculation is off (the per-position family is absent until a speculative request has finished).
  SGLang     gauges only: sglang:spec_accept_rate (accepted / drafted tokens) and sglang:spec_accept_length (tokens
             per verify), each averaged by the scheduler over its last logging interval; no counters, no positions.
             Shown as SGLang computes them; nothing per position, so no advice.

Counters are followed as Prometheus's rate() follows them: a counter that goes down means the server restarted and
counts again from zero, so the reading after it is a new baseline whose whole value is new tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from specviz import ASSETS
from specviz.decoding.exposition import DRAFT_STEP, TIMING_INFO, TIMING_LABELS, VERIFY
from specviz.decoding.metrics import SpecMetrics
from specviz.errors import UserError, refusal
from specviz.traces.check import Fields, Float, Str, parse_json
from specviz.traces.refused import Refused

from .theory import VerifyCurve

MAX_POSITIONS = 64  # positions read from one scrape (vLLM's num_speculative_tokens is rarely above 8)
MAX_SERIES = 64  # label sets (models, methods) of speculative counters in one scrape
SUMMED_LABELS = frozenset({"engine", "position"})  # vLLM's data-parallel engines are one server; positions apart
MAX_SCRAPES = 2_000  # readings kept (a 5 s interval for close to three hours); the oldest go first
VLLM, LLAMA_CPP, SGLANG = "vLLM", "llama.cpp", "SGLang"
PREFIXES = {"vllm:": VLLM, "llamacpp:": LLAMA_CPP, "sglang:": SGLANG}
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
PER_POSITION = "num_accepted_tokens_per_pos"
SGLANG_GAUGES = {"sglang:spec_accept_rate": "acceptance rate", "sglang:spec_accept_length": "mean acceptance length"}


class ServerMetricsError(UserError, ValueError):
    """An endpoint's answer that holds no speculative counters specviz can read; the message is one line."""


def _padded(values: tuple[int, ...], length: int) -> tuple[int, ...]:
    return values + (0,) * (length - len(values))


@dataclass(frozen=True)
class Counters:
    """The raw counters of one scrape: vLLM's four, summed over every engine and model label."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = ()  # [i]: drafts that kept position i (0-based, vLLM's position label)

    def values(self) -> tuple[int, ...]:
        return (self.drafts, self.draft_tokens, self.accepted, *self.per_position)

    def went_down_from(self, before: Counters) -> bool:
        """Whether any counter is below its earlier reading: a restart (a position that vanished counts too)."""
        if len(self.per_position) < len(before.per_position) and self.per_position:
            return True
        return any(now < then for now, then in zip(self.values(), before.values(), strict=False))

    def minus(self, before: Counters) -> Counters:
        """What was counted between `before` and this reading (the same server life)."""
        return self._combine(before, -1)

    def plus(self, other: Counters) -> Counters:
        return self._combine(other, 1)

    def _combine(self, other: Counters, sign: int) -> Counters:
        longer = max(len(self.per_position), len(other.per_position))
        mine, theirs = _padded(self.per_position, longer), _padded(other.per_position, longer)
        return Counters(
            self.drafts + sign * other.drafts,
            self.draft_tokens + sign * other.draft_tokens,
            self.accepted + sign * other.accepted,
            tuple(a + sign * b for a, b in zip(mine, theirs, strict=True)),
        )

    def metrics(self) -> SpecMetrics:
        """The definitions (decoding/metrics.py) over these counts."""
        return SpecMetrics.from_counters(self.drafts, self.draft_tokens, self.accepted, self.per_position)


@dataclass(frozen=True)
class Scrape:
    """One reading of an endpoint: which engine, its counters (None for SGLang, which publishes gauges only), the
    gauges it computes itself, and when (seconds on the reader's clock)."""

    engine: str
    counters: Counters | None
    at: float
    gauges: dict[str, float] = field(default_factory=dict)
    started_at: float | None = None  # process_start_time_seconds, where the server publishes it
    series: str = ""  # the labels of the series read (series_name), summed over engines (data-parallel ranks)
    others: tuple[str, ...] = ()  # other series the endpoint publishes (another model or method)
    timing: dict | None = None  # the times specviz's bench wrote beside its counters, as a verify-cost curve


def _families(text: str) -> list:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # noqa: BLE001 - the parser raises ValueError, KeyError, IndexError on bad input
        raise ServerMetricsError(f"the answer is not Prometheus text ({exc.__class__.__name__}: {exc})"[:300]) from exc


def _openmetrics_families(text: str) -> list:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # noqa: BLE001 - as above
        raise ServerMetricsError(f"the answer is not OpenMetrics text ({exc.__class__.__name__}: {exc})"[:300]) from exc


def _samples(families: list) -> list[tuple[str, dict, float]]:
    """(name without "_total", labels, value) of every sample but the "_created" timestamps."""
    found = []
    for family in families:
        for sample in family.samples:
            name = sample.name
            if name.endswith("_created"):
                continue
            found.append((name.removesuffix("_total"), sample.labels, float(sample.value)))
    return found


def _engine(samples: list[tuple[str, dict, float]]) -> str:
    seen = {engine for name, _, _ in samples for prefix, engine in PREFIXES.items() if name.startswith(prefix)}
    if not seen:
        raise ServerMetricsError(
            "this endpoint publishes Prometheus metrics, but none of vLLM (vllm:), SGLang (sglang:) or llama.cpp "
            "(llamacpp:): it is not one of the engines this page reads"
        )
    if len(seen) > 1:
        raise ServerMetricsError(f"this endpoint publishes the metrics of {' and '.join(sorted(seen))} together")
    return seen.pop()


def _count(value: float, what: str) -> int:
    if not math.isfinite(value) or value < 0 or value >= 2**53:
        raise ServerMetricsError(f"the counter {what} holds {value}, not a count")
    return int(value)


def series_name(labels: dict[str, str]) -> str:
    """A series' labels but the summed ones, as Prometheus writes them: 'model_name="m", method="x"' ('' for none)."""
    return ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k not in SUMMED_LABELS)


def _series(samples: list[tuple[str, dict, float]], prefix: str) -> dict[str, dict[str, dict[int, int]]]:
    """{series: {counter: {position: count}}} (position -1 for the three counters without one)."""
    found: dict[str, dict[str, dict[int, int]]] = {}
    for name, labels, value in samples:
        short = name.removeprefix(prefix + "spec_decode_")
        if short == name or short not in (*COUNTERS, PER_POSITION):
            continue
        position = -1
        if short == PER_POSITION:
            label = labels.get("position", "")
            if not label.isdigit() or int(label) >= MAX_POSITIONS:
                raise ServerMetricsError(f"{name} has the position {label[:20]!r}, not one of 0 to {MAX_POSITIONS - 1}")
            position = int(label)
        counts = found.setdefault(series_name(labels), {}).setdefault(short, {})
        counts[position] = counts.get(position, 0) + _count(value, name)
        if len(found) > MAX_SERIES:
            raise ServerMetricsError(f"the endpoint publishes more than {MAX_SERIES} series of speculative counters")
    return found


def _counters(counts: dict[str, dict[int, int]], prefix: str) -> Counters:
    missing = [c for c in COUNTERS if c not in counts]
    if missing:
        raise ServerMetricsError(
            f"the endpoint publishes only part of the counters: {prefix}spec_decode_{missing[0]} is missing"
        )
    positions = counts.get(PER_POSITION, {})
    per_position = tuple(positions.get(i, 0) for i in range(max(positions) + 1)) if positions else ()
    drafts, tokens, accepted = (counts[c][-1] for c in COUNTERS)
    return Counters(drafts, tokens, accepted, per_position)


def _timing(samples: list[tuple[str, dict, float]]) -> dict | None:
    """The times specviz's bench writes beside its counters (decoding/exposition.py), as a verify-cost curve the
    advice can cost a round with; None where they are absent or unusable (no serving engine publishes them)."""
    verify: dict[int, float] = {}
    draft, info = None, {}
    for name, labels, value in samples:
        if name == VERIFY:
            label = labels.get("drafted", "")
            if label.isascii() and label.isdigit() and int(label) <= MAX_POSITIONS:
                verify[int(label)] = value
        elif name == DRAFT_STEP:
            draft = value
        elif name == TIMING_INFO:
            info = labels
    if draft is None or not verify or sorted(verify) != list(range(len(verify))):
        return None
    curve = {
        "format": "specviz-verify-curve",
        "target_seconds": [verify[g] for g in range(len(verify))],
        "target_step_seconds": verify[0],
        "draft_step_seconds": draft,
        **{k: info.get(k, "") for k in TIMING_LABELS},
    }
    try:
        return VerifyCurve.model_validate(curve).model_dump()
    except ValidationError:  # a time that is not positive and finite, a label too long: no timing, the counters stay
        return None


def read_exposition(text: str, at: float, openmetrics: bool = False, prefer: str | None = None) -> Scrape:
    """One scrape's text as a Scrape; ServerMetricsError (one line) for an answer without readable counters. Of
    several series (another model or method label), `prefer`'s if it is there, else the one that drafted most."""
    samples = _samples(_openmetrics_families(text) if openmetrics else _families(text))
    engine = _engine(samples)
    started = next((v for n, labels, v in samples if n == "process_start_time_seconds" and math.isfinite(v)), None)
    if engine == SGLANG:
        gauges = {SGLANG_GAUGES[n]: v for n, _, v in samples if n in SGLANG_GAUGES and math.isfinite(v)}
        if not gauges:
            raise ServerMetricsError(
                "this SGLang server publishes no speculative metrics (sglang:spec_accept_rate, "
                "sglang:spec_accept_length): is it started with --speculative-algorithm and --enable-metrics?"
            )
        return Scrape(engine, None, at, gauges, started)
    prefix = next(p for p, e in PREFIXES.items() if e == engine)
    found = _series(samples, prefix)
    if not found:
        raise ServerMetricsError(
            f"this {engine} server publishes no speculative counters ({prefix}spec_decode_num_drafts ...): "
            "is speculative decoding on?"
        )
    counters = {name: _counters(counts, prefix) for name, counts in found.items()}
    chosen = prefer if prefer in counters else max(counters, key=lambda name: (counters[name].draft_tokens, name))
    others = tuple(sorted(name for name in counters if name != chosen))
    return Scrape(engine, counters[chosen], at, {}, started, chosen, others, _timing(samples))


@dataclass(frozen=True)
class Window:
    """What the server counted over a stretch of time: the counts, the seconds they took, and whether the server
    restarted within it."""

    counters: Counters
    seconds: float
    restarts: int

    @property
    def metrics(self) -> SpecMetrics:
        return self.counters.metrics()

    def per_second(self, count: int) -> float | None:
        return count / self.seconds if self.seconds > 0 else None


class History:
    """Scrapes of one endpoint, oldest first, with the counts since the first scrape across restarts."""

    def __init__(self) -> None:
        self.scrapes: list[Scrape] = []
        self.added: list[Counters] = []  # [k]: counted between scrape k-1 and k (a restart's whole reading)
        self.resets: list[bool] = []

    def add(self, scrape: Scrape) -> None:
        if self.scrapes and (scrape.engine, scrape.series) != (self.scrapes[-1].engine, self.scrapes[-1].series):
            self.__init__()  # another engine or series answers at this address now: start again
        if self.scrapes and scrape.at < self.scrapes[-1].at:
            return  # an answer older than one already taken (a late reply)
        before = self.scrapes[-1].counters if self.scrapes else None
        now = scrape.counters
        reset = before is not None and now is not None and now.went_down_from(before)
        if before is None or now is None:
            added = Counters()
        else:
            added = now if reset else now.minus(before)
        self.scrapes.append(scrape)
        self.added.append(added)
        self.resets.append(reset)
        if len(self.scrapes) > MAX_SCRAPES:
            del self.scrapes[0], self.added[0], self.resets[0]
            self.added[0], self.resets[0] = Counters(), False

    @property
    def latest(self) -> Scrape | None:
        return self.scrapes[-1] if self.scrapes else None

    @property
    def series(self) -> str | None:
        """The series these readings follow (None before the first)."""
        return self.scrapes[-1].series if self.scrapes else None

    def window(self, seconds: float | None = None) -> Window | None:
        """The counts over the last `seconds` (None: since the first scrape); None before two scrapes."""
        if len(self.scrapes) < 2 or self.scrapes[-1].counters is None:
            return None
        end = self.scrapes[-1].at
        first = 0 if seconds is None else next(k for k, s in enumerate(self.scrapes) if s.at >= end - seconds)
        first = min(first, len(self.scrapes) - 2)  # at least the last interval
        total = Counters()
        for added in self.added[first + 1 :]:
            total = total.plus(added)
        return Window(total, end - self.scrapes[first].at, sum(self.resets[first + 1 :]))

    def lifetime(self) -> Counters | None:
        """The counters since the server started (its own totals, plus what earlier lives counted before a
        restart this history saw)."""
        latest = self.latest
        if latest is None or latest.counters is None:
            return None
        total = latest.counters
        for k, reset in enumerate(self.resets):
            if reset and self.scrapes[k - 1].counters is not None:
                total = total.plus(self.scrapes[k - 1].counters)
        return total


# --- the page's recording ---------------------------------------------------------------------------------------

RECORDING_FORMAT = "specviz-server-recording"
RECORDING_FILE = ASSETS / "server" / "recording_vllm.json"
MAX_RECORDING_CHARS = 256 * 1024


class _Recorded(Fields):
    machine: Str(256)
    precision: Str(64)
    device: Str(16)  # the device whose verify-cost curve (assets/verify_curve_<device>.json) the advice reads
    when: Str(64)
    by: Str(512)  # the command that made it


class _Recording(Fields):
    format: Literal["specviz-server-recording"]
    version: Literal[1]
    recorded: _Recorded
    seconds: Float(0.001, 86_400.0)  # the recorded speculative runs, end to end
    text: Str(MAX_RECORDING_CHARS)  # their counters as vLLM's /metrics writes them (decoding/exposition.py)


@dataclass(frozen=True)
class Recording:
    """specviz's own recorded runs written in vLLM's format (scripts/record_your_server.py): the counters after
    `seconds` of speculative runs (a fresh process counts from zero)."""

    machine: str
    precision: str
    device: str
    when: str
    by: str
    seconds: float
    scrape: Scrape

    def history(self) -> History:
        history = History()
        history.add(Scrape(self.scrape.engine, Counters(), 0.0, series=self.scrape.series))
        history.add(self.scrape)
        return history


def recording_from_json(text: str | bytes) -> Recording:
    """A recording file, checked; ServerMetricsError in one line for a damaged one."""
    try:
        data = parse_json(text)
        found = _Recording.model_validate(data)
    except Refused as exc:
        raise ServerMetricsError(f"not a usable recording: {exc}") from None
    except ValidationError as exc:
        raise ServerMetricsError(f"not a usable recording: {refusal(exc, _Recording, 'the file')}") from None
    scrape = read_exposition(found.text, found.seconds)
    if scrape.counters is None:
        raise ServerMetricsError("not a usable recording: it holds no counters")
    r = found.recorded
    return Recording(r.machine, r.precision, r.device, r.when, r.by, found.seconds, scrape)


def load_recording(path: Path) -> Recording:
    return recording_from_json(path.read_bytes())
