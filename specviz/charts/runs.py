"""Figures of one run or a batch of runs: a round's next-token choice, time lines, the lab's statistics, and
the Lossless page's histogram."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from specviz.lessons.lab import (
    GammaPoint,
    GroupStat,
    PositionStat,
    baseline_timeline,
    round_phases,
    speculative_timeline,
)
from specviz.lessons.lossless import LosslessResult
from specviz.markup import visible
from specviz.traces.trace import RoundEvent, Trace

from .base import COLORS, _layout, _unique


def next_token_figure(event: RoundEvent, greedy: bool = False) -> go.Figure:
    """p, q and the residual norm(max(0, p - q)) over the top tokens at the rejection (or bonus) position.

    Greedy decoding uses no residual (the correction is argmax p), so it shows p and q only. Only the top
    few of each distribution are recorded in the trace; a missing bar means "below the top".
    """
    residual = () if greedy else event.top_residual
    ids: list[int] = []
    texts: dict[int, str] = {}
    for series in (event.top_p, residual, event.top_q):
        for t in series:
            if t.id not in texts:
                ids.append(t.id)
                texts[t.id] = t.text
    ids = ids[:12]
    labels = _unique([visible(texts[i]) for i in ids])
    label_of = dict(zip(ids, labels, strict=True))
    fig = go.Figure()
    series = [("p (target)", event.top_p, COLORS["p"])]
    if event.next_source == "resampled":
        series += [
            ("q (draft)", event.top_q, COLORS["q"]),
            ("residual norm(max(0, p−q))", residual, COLORS["residual"]),
        ]
    for name, values, color in series:
        if not values:
            continue
        by_id = {t.id: t.prob for t in values}
        fig.add_bar(
            name=name,
            x=labels,
            y=[by_id.get(i) for i in ids],
            marker_color=color,
            hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>",
        )
    chosen = event.next_token
    if chosen.id in label_of:
        fig.add_annotation(
            x=label_of[chosen.id],
            y=1.0,
            yref="paper",
            text="chosen",
            showarrow=False,
            font=dict(color=COLORS[event.next_source], size=12),
            yanchor="bottom",
        )
    # the tokens at 45°, whole: upright in a narrow column they took most of the figure's height
    fig.update_xaxes(type="category", tickangle=-45, tickfont=dict(family="ui-monospace, monospace", size=13))
    fig.update_yaxes(title_text="probability", rangemode="tozero")
    return _layout(fig, height=400 if len(series) > 1 else 340, barmode="group", bargap=0.25)


def timeline_figure(trace: Trace) -> go.Figure:
    """Gantt-like: draft and verify phases per round, and each step of plain decoding, on one clock."""
    fig = go.Figure()
    rows = ["plain: target step", "speculative: verify", "speculative: draft"]
    if trace.baseline:
        starts = [e.elapsed - e.seconds for e in trace.baseline]
        fig.add_bar(
            name="plain decoding step",
            y=[rows[0]] * len(starts),
            x=[e.seconds for e in trace.baseline],
            base=starts,
            orientation="h",
            marker=dict(color=COLORS["plain"], line=dict(color="white", width=1)),
            customdata=[[e.index, visible(e.token.text)] for e in trace.baseline],
            hovertemplate="token %{customdata[0]} %{customdata[1]}<br>%{x:.3f} s<extra></extra>",
        )
    phases = round_phases(trace)
    for kind, row in (("verify", rows[1]), ("draft", rows[2])):
        ps = [ph for ph in phases if ph.kind == kind]
        if not ps:
            continue
        fig.add_bar(
            name=f"{kind} phase",
            y=[row] * len(ps),
            x=[ph.end - ph.start for ph in ps],
            base=[ph.start for ph in ps],
            orientation="h",
            marker=dict(color=COLORS[kind], line=dict(color="white", width=1)),
            customdata=[[ph.round + 1, ph.accepted, ph.drafted] for ph in ps],
            hovertemplate="round %{customdata[0]}: %{customdata[1]} of %{customdata[2]} accepted"
            "<br>%{x:.3f} s<extra>" + kind + "</extra>",
        )
    fig.update_yaxes(categoryorder="array", categoryarray=rows)
    fig.update_xaxes(title_text="seconds since each run started", rangemode="tozero")
    return _layout(fig, height=300, barmode="overlay", showlegend=True)


def progress_figure(trace: Trace) -> go.Figure:
    """Tokens committed against time, for both methods (a steeper line is faster)."""
    fig = go.Figure()
    spec = speculative_timeline(trace)
    base = baseline_timeline(trace)
    for name, tokens, color in (("speculative", spec, COLORS["speculative"]), ("plain", base, COLORS["plain"])):
        if not tokens:
            continue
        fig.add_scatter(
            name=name,
            x=[0.0] + [t.time for t in tokens],
            y=list(range(len(tokens) + 1)),
            line=dict(color=color, width=3, shape="hv"),
            mode="lines",
        )
    fig.update_xaxes(title_text="seconds", rangemode="tozero")
    fig.update_yaxes(title_text="tokens generated", rangemode="tozero")
    return _layout(fig, height=300)


def position_figure(stats: Sequence[PositionStat]) -> go.Figure:
    fig = go.Figure()
    fig.add_bar(
        x=[s.position for s in stats],
        y=[s.rate for s in stats],
        marker_color=COLORS["accepted"],
        customdata=[[s.accepted, s.reached] for s in stats],
        hovertemplate="position %{x}: %{y:.0%} (%{customdata[0]} of %{customdata[1]})<extra></extra>",
    )
    fig.update_xaxes(title_text="position in the draft", dtick=1)
    fig.update_yaxes(title_text="accepted, given it was checked", range=[0, 1], tickformat=".0%")
    return _layout(fig, "Acceptance by draft position", height=300)


def group_figure(stats: Sequence[GroupStat], title: str) -> go.Figure:
    names = [s.group for s in stats]
    fig = go.Figure()
    fig.add_bar(
        name="acceptance rate",
        x=names,
        y=[s.acceptance_rate for s in stats],
        marker_color=COLORS["accepted"],
        yaxis="y",
        offsetgroup=0,
        hovertemplate="%{x}: %{y:.0%}<extra>acceptance</extra>",
    )
    fig.add_bar(
        name="mean acceptance length",
        x=names,
        y=[s.mean_acceptance_length for s in stats],  # None (never drafted): no bar
        marker_color=COLORS["p"],
        yaxis="y2",
        offsetgroup=1,
        hovertemplate="%{x}: %{y:.2f}<extra>mean acceptance length</extra>",
    )
    fig.update_layout(
        yaxis=dict(title="acceptance rate", range=[0, 1], tickformat=".0%"),
        yaxis2=dict(title="mean acceptance length", overlaying="y", side="right", rangemode="tozero", showgrid=False),
    )
    return _layout(fig, title, height=340, barmode="group")


def gamma_figure(series: Sequence[tuple[str, Sequence[GammaPoint]]]) -> go.Figure:
    """gamma per round under the adaptive schedule, with the accepted count of each round."""
    fig = go.Figure()
    palette = ["#4f46e5", "#0d9488", "#ea580c", "#db2777", "#65a30d", "#0891b2"]
    for k, (name, points) in enumerate(series):
        color = palette[k % len(palette)]
        fig.add_scatter(
            x=[pt.round + 1 for pt in points],
            y=[pt.gamma for pt in points],
            name=f"γ · {name}",
            mode="lines+markers",
            line=dict(color=color, width=2, shape="hv"),
            customdata=[[pt.accepted, pt.drafted] for pt in points],
            hovertemplate="round %{x}: γ = %{y}, accepted %{customdata[0]} of %{customdata[1]}<extra></extra>",
        )
        fig.add_bar(
            x=[pt.round + 1 for pt in points],
            y=[pt.accepted for pt in points],
            name=f"accepted · {name}",
            marker_color=color,
            opacity=0.25,
            showlegend=False,
            hoverinfo="skip",
        )
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="γ (line) · accepted (bars)", rangemode="tozero")
    return _layout(fig, "γ over time under the adaptive schedule", height=340, barmode="overlay")


def lossless_figure(result: LosslessResult, show_draft: bool = True) -> go.Figure:
    labels = _unique([visible(t) if i >= 0 else t for t, i in zip(result.token_texts, result.token_ids, strict=False)])
    n = result.n
    fig = go.Figure()
    fig.add_bar(
        name="p: the target's exact distribution",
        x=labels,
        y=list(result.p),
        marker_color=COLORS["p"],
        hovertemplate="%{x}: p = %{y:.4f}<extra></extra>",
    )
    spec_name = "speculative samples" if result.resample_residual else "broken speculative samples (no residual)"
    fig.add_bar(
        name=spec_name,
        x=labels,
        y=[k / n for k in result.spec_counts],
        marker_color=COLORS["accepted"] if result.resample_residual else COLORS["rejected"],
        hovertemplate="%{x}: %{y:.4f}<extra>" + spec_name + "</extra>",
    )
    if show_draft:
        fig.add_bar(
            name="draft alone (samples of q)",
            x=labels,
            y=[k / n for k in result.draft_counts],
            marker_color=COLORS["q"],
            opacity=0.6,
            hovertemplate="%{x}: %{y:.4f}<extra>draft alone</extra>",
        )
    fig.update_xaxes(type="category", tickfont=dict(family="ui-monospace, monospace", size=13))
    fig.update_yaxes(title_text="probability / frequency", rangemode="tozero")
    return _layout(fig, height=400, barmode="group", bargap=0.2)
