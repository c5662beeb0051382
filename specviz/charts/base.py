"""What every figure shares: the app's fixed colours, the font and the layout."""

from __future__ import annotations

import plotly.graph_objects as go

COLORS = {
    "p": "#4f46e5",
    "q": "#0d9488",
    "residual": "#ea580c",
    "accepted": "#16a34a",
    "rejected": "#dc2626",
    "unchecked": "#9ca3af",
    "resampled": "#ea580c",
    "bonus": "#2563eb",
    "plain": "#64748b",
    "speculative": "#4f46e5",
    "draft": "#0d9488",
    "verify": "#4f46e5",
    "measured": "#db2777",
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
        template="plotly_white",
        font=FONT,
        height=height,
        margin=dict(l=10, r=10, t=48 if title else 32, b=10),  # room for a subplot title or an annotation on top
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        legend=dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0.0),
        **kwargs,
    )
    fig.update_layout(margin=dict(b=10))
    return fig
