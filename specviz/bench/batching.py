"""The batching benchmark: what the speed-up of speculative decoding becomes as the batch grows.

Measured, per device: T(n), the target's KV-cached forward over n new tokens (one row), n = 1..256; per batch size
B the target's forward over [B, 1] (a plain step) and over [B, gamma + 1] (a verify), and the draft's step over
[B, 1]; then the real batched loops (specviz.decoding.batch) at each B, plain and speculative, greedy, to the same
length.
Predicted speed-up at B, from the measured times and the measured round length L (tokens per row per round, the
cut at the shortest accepted prefix included):
    speed-up(B) = L * T(B) / (gamma * t_draft(B) + T(B * (gamma + 1)))
(docs/DESIGN.md, "Batching").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from specviz import ROOT
from specviz.cli.args import output_path, writing
from specviz.decoding.batch import MAX_BATCH, BatchCache, batch_plain, batch_speculative, left_padded
from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.engine import synchronize, vocab_width
from specviz.lessons.prompts import load_prompts
from specviz.runs import encode

from .environment import device_name, is_prepacked, now, transformers_version

BATCHING_FORMAT = "specviz-batching"
BATCHING_VERSION = 1
CURVE_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256)
GPU_CURVE_TOKENS = CURVE_TOKENS + (384, 512, 768, 1024, 1536, 2048, 3072, 4096)
DEFAULT_BATCHES = (1, 2, 4, 8, 16)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@torch.inference_mode()
def time_feed(state: BatchCache, width: int, rows: int, tokens: int, repeats: int, generator: torch.Generator) -> float:
    """Median seconds of state.feed over [rows, tokens] random ids after its cache (one warm-up first); the cache is
    cropped back after each."""
    times = []
    for _ in range(repeats + 1):
        ids = torch.randint(1, width, (rows, tokens), generator=generator)
        synchronize(state.model.device)
        start = time.perf_counter()
        state.feed(ids)
        synchronize(state.model.device)
        times.append(time.perf_counter() - start)
        state.truncate(state.length - tokens)
    return median(times[1:])


def prefilled(model, prompts: Sequence[Sequence[int]], width: int) -> BatchCache:
    ids, pads = left_padded(prompts)
    state = BatchCache(model, width, pads)
    # Nothing reads the prefill's logits: one column, not rows x tokens x vocabulary x 4 bytes (issue 44: 78 GB for
    # 64 rows of 2,000 tokens on the built-in pair)
    state.feed(ids, keep=1)
    return state


def forward_curve(pair, context: Sequence[int], tokens: Sequence[int], repeats: int = 3, seed: int = 0) -> list[float]:
    """T(n) for each n in tokens: the target's forward over n new tokens of one row after `context`."""
    width = vocab_width(pair)
    state = prefilled(pair.target, [context], width)
    generator = torch.Generator().manual_seed(seed)
    return [time_feed(state, width, 1, n, repeats, generator) for n in tokens]


def batch_costs(pair, prompts: Sequence[Sequence[int]], gamma: int, repeats: int = 3, seed: int = 0) -> dict:
    """At these B prompts: the target's plain step [B, 1], its verify [B, gamma + 1] and the draft's step [B, 1]."""
    width = vocab_width(pair)
    generator = torch.Generator().manual_seed(seed)
    target = prefilled(pair.target, prompts, width)
    draft = prefilled(pair.draft, prompts, width)
    rows = len(prompts)
    return {
        "target_step_seconds": time_feed(target, width, rows, 1, repeats, generator),
        "verify_seconds": time_feed(target, width, rows, gamma + 1, repeats, generator),
        "draft_step_seconds": time_feed(draft, width, rows, 1, repeats, generator),
    }


def interpolate(tokens: Sequence[int], seconds: Sequence[float], n: float) -> float:
    """T(n) between measured points (linear), and beyond the last one along the last segment."""
    if n <= tokens[0]:
        return seconds[0]
    for i in range(1, len(tokens)):
        if n <= tokens[i]:
            n0, n1, t0, t1 = tokens[i - 1], tokens[i], seconds[i - 1], seconds[i]
            return t0 + (t1 - t0) * (n - n0) / (n1 - n0)
    (n0, t0), (n1, t1) = (tokens[-2], seconds[-2]), (tokens[-1], seconds[-1])
    return t1 + (t1 - t0) * (n - n1) / (n1 - n0)


def predicted_speedup(tokens_per_round: float, gamma: int, step: float, verify: float, draft: float) -> float:
    """L * T(B) / (gamma * t_draft(B) + T(B (gamma + 1))): a round yields L tokens per row for gamma draft steps and
    one verify; plain decoding yields one per row per step."""
    return tokens_per_round * step / (gamma * draft + verify)


def batch_prompts(prompts: Sequence[Sequence[int]], size: int) -> list[list[int]]:
    """The first `size` prompts, cycling through them when there are fewer."""
    return [list(prompts[i % len(prompts)]) for i in range(size)]


def measure_batch(pair, prompts: Sequence[Sequence[int]], config: SpecConfig, curve: dict, repeats: int) -> dict:
    """One row of the table: the times at this B, both real loops, the measured and predicted speed-ups."""
    size, gamma = len(prompts), config.gamma
    costs = batch_costs(pair, prompts, gamma, repeats)
    plain = batch_plain(pair, prompts, config, stop_at_eos=False)
    spec = batch_speculative(pair, prompts, config, stop_at_eos=False)
    length = spec.tokens_per_round
    t_step = interpolate(curve["tokens"], curve["seconds"], size)
    t_verify = interpolate(curve["tokens"], curve["seconds"], size * (gamma + 1))
    return {
        "batch": size,
        "tokens": plain.tokens,
        "tokens_per_round": length,
        "rounds": spec.rounds,
        "greedy_identical": plain.token_ids == spec.token_ids if config.greedy else None,
        "plain_seconds": plain.seconds,
        "speculative_seconds": spec.seconds,
        "plain_tokens_per_second": plain.tokens / plain.seconds,
        "speculative_tokens_per_second": spec.tokens / spec.seconds,
        "measured_speedup": (spec.tokens / spec.seconds) / (plain.tokens / plain.seconds),
        "curve_step_seconds": t_step,
        "curve_verify_seconds": t_verify,
        "predicted_speedup": predicted_speedup(length, gamma, t_step, t_verify, costs["draft_step_seconds"]),
        "predicted_speedup_batch_shapes": predicted_speedup(
            length, gamma, costs["target_step_seconds"], costs["verify_seconds"], costs["draft_step_seconds"]
        ),
        **costs,
    }


def run_batching(
    pair,
    prompts: Sequence[Sequence[int]],
    config: SpecConfig,
    batches: Sequence[int] = DEFAULT_BATCHES,
    curve_tokens: Sequence[int] = CURVE_TOKENS,
    repeats: int = 3,
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """The whole measurement as a JSON-ready document (format specviz-batching)."""
    config = replace(config, schedule="constant", alternatives=0, lookahead=0).validate()
    longest = max(batches)
    log(f"T(n): the target over n = {curve_tokens[0]}..{curve_tokens[-1]} new tokens")
    seconds = forward_curve(pair, prompts[0], curve_tokens, repeats)
    curve = {"tokens": list(curve_tokens), "seconds": seconds}
    warm = replace(config, max_new_tokens=min(4, config.max_new_tokens))
    batch_speculative(pair, batch_prompts(prompts, min(2, longest)), warm)  # warm-up: first-call costs
    rows = []
    for size in batches:
        log(f"B = {size}: costs, plain and speculative loops")
        rows.append(measure_batch(pair, batch_prompts(prompts, size), config, curve, repeats))
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
        "temperature": config.temperature,
        "max_new_tokens": config.max_new_tokens,
        "prompts": len(prompts),
        "prompt_tokens": [len(p) for p in prompts],
        "curve": curve,
        "rows": rows,
        "break_even_batch": break_even(rows),
        "torch": torch.__version__,
        "transformers": transformers_version(),
        "measured_at": now(),
    }


def break_even(rows: Sequence[dict]) -> int | None:
    """The smallest measured B at which speculation no longer pays (measured speed-up below 1), or None."""
    return next((row["batch"] for row in rows if row["measured_speedup"] < 1.0), None)


def format_batching(doc: dict) -> str:
    lines = [
        f"Batched speculative decoding ({doc['device_name']}, {doc['threads']} threads; {doc['target']} <- "
        f"{doc['draft']}; gamma {doc['gamma']}, {doc['max_new_tokens']} new tokens per row, temperature "
        f"{doc['temperature']})",
        "    B  tok/round  plain tok/s  spec tok/s  measured  predicted  (batch shapes)  T(B) s  T(B(g+1)) s  "
        "draft(B) s  identical",
    ]
    for row in doc["rows"]:
        lines.append(
            f"  {row['batch']:3d}  {row['tokens_per_round']:9.2f}  {row['plain_tokens_per_second']:11.2f}  "
            f"{row['speculative_tokens_per_second']:10.2f}  {row['measured_speedup']:7.2f}x  "
            f"{row['predicted_speedup']:8.2f}x  {row['predicted_speedup_batch_shapes']:13.2f}x  "
            f"{row['curve_step_seconds']:6.3f}  {row['curve_verify_seconds']:11.3f}  {row['draft_step_seconds']:10.3f}"
            f"  {row['greedy_identical']}"
        )
    lines.append(f"  break-even: {doc['break_even_batch'] or 'not reached'} (first B with measured speed-up < 1)")
    lines.append("  T(n), the target's forward over n new tokens of one row:")
    t1 = doc["curve"]["seconds"][0]
    for n, t in zip(doc["curve"]["tokens"], doc["curve"]["seconds"], strict=True):
        lines.append(f"    n = {n:5d}  {t:8.4f} s  {t / t1:7.2f} x T(1)  {t / n * 1000:8.2f} ms per token")
    return "\n".join(lines)


def add_batch_arguments(parser) -> None:
    """bench's batched mode: --batch SIZES switches it on."""
    parser.add_argument(
        "--batch",
        default=None,
        metavar="SIZES",
        help="batched mode, e.g. 1,2,4,8,16: T(n), batched plain vs speculative at each batch size (fixed --gamma)",
    )
    parser.add_argument(
        "--batch-out", default=None, metavar="PATH", help="batched mode's JSON (default: assets/batching_<device>.json)"
    )
    parser.add_argument("--batch-repeats", type=int, default=3, help="batched mode: timed samples per forward")


def parse_batches(text: str) -> tuple[int, ...]:
    """ "1,2,4,8,16" -> (1, 2, 4, 8, 16): distinct sizes from 1 to MAX_BATCH, ascending."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--batch takes comma-separated whole numbers, got {text!r}") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > MAX_BATCH:
        raise ConfigError(f"batch sizes must be between 1 and {MAX_BATCH}, got {text!r}")
    return tuple(sizes)


def main(args, pair_loader: Callable[[], tuple], settings: SpecConfig, log: Callable[[str], None]) -> int:
    """python -m specviz bench --batch 1,2,4,8,16: measure, print the table, write the JSON."""
    batches = parse_batches(args.batch)
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
    doc = run_batching(pair, prompts, settings, batches, repeats=args.batch_repeats, log=log)
    print(format_batching(doc))
    with writing(path, "--batch-out"):
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"\nJSON: {path}")
    return 0
