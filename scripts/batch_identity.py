"""Greedy identity of the batched path on the built-in pair: at each batch size, every row of plain, ragged and
min-cut batched decoding against the same prompt decoded alone by plain decoding (B = 1), at one precision.

    .venv/bin/python scripts/batch_identity.py [--precision fp32] [--batch 1,2,4,8,16] [--gamma 4] [--tokens 16]

The rows are the batching bench's (assets/prompts.json, round robin over the categories, at least 4 rows at every
B). Where a row differs it prints the first position and the two tokens. bf16 and int8 round attention differently
over a batch's shapes than over one row, which can flip a near-tie; fp32 is the reference
(docs/notes/2026-12-ragged-batching.md). About 3 minutes at fp32 on this project's 2-core CPU.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.bench.batching import DEFAULT_ROWS, batches_of, parse_batches  # noqa: E402
from specviz.decoding.batch import MIN_CUT, RAGGED, batch_plain  # noqa: E402
from specviz.decoding.config import SpecConfig  # noqa: E402
from specviz.lessons.prompts import load_prompts  # noqa: E402
from specviz.models.loading import PairSpec, load_pair  # noqa: E402
from specviz.runs import batch_speculative, encode  # noqa: E402


def first_difference(a: list[int], b: list[int]) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"position {at}: {a[at] if at < len(a) else None} against {b[at] if at < len(b) else None} alone"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--batch", default="1,2,4,8,16")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    pair = load_pair(PairSpec(precision=args.precision))
    by_category = list(load_prompts().values())
    texts = [ps[i] for i in range(max(map(len, by_category))) for ps in by_category if i < len(ps)]
    prompts = [encode(pair, text) for text in texts]
    config = replace(SpecConfig(), gamma=args.gamma, max_new_tokens=args.tokens, temperature=0.0)
    config = replace(config, schedule="constant", alternatives=0, lookahead=0).validate()
    alone: dict[tuple[int, ...], list[int]] = {}
    print(f"{pair.names['target']} <- {pair.names['draft']}, precision {pair.names.get('precision')}")
    for size in parse_batches(args.batch):
        rows = [row for batch in batches_of(prompts, size, DEFAULT_ROWS) for row in batch]
        for row in rows:
            if tuple(row) not in alone:
                alone[tuple(row)] = batch_plain(pair, [row], config, False).token_ids[0]
        expected = [alone[tuple(row)] for row in rows]
        for name, run in (
            ("plain", lambda b: batch_plain(pair, b, config, False)),
            (RAGGED, lambda b: batch_speculative(pair, b, config, False, RAGGED)),
            (MIN_CUT, lambda b: batch_speculative(pair, b, config, False, MIN_CUT)),
        ):
            got = [ids for batch in batches_of(prompts, size, DEFAULT_ROWS) for ids in run(batch).token_ids]
            same = sum(g == e for g, e in zip(got, expected, strict=True))
            differ = [first_difference(g, e) for g, e in zip(got, expected, strict=True) if g != e]
            print(f"B = {size:2d}  {name:7s}  {same} of {len(rows)} rows identical to plain decoding alone  {differ}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
