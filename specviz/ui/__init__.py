"""The app's Streamlit layer (the only part of specviz that imports streamlit besides app.py and pages/).

Pages read widgets, make one call and render: the run section (`run_section`), the viewers, the results.
State: one PageState per page (`page_state`), one Shared slot (`shared`), widget keys from `key`.
The HTML and the words come from specviz.markup (pure, escaped, capped).
"""

# pandas whole, before any page draws a table: the first import of this package finishes before a second session's
# goes on (one module lock), while a first import of pandas from inside st.dataframe in two sessions at once handed
# one of them a half-initialised module ("partially initialized module 'pandas' has no attribute 'Series'").
import pandas  # noqa: F401

from .advice import slow_run_note
from .batching import batching_page
from .curves import measured_section, runs_section, use_measured_c
from .experiments import experiments_section, ten_minute_path
from .files import curves_dir, inject_css, load_prompts, recorded_traces, trace_download, trace_upload, verify_curves
from .learning import (
    adopt_stream_rows,
    forget_button,
    learning_form,
    learning_view,
    recorded_stream,
    side_channel_section,
    stream_budget,
    stream_live,
    stream_summary,
    stream_work,
    your_requests_table,
    your_rows,
)
from .pair import pair_loader, require_pair
from .prompt import prompt_picker
from .race import adopt_race, race_live, race_to_show, race_upload, show_race
from .recorded import experiment_traces, how_recorded, lab_to_show, lossless_to_show, recorded_lab, recorded_lossless
from .results import adopt_lab_runs, lab_results, lossless_form, lossless_results
from .router import ROUTER_KEY, page_guard
from .runner import (
    RunButton,
    lab_budget,
    lab_budget_note,
    lab_live,
    lab_work,
    launch,
    lossless_work,
    quiet_live,
    run_section,
    trace_work,
)
from .settings import settings, sidebar, with_temperature
from .state import PageState, Settings, Shared, adopt_trace, history, key, page_state, remember, shared
from .viewer import (
    legend,
    live_rounds,
    recorded_picker,
    round_view,
    show_trace,
    summary_metrics,
    trace_to_show,
    trace_viewer,
)

__all__ = [
    "adopt_stream_rows",
    "forget_button",
    "learning_form",
    "learning_view",
    "recorded_stream",
    "stream_live",
    "side_channel_section",
    "stream_budget",
    "stream_summary",
    "stream_work",
    "your_requests_table",
    "your_rows",
    "PageState",
    "ROUTER_KEY",
    "RunButton",
    "Settings",
    "Shared",
    "adopt_lab_runs",
    "adopt_race",
    "adopt_trace",
    "batching_page",
    "curves_dir",
    "experiment_traces",
    "how_recorded",
    "experiments_section",
    "history",
    "inject_css",
    "key",
    "lab_live",
    "lab_results",
    "lab_to_show",
    "lab_budget",
    "lab_budget_note",
    "lab_work",
    "launch",
    "legend",
    "live_rounds",
    "load_prompts",
    "lossless_form",
    "lossless_results",
    "lossless_to_show",
    "lossless_work",
    "measured_section",
    "page_guard",
    "page_state",
    "pair_loader",
    "prompt_picker",
    "quiet_live",
    "race_live",
    "race_to_show",
    "race_upload",
    "recorded_lab",
    "recorded_lossless",
    "recorded_picker",
    "recorded_traces",
    "remember",
    "require_pair",
    "round_view",
    "run_section",
    "runs_section",
    "settings",
    "shared",
    "show_race",
    "show_trace",
    "sidebar",
    "slow_run_note",
    "summary_metrics",
    "ten_minute_path",
    "trace_download",
    "trace_to_show",
    "trace_upload",
    "trace_viewer",
    "trace_work",
    "use_measured_c",
    "verify_curves",
    "with_temperature",
]
