"""python -m specviz train-heads [--kind medusa|eagle]: train heads on the target (or load them from the model
cache) and print their accuracy on held-out files (Medusa's beside the paper's Vicuna-7B figures)."""

from __future__ import annotations

import argparse
import time

from specviz.decoding.config import SEED_LIMIT
from specviz.drafters import EAGLE, MEDUSA, head_titles
from specviz.drafters.heads_file import HeadsError, heads_path, load_heads, save_heads, target_fingerprint
from specviz.drafters.heads_report import COLLECT_DTYPES
from specviz.errors import UserError
from specviz.progress import ConsoleProgress

from .eagle_train import train_eagle
from .features import EAGLE_EPOCHS, default_epochs
from .greedy import MAX_ROWS
from .memory import check_training_memory
from .train import TrainSettings, TrainStep, train_medusa

# Medusa-1 on Vicuna-7B, top-1 accuracy of heads 1-4 (Cai et al. 2024, Figure 2 / Table 1)
PUBLISHED_TOP1 = (0.56, 0.32, 0.20, 0.15)
NAMES = head_titles()  # "Medusa heads", "EAGLE head"


class TrainHeadsError(UserError, ValueError):
    """A training setting out of range."""


RANGES = {  # each whole-number option: its least and largest value (the command line's types say the same)
    "heads": (1, 8),
    "tokens": (64, 1_000_000),
    "heldout_tokens": (16, 1_000_000),
    "epochs": (1, 100),
    "chunk": (16, 4096),
    "batch": (1, 65536),
    "new_tokens": (2, 4096),
    "rows": (1, MAX_ROWS),
    "seed": (0, SEED_LIMIT),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TrainSettings()
    parser.add_argument("--kind", choices=list(NAMES), default=MEDUSA, help="Medusa-1 heads or an EAGLE head")
    parser.add_argument("--heads", type=int, default=defaults.heads, help="Medusa heads K (1-8)")
    parser.add_argument(
        "--data",
        choices=["greedy", "text"],
        default=defaults.data,
        help="the target's own greedy answers to prompts about local code (Medusa's self-distillation), or one "
        "teacher-forced pass over the code itself",
    )
    parser.add_argument("--tokens", type=int, default=defaults.train_tokens, help="training tokens to collect")
    parser.add_argument("--heldout-tokens", type=int, default=defaults.heldout_tokens, help="held-out tokens")
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help=f"passes over the data (default: {defaults.epochs} for Medusa, {EAGLE_EPOCHS} for EAGLE)",
    )
    parser.add_argument("--chunk", type=int, default=defaults.chunk, help="text: tokens per teacher-forced pass")
    parser.add_argument("--new-tokens", type=int, default=defaults.new_tokens, help="greedy: new tokens per prompt")
    parser.add_argument("--rows", type=int, default=defaults.rows, help="greedy: prompts decoded at once")
    parser.add_argument(
        "--collect-dtype",
        choices=["auto", *COLLECT_DTYPES],
        default=defaults.collect_dtype,
        help="greedy: the precision the answers are decoded in; auto: bfloat16 for a float32 target where it runs "
        "natively (a GPU, or a CPU with AVX512-BF16 or AMX), else the target's own. The held-out answers are "
        "re-read by the target itself",
    )
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--retrain", action="store_true", help="train again even if heads for this target are cached")


def settings_from(args: argparse.Namespace) -> TrainSettings:
    if args.epochs is None:
        args.epochs = default_epochs(args.kind)
    checks = [
        (lo <= getattr(args, dest) <= hi, f"--{dest.replace('_', '-')} must be between {lo:,} and {hi:,}")
        for dest, (lo, hi) in RANGES.items()
    ]
    checks.append((0 < args.lr < 1, "--lr must be in (0, 1)"))
    for ok, message in checks:
        if not ok:
            raise TrainHeadsError(message)
    return TrainSettings(
        heads=args.heads,
        train_tokens=args.tokens,
        heldout_tokens=args.heldout_tokens,
        chunk=args.chunk,
        epochs=args.epochs,
        batch=args.batch,
        learning_rate=args.lr,
        seed=args.seed,
        data=args.data,
        new_tokens=args.new_tokens,
        rows=args.rows,
        collect_dtype=args.collect_dtype,
    )


def format_accuracy(report: dict, kind: str = MEDUSA) -> str:
    if kind == EAGLE:
        return (
            "EAGLE head, the next token from the target's true feature (held out): "
            f"top-1 {report['top1'][0]:.3f}, top-5 {report['top5'][0]:.3f}"
        )
    lines = ["head  top-1  top-5  | Medusa-1 on Vicuna-7B, top-1"]
    for k, (top1, top5) in enumerate(zip(report["top1"], report["top5"], strict=True)):
        published = f"{PUBLISHED_TOP1[k]:.2f}" if k < len(PUBLISHED_TOP1) else "-"
        lines.append(f"{k + 1:>4}  {top1:5.3f}  {top5:5.3f}  | {published}")
    return "\n".join(lines)


def main(args: argparse.Namespace, load_pair, pair_spec) -> int:
    settings = settings_from(args)  # before the models load
    kind, what = args.kind, NAMES[args.kind]
    args.drafter = kind  # heads need no draft model: none is loaded unless --draft names one
    pair = load_pair(pair_spec(args), progress=ConsoleProgress())
    width = pair.target.config.get_text_config().vocab_size
    path = heads_path(target_fingerprint(pair.target), kind)
    if not args.retrain and path.exists():
        started = time.perf_counter()
        try:
            _, report = load_heads(pair.target, width, path, kind=kind)
        except HeadsError as exc:
            print(f"{exc}; training again")
        else:
            seconds = time.perf_counter() - started
            print(f"{what} loaded from {path} in {seconds:.1f} s (--retrain to train again)")
            print(format_accuracy(report, kind))
            return 0
    check_training_memory(pair.target, settings, kind)
    train = train_eagle if kind == EAGLE else train_medusa
    heads, report = train(
        pair.target, pair.tokenizer, width, settings, pair.eos_ids, progress=ConsoleProgress(), on_step=_epoch_lines()
    )
    report.where = f"{pair.names.get('target', '?')} on {pair.names.get('device', '?')}, {time.strftime('%Y-%m-%d')}"
    save_heads(heads, target_fingerprint(pair.target), report.to_dict(), path)
    print(
        f"trained the {what} on {report.train_tokens} tokens (output vocabulary {report.vocabulary}): "
        f"target passes {report.collect_seconds:.0f} s, training {report.train_seconds:.0f} s; saved to {path}"
    )
    print(format_accuracy(report.to_dict(), kind))
    return 0


def _epoch_lines():
    """An on_step callback that prints one line when an epoch starts."""
    last_epoch = [0]

    def epoch_line(step: TrainStep) -> None:
        if step.epoch != last_epoch[0]:
            last_epoch[0] = step.epoch
            top1 = ", ".join(f"{a:.2f}" for a in step.top1)
            print(f"epoch {step.epoch}: loss {step.loss:.3f}, top-1 on the batch {top1}")

    return epoch_line
