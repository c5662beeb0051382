"""The shared sidebar: the model pair, speculation and sampling settings, read into one Settings per run.

Its widgets live in st.session_state under "cfg.<name>" (`cfg(name)`), so their values survive page switches. A widget
that sets a SpecConfig field is named after it: `config_key(field)` is its key, the one map from the fields that
experiments and advice name to the sidebar's widgets.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import streamlit as st

from specviz.decoding.config import GAMMA_LIMIT, MAX_NEW_TOKENS_LIMIT, ConfigError, SpecConfig
from specviz.drafters import DEFAULT, REGISTRY, descriptions, drafter_class, label
from specviz.drafters.heads_file import cached_report
from specviz.models.choice import auto_reason
from specviz.models.loading import BUILTIN, PairSpec
from specviz.serving.pairs import PAIRS

from .owner import SWITCH_NOTE, OwnerChoice, choice_here, ignored_note, offered, owner_note
from .pair import pair_override, pair_status
from .server import custom_models_allowed, custom_models_note, remote_code_note, session_learning, sharing_note
from .state import Settings, key, shared

PRESETS: dict[str, tuple[str, str | None] | None] = {
    "Built-in Qwen-Coder 1.5B ← 0.5B": (BUILTIN, BUILTIN),
    "Qwen2.5 7B ← 0.5B Instruct": ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    "Llama 3.1 8B ← 3.2 1B Instruct": ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
    "gpt2-xl ← distilgpt2": ("openai-community/gpt2-xl", "distilbert/distilgpt2"),
    "Custom: hub ids or local paths": None,
}
PRESET_HELP = (
    "The target (p) is the big model whose output we want; the draft (q) is the small, fast guesser. "
    "Built-in: Qwen2.5-Coder-1.5B-Instruct ← Qwen2.5-Coder-0.5B-Instruct, offline, runs on a CPU. "
    "The hub pairs need a download (network) and a GPU to be fast: Qwen/Qwen2.5-7B-Instruct ← "
    "Qwen/Qwen2.5-0.5B-Instruct, meta-llama/Llama-3.1-8B-Instruct ← meta-llama/Llama-3.2-1B-Instruct, "
    "openai-community/gpt2-xl ← distilbert/distilgpt2."
)
PRESETS_HELD = [pair for pair in PRESETS.values() if pair is not None]  # what an exposed server's owner may name
MAX_UI_SEED = (1 << 53) - 1  # the largest integer a browser number box holds exactly
QUANTIZE = {"auto (int8 on CPU)": None, "on (int8)": True, "off": False}
PRECISIONS = {
    "auto (fastest that fits)": "auto",  # short: the sidebar's box shows about 28 characters at 1024 px
    "bfloat16: half the memory": "bf16",
    "float32: exact weights": "fp32",
    "int8: least memory": "int8",
}
PRECISION_HELP = (
    "How the target's weights are held on a CPU. float32 is the models' exact weights and takes the most memory "
    "(about 8 GB for the built-in pair). bfloat16 rounds each weight to 3 significant digits: half the memory "
    "and faster where the CPU has bfloat16 instructions. int8 keeps 256 levels per row of weights: the least "
    "memory (under 3 GB), with slower checks of the draft. Each is its own target: speculative decoding gives "
    "exactly that target's output. auto times the three once, at the first load, and picks the one that should "
    "speculate fastest among those that fit in memory. On a GPU the weights are bfloat16."
)
DEFAULTS: dict[str, Any] = {
    "preset": next(iter(PRESETS)),
    "device": "auto",
    "quantize": next(iter(QUANTIZE)),
    "precision": next(iter(PRECISIONS)),
    "custom_target": "",
    "custom_draft": "",
    "custom_applied": None,
    "drafter": DEFAULT,
    "ngram_size": 3,
    "lookahead": 0,
    "alternatives": 0,
    "gamma": 5,
    "schedule": "constant",
    "gamma_max": 12,
    "draft_confidence": 0.0,
    "temperature": 0.0,
    "top_k": 0,
    "top_p": 1.0,
    "seed": 0,
    "max_new_tokens": 32,
    "chat": True,
}


def cfg(name: str) -> str:
    """The key of a sidebar setting."""
    return key("cfg", name)


CONFIG_WIDGETS = tuple(f.name for f in fields(SpecConfig) if f.name in DEFAULTS)  # the fields the sidebar sets


def config_key(field: str) -> str:
    """The key of the sidebar widget that sets SpecConfig's `field` (KeyError for a field it does not show)."""
    if field not in CONFIG_WIDGETS:
        raise KeyError(f"the sidebar has no widget for SpecConfig.{field}")
    return cfg(field)


def widget_values(settings: dict[str, object]) -> dict[str, object]:
    """Session-state values from settings named as experiments and advice name them: a SpecConfig field (its
    sidebar widget's key), or a page's own widget key ("<page>.<name>") as it is."""
    return {(name if "." in name else config_key(name)): value for name, value in settings.items()}


def config_widgets(config: SpecConfig) -> dict[str, object]:
    """A config's values by SpecConfig field, for every field the sidebar shows (a rerun with the same settings)."""
    return {name: getattr(config, name) for name in CONFIG_WIDGETS}


def _value(name: str) -> Any:
    return st.session_state[cfg(name)]


def _keep_state() -> None:
    """Widget values survive page switches: re-assigning a key keeps it when its widget is not drawn."""
    for name, value in DEFAULTS.items():
        st.session_state[cfg(name)] = st.session_state.get(cfg(name), value)


def _apply_custom() -> None:
    if not custom_models_allowed():
        return
    target = _value("custom_target").strip()
    draft = _value("custom_draft").strip()
    st.session_state[cfg("custom_applied")] = (target, draft or None) if target else None


def _pair_spec() -> PairSpec | None:
    """The chosen pair; a custom one only where this server allows custom pairs. Remote code is never the
    widgets' to allow (PairSpec.trust_remote_code stays off: the server's SPECVIZ_TRUST_REMOTE_CODE decides)."""
    choice = PRESETS.get(_value("preset"))
    if choice is None:
        choice = _value("custom_applied") if custom_models_allowed() else None
        if choice is None:
            return None
    return PairSpec(
        target=choice[0],
        draft=choice[1],
        device=_value("device"),
        quantize_draft=QUANTIZE[_value("quantize")],
        precision=PRECISIONS[_value("precision")],
    )


def _read_config() -> tuple[SpecConfig | None, str | None]:
    v = _value
    try:
        config = SpecConfig(
            gamma=int(v("gamma")),
            schedule=v("schedule"),
            gamma_max=max(int(v("gamma_max")), int(v("gamma"))),
            draft_confidence=float(v("draft_confidence")),
            temperature=float(v("temperature")),
            top_k=int(v("top_k")),
            top_p=float(v("top_p")),
            seed=int(v("seed")),
            max_new_tokens=int(v("max_new_tokens")),
            drafter=v("drafter"),
            ngram_size=int(v("ngram_size")),
            lookahead=int(v("lookahead")),
            alternatives=int(v("alternatives")),
            record_top=10,
        ).validate()
        return config, None
    except (ConfigError, TypeError, ValueError) as exc:
        return None, str(exc)


def _offer(owner: OwnerChoice | None) -> tuple[list[str], list[str]]:
    """The pairs and precisions this server offers: all on a loopback server; on an exposed one its owner's (and the
    custom entry, locked unless allowed), with the server's device and quantization. A value outside them, left from
    before or forged into the session, becomes the first offered, so no widget names a pair the server lacks."""
    if owner is None:
        return list(PRESETS), list(PRECISIONS)
    presets = offered(PRESETS, owner.pairs, [label for label, pair in PRESETS.items() if pair is None])
    precisions = offered(PRECISIONS, owner.precisions)
    for name, options in (("preset", presets), ("precision", precisions)):
        if st.session_state[cfg(name)] not in options:
            st.session_state[cfg(name)] = options[0]
    st.session_state[cfg("device")], st.session_state[cfg("quantize")] = DEFAULTS["device"], DEFAULTS["quantize"]
    return presets, precisions


def _pair_section() -> PairSpec | None:
    st.markdown("### Model pair")
    owner = choice_here(PRESETS_HELD)
    presets, precisions = _offer(owner)
    st.selectbox("Target (p) ← draft (q)", presets, key=cfg("preset"), help=PRESET_HELP)
    custom = PRESETS[_value("preset")] is None
    if custom and not custom_models_allowed():
        st.warning(custom_models_note(), icon=":material/lock:")
    elif custom:
        st.text_input(
            "Target model (p): hub id or local path",
            key=cfg("custom_target"),
            placeholder="e.g. Qwen/Qwen2.5-1.5B-Instruct or /models/my-target",
        )
        st.text_input(
            "Draft model (q): hub id or local path (empty: n-gram only)",
            key=cfg("custom_draft"),
            placeholder="e.g. Qwen/Qwen2.5-0.5B-Instruct",
        )
        st.button("Load this pair", on_click=_apply_custom, key=cfg("apply"), width="stretch")
    st.selectbox("Precision of the weights", precisions, key=cfg("precision"), help=PRECISION_HELP)
    if PRECISIONS[_value("precision")] == "auto":
        st.caption(auto_reason())
    if owner is not None:
        st.caption(owner_note(owner))
        ignored = ignored_note(owner, PRESETS_HELD)
        if ignored:
            st.warning(ignored)
    with st.expander("Device and loading", expanded=False):
        if owner is None:
            _device_controls()
        st.caption(remote_code_note())
        st.caption(custom_models_note())
        st.caption(sharing_note())
    spec = _pair_spec()
    if spec is None and custom_models_allowed():
        st.info("Type a target model id or path and press **Load this pair**.")
    elif spec is not None:
        pair_status(spec, owner.specs() if owner is not None else None)
    return spec


def _device_controls() -> None:
    """A loopback server's device and quantization (an exposed server's are its own)."""
    st.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key=cfg("device"))
    st.selectbox(
        "Quantize the draft",
        list(QUANTIZE),
        key=cfg("quantize"),
        help="int8 dynamic quantization of the draft's Linear layers makes drafting much cheaper "
        "on CPU. It changes q, never p: the output stays exactly the target's.",
    )
    st.caption(SWITCH_NOTE)


DRAFTER_HELP_END = " Train the heads on the Heads page; the Learning page shows the controller learning."


def _alternatives_slider(heads: bool) -> None:
    """The draft model's alternatives at its last position, or the draft heads' token tree."""
    st.slider(
        "Token tree: other candidates per position" if heads else "Alternatives for the last draft token",
        0,
        4,
        key=cfg("alternatives"),
        help=(
            "0 = off. The heads also propose their next-best tokens at every drafted position, arranged as a "
            "token tree (Medusa: the heads' ranks combined, the likeliest paths first; EAGLE: leaves beside its "
            "chain), all scored in the same target forward with a tree attention mask. The target walks down "
            "the tree keeping one candidate per position, so a rejected draft can be replaced by a sibling "
            "and continue. Step through draws the tree."
            if heads
            else "0 = off. When the draft is unsure of its last token, the target's verify pass also scores "
            "the draft's other candidates for that position (a small token tree): if the draft's own "
            "token is rejected, one of them can be kept instead, with a bonus token after it."
        )
        + " Greedy: q's next-best tokens; sampling: further draws from q, checked by recursive rejection "
        "sampling, so the output still follows p exactly.",
    )


def _speculation_section(spec: PairSpec | None) -> None:
    st.markdown("### Speculation")
    st.radio(
        "Drafter",
        list(REGISTRY),  # every registered drafter, in the registry's order
        key=cfg("drafter"),
        horizontal=True,
        format_func=label,
        help=descriptions() + DRAFTER_HELP_END,
    )
    drafter = _value("drafter")
    if drafter_class(drafter).drafts_tree:
        _heads_note(spec, drafter)
    if drafter_class(drafter).reads_ngram_size:
        st.slider("Longest n-gram to match", 1, 8, key=cfg("ngram_size"))
    if drafter_class(drafter).needs_draft_model:  # lookahead shares a draft model's passes
        st.slider(
            "Lookahead: lookup guesses per draft pass",
            0,
            16,
            key=cfg("lookahead"),
            help="0 = off. Prompt lookup guesses how the text goes on; one draft pass scores the guesses "
            "at once, and while the draft's own draws agree with them it needs no further pass. "
            "Each token is still drawn from the draft's q; only the passes are fewer (marked ⇢).",
        )
    if not drafter_class(drafter).point_mass:  # a point mass has no other candidates to offer
        _alternatives_slider(heads=drafter_class(drafter).drafts_tree)
    st.number_input(
        f"γ: draft length (1-{GAMMA_LIMIT})",
        step=1,
        key=cfg("gamma"),
        help="How many tokens the drafter proposes per round.",
    )
    st.radio(
        "Schedule",
        ["constant", "adaptive", "auto"],
        key=cfg("schedule"),
        horizontal=True,
        help="adaptive: γ grows by 2 after a round whose drafts were all accepted, shrinks by 1 otherwise. "
        "auto: drafts up to the largest γ while the draft is confident (0.7 unless set below) and "
        "takes plain target steps while speculating measurably does not pay.",
    )
    if _value("schedule") in ("adaptive", "auto"):
        st.number_input(f"Largest γ ({_value('schedule')})", step=1, key=cfg("gamma_max"))
    st.slider(
        "Draft-confidence stop",
        0.0,
        0.95,
        step=0.05,
        key=cfg("draft_confidence"),
        help="Stop drafting early when the draft's own top probability falls below this (0 = off).",
    )


def _sampling_section() -> None:
    st.markdown("### Sampling")
    st.slider("Temperature (0 = greedy)", 0.0, 2.0, step=0.05, key=cfg("temperature"))
    c1, c2 = st.columns(2)
    c1.number_input("Top-k (0 = off)", step=1, key=cfg("top_k"))
    c2.slider("Top-p", 0.05, 1.0, step=0.05, key=cfg("top_p"))
    c1, c2 = st.columns(2)
    c1.number_input("Seed", min_value=0, max_value=MAX_UI_SEED, step=1, key=cfg("seed"))
    c2.number_input(f"Max new tokens (≤ {MAX_NEW_TOKENS_LIMIT})", step=8, key=cfg("max_new_tokens"))
    st.checkbox(
        "Use the chat template",
        key=cfg("chat"),
        help="Wrap the prompt as a user message (instruction-tuned models). Off: plain continuation.",
    )


def _heads_note(spec: PairSpec | None, kind: str) -> None:
    """Whether the loaded target has heads of this kind in the model cache, said before a run needs them."""
    lease = PAIRS.lease(spec, pair_override()) if spec is not None else None
    if lease is None:  # not loaded yet: the run will say it
        return
    with lease:
        report = cached_report(lease.pair.target, kind)
        yours = kind in (session_learning().trained_heads(lease.pair) or {})
    what = drafter_class(kind).title
    if yours:
        st.caption(":material/info: Drafting with the heads you trained in this session (on the **Heads** page).")
    elif report is None:
        st.caption(f":material/info: No {what} trained for this target yet: train on the **Heads** page first.")
    elif drafter_class(kind).draft_passes == "one":  # one pass of every head: at most one token per head
        st.caption(
            f"{report['heads']} {what} trained (head 1 right {report['top1'][0]:.0%} of the time on held-out "
            f"answers): at most {report['heads']} drafted tokens per round."
        )
    else:
        st.caption(f"{what} trained: its first guess right {report['top1'][0]:.0%} of the time on held-out answers.")


def sidebar() -> Settings:
    """The one sidebar every page shares; app.py draws it before the page."""
    _keep_state()
    with st.sidebar:
        spec = _pair_section()
        _speculation_section(spec)
        _sampling_section()
        config, error = _read_config()
        if error:
            st.error(f"Setting out of range: {error}")
    found = Settings(spec or PairSpec(), config, error, bool(_value("chat")), has_pair=spec is not None)
    shared().settings = found
    return found


def settings() -> Settings:
    """The sidebar's settings of this run (app.py draws the sidebar before the page)."""
    found = shared().settings
    return found if found is not None else sidebar()


def with_temperature(config: SpecConfig, temperature: float) -> SpecConfig:
    return replace(config, temperature=float(temperature))
