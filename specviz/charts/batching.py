"""The Batching page's figures, from a checked batching result (specviz.traces.batching): speed-up against the batch
size (ragged and min-cut, measured and predicted, the best gamma at each B, the break-even marked), tokens per row per
round of both rules and of the same rows alone, speed-up against gamma at each B, throughput, and the verify-cost
curve T(n)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from .base import COLORS, _layout


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


def _line(fig: go.Figure, x: list, y: list, name: str, color: str, dash: str = "solid", hover: str = "") -> None:
    fig.add_scatter(
        x=x,
        y=y,
        name=name,
        mode="lines+markers",
        line=dict(color=color, width=3 if dash == "solid" else 2, dash=dash),
        hovertemplate=hover or f"B = %{{x}}: {name} %{{y:.2f}}×<extra></extra>",
    )


def _batch_axis(fig: go.Figure, batches: list[int]) -> None:
    fig.update_xaxes(title_text="batch size B", type="log", tickvals=batches, ticktext=[str(b) for b in batches])


def speedup_vs_batch_figure(doc: dict) -> go.Figure:
    """Latency speed-up (speculative tokens/s over plain tokens/s, per row) against B: ragged and min-cut at the fixed
    gamma, measured and predicted from T(n), and ragged at the best gamma measured at each B."""
    batches, rows, gamma = _batches(doc), doc["rows"], doc["gamma"]
    fig = go.Figure()
    for key, label, color in (
        ("ragged", "every row keeps what it accepted", "speculative"),
        ("min_cut", "the batch waits for its slowest row", "rejected"),
    ):
        _line(fig, batches, [r[key]["measured_speedup"] for r in rows], f"{label}, γ = {gamma}", COLORS[color])
        _line(fig, batches, [r[key]["predicted_speedup"] for r in rows], f"{label}: predicted", COLORS[color], "dot")
    best = [max(r["gammas"], key=lambda e: e["measured_speedup"]) for r in rows]
    fig.add_scatter(
        x=batches,
        y=[e["measured_speedup"] for e in best],
        customdata=[e["gamma"] for e in best],
        name="every row keeps what it accepted, best γ at each B",
        mode="lines+markers",
        line=dict(color=COLORS["accepted"], width=3),
        hovertemplate="B = %{x}: %{y:.2f}× at γ = %{customdata}<extra></extra>",
    )
    # no words in the plot: the lines cross wherever a run puts them ('γ = 2', 'off off' and 'no speed-up' were
    # written over the lines and each other); the y-axis's title says what 1 is
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dot"))
    even = doc.get("break_even_batch")
    if even is not None:  # a trace, not a shape: its x is in data units on a log axis too
        top = max(max(r["ragged"]["measured_speedup"], r["ragged"]["predicted_speedup"]) for r in rows)
        fig.add_scatter(
            x=[even, even],
            y=[0.0, top],
            name=f"speculation stops paying at γ = {gamma}: B = {even}",
            mode="lines",
            line=dict(color=COLORS["rejected"], dash="dash", width=2),
            hovertemplate=f"B = {even}: the first batch size measured below 1× at γ = {gamma}<extra></extra>",
        )
    _batch_axis(fig, batches)
    # each B's best γ under it, "off" where no γ beats plain decoding (the table's best γ 0)
    fig.update_xaxes(
        title_text="batch size B, its best γ",
        ticktext=[f"{b}<br>{best_gamma_words(r)}" for b, r in zip(batches, rows, strict=True)],
    )
    fig.update_yaxes(title_text="speed-up (plain = 1)", rangemode="tozero")  # short: a long one runs into the title
    return _layout(fig, "Latency speed-up against the batch size", height=520)  # six legend entries, wrapped


def best_gamma_words(row: dict) -> str:
    """A B's best γ as the latency chart writes it under the B: "γ 4", or "off" where no γ beats plain decoding."""
    return f"γ {row['best_gamma']}" if row["best_gamma"] else "off"


def round_length_figure(doc: dict) -> go.Figure:
    """Tokens per row per round against B: ragged stays, min-cut shrinks."""
    batches, rows = _batches(doc), doc["rows"]
    fig = go.Figure()
    _line(
        fig,
        batches,
        [r["ragged"]["tokens_per_round"] for r in rows],
        "every row keeps what it accepted",
        COLORS["speculative"],
        hover="B = %{x}: %{y:.2f} tokens per row per round<extra></extra>",
    )
    _line(
        fig,
        batches,
        [r["min_cut"]["tokens_per_round"] for r in rows],
        "the batch waits for its slowest row",
        COLORS["rejected"],
        hover="B = %{x}: %{y:.2f} tokens per row per round<extra></extra>",
    )
    if all(r.get("alone") for r in rows):
        _alone_line(fig, batches, rows)
    _batch_axis(fig, batches)
    fig.update_yaxes(title_text="tokens per row per round", rangemode="tozero")
    return _layout(fig, f"What a round yields per row, γ = {doc['gamma']}", height=400)


def _alone_line(fig: go.Figure, batches: list[int], rows: list[dict]) -> None:
    _line(
        fig,
        batches,
        [r["alone"]["tokens_per_round"] for r in rows],
        "the same rows, each decoded alone",
        COLORS["plain"],
        "dot",
        hover="B = %{x}: its rows alone, %{y:.2f} tokens per row per round<extra></extra>",
    )


def batch_gamma_figure(doc: dict) -> go.Figure:
    """Speed-up against gamma, one line per B (ragged, measured), the predicted best gamma of each B marked."""
    fig = go.Figure()
    palette = ["#4f46e5", "#0d9488", "#ea580c", "#db2777", "#64748b", "#16a34a", "#2563eb", "#9ca3af"]
    for i, row in enumerate(doc["rows"]):
        color = palette[i % len(palette)]
        entries = row["gammas"]
        _line(
            fig,
            [e["gamma"] for e in entries],
            [e["measured_speedup"] for e in entries],
            f"B = {row['batch']}",
            color,
            hover=f"B = {row['batch']}, γ = %{{x}}: %{{y:.2f}}× measured<extra></extra>",
        )
        chosen = next((e for e in entries if e["gamma"] == row["predicted_best_gamma"]), None)
        if chosen is not None:  # one legend entry stands for every B's star: it names no B
            fig.add_scatter(
                x=[chosen["gamma"]],
                y=[chosen["measured_speedup"]],
                name="★ the predicted best γ (none where off is predicted)",
                mode="markers",
                marker=dict(color=color, size=14, symbol="star"),
                showlegend=not any(trace.legendgroup == "predicted" for trace in fig.data),
                legendgroup="predicted",
                hovertemplate=f"B = {row['batch']}: predicted best γ = %{{x}}<extra></extra>",
            )
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dot"))
    gammas = doc["gammas"]
    fig.update_xaxes(title_text="draft length γ", tickvals=gammas, ticktext=[str(g) for g in gammas])
    fig.update_yaxes(title_text="speed-up (plain = 1)", rangemode="tozero")
    return _layout(fig, "Which γ pays at each batch size (★ the prediction's pick)", height=420)


def throughput_figure(doc: dict) -> go.Figure:
    """Total tokens per second of the whole batch against B: plain, ragged at the fixed gamma and at the best."""
    batches, rows = _batches(doc), doc["rows"]
    fig = go.Figure()
    hover = "B = %{x}: %{y:.1f} tokens/s<extra></extra>"
    _line(fig, batches, [r["plain_tokens_per_second"] for r in rows], "plain decoding", COLORS["plain"], hover=hover)
    _line(
        fig,
        batches,
        [r["ragged"]["tokens_per_second"] for r in rows],
        f"speculative, γ = {doc['gamma']}",
        COLORS["speculative"],
        hover=hover,
    )
    best = [max(r["gammas"], key=lambda e: e["measured_speedup"]) for r in rows]
    _line(
        fig,
        batches,
        [e["tokens_per_second"] for e in best],
        "speculative, best γ at each B",
        COLORS["accepted"],
        hover=hover,
    )
    _batch_axis(fig, batches)
    fig.update_yaxes(title_text="tokens/s, whole batch", rangemode="tozero")
    return _layout(fig, "Throughput against the batch size", height=400)


def forward_cost_figure(doc: dict) -> go.Figure:
    """T(n) against n (log axes), with T(1) * n (no spare compute at all) for reference and the verifies of each
    measured B marked at n = B (gamma + 1): read off the one-row curve, and timed at the batch's own shape."""
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
        y=[row["ragged"]["curve_verify_seconds"] for row in doc["rows"]],
        text=[f"B = {row['batch']}" for row in doc["rows"]],
        name=f"a verify at batch B: n = B × (γ + 1), γ = {gamma}",
        mode="markers+text",
        textposition="top left",
        marker=dict(color=COLORS["measured"], size=10, symbol="diamond"),
        hovertemplate="%{text}: n = %{x}, %{y:.3f} s<extra></extra>",
    )
    own = [row["ragged"]["verify_seconds"] for row in doc["rows"] if row["ragged"].get("verify_seconds")]
    fig.add_scatter(
        x=[row["batch"] * (gamma + 1) for row in doc["rows"]],
        y=own,
        text=[f"B = {row['batch']}" for row in doc["rows"]],
        name=f"the same verify timed at its own shape, B rows of {gamma + 1}",
        mode="markers",
        marker=dict(color=COLORS["verify"], size=10, symbol="x"),
        hovertemplate="%{text}: B rows of γ + 1, %{y:.3f} s<extra></extra>",
        visible=len(own) == len(doc["rows"]),  # a version 2 file has no own-shape timings
    )
    fig.update_xaxes(title_text="n, new tokens in one forward", type="log", **doubling_ticks(tokens))
    fig.update_yaxes(title_text="seconds", type="log", **log_ticks(seconds + full_price + own, "{:g} s"))
    return _layout(fig, "What one target forward costs: T(n)", height=420)
