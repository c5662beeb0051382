"""Benchmark: the target alone vs our speculative decoding vs transformers' assisted generation.

On one pair, device, prompt set, settings and seed, in one process: does speculative decoding pay off
here (speed-up over the target alone), and is our loop as fast as `target.generate(assistant_model=draft)`?
Rates count new tokens after the target's prompt pass; the theory's prediction comes from a measured
verify-cost curve. See docs/DESIGN.md, "The bench package" for the method, the timing and the noise.

  curve        the verify-cost curve and the prompt pass, timed
  methods      one timed run of one method (ours, transformers')
  stats        rates, speed-ups, the paired per-prompt ratio, the theory's prediction
  report       the table
  run          the loop over prompts and methods, and the JSON document
  cli          python -m specviz bench
  environment  peak memory, device and versions
"""

from __future__ import annotations

from specviz import ROOT
from specviz.lessons.prompts import DEFAULT_PROMPTS, load_prompts
from specviz.lessons.theory import curve_time

from .cli import BENCH_DEFAULTS, CATEGORIES, add_arguments, main
from .curve import (
    CURVE_FORMAT,
    CURVE_GAMMAS,
    CURVE_VERSION,
    add_curve_samples,
    format_curve,
    measure_prompt_pass,
    measure_verify_curve,
)
from .environment import PeakMemory, device_name, environment, is_prepacked
from .methods import DEFAULT_METHODS, HF_DEFAULTS, METHODS, Run, hf_generation_config, hf_matched_settings, run_method
from .report import format_table
from .run import BENCH_FORMAT, BENCH_VERSION, BenchSettings, Log, run_benchmark
from .stats import decode_seconds, paired_ratio, representative, summarize

__all__ = [
    "BENCH_DEFAULTS",
    "BENCH_FORMAT",
    "BENCH_VERSION",
    "CATEGORIES",
    "CURVE_FORMAT",
    "CURVE_GAMMAS",
    "CURVE_VERSION",
    "DEFAULT_METHODS",
    "DEFAULT_PROMPTS",
    "HF_DEFAULTS",
    "METHODS",
    "ROOT",
    "BenchSettings",
    "Log",
    "PeakMemory",
    "Run",
    "add_arguments",
    "add_curve_samples",
    "curve_time",
    "decode_seconds",
    "device_name",
    "environment",
    "format_curve",
    "format_table",
    "hf_generation_config",
    "hf_matched_settings",
    "is_prepacked",
    "load_prompts",
    "main",
    "measure_prompt_pass",
    "measure_verify_curve",
    "paired_ratio",
    "representative",
    "run_benchmark",
    "run_method",
    "summarize",
]
