"""auto, measured: the precision in which speculative decoding runs fastest on this CPU, among those that fit.

A fixed rule (bfloat16 where native, else int8) chose for memory, not for speculation: on a CPU without bfloat16
instructions int8's weight-only kernel costs about a plain step per row, so a verify of 8 drafts cost several steps
and speculation lost, while float32 checked them for about one (docs/notes/2026-12-precision.md). So at the first
load on a CPU, a few seconds of forwards (cached per CPU, torch, kernel settings and pair):

  layer    one decoder layer of the target, random weights, its Linear layers in a precision's form (as loading
           makes them), on a cache of CONTEXT tokens: 1 token (a plain step) and 9 (a verify of 8 drafts)
  head     one of its MLP's Linear layers in that form at 1 and 9 rows, scaled to the LM head's size
  step     layers x layer(1) + head(1); verify(9) the same at 9 rows, so v8 = verify(9) / step
  v(g)     1 + (v8 - 1) g / 8: a verify of g drafts, in plain steps (linear between the two measured)
  c        the draft's step (its own layer in its int8 form, likewise) over the target's
  speed    max over g of E(a, g) / (g c + v(g)) / step, E = (1 - a^(g+1)) / (1 - a), with a = A_TYPICAL

Each is timed by the wall clock at the process's threads, in turns, keeping its least; only on a quiet machine (a
busy one's timings are the other work's: one thread's CPU time was tried, and its ranking was not the real runs'),
else auto follows the rule (bfloat16 where native, else int8) until a quiet first load. auto is, among the precisions
whose pair fits in the memory available then (with room for a run) and whose verify of 8 drafts costs at most
FLAT_VERIFY plain steps (all that fit if none does), the one with the highest speed, unless a smaller one is within
MARGIN of it. The speed is a model's and ranked int8 above bfloat16 here, which the real runs do not (int8's verify
grows with its rows, and the auto schedule drafts long): the verify's flatness, measured well, decides first.
Decided once per process, the timings once per CPU. Timed for the built-in pair's shapes; another pair on the CPU
gets the same choice, an approximation.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from .memory import available_memory, builtin_need
from .precision import PRECISIONS, Int8Linear

A_TYPICAL = 0.8  # the built-in pair's acceptance on the bench (docs/notes/2026-12-precision.md)
VERIFY_ROWS = 9
CONTEXT = 64  # tokens in the cache while timing: a short answer's
ROOM = 1 << 30  # left free for a run's caches and the app
TIMING = "timing 3"  # in the cache key: bump when the timing changes (1 was kept from a busy machine)
BUSY = 0.5  # a load average above this share of the cores: too busy to time
FLAT_VERIFY = 1.5  # a verify of 8 drafts at most this many plain steps: speculation can pay (issue 54's bound)
MARGIN = 0.10  # a larger precision must be predicted this much faster to be chosen over a smaller one
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni", "amx_int8")
ENVIRONMENT = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class FormTiming:
    precision: str
    step_seconds: float  # a plain step, estimated from one layer
    verify_steps: float  # a verify of 8 drafts, in plain steps
    c: float  # a draft step over a target step
    gamma: int  # the best draft length by the model above
    speed: float  # predicted speculative tokens per second (a model's: for ranking, not for quoting)


@dataclass(frozen=True)
class Measurement:
    cpu: str
    measured: str  # when (UTC date)
    threads: int
    forms: tuple[FormTiming, ...]


def cpu_key() -> str:
    """The CPU as the kernels see it: model name, the instruction sets that pick kernels, the kernel settings."""
    from .fastpath import cpu_description

    name, flags = cpu_description()
    settings = [f"{var}={os.environ[var]}" for var in ENVIRONMENT if os.environ.get(var)]
    have = [flag for flag in FLAGS if flag in flags]
    return " | ".join([name, ",".join(have), ",".join(settings), f"torch {torch.__version__}", TIMING])


def fastest(calls: dict[str, Callable[[], object]], repeats: int = 9) -> dict[str, float]:
    """Each call's least wall-clock time at the process's threads, the calls taken in turns (two warm-up turns)."""
    best = dict.fromkeys(calls, float("inf"))
    with torch.inference_mode():
        for turn in range(repeats + 2):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                if turn >= 2:
                    best[name] = min(best[name], time.perf_counter() - start)
    return best


def convert_linear(precision: str, linear: nn.Linear, draft: bool) -> nn.Module:
    """A Linear layer in a precision's form, as the loader makes it (models/precision.py, Converter.linear)."""
    from .fastpath import PrepackedLinear, native_bfloat16, prepack_available, quantize_linear

    if draft:
        return quantize_linear(linear)
    if precision == "int8":
        return Int8Linear(linear.weight.detach(), None if linear.bias is None else linear.bias.detach())
    native = precision == "fp32" or native_bfloat16(torch.device("cpu"))
    return PrepackedLinear(linear, batch_hint=8, min_rows=4) if prepack_available() and native else linear


def one_layer(config, precision: str, draft: bool) -> tuple[nn.Module, nn.Module, float]:
    """(a one-layer model of config with a 256-id vocabulary, one MLP Linear layer, the LM head's size over that
    layer's), random weights in the precision's form."""
    import copy

    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if draft else PRECISIONS[precision].dtype
    small = copy.deepcopy(config)
    small.num_hidden_layers, small.vocab_size, small.tie_word_embeddings, small.pad_token_id = 1, 256, False, None
    model = AutoModelForCausalLM.from_config(small, dtype=dtype).eval()
    for name, module in list(model.named_modules()):
        if type(module) is nn.Linear:
            model.set_submodule(name, convert_linear(precision, module, draft))
    up = nn.Linear(config.hidden_size, config.intermediate_size, bias=False, dtype=dtype)
    return model, convert_linear(precision, up, draft), config.vocab_size / config.intermediate_size


def forward_calls(config, precision: str, draft: bool) -> tuple[dict[str, Callable[[], object]], float]:
    """Calls for a step and a verify of one layer and of one MLP Linear layer, and the LM head's share of the latter."""
    from transformers import DynamicCache

    model, up, head_share = one_layer(config, precision, draft)
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.randint(0, 256, (1, CONTEXT)), past_key_values=cache, use_cache=True)
    dtype = next(model.parameters()).dtype

    def layer(rows: int) -> Callable[[], object]:
        def call() -> object:
            model(input_ids=torch.randint(0, 256, (1, rows)), past_key_values=cache, use_cache=True)
            return cache.crop(-rows)

        return call

    rows = {1: torch.randn(1, config.hidden_size, dtype=dtype), 9: torch.randn(9, config.hidden_size, dtype=dtype)}
    calls = {
        "layer1": layer(1),
        "layer9": layer(VERIFY_ROWS),
        "head1": lambda: up(rows[1]),
        "head9": lambda: up(rows[9]),
    }
    return calls, head_share


def best_gamma(c: float, verify_steps: float, a: float = A_TYPICAL, most: int = 16) -> tuple[int, float]:
    """(g, tokens per plain step's time) maximizing E(a, g) / (g c + v(g)), v linear from 1 to verify_steps at 8."""
    rates = {
        g: (1 - a ** (g + 1)) / (1 - a) / (g * c + 1 + (verify_steps - 1) * g / (VERIFY_ROWS - 1))
        for g in range(1, most + 1)
    }
    gamma = max(rates, key=rates.__getitem__)
    return gamma, rates[gamma]


@torch.inference_mode()
def measure(configs: dict[str, object], precisions: tuple[str, ...]) -> Measurement:
    """Time a step and a verify in each precision, and the draft's step; configs: role -> transformers config."""
    calls: dict[str, Callable[[], object]] = {}
    shares: dict[str, float] = {}
    for name in ("draft", *precisions):
        config = configs["draft" if name == "draft" else "target"]
        form_calls, shares[name] = forward_calls(config, "int8" if name == "draft" else name, name == "draft")
        calls.update({f"{name} {key}": call for key, call in form_calls.items()})
    best = fastest(calls)

    def seconds(name: str, rows: int) -> float:
        layers = configs["draft" if name == "draft" else "target"].num_hidden_layers
        return layers * best[f"{name} layer{rows}"] + shares[name] * best[f"{name} head{rows}"]

    forms = []
    for name in precisions:
        step = seconds(name, 1)
        c, verify = seconds("draft", 1) / step, seconds(name, VERIFY_ROWS) / step
        gamma, rate = best_gamma(c, verify)
        forms.append(FormTiming(name, step, verify, c, gamma, rate / step))
    today = time.strftime("%Y-%m-%d", time.gmtime())
    return Measurement(cpu_key(), today, torch.get_num_threads(), tuple(forms))


SHAPES = {  # the built-in pair's configs (Qwen2.5-Coder 1.5B and 0.5B Instruct), as prepared
    "target": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12),
    "draft": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14),
}


def builtin_configs() -> dict[str, object]:
    """The built-in pair's shapes as transformers configs: nothing is read, so auto is decided before (and without)
    a prepared cache."""
    from transformers import Qwen2Config

    common = dict(num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6)
    return {role: Qwen2Config(**shape, **common, tie_word_embeddings=False) for role, shape in SHAPES.items()}


def cache_file() -> Path:
    from .builtin import cache_root

    return cache_root() / "auto-precision.json"


def busy() -> bool:
    """Other work holds the cores (the last minute's load average above half of them): timings would be its."""
    return os.getloadavg()[0] > BUSY * (os.cpu_count() or 1)


@functools.cache
def measured(precisions: tuple[str, ...] = ("fp32", "bf16", "int8")) -> Measurement | None:
    """This CPU's measurement: read from the cache file, or made now (a few seconds) and written there; None when
    there is none and the machine is too busy to make one (then auto follows the rule: auto_decision)."""
    key = cpu_key()
    path = cache_file()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if isinstance(cached.get(key), dict):
        entry = cached[key]
        forms = tuple(FormTiming(**form) for form in entry["forms"])
        if {form.precision for form in forms} == set(precisions):
            return Measurement(entry["cpu"], entry["measured"], entry["threads"], forms)
    if busy():
        return None
    result = measure(builtin_configs(), precisions)
    cached[key] = asdict(result)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    except OSError:
        pass  # a read-only cache: measured again by the next process
    return result


def fits(precision: str, free: int | None = None) -> bool:
    """The built-in pair in this precision (its draft in int8) fits in the memory available now, with ROOM left."""
    free = available_memory() if free is None else free
    return builtin_need(PRECISIONS[precision], quantize=True) + ROOM <= free


def choose(measurement: Measurement, free: int | None = None) -> FormTiming:
    """Among the precisions that fit, those whose verify of 8 drafts costs at most FLAT_VERIFY plain steps (where
    speculation pays; all of them if none does), the fastest, unless a smaller one is within MARGIN of it (then the
    smallest such: less memory for about the same speed). When none fits, the smallest (the load's memory check then
    says why)."""
    fitting = [form for form in measurement.forms if fits(form.precision, free)]
    smallest = lambda form: PRECISIONS[form.precision].bytes_per_weight  # noqa: E731
    if not fitting:
        return min(measurement.forms, key=smallest)
    pool = [form for form in fitting if form.verify_steps <= FLAT_VERIFY] or fitting
    best = max(form.speed for form in pool)
    return min((form for form in pool if form.speed * (1 + MARGIN) >= best), key=smallest)


NAMES = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8"}


@dataclass(frozen=True)
class Decision:
    precision: str  # what auto loads
    free: int  # bytes available when auto was decided
    measurement: Measurement | None  # None: the machine was too busy to time, and the rule decided

    @property
    def timing(self) -> FormTiming | None:
        forms = self.measurement.forms if self.measurement is not None else ()
        return next((form for form in forms if form.precision == self.precision), None)


def rule(native_bf16: bool) -> str:
    """auto without a measurement: bfloat16 where the CPU multiplies it natively, else int8 (the least memory)."""
    return "bf16" if native_bf16 else "int8"


@functools.cache
def auto_decision() -> Decision:
    """What auto loads in this process: decided at its first load (timed once per CPU, the memory read then) and
    kept, so that a loaded pair, which takes memory itself, never makes auto name another."""
    from .fastpath import native_bfloat16

    measurement, free = measured(), available_memory()
    if measurement is None:
        return Decision(rule(native_bfloat16(torch.device("cpu"))), free, None)
    return Decision(choose(measurement, free).precision, free, measurement)


def auto_choice() -> Decision:
    return auto_decision()


def auto_reason() -> str:
    """What auto picked on this CPU and why, in the sidebar's words."""
    decision = auto_decision()
    name, measurement, timing = NAMES[decision.precision], decision.measurement, decision.timing
    if measurement is None or timing is None:
        return (
            f"auto picked {name} by the rule (bfloat16 where the CPU multiplies it natively, else int8): the machine "
            "was too busy at the first load to time the precisions. Restart the app on a quiet machine to have them "
            "timed once."
        )
    checks = ", ".join(f"{form.verify_steps:.2f} in {NAMES[form.precision]}" for form in measurement.forms)
    left_out = [NAMES[form.precision] for form in measurement.forms if not fits(form.precision, decision.free)]
    gib = decision.free / 2**30
    fit = f"; {' and '.join(left_out)} did not fit in the {gib:.1f} GiB then available" if left_out else ""
    if len(left_out) == len(measurement.forms):
        fit = f"; none fit in the {gib:.1f} GiB then available, and {name} is the smallest"
    return (
        f"auto picked {name}: it fits, checks 8 drafts for {timing.verify_steps:.2f} plain steps "
        f"({'at most' if timing.verify_steps <= FLAT_VERIFY else 'more than'} {FLAT_VERIFY}: "
        f"{'speculation can pay' if timing.verify_steps <= FLAT_VERIFY else 'none that fits checks them for less'}), "
        "and should speculate fastest of those. "
        f"Timed on this CPU on {measurement.measured} (kept for it): checking 8 drafts costs {checks} plain steps; "
        f"a draft step costs {timing.c:.2f} of a target step in {name}{fit}."
    )
