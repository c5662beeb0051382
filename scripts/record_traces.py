"""Record the runs the home page shows at once (assets/traces/*.json), on the built-in pair.

Usage: .venv/bin/python -m scripts.record_traces [NAME ...]   (after python -m specviz prepare; a few minutes
on a CPU; with names, only those recordings)
Each trace holds the speculative run and the plain run of the target on the same prompt and settings.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path

from specviz.bench.environment import device_name
from specviz.decoding.config import SpecConfig
from specviz.models.loading import PairSpec, load_pair
from specviz.runs import run_trace, speedup
from specviz.traces.trace import save_trace

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))

RECORDINGS = [
    # (file name, category, prompt index, settings)
    ("1_code_greedy", "code", 1, SpecConfig(gamma=5, max_new_tokens=64)),
    ("2_prose_sampling", "prose", 0, SpecConfig(gamma=4, temperature=0.8, top_p=0.95, max_new_tokens=48, seed=1)),
    ("3_rename_adaptive", "repetition", 0, SpecConfig(gamma=4, schedule="adaptive", max_new_tokens=64)),
    # the benchmark's settings: drafts while the draft is confident, prompt-lookup guesses checked in one draft pass
    (
        "4_rename_auto_lookahead",
        "repetition",
        0,
        SpecConfig(gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, max_new_tokens=64),
    ),
    # prose with the benchmark's settings: where the draft is unsure, its next choices go into the same verify
    (
        "5_prose_auto_alternatives",
        "prose",
        0,
        SpecConfig(
            gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, alternatives=2, max_new_tokens=64
        ),
    ),
]


def main(names: list[str]) -> None:
    unknown = set(names) - {name for name, *_ in RECORDINGS}
    if unknown:
        raise SystemExit(f"no such recording: {', '.join(sorted(unknown))}")
    pair = load_pair(PairSpec())
    machine = device_name(pair.device)  # the page's banner says which machine recorded it, and when
    out = ROOT / "assets" / "traces"
    out.mkdir(parents=True, exist_ok=True)
    for name, category, index, config in RECORDINGS:
        if names and name not in names:
            continue
        prompt = PROMPTS[category][index]
        trace = run_trace(pair, prompt, config, baseline=True)
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        note = (
            f"recorded on the built-in pair ({category} prompt) on {machine}, {when} UTC, with scripts/record_traces.py"
        )
        trace = replace(trace, note=note)
        save_trace(trace, out / f"{name}.json")
        s = trace.summary
        print(
            f"{name}: {s.new_tokens} tokens, {s.rounds} rounds, acceptance {s.acceptance_rate:.2f}, "
            f"speed-up {speedup(trace):.2f}x, identical={s.token_ids == trace.baseline_summary.token_ids}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
