"""The command line's shared parts: the parser that fails in one line, the pair and config arguments
(used by generate, bench and scripts/gpu_check.py), turning them into a PairSpec and a SpecConfig, and
output files checked before the models load."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from specviz.decoding.config import DRAFTERS, ConfigError, SpecConfig
from specviz.drafters import needs_draft_model
from specviz.errors import OutputError
from specviz.models.loading import PairSpec


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage too; one clear line is enough
        print(f"specviz: error: {message} (see python -m specviz {self.prog.split()[-1]} --help)", file=sys.stderr)
        raise SystemExit(2)


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", default="builtin", help="target model: builtin, a hub id, a local dir or a .gguf file"
    )
    parser.add_argument(
        "--draft", default=None, help="draft model (default: the built-in draft when the target is built-in)"
    )
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "fp32", "bf16", "int8"],
        help="the target's weights on the CPU: bf16 (auto where the CPU runs it natively; half of fp32's memory), "
        "fp32 (the exact reference), int8 (the least memory, slower checks)",
    )
    parser.add_argument(
        "--no-quantize-draft", action="store_true", help="keep the draft in float on CPU (default: int8 Linear layers)"
    )
    parser.add_argument(
        "--trust-remote-code", action="store_true", help="allow a model's own code to run (off by default)"
    )


def add_config_arguments(parser: argparse.ArgumentParser, defaults: SpecConfig | None = None) -> None:
    """The SpecConfig settings, defaulting to `defaults` (SpecConfig()'s own when None)."""
    defaults = defaults if defaults is not None else SpecConfig()
    parser.add_argument(
        "--drafter",
        choices=list(DRAFTERS),
        default=defaults.drafter,
        help="medusa/eagle: heads on the target's hidden state (train-heads first); traffic: suffix match over "
        "earlier requests and this one; controller: traffic or model per round",
    )
    parser.add_argument(
        "--gamma",
        type=int,
        default=defaults.gamma,
        help="draft length (the start value if the schedule is not constant)",
    )
    parser.add_argument(
        "--schedule",
        choices=["constant", "adaptive", "auto"],
        default=defaults.schedule,
        help="auto: drafts up to --gamma-max while the draft is confident, plain steps while it does not pay",
    )
    parser.add_argument("--gamma-max", type=int, default=defaults.gamma_max)
    parser.add_argument(
        "--lookahead",
        type=int,
        default=defaults.lookahead,
        help="model drafter: prompt-lookup guesses scored per draft forward (0 = off)",
    )
    parser.add_argument(
        "--alternatives",
        type=int,
        default=defaults.alternatives,
        help="model drafter: other candidates for the last draft token, verified in the same "
        "target forward when the draft is unsure of it; medusa and eagle: other candidates per drafted "
        "position, as a token tree (0 = off)",
    )
    parser.add_argument(
        "--draft-confidence",
        type=float,
        default=defaults.draft_confidence,
        help="stop drafting when the draft's top probability is below this (0 = off)",
    )
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="0 = off")
    parser.add_argument("--top-p", type=float, default=defaults.top_p, help="1 = off")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)


def pair_spec(args: argparse.Namespace) -> PairSpec:
    draft = args.draft
    if draft is None and needs_draft_model(args.drafter):
        if args.target != "builtin":
            raise ConfigError(
                "a hub or local target needs --draft ID (a small model with the same tokenizer) or --drafter ngram"
            )
        draft = "builtin"
    # A drafter that needs no draft model (n-gram, traffic, the heads) loads none unless one is named.
    return PairSpec(
        target=args.target,
        draft=draft,
        device=args.device,
        precision=args.precision,
        quantize_draft=False if args.no_quantize_draft else None,
        trust_remote_code=args.trust_remote_code,
    )


def config_from(args: argparse.Namespace) -> SpecConfig:
    return SpecConfig(
        gamma=args.gamma,
        schedule=args.schedule,
        # gamma_max only bounds the adaptive and auto schedules; a constant gamma above its default is fine.
        gamma_max=args.gamma_max if args.schedule != "constant" else max(args.gamma_max, args.gamma),
        draft_confidence=args.draft_confidence,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        drafter=args.drafter,
        lookahead=args.lookahead,
        alternatives=args.alternatives,
    ).validate()


def output_path(path: str | Path, flag: str, make_parents: bool = False) -> Path:
    """An output file, refused now if it cannot be written (a directory, no permission, no such folder),
    not after minutes of loading and running. A file this check creates is removed again."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise OutputError(f"{flag} {path} is a directory: give a file name")
    existed = target.exists()
    try:
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise OutputError(f"{flag} {path} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        os.unlink(target)
    return target


@contextlib.contextmanager
def writing(path: str | Path, flag: str) -> Iterator[None]:
    """Around the writing of an output file: a failure (disk full, the file made read-only meanwhile)
    becomes one clear OutputError."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{flag} {path} could not be written: {exc.strerror or exc}") from None
