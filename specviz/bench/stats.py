"""Statistics over the runs: decode rates, speed-ups, the paired per-prompt ratio, and the theory's prediction.

Rates count new tokens over the wall time after the target's prompt pass P (timed alone before each
prompt's runs): every method does that pass first, and speculative decoding does not speed it up.

Theory (Leviathan et al. 2023), from the speculative runs:
  a  = accepted / checked, the maximum-likelihood acceptance rate of the i.i.d. model (a drafted
       token after the first rejection is never checked, so accepted / drafted would understate it)
  E(a, g) = (1 - a^(g+1)) / (1 - a)  expected tokens of a round that drafts g tokens
  c  = t_draft / t_target, from the measured verify-cost curve
  predicted speed-up (measured times) = sum_r E(a, g_r) * t_target / sum_r (g_r t_draft + t_verify(g_r))
  Leviathan's (free verify)           = sum_r E(a, g_r) / sum_r (g_r c + 1)
  over the rounds r and the number g_r of tokens each drafted (0 for a plain target step).
  Efficiency = measured speed-up / predicted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from specviz.lessons.theory import curve_time, expected_tokens
from specviz.traces.trace import decode_rate

from .methods import Run

PromptPass = dict[tuple[str, int, int], float]  # (category, prompt index, repeat) -> seconds of the prompt pass

# Student's t, two-sided 95%, for 1..30 degrees of freedom (beyond: the normal 1.96)
_T975 = (
    12.71,
    4.30,
    3.18,
    2.78,
    2.57,
    2.45,
    2.36,
    2.31,
    2.26,
    2.23,
    2.20,
    2.18,
    2.16,
    2.14,
    2.13,
    2.12,
    2.11,
    2.10,
    2.09,
    2.09,
    2.08,
    2.07,
    2.07,
    2.06,
    2.06,
    2.06,
    2.05,
    2.05,
    2.05,
    2.04,
)


def rate(tokens: int, seconds: float) -> float | None:
    """Tokens per second; None (not 0) when no time was measured, so a table shows '-'."""
    return decode_rate(tokens, seconds) if seconds > 0 else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def decode_seconds(r: Run, prompt_pass: PromptPass) -> float:
    """A run's wall time after the target's prompt pass (the time speculative decoding can speed up); > 0."""
    return max(r.seconds - prompt_pass[(r.category, r.prompt_index, r.repeat)], 1e-9)


def representative(runs: list[Run], prompt_pass: PromptPass, aggregate: str) -> list[Run]:
    """The runs whose times count: all of them ("mean"), or per prompt and method the repeat with the
    shortest time after the prompt pass ("min": the least disturbed by anything else on the machine)."""
    if aggregate == "mean":
        return runs
    best: dict[tuple, Run] = {}
    for r in runs:
        key = (r.category, r.prompt_index, r.method)
        if key not in best or decode_seconds(r, prompt_pass) < decode_seconds(best[key], prompt_pass):
            best[key] = r
    return [r for r in runs if best[(r.category, r.prompt_index, r.method)] is r]


def paired_ratio(
    runs: list[Run], prompt_pass: PromptPass, method: str, other: str
) -> dict[str, float | int | None] | None:
    """method's decode rate over other's, prompt by prompt: the geometric mean over prompts, with a 95% interval.

    Both methods ran each prompt back to back, so the machine's slow drifts (another job, the page cache)
    mostly cancel in a prompt's ratio, and the spread of the ratios across prompts says how far the mean can
    be trusted: log ratios l_i, mean m, interval exp(m -+ t_(n-1) s / sqrt(n)). The table's ratio of summed
    rates weighs long prompts more; this one weighs every prompt alike. Several repeats of a prompt: the mean
    of their log rates.
    """
    logs: dict[tuple[str, int], dict[str, list[float]]] = {}
    for r in runs:
        if r.method in (method, other) and r.new_tokens > 0:
            log_rate = math.log(r.new_tokens / decode_seconds(r, prompt_pass))
            logs.setdefault((r.category, r.prompt_index), {}).setdefault(r.method, []).append(log_rate)
    ratios = [
        statistics.fmean(m[method]) - statistics.fmean(m[other]) for m in logs.values() if method in m and other in m
    ]
    if not ratios:
        return None
    mean = statistics.fmean(ratios)
    if len(ratios) < 2:
        return {"geo_mean": math.exp(mean), "low": None, "high": None, "prompts": 1}
    t = _T975[len(ratios) - 2] if len(ratios) - 1 <= len(_T975) else 1.96
    half = t * statistics.stdev(ratios) / math.sqrt(len(ratios))
    return {
        "geo_mean": math.exp(mean),
        "low": math.exp(mean - half),
        "high": math.exp(mean + half),
        "prompts": len(ratios),
    }


def _peak(memories: list[dict[str, int | None]]) -> dict[str, int | None]:
    """The largest peak of each kind over a method's runs (every repeat counts: memory is not noisy time)."""
    out: dict[str, int | None] = {}
    for key in ("peak_rss_bytes", "peak_gpu_bytes"):
        values = [m[key] for m in memories if m.get(key) is not None]
        out[key] = max(values) if values else None
    return out


def summarize(
    runs: list[Run],
    prompt_pass: PromptPass,
    curve: dict | None,
    methods: Sequence[str],
    greedy: bool,
    aggregate: str = "min",
) -> dict[str, Any]:
    """Rates, speed-ups, ratios to transformers, acceptance and the theory for one group of runs."""
    out: dict[str, Any] = {"prompts": len({(r.category, r.prompt_index) for r in runs})}
    identical = _identical(runs) if greedy else None
    memory = {m: _peak([r.memory for r in runs if r.method == m]) for m in methods if any(r.method == m for r in runs)}
    runs = representative(runs, prompt_pass, aggregate)
    tps, e2e, tokens = {}, {}, {}
    for method in methods:
        mine = [r for r in runs if r.method == method]
        if not mine:
            continue
        tokens[method] = sum(r.new_tokens for r in mine)
        tps[method] = rate(tokens[method], sum(decode_seconds(r, prompt_pass) for r in mine))
        e2e[method] = rate(tokens[method], sum(r.seconds for r in mine))
    out.update(
        new_tokens=tokens,
        tokens_per_second=tps,
        e2e_tokens_per_second=e2e,
        speedup={m: ratio(v, tps.get("baseline")) for m, v in tps.items()},
        e2e_speedup={m: ratio(v, e2e.get("baseline")) for m, v in e2e.items()},
        ratio_to_hf={
            "hf_assisted": ratio(tps.get("speculative"), tps.get("hf_assisted")),
            "hf_matched": ratio(tps.get("speculative"), tps.get("hf_matched")),
        },
        memory=memory,
        paired={
            m: paired_ratio(runs, prompt_pass, "speculative", m)
            for m in ("baseline", "hf_assisted", "hf_matched")
            if m in tps and "speculative" in tps
        },
    )
    spec = [r for r in runs if r.method == "speculative"]
    if spec:
        out.update(_theory(spec, curve, out["speedup"].get("speculative")))
    if greedy:
        out["identical"] = identical
    return out


def _per(total: float, count: float, empty: float | None = 0.0) -> float | None:
    return total / count if count else empty


def _theory(spec: list[Run], curve: dict | None, measured: float | None) -> dict[str, Any]:
    def total(key: str) -> float:
        return sum(r.stats.get(key, 0) for r in spec)

    accepted, checked, drafted, rounds = total("accepted"), total("checked"), total("drafted"), total("rounds")
    gammas = [g for r in spec for g in r.stats["drafted_per_round"]]
    a = _per(accepted, checked)
    result: dict[str, Any] = {
        "acceptance_rate": a,
        "accepted_per_drafted": _per(accepted, drafted),
        "mean_accepted_per_round": _per(accepted, rounds),
        "alternatives_kept_per_round": _per(total("alternatives_kept"), rounds),
        "mean_tokens_per_round": _per(sum(r.new_tokens for r in spec), rounds),
        "mean_gamma": _per(sum(gammas), len(gammas)),
        "plain_rounds": sum(1 for g in gammas if g == 0),
        "rounds": rounds,
        "bookkeeping_share": _per(total("bookkeeping_seconds"), total("engine_seconds")),
        "draft_seconds_per_forward": total("draft_seconds") / max(1, total("draft_forwards")),
        # below 1 when lookahead scored several drafted tokens in one draft forward
        "draft_forwards_per_drafted": _per(total("draft_forwards"), drafted, empty=None),
    }
    if curve is None or not curve.get("draft_step_seconds"):
        return result
    t_target, t_draft = curve["target_step_seconds"], curve["draft_step_seconds"]
    c = t_draft / t_target
    expected = sum(expected_tokens(a, g) for g in gammas)
    predicted = ratio(expected * t_target, sum(g * t_draft + curve_time(curve, g) for g in gammas))
    leviathan = ratio(expected, sum(g * c + 1.0 for g in gammas))
    result.update(
        cost_ratio_c=c,
        t_target=t_target,
        t_draft=t_draft,
        predicted_speedup=predicted,
        leviathan_speedup=leviathan,
        efficiency=ratio(measured, predicted),
        efficiency_leviathan=ratio(measured, leviathan),
    )
    return result


def _identical(runs: list[Run]) -> bool:
    by_prompt: dict[tuple, list[tuple[int, ...]]] = {}
    for r in runs:
        by_prompt.setdefault((r.category, r.prompt_index, r.repeat), []).append(tuple(r.token_ids))
    return all(len(set(outputs)) == 1 for outputs in by_prompt.values())
