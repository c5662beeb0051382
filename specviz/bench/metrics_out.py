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
    """The exposition text of bench_metrics(doc), labelled with the target's name."""
    path.write_text(exposition(doc["pair"]["target"], bench_metrics(doc)), encoding="utf-8")
