"""The Heads page's parts: the training (live) of Medusa's heads or an EAGLE head, and their accuracy."""

from __future__ import annotations

import datetime
import platform

import streamlit as st

from .. import markup
from ..charts.heads import accuracy_figure, training_figure
from ..heads.report import DATA, RECORDED, ReportError, check_report, load_report
from ..heads.train import TrainSettings, TrainStep
from ..jobs import Job
from ..runs import Cancelled, exclusive
from .runner import Work
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
    result is saved in the model cache and serves its drafter at once."""

    def work(job: Job, pair) -> dict:
        from ..heads import use_heads
        from ..heads.eagle_train import train_eagle
        from ..heads.store import heads_path, save_heads, target_fingerprint
        from ..heads.train import train_medusa

        def progress(message: str, fraction: float) -> None:
            if job.cancel.is_set():
                raise Cancelled("training stopped")
            job.progress, job.fraction = message, fraction

        width = pair.target.config.get_text_config().vocab_size
        with exclusive(pair, job.cancel, job.on_wait):
            heads, report = (train_eagle if kind == "eagle" else train_medusa)(
                pair.target, pair.tokenizer, width, settings, pair.eos_ids, progress=progress, on_step=job.on_event
            )
        report.where = describe_machine(pair.names)
        fingerprint = target_fingerprint(pair.target)
        save_heads(heads, fingerprint, report.to_dict(), heads_path(fingerprint, kind))
        use_heads(pair.target, heads)
        return check_report(report.to_dict())

    return work


def describe_machine(names: dict) -> str:
    when = datetime.date.today().isoformat()
    return f"{names.get('target', '?')} on {names.get('device', '?')} ({platform.machine()}), {when}"


def train_live(job: Job) -> None:
    st.progress(min(1.0, job.fraction), text=job.progress or "starting…")
    steps = [e for e in job.events if isinstance(e, TrainStep)]
    if steps:
        curve = [{"step": s.step, "epoch": s.epoch, "loss": s.loss} for s in steps]
        st.plotly_chart(training_figure(curve), config=NO_BAR, key=f"heads.live.{len(steps)}")
        latest = ", ".join(f"head {k + 1}: {a:.0%}" for k, a in enumerate(steps[-1].top1))
        st.caption(f"Top-1 on the latest batch of training text: {latest}")


NAMES = {"medusa": "Medusa heads", "eagle": "EAGLE head"}

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


def show_report(report: dict, recorded: bool) -> None:
    source = f"Recorded: {markup.md(report['where'])}" if recorded else "Trained in this session"
    count = f"{report['heads']} heads" if report["kind"] == "medusa" else "one layer"
    st.caption(
        f"{source} · {count} · {report['train_tokens']:,} training tokens of {DATA[report['data']]}"
        f"{decoded_in(report)}, "
        f"{report['heldout_tokens']:,} held out · output vocabulary {report['vocabulary']:,} tokens · "
        f"target passes {report['collect_seconds']:.0f} s, training {report['train_seconds']:.0f} s"
    )
    left, right = st.columns(2, gap="large")
    name = f"{report['kind']}.{recorded}"
    left.plotly_chart(accuracy_figure(report), config=NO_BAR, key=f"heads.accuracy.{name}")
    if report["curve"]:
        right.plotly_chart(training_figure(report["curve"]), config=NO_BAR, key=f"heads.curve.{name}")


def heads_result(page: str, recorded: dict[str, dict | str]) -> None:
    """Per kind: this session's training if there is one, else the recorded one (or why it cannot be shown)."""
    trained = page_state(page).result
    for kind, name in NAMES.items():
        st.markdown(f"#### {name}")
        if trained and trained["kind"] == kind:
            show_report(trained, recorded=False)
        elif isinstance(recorded.get(kind), dict):
            show_report(recorded[kind], recorded=True)
        else:
            st.warning(f"The recorded training of the {name} cannot be shown: {markup.md(recorded.get(kind))}")
