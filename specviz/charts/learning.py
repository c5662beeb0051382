"""The Learning page's figures: per request of a stream, mean accepted tokens per round and speed-up over the target
alone for the draft model, the traffic drafter and the controller (rows of bench/stream.py)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.drafters import CONTROLLER, MODEL, TRAFFIC, label

from .base import COLORS, _layout

DRAFTER_STYLE = {
    MODEL: ("draft model alone", COLORS["draft"], "solid"),
    TRAFFIC: ("traffic drafter alone", COLORS["measured"], "dot"),
    CONTROLLER: (label(CONTROLLER), COLORS["speculative"], "solid"),
}


def phase_changes(rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(request number, new phase) where the traffic changes: the first request, then every switch."""
    return [(i + 1, r["phase"]) for i, r in enumerate(rows) if i == 0 or r["phase"] != rows[i - 1]["phase"]]


def learning_figure(rows: list[dict[str, Any]], title: str | None = None) -> go.Figure:
    """Two panels over the request number: accepted tokens per round, and speed-up; a dashed line at each switch
    of phase, and the traffic store's size as light bars behind the first panel."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("accepted per round", "speed-up over the target"),  # short: a narrow panel
        specs=[[{"secondary_y": True}], [{}]],
    )
    x = [r["index"] + 1 for r in rows]
    fig.add_trace(
        go.Bar(
            x=x,
            y=[r["store"]["tokens"] for r in rows],
            name="traffic store (tokens)",
            marker_color="#e5e7eb",
            opacity=0.6,
        ),
        row=1,
        col=1,
        secondary_y=True,
    )
    for drafter, (name, color, dash) in DRAFTER_STYLE.items():
        for panel, metric in ((1, "mean_accepted_per_round"), (2, "speedup")):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[r[drafter][metric] for r in rows],
                    name=name,
                    mode="lines+markers",
                    line=dict(color=color, dash=dash, width=2),
                    legendgroup=drafter,
                    showlegend=panel == 1,
                ),
                row=panel,
                col=1,
            )
    fig.add_hline(y=1.0, line=dict(color=COLORS["plain"], dash="dash", width=1), row=2, col=1)
    for number, phase in phase_changes(rows)[1:]:
        fig.add_vline(x=number - 0.5, line=dict(color=COLORS["rejected"], dash="dash", width=1))
        fig.add_annotation(  # below the panel's title, which is centred and may sit right above the switch
            x=number - 0.5,
            y=0.93,
            yref="paper",
            yanchor="top",
            text=f"→ {phase}",
            showarrow=False,
            xanchor="left",
            bgcolor="rgba(255,255,255,0.8)",
        )
    # its own round ticks (an overlaying axis would otherwise sync its ticks to the left axis': 320, 2790, 5250)
    fig.update_yaxes(
        title_text="store tokens", secondary_y=True, row=1, col=1, showgrid=False, tickmode="auto", rangemode="tozero"
    )
    fig.update_xaxes(title_text="request", row=2, col=1)
    if len(rows) <= 12:  # a tick per request: plotly would put ticks at 0.5, 1.5, ... between them
        fig.update_xaxes(tickmode="linear", tick0=1, dtick=1)
    return _layout(fig, title, height=560, barmode="overlay")
