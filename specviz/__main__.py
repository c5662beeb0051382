"""Command line: python -m specviz prepare | generate | bench.

A mistake a user can make (a bad setting, an empty prompt, a model that cannot be loaded) prints
one line on stderr and exits with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .config import ConfigError, SpecConfig
from .engine import EngineError
from .models import ModelLoadError, PairSpec
from .runs import PromptError
from .trace import TraceError

USER_ERRORS = (ConfigError, PromptError, ModelLoadError, EngineError, TraceError, FileNotFoundError)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage too; one clear line is enough
        print(f"specviz: error: {message} (see python -m specviz {self.prog.split()[-1]} --help)", file=sys.stderr)
        raise SystemExit(2)


def progress_bar(message: str, fraction: float) -> None:
    """A text progress bar on stderr for the long first-time preparation."""
    width = 30
    filled = int(round(width * max(0.0, min(1.0, fraction))))
    end = "\n" if fraction >= 1.0 else ""
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {fraction * 100:5.1f}% {message[:60]:<60}", end=end,
          file=sys.stderr, flush=True)


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="builtin", help="target model: builtin, a hub id, a local dir or a .gguf file")
    parser.add_argument("--draft", default=None, help="draft model (default: the built-in draft when the target is built-in)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    parser.add_argument("--no-quantize-draft", action="store_true", help="keep the draft in float on CPU (default: int8 Linear layers)")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow a model's own code to run (off by default)")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SpecConfig()
    parser.add_argument("--drafter", choices=["model", "ngram"], default=defaults.drafter)
    parser.add_argument("--gamma", type=int, default=defaults.gamma, help="draft length (the start value if adaptive)")
    parser.add_argument("--schedule", choices=["constant", "adaptive", "auto"], default=defaults.schedule,
                        help="auto: drafts up to --gamma-max while the draft is confident, plain steps while it does not pay")
    parser.add_argument("--gamma-max", type=int, default=defaults.gamma_max)
    parser.add_argument("--lookahead", type=int, default=defaults.lookahead,
                        help="model drafter: prompt-lookup guesses scored per draft forward (0 = off)")
    parser.add_argument("--alternatives", type=int, default=defaults.alternatives,
                        help="model drafter: other candidates for the last draft token, verified in the same "
                             "target forward when the draft is unsure of it (0 = off)")
    parser.add_argument("--draft-confidence", type=float, default=defaults.draft_confidence,
                        help="stop drafting when the draft's top probability is below this (0 = off)")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="0 = off")
    parser.add_argument("--top-p", type=float, default=defaults.top_p, help="1 = off")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)


def pair_spec(args: argparse.Namespace) -> PairSpec:
    draft = args.draft
    if draft is None and args.drafter == "model":
        if args.target != "builtin":
            raise ConfigError("a hub or local target needs --draft ID (a small model with the same tokenizer) or --drafter ngram")
        draft = "builtin"
    # The n-gram drafter needs no draft model, so none is loaded unless one is named.
    return PairSpec(target=args.target, draft=draft, device=args.device,
                    quantize_draft=False if args.no_quantize_draft else None, trust_remote_code=args.trust_remote_code)


def config_from(args: argparse.Namespace) -> SpecConfig:
    return SpecConfig(
        gamma=args.gamma, schedule=args.schedule,
        # gamma_max only bounds the adaptive and auto schedules; a constant gamma above its default is fine.
        gamma_max=args.gamma_max if args.schedule != "constant" else max(args.gamma_max, args.gamma),
        draft_confidence=args.draft_confidence, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        seed=args.seed, max_new_tokens=args.max_new_tokens, drafter=args.drafter, lookahead=args.lookahead,
        alternatives=args.alternatives,
    ).validate()


def cmd_prepare(args: argparse.Namespace) -> int:
    from .builtin import prepare_builtin
    target_dir, draft_dir = prepare_builtin(progress=progress_bar)
    print(f"built-in pair ready:\n  target {target_dir}\n  draft  {draft_dir}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .models import load_pair
    from .runs import encode, run_trace, speedup
    from .trace import save_trace

    config = config_from(args)
    if not args.prompt or not args.prompt.strip():
        raise PromptError("the prompt is empty: pass --prompt TEXT")
    pair = load_pair(pair_spec(args), progress=None if args.json else progress_bar)
    ids = encode(pair, args.prompt, chat=not args.raw)
    trace = run_trace(pair, args.prompt, config, baseline=args.baseline, prompt_ids=ids)
    if args.save_trace:
        save_trace(trace, args.save_trace)
    s = trace.summary
    summary = {key: getattr(s, key) for key in
               ("new_tokens", "rounds", "acceptance_rate", "mean_accepted_per_round", "seconds", "tokens_per_second",
                "prefill_seconds", "draft_seconds", "verify_seconds", "finish_reason")}
    if args.json:
        document = {"text": s.text, "token_ids": list(s.token_ids), "rounds": [asdict(r) for r in trace.rounds],
                    "summary": summary, "config": config.to_dict(), "pair": trace.pair}
        if trace.baseline_summary is not None:
            b = trace.baseline_summary
            document["baseline"] = {"text": b.text, "token_ids": list(b.token_ids), "seconds": b.seconds,
                                    "tokens_per_second": b.tokens_per_second}
            document["speedup"] = speedup(trace)
        json.dump(document, sys.stdout, ensure_ascii=False)
        print()
        return 0
    print(s.text)
    print(f"\n--- speculative ({trace.pair.get('target')} <- {trace.pair.get('draft') if config.drafter == 'model' else 'n-gram lookup'}, "
          f"{trace.pair.get('device')}) ---")
    print(f"{s.new_tokens} tokens in {s.rounds} rounds, acceptance {s.acceptance_rate:.2f}, "
          f"{s.mean_accepted_per_round:.2f} accepted per round, {s.tokens_per_second:.2f} tok/s ({s.finish_reason})")
    if config.alternatives:
        kept = sum(r.kept_alternative is not None for r in trace.rounds)
        print(f"alternatives: {kept} of {s.rounds} rounds kept one in place of a rejected last draft token")
    if trace.baseline_summary is not None:
        b = trace.baseline_summary
        same = "identical" if b.token_ids == s.token_ids else "different"
        print(f"baseline (target alone): {b.tokens_per_second:.2f} tok/s; speed-up {speedup(trace):.2f}x; texts {same}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main
    return bench_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specviz", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("prepare", help="assemble, verify and convert the built-in model pair (once)")
    generate = commands.add_parser("generate", help="one speculative run (and the baseline with --baseline)")
    generate.add_argument("--prompt", required=True)
    generate.add_argument("--raw", action="store_true", help="plain continuation, no chat template")
    generate.add_argument("--baseline", action="store_true", help="also run the target alone and report the speed-up")
    generate.add_argument("--json", action="store_true", help="print one JSON document")
    generate.add_argument("--save-trace", metavar="PATH", help="save the whole run as a trace JSON (replayable in the app)")
    add_pair_arguments(generate)
    add_config_arguments(generate)
    try:
        from .bench import add_arguments as add_bench_arguments
    except ImportError:
        add_bench_arguments = None
    if add_bench_arguments is not None:
        bench = commands.add_parser("bench", help="benchmark: target alone vs ours vs transformers' assisted generation")
        add_pair_arguments(bench)
        add_bench_arguments(bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"prepare": cmd_prepare, "generate": cmd_generate, "bench": cmd_bench}
    try:
        return handlers[args.command](args)
    except USER_ERRORS as exc:
        print(f"specviz: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specviz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
