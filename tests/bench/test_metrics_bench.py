"""One trace through the bench's table and the lab page's numbers gives the same numbers (decoding/metrics.py), and
`bench --metrics-out`'s Prometheus text parses back, with prometheus-client's own parser, to the bench's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from specviz.bench.drafters import format_drafter_table, summarize_drafter
from specviz.bench.methods import _spec_stats
from specviz.bench.metrics_out import bench_metrics, stats_metrics
from specviz.bench.stream import acceptance_metrics
from specviz.decoding.exposition import ACCEPTED_TOKENS, DRAFT_TOKENS, DRAFTS, PER_POSITION, exposition
from specviz.decoding.metrics import SpecMetrics
from specviz.decoding.recording import Totals
from specviz.lessons import lab
from specviz.traces.trace import load_trace

TRACES = Path(__file__).resolve().parents[2] / "assets" / "traces"
# one with a round that drafted nothing, one whose kept alternatives stand in for rejected drafts
NAMES = ["4_rename_auto_lookahead.json", "5_prose_auto_alternatives.json"]


@pytest.fixture(scope="module", params=NAMES)
def trace(request):
    return load_trace(TRACES / request.param)


def bench_row(trace) -> dict:
    """The row compare_drafters makes of one run, from the stats the bench's methods keep."""
    s = trace.summary
    stats = _spec_stats(trace.rounds, s)
    return {
        "metrics": stats_metrics(stats).as_json(),
        "draft_seconds": s.draft_seconds,
        "decode_seconds": s.seconds - s.prefill_seconds,
        "baseline_decode_seconds": s.seconds - s.prefill_seconds,
        "identical": True,
    }


def test_one_trace_gives_the_same_numbers_in_the_bench_table_and_on_the_lab_page(trace):
    summary = summarize_drafter([bench_row(trace)])
    table = format_drafter_table({"summary": {"model": summary}, "config": {"temperature": 0}})
    page = lab.run_rows([lab.LabRun("code", trace.prompt, trace)])[0]
    positions = lab.acceptance_by_position([trace])
    stream = acceptance_metrics(list(trace.rounds))
    row = table.splitlines()[2].split()
    assert row[2] == f"{page['acceptance rate']:.3f}" == f"{stream['acceptance_rate']:.3f}"
    assert row[3] == f"{page['mean acceptance length']:.2f}" == f"{stream['mean_acceptance_length']:.2f}"
    assert row[4] == f"{positions[0].rate:.3f}" == f"{stream['per_position_acceptance_rate'][0]:.3f}"
    assert summary["acceptance_rate"] == pytest.approx(trace.summary.acceptance_rate)
    assert summary["conditional_acceptance_rate"][: len(positions)] == pytest.approx([p.rate for p in positions])
    totals = Totals("speculative")
    for event in trace.rounds:
        totals.add(event)
    assert (
        totals.metrics
        == SpecMetrics.from_events(trace.rounds)
        == stats_metrics(_spec_stats(trace.rounds, trace.summary))
    )


def test_the_old_definitions_would_have_disagreed():
    """The negative control: on these traces the bench's old mean acceptance length (1 + accepted / all rounds) and
    its old acceptance rate (the chain's accepted only) differ from the page's, so the test above can fail."""
    empty, alternatives = (load_trace(TRACES / name) for name in NAMES)
    m = SpecMetrics.from_events(empty.rounds)
    assert round(1 + m.accepted_tokens / m.rounds, 2) != round(m.mean_acceptance_length, 2)
    chain = sum(r.chain_accepted for r in alternatives.rounds) / alternatives.summary.drafted
    assert round(chain, 3) != round(SpecMetrics.from_events(alternatives.rounds).acceptance_rate, 3)


def parsed(text: str) -> dict[str, SpecMetrics]:
    """{method: its counters} read back by prometheus-client's parser, as a vLLM dashboard reads a scrape."""
    values: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "counter"
        for sample in family.samples:
            assert sample.name == family.name + "_total" and sample.labels["model_name"] == "the target"
            counts = values.setdefault(sample.labels["method"], {"positions": {}})
            if family.name == PER_POSITION:
                counts["positions"][int(sample.labels["position"])] = int(sample.value)
            else:
                counts[family.name] = int(sample.value)
    return {
        method: SpecMetrics.from_counters(
            c[DRAFTS], c[DRAFT_TOKENS], c[ACCEPTED_TOKENS], [c["positions"][i] for i in sorted(c["positions"])]
        )
        for method, c in values.items()
    }


def docs(traces) -> list[dict]:
    """The three bench documents that draft (methods, --compare-drafters, --stream), over the same runs."""
    pair = {"target": "the target"}
    rows = [bench_row(t) for t in traces]
    stats = [_spec_stats(t.rounds, t.summary) for t in traces]
    return [
        {
            "pair": pair,
            "settings": {"config": {"drafter": "model"}},
            "runs": [{"method": "baseline"}] + [{"method": "speculative", "stats": s} for s in stats],
        },
        {
            "pair": pair,
            "format": "specviz-drafters",
            "drafters": ["model"],
            "runs": [{**r, "drafter": "model"} for r in rows],
        },
        {"pair": pair, "requests": [{"model": acceptance_metrics(list(t.rounds)), "new_tokens": 1} for t in traces]},
    ]


def test_metrics_out_parses_back_to_the_bench_numbers():
    traces = [load_trace(TRACES / name) for name in NAMES]
    summary = summarize_drafter([bench_row(t) for t in traces])
    for doc in docs(traces):
        back = parsed(exposition(doc["pair"]["target"], bench_metrics(doc)))
        assert set(back) == {"model"}
        m = back["model"]
        assert m.acceptance_rate == pytest.approx(summary["acceptance_rate"])
        assert m.mean_acceptance_length == pytest.approx(summary["mean_acceptance_length"])
        assert list(m.per_position_acceptance_rate) == pytest.approx(summary["per_position_acceptance_rate"])
        assert (
            m.accepted_length_histogram
            == sum((SpecMetrics.from_events(t.rounds) for t in traces), SpecMetrics()).accepted_length_histogram
        )
