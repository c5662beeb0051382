"""Command line: python -m specviz prepare | generate | bench | train-heads.

A mistake a user can make (a bad setting, an empty prompt, a model that cannot be loaded) prints
one line on stderr and exits with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from specviz.bench import add_arguments as add_bench_arguments
from specviz.bench import main as bench_main
from specviz.cli.args import (
    OneLineParser,
    add_config_arguments,
    add_pair_arguments,
    bound,
    bounded_float,
    bounded_int,
    config_from,
    output_path,
    pair_spec,
    writing,
)
from specviz.errors import UserError
from specviz.progress import ConsoleProgress
from specviz.runs import PromptError, check_length
from specviz.training.cli import RANGES as TRAIN_RANGES
from specviz.training.cli import add_arguments as add_train_heads_arguments


def cmd_prepare(args: argparse.Namespace) -> int:
    from specviz.models.builtin import prepare_builtin

    target_dir, draft_dir = prepare_builtin(progress=ConsoleProgress())
    print(f"built-in pair ready:\n  target {target_dir}\n  draft  {draft_dir}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from specviz.models.loading import load_pair
    from specviz.runs import encode, run_trace

    config = config_from(args)
    # every check a user's input can fail runs before the models load (seconds to minutes)
    if not args.prompt or not args.prompt.strip():
        raise PromptError("the prompt is empty: pass --prompt TEXT")
    check_length(args.prompt)
    trace_path = output_path(args.save_trace, "--save-trace") if args.save_trace else None
    pair = load_pair(pair_spec(args), progress=None if args.json else ConsoleProgress())
    ids = encode(pair, args.prompt, chat=not args.raw)
    trace = run_trace(pair, args.prompt, config, baseline=args.baseline, prompt_ids=ids)
    if trace_path is not None:
        from specviz.traces.trace import save_trace

        with writing(trace_path, "--save-trace"):
            save_trace(trace, trace_path)
    if args.json:
        json.dump(_json_document(trace), sys.stdout, ensure_ascii=False)
        print()
    else:
        _print_run(trace)
    return 0


def _json_document(trace) -> dict:
    from specviz.runs import speedup

    s = trace.summary
    summary = {
        key: getattr(s, key)
        for key in (
            "new_tokens",
            "rounds",
            "acceptance_rate",
            "mean_accepted_per_round",
            "seconds",
            "tokens_per_second",
            "prefill_seconds",
            "draft_seconds",
            "verify_seconds",
            "finish_reason",
        )
    }
    document = {
        "text": s.text,
        "token_ids": list(s.token_ids),
        "rounds": [asdict(r) for r in trace.rounds],
        "summary": summary,
        "config": trace.config.to_dict(),
        "pair": trace.pair,
    }
    if trace.baseline_summary is not None:
        b = trace.baseline_summary
        document["baseline"] = {
            "text": b.text,
            "token_ids": list(b.token_ids),
            "seconds": b.seconds,
            "tokens_per_second": b.tokens_per_second,
        }
        document["speedup"] = speedup(trace)
    return document


def _print_run(trace) -> None:
    from specviz.drafters import drafter_class
    from specviz.runs import speedup

    s, config = trace.summary, trace.config
    drafter = drafter_class(config.drafter).title.format(draft=trace.pair.get("draft"))
    print(s.text)
    print(f"\n--- speculative ({trace.pair.get('target')} <- {drafter}, {trace.pair.get('device')}) ---")
    print(
        f"{s.new_tokens} tokens in {s.rounds} rounds, acceptance {s.acceptance_rate:.2f}, "
        f"{s.mean_accepted_per_round:.2f} accepted per round, {s.tokens_per_second:.2f} tok/s ({s.finish_reason})"
    )
    if config.alternatives and any(r.tree for r in trace.rounds):
        nodes, kept = sum(len(r.tree) for r in trace.rounds), sum(len(r.tree_path) for r in trace.rounds)
        rounds = sum(bool(r.tree_path) for r in trace.rounds)
        print(f"token trees: {nodes} candidates off the chain, {kept} kept in {rounds} of {s.rounds} rounds")
    elif config.alternatives:
        kept = sum(r.kept_alternative is not None for r in trace.rounds)
        print(f"alternatives: {kept} of {s.rounds} rounds kept one in place of a rejected last draft token")
    if trace.baseline_summary is not None:
        b = trace.baseline_summary
        same = "identical" if b.token_ids == s.token_ids else "different"
        print(f"baseline (target alone): {b.tokens_per_second:.2f} tok/s; speed-up {speedup(trace):.2f}x; texts {same}")


def cmd_bench(args: argparse.Namespace) -> int:
    return bench_main(args)


def cmd_train_heads(args: argparse.Namespace) -> int:
    from specviz.models.loading import load_pair
    from specviz.training.cli import main as train_heads_main

    return train_heads_main(args, load_pair, pair_spec)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specviz", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("prepare", help="assemble, verify and convert the built-in model pair (once)")
    generate = commands.add_parser("generate", help="one speculative run (and the baseline with --baseline)")
    generate.add_argument("--prompt", required=True)
    generate.add_argument("--raw", action="store_true", help="plain continuation, no chat template")
    generate.add_argument("--baseline", action="store_true", help="also run the target alone and report the speed-up")
    generate.add_argument("--json", action="store_true", help="print one JSON document")
    generate.add_argument(
        "--save-trace", metavar="PATH", help="save the whole run as a trace JSON (replayable in the app)"
    )
    add_pair_arguments(generate)
    add_config_arguments(generate)
    bench = commands.add_parser("bench", help="benchmark: target alone vs ours vs transformers' assisted generation")
    add_pair_arguments(bench)
    add_bench_arguments(bench)
    train_heads = commands.add_parser("train-heads", help="train Medusa heads on the target (self-distillation)")
    add_pair_arguments(train_heads)
    add_train_heads_arguments(train_heads)
    bound(
        train_heads,
        {dest: bounded_int(lo, hi) for dest, (lo, hi) in TRAIN_RANGES.items()}
        | {"lr": bounded_float(0, 1, lo_open=True, hi_open=True)},
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a refused argument (its one line is printed) or --help: its exit status
        return exc.code if isinstance(exc.code, int) else 2
    handlers = {"prepare": cmd_prepare, "generate": cmd_generate, "bench": cmd_bench, "train-heads": cmd_train_heads}
    try:
        return handlers[args.command](args)
    except (UserError, FileNotFoundError) as exc:
        print(f"specviz: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specviz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
