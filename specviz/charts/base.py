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
WRAP = 26  # characters: a chart may be 270 px wide (two to a row in a window 1024 px wide), so longer titles and
# x-axis titles break at a space rather than leave the figure (tests/test_layout.py)
LEGEND_WRAP = 22  # a legend starts where the plot does, right of the y-axis's ticks and title


def wrap(text: str, width: int = WRAP) -> str:
    """text in lines of at most `width` characters (a longer word stays whole), joined by plotly's <br>."""
    if len(text) <= width or "<br>" in text:
        return text
    lines = [""]
    for word in text.split(" "):
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}".strip()
    return "<br>".join(lines)


def _wrap_texts(fig: go.Figure) -> None:
    """Every legend entry and x-axis title of fig wrapped (the title by _layout; a y-axis title runs along the
    figure's height)."""
    for trace in fig.data:
        if trace.name:
            trace.name = wrap(trace.name, LEGEND_WRAP)
    fig.for_each_xaxis(
        lambda axis: axis.update(title_text=wrap(axis.title.text), automargin=True) if axis.title.text else None
    )


def _unique(labels: list[str]) -> list[str]:
    """Category labels must differ: two tokens that look alike (e.g. byte pieces) get a counter."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _layout(fig: go.Figure, title: str | None = None, height: int = 320, **kwargs) -> go.Figure:
    title = wrap(title) if title else title
    _wrap_texts(fig)
    fig.update_layout(
        template="plotly_white",
        font=FONT,
        height=height,
        # room for a title on top; on the right for half of the last x tick's label, centred on the plot's edge (Race's
        # "0.25" at 1440 px ran past a 10 px margin while its axis grew)
        margin=dict(l=10, r=24, t=(48 + 18 * title.count("<br>")) if title else 32, b=10),
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        # the legend at the figure's own bottom edge (yref "container"): plotly then widens the bottom margin by its
        # height below the x-axis's ticks and title, so it can cover neither. Placed on the plot's scale (y = -0.28
        # of the plot's height) it covered rotated token labels ("␣seve…") and the x-axis title whenever they were
        # taller than that (tests/test_layout.py)
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0),
        **kwargs,
    )
    fig.update_layout(margin=dict(b=10))
    return fig
