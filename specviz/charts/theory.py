"""The Theory page's figures: Leviathan et al.'s predicted speed-up and expected tokens, the measured
verify-cost curve, and where each gamma is best."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from specviz.lessons import theory
from specviz.lessons.lab import MeasuredPoint

from .base import COLORS, _layout


def speedup_figure(
    a: float, g: int, c: float, points: Sequence[MeasuredPoint] = (), gamma_max: int = 16, curve: dict | None = None
) -> go.Figure:
    """Predicted speed-up against gamma for the chosen a and c, a few other a for reference, and measured runs.
    With a verify-cost curve (theory.load_verify_curve), also the prediction from its measured times at this a."""
    gammas = list(range(1, gamma_max + 1))
    fig = go.Figure()
    _formula_curves(fig, a, g, c, gammas, gamma_max)
    if curve is not None and theory.measured_cost_ratio(curve) is not None:
        _measured_times_curve(fig, a, curve, gammas, gamma_max)
    _measured_runs(fig, points)
    # no words on the line: the curves cross it where they fall below 1 (the y-axis's title says what 1 is)
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dash"))
    fig.update_xaxes(title_text="γ (draft length)", dtick=1 if gamma_max <= 8 else 2)  # 16 ticks crowd a half width
    fig.update_yaxes(title_text="speed-up (plain = 1)", rangemode="tozero")
    return _layout(fig, "Speed-up over plain decoding, against γ", height=420)


def _formula_curves(fig: go.Figure, a: float, g: int, c: float, gammas: list[int], gamma_max: int) -> None:
    """Leviathan's speed-up at this a and c (with its optimum and the chosen gamma), and at a few other a: one legend
    entry for those (a legend of ten entries scrolled in a column 270 px wide), each curve's a in its hover."""
    others = [other for other in (0.5, 0.7, 0.9) if abs(other - a) > 0.02]
    for i, other in enumerate(others):
        fig.add_scatter(
            x=gammas,
            y=theory.speedup_curve(other, c, gammas),
            name=f"a = {', '.join(str(o) for o in others)}",
            legendgroup="other a",
            showlegend=i == 0,
            mode="lines",
            line=dict(color="#cbd5e1", width=1.5, dash="dot"),
            hovertemplate=f"a = {other}, γ = %{{x}}: %{{y:.2f}}×<extra></extra>",
        )
    fig.add_scatter(
        x=gammas,
        y=theory.speedup_curve(a, c, gammas),
        name=f"a = {a:.2f}, c = {c:.2f}",
        mode="lines",
        line=dict(color=COLORS["p"], width=3),
        hovertemplate="γ = %{x}: %{y:.2f}×<extra></extra>",
    )
    best = theory.optimal_gamma(a, c, gamma_max)
    fig.add_scatter(
        x=[best],
        y=[theory.speedup(a, best, c)],
        name=f"optimal γ = {best}",
        mode="markers",
        marker=dict(symbol="star", size=16, color="#f59e0b", line=dict(color="#92400e", width=1)),
    )
    fig.add_scatter(
        x=[g],
        y=[theory.speedup(a, g, c)],
        name=f"your γ = {g}",
        mode="markers",
        marker=dict(size=11, color=COLORS["p"], line=dict(color="white", width=2)),
    )


def _measured_times_curve(fig: go.Figure, a: float, curve: dict, gammas: list[int], gamma_max: int) -> None:
    # Same a, but the machine's own c and a verify that costs what it measured, not one step.
    name = f"measured times ({curve.get('device', '?')}, c = {theory.measured_cost_ratio(curve):.3f})"
    fig.add_scatter(
        x=gammas,
        y=theory.measured_speedup_curve(a, curve, gammas),
        name=name,
        mode="lines",
        line=dict(color=COLORS["measured"], width=3, dash="dash"),
        hovertemplate="γ = %{x}: %{y:.2f}× with measured times<extra></extra>",
    )
    best_m = theory.measured_optimal_gamma(a, curve, gamma_max)
    fig.add_scatter(
        x=[best_m],
        y=[theory.measured_speedup(a, best_m, curve)],
        mode="markers",
        name=f"measured optimal γ = {best_m}",
        marker=dict(symbol="star", size=16, color=COLORS["measured"], line=dict(color="white", width=1)),
    )


def _measured_runs(fig: go.Figure, points: Sequence[MeasuredPoint]) -> None:
    """This session's runs: measured speed-ups, and the formula at each run's own a, gamma and c beside them."""
    measured = [pt for pt in points if pt.measured_speedup is not None]
    predicted = [pt for pt in measured if pt.predicted_speedup is not None]
    if predicted:
        # The formula at each run's own a, gamma and c, joined to what was measured.
        xs, ys = [], []
        for pt in predicted:
            xs += [pt.g, pt.g, None]
            ys += [pt.predicted_speedup, pt.measured_speedup, None]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            line=dict(color=COLORS["rejected"], width=1, dash="dot"),
            showlegend=False,
            hoverinfo="skip",
        )
        fig.add_scatter(
            x=[pt.g for pt in predicted],
            y=[pt.predicted_speedup for pt in predicted],
            name="formula for each run",
            mode="markers",
            marker=dict(size=11, symbol="diamond-open", color=COLORS["rejected"], line=dict(width=2)),
            customdata=[[pt.label, pt.a, pt.c] for pt in predicted],
            hovertemplate="%{customdata[0]}<br>formula at a = %{customdata[1]:.2f}, "
            "c = %{customdata[2]:.3f}: %{y:.2f}×<extra></extra>",
        )
    if measured:
        fig.add_scatter(
            x=[pt.g for pt in measured],
            y=[pt.measured_speedup for pt in measured],
            name="measured runs",
            mode="markers",
            marker=dict(size=12, color=COLORS["rejected"], symbol="diamond"),
            customdata=[[pt.label, pt.a, pt.c, pt.predicted_speedup] for pt in measured],
            hovertemplate="%{customdata[0]}<br>γ = %{x:.1f}, measured %{y:.2f}×<br>"
            "a = %{customdata[1]:.2f}, c = %{customdata[2]:.3f}, "
            "formula %{customdata[3]:.2f}×<extra></extra>",
        )


def verify_curve_figure(curve: dict, gamma_max: int = 16) -> go.Figure:
    """What one verify of g drafted tokens (a target forward over g+1 tokens) costs, in target steps, as
    measured; Leviathan et al.'s flat 1 and one draft step (c) for reference. Past the measured end the
    line is the linear extension that the measured speed-up uses, drawn dotted."""
    measured = list(range(len(curve["target_seconds"])))
    extended = list(range(measured[-1], gamma_max + 1))
    ms = [1000 * theory.curve_time(curve, g) for g in measured]
    fig = go.Figure()
    fig.add_scatter(
        x=[g + 1 for g in measured],
        y=theory.verify_cost_ratios(curve, measured),
        customdata=ms,
        name="verify, measured",
        mode="lines+markers",
        line=dict(color=COLORS["verify"], width=3),
        hovertemplate="%{x} tokens: %{customdata:.0f} ms = %{y:.2f} target steps<extra></extra>",
    )
    if len(extended) > 1:
        fig.add_scatter(
            x=[g + 1 for g in extended],
            y=theory.verify_cost_ratios(curve, extended),
            name="extended linearly past the measured end",
            mode="lines",
            line=dict(color=COLORS["verify"], width=2, dash="dot"),
            hoverinfo="skip",
        )
    ends = [1, extended[-1] + 1]
    fig.add_scatter(
        x=ends,
        y=[1.0, 1.0],
        name="Leviathan's assumption: a verify costs one step",
        mode="lines",
        line=dict(color=COLORS["plain"], width=2, dash="dash"),
        hoverinfo="skip",
    )
    c = theory.measured_cost_ratio(curve)
    if c is not None:
        fig.add_scatter(
            x=ends,
            y=[c, c],
            name=f"one draft step: c = {c:.3f}",
            mode="lines",
            line=dict(color=COLORS["draft"], width=2, dash="dot"),
            hoverinfo="skip",
        )
    fig.update_xaxes(title_text="tokens verified per forward (γ + 1)", dtick=1 if gamma_max <= 8 else 2)
    fig.update_yaxes(title_text="time ÷ one target step", rangemode="tozero")
    return _layout(fig, f"Verify cost, measured on {curve.get('device_name', curve.get('device', '?'))}", height=380)


def expected_tokens_figure(a: float, g: int, points: Sequence[MeasuredPoint] = ()) -> go.Figure:
    """E[tokens per round] = (1 - a^(g+1)) / (1 - a) against a, for a few gamma; measured runs on top."""
    xs = [i / 100 for i in range(0, 100)]
    fig = go.Figure()
    for other in sorted({1, 2, 4, 8, g}):
        highlight = other == g
        fig.add_scatter(
            x=xs,
            y=[theory.expected_tokens(x, other) for x in xs],
            name=f"γ = {other}",
            mode="lines",
            line=dict(color=COLORS["p"] if highlight else "#cbd5e1", width=3 if highlight else 1.5),
            hovertemplate="a = %{x:.2f}: %{y:.2f} tokens<extra>γ = " + str(other) + "</extra>",
        )
    fig.add_scatter(
        x=[a],
        y=[theory.expected_tokens(a, g)],
        name="your a, γ",
        mode="markers",
        marker=dict(size=11, color=COLORS["p"], line=dict(color="white", width=2)),
    )
    if points:
        fig.add_scatter(
            x=[pt.a for pt in points],
            y=[pt.tokens_per_round for pt in points],
            name="measured runs",
            mode="markers",
            marker=dict(size=12, color=COLORS["rejected"], symbol="diamond"),
            customdata=[[pt.label, pt.g] for pt in points],
            hovertemplate="%{customdata[0]}<br>a = %{x:.2f}, γ ≈ %{customdata[1]:.1f}: "
            "%{y:.2f} tokens per target pass<extra></extra>",
        )
    fig.update_xaxes(title_text="a (expected acceptance)", range=[0, 1])
    fig.update_yaxes(title_text="mean acceptance length", rangemode="tozero")
    return _layout(fig, "Expected mean acceptance length", height=420)


def optimal_gamma_map(a: float, c: float, gamma_max: int = 16) -> go.Figure:
    """Which gamma maximises the speed-up, for every expected acceptance a and cost ratio c."""
    xs = [round(0.05 * i, 2) for i in range(1, 20)]  # a: 0.05 .. 0.95
    ys = [round(0.02 * i, 2) for i in range(0, 26)]  # c: 0 .. 0.5
    z = [[theory.optimal_gamma(x, y, gamma_max) for x in xs] for y in ys]
    fig = go.Figure(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            colorscale="Viridis",
            colorbar=dict(title="best γ"),
            hovertemplate="a = %{x}, c = %{y}: best γ = %{z}<extra></extra>",
        )
    )
    fig.add_scatter(
        x=[a],
        y=[c],
        mode="markers",
        name="your a, c",
        showlegend=False,
        marker=dict(size=13, color="white", line=dict(color="black", width=2)),
    )
    fig.update_xaxes(title_text="a (expected acceptance)")
    fig.update_yaxes(title_text="c (draft cost / target cost)")
    return _layout(fig, "Optimal γ", height=360)
