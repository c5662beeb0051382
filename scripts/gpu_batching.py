"""The batching measurement on a GPU (a step of scripts/gpu_check.sh): T(n) up to 4096 new tokens, where a GPU's
knee shows, and batched plain against batched speculative decoding at B = 1..64, written to batching_<device>.json.

Random-weight models of the built-in pair's sizes (scripts/gpu_check.py's random_pair; nothing downloaded): they
agree about as often as chance, so the measured round length is about 1 token and the measured speed-up is the cost
side only. What this records is T(n) and the draft's step at each B; the prediction at a real acceptance follows
from them (docs/DESIGN.md, "Batching").

Usage: python scripts/gpu_batching.py [--device cuda] [--out DIR] [--dry-run] [--batch 1,2,...] [--gammas 1,2,4]
(other options, gpu_check.py's, are ignored, so gpu_check.sh can pass its arguments on.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_check import DRY_RUN_SCALE, random_pair  # noqa: E402

from specviz.bench.batching import GPU_CURVE_TOKENS, format_batching, parse_batches, run_batching  # noqa: E402
from specviz.decoding.config import SpecConfig  # noqa: E402

GPU_BATCHES = "1,2,4,8,16,32,64"
GPU_GAMMAS = "1,2,4"  # random weights accept about nothing: each gamma is the cost side only, so three show its slope
DRY_RUN_BATCHES = "1,2"
DRY_RUN_TOKENS = (1, 2, 4, 8, 16, 32)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=str(ROOT / "out"))
    parser.add_argument("--dry-run", action="store_true", help="scaled-down models, short curve (a CPU rehearsal)")
    parser.add_argument("--batch", default=None, help=f"batch sizes (default {GPU_BATCHES}; dry run {DRY_RUN_BATCHES})")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--gammas", default=None, help=f"the sweep at each B (default {GPU_GAMMAS})")
    parser.add_argument("--batch-tokens", type=int, default=16, help="new tokens per row in the batched loops")
    return parser.parse_known_args(argv)[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_batching: no CUDA GPU visible to this torch", file=sys.stderr)
        return 2
    started = time.perf_counter()
    pair = random_pair(device, scale=DRY_RUN_SCALE if args.dry_run else None)
    batches = parse_batches(args.batch or (DRY_RUN_BATCHES if args.dry_run else GPU_BATCHES))
    tokens = DRY_RUN_TOKENS if args.dry_run else GPU_CURVE_TOKENS
    config = SpecConfig(gamma=args.gamma, max_new_tokens=8 if args.dry_run else args.batch_tokens)
    # prompts of different lengths from the synthetic tokenizer's ids (one per character)
    prompts = [list(range(10, 10 + length)) for length in (48, 64, 40, 56)]
    gammas = parse_batches(args.gammas or GPU_GAMMAS)
    doc = run_batching(
        pair, prompts, config, batches, tokens, repeats=3, log=lambda m: print(m, flush=True), gammas=gammas
    )
    doc["note"] = "random-weight models: acceptance about 0, the cost side only"
    print(format_batching(doc))
    path = Path(args.out) / f"batching_{device.type}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    print(f"JSON: {path} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
