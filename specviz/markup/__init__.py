"""Pure HTML and words for the app: no Streamlit here, every value escaped, every view capped.

The ui package renders these strings with st.html / st.markdown; tests call them directly.
"""

from .advice import slow_run_markdown
from .base import (
    MAX_CELLS,
    MAX_CHIPS,
    MAX_PROMPT_SHOWN,
    MAX_TOKENS_DRAWN,
    clip,
    code,
    count,
    css_class,
    esc,
    fmt,
    fmt_prob,
    md,
    round_ending,
    visible,
)
from .chips import (
    alternative_chips_html,
    chip_html,
    draft_chips_html,
    legend_html,
    next_chip_html,
    round_chips_html,
    round_head_html,
)
from .explain import (
    A_BRIDGE,
    explain_alternatives,
    explain_chart,
    explain_round,
    explain_tree,
    identity_broken,
    pair_caption,
    precision_note,
    stopped_message,
    stream_stopped_message,
    trace_caption,
)
from .kv import kv_cache_html
from .loop import LINES as LOOP_LINES
from .loop import round_code_html
from .provenance import (
    HOW_RECORDED,
    LIVE,
    NOTHING_DRAFTED,
    curve_origin,
    note_where,
    note_words,
    rate_shown,
    recorded_on,
    trace_origin_words,
)
from .text import clock_html, lane_html, plain_text_html, text_html
from .tree import tree_html

__all__ = [
    "A_BRIDGE",
    "HOW_RECORDED",
    "LIVE",
    "NOTHING_DRAFTED",
    "curve_origin",
    "note_where",
    "note_words",
    "rate_shown",
    "recorded_on",
    "trace_origin_words",
    "LOOP_LINES",
    "MAX_CELLS",
    "MAX_CHIPS",
    "MAX_PROMPT_SHOWN",
    "MAX_TOKENS_DRAWN",
    "alternative_chips_html",
    "chip_html",
    "clip",
    "clock_html",
    "code",
    "count",
    "css_class",
    "draft_chips_html",
    "esc",
    "explain_alternatives",
    "explain_chart",
    "explain_round",
    "explain_tree",
    "fmt",
    "fmt_prob",
    "kv_cache_html",
    "lane_html",
    "legend_html",
    "md",
    "next_chip_html",
    "pair_caption",
    "identity_broken",
    "precision_note",
    "plain_text_html",
    "tree_html",
    "round_chips_html",
    "round_code_html",
    "round_head_html",
    "round_ending",
    "slow_run_markdown",
    "stopped_message",
    "stream_stopped_message",
    "text_html",
    "trace_caption",
    "visible",
]
