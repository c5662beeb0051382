"""A stream of requests through the real loop: per request, the target alone, then the draft model, the traffic
drafter and the controller, the last two reading one TrafficStore that learns each request's output after it.

Metrics as vLLM reports them (so numbers carry over to a production engine):
  acceptance rate            accepted / drafted tokens
  mean acceptance length     1 + accepted / drafts (drafts: rounds that drafted at least one token)
  per-position acceptance    accepted at draft position k / drafts, k = 0, 1, ...
and ours: mean accepted tokens per round (accepted / rounds) and the speed-up over the target alone.
"""

from __future__ import annotations

import copy
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.decoding.metrics import SpecMetrics
from specviz.drafters import ALONE, CONTROLLER, MODEL, drafter_class
from specviz.drafters.suffix import TrafficStore
from specviz.drafters.traffic import controller_memory, restore_controller_memory
from specviz.runs import encode, speculative_generate
from specviz.traces.trace import RoundEvent

from .stream_file import Request, StreamError, load_stream, read_stream_result  # noqa: F401 - read strictly there; re-exported

DRAFTERS = (*ALONE, CONTROLLER)  # the keys of a request's row, in its order
SOURCES = drafter_class(CONTROLLER).sources  # what the controller may choose each round
WINDOW = 5  # requests averaged at the start, the end, and before a drift
RECOVERY_SHARE = 0.9  # recovered: back within 10% of the pre-drift level
ROLLING = 3  # requests in the rolling mean that must come back and stay back
POSITIONS = 8  # per-position acceptance rates kept


def acceptance_metrics(rounds: list[RoundEvent]) -> dict[str, Any]:
    """vLLM's names over one run's rounds (decoding/metrics.py), its counts, and mean accepted tokens per round."""
    m = SpecMetrics.from_events(rounds)
    return {
        "rounds": m.rounds,
        "drafts": m.drafts,
        "drafted": m.draft_tokens,
        "accepted": m.accepted_tokens,
        "acceptance_rate": m.acceptance_rate or 0.0,
        "mean_acceptance_length": m.mean_acceptance_length or 1.0,
        "per_position_acceptance_rate": [*m.per_position_acceptance_rate, *[0.0] * POSITIONS][:POSITIONS],
        "mean_accepted_per_round": m.accepted_per_round or 0.0,
        "counts": m.as_json(),
        "sources": {s: sum(r.draft_source == s for r in rounds) for s in SOURCES},
    }


class StreamMismatch(AssertionError):
    """A greedy run whose output differs from the target alone: speculative decoding would be wrong."""


def run_order(repeat: int) -> tuple[str, ...]:
    """The drafters' order in one repeat: rotated each time (model, traffic, controller; traffic, controller,
    model; ...), so that over len(DRAFTERS) repeats each drafter runs once in each place after the target's run.
    A fixed order put the controller last in every repeat: a drift of the machine's speed within a repeat fell on it
    alone."""
    shift = repeat % len(DRAFTERS)
    return DRAFTERS[shift:] + DRAFTERS[:shift]


class StreamStopped(Exception):
    """A set cancel stopped a request midway: its runs are incomplete, so it is no result (run_stream drops it)."""


def _runs(
    pair, ids: list[int], config: SpecConfig, store: TrafficStore, repeats: int, cancel: threading.Event | None = None
) -> dict[str, list]:
    """Every run of one request, `repeats` times over, interleaved (target, then the drafters in run_order's order,
    target, ...) so that a slow stretch of the machine falls on all of them. Every repeat of the controller starts
    from the memory its store had before the request, so the stream's learning counts each request once. A set
    `cancel` stops the run under way between two rounds (StreamStopped, the controller's memory as it was)."""
    start = copy.deepcopy(controller_memory(store))
    runs: dict[str, list] = {name: [] for name in ("baseline", *DRAFTERS)}

    def done(name: str, events) -> None:
        steps, summary = run_to_end(events)
        if summary.finish_reason == "cancelled":
            restore_controller_memory(store, copy.deepcopy(start))
            raise StreamStopped(f"stopped during the {name} run")
        runs[name].append((steps, summary))

    for repeat in range(repeats):
        done("baseline", autoregressive_generate(pair, ids, config, cancel))
        for drafter in run_order(repeat):
            if drafter == CONTROLLER and repeat:
                restore_controller_memory(store, copy.deepcopy(start))
            done(
                drafter, speculative_generate(pair, ids, replace(config, drafter=drafter), cancel=cancel, traffic=store)
            )
    return runs


def _rate(runs: list, aggregate: str) -> tuple[float, int]:
    """(tokens per second over the repeats, index of the run whose rounds are reported): the least disturbed run
    (min), or all of them (mean: their tokens over their seconds, as the methods bench; rounds of the first)."""
    rates = [summary.tokens_per_second for _, summary in runs]
    if aggregate == "mean":  # equal token counts: the harmonic mean of the rates
        return (len(rates) / sum(1 / r for r in rates) if all(r > 0 for r in rates) else 0.0), 0
    best = max(range(len(rates)), key=rates.__getitem__)
    return rates[best], best


def same_repeat_ratio(runs: list, against: list) -> float:
    """The median over repeats of one run's rate over the other's in the same repeat (run_order keeps them a run or
    two apart): a slow stretch of the machine falls on both runs of a pair and cancels, where the ratio of each
    one's fastest run compares runs from different minutes. 0 when a run has no rate (nothing decoded)."""
    pairs = [(a.tokens_per_second, b.tokens_per_second) for (_, a), (_, b) in zip(runs, against, strict=True)]
    if not pairs or any(a <= 0 or b <= 0 for a, b in pairs):
        return 0.0
    return statistics.median(a / b for a, b in pairs)


def _rounds(run: tuple[list, Any]) -> list[RoundEvent]:
    return [r for r in run[0] if isinstance(r, RoundEvent)]


def same_rounds(rounds: list[RoundEvent], against: list[RoundEvent]) -> bool:
    """Both runs drafted the same tokens and committed the same ones, round by round: then they did the same work,
    but for what a choosing drafter spends on its choice (RoundEvent.choice_seconds)."""

    def work(rs: list[RoundEvent]) -> list[tuple]:
        return [(tuple(d.id for d in r.drafted), r.appended) for r in rs]

    return work(rounds) == work(against)


def run_request(
    pair,
    ids: list[int],
    config: SpecConfig,
    store: TrafficStore,
    repeats: int = 1,
    aggregate: str = "min",
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """The target alone, then each drafter, on one request (`repeats` times, _runs); greedy outputs must all equal
    the target's. A single short run's speed-up moves with the machine by a fifth or more
    (docs/notes/2026-12-traffic.md, "Measured")."""
    runs = _runs(pair, ids, config, store, max(1, repeats), cancel)
    base_rate, shown = _rate(runs["baseline"], aggregate)
    base = runs["baseline"][shown][1]
    row: dict[str, Any] = {"prompt_tokens": len(ids), "new_tokens": base.new_tokens, "repeats": max(1, repeats)}
    row["baseline"] = {"tokens_per_second": base_rate, "seconds": base.seconds}
    kept: dict[str, list[RoundEvent]] = {}
    for drafter in DRAFTERS:
        if config.greedy and any(summary.token_ids != base.token_ids for _, summary in runs[drafter]):
            raise StreamMismatch(f"the {drafter} drafter's greedy output differs from the target alone's")
        rate, shown = _rate(runs[drafter], aggregate)
        kept[drafter] = _rounds(runs[drafter][shown])
        metrics = acceptance_metrics(kept[drafter])
        metrics["seconds"] = runs[drafter][shown][1].seconds
        metrics["choice_seconds"] = sum(r.choice_seconds for r in kept[drafter])
        metrics["tokens_per_second"] = rate
        metrics["speedup"] = rate / base_rate if base_rate else 0.0
        metrics["repeat_speedups"] = [s.tokens_per_second / base_rate if base_rate else 0.0 for _, s in runs[drafter]]
        row[drafter] = metrics
    row["controller_over_model_paired"] = same_repeat_ratio(runs[CONTROLLER], runs[MODEL])
    row["controller_same_rounds"] = same_rounds(kept[CONTROLLER], kept[MODEL])
    store.add(ids + list(base.token_ids))  # the request joins the traffic: later requests draft from it
    row["store"] = {"requests": store.requests, "tokens": store.tokens}
    return row


def run_stream(
    pair,
    requests: list[Request],
    config: SpecConfig,
    *,
    chat: bool = True,
    store: TrafficStore | None = None,
    log: Callable[[str], None] = lambda _: None,
    on_row: Callable[[list[dict[str, Any]]], None] = lambda _: None,
    cancel: threading.Event | None = None,
    first_index: int = 0,
    repeats: int = 1,
    aggregate: str = "min",
) -> list[dict[str, Any]]:
    """Every request in order (a set `cancel` stops the run under way, and the request it belongs to is dropped:
    only finished requests are rows); the traffic store starts empty unless one is
    given (it is fed as the stream runs). Rows are numbered from first_index; repeats and aggregate: run_request."""
    store = store if store is not None else TrafficStore()
    rows: list[dict[str, Any]] = []
    for i, request in enumerate(requests, start=first_index):
        if cancel is not None and cancel.is_set():
            break
        started = time.perf_counter()
        ids = encode(pair, request.prompt, chat)
        hits_before, lookups_before = store.hits, store.lookups
        try:  # a request stopped midway is no result: it is dropped, never plotted
            measured = run_request(pair, ids, config, store, repeats, aggregate, cancel)
        except StreamStopped:
            break
        row = {"index": i, "phase": request.phase, **measured}
        lookups = store.lookups - lookups_before
        row["store"]["hit_rate"] = (store.hits - hits_before) / lookups if lookups else 0.0
        rows.append(row)
        on_row(rows)
        log(f"request {i + 1}/{first_index + len(requests)} ({request.phase}) in {time.perf_counter() - started:.1f} s")
    return rows


def load_stream_result(path: str | Path) -> dict[str, Any]:
    """A result bench --stream wrote (the Learning page shows the shipped one), read by stream_file.StreamResult;
    StreamError in one line if it is not one."""
    doc = read_stream_result(path)
    doc["summary"] = summarize(doc["requests"])
    return doc


def _mean(rows: list[dict[str, Any]], drafter: str, key: str) -> float:
    return sum(r[drafter][key] for r in rows) / len(rows) if rows else 0.0


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The goals' numbers: first and last WINDOW requests, the level before the first phase change and how many
    requests after it the controller's mean accepted tokens per round takes to come back within 10% of it."""
    first, last = rows[:WINDOW], rows[-WINDOW:]
    out: dict[str, Any] = {}
    for drafter in DRAFTERS:
        out[drafter] = {
            "first_mean_accepted_per_round": _mean(first, drafter, "mean_accepted_per_round"),
            "last_mean_accepted_per_round": _mean(last, drafter, "mean_accepted_per_round"),
            "first_speedup": _mean(first, drafter, "speedup"),
            "last_speedup": _mean(last, drafter, "speedup"),
            "min_speedup": min((r[drafter]["speedup"] for r in rows), default=0.0),
        }
    model_last = out[MODEL]["last_speedup"]
    out["controller_over_model_last"] = out[CONTROLLER]["last_speedup"] / model_last if model_last else 0.0
    ratios = [r[CONTROLLER]["speedup"] / r[MODEL]["speedup"] for r in rows if r[MODEL]["speedup"] > 0]
    out["controller_over_model_min"] = min(ratios, default=0.0)
    paired = [r["controller_over_model_paired"] for r in rows if "controller_over_model_paired" in r]
    out["controller_over_model_min_paired"] = min(paired, default=0.0)  # absent in results written before it
    out.update(choice_work(rows))
    drift = next((i for i in range(1, len(rows)) if rows[i]["phase"] != rows[i - 1]["phase"]), None)
    if drift is not None:
        out["drift"] = drift_recovery(rows, drift)
    return out


def choice_work(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller's own work (its lookup and choice): per round, and as a share of each request's run. Where it
    ran the draft model's very rounds (controller_same_rounds), it did the model's work plus that share, so its
    ratio to the model is 1 - share but for the machine's noise: the floor without the noise of two timings."""
    timed = [r for r in rows if "choice_seconds" in r[CONTROLLER] and r[CONTROLLER].get("seconds")]
    if not timed:
        return {}  # a result written before the field

    def share(row: dict[str, Any]) -> float:
        return row[CONTROLLER]["choice_seconds"] / row[CONTROLLER]["seconds"]

    same = [r for r in timed if r.get("controller_same_rounds")]
    rounds = sum(r[CONTROLLER]["rounds"] for r in timed)
    return {
        "controller_choice_ms_per_round": 1000 * sum(r[CONTROLLER]["choice_seconds"] for r in timed) / max(1, rounds),
        "controller_choice_share_max": max(map(share, timed)),
        "controller_same_rounds": len(same),
        "controller_timed": len(timed),
        "controller_over_model_by_work": min((1 - share(r) for r in same), default=None),
    }


def drift_recovery(rows: list[dict[str, Any]], drift: int) -> dict[str, Any]:
    """The controller's pre-drift level: its mean accepted tokens per round over the WINDOW requests before the
    drift. Recovered after k requests: the rolling mean of ROLLING requests ending at the drift's k-th request is
    at least RECOVERY_SHARE of that level, and so is every later one (one lucky request is not a recovery)."""
    level = _mean(rows[max(0, drift - WINDOW) : drift], CONTROLLER, "mean_accepted_per_round")
    after = [r[CONTROLLER]["mean_accepted_per_round"] for r in rows[drift:]]
    rolling = [sum(after[k - ROLLING + 1 : k + 1]) / ROLLING for k in range(ROLLING - 1, len(after))]
    line = RECOVERY_SHARE * level
    back = None
    for k in range(len(rolling) - 1, -1, -1):  # the earliest k from which every rolling mean stays back
        if rolling[k] < line:
            break
        back = k + ROLLING
    first = next((k + ROLLING for k, value in enumerate(rolling) if value >= line), None)
    return {
        "at": drift,
        "pre_drift_level": level,
        "rolling": rolling,
        "first_back_after": first,
        "recovered_after": back,
    }


def format_stream(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The per-request curve and the goals' numbers, as text."""
    head = f"{'#':>3} {'phase':<11} {'store':>11} {'hit':>5} "
    head += " ".join(f"{d[:5] + ' acc/rd':>12} {'x':>5} {'AL':>5}" for d in DRAFTERS) + "  controller t/m/b  c/m"
    lines = [head]
    for r in rows:
        cells = [f"{r['index'] + 1:>3} {r['phase'][:11]:<11} {r['store']['requests']:>4}r{r['store']['tokens']:>6}"]
        cells.append(f"{r['store']['hit_rate']:>5.2f}")
        for d in DRAFTERS:
            m = r[d]
            cells.append(
                f"{m['mean_accepted_per_round']:>12.2f} {m['speedup']:>5.2f} {m['mean_acceptance_length']:>5.2f}"
            )
        cells.append(" " + "/".join(str(r[CONTROLLER]["sources"][source]) for source in SOURCES))
        if r.get("repeats", 1) > 1 and "controller_over_model_paired" in r:
            cells.append(f" {r['controller_over_model_paired']:.2f}")
        lines.append(" ".join(cells))
    lines.append("")
    for d in DRAFTERS:
        s = summary[d]
        lines.append(
            f"{d:<10} accepted/round first {WINDOW}: {s['first_mean_accepted_per_round']:.2f}  last {WINDOW}: "
            f"{s['last_mean_accepted_per_round']:.2f}  speed-up first {WINDOW}: {s['first_speedup']:.2f}x  "
            f"last {WINDOW}: {s['last_speedup']:.2f}x  lowest: {s['min_speedup']:.2f}x"
        )
    lines.append(
        f"controller / draft model speed-up: last {WINDOW} {summary['controller_over_model_last']:.2f}x, "
        f"lowest single request {summary['controller_over_model_min']:.2f}x"
    )
    if summary.get("controller_over_model_min_paired") and rows[0].get("repeats", 1) > 1:
        lines.append(
            "controller / draft model, median over the repeats of each repeat's ratio: lowest single request "
            f"{summary['controller_over_model_min_paired']:.2f}x"
        )
    if "controller_choice_share_max" in summary:
        lines.append(_choice_line(summary))
    if "drift" in summary:
        d = summary["drift"]
        first = max(1, d["at"] - WINDOW + 1)
        lines.append(
            f"drift at request {d['at'] + 1}: controller pre-drift level {d['pre_drift_level']:.2f} accepted/round "
            f"(requests {first}-{d['at']}); rolling mean of {ROLLING} after it: "
            + " ".join(f"{v:.2f}" for v in d["rolling"])
        )
        first = d.get("first_back_after")
        lines.append(f"back within 10%: first after {first} request(s)" if first else "back within 10%: never")
        lines.append(
            f"back within 10% and staying: after {d['recovered_after']} request(s)"
            if d["recovered_after"]
            else "back within 10% and staying: not within the stream"
        )
    return "\n".join(lines)


def _choice_line(summary: dict[str, Any]) -> str:
    """The controller's own work and, where its rounds were the draft model's, the ratio that work alone allows."""
    ms, share = summary["controller_choice_ms_per_round"], 100 * summary["controller_choice_share_max"]
    line = f"controller's own work (traffic lookup, choice): {ms:.2f} ms per round, at most {share:.2f}% of a request"
    by_work = summary["controller_over_model_by_work"]
    if by_work is None:
        return line + "; it ran the draft model's rounds on no request"
    same, timed = summary["controller_same_rounds"], summary["controller_timed"]
    return line + (
        f"\ncontroller / draft model by that work, on the {same} of {timed} requests where it ran the draft model's "
        f"very rounds: lowest {by_work:.3f}x"
    )
