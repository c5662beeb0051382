"""python -m specviz bench --compare-drafters model,ngram,medusa: every drafter on the same prompts, one table.

Per prompt: the target's prompt pass timed alone, the baseline once, then our speculative decoding once per drafter
with the same settings (the order rotating from prompt to prompt). Metrics as vLLM names them: acceptance rate =
accepted / drafted tokens; mean acceptance length = 1 + accepted / drafts (rounds that drafted: tokens such a round
commits); position-1 acceptance = drafts whose first position was kept (vLLM's per-position acceptance rate at 1: the
first guess, which the heads' held-out top-1 measures off line), all as decoding/metrics.py defines them; draft cost =
draft seconds per drafted token;
speed-up = the baseline's decode seconds over the drafter's, summed over the prompts (decode: after the prompt pass).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specviz.decoding.config import ConfigError, SpecConfig
from specviz.decoding.metrics import SpecMetrics
from specviz.drafters import needs_draft_model, without_capability

from .curve import measure_prompt_pass
from .environment import PeakMemory, environment, now
from .methods import Run, run_method
from .metrics_out import stats_metrics
from .run import WARMUP_TOKENS, Log, _quiet


def comparable() -> tuple[str, ...]:
    """The registered drafters --compare-drafters runs: all but those that read the traffic store (the bench's
    ordinary runs never feed it; bench --stream compares those)."""
    return without_capability("sources")


def check_drafters(names: list[str], pair_has_draft: bool) -> list[str]:
    unknown = [n for n in names if n not in comparable()]
    if unknown or not names:
        raise ConfigError(
            f"--compare-drafters takes names from {', '.join(comparable())}, got {', '.join(names) or 'none'}"
        )
    if not pair_has_draft and (need := [n for n in names if needs_draft_model(n)]):
        raise ConfigError(f"this pair has no draft model: leave {', '.join(map(repr, need))} out of --compare-drafters")
    return list(dict.fromkeys(names))


def _run(pair, ids: list[int], config: SpecConfig, drafter: str | None, memory: PeakMemory, where: tuple) -> Run:
    method = "baseline" if drafter is None else "speculative"
    run_config = config if drafter is None else replace(config, drafter=drafter)
    return run_method(pair, method, ids, run_config, memory, category=where[0], prompt_index=where[1])


def compare_drafters(
    pair, prompts: dict[str, list[str]], config: SpecConfig, drafters: list[str], chat: bool = True, log: Log = _quiet
) -> dict[str, Any]:
    from specviz.runs import encode

    encoded = [(c, i, encode(pair, p, chat=chat)) for c, ps in prompts.items() for i, p in enumerate(ps)]
    memory = PeakMemory(pair.device)
    warm = replace(config, max_new_tokens=min(config.max_new_tokens, WARMUP_TOKENS))
    for drafter in [None, *drafters]:  # every path once before anything is timed
        _run(pair, encoded[0][2], warm, drafter, memory, ("warm-up", 0))
    rows: list[dict[str, Any]] = []
    order = [None, *drafters]
    for n, (category, index, ids) in enumerate(encoded):
        prompt_pass = measure_prompt_pass(pair, ids)
        shift = n % len(order)
        runs = {d: _run(pair, ids, config, d, memory, (category, index)) for d in order[shift:] + order[:shift]}
        base = runs[None]
        for drafter in drafters:
            run = runs[drafter]
            rows.append(
                {
                    "category": category,
                    "prompt_index": index,
                    "drafter": drafter,
                    "new_tokens": run.new_tokens,
                    "decode_seconds": max(run.seconds - prompt_pass, 1e-9),
                    "baseline_decode_seconds": max(base.seconds - prompt_pass, 1e-9),
                    "identical": run.token_ids == base.token_ids,
                    **{k: run.stats[k] for k in ("rounds", "drafted", "accepted", "draft_seconds", "verify_seconds")},
                    "metrics": stats_metrics(run.stats).as_json(),
                }
            )
        log(
            f"[{n + 1}/{len(encoded)}] {category} #{index + 1}: "
            + ", ".join(f"{d} {base.seconds / max(runs[d].seconds, 1e-9):.2f}x" for d in drafters)
        )
    return {
        "format": "specviz-drafters",
        "version": 1,
        "created": now(),
        "environment": environment(pair),
        "pair": dict(pair.names),
        "config": config.to_dict(),
        "drafters": drafters,
        "summary": {d: summarize_drafter([r for r in rows if r["drafter"] == d]) for d in drafters},
        "runs": rows,
    }


def summarize_drafter(rows: list[dict[str, Any]]) -> dict[str, Any]:
    m = sum((SpecMetrics.from_json(r["metrics"]) for r in rows), SpecMetrics())
    per_position = m.per_position_acceptance_rate
    decode = sum(r["decode_seconds"] for r in rows)
    return {
        "prompts": len(rows),
        "acceptance_rate": m.acceptance_rate,
        "mean_acceptance_length": m.mean_acceptance_length,
        "position_1_acceptance": per_position[0] if per_position else None,
        "per_position_acceptance_rate": list(per_position),
        "conditional_acceptance_rate": list(m.conditional_acceptance_rate),
        "draft_ms_per_token": 1000 * sum(r["draft_seconds"] for r in rows) / m.draft_tokens if m.draft_tokens else None,
        "speedup": sum(r["baseline_decode_seconds"] for r in rows) / decode if decode else None,
        "identical": all(r["identical"] for r in rows),
    }


def format_drafter_table(doc: dict[str, Any]) -> str:
    def cell(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    head = [
        "drafter",
        "prompts",
        "accept rate",
        "mean accept len",
        "pos-1 rate",
        "draft ms/token",
        "speed-up",
        "same text",
    ]
    rows = [
        [
            name,
            str(s["prompts"]),
            cell(s["acceptance_rate"], ".3f"),
            cell(s["mean_acceptance_length"], ".2f"),
            cell(s.get("position_1_acceptance"), ".3f"),
            cell(s["draft_ms_per_token"], ".1f"),
            cell(s["speedup"], ".2f") + "x",
            ("yes" if s["identical"] else "NO") if doc["config"]["temperature"] == 0 else "-",
        ]
        for name, s in doc["summary"].items()
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in [head, *rows]
    ]
    return "\n".join(
        [
            lines[0],
            "  ".join("-" * w for w in widths),
            *lines[1:],
            "",
            "accept rate = accepted / drafted tokens; mean accept len = 1 + accepted / drafts (rounds that drafted); "
            "pos-1 rate = drafts whose first position was kept; "
            "speed-up = the baseline's decode time / the drafter's, over all prompts.",
        ]
    )
