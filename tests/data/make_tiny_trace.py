"""Regenerate tiny_trace.json: a recorded run of the tiny random pair, for the app tests only.

    PYTHONPATH=. .venv/bin/python tests/data/make_tiny_trace.py

(Real recorded runs for the app's first screen live in assets/traces/ and come from the built-in pair.)
"""

import dataclasses
from pathlib import Path

import torch

from specviz.decoding.config import SpecConfig
from specviz.models.tiny import tiny_pair
from specviz.runs import run_trace
from specviz.traces.trace import save_trace

if __name__ == "__main__":
    torch.set_num_threads(1)
    pair = tiny_pair()
    trace = run_trace(pair, "def add(a, b):", SpecConfig(gamma=4, max_new_tokens=24), chat=False, baseline=True)
    trace = dataclasses.replace(trace, note="tiny random pair, for tests")
    out = Path(__file__).with_name("tiny_trace.json")
    save_trace(trace, out)
    print(f"wrote {out}: {len(trace.rounds)} rounds, acceptance {trace.summary.acceptance_rate:.0%}")
