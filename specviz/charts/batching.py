"""The Batching page's figures, from a checked batching result (specviz.traces.batching): speed-up against the batch
size (measured and predicted, the break-even marked), throughput of both methods, and the verify-cost curve T(n)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from .base import COLORS, _layout

PREDICTIONS = (  # (row field, what it is predicted from, colour, dash)
    ("predicted_speedup", "the curve T(n), draft step and round length", "p", "dash"),
    ("predicted_speedup_batch_shapes", "this batch's own timed step, verify and draft step", "q", "dot"),
)


def log_ticks(values: list[float], label: str) -> dict:
    """Ticks of a log axis at 1, 2, 5 times the powers of ten that span these values, every one labelled in full:
    plotly's own minor ticks on a log axis read "5" and "2" for 0.5 and 0.2."""
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    ticks = [m * 10.0**e for e in range(low, high + 1) for m in (1, 2, 5)]
    ticks = [round(t, 12) for t in ticks if min(values) / 2 <= t <= max(values) * 2]
    return {"tickvals": ticks, "ticktext": [label.format(t) for t in ticks]}


def doubling_ticks(tokens: list[int]) -> dict:
    """Ticks of a log axis of token counts at the powers of two they span: 1, 2, 4, … 256."""
    ticks = [2**e for e in range(max(tokens).bit_length()) if min(tokens) <= 2**e <= max(tokens)]
    return {"tickvals": ticks, "ticktext": [str(t) for t in ticks]}


def _batches(doc: dict) -> list[int]:
    return [row["batch"] for row in doc["rows"]]


def speedup_vs_batch_figure(doc: dict) -> go.Figure:
    """Latency speed-up (speculative tokens/s over plain tokens/s, per row) against B, with the prediction."""
    batches = _batches(doc)
    fig = go.Figure()
    for field, source, color, dash in PREDICTIONS:
        fig.add_scatter(
            x=batches,
            y=[row[field] for row in doc["rows"]],
            name=f"predicted from {source}",
            mode="lines+markers",
            line=dict(color=COLORS[color], width=2, dash=dash),
            hovertemplate=f"B = %{{x}}: predicted from {source} %{{y:.2f}}×<extra></extra>",
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
    if even is not None:  # a trace, not a shape: its x is in data units on a log axis too
        top = max(max(row["measured_speedup"], row["predicted_speedup"]) for row in doc["rows"])
        fig.add_scatter(
            x=[even, even],
            y=[0.0, top],
            name=f"speculation stops paying: B = {even}",
            mode="lines",
            line=dict(color=COLORS["rejected"], dash="dash", width=2),
            hovertemplate=f"B = {even}: the first batch size measured below 1×<extra></extra>",
        )
    fig.update_xaxes(title_text="batch size B", type="log", tickvals=batches, ticktext=[str(b) for b in batches])
    fig.update_yaxes(title_text="speed-up over plain decoding", rangemode="tozero")
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
    full_price = [seconds[0] * n for n in tokens]
    fig = go.Figure()
    fig.add_scatter(
        x=tokens,
        y=full_price,
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
    fig.update_xaxes(title_text="n, new tokens in one forward", type="log", **doubling_ticks(tokens))
    fig.update_yaxes(title_text="seconds", type="log", **log_ticks(seconds + full_price, "{:g} s"))
    return _layout(fig, "What one target forward costs: T(n)", height=420)
