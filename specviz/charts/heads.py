"""Figures of the Heads page: per-head accuracy beside Medusa's published figures, and the training loss."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.drafters import EAGLE, MEDUSA

from .base import COLORS, _layout

VICUNA_7B_TOP1 = (0.56, 0.32, 0.20, 0.15)  # Medusa-1 heads 1-4 on Vicuna-7B (Cai et al. 2024)
LOSS_NAMES = {MEDUSA: "Σ 0.8ᵏ CE per head", EAGLE: "SmoothL1 + 0.1 CE"}  # what each kind minimises


def accuracy_figure(report: dict) -> go.Figure:
    """Top-1 and top-5 per head on held-out text, and (Medusa) the paper's top-1 as markers; short titles and
    labels, since the figure shares the page's width with the loss curve."""
    if report.get("kind") == EAGLE:
        heads, title = ["first guess"], "Held-out accuracy"
    else:
        heads, title = [f"head {k + 1}" for k in range(report["heads"])], "Held-out accuracy per head"
    fig = go.Figure()
    for name, values, color, opacity in (
        ("top-1", report["top1"], COLORS["p"], 1.0),
        ("top-5", report["top5"], COLORS["q"], 0.6),
    ):
        fig.add_bar(
            x=heads,
            y=values,
            name=f"{name} (held out)",
            marker_color=color,
            opacity=opacity,
            text=[f"{v:.0%}" for v in values],
            textposition="outside",
            cliponaxis=False,
        )
    published = [] if report.get("kind") == EAGLE else list(VICUNA_7B_TOP1[: report["heads"]])
    fig.add_scatter(
        x=heads[: len(published)],
        y=published,
        mode="markers",
        name="Medusa-1 on Vicuna-7B, top-1",
        marker=dict(symbol="diamond", size=12, color=COLORS["measured"]),
    )
    fig.update_yaxes(range=[0, 1.05], title="accuracy", tickformat=".0%")
    return _layout(fig, title, barmode="group")


def training_figure(curve: list[dict], kind: str = MEDUSA) -> go.Figure:
    """The loss per optimiser step (Medusa: sum_k 0.8^k CE_k over the heads; EAGLE: SmoothL1 + 0.1 CE)."""
    fig = go.Figure()
    fig.add_scatter(
        x=[p["step"] for p in curve], y=[p["loss"] for p in curve], mode="lines", line=dict(color=COLORS["p"])
    )
    fig.update_xaxes(title="optimiser step")
    fig.update_yaxes(title=f"loss: {LOSS_NAMES.get(kind, 'training loss')}")
    return _layout(fig, "Training loss", height=260)
