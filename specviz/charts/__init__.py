"""Plotly figure builders: pure functions of traces and results (no Streamlit, no models).

Colours are fixed across the app: p (target) indigo, q (draft) teal, the residual and resampled
tokens orange, accepted green, rejected red, bonus blue, plain decoding slate.
"""

from specviz.markup import visible  # token text with its whitespace made visible (and clipped)

from .base import COLORS, FONT
from .batching import (
    batch_gamma_figure,
    forward_cost_figure,
    round_length_figure,
    speedup_vs_batch_figure,
    throughput_figure,
)
from .learning import learning_figure
from .runs import (
    gamma_figure,
    group_figure,
    lossless_figure,
    next_token_figure,
    position_figure,
    progress_figure,
    timeline_figure,
)
from .theory import expected_tokens_figure, optimal_gamma_map, speedup_figure, verify_curve_figure

__all__ = [
    "COLORS",
    "FONT",
    "batch_gamma_figure",
    "expected_tokens_figure",
    "forward_cost_figure",
    "gamma_figure",
    "group_figure",
    "learning_figure",
    "lossless_figure",
    "next_token_figure",
    "optimal_gamma_map",
    "position_figure",
    "round_length_figure",
    "progress_figure",
    "speedup_figure",
    "speedup_vs_batch_figure",
    "throughput_figure",
    "timeline_figure",
    "verify_curve_figure",
    "visible",
]
