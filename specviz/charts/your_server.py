"""The Your server page's figures: a serving engine's acceptance by draft position (both rates, as the Acceptance lab
draws its own runs'), and the advisor's speed-up against draft length (as Theory draws Leviathan's)."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.decoding.metrics import SpecMetrics
from specviz.lessons.advisor import Advice

from .base import COLORS, _layout


def server_position_figure(metrics: SpecMetrics, title: str) -> go.Figure:
    """Per position i (1-based): accepted at i / drafts, and accepted at i / drafts that reached i."""
    positions = list(range(1, len(metrics.accepted_per_position) + 1))
    fig = go.Figure()
    fig.add_bar(
        x=positions,
        y=list(metrics.per_position_acceptance_rate),
        name="accepted at i ÷ drafts",
        marker_color=COLORS["plain"],  # slate beside the green: two greens read as one
        customdata=[[k, metrics.drafts] for k in metrics.accepted_per_position],
        hovertemplate="position %{x}: %{y:.0%} of all drafts (%{customdata[0]} of %{customdata[1]})<extra></extra>",
    )
    fig.add_bar(
        x=positions,
        y=[r if r is not None else 0.0 for r in metrics.conditional_acceptance_rate],
        name="accepted at i ÷ reached i",
        marker_color=COLORS["accepted"],
        customdata=[[k, r] for k, r in zip(metrics.accepted_per_position, metrics.reached_per_position, strict=True)],
        hovertemplate="position %{x}: %{y:.0%} of the drafts that reached it "
        "(%{customdata[0]} of %{customdata[1]})<extra></extra>",
    )
    fig.update_xaxes(title_text="position in the draft", dtick=1)
    fig.update_yaxes(title_text="share accepted", range=[0, 1], tickformat=".0%")
    return _layout(fig, title, height=320, barmode="group")


STAR = dict(symbol="star", size=16, color="#f59e0b", line=dict(color="#92400e", width=1))  # Theory's optimum
YOURS = dict(size=11, color=COLORS["p"], line=dict(color="white", width=2))  # Theory's "your γ"


def _mark(fig: go.Figure, x: int, y: float, name: str, marker: dict) -> None:
    fig.add_scatter(
        x=[x], y=[y], name=name, mode="markers", marker=marker, hovertemplate=f"{name}: %{{y:.2f}}×<extra></extra>"
    )


def advice_figure(advice: Advice) -> go.Figure:
    """Predicted speed-up of each draft length 1..K from the server's own per-position rates, its best and its
    current length marked."""
    lengths = [r.length for r in advice.rows]
    fig = go.Figure()
    fig.add_scatter(
        x=lengths,
        y=[r.speedup for r in advice.rows],
        name=f"from your rates, c = {advice.c:.3f}" if advice.measured else f"from your rates, c = {advice.c:.2f}",
        mode="lines+markers",
        line=dict(color=COLORS["p"], width=3),
        customdata=[[r.tokens, r.steps] for r in advice.rows],
        hovertemplate="length %{x}: %{y:.2f}× (%{customdata[0]:.2f} tokens per verify, a round costs "
        "%{customdata[1]:.2f} target steps)<extra></extra>",
    )
    best, current = advice.row(advice.best), advice.row(advice.current)
    _mark(fig, best.length, best.speedup, f"best length = {best.length}", STAR)
    _mark(fig, current.length, current.speedup, f"your length = {current.length}", YOURS)
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dash"))
    fig.update_xaxes(title_text="draft length", dtick=1)
    fig.update_yaxes(title_text="speed-up (plain = 1)", rangemode="tozero")
    return _layout(fig, "Predicted speed-up by draft length", height=340)
