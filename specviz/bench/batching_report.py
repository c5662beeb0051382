"""The batching benchmark's printed table (python -m specviz bench --batch): one document of bench/batching.py."""

from __future__ import annotations


def _by_gamma(row: dict, field: str) -> str:
    return "  ".join(f"{e['gamma']}: {e[field]:.2f}x" for e in row["gammas"])


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}x over {len(values)} (" + ", ".join(f"{v:.2f}" for v in values) + ")"


def _rows_table(doc: dict) -> list[str]:
    g = doc["gamma"]
    lines = [
        f"Tokens per row per round and speed-up over plain decoding at gamma {g}: ragged (every row keeps what it "
        "accepted) against the same rows decoded alone (B = 1), and min-cut (the batch waits for its slowest row); "
        "predicted from the forwards timed at each B, added up over the rounds the run had (rows leave as they finish)",
        "    B  rows  plain tok/s  accept  alone tok/row/round  ragged tok/row/round  vs alone  speed-up  predicted"
        "  min-cut tok/row/round  speed-up  predicted  identical",
    ]
    for row in doc["rows"]:
        ragged, cut, alone = row["ragged"], row["min_cut"], row["alone"]
        lines.append(
            f"  {row['batch']:3d}  {row['batches'] * row['batch']:4d}  {row['plain_tokens_per_second']:11.2f}  "
            f"{row['acceptance']:6.2f}  {alone['tokens_per_round']:19.2f}  {ragged['tokens_per_round']:20.2f}  "
            f"{ragged['tokens_per_round'] / alone['tokens_per_round'] - 1:+8.0%}  {ragged['measured_speedup']:7.2f}x  "
            f"{ragged['predicted_speedup']:8.2f}x  {cut['tokens_per_round']:21.2f}  {cut['measured_speedup']:7.2f}x  "
            f"{cut['predicted_speedup']:8.2f}x  {row['greedy_identical']}"
        )
    lines.append(f"  break-even: {doc['break_even_batch'] or 'not reached'} (first B with ragged at gamma {g} < 1x)")
    return lines


def _costs_table(doc: dict) -> list[str]:
    lines = ["Each B's own forwards (median of the timed samples): plain step T(B), draft step, verify per gamma"]
    for row in doc["rows"]:
        verifies = "  ".join(f"{e['gamma']}: {e['verify_seconds']:.3f}" for e in row["gammas"])
        lines.append(
            f"  B = {row['batch']:3d}  T(B) {row['target_step_seconds']:.3f} s  draft {row['draft_step_seconds']:.3f}"
            f" s  verify s at gamma {verifies}"
        )
    return lines


def format_batching(doc: dict) -> str:
    lines = [
        f"Batched speculative decoding ({doc['device_name']}, {doc['threads']} threads; {doc['target']} <- "
        f"{doc['draft']}; {doc['max_new_tokens']} new tokens per row, at least {doc['rows_per_batch_size']} rows at "
        f"every B, temperature {doc['temperature']})",
        *_rows_table(doc),
        "Gamma by batch size (ragged): measured speed-up; predicted from L measured; expected from E(a, g)",
    ]
    for row in doc["rows"]:
        best = max(row["gammas"], key=lambda e: e["measured_speedup"])
        lines += [
            f"  B = {row['batch']:3d}  best gamma measured {row['best_gamma']} ({best['measured_speedup']:.2f}x), "
            f"predicted {row['predicted_best_gamma']} (a = {row['acceptance']:.2f})",
            f"      measured   {_by_gamma(row, 'measured_speedup')}",
            f"      predicted  {_by_gamma(row, 'predicted_speedup')}",
            f"      expected   {_by_gamma(row, 'expected_speedup')}",
        ]
    lines += _costs_table(doc)
    single = doc["rows"][0].get("single_row_engine")
    if single:
        lines += [
            f"  B = {doc['rows'][0]['batch']} through the single-row engine: {_spread(single['speedups'])}",
            f"  B = {doc['rows'][0]['batch']} through the batched path:      {_spread(single['batched_speedups'])}",
        ]
    lines.append("  T(n), the target's forward over n new tokens of one row:")
    t1 = doc["curve"]["seconds"][0]
    for n, t in zip(doc["curve"]["tokens"], doc["curve"]["seconds"], strict=True):
        lines.append(f"    n = {n:5d}  {t:8.4f} s  {t / t1:7.2f} x T(1)  {t / n * 1000:8.2f} ms per token")
    return "\n".join(lines)
