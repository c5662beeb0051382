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
# x-axis titles break at a space rather than leave the figure (tests/browser/test_layout.py)
LEGEND_WRAP = 22  # a legend starts where the plot does, right of the y-axis's ticks and title
LINE = 20  # px: one line of a legend entry (19) or of an x-axis title, at FONT's size
CHAR = 7.5  # px: about one character of FONT, along a y-axis title
MIN_PLOT = 150  # px: the least a plot keeps of its figure's height
X_AXIS = 46  # px: the x-axis's tick labels and the gaps around them and its title


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


def _legend_height(fig: go.Figure) -> int:
    """What the legend takes in the narrowest column (about 270 px wide: one entry a row), 0 where it is hidden."""
    entries = [trace.name for trace in fig.data if trace.name and trace.showlegend is not False]
    if fig.layout.showlegend is False or (len(entries) < 2 and fig.layout.showlegend is not True):
        return 0
    return LINE * sum(name.count("<br>") + 1 for name in entries) + 10


def _height(fig: go.Figure, height: int, top: int) -> int:
    """`height`, raised where it would leave the plot shorter than a y-axis title (which then runs up into the
    figure's title: Theory's "time ÷ one target step" at 1024 px) or the legend taller than plotly lets it be (half
    the figure: it then scrolls, as Theory's speed-up chart's did), counted in the narrowest column."""
    plot = MIN_PLOT
    for axis in fig.select_yaxes():
        if axis.title.text:  # a y-axis title runs along its share of the plot's height
            low, high = axis.domain or (0, 1)
            plot = max(plot, round((CHAR * len(axis.title.text) + 10) / (high - low)))
    titles = [axis.title.text.count("<br>") + 1 for axis in fig.select_xaxes() if axis.title.text]
    legend = _legend_height(fig)
    needed = max(top + plot + X_AXIS + LINE * max(titles, default=0) + legend + 10, 2 * legend + LINE)
    return max(height, needed)


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
        # taller than that (tests/browser/test_layout.py)
        # no gap between legend groups: a legend is counted in lines (_legend_height)
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0, tracegroupgap=0),
        **kwargs,
    )
    fig.update_layout(margin=dict(b=10), height=_height(fig, height, fig.layout.margin.t))
    return fig
