"""How the Medusa heads' held-out accuracy grows with training data, on the built-in target.

One greedy collection (the one `python -m specviz train-heads` makes and keeps in the model cache; collected here
if it is missing), cut to its first 1/8, 1/4, 1/2 and all of the training answers, each fitted with the same
settings and measured on the same held-out answers. Prints one line per size: what the heads' accuracy goal
would need in data, and so in target time (docs/DESIGN.md, "Draft heads: Medusa and EAGLE").

    .venv/bin/python scripts/heads_scaling.py [--heads 4] [--epochs 4] [--tokens 10000]
"""

from __future__ import annotations

import argparse

from specviz.models.loading import PairSpec, load_pair
from specviz.progress import ConsoleProgress
from specviz.training.features import Features, TrainSettings
from specviz.training.train import collect_both, fit_medusa

SHARES = (8, 4, 2, 1)  # the first 1/n of the training answers


def first_answers(features: Features, share: int) -> Features:
    """The first answers (whole ones) holding about 1/share of the training tokens."""
    goal, kept, count = len(features.ids) / share, 0, 0
    for length in features.lengths:
        if kept >= goal:
            break
        kept, count = kept + length, count + 1
    return Features(
        features.hidden[:kept], features.labels[:kept], features.ids[:kept], tuple(features.lengths[:count])
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=TrainSettings.heads)
    parser.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    parser.add_argument("--tokens", type=int, default=TrainSettings.train_tokens, help="training tokens collected")
    args = parser.parse_args()
    settings = TrainSettings(heads=args.heads, epochs=args.epochs, train_tokens=args.tokens)
    pair = load_pair(PairSpec(draft=None), progress=ConsoleProgress())
    width = pair.target.config.get_text_config().vocab_size
    train, heldout, seconds = collect_both(pair.target, pair.tokenizer, settings, None, ConsoleProgress(), pair.eos_ids)
    print(
        f"collection: {len(train.ids)} training tokens, {len(heldout.ids)} held out; its target passes {seconds:.0f} s"
    )
    print("tokens  answers  vocab  train s  " + "  ".join(f"head {k + 1} top-1/top-5" for k in range(settings.heads)))
    for share in SHARES:
        part = first_answers(train, share)
        fitted = fit_medusa(pair.target, width, part, heldout, settings, pair.eos_ids)
        cells = "  ".join(f"{a:.3f}/{b:.3f}".rjust(22) for a, b in zip(fitted.top1, fitted.top5, strict=True))
        vocab = len(fitted.heads.token_ids)
        print(f"{len(part.ids):>6}  {len(part.lengths):>7}  {vocab:>5}  {fitted.seconds:>7.1f}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
