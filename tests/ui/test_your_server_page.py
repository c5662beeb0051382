"""The Your server page through AppTest (no model runs: it reads counters): it opens on its recording with the
recording's own numbers, reads the owner's endpoint from a local HTTP server the test starts, says each failure in
one line, and offers a typed address on a loopback server only."""

from __future__ import annotations

import json

import pytest
from helpers.app import open_app, texts
from helpers.metrics_server import answer, metrics_server
from streamlit import config as st_config

from specviz.lessons import server_metrics as sm
from specviz.lessons.advisor import advise
from specviz.lessons.theory import load_verify_curve
from specviz.serving import scrape
from specviz.ui import your_server

PAGE = "pages/your_server.py"


@pytest.fixture(scope="module")
def server():
    recorded = json.loads(sm.RECORDING_FILE.read_text(encoding="utf-8"))["text"]  # vLLM's text of the app's runs
    with metrics_server({"/recording": answer(recorded)}) as url:
        yield url


@pytest.fixture
def address():
    before = st_config.get_option("server.address")
    yield lambda value: st_config.set_option("server.address", value)
    st_config.set_option("server.address", before)


def page(monkeypatch, tmp_path, url: str | None = None):
    if url is None:
        monkeypatch.delenv(scrape.METRICS_URL_ENV, raising=False)
    else:
        monkeypatch.setenv(scrape.METRICS_URL_ENV, url)
    monkeypatch.setattr(scrape, "TIMEOUT", 0.5)
    at = open_app(monkeypatch, tmp_path)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def read(at, source: str):
    at.radio(key="your_server.source").set_value(source).run()
    assert not at.exception, at.exception
    return at


def table(at) -> list[dict]:
    return [row for frame in at.dataframe for row in frame.value.to_dict("records")]


def test_opens_on_the_recording_with_its_own_numbers(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path)
    recording = sm.load_recording(sm.RECORDING_FILE)
    banner = texts(at.info)[0]
    assert "a recording of specviz's own runs of the built-in pair" in banner and "in vLLM's format" in banner
    assert recording.machine.split(" ")[0] in banner and recording.when[:10] in banner
    m = recording.scrape.counters.metrics()
    (row,) = table(at)
    assert row["acceptance rate"] == f"{m.acceptance_rate:.1%}"
    assert row["mean acceptance length"] == f"{m.mean_acceptance_length:.2f}"
    assert row["drafts"] == f"{m.drafts:,}"
    assert row["drafted / s"] == f"{m.draft_tokens / recording.seconds:,.1f}"
    curve = load_verify_curve(sm.ASSETS / f"verify_curve_{recording.device}.json")
    advice = advise(m.conditional_acceptance_rate, 0.1, curve)
    assert texts(at.success) == [advice.sentence]


def test_an_exposed_server_offers_no_typed_address_and_reads_the_owners(monkeypatch, tmp_path, server, address):
    address("0.0.0.0")
    at = page(monkeypatch, tmp_path, server + "/vllm")
    assert at.radio(key="your_server.source").options == [your_server.RECORDING, your_server.CONFIGURED]
    assert not [t for t in at.text_input if t.label == "Metrics endpoint"]
    at = read(at, your_server.CONFIGURED)
    assert not at.warning
    assert any(c.startswith("measured now from a vLLM server at http") and "127.0.0.1" in c for c in texts(at.caption))
    rows = table(at)
    assert rows[-1]["acceptance rate"] == "50.0%" and rows[-1]["mean acceptance length"] == "2.50"  # 15/30, 1 + 15/10
    assert texts(at.success) == [advise((0.8, 0.625, 0.4), 0.1).sentence]  # 8/10, 5/8, 2/5 at the stated c


FAILURES = [
    ("/html", "answered with text/html"),
    ("/other", "not one of the engines"),
    ("/endless", "more than 2 MB"),
    ("/stalled", "longer than 0.5 s"),
    ("/elsewhere", "redirects to another host"),
    ("/missing", "HTTP 404"),
]


def test_a_loopback_server_reads_a_typed_address_and_says_each_failure_in_one_line(
    monkeypatch, tmp_path, server, address
):
    address("localhost")  # the negative control of the test above: here the page offers the box
    at = read(page(monkeypatch, tmp_path), your_server.TYPED)
    box = lambda: at.text_input(key="your_server.url")  # noqa: E731 - found again after each run
    box().set_value(server + "/llamacpp").run()
    assert not at.exception and not at.warning
    assert any(c.startswith("measured now from a llama.cpp server") for c in texts(at.caption))
    for path, words in FAILURES:
        box().set_value(server + path).run()
        assert not at.exception, (path, at.exception)
        (warning,) = texts(at.warning)
        assert words in warning and "\n" not in warning, (path, warning)
    box().set_value(server + "/no-positions").run()
    assert any("publishes no per-position counts" in c for c in texts(at.caption)) and not at.success
    box().set_value(server + "/sglang").run()
    assert {m.label for m in at.metric} >= {"acceptance rate (SGLang's)", "mean acceptance length (SGLang's)"}


def test_a_bench_metrics_file_is_costed_with_the_times_the_bench_wrote_beside_it(monkeypatch, tmp_path, address):
    """A `bench --metrics-out` file, served: the advice takes the bench's own c and verify times from the file (the
    ones its bench printed beside the same advice), with no c to type; the counters alone ask for one."""
    from specviz.decoding.exposition import exposition
    from specviz.decoding.metrics import SpecMetrics

    counted = SpecMetrics.from_rounds([(8, 8), (3, 8), (8, 8), (1, 8), (5, 8), (8, 8), (0, 8)])
    curve = {"target_seconds": [0.18 + 0.002 * g for g in range(9)], "draft_step_seconds": 0.045,
             "device_name": "A test CPU", "dtype": "bfloat16", "measured_at": "2026-12-07T12:00:00"}  # fmt: skip
    routes = {"/bench": answer(exposition("target", {"model": counted}, curve)), "/counters": answer(exposition(
        "target", {"model": counted}))}  # fmt: skip
    address("localhost")
    with metrics_server(routes) as url:
        at = read(page(monkeypatch, tmp_path), your_server.TYPED)
        at.text_input(key="your_server.url").set_value(url + "/bench").run()
        assert not at.exception and not at.warning
        timing = {**curve, "format": "specviz-verify-curve", "target_step_seconds": 0.18}
        advice = advise(counted.conditional_acceptance_rate, 0.0, timing)
        assert [s.value for s in at.success] == [advice.sentence]
        assert any(f"c = {advice.c:.3f}" in c and "A test CPU" in c for c in texts(at.caption))
        assert not any(n.key == "your_server.c" for n in at.number_input)  # nothing to type: the bench timed it
        assert any(c.startswith("measured now from specviz's bench, in vLLM's names,") for c in texts(at.caption))
        at.text_input(key="your_server.url").set_value(url + "/counters").run()
        assert not at.exception
        assert at.number_input(key="your_server.c").value == 0.1  # the negative control: no times, Theory's c
        assert [s.value for s in at.success] == [advise(counted.conditional_acceptance_rate, 0.1).sentence]
