"""Round by round: what the controller and the traffic drafter alone drafted on chosen requests of a stream.

The stream bench reports each request's totals; this says where they differ. It replays a stream with the stream
bench's settings (the recorded drift run's config): every request is decoded by the controller (its greedy output,
the target's, joins the traffic store after it, and its memory carries on as in the bench), and on the chosen
requests the traffic drafter alone runs first on the same store. Per round it prints the source, the schedule's
gamma, the tokens drafted and accepted (docs/notes/2026-12-traffic.md, "Measured").

    PYTHONPATH=. .venv/bin/python scripts/stream_rounds.py --requests 7,11,21,27,31
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from specviz.bench.stream import load_stream
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import run_to_end
from specviz.drafters.suffix import TrafficStore
from specviz.models.loading import PairSpec, load_pair
from specviz.progress import ConsoleProgress
from specviz.runs import encode, speculative_generate
from specviz.traces.trace import RoundEvent


def round_lines(name: str, events: list) -> list[str]:
    rounds = [r for r in events if isinstance(r, RoundEvent)]
    lines = [f"{name}: {len(rounds)} rounds, {sum(r.n_accepted for r in rounds)} accepted"]
    for r in rounds:
        source = r.draft_source or "-"
        lines.append(f"   {source:8s} gamma {r.gamma:2d}  drafted {len(r.drafted):2d}  accepted {r.n_accepted:2d}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default="assets/streams/inventory_drift.json")
    parser.add_argument("--config", default="assets/learning/inventory_drift_avx512.json", help="a stream bench JSON")
    parser.add_argument("--requests", default="7,11,21,27,31", help="0-based indices, comma-separated")
    args = parser.parse_args()
    with open(args.config, encoding="utf-8") as file:
        config = SpecConfig(**json.load(file)["config"])
    chosen = {int(i) for i in args.requests.split(",")}
    _, requests = load_stream(args.stream)
    pair = load_pair(PairSpec(), progress=ConsoleProgress())
    store = TrafficStore()
    for i, request in enumerate(requests[: max(chosen) + 1]):
        ids = encode(pair, request.prompt, True)
        if i in chosen:
            alone, _ = run_to_end(speculative_generate(pair, ids, replace(config, drafter="traffic"), traffic=store))
        controller = replace(config, drafter="controller")
        events, summary = run_to_end(speculative_generate(pair, ids, controller, traffic=store))
        if i in chosen:
            print(f"--- request {i} ({request.phase})")
            print("\n".join(round_lines("traffic alone", alone) + round_lines("controller", events)), flush=True)
        store.add(ids + list(summary.token_ids))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
