"""The Batching page's figures, from a checked batching result (specviz.batching_file): speed-up against the batch
size (measured and predicted, the break-even marked), throughput of both methods, and the verify-cost curve T(n)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from .base import COLORS, _layout


def _batches(doc: dict) -> list[int]:
    return [row["batch"] for row in doc["rows"]]


def speedup_vs_batch_figure(doc: dict) -> go.Figure:
    """Latency speed-up (speculative tokens/s over plain tokens/s, per row) against B, with the prediction."""
    batches = _batches(doc)
    fig = go.Figure()
    fig.add_scatter(
        x=batches,
        y=[row["predicted_speedup"] for row in doc["rows"]],
        name="predicted from the measured T(n), draft step and round length",
        mode="lines+markers",
        line=dict(color=COLORS["p"], width=2, dash="dash"),
        hovertemplate="B = %{x}: predicted %{y:.2f}×<extra></extra>",
    )
    fig.add_scatter(
        x=batches,
        y=[row["measured_speedup"] for row in doc["rows"]],
        name="measured (real batched loops)",
        mode="lines+markers",
        line=dict(color=COLORS["measured"], width=3),
        marker=dict(size=9),
        hovertemplate="B = %{x}: measured %{y:.2f}×<extra></extra>",
    )
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dot"), annotation_text="no speed-up")
    even = doc.get("break_even_batch")
    if even is not None:
        fig.add_vline(
            x=math.log10(even),  # shapes on a log axis take the log of the position
            line=dict(color=COLORS["rejected"], dash="dash"),
            annotation_text=f"speculation stops paying: B = {even}",
            annotation_position="top right",
        )
    fig.update_xaxes(title_text="batch size B", type="log", tickvals=batches, ticktext=[str(b) for b in batches])
    fig.update_yaxes(title_text="speed-up over batched plain decoding", rangemode="tozero")
    return _layout(fig, "Latency speed-up against the batch size", height=400)


def throughput_figure(doc: dict) -> go.Figure:
    """Total tokens per second of the whole batch, both methods, against B."""
    batches = _batches(doc)
    fig = go.Figure()
    for name, field, color in (
        ("plain decoding", "plain_tokens_per_second", COLORS["plain"]),
        ("speculative decoding", "speculative_tokens_per_second", COLORS["speculative"]),
    ):
        fig.add_scatter(
            x=batches,
            y=[row[field] for row in doc["rows"]],
            name=name,
            mode="lines+markers",
            line=dict(color=color, width=3),
            hovertemplate="B = %{x}: %{y:.1f} tokens/s<extra></extra>",
        )
    fig.update_xaxes(title_text="batch size B", type="log", tickvals=batches, ticktext=[str(b) for b in batches])
    fig.update_yaxes(title_text="tokens per second, whole batch", rangemode="tozero")
    return _layout(fig, "Throughput against the batch size", height=400)


def forward_cost_figure(doc: dict) -> go.Figure:
    """T(n) against n (log axes), with T(1) * n (no spare compute at all) for reference and the verifies of each
    measured B marked at n = B (gamma + 1)."""
    tokens, seconds = doc["curve"]["tokens"], doc["curve"]["seconds"]
    fig = go.Figure()
    fig.add_scatter(
        x=tokens,
        y=[seconds[0] * n for n in tokens],
        name="n × T(1): every token at full price",
        mode="lines",
        line=dict(color="#cbd5e1", dash="dot"),
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=tokens,
        y=seconds,
        name="T(n), measured",
        mode="lines+markers",
        line=dict(color=COLORS["verify"], width=3),
        hovertemplate="n = %{x}: %{y:.3f} s<extra></extra>",
    )
    gamma = doc["gamma"]
    fig.add_scatter(
        x=[row["batch"] * (gamma + 1) for row in doc["rows"]],
        y=[row["curve_verify_seconds"] for row in doc["rows"]],
        text=[f"B = {row['batch']}" for row in doc["rows"]],
        name=f"a verify at batch B: n = B × (γ + 1), γ = {gamma}",
        mode="markers+text",
        textposition="top left",
        marker=dict(color=COLORS["measured"], size=10, symbol="diamond"),
        hovertemplate="%{text}: n = %{x}, %{y:.3f} s<extra></extra>",
    )
    fig.update_xaxes(title_text="n, new tokens in one forward", type="log")
    fig.update_yaxes(title_text="seconds", type="log")
    return _layout(fig, "What one target forward costs: T(n)", height=420)
