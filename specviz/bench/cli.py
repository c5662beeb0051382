"""python -m specviz bench: its arguments, and the run from loading the pair to writing the JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from specviz import ROOT
from specviz.cli.args import add_config_arguments, bound, bounded_int, config_from, output_path, pair_spec, writing
from specviz.decoding.batch import MAX_BATCH
from specviz.decoding.config import GAMMA_LIMIT, ConfigError, SpecConfig
from specviz.lessons.prompts import DEFAULT_PROMPTS, load_prompts
from specviz.progress import ConsoleProgress

from .batching import add_batch_arguments
from .curve import CURVE_GAMMAS, format_curve
from .environment import is_prepacked
from .methods import DEFAULT_METHODS, METHODS
from .report import format_table
from .run import BenchSettings, run_benchmark

CATEGORIES = ("code", "prose", "translation", "repetition", "math")
# Our settings that the benchmark uses unless told otherwise: the tuned configuration.
MAX_PER_CATEGORY = 10_000  # prompts per category
MAX_REPEATS = 20  # runs per prompt and method (BenchSettings checks the same), samples per forward
MAX_THREADS = 1024
BENCH_DEFAULTS = dict(gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, alternatives=2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", default=str(DEFAULT_PROMPTS), help='JSON file {"category": [prompt, ...]}')
    parser.add_argument(
        "--categories",
        default=",".join(CATEGORIES),
        help="comma-separated categories of the prompt file (default: all five)",
    )
    parser.add_argument(
        "--per-category",
        type=bounded_int(1, MAX_PER_CATEGORY),
        default=None,
        help="use only the first N prompts of each category",
    )
    add_config_arguments(parser, defaults=SpecConfig(**BENCH_DEFAULTS))
    parser.add_argument(
        "--repeats",
        type=bounded_int(1, MAX_REPEATS),
        default=1,
        help="times every prompt is run per method (--stream: every request, per drafter, interleaved)",
    )
    parser.add_argument(
        "--aggregate",
        choices=["min", "mean"],
        default="min",
        help="over the repeats, per prompt and method: the least disturbed run (min) or all (mean)",
    )
    parser.add_argument(
        "--methods",
        default=",".join(DEFAULT_METHODS),
        help=f"comma-separated, from {', '.join(METHODS)} (baseline is required)",
    )
    _mode_arguments(parser)
    _engine_arguments(parser)
    parser.add_argument(
        "--json", default=None, metavar="PATH", help="where to write the JSON (default: out/bench-<time>.json)"
    )
    parser.add_argument(
        "--metrics-out",
        default=None,
        metavar="PATH",
        help="also write the drafters' counters as Prometheus text in vLLM's names (vllm:spec_decode_*)",
    )
    add_batch_arguments(parser)
    bound(  # batching's numbers, each in the range bench checks
        parser,
        {
            "batch_repeats": bounded_int(1, MAX_REPEATS),
            "batch_rows": bounded_int(1, MAX_BATCH),
            "batch_runs": bounded_int(1, 10),
            "batch_engine_repeats": bounded_int(1, MAX_REPEATS),
        },
    )
    parser.add_argument(
        "--curve-out",
        default=None,
        metavar="PATH",
        help="also write the verify-cost curve here (default for the built-in pair: "
        "assets/verify_curve_<device>.json; 'none' to skip)",
    )


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    """How the methods run: warm-up, the prompt's pass, the template, the target's kernels, compile, threads."""
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument(
        "--no-fuse-prompt",
        action="store_true",
        help="give the prompt its own forward pass in our methods (default: fused into the first round)",
    )
    parser.add_argument("--raw", action="store_true", help="plain continuation, no chat template")
    parser.add_argument(
        "--no-prepack",
        action="store_true",
        help="keep MKL's linear layers in the float32 target on CPU (default: oneDNN prepacked weights)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="static KV cache + torch.compile for the one-token steps of the target and the draft "
        "(CUDA graphs on a GPU; for ours and the baseline, not transformers' methods; "
        "--alternatives is then off: a compiled step takes no token-tree mask)",
    )
    parser.add_argument(
        "--threads", type=bounded_int(1, MAX_THREADS), default=None, help="torch threads (default: torch's own choice)"
    )
    parser.add_argument(
        "--draft-vocabulary",
        type=bounded_int(256, 65536),
        default=None,
        metavar="K",
        help="the draft proposes only the K most frequent ids (its LM head keeps their rows; default: all ids)",
    )
    parser.add_argument(
        "--curve-gammas",
        type=bounded_int(0, GAMMA_LIMIT),
        default=CURVE_GAMMAS,
        help="largest g of the verify-cost curve",
    )


def _mode_arguments(parser: argparse.ArgumentParser) -> None:
    """The modes that print another table than the methods' (--batch has its own, in bench/batching.py)."""
    parser.add_argument(
        "--stream",
        default=None,
        metavar="FILE",
        help="replay a stream of requests (assets/streams/*.json, or a prompt file) through the target alone, the "
        "draft model, the traffic drafter and the controller, and print the per-request curve",
    )
    parser.add_argument(
        "--compare-drafters",
        default=None,
        metavar="NAMES",
        help="instead of the methods' table: the baseline and our speculative decoding with each of these drafters "
        "(comma-separated, from model, ngram, medusa, eagle) on the same prompts, in one table",
    )


def _settings(args: argparse.Namespace) -> BenchSettings:
    config = replace(config_from(args), fuse_prompt=not args.no_fuse_prompt)
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    return BenchSettings(
        config=config,
        methods=methods,
        repeats=args.repeats,
        warmup=not args.no_warmup,
        chat=not args.raw,
        curve_gammas=args.curve_gammas,
        aggregate=args.aggregate,
    ).validate()


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _load(args: argparse.Namespace):
    from specviz.models.loading import load_pair

    started = time.perf_counter()
    spec = replace(pair_spec(args), prepack_target=not args.no_prepack, draft_vocabulary=args.draft_vocabulary)
    pair = load_pair(spec, progress=ConsoleProgress())
    load_seconds = time.perf_counter() - started
    if args.compile:
        from specviz.decoding.kvcache import enable_compiled_decoding

        models = [pair.target]
        # torch.compile does not trace the CPU's int8 dynamic-quantized draft: that one stays eager
        if pair.draft is not None and pair.names.get("draft_quantized") != "int8":
            models.append(pair.draft)
        for model in models:
            enable_compiled_decoding(model)
        _log("compiled decoding on: the warm-up compiles (tens of seconds)")
    kernels = "prepacked for oneDNN" if is_prepacked(pair.target) else "as loaded"
    _log(
        f"pair loaded in {load_seconds:.1f} s ({pair.names.get('target')} <- {pair.names.get('draft')}, "
        f"{pair.device}; target linear layers {kernels})"
    )
    return pair, load_seconds


def _curve_path(args: argparse.Namespace) -> Path | None:
    """--curve-out; for the built-in pair by default the app's curve file of the device it will run on."""
    if args.curve_out is not None and args.curve_out.lower() == "none":
        return None
    if args.curve_out is not None:
        return output_path(args.curve_out, "--curve-out", make_parents=True)
    if args.target != "builtin":
        return None
    from specviz.models.loading import resolve_device

    device = resolve_device(args.device)
    return output_path(ROOT / "assets" / f"verify_curve_{device.type}.json", "--curve-out", make_parents=True)


def stream_main(args: argparse.Namespace) -> int:
    """--stream FILE: the per-request curve (bench/stream.py), printed and written as JSON."""
    from .stream import format_stream, load_stream, run_stream, summarize

    name, requests = load_stream(args.stream, args.per_category)
    settings = BenchSettings(  # checked before minutes of loading; --methods and --drafter play no part here
        config=replace(config_from(args), fuse_prompt=not args.no_fuse_prompt),
        methods=("baseline",),
        repeats=args.repeats,
        warmup=not args.no_warmup,
        chat=not args.raw,
        aggregate=args.aggregate,
    ).validate()
    config = settings.config
    json_path = output_path(
        args.json or ROOT / "out" / f"stream-{time.strftime('%Y%m%d-%H%M%S')}.json", "--json", make_parents=True
    )
    if args.threads:
        torch.set_num_threads(args.threads)
    pair, load_seconds = _load(args)
    if settings.warmup:
        run_stream(
            pair, requests[:1], replace(config, max_new_tokens=min(8, config.max_new_tokens)), chat=settings.chat
        )
    doc = {"stream": name, "file": str(args.stream), "config": config.to_dict(), "pair": pair.names}
    doc.update(repeats=settings.repeats, aggregate=settings.aggregate)

    def write(rows: list) -> None:  # after every request, so a stopped run keeps what it measured
        doc.update(load_seconds=load_seconds, requests=rows, summary=summarize(rows))
        with writing(json_path, "--json"):
            json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")

    rows = run_stream(
        pair,
        requests,
        config,
        chat=settings.chat,
        log=_log,
        on_row=write,
        repeats=settings.repeats,
        aggregate=settings.aggregate,
    )
    print(format_stream(rows, doc["summary"]))
    print(f"\nJSON: {json_path}")
    _write_metrics(args, doc)
    return 0


def _write_metrics(args: argparse.Namespace, doc: dict) -> None:
    """--metrics-out: the document's drafting counters in the serving engines' Prometheus names (metrics_out.py)."""
    from .metrics_out import metrics_summary, write_metrics

    if args.metrics_out:
        path = Path(args.metrics_out).expanduser()
        with writing(path, "--metrics-out"):
            write_metrics(path, doc)
        print(f"Prometheus metrics: {path}")
        print(metrics_summary(doc))


def check_modes(args: argparse.Namespace) -> None:
    """What needs no model, before anything loads: a mode named with nothing after it, --threads and
    --batch-repeats out of range (torch would refuse the one, the batch's table index the other, after loading)."""
    for flag in ("--stream", "--batch", "--compare-drafters"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and not value.strip():
            raise ConfigError(f"{flag} needs a value; leave it out for the methods' benchmark")
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise ConfigError(f"--threads must be between 1 and {MAX_THREADS}, got {args.threads}")
    if args.batch is not None and args.metrics_out:
        raise ConfigError("--metrics-out is not written by --batch (the methods' bench, --compare-drafters, --stream)")
    if args.batch is not None and args.batch_repeats < 1:
        raise ConfigError(f"--batch-repeats must be 1 or more, got {args.batch_repeats}")
    if args.batch is not None and args.batch_engine_repeats < 1:
        raise ConfigError(f"--batch-engine-repeats must be 1 or more, got {args.batch_engine_repeats}")
    if args.batch is not None and not 1 <= args.batch_runs <= 10:
        raise ConfigError(f"--batch-runs must be between 1 and 10, got {args.batch_runs}")


def main(args: argparse.Namespace) -> int:
    check_modes(args)
    if args.metrics_out:  # checked before minutes of loading and running
        output_path(args.metrics_out, "--metrics-out", make_parents=True)
    if args.stream is not None:
        return stream_main(args)
    if args.batch is not None:
        from .batching import main as batching_main

        return batching_main(args, lambda: _load(args), config_from(args), _log)
    settings = _settings(args)
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    prompts = load_prompts(args.prompts, categories, args.per_category)
    default_json = ROOT / "out" / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    # the output paths are checked before minutes of loading and running
    json_path = output_path(args.json or default_json, "--json", make_parents=True)
    curve_path = _curve_path(args)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.compare_drafters is not None:
        return _compare(args, settings, prompts, json_path)
    pair, load_seconds = _load(args)
    doc = run_benchmark(pair, prompts, settings, _log)
    doc["load_seconds"] = load_seconds
    print(format_curve(doc["verify_curve"]))
    print()
    print(format_table(doc))

    with writing(json_path, "--json"):
        json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"\nJSON: {json_path}")
    _write_metrics(args, doc)
    if curve_path is not None:
        with writing(curve_path, "--curve-out"):
            curve_path.write_text(json.dumps(doc["verify_curve"], indent=1), encoding="utf-8")
        print(f"verify-cost curve: {curve_path}")
    return 0


def _compare(args: argparse.Namespace, settings: BenchSettings, prompts: dict, json_path: Path) -> int:
    from .drafters import check_drafters, compare_drafters, format_drafter_table

    names = [n.strip() for n in args.compare_drafters.split(",") if n.strip()]
    check_drafters(names, pair_has_draft=True)  # the names, before minutes of loading
    pair, _ = _load(args)
    names = check_drafters(names, pair_has_draft=pair.draft is not None)
    doc = compare_drafters(pair, prompts, settings.config, names, chat=settings.chat, log=_log)
    print(format_drafter_table(doc))
    with writing(json_path, "--json"):
        json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"\nJSON: {json_path}")
    _write_metrics(args, doc)
    return 0
