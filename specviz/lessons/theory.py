"""Leviathan et al. (2023), "Fast Inference from Transformers via Speculative Decoding", section 3.

a = expected acceptance (probability that one drafted token is accepted, assumed i.i.d.; not the acceptance
rate, accepted / drafted, which also counts the tokens thrown away unchecked after a rejection),
g = gamma (draft length), c = cost ratio (one draft step / one target step).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from specviz.decoding.costs import expected_tokens, speedup
from specviz.decoding.costs import measured_speedup as measured_speedup_prediction
from specviz.errors import UserError
from specviz.traces.check import MAX_SECONDS, Fields, Many, Str, read_model

__all__ = ["expected_tokens", "measured_speedup_prediction", "speedup"]  # the one cost model's, named as Theory says


def best_gamma(speedup_at: Callable[[int], float], gamma_max: int) -> int:
    """The gamma in 1..gamma_max with the largest speedup_at(gamma); the smallest such gamma on a tie."""
    return max(range(1, gamma_max + 1), key=speedup_at)


def optimal_gamma(a: float, c: float, gamma_max: int = 32) -> int:
    """The gamma in 1..gamma_max with the largest predicted speed-up."""
    return best_gamma(lambda g: speedup(a, g, c), gamma_max)


def acceptance_from_mean_accepted(mean_accepted: float, g: int) -> float:
    """Invert E[accepted per round] = a (1 - a^g) / (1 - a) for a, by bisection (it increases with a)."""
    if mean_accepted <= 0:
        return 0.0
    if mean_accepted >= g:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if mid * (1 - mid**g) / (1 - mid) < mean_accepted:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def speedup_curve(a: float, c: float, gammas: Sequence[int]) -> list[float]:
    return [speedup(a, g, c) for g in gammas]


def measured_speedup(a: float, g: int, curve: dict) -> float:
    """measured_speedup_prediction with the times of a verify-cost curve (assets/verify_curve_<device>.json,
    written by the benchmark): t_target = its one-token time, t_draft = its draft step,
    t_verify(g) = its time for g+1 tokens (extended linearly past its last g)."""
    return measured_speedup_prediction(
        a, g, curve["target_step_seconds"], curve["draft_step_seconds"], curve_time(curve, g)
    )


def measured_round_steps(g: int, curve: dict) -> float:
    """(g t_draft + t_verify(g)) / t_target: a round's cost in target steps with the curve's measured times, the
    denominator measured_speedup divides E(a, g) by (the curve must have timed a draft)."""
    return (g * curve["draft_step_seconds"] + curve_time(curve, g)) / curve["target_step_seconds"]


def measured_speedup_curve(a: float, curve: dict, gammas: Sequence[int]) -> list[float]:
    return [measured_speedup(a, g, curve) for g in gammas]


def measured_optimal_gamma(a: float, curve: dict, gamma_max: int = 32) -> int:
    """The gamma in 1..gamma_max with the largest speed-up predicted from the curve's measured times.
    With a flat curve (a verify costs one step) this is optimal_gamma(a, c). A verify that grows by s steps
    per token checked acts like a larger c (c + s) and moves the optimum down; a fixed extra cost per
    verify is shared by all the round's tokens and moves it up. A real curve mixes both."""
    return best_gamma(lambda g: measured_speedup(a, g, curve), gamma_max)


def curve_time(curve: dict, g: int) -> float:
    """t_verify(g) from a verify-cost curve; beyond its end, extended linearly from its last two points."""
    times = curve["target_seconds"]
    if g < len(times):
        return times[g]
    slope = max(0.0, times[-1] - times[-2]) if len(times) > 1 else 0.0
    return times[-1] + slope * (g - len(times) + 1)


def verify_cost_ratios(curve: dict, gammas: Sequence[int]) -> list[float]:
    """t_verify(g) / t_target for each g: what one verify of g drafted tokens costs in target steps
    (Leviathan et al. assume 1 for every g)."""
    return [curve_time(curve, g) / curve["target_step_seconds"] for g in gammas]


def measured_cost_ratio(curve: dict) -> float | None:
    """c = draft step / target step, from the same times measured_speedup uses; None when the curve timed
    no draft (a run without a draft model), and then there is no measured speed-up either."""
    draft = curve.get("draft_step_seconds")
    return draft / curve["target_step_seconds"] if draft is not None else None


class CurveError(UserError, ValueError):
    """A file that is not a verify-cost curve the benchmark wrote."""


_Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]  # a time the formulas divide by: positive and finite


class VerifyCurve(Fields):
    """What the formulas and the pages read of a curve (bench/curve.py writes more: kept, unchecked and unread)."""

    model_config = ConfigDict(extra="allow")
    format: Literal["specviz-verify-curve"]
    target_seconds: Many(_Seconds, 1024, min_len=1, read_as=list)  # t_verify(g), g = 0, 1, ...
    target_step_seconds: _Seconds
    draft_step_seconds: _Seconds | None = None  # None: the curve timed no draft
    device_name: Str(200) = ""
    dtype: Str(40) = ""
    measured_at: Str(40) = ""


def read_verify_curve(path: str | os.PathLike[str]) -> dict:
    """A verify-cost curve saved by the benchmark, checked (VerifyCurve) so that the formulas above can trust its
    times; CurveError in one line naming the field, FileNotFoundError if there is none."""
    curve = read_model(Path(path), VerifyCurve, CurveError, "a verify-cost curve", 2**20)
    return curve.model_dump()


def load_verify_curve(path: str | os.PathLike[str]) -> dict | None:
    """read_verify_curve, or None if there is none or it is not one (the pages list the names of those)."""
    try:
        return read_verify_curve(path)
    except (OSError, CurveError):
        return None
