"""Shared Streamlit rendering: the sidebar, cached loaders, background runs, token chips, the text view.

The only module of specviz that imports streamlit. Pages read widgets, make one specviz call and
render with these helpers; the algorithm stays in the engine, the numbers in lab/lossless/charts.
All text that came from a model or a file is HTML-escaped before it reaches unsafe HTML.
"""
from __future__ import annotations

import functools
import html
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import streamlit as st

from . import charts, lab, prompts, theory
from .charts import visible
from .config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT, ConfigError, SpecConfig
from .jobs import Job, PairLoader, start_job
from .models import BUILTIN, PairSpec
from .runs import MAX_PROMPT_CHARS, PromptError, encode, run_trace, speedup
from .trace import RoundEvent, TokenEvent, Trace, TraceError, load_trace

log = logging.getLogger(__name__)


def safe(render: Callable[..., None]) -> Callable[..., None]:
    """Fragments rerun without app.py around them: an unexpected error becomes one st.error, never a traceback.
    (Streamlit's own rerun and stop signals are BaseExceptions and pass through.)"""
    @functools.wraps(render)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            render(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            log.exception("view %s failed", render.__name__)
            st.error(f"This view failed ({exc.__class__.__name__}: {exc}). The app is still usable.")
    return wrapper

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
PROMPTS_FILE = ASSETS / "prompts.json"
CSS_FILE = ASSETS / "style.css"


def traces_dir() -> Path:
    """Recorded runs for the instant first screen (SPECVIZ_TRACES_DIR overrides, for tests)."""
    return Path(os.environ.get("SPECVIZ_TRACES_DIR") or ASSETS / "traces")


def curves_dir() -> Path:
    """Where the benchmark writes its verify-cost curves (SPECVIZ_CURVES_DIR overrides, for tests)."""
    return Path(os.environ.get("SPECVIZ_CURVES_DIR") or ASSETS)


def verify_curves() -> tuple[dict[str, dict], list[str]]:
    """The curves in curves_dir() by device (verify_curve_<device>.json), and the names of the files that
    are not one. Read on every run, not cached: they are small, and a new benchmark shows at once."""
    curves: dict[str, dict] = {}
    damaged: list[str] = []
    for path in sorted(curves_dir().glob("verify_curve_*.json")):
        curve = theory.load_verify_curve(path)
        if curve is None:
            damaged.append(path.name)
        else:
            curves[path.stem.removeprefix("verify_curve_")] = curve
    return curves, damaged


def pair_override() -> str:
    """SPECVIZ_PAIR=tiny makes every loader return the tiny random pair (tests, quick demos)."""
    return os.environ.get("SPECVIZ_PAIR", "").strip().lower()


# =================================================================================================
# Routing
# =================================================================================================

ROUTER_KEY = "router.running"


def page_guard() -> None:
    """Every page calls this first, so that it always runs under app.py's router.

    A Streamlit server that sees a pages/ folder starts in its old multipage mode, which executes a page
    file directly, without app.py (no sidebar, no style): on a fresh server when the first URL is a page's,
    and in AppTest. Then run the router here, in this same script run (widget clicks stay), switch the
    server to st.navigation for later runs, and stop: the router has drawn the page.
    """
    if st.session_state.get(ROUTER_KEY):
        return
    try:
        from streamlit.runtime.pages_manager import PagesManager
        PagesManager.uses_pages_directory = False
    except (ImportError, AttributeError):
        pass
    import runpy
    runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    st.stop()


# =================================================================================================
# Assets
# =================================================================================================

def inject_css() -> None:
    st.html(f"<style>{CSS_FILE.read_text(encoding='utf-8')}</style>")


@st.cache_data(show_spinner=False)
def load_prompts() -> dict[str, list[str]]:
    """assets/prompts.json: {"category": [prompt, ...]}, through the loader the bench uses."""
    try:
        return prompts.load_prompts(PROMPTS_FILE)
    except (OSError, ConfigError) as exc:
        log.warning("could not read %s: %s", PROMPTS_FILE, exc)
        return {"code": ["Write a Python function that reverses a string."]}


@st.cache_resource(show_spinner=False)
def _recorded(directory: str, stamp: tuple) -> list[tuple[str, Trace]]:
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            found.append((path.stem.replace("_", " "), load_trace(path)))
        except (OSError, TraceError) as exc:
            log.warning("skipping recorded trace %s: %s", path, exc)
    return found


def recorded_traces() -> list[tuple[str, Trace]]:
    """Recorded runs (assets/traces/*.json), loaded once with trace.load_trace; damaged files are skipped."""
    directory = traces_dir()
    if not directory.is_dir():
        return []
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.json")))
    return _recorded(str(directory), stamp)


# =================================================================================================
# Settings: the shared sidebar
# =================================================================================================

PRESETS: dict[str, tuple[str, str | None] | None] = {
    "Built-in Qwen-Coder 1.5B ← 0.5B": (BUILTIN, BUILTIN),
    "Qwen2.5 7B ← 0.5B Instruct": ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    "Llama 3.1 8B ← 3.2 1B Instruct": ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
    "gpt2-xl ← distilgpt2": ("openai-community/gpt2-xl", "distilbert/distilgpt2"),
    "Custom: hub ids or local paths": None,
}
PRESET_HELP = ("The target (p) is the big model whose output we want; the draft (q) is the small, fast guesser. "
               "Built-in: Qwen2.5-Coder-1.5B-Instruct ← Qwen2.5-Coder-0.5B-Instruct, offline, runs on a CPU. "
               "The hub pairs need a download (network) and a GPU to be fast: Qwen/Qwen2.5-7B-Instruct ← "
               "Qwen/Qwen2.5-0.5B-Instruct, meta-llama/Llama-3.1-8B-Instruct ← meta-llama/Llama-3.2-1B-Instruct, "
               "openai-community/gpt2-xl ← distilbert/distilgpt2.")
QUANTIZE = {"auto (int8 on CPU)": None, "on (int8)": True, "off": False}
DEFAULTS: dict[str, Any] = {
    "cfg.preset": next(iter(PRESETS)), "cfg.device": "auto", "cfg.quantize": next(iter(QUANTIZE)),
    "cfg.trust": False, "cfg.custom_target": "", "cfg.custom_draft": "", "cfg.custom_applied": None,
    "cfg.drafter": "model", "cfg.ngram": 3, "cfg.lookahead": 0, "cfg.alternatives": 0, "cfg.gamma": 5, "cfg.schedule": "constant", "cfg.gamma_max": 12,
    "cfg.confidence": 0.0, "cfg.temperature": 0.0, "cfg.top_k": 0, "cfg.top_p": 1.0, "cfg.seed": 0,
    "cfg.max_new_tokens": 32, "cfg.chat": True,
}


@dataclass(frozen=True)
class Settings:
    spec: PairSpec
    config: SpecConfig | None       # None when a setting is out of range
    config_error: str | None
    chat: bool                      # wrap prompts in the chat template


def _keep_state() -> None:
    """Widget values survive page switches: re-assigning a key keeps it when its widget is not drawn."""
    for key, value in DEFAULTS.items():
        st.session_state[key] = st.session_state.get(key, value)


def _apply_custom() -> None:
    target = st.session_state["cfg.custom_target"].strip()
    draft = st.session_state["cfg.custom_draft"].strip()
    st.session_state["cfg.custom_applied"] = (target, draft or None) if target else None


def _pair_spec() -> PairSpec | None:
    choice = PRESETS.get(st.session_state["cfg.preset"])
    if choice is None:
        choice = st.session_state["cfg.custom_applied"]
        if choice is None:
            return None
    return PairSpec(target=choice[0], draft=choice[1], device=st.session_state["cfg.device"],
                    quantize_draft=QUANTIZE[st.session_state["cfg.quantize"]],
                    trust_remote_code=bool(st.session_state["cfg.trust"]))


def _read_config() -> tuple[SpecConfig | None, str | None]:
    s = st.session_state
    try:
        config = SpecConfig(
            gamma=int(s["cfg.gamma"]), schedule=s["cfg.schedule"], gamma_max=max(int(s["cfg.gamma_max"]), int(s["cfg.gamma"])),
            draft_confidence=float(s["cfg.confidence"]), temperature=float(s["cfg.temperature"]),
            top_k=int(s["cfg.top_k"]), top_p=float(s["cfg.top_p"]), seed=int(s["cfg.seed"]),
            max_new_tokens=int(s["cfg.max_new_tokens"]), drafter=s["cfg.drafter"], ngram_size=int(s["cfg.ngram"]),
            lookahead=int(s["cfg.lookahead"]), alternatives=int(s["cfg.alternatives"]), record_top=10,
        ).validate()
        return config, None
    except (ConfigError, TypeError, ValueError) as exc:
        return None, str(exc)


def sidebar() -> Settings:
    """The one sidebar every page shares; its values live in st.session_state under cfg.*."""
    _keep_state()
    sb = st.sidebar
    with sb:
        st.markdown("### Model pair")
        st.selectbox("Target (p) ← draft (q)", list(PRESETS), key="cfg.preset", help=PRESET_HELP)
        if PRESETS[st.session_state["cfg.preset"]] is None:
            st.text_input("Target model (p): hub id or local path", key="cfg.custom_target",
                          placeholder="e.g. Qwen/Qwen2.5-1.5B-Instruct or /models/my-target")
            st.text_input("Draft model (q): hub id or local path (empty: n-gram only)", key="cfg.custom_draft",
                          placeholder="e.g. Qwen/Qwen2.5-0.5B-Instruct")
            st.button("Load this pair", on_click=_apply_custom, key="cfg.apply", width="stretch")
        with st.expander("Device and loading", expanded=False):
            st.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key="cfg.device")
            st.selectbox("Quantize the draft", list(QUANTIZE), key="cfg.quantize",
                         help="int8 dynamic quantization of the draft's Linear layers makes drafting much cheaper "
                              "on CPU. It changes q, never p: the output stays exactly the target's.")
            st.checkbox("Trust remote code", key="cfg.trust",
                        help="Runs Python code that ships with the model repository. Only for models you trust.")
            if st.session_state["cfg.trust"]:
                st.warning("Remote code from the model repository will run on this machine.")
        spec = _pair_spec()
        if spec is None:
            st.info("Type a target model id or path and press **Load this pair**.")
        else:
            pair_status(spec)

        st.markdown("### Speculation")
        st.radio("Drafter", ["model", "ngram"], key="cfg.drafter", horizontal=True,
                 format_func=lambda d: {"model": "draft model", "ngram": "n-gram lookup"}[d],
                 help="The n-gram drafter copies what followed the last occurrence of the current text "
                      "(prompt lookup): no model, q is a point mass.")
        if st.session_state["cfg.drafter"] == "ngram":
            st.slider("Longest n-gram to match", 1, 8, key="cfg.ngram")
        else:
            st.slider("Lookahead: lookup guesses per draft pass", 0, 16, key="cfg.lookahead",
                      help="0 = off. Prompt lookup guesses how the text goes on; one draft pass scores the guesses "
                           "at once, and while the draft's own draws agree with them it needs no further pass. "
                           "Each token is still drawn from the draft's q; only the passes are fewer (marked ⇢).")
            st.slider("Alternatives for the last draft token", 0, 4, key="cfg.alternatives",
                      help="0 = off. When the draft is unsure of its last token, the target's verify pass also scores "
                           "the draft's other candidates for that position (a small token tree): if the draft's own "
                           "token is rejected, one of them can be kept instead, with a bonus token after it. Greedy: "
                           "q's next-best tokens; sampling: further draws from q, checked by recursive rejection "
                           "sampling, so the output still follows p exactly.")
        st.number_input(f"γ: draft length (1-{GAMMA_LIMIT})", step=1, key="cfg.gamma",
                        help="How many tokens the drafter proposes per round.")
        st.radio("Schedule", ["constant", "adaptive", "auto"], key="cfg.schedule", horizontal=True,
                 help="adaptive: γ grows by 2 after a round whose drafts were all accepted, shrinks by 1 otherwise. "
                      "auto: drafts up to the largest γ while the draft is confident (0.7 unless set below) and "
                      "takes plain target steps while speculating measurably does not pay.")
        if st.session_state["cfg.schedule"] in ("adaptive", "auto"):
            st.number_input(f"Largest γ ({st.session_state['cfg.schedule']})", step=1, key="cfg.gamma_max")
        st.slider("Draft-confidence stop", 0.0, 0.95, step=0.05, key="cfg.confidence",
                  help="Stop drafting early when the draft's own top probability falls below this (0 = off).")

        st.markdown("### Sampling")
        st.slider("Temperature (0 = greedy)", 0.0, 2.0, step=0.05, key="cfg.temperature")
        c1, c2 = st.columns(2)
        c1.number_input("Top-k (0 = off)", step=1, key="cfg.top_k")
        c2.slider("Top-p", 0.05, 1.0, step=0.05, key="cfg.top_p")
        c1, c2 = st.columns(2)
        c1.number_input("Seed", step=1, key="cfg.seed")
        c2.number_input(f"Max new tokens (≤ {MAX_NEW_TOKENS_LIMIT})", step=8, key="cfg.max_new_tokens")
        st.checkbox("Use the chat template", key="cfg.chat",
                    help="Wrap the prompt as a user message (instruction-tuned models). Off: plain continuation.")
        config, error = _read_config()
        if error:
            st.error(f"Setting out of range: {error}")
    settings = Settings(spec or PairSpec(), config, error, bool(st.session_state["cfg.chat"]))
    st.session_state["settings"] = settings
    st.session_state["settings.has_pair"] = spec is not None
    return settings


def settings() -> Settings:
    """The sidebar's settings of this run (app.py draws the sidebar before the page)."""
    found = st.session_state.get("settings")
    return found if isinstance(found, Settings) else sidebar()


def with_temperature(config: SpecConfig, temperature: float) -> SpecConfig:
    return replace(config, temperature=float(temperature))


# =================================================================================================
# Models: one background loader per pair, shared by all sessions
# =================================================================================================

@st.cache_resource(show_spinner=False, max_entries=2)
def _loader(target: str, draft: str | None, device: str, quantize: bool | None, trust: bool, override: str) -> PairLoader:
    return PairLoader(PairSpec(target, draft, device, quantize, trust), override)


def pair_loader(spec: PairSpec) -> PairLoader:
    """The (started) loader for this spec; a failed one is dropped so that the next call tries again."""
    args = (spec.target, spec.draft, spec.device, spec.quantize_draft, spec.trust_remote_code, pair_override())
    return _loader(*args)


def retry_pair(spec: PairSpec) -> None:
    _loader.clear(spec.target, spec.draft, spec.device, spec.quantize_draft, spec.trust_remote_code, pair_override())


def _pair_names(loader: PairLoader) -> str:
    names = loader.pair.names
    parts = [f"**p** {names.get('target', '?')}", f"**q** {names.get('draft', 'none')}",
             f"{names.get('device', '?')} · {names.get('dtype', '?')}"]
    return " · ".join(parts)


def pair_status(spec: PairSpec) -> None:
    loader = pair_loader(spec)
    if loader.state == "loading":
        _loading_fragment(spec)
    elif loader.state == "ready":
        st.caption(f":material/check_circle: Ready: {_pair_names(loader)}")
    else:
        st.error(f"The models could not be loaded: {loader.error}")
        st.button("Try again", key="cfg.retry", on_click=retry_pair, args=(spec,))


@st.fragment(run_every=1.0)
@safe
def _loading_fragment(spec: PairSpec) -> None:
    """While the models load, refresh the progress every second; rerun the app once they are ready."""
    loader = pair_loader(spec)
    if loader.state != "loading":
        st.rerun()
    seconds = time.monotonic() - loader.started
    st.progress(loader.fraction, text=f"Loading models ({seconds:.0f} s): {loader.message}")
    st.caption("Recorded runs and uploads replay right away; running needs the models.")


def require_pair(settings: Settings):
    """The loaded pair, waiting for it with a progress bar; None (after an st.error) if it cannot load."""
    if not st.session_state.get("settings.has_pair", True):
        st.error("Choose a model pair in the sidebar first (custom pair: type its ids and press Load this pair).")
        return None
    loader = pair_loader(settings.spec)
    if loader.state == "loading":
        bar = st.progress(loader.fraction, text="Loading models…")
        while not loader.wait(0.25):
            bar.progress(loader.fraction, text=f"Loading models ({time.monotonic() - loader.started:.0f} s): {loader.message}")
        bar.empty()
    if loader.state == "failed":
        st.error(f"The models could not be loaded: {loader.error} Change the pair in the sidebar, or press Try again there.")
        return None
    return loader.pair


# =================================================================================================
# Prompts
# =================================================================================================

def _pick_category(page: str) -> None:
    prompts = load_prompts()
    category = st.session_state[f"{page}.category"]
    first = prompts[category][0]
    st.session_state[f"{page}.example"] = first
    st.session_state[f"{page}.prompt"] = first
    st.session_state["shared.prompt"] = first


def _pick_example(page: str) -> None:
    st.session_state[f"{page}.prompt"] = st.session_state[f"{page}.example"]
    st.session_state["shared.prompt"] = st.session_state[f"{page}.example"]


def _share_prompt(page: str) -> None:
    st.session_state["shared.prompt"] = st.session_state[f"{page}.prompt"]


def prompt_picker(page: str, label: str = "Prompt", height: int = 110) -> str:
    """Example prompts by category, and a text area to edit them or type your own. Shared between pages."""
    prompts = load_prompts()
    categories = list(prompts)
    if f"{page}.category" not in st.session_state or st.session_state[f"{page}.category"] not in prompts:
        st.session_state[f"{page}.category"] = categories[0]
    category = st.session_state[f"{page}.category"]
    if st.session_state.get(f"{page}.example") not in prompts[category]:
        st.session_state[f"{page}.example"] = prompts[category][0]
    if f"{page}.prompt" not in st.session_state:
        st.session_state[f"{page}.prompt"] = st.session_state.get("shared.prompt", prompts[category][0])
    c1, c2 = st.columns([1, 3])
    c1.selectbox("Example category", categories, key=f"{page}.category", on_change=_pick_category, args=(page,))
    c2.selectbox("Example prompt", prompts[category], key=f"{page}.example", on_change=_pick_example, args=(page,),
                 format_func=lambda p: lab.short(p, 110))
    return st.text_area(label, key=f"{page}.prompt", height=height, on_change=_share_prompt, args=(page,),
                        help=f"Edit freely. At most {MAX_PROMPT_CHARS} characters.")


# =================================================================================================
# Background runs: start, watch live, stop, collect
# =================================================================================================

def _set_error(page: str, message: str | None) -> None:
    st.session_state[f"{page}.error"] = message


def show_error(page: str) -> None:
    message = st.session_state.get(f"{page}.error")
    if message:
        st.error(message)


def job_of(page: str) -> Job | None:
    job = st.session_state.get(f"{page}.job")
    return job if isinstance(job, Job) else None


def busy(page: str) -> bool:
    job = job_of(page)
    return job is not None and not job.finished


def launch(page: str, settings: Settings, work: Callable[[Job, Any], Any], *, prompt: str | None = None,
           meta: dict | None = None) -> bool:
    """Check what a user can get wrong, then run work(job, pair) in the background. False after an st.error."""
    _set_error(page, None)
    if busy(page):
        return False
    if settings.config is None:
        _set_error(page, f"Fix the settings in the sidebar first: {settings.config_error}")
        return False
    if prompt is not None and (not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS):
        # The same checks as runs.encode, before waiting for the models.
        try:
            encode(None, prompt)
        except PromptError as exc:
            _set_error(page, f"Prompt: {exc}.")
            return False
    pair = require_pair(settings)
    if pair is None:
        return False
    if prompt is not None:
        try:
            encode(pair, prompt, settings.chat)
        except PromptError as exc:
            _set_error(page, f"Prompt: {exc}.")
            return False
    info = {"prompt": prompt or "", "config": settings.config, **(meta or {})}
    st.session_state[f"{page}.job"] = start_job(page, lambda job: work(job, pair), None, info)
    return True


def trace_work(prompt: str, config: SpecConfig, chat: bool, baseline: bool) -> Callable[[Job, Any], Trace]:
    """A speculative run (and optionally the baseline), its events streamed into the job."""
    def work(job: Job, pair) -> Trace:
        return run_trace(pair, prompt, config, chat=chat, baseline=baseline, cancel=job.cancel,
                         on_event=job.on_event, on_wait=job.on_wait)
    return work


def take_finished(page: str) -> Job | None:
    """The job of this page that has just finished, once; its error is kept on the page until the next run."""
    job = job_of(page)
    if job is None or not job.finished or job.consumed:
        return None
    job.consumed = True
    if job.state == "failed":
        _set_error(page, job.error)
        st.error(job.error)  # this run has drawn show_error already; later runs show it there
    return job


def live_panel(page: str, render: Callable[[Job], None]) -> None:
    """While this page's job runs: its state, a Stop button and a live view, refreshed twice a second."""
    if busy(page):
        _live_fragment(page, render)


@st.fragment(run_every=0.5)
@safe
def _live_fragment(page: str, render: Callable[[Job], None]) -> None:
    job = job_of(page)
    if job is None or job.finished:
        st.rerun()
    c1, c2 = st.columns([5, 1], vertical_alignment="center")
    with c1:
        if job.state == "waiting":
            st.info(f"Another run (from another tab or user) is using the models. Yours starts as soon as it "
                    f"ends — waiting {job.waited_seconds:.0f} s. Press Stop to give up.")
        elif job.cancel.is_set():
            st.caption("Stopping after the current round…")
        else:
            elapsed = time.monotonic() - job.created
            st.caption(f":material/progress_activity: Running · {elapsed:.0f} s{' · ' + job.progress if job.progress else ''}")
    c2.button("Stop", icon=":material/stop:", key=f"{page}.stop", on_click=job.stop, width="stretch",
              help="Cancels the run between two rounds; what was computed so far is kept.")
    render(job)


def remember(trace: Trace, label: str) -> None:
    """This session's runs, for the Theory page's measured points."""
    history = st.session_state.setdefault("history", [])
    if not any(t is trace for _, t in history):
        history.append((label, trace))
        del history[:-60]


def history() -> list[tuple[str, Trace]]:
    return list(st.session_state.get("history", []))


# =================================================================================================
# Trace files
# =================================================================================================

def trace_download(trace: Trace, key: str, label: str = "Download this run (JSON)") -> None:
    name = f"specviz-{trace.summary.method}-{trace.summary.new_tokens}tok-{int(time.time())}.json"
    st.download_button(label, data=trace.to_json(), file_name=name, mime="application/json", key=key,
                       on_click="ignore", help="Save the run; upload it later to replay it without any model.")


def trace_upload(page: str) -> Trace | None:
    """A newly uploaded trace (once per file), or None. A bad file gives st.error with the reason."""
    uploaded = st.file_uploader("Replay a saved run (.json)", type=["json"], key=f"{page}.upload",
                                help="A file from a Download button. Replays without loading any model.")
    if uploaded is None:
        st.session_state.pop(f"{page}.upload_id", None)
        return None
    try:
        trace = _parse_upload(uploaded.file_id, uploaded.getvalue())
    except TraceError as exc:
        st.error(f"This file cannot be replayed: {exc}")
        return None
    if st.session_state.get(f"{page}.upload_id") == uploaded.file_id:
        return None
    st.session_state[f"{page}.upload_id"] = uploaded.file_id
    return trace


def _parse_upload(file_id: str, data: bytes) -> Trace:
    import io
    return load_trace(io.BytesIO(data))


# =================================================================================================
# HTML pieces: chips, legend, text, KV caches
# =================================================================================================

def esc(text: str) -> str:
    return html.escape(text, quote=True)


def fmt_prob(x: float | None) -> str:
    if x is None:
        return "—"
    if 0 < x < 0.001:
        return "<0.001"
    return f"{x:.3f}"


def legend(kinds: Sequence[str] = ("accepted", "rejected", "unchecked", "resampled", "bonus")) -> None:
    names = {"accepted": "accepted draft token", "rejected": "rejected draft token", "unchecked": "not checked (after a rejection)",
             "resampled": "resampled from the residual", "bonus": "bonus token from p", "prompt": "prompt",
             "plain": "plain decoding"}
    items = "".join(f'<span><span class="sw {k}"></span>{names[k]}</span>' for k in kinds)
    st.html(f'<div class="sv-legend">{items}</div>')


def _chip(kind: str, token: str, verdict: str, rows: Sequence[tuple[str, str, str]], pos: str = "", title: str = "") -> str:
    nums = "".join(f'<span class="k {k_cls}">{esc(k)}</span><span class="v {v_cls}">{esc(v)}</span>'
                   for k, v, cls in rows for k_cls, v_cls in [cls.split("|")])
    pos_html = f'<span class="sv-pos">{esc(pos)}</span>' if pos else ""
    return (f'<div class="sv-chip sv-{kind}" title="{esc(title)}">{pos_html}<div class="sv-tok">{esc(visible(token))}</div>'
            f'<div class="sv-verdict">{esc(verdict)}</div><div class="sv-nums">{nums}</div></div>')


def _verdict_label(verdict: str) -> str:
    return {"accepted": "✓ accepted", "rejected": "✗ rejected"}.get(verdict, "· not checked")


def draft_chips_html(event: RoundEvent, greedy: bool) -> str:
    chips = []
    for i, d in enumerate(event.drafted):
        rows = [("q", fmt_prob(d.q), "q|"), ("p", fmt_prob(d.p), "p|"),
                ("min(1,p/q)", fmt_prob(d.ratio), "muted|muted" if greedy else "|")]
        if greedy:
            if d.verdict != "unchecked":
                rows.append(("argmax p?", "yes" if d.verdict == "accepted" else "no",
                             "|pass" if d.verdict == "accepted" else "|fail"))
        elif d.u is not None:
            rows.append(("u", fmt_prob(d.u), "|pass" if d.verdict == "accepted" else "|fail"))
        else:
            rows.append(("u", "—", "|"))
        title = f"draft position {i + 1}: q(d)={d.q:.4f}, p(d)={d.p:.4f}, min(1,p/q)={d.ratio:.4f}"
        if greedy:
            title += " (greedy decoding checks argmax p instead)"
        if d.from_lookahead:
            title += "; its q came from a draft forward over prompt-lookup guesses (no forward of its own)"
        chips.append(_chip(d.verdict, d.text, _verdict_label(d.verdict), rows,
                           pos=f"d{i + 1}" + (" ⇢" if d.from_lookahead else ""), title=title))
    if not chips:
        chips.append('<div class="sv-chip sv-unchecked"><div class="sv-tok">∅</div>'
                     '<div class="sv-verdict">nothing drafted</div></div>')
    elif event.alternatives:   # the last drafted token and its alternatives, stacked: one position, several candidates
        chips[-1] = f'<div class="sv-branch">{chips[-1]}{alternative_chips_html(event, greedy)}</div>'
    return "".join(chips)


def alternative_chips_html(event: RoundEvent, greedy: bool) -> str:
    """Chips for the other candidates at the last drafted position (checked only if that draft was rejected)."""
    n = len(event.drafted)
    chips = []
    for m, a in enumerate(event.alternatives):
        rows = [("q", fmt_prob(a.q), "q|"), ("p", fmt_prob(a.p), "p|")]
        if greedy:
            if a.verdict != "unchecked":
                rows.append(("argmax p?", "yes" if a.verdict == "accepted" else "no",
                             "|pass" if a.verdict == "accepted" else "|fail"))
        else:
            rows.append(("min(1,r/q)", fmt_prob(a.ratio), "|"))
            rows.append(("u", fmt_prob(a.u) if a.u is not None else "—",
                         "|pass" if a.verdict == "accepted" else ("|fail" if a.u is not None else "|")))
        title = (f"alternative {m + 1} for draft position {n}: q={a.q:.4f}, p={a.p:.4f}; checked only if d{n} "
                 "is rejected" + ("" if greedy else ", against the residual r left by the rejections before it"))
        chips.append(_chip(f"{a.verdict} sv-alt", a.text, _verdict_label(a.verdict), rows, pos=f"d{n} alt {m + 1}",
                           title=title))
    return "".join(chips)


def next_chip_html(event: RoundEvent, greedy: bool) -> str:
    t = event.next_token
    if event.next_source == "resampled":
        verdict = "↻ correction: argmax p" if greedy else "↻ resampled"
        rows = [("from", "p" if greedy else "residual", "|"), ("prob", fmt_prob(t.prob), "|")]
    else:
        verdict = "★ bonus: argmax p" if greedy else "★ bonus"
        after = "after alt" if event.kept_alternative is not None else f"p{event.n_accepted + 1}"
        rows = [("from", after if event.drafted else "p", "p|"), ("prob", fmt_prob(t.prob), "|")]
    return _chip(event.next_source, t.text, verdict, rows, title=f"{event.next_source} token, probability {t.prob:.4f}")


def round_chips_html(event: RoundEvent, greedy: bool) -> str:
    return (f'<div class="sv-chips">{draft_chips_html(event, greedy)}<div class="sv-arrow">→</div>'
            f'{next_chip_html(event, greedy)}</div>')


def _token_span(text: str, cls: str, title: str) -> str:
    parts = esc(text).replace("\n", '<span class="nl">↵</span>\n')
    return f'<span class="sv-t {cls}" title="{esc(title)}">{parts}</span>'


def _box(inner: str, follow: bool) -> str:
    """The text box; `follow` keeps it scrolled to the newest token (a column-reverse scroller)."""
    if follow:
        return f'<div class="sv-text sv-follow"><div>{inner}</div></div>'
    return f'<div class="sv-text">{inner}</div>'


def text_html(prompt: str, rounds: Sequence[RoundEvent], current: int | None = None, caret: bool = False,
              show_future: bool = False, follow: bool = False) -> str:
    """The prompt, then every committed token coloured by origin; the tokens of round `current` outlined."""
    spans = []
    upto = len(rounds) - 1 if current is None else current
    for event in rounds:
        if event.index > upto and not show_future:
            break
        for tok in lab.round_origins(event):
            cls = f"sv-{tok.origin}"
            if event.index == current:
                cls += " sv-current"
            if event.index > upto:
                cls += " sv-future"
            extra = f", min(1,p/q) = {tok.ratio:.3f}" if tok.ratio is not None else f", prob {tok.prob:.3f}"
            spans.append(_token_span(tok.text, cls, f"round {event.index + 1}: {tok.origin}{extra}"))
    caret_html = '<span class="sv-caret"></span>' if caret else ""
    return _box(f'<span class="sv-prompt">{esc(prompt)}</span>{"".join(spans)}{caret_html}', follow)


def plain_text_html(prompt: str | None, tokens: Sequence[str], cls: str = "sv-plain", caret: bool = False,
                    follow: bool = False) -> str:
    spans = "".join(_token_span(t, cls, "plain decoding") for t in tokens)
    head = f'<span class="sv-prompt">{esc(prompt)}</span>' if prompt else ""
    return _box(f'{head}{spans}{"<span class=sv-caret></span>" if caret else ""}', follow)


def _cells(tokens: Sequence[tuple[str, str]]) -> str:
    return "".join(f'<span class="sv-cell {cls}">{esc(visible(text))}</span>' for text, cls in tokens)


def kv_cache_html(event: RoundEvent, prompt_len: int, drafter: str) -> str:
    """Both KV caches: before the round, after the forward passes, after the rollback (DynamicCache.crop).

    With C tokens committed before the round and n drafted: the target's verify fills C + n positions,
    the rollback keeps the committed ones; the draft fed C + n - 1 (its last token was never fed back).
    """
    committed = prompt_len + event.position
    n = len(event.drafted)
    verdict_cls = [d.verdict for d in event.drafted]
    rows = ['<div class="sv-kv">']

    def line(label: str, old: int, pending: int, drafted: list[tuple[str, str]], length: int, note: str = "") -> None:
        cells = f'<span class="sv-cell old">{old} cached</span>' if old else ""
        cells += "".join('<span class="sv-cell pending">new</span>' for _ in range(max(0, pending)))
        cells += _cells(drafted)
        rows.append(f'<div class="lbl">{label}</div><div class="row">{cells}</div>'
                    f'<div class="len">{length} tokens{("<br>" + esc(note)) if note else ""}</div>')

    def model(name: str, before: int, after: int, fed: int, forwards: bool, branches: Sequence = ()) -> None:
        pending = max(0, committed - before) if forwards else 0
        rows.append(f'<div class="group">{name}</div>')
        line("before <small>round start</small>", before, 0, [], before)
        filled = [(d.text, verdict_cls[i]) for i, d in enumerate(event.drafted[:fed])]
        # Alternatives sit in the verify forward beside the last draft (same position) and are cropped right after it.
        siblings = [(a.text, f"{a.verdict} alt") for a in branches]
        line("after forward <small>cache grows</small>", before, pending, filled + siblings,
             before + pending + fed + len(siblings), "alternatives cropped after the pass" if siblings else "")
        keep = max(0, after - committed)
        kept = [(d.text, "accepted") for d in event.drafted[:min(keep, fed)]]
        dropped = [(d.text, f"{verdict_cls[i]} dropped") for i, d in enumerate(event.drafted[:fed]) if i >= keep]
        dropped += [(text, f"{cls} dropped") for text, cls in siblings]
        removed = before + pending + fed + len(siblings) - after
        note = f"−{removed} rolled back" if removed > 0 else "nothing to roll back"
        if branches and event.kept_alternative is not None:
            note += "; the kept alternative is fed with the next verify"
        line("after rollback <small>crop</small>", before, pending, kept + dropped, after, note)

    # A kept alternative is not in the target's cache yet: it is fed with the next round's verify.
    model("Target (p) cache", event.target_cache_before, event.target_cache_after, n, True, event.alternatives)
    if drafter == "model":
        # The draft runs only when it drafts; it never feeds its own last token back.
        model("Draft (q) cache", event.draft_cache_before, event.draft_cache_after, max(0, n - 1), n > 0)
    else:
        rows.append('<div class="group">Draft: the n-gram drafter has no model and no cache</div>')
    rows.append("</div>")
    return "".join(rows)


# =================================================================================================
# Views
# =================================================================================================

def explain_round(event: RoundEvent, greedy: bool) -> str:
    """The round in words, for the column beside it."""
    n = len(event.drafted)
    parts = []
    if n == 0:
        parts.append("The drafter proposed nothing this round (no n-gram match, or the token budget was reached), "
                     "so the target simply produced one token, like plain decoding.")
    else:
        parts.append(f"The drafter proposed **{n}** token{'s' if n != 1 else ''}. "
                     f"The target scored all of them in **one** forward pass.")
        shared = sum(d.from_lookahead for d in event.drafted)
        if shared:
            parts.append(f"The draft itself ran {event.draft_forwards} forward pass{'es' if event.draft_forwards != 1 else ''}, "
                         f"not {n}: prompt lookup guessed how the text goes on, one draft pass scored the guesses at "
                         f"once, and {shared} token{'s were' if shared != 1 else ' was'} (marked ⇢) drawn from q rows "
                         "that came with those guesses. Each is still drawn from the q shown on its chip, so the "
                         "verification is exactly the same; only the draft's passes are fewer.")
        if event.rejection_index is None:
            parts.append(f"It accepted **all {n}**, so it also gives a free **bonus** token from the distribution "
                         f"after the last draft: {n + 1} tokens for one target pass.")
        else:
            j = event.rejection_index
            d = event.drafted[j]
            kept = event.kept_alternative
            if greedy:
                top = kept.text if kept is not None else event.next_token.text  # else the next token is a bonus after it
                why = (f"the target's most likely token there is `{visible(top)}`, "
                       f"not `{visible(d.text)}`")
            else:
                why = (f"p = {fmt_prob(d.p)} and q = {fmt_prob(d.q)}, so min(1, p/q) = {fmt_prob(d.ratio)}, "
                       f"and the draw u = {fmt_prob(d.u)} was larger")
            parts.append(f"It accepted **{event.chain_accepted}**, then rejected `{visible(d.text)}` at position {j + 1}: {why}.")
            if j + 1 < n:
                parts.append(f"The {n - j - 1} token{'s' if n - j - 1 != 1 else ''} after it are thrown away unchecked.")
            if event.alternatives and j == n - 1:
                parts.append(explain_alternatives(event, greedy))
            if kept is None and greedy:
                parts.append("In greedy mode the correction is the target's own top token, "
                             "exactly what plain decoding would have written.")
            elif kept is None:
                left = "what the rejections left of p" if event.alternatives and j == n - 1 else "the residual norm(max(0, p − q))"
                parts.append(f"In place of the rejected token, `{visible(event.next_token.text)}` was drawn from "
                             f"{left}: the probability mass the draft under-represented.")
        parts.append(f"This round committed **{len(event.appended)}** token{'s' if len(event.appended) != 1 else ''} "
                     f"for one target pass.")
    return " ".join(parts)


def explain_alternatives(event: RoundEvent, greedy: bool) -> str:
    """Words for a rejection at a position that came with alternatives (a small token tree)."""
    n = len(event.drafted)
    names = ", ".join(f"`{visible(a.text)}`" for a in event.alternatives)
    head = (f"The verify pass also scored the draft's other candidates for its last position, {n} ({names}), "
            "each seeing the same text before it: the same pass, a few more rows. ")
    kept = event.kept_alternative
    if greedy:
        rule = "They are checked in order; one is kept if it is the target's top token."
    else:
        rule = ("They were drawn from the same q and are checked in order against what the rejections left: "
                "r = norm(max(0, p − q)), shrunk again after each refused candidate, kept with probability "
                "min(1, r/q) (recursive rejection sampling, so the token still follows p exactly).")
    if kept is not None:
        tail = (f" `{visible(kept.text)}` was kept in place of the rejected draft, and the same pass's row after it "
                f"gave the bonus token `{visible(event.next_token.text)}`.")
    else:
        tail = " None was kept."
    return head + rule + tail


def explain_chart(event: RoundEvent, greedy: bool) -> str:
    if event.kept_alternative is not None:
        return (f"The target kept the draft's alternative `{visible(event.kept_alternative.text)}`; the verify pass "
                "also computed p after it, shown here. The bonus token is " + ("its top token." if greedy else "drawn from it."))
    if event.next_source == "bonus":
        return ("Every draft was accepted, so the target's pass has one distribution left over, p after the last "
                "draft token. The bonus token is " + ("its top token." if greedy else "drawn from it."))
    if greedy:
        return ("The chart compares p (indigo) and q (teal) where the draft went wrong: the draft's favourite "
                "was not the target's. Greedy decoding needs no residual; it takes the tallest indigo bar.")
    return ("Where q (teal) is taller than p (indigo), the draft over-proposes; where p is taller, it "
            "under-proposes. The residual (orange) keeps only the part of p that q missed, rescaled to sum to 1. "
            "Drawing the replacement from it is what makes the output follow p exactly.")


def round_view(event: RoundEvent, trace_like: dict, *, show_chart: bool = True, show_cache: bool = True) -> None:
    """One round: chips with q, p, min(1, p/q), u and verdicts, the next token, its distribution, the KV caches."""
    config: SpecConfig = trace_like["config"]
    n = len(event.drafted)
    head = (f'<div class="sv-round-head"><b>Round {event.index + 1}</b>'
            f'{" of " + str(trace_like["rounds"]) if trace_like.get("rounds") else ""} · γ = {event.gamma} · '
            f'drafted {n} · accepted {event.n_accepted} · '
            f'{"all accepted + bonus" if event.rejection_index is None else "rejected at d" + str(event.rejection_index + 1)}'
            f'{" · alternative kept" if event.kept_alternative is not None else ""}'
            f' · +{len(event.appended)} token{"s" if len(event.appended) != 1 else ""}</div>')
    st.html(head + '<div class="sv-step">① draft → ② verify → ③ accept / reject → ④ next token</div>'
            + round_chips_html(event, config.greedy))
    left, right = st.columns([3, 2], gap="large")
    with right:
        st.markdown(explain_round(event, config.greedy))
    with left:
        if show_chart:
            where = "rejection" if event.next_source == "resampled" else "bonus"
            st.markdown(f"**At the {where} position:** "
                        + ("p, q and the residual norm(max(0, p − q)) over the top tokens"
                           if where == "rejection" and event.top_q else "the target's distribution p over its top tokens"))
            st.plotly_chart(charts.next_token_figure(event, config.greedy), key=f"nt-{trace_like.get('key', '')}-{event.index}",
                            config={"displayModeBar": False})
    with right:
        if show_chart:
            st.markdown(explain_chart(event, config.greedy))
    if show_cache:
        left, right = st.columns([3, 2], gap="large")
        left.markdown("**KV caches** — the keys and values each model keeps for the tokens it has already seen:")
        left.html(kv_cache_html(event, trace_like["prompt_len"], config.drafter))
        right.markdown(
            "A model's KV cache stores its work on every token so far, so each forward pass only processes the new "
            "tokens. The verify pass adds the drafted tokens to the target's cache, and drafting adds them to the "
            "draft's. After the verdict both caches are **cropped** back to the committed text "
            "(`DynamicCache.crop`); rejected tokens are forgotten, and the prompt is never processed again.")


def summary_metrics(trace: Trace) -> None:
    s = trace.summary
    rate = speedup(trace)
    cols = st.columns(6)
    cols[0].metric("New tokens", s.new_tokens)
    cols[1].metric("Rounds (target passes)", s.rounds)
    cols[2].metric("Tokens / target pass", f"{s.new_tokens / s.rounds:.2f}" if s.rounds else "—",
                   help="The speed-up if drafting were free and a verify pass cost as much as one plain step.")
    cols[3].metric("Acceptance rate", f"{s.acceptance_rate:.0%}", help="Accepted drafted tokens / drafted tokens.")
    cols[4].metric("Speculative tok/s", f"{s.tokens_per_second:.1f}")
    cols[5].metric("Speed-up", f"{rate:.2f}×" if rate is not None else "—",
                   help="Speculative tokens/s ÷ plain decoding tokens/s (measured, prompt prefill excluded)."
                        if rate is not None else "Run with 'also time plain decoding' to measure it.")


def trace_like(trace: Trace, key: str = "") -> dict:
    return {"config": trace.config, "rounds": len(trace.rounds), "prompt_len": len(trace.prompt_ids), "key": key}


def live_rounds(job: Job) -> None:
    """Live view of a speculative run (and its baseline) as events arrive."""
    events = list(job.events)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    config: SpecConfig = job.meta["config"]
    prompt = job.meta.get("prompt", "")
    if tokens:
        st.progress(min(1.0, len(tokens) / max(1, config.max_new_tokens)),
                    text=f"Now timing plain decoding for the speed-up: token {len(tokens)} of ≤ {config.max_new_tokens}")
    if not rounds:
        st.caption("Waiting for the first round (the prompt is processed first)…")
        st.html(text_html(prompt, [], caret=True))
        return
    last = rounds[-1]
    st.html(text_html(prompt, rounds, current=last.index, caret=not tokens, follow=True))
    prompt_len = rounds[0].target_cache_before + 1
    round_view(last, {"config": config, "rounds": None, "prompt_len": prompt_len, "key": "live"}, show_chart=False)


def race_live(job: Job) -> None:
    events = list(job.events)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    prompt = job.meta.get("prompt", "")
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Speculative decoding** (runs first)")
        st.html(text_html(prompt, rounds, caret=not tokens, follow=True))
    with c2:
        st.markdown("**Plain decoding** (runs second, never at the same time)")
        st.html(plain_text_html(prompt, [t.token.text for t in tokens], caret=bool(tokens), follow=True))


# --- the step-through viewer ----------------------------------------------------------------------

SPEEDS = {"0.5×": 0.5, "1×": 1.0, "2×": 2.0, "4×": 4.0}


def _goto(page: str, index: int, playing: bool = False) -> None:
    st.session_state[f"{page}.round"] = index
    st.session_state[f"{page}.playing"] = playing


def _slider_moved(page: str) -> None:
    _goto(page, int(st.session_state[f"{page}.slider"]) - 1)


def trace_viewer(page: str, trace: Trace) -> None:
    """Step forward and back through the rounds of a trace; play and pause at a chosen speed."""
    n = len(trace.rounds)
    if n == 0:
        st.info("This run has no rounds to show.")
        return
    index = min(max(int(st.session_state.get(f"{page}.round", 0)), 0), n - 1)
    st.session_state[f"{page}.round"] = index
    playing = bool(st.session_state.get(f"{page}.playing", False))
    speed = SPEEDS.get(st.session_state.get(f"{page}.speed", "1×"), 1.0)
    interval = round(2.0 / speed, 2) if playing else None
    st.fragment(_viewer_body, run_every=interval)(page, trace, interval)


@safe
def _viewer_body(page: str, trace: Trace, interval: float | None) -> None:
    n = len(trace.rounds)
    playing = bool(st.session_state.get(f"{page}.playing", False))
    index = int(st.session_state.get(f"{page}.round", 0))
    if playing and st.session_state.get(f"{page}.tick_armed"):
        index = min(index + 1, n - 1)
        st.session_state[f"{page}.round"] = index
    st.session_state[f"{page}.tick_armed"] = playing
    if playing and index >= n - 1:
        st.session_state[f"{page}.playing"] = False
        st.session_state[f"{page}.tick_armed"] = False
        playing = False

    controls = st.columns([1, 1, 1.4, 1, 1, 2.2], vertical_alignment="bottom")
    step = {"on_click": _goto, "width": "stretch"}
    controls[0].button("First", icon=":material/first_page:", key=f"{page}.first", args=(page, 0),
                       help="First round", **step)
    controls[1].button("Back", icon=":material/chevron_left:", key=f"{page}.prev", args=(page, max(0, index - 1)),
                       help="Previous round", **step)
    if playing:
        controls[2].button("Pause", icon=":material/pause:", key=f"{page}.pause", args=(page, index, False), **step)
    else:
        start = 0 if index >= n - 1 else index
        controls[2].button("Play", icon=":material/play_arrow:", key=f"{page}.play", args=(page, start, True),
                           type="primary", disabled=n < 2, help="Advance one round at a time", **step)
    controls[3].button("Next", icon=":material/chevron_right:", key=f"{page}.next",
                       args=(page, min(n - 1, index + 1)), help="Next round", **step)
    controls[4].button("Last", icon=":material/last_page:", key=f"{page}.last", args=(page, n - 1),
                       help="Last round", **step)
    controls[5].segmented_control("Speed", list(SPEEDS), key=f"{page}.speed", default="1×",
                                  label_visibility="collapsed")
    wanted = round(2.0 / SPEEDS.get(st.session_state.get(f"{page}.speed") or "1×", 1.0), 2) \
        if st.session_state.get(f"{page}.playing") else None
    if wanted != interval:
        st.rerun()  # play, pause or a new speed: redraw the viewer with the new tick interval
    if n > 1:
        st.session_state[f"{page}.slider"] = index + 1
        st.slider("Round", 1, n, key=f"{page}.slider", on_change=_slider_moved, args=(page,))

    event = trace.rounds[index]
    st.markdown("**The text so far** — each token coloured by where it came from; this round's tokens are outlined:")
    legend(("prompt", "accepted", "resampled", "bonus"))
    st.html(text_html(trace.prompt, trace.rounds, current=index))
    round_view(event, trace_like(trace, page))


# --- the race replay ------------------------------------------------------------------------------

RACE_SPEEDS = {"0.5×": 0.5, "1×": 1.0, "2×": 2.0, "5×": 5.0}


def start_replay(page: str) -> None:
    st.session_state[f"{page}.clock_start"] = time.monotonic()
    st.session_state[f"{page}.replaying"] = True


def race_end(trace: Trace) -> float:
    ends = [e.elapsed for e in trace.rounds] + [e.elapsed for e in trace.baseline]
    return max(ends) if ends else 0.0


def race_replay(page: str, trace: Trace) -> None:
    """Both runs on one clock: each lane fills with tokens at the times they were measured."""
    replaying = bool(st.session_state.get(f"{page}.replaying", False))
    st.fragment(_race_body, run_every=0.25 if replaying else None)(page, trace, replaying)


def _rate(tokens: int, t: float, prefill: float) -> float:
    """Decode rate on the replay clock: tokens / (t - prefill), as the runs' summaries count it."""
    return tokens / (t - prefill) if t > prefill and tokens else 0.0


def _lane(name: str, cls: str, prompt: str, rounds_or_tokens, n_done: int, total: int, t: float, prefill: float,
          spec: bool, color: str, caret: bool) -> str:
    rate = _rate(n_done, t, prefill)
    if spec:
        body = text_html(prompt, rounds_or_tokens, caret=caret, follow=True)
    else:
        body = plain_text_html(prompt, rounds_or_tokens, caret=caret, follow=True)
    width = 100.0 * n_done / total if total else 0.0
    return (f'<div class="sv-lane"><div class="sv-lane-head"><span class="name {cls}">{esc(name)}</span>'
            f'<span class="stats"><b>{n_done}</b> tokens · <b>{rate:.1f}</b> tok/s</span></div>{body}'
            f'<div class="bar"><div style="width:{width:.1f}%;background:{color}"></div></div></div>')


@safe
def _race_body(page: str, trace: Trace, replaying: bool) -> None:
    end = race_end(trace)
    speed = RACE_SPEEDS.get(st.session_state.get(f"{page}.race_speed") or "1×", 1.0)
    if replaying:
        t = (time.monotonic() - st.session_state.get(f"{page}.clock_start", time.monotonic())) * speed
        if t >= end:
            st.session_state[f"{page}.replaying"] = False
            st.rerun()
    else:
        t = end
    c1, c2, c3 = st.columns([1.2, 2, 2], vertical_alignment="center")
    c1.html(f'<div class="sv-clock">{min(t, end):.1f} s <small>of {end:.1f} s</small></div>')
    c2.button("Replay the race" if not replaying else "Restart", icon=":material/replay:", key=f"{page}.replay",
              on_click=start_replay, args=(page,), type="primary")
    c3.segmented_control("Replay speed", list(RACE_SPEEDS), key=f"{page}.race_speed", default="1×")
    rounds = [e for e in trace.rounds if e.elapsed <= t]
    base = [e for e in trace.baseline if e.elapsed <= t]
    spec_done = sum(len(e.appended) for e in rounds)
    spec_total = trace.summary.new_tokens
    base_total = trace.baseline_summary.new_tokens if trace.baseline_summary else len(trace.baseline)
    base_prefill = trace.baseline_summary.prefill_seconds if trace.baseline_summary else 0.0
    # A lane's clock stops at its last token: its rate then stays at the run's final rate.
    spec_t = min(t, trace.rounds[-1].elapsed) if trace.rounds else t
    base_t = min(t, trace.baseline[-1].elapsed) if trace.baseline else t
    spec_rate = _rate(spec_done, spec_t, trace.summary.prefill_seconds)
    base_rate = _rate(len(base), base_t, base_prefill)
    ratio = spec_rate / base_rate if base_rate > 0 and spec_rate > 0 else None
    final = speedup(trace)
    m = st.columns(4)
    m[0].metric("Speculative tok/s", f"{spec_rate:.1f}")
    m[1].metric("Plain tok/s", f"{base_rate:.1f}")
    m[2].metric("Speed-up so far", f"{ratio:.2f}×" if ratio else "—",
                help="The two rates on the replay clock up to now.")
    m[3].metric("Speed-up", f"{final:.2f}×" if final is not None else "—",
                help="Final, measured: speculative tokens/s ÷ plain tokens/s (prompt prefill excluded).")
    left, right = st.columns(2)
    left.html(_lane("Speculative decoding (draft + target)", "spec", trace.prompt, rounds, spec_done, spec_total, spec_t,
                    trace.summary.prefill_seconds, True, charts.COLORS["speculative"], caret=spec_done < spec_total))
    right.html(_lane("Plain decoding (target alone)", "plain", trace.prompt, [e.token.text for e in base], len(base),
                     base_total, base_t, base_prefill, False, charts.COLORS["plain"], caret=len(base) < base_total))


# --- adopting results, batch and lossless work -----------------------------------------------------

def adopt_trace(page: str, trace: Trace, label: str, at_end: bool = False) -> None:
    """Show this trace on the page (from a run, an upload or a recording) and remember it for Theory."""
    st.session_state[f"{page}.trace"] = trace
    st.session_state[f"{page}.label"] = label
    st.session_state[f"{page}.round"] = max(0, len(trace.rounds) - 1) if at_end else 0
    st.session_state[f"{page}.playing"] = False
    remember(trace, f"{label}: {lab.short(trace.prompt, 30)}")


def stopped_note(trace: Trace) -> None:
    if trace.summary.finish_reason == "cancelled" or (
            trace.baseline_summary is not None and trace.baseline_summary.finish_reason == "cancelled"):
        st.warning(f"Stopped: this run was cancelled after {len(trace.rounds)} rounds; what was computed is shown.")


def lab_work(plan: Sequence[lab.PlannedRun], chat: bool) -> Callable[[Job, Any], list[lab.LabRun]]:
    def work(job: Job, pair) -> list[lab.LabRun]:
        def progress(i: int, total: int, planned: lab.PlannedRun) -> None:
            job.fraction = i / total
            c = planned.config
            job.progress = (f"run {i + 1} of {total}: {planned.category} · {lab.drafter_name(c.drafter)} · "
                            f"{'greedy' if c.greedy else f'T={c.temperature:g}'} · {c.schedule}")
        return lab.run_batch(pair, plan, chat=chat, cancel=job.cancel, on_progress=progress, on_wait=job.on_wait)
    return work


def lab_live(job: Job) -> None:
    st.progress(job.fraction, text=job.progress or "starting…")


def lossless_work(prompt: str, config: SpecConfig, chat: bool, answer_prefix: str) -> Callable[[Job, Any], Any]:
    from .lossless import next_token_distributions

    def work(job: Job, pair):
        return next_token_distributions(pair, prompt, config, chat=chat, answer_prefix=answer_prefix,
                                        cancel=job.cancel, on_wait=job.on_wait)
    return work


def quiet_live(job: Job) -> None:
    st.caption("Computing p and q: one forward pass of each model over the context…")
