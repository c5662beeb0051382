"""The batching benchmark's cost model: what the timed forwards predict a batched run's speed-up to be.

A round of `rows` rows drafting g tokens costs g draft forwards (the first over each row's pending tokens: two where
a row accepted its whole draft last round) and one verify T_verify(rows, g); a plain step costs T(rows) (the verify at
g = 0). A run's predicted seconds add up the rounds it had (rows leave the batch as
they finish, the last round drafts only up to the budget), and its predicted speed-up sets those against the plain
run's steps priced the same way, from the same timings (docs/DESIGN.md, "Batching").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def interpolate(tokens: Sequence[int], seconds: Sequence[float], n: float) -> float:
    """T(n) between measured points (linear), and beyond the last one along the last segment."""
    if n <= tokens[0]:
        return seconds[0]
    for i in range(1, len(tokens)):
        if n <= tokens[i]:
            n0, n1, t0, t1 = tokens[i - 1], tokens[i], seconds[i - 1], seconds[i]
            return t0 + (t1 - t0) * (n - n0) / (n1 - n0)
    (n0, t0), (n1, t1) = (tokens[-2], seconds[-2]), (tokens[-1], seconds[-1])
    return t1 + (t1 - t0) * (n - n1) / (n1 - n0)


def predicted_speedup(tokens_per_round: float, gamma: int, step: float, verify: float, draft: float) -> float:
    """L * T(B) / (gamma * t_draft(B) + T(B (gamma + 1))): a round yields L tokens per row for gamma draft steps and
    one verify; plain decoding yields one per row per step."""
    return tokens_per_round * step / (gamma * draft + verify)


def shape_cost(costs_by_size: dict[int, dict]) -> Callable[..., float]:
    """Seconds of one round of `rows` rows drafting `length` tokens (length 0: a plain step), from the forwards timed
    at the batch sizes measured so far: the draft's first forward (over one or two tokens per row), length - 1 more
    draft steps t_draft(rows) and T_verify(rows, length), each linear between the measured sizes (and between the
    measured gammas, the plain step as gamma 0)."""
    sizes = sorted(costs_by_size)

    def across(rows: int, pick: Callable[[dict], float]) -> float:
        values = [pick(costs_by_size[size]) for size in sizes]
        return values[0] if len(sizes) == 1 else interpolate(sizes, values, rows)

    def verify(costs: dict, length: int) -> float:
        gammas = [0, *sorted(costs["verify"])]
        seconds = [costs["target_step_seconds"], *(costs["verify"][g] for g in gammas[1:])]
        return interpolate(gammas, seconds, length)

    def seconds(rows: int, length: int, catch_up: int = 1) -> float:
        """catch_up: the tokens per row of the round's first draft forward (2 where a row accepted its whole
        draft: its last draft and the bonus token); every later draft step takes one."""
        if length == 0:
            return across(rows, lambda c: verify(c, 0))
        first = "draft_catch_up_seconds" if catch_up > 1 else "draft_step_seconds"
        steps = across(rows, lambda c: c.get(first, c["draft_step_seconds"]))
        steps += (length - 1) * across(rows, lambda c: c["draft_step_seconds"])
        return steps + across(rows, lambda c: verify(c, length))

    return seconds


def shaped_speedup(method: dict, plain: dict, cost: Callable[[int, int], float]) -> float:
    """The speed-up the timed forwards predict for the rounds this run had, against the plain run's steps priced by
    the same timings: a CPU whose speed drifts between the timing and the runs then moves both sides alike."""
    speculative = sum(cost(*shape) for shape in method["shapes"])
    plain_seconds = sum(cost(*shape) for shape in plain["shapes"])
    return (method["tokens"] / speculative) / (plain["tokens"] / plain_seconds)
