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

With --decode, each request is also decoded through the real loop before it joins (32 new tokens, the stream
bench's settings): the target alone, the draft model, and the medusa drafter with the static and with the online
heads; their accepted tokens per round and speed-ups follow each line (greedy outputs checked equal).

Prints one line per request and the means over the first and last 5 requests of each phase
(docs/notes/2026-12-traffic.md, "Online distillation of the Medusa heads (tried; measured, not wired in)").

    PYTHONPATH=. .venv/bin/python scripts/heads_online.py [--stream assets/streams/inventory_drift.json] [--decode]
"""

from __future__ import annotations

import argparse
import copy
import time
from dataclasses import replace

import torch

from specviz.bench.stream import load_stream
from specviz.decoding.config import SpecConfig
from specviz.decoding.engine import autoregressive_generate, run_to_end
from specviz.drafters.heads import use_heads
from specviz.drafters.heads_file import load_heads
from specviz.drafters.medusa_heads import MedusaHeads
from specviz.drafters.suffix import TrafficStore
from specviz.drafters.traffic import TrafficDrafter
from specviz.models.loading import PairSpec, load_pair
from specviz.progress import ConsoleProgress
from specviz.runs import encode, speculative_generate
from specviz.training.features import TrainSettings
from specviz.training.greedy import greedy_rows, teacher_forced, to_features
from specviz.training.train import accuracy, fit, lm_head_rows, reduced_vocabulary


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


# The stream bench's tuned settings (docs/notes/2026-12-traffic.md, "Measured"), greedy, the prompt pass not timed.
DECODE = SpecConfig(
    gamma=6, schedule="auto", gamma_max=16, draft_confidence=0.7, lookahead=8, alternatives=2, fuse_prompt=False
)


def decoded(pair, prompt: list[int], heads: dict[str, MedusaHeads], new_tokens: int) -> dict[str, tuple]:
    """(accepted per round, speed-up over the target alone) of the draft model and of medusa with each set of heads,
    on one request through the real loop; every greedy output must be the target's."""
    config = replace(DECODE, max_new_tokens=new_tokens)
    _, base = run_to_end(autoregressive_generate(pair, prompt, config))
    runs = {"model": None, **heads}
    out = {}
    for name, installed in runs.items():
        if installed is not None:
            use_heads(pair.target, installed)
        _, summary = run_to_end(
            speculative_generate(pair, prompt, replace(config, drafter="model" if installed is None else "medusa"))
        )
        if summary.token_ids != base.token_ids:
            raise AssertionError(f"{name}: the greedy output differs from the target alone's")
        out[name] = (summary.mean_accepted_per_round, summary.tokens_per_second / base.tokens_per_second)
    return out


def replay(pair, static: MedusaHeads, args: argparse.Namespace) -> list[dict]:
    """Every request in order: scored (and with --decode decoded) before it joins; then the online heads are fit on
    every answer served so far and the traffic store learns it. One printed line per request."""
    _, requests = load_stream(args.stream)
    prompts = [encode(pair, r.prompt) for r in requests]
    started = time.perf_counter()
    rows = greedy_rows(pair.target, prompts, args.new_tokens, pair.eos_ids)
    print(f"{len(rows)} greedy answers in {time.perf_counter() - started:.0f} s")
    settings = TrainSettings(heads=static.count, epochs=args.epochs, learning_rate=args.lr, batch=256)
    online = copy.deepcopy(static)  # fine-tuned from here; `static` never changes
    store = TrafficStore()
    print("request phase    static online traffic draft   (top-1 of x_{T+1}; heads 1-4 online)   fit s   decoded")
    results = []
    for i, (request, prompt, row) in enumerate(zip(requests, prompts, rows, strict=True)):
        features, answer = to_features([row], static.count), row[2]
        online.eval()
        heads = accuracy(online, features, online.token_ids, 1)
        result = {
            "phase": request.phase,
            "static": accuracy(static, features, static.token_ids, 1)[0],
            "online": heads[0],
            "traffic": traffic_hits(store, pair.eos_ids, prompt, answer),
            "draft": draft_hits(pair.draft, prompt, answer),
        }
        if args.decode:
            result["decoded"] = decoded(pair, prompt, {"static": static, "online": online}, args.new_tokens)
        buffer = to_features(rows[: i + 1], static.count)  # every answer served so far
        fit_started = time.perf_counter()
        online = grown(pair.target, online, buffer.labels, pair.eos_ids)
        online.train()
        fit(online, buffer, settings, lambda message, fraction: None)
        seconds = time.perf_counter() - fit_started
        store.add(prompt + answer)
        results.append(result)
        runs = "  ".join(f"{k} {a:.2f}/{x:.2f}x" for k, (a, x) in result.get("decoded", {}).items())
        print(
            f"{i + 1:>7} {request.phase:<10} {result['static']:.2f}   {result['online']:.2f}   "
            f"{result['traffic']:.2f}    {result['draft']:.2f}    ({' '.join(f'{a:.2f}' for a in heads)})  "
            f"{seconds:5.1f}   {runs}"
        )
    return results


def means(results: list[dict]) -> list[str]:
    """Per phase, the means over its first and last 5 requests: top-1 of each guesser, and (--decode) accepted
    tokens per round and speed-up of each decoding."""
    lines = []
    for phase in dict.fromkeys(r["phase"] for r in results):
        part = [r for r in results if r["phase"] == phase]
        for name, chosen in (("first 5", part[:5]), ("last 5", part[-5:])):
            line = f"{phase} {name}: " + "  ".join(
                f"{k} {sum(r[k] for r in chosen) / len(chosen):.2f}" for k in ("static", "online", "traffic", "draft")
            )
            for k in chosen[0].get("decoded", {}):
                accepted = sum(r["decoded"][k][0] for r in chosen) / len(chosen)
                speedup = sum(r["decoded"][k][1] for r in chosen) / len(chosen)
                line += f"  | {k}: {accepted:.2f} accepted/round, {speedup:.2f}x"
            lines.append(line)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default="assets/streams/inventory_drift.json")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2, help="passes over the served answers after each request")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--decode", action="store_true", help="also decode each request with each set of heads")
    args = parser.parse_args()
    pair = load_pair(PairSpec(), progress=ConsoleProgress())
    static, _ = load_heads(pair.target, pair.target.config.get_text_config().vocab_size)
    print("\n".join(means(replay(pair, static.eval(), args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
