"""The command line's shared parts: the parser that fails in one line, the pair and config arguments
(used by generate, bench and scripts/gpu_check.py), turning them into a PairSpec and a SpecConfig, and
output files checked before the models load."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from specviz.decoding.config import (
    GAMMA_LIMIT,
    MAX_ALTERNATIVES,
    MAX_NEW_TOKENS_LIMIT,
    SEED_LIMIT,
    ConfigError,
    SpecConfig,
)
from specviz.drafters import REGISTRY, descriptions, needs_draft_model
from specviz.errors import OutputError
from specviz.models.loading import PairSpec


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage too; one clear line is enough
        print(f"specviz: error: {message} (see python -m specviz {self.prog.split()[-1]} --help)", file=sys.stderr)
        raise SystemExit(2)


MAX_DIGITS = 40  # a number typed on the command line: longer is refused before int() reads it
MAX_TEMPERATURE = 100.0  # far past where the warped distribution is flat
MAX_TOP_K = 1_000_000  # past any vocabulary


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number from lo to hi, or argparse's one-line refusal saying that range."""

    def parse(text: str) -> int:
        stripped = text.strip()
        digits = stripped[1:] if stripped[:1] in "+-" else stripped
        if not (0 < len(digits) <= MAX_DIGITS and digits.isascii() and digits.isdigit()):
            raise argparse.ArgumentTypeError(f"must be a whole number between {lo} and {hi}, got {text[:40]!r}")
        value = int(stripped)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, got {value}")
        return value

    parse.__name__ = "whole number"  # argparse's fallback message names the type
    parse.bounds = (lo, hi, False, False)  # for the tests' matrix: (lo, hi, lo excluded, hi excluded)
    return parse


def bounded_float(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in the range (a bracket that says whether each end is allowed)."""
    shown = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"

    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= MAX_DIGITS * 2 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a number in {shown}, got {text[:40]!r}")
        if value < lo or value > hi or (lo_open and value == lo) or (hi_open and value == hi):
            raise argparse.ArgumentTypeError(f"must be in {shown}, got {value:g}")
        return value

    parse.__name__ = "number"
    parse.bounds = (lo, hi, lo_open, hi_open)
    return parse


def bound(parser: argparse.ArgumentParser, types: dict[str, Callable[[str], object]]) -> None:
    """Give arguments another module defined their bounded types, by destination (every one must exist)."""
    actions = {action.dest: action for action in parser._actions}
    for dest, kind in types.items():
        actions[dest].type = kind


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
    parser.add_argument("--drafter", choices=list(REGISTRY), default=defaults.drafter, help=descriptions(names=True))
    parser.add_argument(
        "--gamma",
        type=bounded_int(1, GAMMA_LIMIT),
        default=defaults.gamma,
        help="draft length (the start value if the schedule is not constant)",
    )
    parser.add_argument(
        "--schedule",
        choices=["constant", "adaptive", "auto"],
        default=defaults.schedule,
        help="auto: drafts up to --gamma-max while the draft is confident, plain steps while it does not pay",
    )
    parser.add_argument("--gamma-max", type=bounded_int(1, GAMMA_LIMIT), default=defaults.gamma_max)
    parser.add_argument(
        "--lookahead",
        type=bounded_int(0, GAMMA_LIMIT),
        default=defaults.lookahead,
        help="model drafter: prompt-lookup guesses scored per draft forward (0 = off)",
    )
    parser.add_argument(
        "--alternatives",
        type=bounded_int(0, MAX_ALTERNATIVES),
        default=defaults.alternatives,
        help="model drafter: other candidates for the last draft token, verified in the same "
        "target forward when the draft is unsure of it; medusa and eagle: other candidates per drafted "
        "position, as a token tree (0 = off)",
    )
    parser.add_argument(
        "--draft-confidence",
        type=bounded_float(0, 1, hi_open=True),
        default=defaults.draft_confidence,
        help="stop drafting when the draft's top probability is below this (0 = off)",
    )
    parser.add_argument(
        "--temperature", type=bounded_float(0, MAX_TEMPERATURE), default=defaults.temperature, help="0 = greedy"
    )
    parser.add_argument("--top-k", type=bounded_int(0, MAX_TOP_K), default=defaults.top_k, help="0 = off")
    parser.add_argument("--top-p", type=bounded_float(0, 1, lo_open=True), default=defaults.top_p, help="1 = off")
    parser.add_argument("--seed", type=bounded_int(0, SEED_LIMIT), default=defaults.seed)
    parser.add_argument("--max-new-tokens", type=bounded_int(1, MAX_NEW_TOKENS_LIMIT), default=defaults.max_new_tokens)


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
