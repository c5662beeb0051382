"""The draft-length advisor against the bench (issue 58): does the advice the Your server page gives from specviz's own
counters name the draft length the bench measures fastest?

Usage: .venv/bin/python -m scripts.advisor_check [--folder DIR] [--category code] [--longest 8]   (a quiet machine)

Runs `python -m specviz bench` once per draft length 1..K on one category's prompts (baseline and speculative, the
draft model alone: a constant schedule, no confidence stop, no lookahead, no alternatives, so that a run's draft
length is what it says), each with `--metrics-out`. A run already in the folder is read, not run again. Then it reads
the K run's metrics file as the Your server page reads a scrape (lessons/server_metrics.read_exposition), gives its
conditional rates by position to the advisor (lessons/advisor.advise) with that run's measured verify-cost curve and
with Leviathan's k c + 1, and prints both beside the bench's measured speed-up at every length.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from specviz.lessons.advisor import advise
from specviz.lessons.server_metrics import read_exposition

CHAIN = ["--schedule", "constant", "--draft-confidence", "0", "--lookahead", "0", "--alternatives", "0"]


def bench(folder: Path, category: str, length: int) -> dict:
    """The bench's JSON at this draft length (run now unless the folder holds it)."""
    out = folder / f"gamma{length}.json"
    if not out.exists():
        command = [sys.executable, "-m", "specviz", "bench", "--categories", category]
        command += ["--methods", "baseline,speculative", "--gamma", str(length), *CHAIN]
        command += ["--json", str(out), "--metrics-out", str(folder / f"gamma{length}.prom")]
        command += ["--curve-out", str(folder / f"curve{length}.json")]  # not assets/: the recording stays
        print("$", " ".join(command[1:]), flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.advisor_check")
    parser.add_argument("--folder", type=Path, default=Path("out/advisor_check"))
    parser.add_argument("--category", default="code")
    parser.add_argument("--longest", type=int, choices=range(2, 17), default=8, metavar="K")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    runs = {k: bench(args.folder, args.category, k) for k in [args.longest, *range(1, args.longest)]}
    longest = runs[args.longest]
    scrape = read_exposition((args.folder / f"gamma{args.longest}.prom").read_text(), at=0.0)
    rates = scrape.counters.metrics().conditional_acceptance_rate
    where = longest["environment"]["device_name"], longest["pair"]["dtype"], longest["created"][:10]
    print(f"{args.category} prompts; {', '.join(where)}")
    print("conditional rates by position (length", args.longest, "run):", " ".join(f"{r or 0:.2f}" for r in rates))
    for label, advice in (
        ("its measured verify-cost curve", advise(rates, 0.0, longest["verify_curve"])),
        ("k c + 1", advise(rates, longest["verify_curve"]["cost_ratio_c"])),
    ):
        shown = " ".join(f"{r.length}:{r.speedup:.2f}x" for r in advice.rows)
        print(f"advisor, {label} (c = {advice.c:.3f}): best {advice.best}; {shown}\n  {advice.sentence}")
    print("bench, measured: speculative over plain, prompt-paired geometric mean [95% interval]")
    for k in sorted(runs):
        o = runs[k]["overall"]
        paired = o["paired"]["baseline"]
        print(
            f"  length {k}: {o['speedup']['speculative']:.2f}x, paired {paired['geo_mean']:.2f} "
            f"[{paired['low']:.2f}, {paired['high']:.2f}], {o['tokens_per_second']['speculative']:.2f} tok/s "
            f"(plain {o['tokens_per_second']['baseline']:.2f}), {o['mean_tokens_per_round']:.2f} tokens per round"
        )
    fastest = max(runs, key=lambda k: runs[k]["overall"]["speedup"]["speculative"])
    print(f"fastest measured: length {fastest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
