"""Plotly figure builders: pure functions of traces and results (no Streamlit, no models).

Colours are fixed across the app: p (target) indigo, q (draft) teal, the residual and resampled
tokens orange, accepted green, rejected red, bonus blue, plain decoding slate.
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from . import theory
from .lab import (
    GammaPoint,
    GroupStat,
    MeasuredPoint,
    PositionStat,
    baseline_timeline,
    round_phases,
    speculative_timeline,
)
from .lossless import LosslessResult
from .markup import visible  # token text with its whitespace made visible (and clipped)
from .trace import RoundEvent, Trace

COLORS = {
    "p": "#4f46e5", "q": "#0d9488", "residual": "#ea580c",
    "accepted": "#16a34a", "rejected": "#dc2626", "unchecked": "#9ca3af",
    "resampled": "#ea580c", "bonus": "#2563eb", "plain": "#64748b", "speculative": "#4f46e5",
    "draft": "#0d9488", "verify": "#4f46e5", "measured": "#db2777",
}
FONT = dict(family="Inter, system-ui, sans-serif", size=13, color="#1f2937")


def _unique(labels: list[str]) -> list[str]:
    """Category labels must differ: two tokens that look alike (e.g. byte pieces) get a counter."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _layout(fig: go.Figure, title: str | None = None, height: int = 320, **kwargs) -> go.Figure:
    fig.update_layout(
        template="plotly_white", font=FONT, height=height, margin=dict(l=10, r=10, t=48 if title else 16, b=10),
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0.0), **kwargs)
    fig.update_layout(margin=dict(b=10))
    return fig


# --- one round ------------------------------------------------------------------------------------

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
        series += [("q (draft)", event.top_q, COLORS["q"]),
                   ("residual norm(max(0, p−q))", residual, COLORS["residual"])]
    for name, values, color in series:
        if not values:
            continue
        by_id = {t.id: t.prob for t in values}
        fig.add_bar(name=name, x=labels, y=[by_id.get(i) for i in ids], marker_color=color,
                    hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>")
    chosen = event.next_token
    if chosen.id in label_of:
        fig.add_annotation(x=label_of[chosen.id], y=1.0, yref="paper", text="chosen", showarrow=False,
                           font=dict(color=COLORS[event.next_source], size=12), yanchor="bottom")
    fig.update_xaxes(type="category", tickfont=dict(family="ui-monospace, monospace", size=13))
    fig.update_yaxes(title_text="probability", rangemode="tozero")
    return _layout(fig, height=320, barmode="group", bargap=0.25)


# --- the race -------------------------------------------------------------------------------------

def timeline_figure(trace: Trace) -> go.Figure:
    """Gantt-like: draft and verify phases per round, and each step of plain decoding, on one clock."""
    fig = go.Figure()
    rows = ["plain: target step", "speculative: verify", "speculative: draft"]
    if trace.baseline:
        starts = [e.elapsed - e.seconds for e in trace.baseline]
        fig.add_bar(name="plain decoding step", y=[rows[0]] * len(starts), x=[e.seconds for e in trace.baseline],
                    base=starts, orientation="h", marker=dict(color=COLORS["plain"], line=dict(color="white", width=1)),
                    customdata=[[e.index, visible(e.token.text)] for e in trace.baseline],
                    hovertemplate="token %{customdata[0]} %{customdata[1]}<br>%{x:.3f} s<extra></extra>")
    phases = round_phases(trace)
    for kind, row in (("verify", rows[1]), ("draft", rows[2])):
        ps = [ph for ph in phases if ph.kind == kind]
        if not ps:
            continue
        fig.add_bar(name=f"{kind} phase", y=[row] * len(ps), x=[ph.end - ph.start for ph in ps],
                    base=[ph.start for ph in ps], orientation="h",
                    marker=dict(color=COLORS[kind], line=dict(color="white", width=1)),
                    customdata=[[ph.round + 1, ph.accepted, ph.drafted] for ph in ps],
                    hovertemplate="round %{customdata[0]}: %{customdata[1]} of %{customdata[2]} accepted"
                                  "<br>%{x:.3f} s<extra>" + kind + "</extra>")
    fig.update_yaxes(categoryorder="array", categoryarray=rows)
    fig.update_xaxes(title_text="seconds since the start of each run (the prompt prefill comes first)",
                     rangemode="tozero")
    return _layout(fig, height=300, barmode="overlay", showlegend=True)


def progress_figure(trace: Trace) -> go.Figure:
    """Tokens committed against time, for both methods (a steeper line is faster)."""
    fig = go.Figure()
    spec = speculative_timeline(trace)
    base = baseline_timeline(trace)
    for name, tokens, color in (("speculative", spec, COLORS["speculative"]), ("plain", base, COLORS["plain"])):
        if not tokens:
            continue
        fig.add_scatter(name=name, x=[0.0] + [t.time for t in tokens], y=list(range(len(tokens) + 1)),
                        line=dict(color=color, width=3, shape="hv"), mode="lines")
    fig.update_xaxes(title_text="seconds", rangemode="tozero")
    fig.update_yaxes(title_text="tokens generated", rangemode="tozero")
    return _layout(fig, height=300)


# --- theory ---------------------------------------------------------------------------------------

def speedup_figure(a: float, g: int, c: float, points: Sequence[MeasuredPoint] = (), gamma_max: int = 16,
                   curve: dict | None = None) -> go.Figure:
    """Predicted speed-up against gamma for the chosen a and c, a few other a for reference, and measured runs.
    With a verify-cost curve (theory.load_verify_curve), also the prediction from its measured times at this a."""
    gammas = list(range(1, gamma_max + 1))
    fig = go.Figure()
    for other in (0.5, 0.7, 0.9):
        if abs(other - a) > 0.02:
            fig.add_scatter(x=gammas, y=theory.speedup_curve(other, c, gammas), name=f"a = {other}", mode="lines",
                            line=dict(color="#cbd5e1", width=1.5, dash="dot"), hoverinfo="skip")
    fig.add_scatter(x=gammas, y=theory.speedup_curve(a, c, gammas), name=f"a = {a:.2f}, c = {c:.2f}",
                    mode="lines", line=dict(color=COLORS["p"], width=3),
                    hovertemplate="γ = %{x}: %{y:.2f}×<extra></extra>")
    best = theory.optimal_gamma(a, c, gamma_max)
    fig.add_scatter(x=[best], y=[theory.speedup(a, best, c)], name=f"optimal γ = {best}", mode="markers",
                    marker=dict(symbol="star", size=16, color="#f59e0b", line=dict(color="#92400e", width=1)))
    fig.add_scatter(x=[g], y=[theory.speedup(a, g, c)], name=f"your γ = {g}", mode="markers",
                    marker=dict(size=11, color=COLORS["p"], line=dict(color="white", width=2)))
    if curve is not None and theory.measured_cost_ratio(curve) is not None:
        # Same a, but the machine's own c and a verify that costs what it measured, not one step.
        name = f"measured times ({curve.get('device', '?')}, c = {theory.measured_cost_ratio(curve):.3f})"
        fig.add_scatter(x=gammas, y=theory.measured_speedup_curve(a, curve, gammas), name=name, mode="lines",
                        line=dict(color=COLORS["measured"], width=3, dash="dash"),
                        hovertemplate="γ = %{x}: %{y:.2f}× with measured times<extra></extra>")
        best_m = theory.measured_optimal_gamma(a, curve, gamma_max)
        fig.add_scatter(x=[best_m], y=[theory.measured_speedup(a, best_m, curve)], mode="markers",
                        name=f"measured optimal γ = {best_m}",
                        marker=dict(symbol="star", size=16, color=COLORS["measured"],
                                    line=dict(color="white", width=1)))
    measured = [pt for pt in points if pt.measured_speedup is not None]
    predicted = [pt for pt in measured if pt.predicted_speedup is not None]
    if predicted:
        # The formula at each run's own a, gamma and c, joined to what was measured.
        xs, ys = [], []
        for pt in predicted:
            xs += [pt.g, pt.g, None]
            ys += [pt.predicted_speedup, pt.measured_speedup, None]
        fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color=COLORS["rejected"], width=1, dash="dot"),
                        showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=[pt.g for pt in predicted], y=[pt.predicted_speedup for pt in predicted],
                        name="formula for each run", mode="markers",
                        marker=dict(size=11, symbol="diamond-open", color=COLORS["rejected"], line=dict(width=2)),
                        customdata=[[pt.label, pt.a, pt.c] for pt in predicted],
                        hovertemplate="%{customdata[0]}<br>formula at a = %{customdata[1]:.2f}, "
                                      "c = %{customdata[2]:.3f}: %{y:.2f}×<extra></extra>")
    if measured:
        fig.add_scatter(x=[pt.g for pt in measured], y=[pt.measured_speedup for pt in measured], name="measured runs",
                        mode="markers", marker=dict(size=12, color=COLORS["rejected"], symbol="diamond"),
                        customdata=[[pt.label, pt.a, pt.c, pt.predicted_speedup] for pt in measured],
                        hovertemplate="%{customdata[0]}<br>γ = %{x:.1f}, measured %{y:.2f}×<br>"
                                      "a = %{customdata[1]:.2f}, c = %{customdata[2]:.3f}, "
                                      "formula %{customdata[3]:.2f}×<extra></extra>")
    fig.add_hline(y=1.0, line=dict(color="#94a3b8", dash="dash"), annotation_text="no speed-up",
                  annotation_position="bottom right")
    fig.update_xaxes(title_text="γ (draft length)", dtick=1 if gamma_max <= 16 else 2)
    fig.update_yaxes(title_text="speed-up over plain decoding", rangemode="tozero")
    return _layout(fig, "Speed-up against γ", height=420)


def verify_curve_figure(curve: dict, gamma_max: int = 16) -> go.Figure:
    """What one verify of g drafted tokens (a target forward over g+1 tokens) costs, in target steps, as
    measured; Leviathan et al.'s flat 1 and one draft step (c) for reference. Past the measured end the
    line is the linear extension that the measured speed-up uses, drawn dotted."""
    measured = list(range(len(curve["target_seconds"])))
    extended = list(range(measured[-1], gamma_max + 1))
    ms = [1000 * theory.curve_time(curve, g) for g in measured]
    fig = go.Figure()
    fig.add_scatter(x=[g + 1 for g in measured], y=theory.verify_cost_ratios(curve, measured), customdata=ms,
                    name="verify, measured", mode="lines+markers", line=dict(color=COLORS["verify"], width=3),
                    hovertemplate="%{x} tokens: %{customdata:.0f} ms = %{y:.2f} target steps<extra></extra>")
    if len(extended) > 1:
        fig.add_scatter(x=[g + 1 for g in extended], y=theory.verify_cost_ratios(curve, extended),
                        name="extended linearly (used past the measured end)", mode="lines",
                        line=dict(color=COLORS["verify"], width=2, dash="dot"), hoverinfo="skip")
    ends = [1, extended[-1] + 1]
    fig.add_scatter(x=ends, y=[1.0, 1.0], name="Leviathan's assumption: a verify costs one step", mode="lines",
                    line=dict(color=COLORS["plain"], width=2, dash="dash"), hoverinfo="skip")
    c = theory.measured_cost_ratio(curve)
    if c is not None:
        fig.add_scatter(x=ends, y=[c, c], name=f"one draft step: c = {c:.3f}", mode="lines",
                        line=dict(color=COLORS["draft"], width=2, dash="dot"), hoverinfo="skip")
    fig.update_xaxes(title_text="tokens verified in one target forward (γ + 1)", dtick=1 if gamma_max <= 16 else 2)
    fig.update_yaxes(title_text="time ÷ one target step", rangemode="tozero")
    return _layout(fig, f"Verify cost, measured on {curve.get('device_name', curve.get('device', '?'))}", height=380)


def expected_tokens_figure(a: float, g: int, points: Sequence[MeasuredPoint] = ()) -> go.Figure:
    """E[tokens per round] = (1 - a^(g+1)) / (1 - a) against a, for a few gamma; measured runs on top."""
    xs = [i / 100 for i in range(0, 100)]
    fig = go.Figure()
    for other in sorted({1, 2, 4, 8, g}):
        highlight = other == g
        fig.add_scatter(x=xs, y=[theory.expected_tokens(x, other) for x in xs], name=f"γ = {other}", mode="lines",
                        line=dict(color=COLORS["p"] if highlight else "#cbd5e1", width=3 if highlight else 1.5),
                        hovertemplate="a = %{x:.2f}: %{y:.2f} tokens<extra>γ = " + str(other) + "</extra>")
    fig.add_scatter(x=[a], y=[theory.expected_tokens(a, g)], name="your a, γ", mode="markers",
                    marker=dict(size=11, color=COLORS["p"], line=dict(color="white", width=2)))
    if points:
        fig.add_scatter(x=[pt.a for pt in points], y=[pt.tokens_per_round for pt in points], name="measured runs",
                        mode="markers", marker=dict(size=12, color=COLORS["rejected"], symbol="diamond"),
                        customdata=[[pt.label, pt.g] for pt in points],
                        hovertemplate="%{customdata[0]}<br>a = %{x:.2f}, γ ≈ %{customdata[1]:.1f}: "
                                      "%{y:.2f} tokens / round<extra></extra>")
    fig.update_xaxes(title_text="a (acceptance rate)", range=[0, 1])
    fig.update_yaxes(title_text="tokens per round (per target forward)", rangemode="tozero")
    return _layout(fig, "Expected tokens per round", height=420)


def optimal_gamma_map(a: float, c: float, gamma_max: int = 16) -> go.Figure:
    """Which gamma maximises the speed-up, for every acceptance rate a and cost ratio c."""
    xs = [round(0.05 * i, 2) for i in range(1, 20)]          # a: 0.05 .. 0.95
    ys = [round(0.02 * i, 2) for i in range(0, 26)]          # c: 0 .. 0.5
    z = [[theory.optimal_gamma(x, y, gamma_max) for x in xs] for y in ys]
    fig = go.Figure(go.Heatmap(x=xs, y=ys, z=z, colorscale="Viridis", colorbar=dict(title="best γ"),
                               hovertemplate="a = %{x}, c = %{y}: best γ = %{z}<extra></extra>"))
    fig.add_scatter(x=[a], y=[c], mode="markers", name="your a, c", showlegend=False,
                    marker=dict(size=13, color="white", line=dict(color="black", width=2)))
    fig.update_xaxes(title_text="a (acceptance rate)")
    fig.update_yaxes(title_text="c (draft cost / target cost)")
    return _layout(fig, "Optimal γ", height=360)


# --- acceptance lab -------------------------------------------------------------------------------

def position_figure(stats: Sequence[PositionStat]) -> go.Figure:
    fig = go.Figure()
    fig.add_bar(x=[s.position for s in stats], y=[s.rate for s in stats], marker_color=COLORS["accepted"],
                customdata=[[s.accepted, s.reached] for s in stats],
                hovertemplate="position %{x}: %{y:.0%} (%{customdata[0]} of %{customdata[1]})<extra></extra>")
    fig.update_xaxes(title_text="position in the draft (1 = first drafted token)", dtick=1)
    fig.update_yaxes(title_text="accepted, given it was checked", range=[0, 1], tickformat=".0%")
    return _layout(fig, "Acceptance by draft position", height=300)


def group_figure(stats: Sequence[GroupStat], title: str) -> go.Figure:
    names = [s.group for s in stats]
    fig = go.Figure()
    fig.add_bar(name="acceptance rate", x=names, y=[s.acceptance_rate for s in stats], marker_color=COLORS["accepted"],
                yaxis="y", offsetgroup=0, hovertemplate="%{x}: %{y:.0%}<extra>acceptance</extra>")
    fig.add_bar(name="tokens per round", x=names, y=[s.tokens_per_round for s in stats], marker_color=COLORS["p"],
                yaxis="y2", offsetgroup=1, hovertemplate="%{x}: %{y:.2f}<extra>tokens / round</extra>")
    fig.update_layout(yaxis=dict(title="acceptance rate", range=[0, 1], tickformat=".0%"),
                      yaxis2=dict(title="tokens per round", overlaying="y", side="right", rangemode="tozero",
                                  showgrid=False))
    return _layout(fig, title, height=340, barmode="group")


def gamma_figure(series: Sequence[tuple[str, Sequence[GammaPoint]]]) -> go.Figure:
    """gamma per round under the adaptive schedule, with the accepted count of each round."""
    fig = go.Figure()
    palette = ["#4f46e5", "#0d9488", "#ea580c", "#db2777", "#65a30d", "#0891b2"]
    for k, (name, points) in enumerate(series):
        color = palette[k % len(palette)]
        fig.add_scatter(x=[pt.round + 1 for pt in points], y=[pt.gamma for pt in points], name=f"γ · {name}",
                        mode="lines+markers", line=dict(color=color, width=2, shape="hv"),
                        customdata=[[pt.accepted, pt.drafted] for pt in points],
                        hovertemplate="round %{x}: γ = %{y}, accepted %{customdata[0]} of %{customdata[1]}"
                                      "<extra></extra>")
        fig.add_bar(x=[pt.round + 1 for pt in points], y=[pt.accepted for pt in points], name=f"accepted · {name}",
                    marker_color=color, opacity=0.25, showlegend=False, hoverinfo="skip")
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="γ (line) · accepted (bars)", rangemode="tozero")
    return _layout(fig, "γ over time under the adaptive schedule", height=340, barmode="overlay")


# --- lossless -------------------------------------------------------------------------------------

def lossless_figure(result: LosslessResult, show_draft: bool = True) -> go.Figure:
    labels = _unique([visible(t) if i >= 0 else t for t, i in zip(result.token_texts, result.token_ids, strict=False)])
    n = result.n
    fig = go.Figure()
    fig.add_bar(name="p: the target's exact distribution", x=labels, y=list(result.p), marker_color=COLORS["p"],
                hovertemplate="%{x}: p = %{y:.4f}<extra></extra>")
    spec_name = "speculative samples" if result.resample_residual else "broken speculative samples (no residual)"
    fig.add_bar(name=spec_name, x=labels, y=[k / n for k in result.spec_counts],
                marker_color=COLORS["accepted"] if result.resample_residual else COLORS["rejected"],
                hovertemplate="%{x}: %{y:.4f}<extra>" + spec_name + "</extra>")
    if show_draft:
        fig.add_bar(name="draft alone (samples of q)", x=labels, y=[k / n for k in result.draft_counts],
                    marker_color=COLORS["q"], opacity=0.6, hovertemplate="%{x}: %{y:.4f}<extra>draft alone</extra>")
    fig.update_xaxes(type="category", tickfont=dict(family="ui-monospace, monospace", size=13))
    fig.update_yaxes(title_text="probability / frequency", rangemode="tozero")
    return _layout(fig, height=400, barmode="group", bargap=0.2)
