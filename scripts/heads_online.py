"""Would Medusa heads distilled from served traffic pay? Their accuracy, request by request, on a stream.

Issue 17's optional part (online distillation, arXiv 2310.07177): the verify passes of served requests already hold
the target's final hidden states, so Medusa heads could keep learning from the traffic. This replays a stream
(assets/streams/*.json): the target answers every request greedily (the features a served request's verify passes
give), and before request i joins, each guesser is scored on its answer, on the same token the heads' first head
guesses (x_{T+1} with x_T known, the state at x_{T-1}):

- static: the trained heads in the model cache (`python -m specviz train-heads`), never updated;
- online: the same heads, fine-tuned after each request on every answer served so far (their output vocabulary
  grown by the tokens the traffic used);
- traffic: the first token the traffic drafter proposes (a suffix match over the earlier requests and this one;
  no proposal counts as a miss);
- draft: the draft model's argmax.

Prints one line per request and the means over the first and last 5 requests of each phase
(docs/DESIGN.md, "Online distillation of the Medusa heads (tried; measured, not wired in)").

    .venv/bin/python scripts/heads_online.py [--stream assets/streams/inventory_drift.json] [--new-tokens 32]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from specviz.bench.stream import load_stream
from specviz.heads.features import Features, TrainSettings
from specviz.heads.greedy import greedy_rows, teacher_forced, to_features
from specviz.heads.medusa import MedusaHeads
from specviz.heads.store import load_heads
from specviz.heads.train import accuracy, fit, lm_head_rows, reduced_vocabulary
from specviz.models import PairSpec, load_pair
from specviz.progress import ConsoleProgress
from specviz.runs import encode
from specviz.suffix import TrafficStore
from specviz.traffic import TrafficDrafter


def joined(parts: list[Features]) -> Features:
    return Features(
        torch.cat([p.hidden for p in parts]),
        torch.cat([p.labels for p in parts]),
        torch.cat([p.ids for p in parts]),
        tuple(n for p in parts for n in p.lengths),
    )


def grown(model, heads: MedusaHeads, labels: torch.Tensor, stop_ids: frozenset[int]) -> MedusaHeads:
    """The same blocks over the old vocabulary and every token the traffic's labels use."""
    wanted = torch.unique(torch.cat([heads.token_ids, reduced_vocabulary(labels, stop_ids)]))
    if len(wanted) == len(heads.token_ids):
        return heads
    bigger = MedusaHeads(heads.lm_rows.shape[1], heads.count, lm_head_rows(model, wanted), wanted, heads.vocab_width)
    bigger.blocks.load_state_dict(heads.blocks.state_dict())
    return bigger


def traffic_hits(store: TrafficStore, stop_ids: frozenset[int], prompt: list[int], answer: list[int]) -> float:
    """Share of answer positions i >= 1 whose token the traffic drafter proposes first, given x_<i."""
    drafter, hits = TrafficDrafter(store, stop_ids), 0
    for i in range(1, len(answer)):
        proposal = drafter.suggest(prompt + answer[:i], 1)
        hits += bool(proposal.ids) and proposal.ids[0] == answer[i]
    return hits / max(1, len(answer) - 1)


def draft_hits(draft, prompt: list[int], answer: list[int]) -> float:
    """Share of answer positions i >= 1 where the draft model's argmax after x_<i is the target's token."""
    _, guesses = teacher_forced(draft, prompt + answer[:-1], last=len(answer) - 1)
    return sum(int(g) == a for g, a in zip(guesses.tolist(), answer[1:], strict=True)) / max(1, len(answer) - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default="assets/streams/inventory_drift.json")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2, help="passes over the served answers after each request")
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    pair = load_pair(PairSpec(), progress=ConsoleProgress())
    width = pair.target.config.get_text_config().vocab_size
    static, _ = load_heads(pair.target, width)
    static.eval()
    _, requests = load_stream(args.stream)
    prompts = [encode(pair, r.prompt) for r in requests]
    started = time.perf_counter()
    rows = greedy_rows(pair.target, prompts, args.new_tokens, pair.eos_ids)
    print(f"{len(rows)} greedy answers in {time.perf_counter() - started:.0f} s")
    settings = TrainSettings(heads=static.count, epochs=args.epochs, learning_rate=args.lr, batch=256)
    online = copy.deepcopy(static)  # fine-tuned from here; `static` never changes
    served: list[Features] = []
    store = TrafficStore()
    print("request phase    static online traffic draft   (top-1 of x_{T+1}; heads 1-4 online)   fit s")
    results = []
    for i, (request, prompt, row) in enumerate(zip(requests, prompts, rows, strict=True)):
        features = to_features([row], static.count)
        answer = row[2]
        online.eval()
        scores = (
            accuracy(static, features, static.token_ids, 1)[0],
            accuracy(online, features, online.token_ids, 1),
            traffic_hits(store, pair.eos_ids, prompt, answer),
            draft_hits(pair.draft, prompt, answer),
        )
        served.append(features)
        buffer = joined(served)
        fit_started = time.perf_counter()
        online = grown(pair.target, online, buffer.labels, pair.eos_ids)
        online.train()
        fit(online, buffer, settings, lambda message, fraction: None)
        seconds = time.perf_counter() - fit_started
        store.add(prompt + answer)
        results.append((request.phase, scores))
        heads = " ".join(f"{a:.2f}" for a in scores[1])
        print(
            f"{i + 1:>7} {request.phase:<10} {scores[0]:.2f}   {scores[1][0]:.2f}   {scores[2]:.2f}    "
            f"{scores[3]:.2f}    ({heads})  {seconds:5.1f}"
        )
    for phase in dict.fromkeys(p for p, _ in results):
        part = [s for p, s in results if p == phase]
        for name, chosen in (("first 5", part[:5]), ("last 5", part[-5:])):
            mean = [sum(s[j] if j != 1 else s[1][0] for s in chosen) / len(chosen) for j in range(4)]
            names = ("static", "online", "traffic", "draft")
            print(f"{phase} {name}: " + "  ".join(f"{n} {m:.2f}" for n, m in zip(names, mean, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
