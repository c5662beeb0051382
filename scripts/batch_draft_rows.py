"""Does a row's draft (q) or target (p) depend on its batch neighbours? On the built-in pair: the first bench prompt's
logits over 5 steps after its prompt, alone (B = 1) and beside prompt 1, 2 or 3 (B = 2), with the int8 draft's
activations scaled per call (torch's own dynamic int8) and per token (what decoding/batchcache.py uses).

    .venv/bin/python scripts/batch_draft_rows.py [--precision auto]

The output is quoted in docs/notes/2026-12-ragged-batching.md. About a minute on a quiet 2-core CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import specviz.decoding.batchcache as batch  # noqa: E402
from specviz.bench.batching import prefilled  # noqa: E402
from specviz.decoding.engine import vocab_width  # noqa: E402
from specviz.lessons.prompts import load_prompts  # noqa: E402
from specviz.models.fastpath import per_token_activations  # noqa: E402
from specviz.models.loading import PairSpec, load_pair  # noqa: E402
from specviz.runs import encode  # noqa: E402


@torch.inference_mode()
def first_row(model, rows: list[list[int]], steps: list[int], width: int) -> torch.Tensor:
    state = prefilled(model, rows, width)
    return torch.stack([state.feed(torch.full((len(rows), 1), t, dtype=torch.long))[0, -1].float() for t in steps])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="auto")
    pair = load_pair(PairSpec(precision=parser.parse_args().precision))
    by_category = list(load_prompts().values())
    texts = [ps[i] for i in range(max(map(len, by_category))) for ps in by_category if i < len(ps)]
    prompts = [encode(pair, text) for text in texts[:4]]
    width, steps = vocab_width(pair), [prompts[0][-1], 13, 220, 7, 100]
    print(pair.names, "prompt lengths", [len(p) for p in prompts])
    for label, scaling in (("per-call scale (torch's own)", contextlib.nullcontext), ("per-token scale", None)):
        batch.per_token_activations = scaling or per_token_activations
        for name, model in (("draft", pair.draft), ("target", pair.target)):
            alone = first_row(model, [prompts[0]], steps, width)
            for other in (1, 2, 3):
                both = first_row(model, [prompts[0], prompts[other]], steps, width)
                flips = int((alone.argmax(-1) != both.argmax(-1)).sum())
                print(
                    f"{label:28s} {name:6s} row 0 alone vs beside prompt {other}: max |logit diff| "
                    f"{(alone - both).abs().max().item():.4g}, argmax differs at {flips} of {len(steps)} steps"
                )
    batch.per_token_activations = per_token_activations
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
