"""Aggregations over traces for the Race, Theory and Acceptance lab pages: pure functions of traces.

Only `run_batch` runs models (through runs.run_trace); everything else reads recorded events.
Notation: p = target, q = draft, gamma = draft length, a = acceptance rate, c = cost ratio.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from specviz.decoding.config import SpecConfig
from specviz.decoding.metrics import SpecMetrics
from specviz.drafters import label as drafter_label
from specviz.runs import run_trace, speedup
from specviz.traces.trace import RoundEvent, Trace

from . import theory

Origin = Literal["accepted", "resampled", "bonus"]


# --- batches --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedRun:
    category: str
    prompt: str
    config: SpecConfig


@dataclass(frozen=True)
class LabRun:
    category: str
    prompt: str
    trace: Trace

    @property
    def label(self) -> str:
        c = self.trace.config
        temp = "greedy" if c.greedy else f"T={c.temperature:g}"
        return f"{self.category} · {drafter_label(c.drafter)} · {temp} · {c.schedule} · {short(self.prompt, 40)}"


def short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plan_batch(
    prompts: dict[str, list[str]],
    categories: Iterable[str],
    per_category: int,
    temperatures: Iterable[float],
    drafters: Iterable[str],
    schedules: Iterable[str],
    base: SpecConfig,
) -> list[PlannedRun]:
    """Every (prompt, temperature, drafter, schedule) combination: the first `per_category` prompts of each category."""
    plan = []
    for category in categories:
        for prompt in prompts.get(category, [])[:per_category]:
            for temperature in temperatures:
                for drafter in drafters:
                    for schedule in schedules:
                        config = replace(
                            base,
                            temperature=float(temperature),
                            drafter=drafter,
                            schedule=schedule,
                            gamma_max=max(base.gamma_max, base.gamma),
                        )
                        plan.append(PlannedRun(category, prompt, config))
    return plan


def run_batch(
    pair,
    plan: Sequence[PlannedRun],
    *,
    chat: bool = True,
    cancel: threading.Event | None = None,
    on_progress: Callable[[int, int, PlannedRun], None] | None = None,
    on_wait: Callable[[float], None] | None = None,
    traffic=None,
    heads=None,
) -> list[LabRun]:
    """Run the plan one after the other (speculative only); stops between runs when cancel is set.
    Each run takes the pair's lock for itself (runs.run_trace), so other sessions can run in between; traffic and
    heads: what the runs' drafters learn from (runs.run_trace)."""
    for config in {p.config for p in plan}:
        config.validate()
    results = []
    for i, planned in enumerate(plan):
        if cancel is not None and cancel.is_set():
            break
        if on_progress is not None:
            on_progress(i, len(plan), planned)
        trace = run_trace(
            pair,
            planned.prompt,
            planned.config,
            chat=chat,
            cancel=cancel,
            on_wait=on_wait,
            traffic=traffic,
            heads=heads,
        )
        if trace.summary.finish_reason == "cancelled":
            break
        results.append(LabRun(planned.category, planned.prompt, trace))
    return results


# --- acceptance -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionStat:
    position: int  # 1-based position in the draft
    reached: int  # drafts at least this long whose earlier positions were all kept (metrics.py)
    accepted: int  # drafts that kept this position (its draft, or an alternative or tree node in its place)

    @property
    def rate(self) -> float:
        """P(keep position i | positions 1..i-1 kept): the conditional per-position acceptance rate (metrics.py)."""
        return self.accepted / self.reached if self.reached else 0.0


def run_metrics(trace: Trace) -> SpecMetrics:
    """A run's counters as the serving engines count them (decoding/metrics.py): every number the lab shows."""
    return SpecMetrics.from_events(trace.rounds)


def acceptance_by_position(traces: Iterable[Trace]) -> list[PositionStat]:
    m = sum((run_metrics(t) for t in traces), SpecMetrics())
    pairs = zip(m.accepted_per_position, m.reached_per_position, strict=True)
    return [PositionStat(i + 1, reached, kept) for i, (kept, reached) in enumerate(pairs) if reached]


def mean_acceptance_length(trace: Trace) -> float | None:
    """1 + accepted / drafts (rounds with a draft), rounded for a table; None for a run that never drafted."""
    length = run_metrics(trace).mean_acceptance_length
    return None if length is None else round(length, 2)


@dataclass(frozen=True)
class GroupStat:
    group: str
    runs: int
    rounds: int
    drafted: int
    accepted: int
    new_tokens: int
    seconds: float
    metrics: SpecMetrics = field(default_factory=SpecMetrics)  # the group's counters, added up (metrics.py)

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / drafts (rounds that drafted), the group's runs together; None if none drafted."""
        return self.metrics.mean_acceptance_length

    @property
    def acceptance_rate(self) -> float:
        """accepted / drafted, as in RunSummary."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_round(self) -> float:
        """New tokens per target forward: the speed-up if drafting were free and a verify cost one step."""
        return self.new_tokens / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


def group_stats(runs: Iterable[LabRun], key: Callable[[LabRun], str]) -> list[GroupStat]:
    """Pool the runs of each group (sums, then ratios), in first-seen order."""
    groups: dict[str, list[LabRun]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(run)
    stats = []
    for name, members in groups.items():
        s = [m.trace.summary for m in members]
        stats.append(
            GroupStat(
                group=name,
                runs=len(members),
                rounds=sum(x.rounds for x in s),
                drafted=sum(x.drafted for x in s),
                accepted=sum(x.accepted for x in s),
                new_tokens=sum(x.new_tokens for x in s),
                seconds=sum(x.seconds - x.prefill_seconds for x in s),
                metrics=sum((run_metrics(m.trace) for m in members), SpecMetrics()),
            )
        )
    return stats


def by_category(run: LabRun) -> str:
    return run.category


def by_temperature(run: LabRun) -> str:
    t = run.trace.config.temperature
    return "greedy (T=0)" if t == 0 else f"T={t:g}"


def by_drafter(run: LabRun) -> str:
    return drafter_label(run.trace.config.drafter)


def by_schedule(run: LabRun) -> str:
    return run.trace.config.schedule


def run_rows(runs: Iterable[LabRun]) -> list[dict]:
    """One row per run, for a table: what sets the run apart and the columns the lab's answers read (acceptance rate,
    tokens / s) first, whole in a window 1024 px wide (tests/browser/test_layout.py); tokens per pass, the counts and
    the prompt after."""
    rows = []
    for run in runs:
        s, c = run.trace.summary, run.trace.config
        rows.append(
            {
                "category": run.category,
                "drafter": drafter_label(c.drafter),
                "temperature": c.temperature,
                "acceptance rate": round(s.acceptance_rate, 3),
                "tokens / s": round(s.tokens_per_second, 2),
                "mean acceptance length": mean_acceptance_length(run.trace),
                "schedule": c.schedule,
                "γ": c.gamma,
                "new tokens": s.new_tokens,
                "rounds": s.rounds,
                "drafted": s.drafted,
                "accepted": s.accepted,
                "prompt": short(run.prompt, 60),
            }
        )
    return rows


def drafter_comparison(runs: Iterable[LabRun]) -> list[dict]:
    """Draft model against n-gram on the same prompt and settings: one row per prompt and temperature, both
    drafters' tokens / s first (which is faster, side by side in a window 1024 px wide), then both acceptances and
    tokens per pass, the schedule and the prompt after."""
    table: dict[tuple, dict[str, dict[str, float]]] = {}
    for run in runs:
        c, s = run.trace.config, run.trace.summary
        drafters = table.setdefault((run.category, run.prompt, c.temperature, c.schedule), {})
        drafters[drafter_label(c.drafter)] = {
            "tokens / s": round(s.tokens_per_second, 2),
            "acceptance": round(s.acceptance_rate, 3),
            "mean acceptance length": mean_acceptance_length(run.trace),
        }
    return [
        {
            "category": category,
            "temperature": temperature,
            **{f"{name}: {what}": drafters[name][what] for what in next(iter(drafters.values())) for name in drafters},
            "schedule": schedule,
            "prompt": short(prompt, 50),
        }
        for (category, prompt, temperature, schedule), drafters in table.items()
        if len(drafters) >= 2
    ]


@dataclass(frozen=True)
class GammaPoint:
    round: int
    gamma: int  # the draft length the schedule asked for
    drafted: int
    accepted: int


def gamma_series(trace: Trace) -> list[GammaPoint]:
    return [GammaPoint(e.index, e.gamma, len(e.drafted), e.n_accepted) for e in trace.rounds]


# --- tokens and their origin ----------------------------------------------------------------------


@dataclass(frozen=True)
class TokenOrigin:
    text: str
    origin: Origin
    round: int
    ratio: float | None  # min(1, p/q) for an accepted draft token
    prob: float  # q of the accepted token, or the probability of the resampled / bonus token


def round_origins(event: RoundEvent, limit: int | None = None) -> list[TokenOrigin]:
    """The tokens a round committed: accepted drafts, then the resampled or bonus token (cut at EOS);
    at most `limit` of them (a view draws a capped number, whatever a file says)."""
    out = []
    accepted = event.n_accepted if isinstance(event.n_accepted, int) else 0
    # A kept alternative took the rejected draft's place; a kept tree path follows the chain's accepted prefix.
    extra = [event.kept_alternative] if event.kept_alternative is not None else list(event.tree_path)
    kept = list(event.drafted[: max(0, accepted - len(extra))]) + extra[: max(0, accepted)]
    n = len(event.appended) if limit is None else min(len(event.appended), max(0, limit))
    for k in range(n):
        if k < len(kept):
            d = kept[k]
            out.append(TokenOrigin(d.text, "accepted", event.index, d.ratio, d.q))
        else:
            out.append(TokenOrigin(event.next_token.text, event.next_source, event.index, None, event.next_token.prob))
    return out


def token_origins(rounds: Iterable[RoundEvent]) -> list[TokenOrigin]:
    return [t for event in rounds for t in round_origins(event)]


# --- the race -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimedToken:
    time: float  # seconds since the run started (event.elapsed)
    text: str
    origin: str  # accepted | resampled | bonus | plain


def speculative_timeline(trace: Trace) -> list[TimedToken]:
    """Every committed token at the time its round ended."""
    return [TimedToken(e.elapsed, t.text, t.origin) for e in trace.rounds for t in round_origins(e)]


def baseline_timeline(trace: Trace) -> list[TimedToken]:
    return [TimedToken(e.elapsed, e.token.text, "plain") for e in trace.baseline]


@dataclass(frozen=True)
class Phase:
    kind: Literal["draft", "verify"]
    round: int
    start: float
    end: float
    accepted: int
    drafted: int


def round_phases(trace: Trace) -> list[Phase]:
    """Draft and verify spans per round on the run's clock. A round ends (elapsed) just after its verify
    and the cache rollback, so: verify = [elapsed - v, elapsed], draft = [elapsed - v - d, elapsed - v]."""
    phases = []
    for e in trace.rounds:
        verify_start = e.elapsed - e.verify_seconds
        draft_start = verify_start - e.draft_seconds
        phases.append(Phase("draft", e.index, draft_start, verify_start, e.n_accepted, len(e.drafted)))
        phases.append(Phase("verify", e.index, verify_start, e.elapsed, e.n_accepted, len(e.drafted)))
    return phases


@dataclass(frozen=True)
class Identity:
    checked: bool  # greedy with a baseline: the two texts must be identical
    identical: bool
    first_difference: int | None  # index of the first differing token


def greedy_identity(trace: Trace) -> Identity:
    if not trace.config.greedy or trace.baseline_summary is None:
        return Identity(False, False, None)
    a, b = trace.summary.token_ids, trace.baseline_summary.token_ids
    n = min(len(a), len(b))
    diff = next((i for i in range(n) if a[i] != b[i]), None)
    if diff is None and len(a) != len(b) and not _cancelled(trace):
        diff = n
    return Identity(True, diff is None, diff)


def _cancelled(trace: Trace) -> bool:
    return trace.summary.finish_reason == "cancelled" or (
        trace.baseline_summary is not None and trace.baseline_summary.finish_reason == "cancelled"
    )


# --- theory against measurement -------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredPoint:
    label: str
    a: float  # Leviathan's a (the expected acceptance, not the acceptance rate), from the mean accepted prefix
    g: float  # mean draft length per round
    tokens_per_round: float  # measured E[tokens per round]
    c: float | None  # draft time per draft forward / target time per token (needs a baseline)
    measured_speedup: float | None
    predicted_speedup: float | None  # theory.speedup(a, g, c)


def measured_point(trace: Trace, label: str = "") -> MeasuredPoint | None:
    """a, g, c of one run, as Leviathan et al. define them, and the speed-up they predict beside the measured one.

    a inverts E[accepted per round] = a (1 - a^g) / (1 - a); c = t_draft / t_target, where t_draft is the
    time of one draft forward and t_target the baseline's mean time per token. The formula models a chain of
    drafts, so a kept alternative is not counted in a: its extra token shows as a speed-up above the curve.
    """
    s = trace.summary
    if s.rounds == 0 or s.drafted == 0 or _cancelled(trace):  # a stopped run is no result: never a point
        return None
    g = s.drafted / s.rounds
    a = theory.acceptance_from_mean_accepted(sum(r.chain_accepted for r in trace.rounds) / s.rounds, g)
    c = measured = predicted = None
    if trace.baseline:
        t_target = sum(e.seconds for e in trace.baseline) / len(trace.baseline)
        t_draft = s.draft_seconds / s.draft_forwards if s.draft_forwards else s.draft_seconds / s.drafted
        if t_target > 0:
            c = t_draft / t_target
            predicted = theory.speedup(a, g, c)
        measured = speedup(trace)
    return MeasuredPoint(label or short(trace.prompt, 30), a, g, s.new_tokens / s.rounds, c, measured, predicted)


@dataclass(frozen=True)
class Costs:
    """Where the time of a speculative run goes, against one step of plain decoding."""

    target_step: float | None  # mean seconds of one plain decoding step (baseline)
    draft_forward: float | None  # mean seconds of one draft forward (None: n-gram, no model)
    verify: float  # mean seconds of one verify pass over the drafted tokens
    draft_per_round: float  # mean seconds of drafting per round
    tokens_per_round: float

    @property
    def verify_in_steps(self) -> float | None:
        """How many plain steps one verify pass costs (1.0 on memory-bound hardware, more on a CPU)."""
        return self.verify / self.target_step if self.target_step else None


def cost_breakdown(trace: Trace) -> Costs | None:
    s = trace.summary
    if s.rounds == 0:
        return None
    target_step = sum(e.seconds for e in trace.baseline) / len(trace.baseline) if trace.baseline else None
    return Costs(
        target_step=target_step,
        draft_forward=s.draft_seconds / s.draft_forwards if s.draft_forwards else None,
        verify=s.verify_seconds / s.rounds,
        draft_per_round=s.draft_seconds / s.rounds,
        tokens_per_round=s.new_tokens / s.rounds,
    )
