"""The Heads page through AppTest on the tiny pair: the recorded training at once, training in the app with a live
view, then the sidebar's Medusa drafter on Step through. And the strict reading of training reports."""

from __future__ import annotations

import json

import pytest
from helpers.app import APP, finish, go, html_of, state
from streamlit.testing.v1 import AppTest

from specviz.drafters.heads_report import RECORDED, ReportError, check_report, load_report

GOOD = {
    "heads": 2,
    "top1": [0.5, 0.25],
    "top5": [0.75, 0.5],
    "train_tokens": 100,
    "heldout_tokens": 20,
    "vocabulary": 30,
    "collect_seconds": 1.0,
    "train_seconds": 2.0,
    "curve": [{"step": 1, "epoch": 1, "loss": 3.5}],
    "where": "<b>tiny</b>",
}


@pytest.mark.parametrize("kind, heads", [("medusa", 4), ("eagle", 1)])
def test_the_recorded_reports_are_valid_and_measured_here(kind, heads):
    report = load_report(RECORDED[kind])
    assert report["kind"] == kind and report["heads"] == len(report["top1"]) == len(report["top5"]) == heads
    assert report["train_tokens"] >= 5000 and report["curve"]
    assert all(t5 >= t1 for t1, t5 in zip(report["top1"], report["top5"], strict=True))
    assert "cpu" in report["where"]
    assert report["data"] == "greedy"  # trained on the target's own answers, as train-heads does by default


@pytest.mark.parametrize(
    "change, message",
    [
        ({"heads": 0}, "heads must be between"),
        ({"kind": "eagle"}, "heads must be between 1 and 1"),
        ({"kind": "hydra"}, "kind must be"),
        ({"heads": True}, "heads must be an integer"),
        ({"top1": [0.5]}, "one accuracy per head"),
        ({"top5": [0.5, float("nan")]}, "finite"),
        ({"top1": [0.5, 1.5]}, "between 0 and 1"),
        ({"curve": [{"step": 1, "epoch": 1, "loss": -1}]}, "loss must be between"),
        ({"curve": [7]}, "must be an object"),
        ({"train_seconds": "2"}, "finite number"),
        ({"data": "<script>"}, "data must be one of"),
    ],
)
def test_bad_reports_are_refused(change, message):
    with pytest.raises(ReportError, match=message):
        check_report({**GOOD, **change})


def test_a_report_file_that_is_not_json_or_too_large_is_refused(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{")
    with pytest.raises(ReportError, match="not JSON"):
        load_report(path)
    path.write_text(json.dumps(GOOD) + " " * 2_000_001)
    with pytest.raises(ReportError, match="larger"):
        load_report(path)


def test_the_page_opens_on_the_recorded_training(app, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "empty"))  # no heads trained for the loaded target
    go(app, "heads")
    assert "Heads" in app.title[0].value
    assert sum(c.value.startswith("Recorded:") for c in app.caption) == 2  # Medusa's and EAGLE's
    untrained = [c.value for c in app.caption if c.value.startswith("No ")]
    assert (
        len(untrained) == 2 and "Medusa drafter needs them" in untrained[0] and "EAGLE drafter needs it" in untrained[1]
    )
    assert app.button(key="heads.run").label == "Train"
    assert any("not lossless" in m.value for m in app.markdown)  # typical acceptance is named and refused
    assert "&lt;b&gt;" not in html_of(app)


@pytest.mark.parametrize("kind", ["medusa", "eagle"])
def test_train_in_the_app_then_draft_with_the_heads(app, tmp_path, monkeypatch, kind):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    go(app, "heads")
    app.radio(key="heads.kind").set_value(kind).run()
    assert app.slider(key=f"heads.epochs-{kind}").value == (16 if kind == "eagle" else 4)  # train-heads' defaults
    if kind == "medusa":
        app.slider(key="heads.count").set_value(2)
    assert app.slider(key="heads.count").disabled == (kind == "eagle")  # an EAGLE head is one layer
    app.select_slider(key="heads.tokens").set_value(2000)
    app.slider(key=f"heads.epochs-{kind}").set_value(1).run()
    app.button(key="heads.run").click().run()
    job = finish(app, "heads", timeout=300)
    assert job.state == "done", job.error
    result = state(app, "heads").result
    assert result["kind"] == kind and result["heads"] == (2 if kind == "medusa" else 1)
    assert result["train_tokens"] >= 2000  # greedy answers: whole rows, the last batch may overshoot
    assert list((tmp_path / "cache" / "heads").glob(f"{kind}-*.safetensors"))  # saved for the next start
    # the page shows the heads the drafter uses, in this session and in a new one (another visitor, a restart)
    drafter, size = ("Medusa", "2 heads") if kind == "medusa" else ("EAGLE", "one layer")
    for session in (app, go(AppTest.from_file(APP, default_timeout=120).run(), "heads")):
        in_use = [c.value for c in session.caption if c.value.startswith(f"In use by the {drafter} drafter")]
        assert len(in_use) == 1 and size in in_use[0] and f"{result['train_tokens']:,} training tokens" in in_use[0]
        assert not any(c.value.startswith("Recorded:") and size in c.value for c in session.caption)

    app.radio(key="cfg.drafter").set_value(kind).run()
    notes = " ".join(c.value for c in app.sidebar.caption)
    top1 = f"{result['top1'][0]:.0%} of the time on held-out answers"
    said = {
        "medusa": f"2 Medusa heads trained (head 1 right {top1}): at most 2",
        "eagle": f"its first guess right {top1}",
    }
    assert said[kind] in notes, notes
    weak = [w.value for w in app.warning if "will draft poorly" in w.value]  # a tiny training says so
    assert bool(weak) == (result["top1"][0] < 0.25), weak
    assert "trained for this target yet" not in notes
    go(app, "step_through")
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    trace = state(app, "step").trace
    assert trace.config.drafter == kind and sum(len(r.drafted) for r in trace.rounds) > 0
    assert trace.baseline_summary.token_ids == trace.summary.token_ids  # greedy: the target's own text
    assert ("Medusa" if kind == "medusa" else "EAGLE") in html_of(app)

    app.slider(key="cfg.alternatives").set_value(3).run()  # the heads' token tree, drawn on Step through
    app.button(key="step.run").click().run()
    job = finish(app, "step")
    assert job.state == "done", job.error
    trace = state(app, "step").trace
    assert trace.baseline_summary.token_ids == trace.summary.token_ids
    with_tree = next(r for r in trace.rounds if r.tree)
    app.slider(key="step.slider").set_value(with_tree.index + 1).run()
    page = html_of(app)
    assert 'class="sv-tree"' in page and "off the chain, checked in one target forward" in page
    assert "candidates off the chain" in " ".join(m.value for m in app.markdown) or with_tree.rejection_index is None


def test_medusa_without_trained_heads_says_where_to_train(app, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "empty"))
    from specviz.drafters.heads import forget_heads
    from specviz.ui import pair_loader

    loader = pair_loader(app.session_state["state.shared"].settings.spec)
    assert loader.wait(60)
    forget_heads(loader.pair.target)
    app.radio(key="cfg.drafter").set_value("medusa").run()
    assert any("No Medusa heads trained for this target yet" in c.value for c in app.sidebar.caption)  # before Run
    app.button(key="step.run").click().run()
    job = state(app, "step").job
    job.join(60)
    app.run()
    assert not app.exception
    errors = " ".join(e.value for e in app.error)
    assert "Heads page" in errors and "train-heads" in errors, errors
