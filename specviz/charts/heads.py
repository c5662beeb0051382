"""Figures of the Heads page: per-head accuracy beside Medusa's published figures, and the training loss."""

from __future__ import annotations

import plotly.graph_objects as go

from .base import COLORS, _layout

VICUNA_7B_TOP1 = (0.56, 0.32, 0.20, 0.15)  # Medusa-1 heads 1-4 on Vicuna-7B (Cai et al. 2024)


def accuracy_figure(report: dict) -> go.Figure:
    """Top-1 and top-5 per head on held-out text, and (Medusa) the paper's top-1 as markers."""
    if report.get("kind") == "eagle":
        heads = ["next token, from the true feature"]
    else:
        heads = [f"head {k + 1} (x+{k + 2})" for k in range(report["heads"])]
    fig = go.Figure()
    fig.add_bar(x=heads, y=report["top1"], name="top-1 (held out)", marker_color=COLORS["p"])
    fig.add_bar(x=heads, y=report["top5"], name="top-5 (held out)", marker_color=COLORS["q"], opacity=0.6)
    published = [] if report.get("kind") == "eagle" else list(VICUNA_7B_TOP1[: report["heads"]])
    fig.add_scatter(
        x=heads[: len(published)],
        y=published,
        mode="markers",
        name="Medusa-1 on Vicuna-7B, top-1",
        marker=dict(symbol="diamond", size=12, color=COLORS["measured"]),
    )
    fig.update_yaxes(range=[0, 1], title="accuracy", tickformat=".0%")
    return _layout(fig, "How often each head guesses the target's token", barmode="group")


def training_figure(curve: list[dict]) -> go.Figure:
    """The weighted loss, sum_k 0.8^k CE_k, per optimiser step."""
    fig = go.Figure()
    fig.add_scatter(
        x=[p["step"] for p in curve], y=[p["loss"] for p in curve], mode="lines", line=dict(color=COLORS["p"])
    )
    fig.update_xaxes(title="optimiser step")
    fig.update_yaxes(title="loss")
    return _layout(fig, "Training loss", height=260)
