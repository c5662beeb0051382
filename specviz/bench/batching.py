"""The batching benchmark: what the speed-up of speculative decoding becomes as the batch grows.

Measured, per device: T(n), the target's KV-cached forward over n new tokens (one row), n = 1..256; per batch size
B, each at the batch's own shape: the target's forward over [B, 1] (a plain step, T(B)) and over [B, g + 1] (a verify)
at every g of the sweep, and the draft's step over [B, 1] and [B, 2]; then the real batched loops
(specviz.decoding.batch) at each B, greedy, to the same length, over the same rows at every B up to --batch-rows:
ragged (every row keeps what it accepted) at each gamma of the sweep and min-cut (the batch waits for its slowest row)
at the fixed gamma, each --batch-runs times, each run right after a fresh timing of the batch's forwards and a plain
run of the same rows (the pair's speed-up and prediction; the entry keeps their medians). Every row is also decoded
alone (B = 1, plain and ragged at the fixed gamma), the reference its batch is compared with: its tokens per round and
its greedy text. At B = 1 the single-row engine runs --batch-engine-repeats times beside the batched path's pairs, so
both speed-ups come with their spread.
Predicted speed-up of a run: its rounds priced by the timed forwards (bench/batching_prediction.py) against its plain
run's steps priced the same way. Expected in the steady state, at B and gamma:
    speed-up(B, g) = E(a, g) * T(B) / (g * t_draft(B) + T_verify(B, g))
from the acceptance a measured at the fixed gamma (the prediction that picks the best gamma at each B before the
others are measured; the first draft forward priced over two tokens per row where one accepted all)
(docs/DESIGN.md, "Batching").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from specviz import ROOT, drafters
from specviz.cli.args import output_path, writing
from specviz.decoding.batch import MAX_BATCH, MIN_CUT, RAGGED, BatchResult, batch_plain, expected_acceptance
from specviz.decoding.config import GAMMA_LIMIT, ConfigError, SpecConfig
from specviz.decoding.costs import batched_draft_seconds, expected_tokens
from specviz.decoding.engine import autoregressive_generate, run_to_end, vocab_width
from specviz.lessons.prompts import load_prompts
from specviz.runs import Cancelled, batch_speculative, encode, speculative_generate

from .batching_prediction import interpolate, median, predicted_speedup, shape_cost, shaped_speedup
from .batching_report import format_batching
from .batching_timing import ForwardTimer, median_costs, prefilled, time_feed
from .environment import device_name, is_prepacked, now, transformers_version

BATCHING_FORMAT = "specviz-batching"
BATCHING_VERSION = 4
CURVE_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256)
GPU_CURVE_TOKENS = CURVE_TOKENS + (384, 512, 768, 1024, 1536, 2048, 3072, 4096)
DEFAULT_BATCHES = (1, 2, 4, 8, 16)
DEFAULT_GAMMAS = (1, 2, 3, 4, 6)  # the sweep at each B (the fixed --gamma joins it)
DEFAULT_ROWS = 4  # every B decodes at least these rows (B = 1: four batches of one)
# The draft model drafting gamma every round: the prediction prices its forwards at the rounds' shapes (other drafters
# batch through the same round, but no cost model here prices them; a confidence stop drafts fewer than a shape says).
FIXED = dict(drafter=drafters.MODEL, schedule="constant", draft_confidence=0.0, alternatives=0, lookahead=0)
ENGINE_REPEATS = 3  # the bench's B = 1 through the single-row engine and the batched path, each this many times
RUNS = 3  # the bench's pairs (a plain run, then the method) per method and B: their median is the speed-up


def stop_if(cancel: threading.Event | None) -> None:
    """Between two measurements: a set cancel (the app's Stop, or its session gone) ends the whole run."""
    if cancel is not None and cancel.is_set():
        raise Cancelled("the batching run was stopped")


def forward_curve(
    pair, context: Sequence[int], tokens: Sequence[int], repeats: int = 3, seed: int = 0, cancel=None
) -> list[float]:
    """T(n) for each n in tokens: the target's forward over n new tokens of one row after `context`."""
    width = vocab_width(pair)
    state = prefilled(pair.target, [context], width)
    generator = torch.Generator().manual_seed(seed)
    seconds = []
    for n in tokens:
        stop_if(cancel)
        seconds.append(time_feed(state, width, 1, n, repeats, generator))
    return seconds


def batch_prompts(prompts: Sequence[Sequence[int]], size: int) -> list[list[int]]:
    """The first `size` prompts, cycling through them when there are fewer."""
    return [list(prompts[i % len(prompts)]) for i in range(size)]


def batches_of(prompts: Sequence[Sequence[int]], size: int, rows: int) -> list[list[list[int]]]:
    """Batches of `size` rows, consecutive over the cycled prompts, enough of them to hold at least `rows` rows."""
    count = max(1, -(-rows // size))
    cycled = batch_prompts(prompts, size * count)
    return [cycled[i * size : (i + 1) * size] for i in range(count)]


def run_all(batches: list[list[list[int]]], run: Callable[[list[list[int]]], BatchResult], cancel=None) -> dict:
    """One method over every batch of this B: its tokens, seconds and rounds together, and its tokens per row."""
    results = []
    for batch in batches:
        results.append(run(batch))
        stop_if(cancel)  # a stopped loop returns early: never a measured point
    row_rounds = [n for r in results for n in r.row_rounds]
    seconds, tokens = sum(r.seconds for r in results), sum(r.tokens for r in results)
    return {
        "results": results,
        "token_ids": [ids for r in results for ids in r.token_ids],
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_second": tokens / seconds,
        "rounds": sum(r.rounds for r in results),
        "shapes": [shape for r in results for shape in r.shapes],
        "tokens_per_round": sum(row_rounds) / len(row_rounds) if row_rounds else 1.0,
        "acceptance": expected_acceptance(results) or 0.0,  # Leviathan's a, estimated (not the acceptance rate)
    }


def pooled(plains: list[dict]) -> dict:
    """The plain runs of one B as one: every token over every second (the row's plain rate)."""
    tokens, seconds = sum(p["tokens"] for p in plains), sum(p["seconds"] for p in plains)
    return {"tokens": tokens // len(plains), "seconds": seconds / len(plains), "tokens_per_second": tokens / seconds}


def speculative_entry(method: dict, size: int, costs: dict, acceptance: float | None) -> dict:
    """One speculative method at this B, from its pairs (a plain run, then the method, each pair with this B's
    forwards timed just before it): measured against its plain run and predicted from its timings for the rounds it
    ran (shaped_speedup), each pair on its own, then their medians; given an acceptance, expected in the steady
    state, every round at B rows and gamma drafts: E(a, gamma) T(B) / (gamma t_draft(B) + T_verify(B, gamma)), the
    first draft forward over two tokens per row where some row accepted all (1 - (1 - a^gamma)^B), from the median
    of this B's timings (`costs`)."""
    gamma, pairs = method["gamma"], method["pairs"]
    verify, step, draft = costs["verify"][gamma], costs["target_step_seconds"], costs["draft_step_seconds"]
    first = pairs[0].method  # greedy: every pair decodes the same tokens in the same rounds
    measured = [p.method["tokens_per_second"] / p.plain["tokens_per_second"] for p in pairs]
    predicted = [shaped_speedup(p.method, p.plain, shape_cost({**costs["sizes"], size: p.costs})) for p in pairs]
    tokens, seconds = sum(p.method["tokens"] for p in pairs), sum(p.method["seconds"] for p in pairs)
    entry = {k: v for k, v in first.items() if k not in ("token_ids", "results", "shapes")}
    entry.update(
        gamma=gamma,
        seconds=seconds / len(pairs),
        tokens_per_second=tokens / seconds,
        measured_speedup=median(measured),
        speedups=measured,
        verify_seconds=verify,
        curve_verify_seconds=costs["curve"](size * (gamma + 1)),
        batch_tokens_per_round=first["tokens"] / (size * first["rounds"]),
        predicted_speedup=median(predicted),
        predicted_speedups=predicted,
    )
    if acceptance is not None:  # a round's first draft forward takes two tokens of a row that accepted all
        draft = batched_draft_seconds(acceptance, gamma, size, draft, costs["draft_catch_up_seconds"]) / gamma
        entry["expected_speedup"] = predicted_speedup(expected_tokens(acceptance, gamma), gamma, step, verify, draft)
    return entry


def alone_runs(pair, rows: list[list[int]], config: SpecConfig, cache: dict, cancel=None) -> list[tuple]:
    """Each row's prompt decoded alone (B = 1): (plain, ragged at the fixed gamma), once per distinct prompt."""
    for prompt in rows:
        if tuple(prompt) not in cache:
            plain = batch_plain(pair, [prompt], config, False, cancel)
            cache[tuple(prompt)] = (plain, batch_speculative(pair, [prompt], config, False, RAGGED, cancel))
            stop_if(cancel)
    return [cache[tuple(prompt)] for prompt in rows]


def alone_entry(runs: Sequence[tuple]) -> dict:
    """The rows decoded alone, pooled as run_all pools a batch: tokens per row per round, acceptance."""
    spec = [s for _, s in runs]
    row_rounds = [n for s in spec for n in s.row_rounds]
    return {"tokens_per_round": sum(row_rounds) / len(row_rounds), "acceptance": expected_acceptance(spec) or 0.0}


def engine_speedup(pair, prompt: list[int], config: SpecConfig, cancel=None) -> tuple[int, float, int, float]:
    """One prompt through the single-row engine: (plain tokens, seconds, speculative tokens, seconds), decoding only
    (the prompt pass excluded)."""
    out = []
    for run in (autoregressive_generate, speculative_generate):
        events = run(pair, prompt, config, cancel)
        summary = run_to_end(events)[1]
        stop_if(cancel)
        out += [summary.new_tokens, summary.seconds - summary.prefill_seconds]
    return tuple(out)


def single_row_engine(pair, batches: list[list[list[int]]], config: SpecConfig, batched: list, settings: dict) -> dict:
    """B = 1 through the single-row engine (runs.speculative_generate, the engine's baseline) and through the batched
    path, on the same prompts, `engine_repeats` times each: the batched path's speed-ups are the table's own pairs,
    and more pairs, interleaved with the engine's runs, where there are fewer; each one's spread is the run's noise."""
    cancel, engine, batched = settings.get("cancel"), [], list(batched)
    rates = []
    for repeat in range(settings["engine_repeats"]):
        runs = [engine_speedup(pair, b[0], config, cancel) for b in batches]
        plain_n, plain_s, spec_n, spec_s = (sum(run[i] for run in runs) for i in range(4))
        rates.append((plain_n / plain_s, spec_n / spec_s))
        engine.append(rates[-1][1] / rates[-1][0])
        if repeat >= len(batched):
            plain = run_all(batches, lambda b: batch_plain(pair, b, config, False, cancel), cancel)
            spec = run_all(batches, lambda b: batch_speculative(pair, b, config, False, RAGGED, cancel), cancel)
            batched.append(spec["tokens_per_second"] / plain["tokens_per_second"])
    return {
        "plain_tokens_per_second": median([r[0] for r in rates]),
        "speculative_tokens_per_second": median([r[1] for r in rates]),
        "measured_speedup": median(engine),
        "speedups": engine,
        "batched_speedups": batched,
    }


def best_gamma(entries: Sequence[dict], field: str) -> int:
    """The gamma whose speed-up (measured or predicted) is highest; 0 when none beats plain decoding."""
    best = max(entries, key=lambda e: e[field])
    return best["gamma"] if best[field] > 1.0 else 0


@dataclass(frozen=True)
class Pair:
    """One measurement of a speculative method: this B's forwards timed, a plain run, the method, one after another."""

    costs: dict
    plain: dict
    method: dict


@dataclass
class BatchSize:
    """What one batch size measures: its batches, a timer of their forwards, and every pair run so far."""

    batches: list[list[list[int]]]
    timer: ForwardTimer
    timings: list[dict] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)

    def measure(self, pair, config: SpecConfig, rule: str, runs: int, cancel=None) -> dict:
        """The method `runs` times, each right after a plain run of the same batches and, before that, a timing of
        this B's forwards at its gamma: this CPU's speed drifts by a fifth within minutes, and a burst moves a run
        of a few seconds by as much, so each pair gives its own speed-up and prediction (speculative_entry)."""
        pairs = []
        for _ in range(runs):
            timed = self.timer.costs([config.gamma])
            self.timings.append(timed)
            now = dict(timed, verify={**self.timings[0]["verify"], **timed["verify"]})  # a last, shorter draft's
            plain = run_all(self.batches, lambda b: batch_plain(pair, b, config, False, cancel), cancel)
            spec = run_all(self.batches, lambda b: batch_speculative(pair, b, config, False, rule, cancel), cancel)
            pairs.append(Pair(now, plain, spec))
        self.pairs += pairs
        return {"gamma": config.gamma, "pairs": pairs, "acceptance": pairs[0].method["acceptance"]}


def measure_batch(
    pair, prompts: Sequence[Sequence[int]], size: int, config: SpecConfig, curve: dict, settings: dict
) -> dict:
    """One row of the table: the times at this B, plain, ragged at every gamma, min-cut at the fixed one, and the
    same rows decoded alone."""
    gamma, cancel, runs = config.gamma, settings.get("cancel"), settings["runs"]
    batches = batches_of(prompts, size, settings["rows"])
    here = BatchSize(batches, ForwardTimer(pair, batches[0], settings["repeats"]))
    here.timings.append(here.timer.costs(settings["gammas"]))
    stop_if(cancel)
    fixed = here.measure(pair, config, RAGGED, runs, cancel)
    if size == 1:  # these rows alone are this B's own runs
        first = fixed["pairs"][0]
        runs_alone = zip(first.plain["results"], first.method["results"], strict=True)
        for batch, alone in zip(batches, runs_alone, strict=True):
            settings["alone"].setdefault(tuple(batch[0]), alone)
    sweep = {
        g: fixed if g == gamma else here.measure(pair, replace(config, gamma=g), RAGGED, runs, cancel)
        for g in settings["gammas"]
    }
    cut = here.measure(pair, config, MIN_CUT, runs, cancel)
    alone = alone_runs(pair, [row for batch in batches for row in batch], config, settings["alone"], cancel)
    alone_text = [p.token_ids[0] for p, _ in alone]
    settings["costs"][size] = median_costs(here.timings)  # a later B's rows that finished are priced from these
    curve_at = partial(interpolate, curve["tokens"], curve["seconds"])
    costs = dict(settings["costs"][size], curve=curve_at, sizes=dict(settings["costs"]))
    plain = pooled([p.plain for p in here.pairs])
    gammas = [speculative_entry(sweep[g], size, costs, fixed["acceptance"]) for g in sorted(sweep)]
    ragged = next(e for e in gammas if e["gamma"] == gamma)
    decoded = [run["token_ids"] for p in here.pairs for run in (p.plain, p.method)]
    return {
        "batch": size,
        "batches": len(batches),
        "tokens": plain["tokens"],
        "plain_seconds": plain["seconds"],
        "plain_tokens_per_second": plain["tokens_per_second"],
        "acceptance": fixed["acceptance"],
        "alone": alone_entry(alone),
        "greedy_identical": all(ids == alone_text for ids in decoded) if config.greedy else None,
        "curve_step_seconds": costs["curve"](size),
        "ragged": ragged,
        "min_cut": speculative_entry(cut, size, costs, None),
        "single_row_engine": single_row_engine(pair, batches, config, ragged["speedups"], settings)
        if size == 1
        else None,
        "gammas": gammas,
        "best_gamma": best_gamma(gammas, "measured_speedup"),
        "predicted_best_gamma": best_gamma(gammas, "expected_speedup"),
        "target_step_seconds": costs["target_step_seconds"],
        "verify_seconds": costs["verify"][gamma],
        "draft_step_seconds": costs["draft_step_seconds"],
        "draft_catch_up_seconds": costs["draft_catch_up_seconds"],
    }


def run_batching(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    batches: Sequence[int] = DEFAULT_BATCHES,
    curve_tokens: Sequence[int] = CURVE_TOKENS,
    repeats: int = 3,
    log: Callable[[str], None] = lambda message: None,
    gammas: Sequence[int] = DEFAULT_GAMMAS,
    rows: int = DEFAULT_ROWS,
    cancel: threading.Event | None = None,
    engine_repeats: int = 1,
    runs: int = 1,
) -> dict:
    """The whole measurement as a JSON-ready document (format specviz-batching): `runs` pairs (a plain run, then the
    method) per method and B. A set `cancel` (checked between two rounds or two timings) raises runs.Cancelled: a
    stopped run has no document."""
    config = replace(config, **FIXED).validate()
    sweep = sorted({*gammas, config.gamma})
    log(f"T(n): the target over n = {curve_tokens[0]}..{curve_tokens[-1]} new tokens")
    seconds = forward_curve(pair, prompts[0], curve_tokens, repeats, cancel=cancel)
    curve = {"tokens": list(curve_tokens), "seconds": seconds}
    warm = replace(config, max_new_tokens=min(4, config.max_new_tokens))
    batch_speculative(pair, batch_prompts(prompts, min(2, max(batches))), warm, cancel=cancel)  # first-call costs
    table = []
    settings = {"rows": rows, "repeats": repeats, "gammas": sweep, "cancel": cancel, "alone": {}, "costs": {}}
    settings.update(engine_repeats=engine_repeats, runs=runs)
    for size in batches:
        log(
            f"B = {size}: costs; plain, ragged at gamma {', '.join(map(str, sweep))}, min-cut at {config.gamma}, "
            f"{runs} time{'s' if runs > 1 else ''} each"
        )
        table.append(measure_batch(pair, prompts, size, config, curve, settings))
    return {
        "format": BATCHING_FORMAT,
        "version": BATCHING_VERSION,
        "device": pair.device.type,
        "device_name": device_name(pair.device),
        "threads": torch.get_num_threads(),
        "target": pair.names.get("target", "?"),
        "draft": pair.names.get("draft", "?"),
        "dtype": pair.names.get("dtype", "?"),
        "draft_quantized": pair.names.get("draft_quantized", "?"),
        "target_prepacked": is_prepacked(pair.target),
        "gamma": config.gamma,
        "gammas": sweep,
        "rows_per_batch_size": rows,
        "runs": runs,
        "temperature": config.temperature,
        "max_new_tokens": config.max_new_tokens,
        "prompts": len(prompts),
        "prompt_tokens": [len(p) for p in prompts],
        "curve": curve,
        "rows": table,
        "break_even_batch": break_even(table),
        "torch": torch.__version__,
        "transformers": transformers_version(),
        "measured_at": now(),
    }


def break_even(rows: Sequence[dict]) -> int | None:
    """The smallest measured B at which ragged speculation at the fixed gamma no longer pays (below 1x), or None."""
    return next((row["batch"] for row in rows if row["ragged"]["measured_speedup"] < 1.0), None)


def add_batch_arguments(parser) -> None:
    """bench's batched mode: --batch SIZES switches it on."""
    parser.add_argument(
        "--batch",
        default=None,
        metavar="SIZES",
        help="batched mode, e.g. 1,2,4,8,16: T(n); plain, ragged and min-cut at each batch size; gamma per B",
    )
    parser.add_argument(
        "--batch-out", default=None, metavar="PATH", help="batched mode's JSON (default: assets/batching_<device>.json)"
    )
    parser.add_argument("--batch-repeats", type=int, default=3, help="batched mode: timed samples per forward")
    parser.add_argument(
        "--batch-gammas",
        default=",".join(map(str, DEFAULT_GAMMAS)),
        metavar="GAMMAS",
        help="batched mode: the draft lengths tried at each batch size (the fixed --gamma joins them)",
    )
    parser.add_argument(
        "--batch-rows", type=int, default=DEFAULT_ROWS, help="batched mode: rows decoded at every batch size, at least"
    )
    parser.add_argument(
        "--batch-runs",
        type=int,
        default=RUNS,
        help="batched mode: times each method runs at each batch size, each right after a plain run (the median)",
    )
    parser.add_argument(
        "--batch-engine-repeats",
        type=int,
        default=ENGINE_REPEATS,
        help="batched mode: times B = 1 runs through the single-row engine and the batched path (their noise)",
    )


def parse_batches(text: str) -> tuple[int, ...]:
    """ "1,2,4,8,16" -> (1, 2, 4, 8, 16): distinct sizes from 1 to MAX_BATCH, ascending."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--batch takes comma-separated whole numbers, got {text!r}") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > MAX_BATCH:
        raise ConfigError(f"batch sizes must be between 1 and {MAX_BATCH}, got {text!r}")
    return tuple(sizes)


def parse_gammas(text: str) -> tuple[int, ...]:
    """ "1,2,4" -> (1, 2, 4): distinct draft lengths from 1 to GAMMA_LIMIT, ascending."""
    try:
        gammas = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--batch-gammas takes comma-separated whole numbers, got {text!r}") from None
    if not gammas or gammas[0] < 1 or gammas[-1] > GAMMA_LIMIT:
        raise ConfigError(f"draft lengths must be between 1 and {GAMMA_LIMIT}, got {text!r}")
    return tuple(gammas)


def main(args, pair_loader: Callable[[], tuple], settings: SpecConfig, log: Callable[[str], None]) -> int:
    """python -m specviz bench --batch 1,2,4,8,16: measure, print the table, write the JSON."""
    batches, gammas = parse_batches(args.batch), parse_gammas(args.batch_gammas)
    if not 1 <= args.batch_rows <= MAX_BATCH:
        raise ConfigError(f"--batch-rows must be between 1 and {MAX_BATCH}, got {args.batch_rows}")
    if args.threads:
        torch.set_num_threads(args.threads)
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    by_category = list(load_prompts(args.prompts, categories, args.per_category).values())
    # round robin over the categories, so that every batch mixes them
    texts = [ps[i] for i in range(max(map(len, by_category))) for ps in by_category if i < len(ps)]
    from specviz.models.loading import resolve_device

    default = ROOT / "assets" / f"batching_{resolve_device(args.device).type}.json"
    path = output_path(args.batch_out or default, "--batch-out", make_parents=True)  # checked before the loading
    pair, _ = pair_loader()
    prompts = [encode(pair, text, chat=not args.raw) for text in texts]
    doc = run_batching(
        pair,
        prompts,
        settings,
        batches,
        repeats=args.batch_repeats,
        log=log,
        gammas=gammas,
        rows=args.batch_rows,
        engine_repeats=args.batch_engine_repeats,
        runs=args.batch_runs,
    )
    print(format_batching(doc))
    with writing(path, "--batch-out"):
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"\nJSON: {path}")
    return 0
