"""`bench ... --metrics-out FILE`: the bench's own counters in the serving engines' Prometheus names
(decoding/exposition.py), one set per method that speculates, labelled with its drafter (`method`).

Every bench mode that drafts is read from the document it writes as JSON: the methods' bench (the `speculative`
method's runs), --compare-drafters (one set per drafter) and --stream (one set per drafter, over every request).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz.decoding.exposition import exposition
from specviz.decoding.metrics import SpecMetrics
from specviz.lessons.advisor import advise

DRAFTERS_FORMAT = "specviz-drafters"


def stats_metrics(stats: dict[str, Any]) -> SpecMetrics:
    """A run's counters from its bench stats (methods.py): n_accepted of the tokens drafted, round by round."""
    return SpecMetrics.from_rounds(zip(stats["accepted_per_round"], stats["drafted_per_round"], strict=True))


def _summed(parts: list[SpecMetrics]) -> SpecMetrics:
    return sum(parts, SpecMetrics())


def _stream_metrics(requests: list[dict[str, Any]]) -> dict[str, SpecMetrics]:
    """--stream: each request's row holds each drafter's counts (stream.acceptance_metrics)."""
    drafters = [k for k, v in (requests[0] if requests else {}).items() if isinstance(v, dict) and "counts" in v]
    return {d: _summed([SpecMetrics.from_json(row[d]["counts"]) for row in requests]) for d in drafters}


def bench_metrics(doc: dict[str, Any]) -> dict[str, SpecMetrics]:
    """{drafter: its counters over the whole bench} from a bench document of any mode that drafts."""
    if doc.get("format") == DRAFTERS_FORMAT:
        runs = doc["runs"]
        return {
            d: _summed([SpecMetrics.from_json(r["metrics"]) for r in runs if r["drafter"] == d])
            for d in doc["drafters"]
        }
    if "requests" in doc:
        return _stream_metrics(doc["requests"])
    runs = [r for r in doc["runs"] if r["method"] == "speculative"]
    return {doc["settings"]["config"]["drafter"]: _summed([stats_metrics(r["stats"]) for r in runs])} if runs else {}


def write_metrics(path: Path, doc: dict[str, Any]) -> None:
    """The exposition text of bench_metrics(doc), labelled with the target's name, with the times of the bench's
    verify-cost curve where it measured one."""
    path.write_text(exposition(doc["pair"]["target"], bench_metrics(doc), doc.get("verify_curve")), encoding="utf-8")


def _share(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def metrics_summary(doc: dict[str, Any]) -> str:
    """What the Your server page shows of the --metrics-out file, printed by the bench that wrote it: each drafter's
    counters in the serving engines' words, the rate of each position among the drafts that reached it, and the
    draft-length advice (lessons/advisor.py) costed with this bench's verify-cost curve where it measured one. The
    rates and the advice are the page's: from the counters alone (SpecMetrics.from_counters, as a scrape gives
    them), with the bench's exact rates beside them where some drafts were shorter."""
    curve = doc.get("verify_curve")
    timed = curve if curve is not None and curve.get("draft_step_seconds") else None
    lines = []
    for drafter, exact in bench_metrics(doc).items():
        published = (exact.drafts, exact.draft_tokens, exact.accepted_tokens, exact.accepted_per_position)
        m = SpecMetrics.from_counters(*published)  # what a scrape of the file gives the page
        lines.append(
            f"  {drafter}: {m.drafts} drafts, {m.draft_tokens} drafted tokens, {m.accepted_tokens} accepted: "
            f"acceptance rate {_share(m.acceptance_rate, '.1%')} (accepted ÷ drafted), mean acceptance length "
            f"{_share(m.mean_acceptance_length, '.2f')} (1 + accepted ÷ drafts)"
        )
        if not m.accepted_per_position:
            continue
        rates = m.conditional_acceptance_rate
        lines.append("    kept at position 1, 2, ... ÷ drafts: " + _rates(m.per_position_acceptance_rate))
        lines.append("    kept at position 1, 2, ... ÷ drafts that reached it: " + _rates(rates))
        if m.reached_estimated:
            lines.append(
                "      (from the counters, as the page reads them: some drafts were shorter, so these are lower "
                "bounds; counted round by round: " + _rates(exact.conditional_acceptance_rate) + ")"
            )
        advice = advise(rates, 0.0, timed) if timed is not None else None
        if advice is None:
            continue
        where = ", ".join(str(timed.get(k) or "?") for k in ("device_name", "dtype", "measured_at"))
        lines.append(f"    the Your server page's advice (c = {advice.c:.3f}, verify as this bench timed it: {where}):")
        for r in advice.rows:
            lines.append(
                f"      length {r.length}: {r.tokens:.2f} tokens per verify, a round costs {r.steps:.2f} target steps: "
                f"{r.speedup:.2f}x"
            )
        lines.append(f"    best length {advice.best}: {advice.sentence}")
    return "\n".join(lines)


def _rates(rates: tuple[float | None, ...]) -> str:
    return " ".join(_share(r, ".2f") for r in rates)
