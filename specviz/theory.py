"""Leviathan et al. (2023), "Fast Inference from Transformers via Speculative Decoding", section 3.

a = acceptance rate (probability that one drafted token is accepted, assumed i.i.d.),
g = gamma (draft length), c = cost ratio (one draft step / one target step).
"""
from __future__ import annotations

from collections.abc import Sequence


def expected_tokens(a: float, g: int) -> float:
    """E[tokens per round] = (1 - a^(g+1)) / (1 - a): the accepted prefix plus the resampled or bonus token."""
    if a >= 1.0:
        return float(g + 1)
    return (1.0 - a ** (g + 1)) / (1.0 - a)


def speedup(a: float, g: int, c: float) -> float:
    """Walltime improvement = (1 - a^(g+1)) / ((1 - a)(g c + 1)), assuming a verify costs one target step."""
    return expected_tokens(a, g) / (g * c + 1.0)


def optimal_gamma(a: float, c: float, gamma_max: int = 32) -> int:
    """The gamma in 1..gamma_max with the largest predicted speed-up."""
    return max(range(1, gamma_max + 1), key=lambda g: speedup(a, g, c))


def measured_speedup_prediction(a: float, g: int, t_target: float, t_draft: float, t_verify: float) -> float:
    """Speed-up predicted from measured times, without assuming a free verify:
    E(a, g) * t_target / (g * t_draft + t_verify(g)), where t_verify(g) is one target forward over g+1 tokens.
    """
    return expected_tokens(a, g) * t_target / (g * t_draft + t_verify)


def acceptance_from_mean_accepted(mean_accepted: float, g: int) -> float:
    """Invert E[accepted per round] = a (1 - a^g) / (1 - a) for a, by bisection (it increases with a)."""
    if mean_accepted <= 0:
        return 0.0
    if mean_accepted >= g:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if mid * (1 - mid ** g) / (1 - mid) < mean_accepted:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def speedup_curve(a: float, c: float, gammas: Sequence[int]) -> list[float]:
    return [speedup(a, g, c) for g in gammas]


def measured_speedup(a: float, g: int, curve: dict) -> float:
    """measured_speedup_prediction with the times of a verify-cost curve (assets/verify_curve_<device>.json,
    written by `python -m specviz bench`): t_target = its one-token time, t_draft = its draft step,
    t_verify(g) = its time for g+1 tokens (extended linearly past its last g)."""
    return measured_speedup_prediction(a, g, curve["target_step_seconds"], curve["draft_step_seconds"],
                                       curve_time(curve, g))


def curve_time(curve: dict, g: int) -> float:
    """t_verify(g) from a verify-cost curve; beyond its end, extended linearly from its last two points."""
    times = curve["target_seconds"]
    if g < len(times):
        return times[g]
    slope = max(0.0, times[-1] - times[-2]) if len(times) > 1 else 0.0
    return times[-1] + slope * (g - len(times) + 1)


def load_verify_curve(path) -> dict | None:
    """A verify-cost curve saved by the benchmark, or None if there is none (or it is not one)."""
    import json
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != "specviz-verify-curve" or not data.get("target_seconds"):
        return None
    return data
