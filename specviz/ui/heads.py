"""The Heads page's parts: the training (live) of Medusa's heads or an EAGLE head, and their accuracy."""

from __future__ import annotations

import datetime
import platform
from dataclasses import replace

import streamlit as st

from specviz import markup
from specviz.charts.heads import accuracy_figure, training_figure
from specviz.drafters import EAGLE, MEDUSA, head_titles, label
from specviz.drafters.heads_file import cached_report, heads_path, save_heads, target_fingerprint
from specviz.drafters.heads_report import DATA, RECORDED, ReportError, check_report, load_report
from specviz.runs import Cancelled, exclusive
from specviz.serving.budgets import TRAINING, stated, training_refusal
from specviz.serving.jobs import Job
from specviz.serving.pairs import PAIRS
from specviz.training.train import TrainSettings, TrainStep

from .pair import pair_override
from .recorded import how_recorded
from .runner import Work
from .server import bounded, session_learning
from .state import page_state

NO_BAR = {"displayModeBar": False}


def recorded_reports() -> dict[str, dict | str]:
    """Per kind, the shipped training report (measured on this project's CPU), or why it cannot be shown."""
    reports: dict[str, dict | str] = {}
    for kind, path in RECORDED.items():
        try:
            reports[kind] = load_report(path)
        except ReportError as exc:
            reports[kind] = str(exc)
    return reports


def train_work(settings: TrainSettings, kind: str) -> Work:
    """Train Medusa heads or an EAGLE head on the loaded target in the worker; the steps stream into the job; the
    result serves this session's drafter at once (where the server shares heads: every session's, and it is saved
    in the model cache)."""
    if kind == EAGLE:  # one layer: the page's K slider (disabled then) names no data of its own
        settings = replace(settings, heads=1)
    learning = session_learning()

    def work(job: Job, pair) -> dict:
        from specviz.training.eagle_train import train_eagle
        from specviz.training.memory import check_training_memory
        from specviz.training.train import train_medusa

        job.meta["kind"] = kind  # for the live view's names
        check_training_memory(pair.target, settings, kind)  # before anything is collected: one line if it won't fit

        def progress(message: str, fraction: float) -> None:
            if job.cancel.is_set():
                raise Cancelled("training stopped")
            job.progress, job.fraction = message, fraction

        width = pair.target.config.get_text_config().vocab_size
        with exclusive(pair, job.cancel, job.on_wait):
            heads, report = (train_eagle if kind == EAGLE else train_medusa)(
                pair.target, pair.tokenizer, width, settings, pair.eos_ids, progress=progress, on_step=job.on_event
            )
        report.where = describe_machine(pair.names)
        if learning.share_heads:
            fingerprint = target_fingerprint(pair.target)
            save_heads(heads, fingerprint, report.to_dict(), heads_path(fingerprint, kind))
        learning.keep_heads(pair, kind, heads)
        return check_report(report.to_dict())

    return work


def train_budget(settings: TrainSettings):
    """On an exposed server: the training's tokens x epochs against the budget, checked before it starts."""
    return (lambda pair: training_refusal(settings.train_tokens, settings.epochs)) if bounded() else None


def kept_for() -> str:
    """Whom a training here serves, as the Train button's caption says it."""
    if session_learning().share_heads:
        return "saved in the model cache, for every visitor of this server."
    return "yours only, for this browser session (this server keeps each visitor's heads apart)."


def budget_note() -> str | None:
    """The budget as the page states it before the training (None where nothing is bounded)."""
    if not bounded():
        return None
    return (
        f"This server is shared, so one training here takes {stated(TRAINING)} (tokens x epochs: 16,000 x 16 "
        "fits); a longer one is refused before it starts."
    )


def describe_machine(names: dict) -> str:
    when = datetime.date.today().isoformat()
    return f"{names.get('target', '?')} on {names.get('device', '?')} ({platform.machine()}), {when}"


def train_live(job: Job) -> None:
    """A training's live view: its progress bar, the loss so far and the latest batch's top-1 per head."""
    st.progress(min(1.0, job.fraction), text=job.progress or "starting…")
    steps = [e for e in job.events if isinstance(e, TrainStep)]
    if steps:
        kind = job.meta.get("kind", MEDUSA)  # set by the work before its first step
        curve = [{"step": s.step, "epoch": s.epoch, "loss": s.loss} for s in steps]
        st.plotly_chart(training_figure(curve, kind), config=NO_BAR, key=f"heads.live.{len(steps)}")
        names = ["first guess"] if kind == EAGLE else [f"head {k + 1}" for k in range(len(steps[-1].top1))]
        latest = ", ".join(f"{name}: {a:.0%}" for name, a in zip(names, steps[-1].top1, strict=False))
        st.caption(f"Top-1 on the latest batch of training answers: {latest}")


NAMES = head_titles()  # "Medusa heads", "EAGLE head"
SEED_WORDS = (  # docs/notes/2026-12-heads.md, "Draft heads: Medusa and EAGLE": EAGLE's loss, seed 0 and seed 1
    "**How much is noise.** Trained again with another seed, the EAGLE head's first guess moved by up to 2 points "
    "of held-out accuracy (38.4% against 40.0%; 40.1% against 40.6% with its soft labels, measured while its "
    "training was tuned): a gap of a point or two between two trainings says little."
)
WEAK_TOP1 = 0.25  # below this held-out top-1 (head 1), a training is flagged: the defaults reach about 0.42

TOKENS_HELP = (  # the Heads page's training-tokens slider
    "The target answers whole batches of prompts (up to 256 tokens each, and half as many prompts again as the count "
    "needs, so that short answers do not cost a second batch), so a training gets more tokens than this. Held out "
    f"to measure the accuracy: a fifth as many, between 1,000 and {TrainSettings.heldout_tokens:,} (collected the "
    "same way)."
)
TREE_WORDS = (  # the Heads page's paragraph on the heads' token trees
    "**Token trees.** With the sidebar's *other candidates per position* above 0, the heads hedge: besides "
    "their chain they propose their next-best tokens, and the target scores every node in the same forward, "
    "each node seeing only its own path (a tree attention mask). Medusa's heads do not depend on the guesses "
    "before them, so any rank of head 1 can be followed by any rank of head 2: its tree combines them, the "
    "likeliest paths first. EAGLE's q depends on the path, so its other candidates are leaves beside its chain. "
    "The target walks down the tree keeping at most one child per node (recursive rejection sampling: still "
    "lossless); Step through draws the tree and the path it kept."
)


def decoded_in(report: dict) -> str:
    """Where the answers came from a lower-precision copy of the target: said beside the data."""
    return "" if report["collect_dtype"] == "float32" else f" (decoded in {report['collect_dtype']})"


FIGURE_WORDS = {
    MEDUSA: (
        "Head k guesses the token k + 1 positions after the hidden state it reads (head 1: the one after next; the "
        "LM head itself guesses the next). Held out: answers to prompts from files the training never read. The "
        "loss sums every head's cross-entropy, weighted 0.8^k, so it starts near K times a single head's; it drops "
        "in steps at each new epoch, when the heads see the same answers again."
    ),
    EAGLE: (
        "The first guess of a round, from the target's true feature (the number EAGLE's papers quote as its "
        "first-token acceptance); later guesses read the head's own predicted features. Held out: answers to "
        "prompts from files the training never read."
    ),
}


def show_report(report: dict, origin: str, source: str) -> None:
    """A training report: its caption (source first), the accuracy and loss figures, and how to read them; origin
    ("use", "session" or "recorded") keeps the figures' keys apart."""
    count = f"{report['heads']} heads" if report["kind"] == MEDUSA else "one layer"
    st.caption(
        f"{source} · {count} · {report['train_tokens']:,} training tokens of {DATA[report['data']]}"
        f"{decoded_in(report)}, "
        f"{report['heldout_tokens']:,} held out · output vocabulary {report['vocabulary']:,} tokens · "
        f"target passes {report['collect_seconds']:.0f} s, training {report['train_seconds']:.0f} s"
    )
    left, right = st.columns(2, gap="large")
    name = f"{report['kind']}.{origin}"
    left.plotly_chart(accuracy_figure(report), config=NO_BAR, key=f"heads.accuracy.{name}")
    if report["curve"]:
        right.plotly_chart(training_figure(report["curve"], report["kind"]), config=NO_BAR, key=f"heads.curve.{name}")
    st.caption(FIGURE_WORDS[report["kind"]])
    if report["top1"][0] < WEAK_TOP1:
        these, they = ("This head guesses", "it") if report["kind"] == EAGLE else ("These heads guess", "they")
        st.warning(
            f"{these} the target's next token right {report['top1'][0]:.0%} of the time on held-out answers: "
            f"trained on {report['train_tokens']:,} tokens, {they} will draft poorly (most drafts rejected). "
            "More training tokens help most; the defaults reach about 40%.",
            icon=":material/info:",
        )


def cached_reports(settings) -> dict[str, dict]:
    """Per kind, the report of the heads in the model cache for the loaded target: what its drafter uses."""
    lease = PAIRS.lease(settings.spec, pair_override()) if settings.has_pair else None
    if lease is None:
        return {}
    with lease:
        target = lease.pair.target
        fingerprint = target_fingerprint(target)  # once for both kinds
        reports = {kind: cached_report(target, kind, fingerprint) for kind in NAMES}
    return {kind: report for kind, report in reports.items() if report is not None}


def heads_result(page: str, recorded: dict[str, dict | str], settings) -> None:
    """Per kind: the heads the sidebar's drafter uses (in the model cache) if there are any, else this session's
    training (its file could not be written), else the recorded one (or why it cannot be shown)."""
    trained, in_use = page_state(page).result, cached_reports(settings)
    private = not session_learning().share_heads  # this session's training serves its drafter first
    for kind, name in NAMES.items():
        st.markdown(f"#### {name}")
        drafter, them = label(kind), "it" if kind == EAGLE else "them"
        if private and trained and trained["kind"] == kind:
            show_report(trained, "session", f"Trained in this session: your {drafter} drafter uses {them}")
        elif kind in in_use:
            show_report(in_use[kind], "use", f"In use by the {drafter} drafter: {markup.md(in_use[kind]['where'])}")
        elif trained and trained["kind"] == kind:
            show_report(trained, "session", "Trained in this session")
        elif isinstance(recorded.get(kind), dict):
            st.caption(
                f"No {name} trained for the loaded target yet: the sidebar's {drafter} drafter needs {them}. Train "
                f"{them} above; until then, this is a recorded training."
            )
            show_report(recorded[kind], "recorded", f"Recorded: {markup.md(recorded[kind]['where'])}")
            st.caption(SEED_WORDS)
            how_recorded(f"python -m specviz train-heads --kind {kind}", "The same training, from the command line.")
        else:
            st.warning(f"The recorded training of the {name} cannot be shown: {markup.md(recorded.get(kind))}")


def explained() -> None:
    """The two designs, their formulas and how they are trained, under the training: Train stays on the first
    screen at 1024x768 and the page opens on plain words."""
    with st.expander("How the heads work, and how they are trained", expanded=True):
        st.markdown(
            "A draft model reads the **text** and runs a whole small network per guess. Draft **heads** read what the "
            "target has already computed: its last hidden state h, the vector its LM head turns into the next token. "
            "**Medusa** (Cai et al. 2024) puts K small heads on h; head k guesses the token k + 1 positions on, all in "
            "one cheap pass, blind to the guesses before its own (so its accuracy falls fast with k). **EAGLE** (Li et "
            "al. 2024) trains one decoder layer to predict the target's *next* hidden state from the current one and "
            "the token just chosen, and runs it autoregressively: it sees its own guesses, at the cost of one small "
            "layer per token. Neither needs a second model; both end in the target's own (frozen) LM head."
        )
        # side by side, in short lines: a narrow column beside the text cut them off in windows 1024 px wide
        medusa, eagle = st.columns(2)
        medusa.latex(
            r"\begin{gathered}\text{Medusa}: q_k = \operatorname{softmax}(W_{\text{LM}}\, r_k) \\ "
            r"r_k = h_t + \operatorname{SiLU}(A_k h_t + b_k)\end{gathered}"
        )
        eagle.latex(
            r"\begin{gathered}\text{EAGLE}: \hat f_{t+1} = \text{Layer}(u_t) \\ u_t = W\,[\,e(x_{t+1});\ f_t\,] \\ "
            r"q = \operatorname{softmax}(W_{\text{LM}}\, \hat f_{t+1})\end{gathered}"
        )
        st.caption(
            "Both learn from the target itself: its own answers to requests about Python code, the text it will "
            "later be asked to speed up.",
            help="Medusa: sum of 0.8^k cross-entropy per head. EAGLE: SmoothL1 on the feature + 0.1 cross-entropy "
            "against the target's whole next-token distribution (EAGLE's soft labels), with noise on its input "
            "features, as it will read its own imperfect ones when drafting. W_LM is cut to the tokens the answers "
            "use; q is 0 on the others. The answers are the target's greedy answers to requests about code from "
            "Python's standard library and requests to write such functions (self-distillation).",
        )
        st.markdown(
            "The target checks a head's guesses exactly as it checks a draft model's: accept d with probability "
            "min(1, p/q), q being the head's own distribution, and resample from the residual on a rejection, so the "
            "text still follows p. Medusa's paper also offers **typical acceptance** (keep d if p(d) is above a "
            "threshold), which is faster but **not lossless**; specviz never uses it."
        )
