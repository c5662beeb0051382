"""Record what the Acceptance lab, the Lossless page and the guided experiments open on or are checked against,
on the built-in pair: assets/lab/batch.json, assets/lossless/prose.json, assets/experiments/<id>.json.

Usage: flock /tmp/specviz-real.lock .venv/bin/python -m scripts.record_assets [lab] [lossless] [experiments] [ID ...]
(after python -m specviz prepare; a few minutes on a CPU; with names, only those parts; with experiment ids, only
those experiments' runs).
The experiments' runs are the guided experiments of the Step through and Race pages with the sidebar's defaults
(32 new tokens, chat template), each with plain decoding timed; tests/lessons/test_experiments.py checks the
experiments' observations against them (docs/DESIGN.md, "Guided experiments").
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from specviz.bench.environment import device_name
from specviz.decoding.config import SpecConfig
from specviz.lessons import experiments, lab
from specviz.lessons.lossless import next_token_distributions
from specviz.lessons.recorded import Recorded, lab_to_json, lossless_to_json, recorded_line
from specviz.models.loading import PairSpec, load_pair
from specviz.runs import run_trace, speedup
from specviz.traces.trace import save_trace

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))
BASE = SpecConfig(gamma=5, max_new_tokens=32, record_top=10)  # the sidebar's defaults (specviz/ui/settings.py)
SCRIPT = "scripts/record_assets.py"
ATTEMPTS = 3


def config_of(experiment: experiments.Experiment) -> SpecConfig:
    config = replace(BASE, **experiment.config)  # the experiments name SpecConfig fields
    return replace(config, gamma_max=max(config.gamma_max, config.gamma)).validate()


def record_lab(pair, recorded: Recorded) -> None:
    base = replace(BASE, record_top=0)  # the lab draws no distributions: a small file
    plan = lab.plan_batch(PROMPTS, list(PROMPTS), 1, [0.0, 1.0], ["model", "ngram"], ["constant"], base)
    runs = lab.run_batch(pair, plan, chat=True)
    out = ROOT / "assets" / "lab" / "batch.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(lab_to_json(recorded, runs), encoding="utf-8")
    for r in runs:
        print(f"lab: {r.label}: acceptance {r.trace.summary.acceptance_rate:.2f}")


def record_lossless(pair, recorded: Recorded) -> None:
    prompt = PROMPTS["prose"][1]
    config = replace(BASE, temperature=1.0, top_k=50)
    dist = next_token_distributions(pair, prompt, config, chat=True)
    out = ROOT / "assets" / "lossless" / "prose.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(lossless_to_json(recorded, prompt, "", dist, pair.token_text), encoding="utf-8")
    print(f"lossless: P(accept) = {float(torch.minimum(dist.p, dist.q).sum()):.3f}")


def steady(trace) -> bool:
    """Whether the run's timings look undisturbed: no plain step over twice the median step (another process took
    the cores for a while), and a verify pass between 0.7 and 3 plain steps (both halves ran at one speed)."""
    steps = sorted(e.seconds for e in trace.baseline)
    median = steps[len(steps) // 2]
    verify = trace.summary.verify_seconds / max(1, trace.summary.rounds)
    return steps[-1] <= 2 * median and 0.7 <= verify / median <= 3.0


def record_experiments(pair, recorded: Recorded, only: list[str]) -> None:
    out = ROOT / "assets" / "experiments"
    out.mkdir(parents=True, exist_ok=True)
    for experiment in experiments.EXPERIMENTS:
        if experiment.page not in ("step", "race") or (only and experiment.id not in only):
            continue
        prompt = experiment.values[f"{experiment.page}.prompt"]
        for attempt in range(1, ATTEMPTS + 1):  # the machine is shared: a disturbed timing is recorded again
            trace = run_trace(pair, prompt, config_of(experiment), chat=True, baseline=True)
            if steady(trace):
                break
            print(f"{experiment.id}: attempt {attempt} disturbed (uneven plain steps or verify cost)")
        trace = replace(trace, note=f"guided experiment “{experiment.id}”: {recorded_line(recorded)}")
        save_trace(trace, out / f"{experiment.id}.json")
        s = trace.summary
        print(
            f"{experiment.id}: {s.new_tokens} tokens, {s.rounds} rounds, acceptance {s.acceptance_rate:.2f}, "
            f"speed-up {speedup(trace):.2f}x, identical={s.token_ids == trace.baseline_summary.token_ids}"
        )


def main(parts: list[str]) -> None:
    """parts: lab, lossless, experiments, or experiment ids (only those experiments' runs)."""
    ids = [p for p in parts if p in {e.id for e in experiments.EXPERIMENTS}]
    parts = [p for p in parts if p not in ids] + (["experiments"] if ids else [])
    known = {
        "lab": record_lab,
        "lossless": record_lossless,
        "experiments": lambda pair, recorded: record_experiments(pair, recorded, ids),
    }
    unknown = set(parts) - set(known)
    if unknown:
        raise SystemExit(f"no such part or experiment: {', '.join(sorted(unknown))}")
    pair = load_pair(PairSpec())
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    names = pair.names
    recorded = Recorded(f"{names['target']} ← {names['draft']}", device_name(pair.device), when, SCRIPT)
    for name, record in known.items():
        if not parts or name in parts:
            record(pair, recorded)


if __name__ == "__main__":
    main(sys.argv[1:])
