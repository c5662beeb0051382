"""The guided experiments' answers on Heads, Batching and Learning: pure functions of the result each page shows
(`Screen.data`: the heads' reports by kind, a batching result, the Learning page's streams), the recording named
by `Screen.made` (lessons/screen.py)."""

from __future__ import annotations

from collections.abc import Callable

from specviz.drafters import CONTROLLER, EAGLE, MEDUSA, MODEL_SOURCE, TRAFFIC

from .screen import Screen, pct, times

TOP1_POINTS = 0.02  # two heads' first guesses within 2 points are "about the same" (another seed moves one so much)
KNEE = 1.2  # T(n) within a fifth of T(1) is "flat"
WINDOW = 5  # requests compared at the start and the end of a stream (bench/stream.py's WINDOW)


def _where(screen: Screen, live: str) -> str:
    return screen.made.words if screen.made is not None else live


# --- Heads: the reports shown, by kind -----------------------------------------------------------------------


def heads_medusa_k(screen: Screen) -> str:
    report = screen.data.get(MEDUSA)
    if report is None:
        return "No Medusa heads are shown: train them above."
    top1 = report["top1"]
    falls = all(b <= a for a, b in zip(top1, top1[1:], strict=False))
    trend = "falls at every head" if falls else "does not fall at every head here (a small held-out set is noisy)"
    return (
        f"Head 1 is right {pct(top1[0])} of the time on held-out answers, head {len(top1)} {pct(top1[-1])}: accuracy "
        f"{trend} ({_where(screen, 'your training')})."
    )


def heads_medusa_eagle(screen: Screen) -> str:
    medusa, eagle = screen.data.get(MEDUSA), screen.data.get(EAGLE)
    if medusa is None or eagle is None:
        return "Both kinds must be shown to compare them: train the missing one above."
    e, m = eagle["top1"][0], medusa["top1"][0]
    verdict = (
        "about the same (closer than another training seed moves either)"
        if abs(e - m) <= TOP1_POINTS
        else "EAGLE ahead"
        if e > m
        else "Medusa ahead"
    )
    verdict = verdict[0].upper() + verdict[1:]
    return f"{verdict}: the EAGLE head is right {pct(e)} of the time, Medusa's first head {pct(m)}."


def heads_lossless(screen: Screen) -> str:
    report = screen.data.get(MEDUSA) or screen.data.get(EAGLE)
    cut = f" (zero outside its output vocabulary of {report['vocabulary']:,} tokens)" if report else ""
    return (
        "The text's distribution does not depend on the drafter: the target keeps a head's guess d with "
        f"probability min(1, p(d)/q(d)), q the head's own distribution{cut}, and on a rejection draws from "
        "norm(max(0, p − q)). Typical acceptance keeps d whenever p(d) is above a threshold, and never draws from "
        "a residual."
    )


# --- Batching: the result shown (recorded or yours) -----------------------------------------------------------


def _speedups(doc: dict) -> dict[int, float]:
    return {r["batch"]: r["ragged"]["measured_speedup"] for r in doc["rows"]}


def batching_break_even(screen: Screen) -> str:
    speed = _speedups(screen.data)
    first = min(speed)
    losing = [b for b in sorted(speed) if speed[b] < 1]
    where = _where(screen, "in your run, measured now")
    if not losing:
        last = max(speed)
        return f"Speculation paid at every batch size shown, {where}: B = {last} still {times(speed[last])}."
    b = losing[0]
    return (
        f"At B = {b}, {where}: {times(speed[first])} with {first} row{'s' if first > 1 else ''} and "
        f"{times(speed[b])} with {b}; the reading above names the cause."
    )


def batching_throughput(screen: Screen) -> str:
    rows = {r["batch"]: r for r in screen.data["rows"]}
    big, small = max(rows), min(rows)
    plain, spec = rows[big]["plain_tokens_per_second"], rows[small]["ragged"]["tokens_per_second"]
    verdict = "plain decoding serves more" if plain > spec else "speculative decoding serves more"
    return (
        f"{verdict.capitalize()}: plain decoding at B = {big} {plain:.1f} tokens/s, speculative decoding at B = "
        f"{small} {spec:.1f} tokens/s ({_where(screen, 'your run, measured now')}; the throughput chart's ends)."
    )


def batching_knee(screen: Screen) -> str:
    curve = screen.data["curve"]
    t = dict(zip(curve["tokens"], curve["seconds"], strict=True))
    one = t[min(t)]
    flat = [n for n in sorted(t) if t[n] / one < KNEE]
    where = _where(screen, "your run, measured now")
    if len(flat) == len(t):
        return f"It stays flat up to {max(t)} tokens ({where}): T({max(t)}) = {t[max(t)]:.3f} s, T(1) {one:.3f} s."
    rise = next(n for n in sorted(t) if n > flat[-1])
    return (
        f"After about {flat[-1]} tokens ({where}): T({flat[-1]}) = {t[flat[-1]]:.3f} s, within a fifth of "
        f"T(1) = {one:.3f} s; T({rise}) = {t[rise]:.3f} s climbs, as T(n)'s chart shows."
    )


# --- Learning: the recorded stream and bench this page shows ---------------------------------------------------


def learning_traffic_learns(screen: Screen) -> str:
    t = screen.data["stream"]["summary"][TRAFFIC]
    first, last = t["first_mean_accepted_per_round"], t["last_mean_accepted_per_round"]
    verdict = "It does" if last > first else "Not here"
    return (
        f"{verdict}: {_where(screen, 'in the stream shown')}, over the first {WINDOW} requests the traffic drafter "
        f"accepted {first:.2f} draft tokens per round, over the last {WINDOW} {last:.2f}."
    )


def learning_drift(screen: Screen) -> str:
    doc = screen.data["stream"]
    rows, at = doc["requests"], doc["summary"]["drift"]["at"]
    before = rows[max(0, at - WINDOW) : at]
    level = sum(r[TRAFFIC]["mean_accepted_per_round"] for r in before) / max(1, len(before))
    now = rows[at][TRAFFIC]["mean_accepted_per_round"]
    verdict = "it falls" if now < level else "it does not fall here"
    return (
        f"At request {at + 1} {verdict}: {now:.2f} draft tokens accepted per round against {level:.2f} on average "
        f"over the {len(before)} requests before ({_where(screen, 'the stream shown')}); then it climbs back "
        "without retraining, template by template (the chart)."
    )


def model_rounds(bench: dict) -> tuple[int, int]:
    """(the rounds the controller drafted from the draft model, all its drafting rounds) of a bench --stream result."""
    sources = [r[CONTROLLER]["sources"] for r in bench["requests"]]
    return sum(s[MODEL_SOURCE] for s in sources), sum(sum(s.values()) for s in sources)


def learning_bench(screen: Screen) -> str:
    model, total = model_rounds(screen.data["bench"])
    ratio = screen.data["bench"]["summary"]["controller_over_model_last"]
    verdict = (
        "the draft model, every time"
        if model == total
        else "mostly the draft model"
        if 2 * model > total
        else "traffic, mostly"
    )
    return (
        f"{verdict.capitalize()}: {_where(screen, 'in the bench shown')} the controller drafted from the model in "
        f"{model} of its {total} drafting rounds, at {times(ratio)} the draft model's speed over the last {WINDOW}."
    )


def learning_side_channel(screen: Screen) -> str:
    rows = screen.data.get("yours") or []
    if len(rows) < 2:
        return "Run the request a second time (Try it again) to compare the traffic drafter's two rows."
    first, second = (r[TRAFFIC]["mean_accepted_per_round"] for r in rows[-2:])
    verdict = "jumps" if second > first + 0.5 else "barely moves (the two requests differ?)"
    return (
        f"The traffic drafter's draft tokens accepted per round {verdict}: {first:.2f} on the first run, "
        f"{second:.2f} on the second: its store holds your first answer and drafts it back."
    )


ANSWERS: dict[str, Callable[[Screen], str]] = {
    "heads_medusa_k": heads_medusa_k,
    "heads_medusa_eagle": heads_medusa_eagle,
    "heads_lossless": heads_lossless,
    "batching_break_even": batching_break_even,
    "batching_throughput": batching_throughput,
    "batching_knee": batching_knee,
    "learning_traffic_learns": learning_traffic_learns,
    "learning_drift": learning_drift,
    "learning_bench": learning_bench,
    "learning_side_channel": learning_side_channel,
}
