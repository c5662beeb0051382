"""Each CPU precision of the built-in pair against the float32 reference, on the bench's prompts (assets/prompts.json).

For every precision (one pair loaded at a time, the previous one freed first) and every prompt:
  - KL(p_fp32 || p_x) per position over the float32 target's greedy continuation (teacher-forced: the same tokens
    for every precision), averaged over positions and prompts; and how often the two argmaxes differ;
  - greedy identity: speculative decoding against plain decoding of the same precision, token for token, twice: at
    the app's default settings and at the bench's (auto schedule, lookahead and alternatives on: tree verifies);
  - tokens/s of plain and speculative decoding (prompt pass excluded) and the speed-up of one over the other;
  - the process's peak memory after the pair loaded (VmHWM).

    .venv/bin/python scripts/precision_report.py [--tokens 32] [--per-category 4] [--out assets/precision_cpu.json]

Takes about 10 minutes on this project's 2-core CPU. Never run it beside another process that loads the pair.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.bench.cli import BENCH_DEFAULTS  # noqa: E402
from specviz.decoding.config import SpecConfig  # noqa: E402
from specviz.decoding.engine import autoregressive_generate, run_to_end  # noqa: E402
from specviz.models.loading import PairSpec, load_pair  # noqa: E402
from specviz.runs import encode, speculative_generate  # noqa: E402

PRECISIONS = ("fp32", "bf16", "int8")


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


@torch.inference_mode()
def log_probs(pair, prompt_ids: list[int], continuation: list[int]) -> torch.Tensor:
    """[len(continuation), V] log p(. | prompt, continuation[:i]) of the pair's target, in float32."""
    ids = torch.tensor([prompt_ids + continuation])
    logits = pair.target(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1]
    return torch.log_softmax(logits.float(), dim=-1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--per-category", type=int, default=4)
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--out", default=str(ROOT / "assets" / "precision_cpu.json"))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument(
        "--identity-only", action="store_true", help="greedy identity and speed only: no float32 reference, no KL"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = json.loads((ROOT / "assets" / "prompts.json").read_text())
    chosen = [(c, i, p) for c, ps in prompts.items() for i, p in enumerate(ps[: args.per_category])]
    config = SpecConfig(temperature=0.0, max_new_tokens=args.tokens)
    bench_config = SpecConfig(**BENCH_DEFAULTS, temperature=0.0, max_new_tokens=args.tokens)
    reference: dict[int, tuple[list[int], torch.Tensor]] = {}
    results = {}
    for name in args.precisions.split(","):
        gc.collect()
        reset_peak()
        started = time.perf_counter()
        pair = load_pair(PairSpec(precision=name))
        loaded = time.perf_counter() - started
        load_peak = peak_rss()
        rows = []
        for index, (category, number, prompt) in enumerate(chosen):
            ids = encode(pair, prompt)
            _, plain = run_to_end(autoregressive_generate(pair, ids, config))
            _, spec = run_to_end(speculative_generate(pair, ids, config))
            _, bench_spec = run_to_end(speculative_generate(pair, ids, bench_config))
            if name == "fp32" and not args.identity_only:
                reference[index] = (list(plain.token_ids), log_probs(pair, ids, list(plain.token_ids)))
            distance = {"kl_mean": 0.0, "kl_max": 0.0, "argmax_differs": 0}  # --identity-only: not measured
            tokens = list(plain.token_ids)
            if not args.identity_only:
                tokens, p = reference[index]
                q = log_probs(pair, ids, tokens)
                kl = (p.exp() * (p - q)).sum(-1)
                distance = {
                    "kl_mean": float(kl.mean()),
                    "kl_max": float(kl.max()),
                    "argmax_differs": int((p.argmax(-1) != q.argmax(-1)).sum()),
                }
            rows.append(
                {
                    "category": category,
                    "prompt_index": number,
                    **distance,
                    "positions": len(tokens),
                    "greedy_identical": list(spec.token_ids) == list(plain.token_ids),
                    "greedy_identical_bench_settings": list(bench_spec.token_ids) == list(plain.token_ids),
                    "same_text_as_fp32": list(plain.token_ids) == tokens,
                    "plain_tps": plain.new_tokens / (plain.seconds - plain.prefill_seconds),
                    "spec_tps": spec.new_tokens / (spec.seconds - spec.prefill_seconds),
                    "acceptance_rate": spec.acceptance_rate,
                }
            )
            r = rows[-1]
            print(
                f"{name} [{index + 1}/{len(chosen)}] {category} #{number}: KL {r['kl_mean']:.5f}, "
                f"argmax differs at {r['argmax_differs']}/{r['positions']}, greedy identical {r['greedy_identical']} "
                f"(bench settings {r['greedy_identical_bench_settings']}), "
                f"plain {r['plain_tps']:.2f} t/s, spec {r['spec_tps']:.2f} t/s",
                flush=True,
            )
        results[name] = {
            "pair": pair.names,
            "load_seconds": loaded,
            "load_peak_rss_bytes": load_peak,  # loading the pair
            "peak_rss_bytes": peak_rss(),  # the whole: includes the float32 reference's kept log-probs (0.4 GB)
            "rows": rows,
            "kl_mean": statistics.fmean(r["kl_mean"] for r in rows),
            "argmax_differs": sum(r["argmax_differs"] for r in rows),
            "positions": sum(r["positions"] for r in rows),
            "greedy_identical": sum(r["greedy_identical"] for r in rows),
            "greedy_identical_bench_settings": sum(r["greedy_identical_bench_settings"] for r in rows),
            "same_text_as_fp32": sum(r["same_text_as_fp32"] for r in rows),
            "prompts": len(rows),
            "plain_tps": statistics.fmean(r["plain_tps"] for r in rows),
            "spec_tps": statistics.fmean(r["spec_tps"] for r in rows),
            "speedup": statistics.geometric_mean(r["spec_tps"] / r["plain_tps"] for r in rows),
        }
        del pair
    print()
    if args.identity_only:
        print("--identity-only: KL, argmax differs and text = fp32's were not measured (printed as 0 and all)")
    print(
        "precision  load peak GiB  load s  KL/position  argmax differs  greedy spec = plain  (bench settings)  "
        "text = fp32's  "
        "plain t/s  spec t/s  speed-up"
    )
    for name, r in results.items():
        print(
            f"{name:9}  {r['load_peak_rss_bytes'] / 2**30:13.2f}  {r['load_seconds']:6.1f}  {r['kl_mean']:11.5f}  "
            f"{r['argmax_differs']:5d} of {r['positions']:4d}  {r['greedy_identical']:9d} of {r['prompts']:2d}  "
            f"{r['greedy_identical_bench_settings']:9d} of {r['prompts']:2d}  "
            f"{r['same_text_as_fp32']:6d} of {r['prompts']:2d}  {r['plain_tps']:9.2f}  {r['spec_tps']:8.2f}  "
            f"{r['speedup']:7.2f}x"
        )
    Path(args.out).write_text(
        json.dumps(
            {
                "format": "specviz-precision",
                "tokens": args.tokens,
                "identity_only": args.identity_only,
                "results": results,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
