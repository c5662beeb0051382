"""The Your server page's parts without a browser: reading each engine's exposition text (prometheus-client's
parser), following counters across a restart, fetching an endpoint within its bounds from a local HTTP server the
test starts (each engine's text, a wrong content type, an endless body, a stalled connection, redirects, nothing
listening), and the draft-length advisor on hand-computed cases."""

from __future__ import annotations

import socket
import time

import pytest
from helpers.metrics_server import LLAMA_CPP, LLAMA_CPP_PLAIN, OTHER, SGLANG, metrics_server, vllm_text

from specviz.decoding.costs import expected_tokens, expected_tokens_by_position, speedup
from specviz.lessons import server_metrics as sm
from specviz.lessons.advisor import advise, tail_rate
from specviz.serving import scrape

# --- reading the text ---------------------------------------------------------------------------------------------


def test_vllm_counters_summed_over_engines_with_positions_one_based_by_order():
    text = vllm_text(10, 30, 15, (8, 5, 2), engine="0") + vllm_text(30, 90, 45, (24, 15, 6), engine="1")
    found = sm.read_exposition(text, 1.0)
    assert found.engine == "vLLM" and found.series == 'model_name="m"' and found.others == ()
    assert found.counters == sm.Counters(40, 120, 60, (32, 20, 8))
    m = found.counters.metrics()
    assert m.acceptance_rate == pytest.approx(0.5) and m.mean_acceptance_length == pytest.approx(2.5)
    assert m.conditional_acceptance_rate == pytest.approx((32 / 40, 20 / 32, 8 / 20))


def test_llama_cpp_bare_counter_names_and_sglang_gauges():
    found = sm.read_exposition(LLAMA_CPP, 0.0)
    assert found.engine == "llama.cpp" and found.counters == sm.Counters(87, 261, 167, (70, 55, 42))
    sglang = sm.read_exposition(SGLANG, 0.0)
    assert sglang.counters is None
    assert sglang.gauges == {"mean acceptance length": 2.8, "acceptance rate": 0.6}


def test_several_models_read_one_series_and_name_the_others():
    text = vllm_text(10, 30, 15, (8, 5, 2), model="small") + vllm_text(50, 150, 90, (40, 30, 20), model="big")
    found = sm.read_exposition(text, 0.0)
    assert found.series == 'model_name="big"' and found.others == ('model_name="small"',)
    assert found.counters.drafts == 50  # not 60: two models' counts are not added up
    assert sm.read_exposition(text, 0.0, prefer='model_name="small"').counters.drafts == 10


@pytest.mark.parametrize(
    "text, words",
    [
        (OTHER, "not one of the engines"),
        (LLAMA_CPP_PLAIN, "publishes no speculative counters"),
        ("# TYPE sglang:token_usage gauge\nsglang:token_usage 0.2\n", "SGLang server publishes no speculative"),
        ("<html><body>hello</body></html>", "not Prometheus text"),
        (vllm_text(1, 3, 1).replace("num_accepted_tokens_total", "x_total"), "num_accepted_tokens is missing"),
        (vllm_text(1, 3, 1, (1,)).replace('position="0"', 'position="x"'), "position 'x'"),
        (vllm_text(1, 3, -1), "not a count"),
    ],
)
def test_an_answer_without_readable_counters_is_one_line(text, words):
    with pytest.raises(sm.ServerMetricsError, match=words) as caught:
        sm.read_exposition(text, 0.0)
    assert "\n" not in str(caught.value)


def test_a_missing_per_position_family_gives_the_totals_and_no_positions():
    found = sm.read_exposition(vllm_text(10, 30, 15), 0.0)
    assert found.counters.per_position == () and found.counters.metrics().acceptance_rate == pytest.approx(0.5)


# --- following counters -------------------------------------------------------------------------------------------


def reading(at: float, drafts: int, tokens: int, accepted: int, per_position=()) -> sm.Scrape:
    return sm.read_exposition(vllm_text(drafts, tokens, accepted, per_position), at)


def test_counter_differences_over_a_window_and_since_the_first_reading():
    history = sm.History()
    for at, d in ((0.0, 100), (60.0, 110), (400.0, 150), (460.0, 170)):
        history.add(reading(at, d, 3 * d, d, (d // 2, d // 3, d // 6)))
    recent = history.window(300.0)
    assert recent.counters.drafts == 20 and recent.seconds == 60.0  # 400 -> 460: the readings within 300 s
    assert recent.per_second(recent.counters.draft_tokens) == pytest.approx(1.0)
    whole = history.window()
    assert whole.counters.drafts == 70 and whole.seconds == 460.0 and whole.restarts == 0
    assert history.lifetime().drafts == 170


def test_a_restart_starts_a_new_baseline_and_keeps_what_came_before():
    history = sm.History()
    history.add(reading(0.0, 100, 300, 150, (80, 50, 20)))
    history.add(reading(10.0, 120, 360, 180, (96, 60, 24)))
    history.add(reading(20.0, 5, 15, 9, (4, 3, 2)))  # the server restarted: its counters start from zero again
    history.add(reading(30.0, 15, 45, 24, (12, 8, 4)))
    window = history.window()
    assert window.restarts == 1
    # 20 before the restart, 5 counted by the new life up to its first reading, 10 after: never 15 - 120 < 0
    assert window.counters == sm.Counters(35, 105, 54, (28, 18, 8))
    assert history.lifetime() == sm.Counters(135, 405, 204, (108, 68, 28))
    for value in window.counters.values():
        assert value >= 0


def test_negative_control_without_the_reset_check_a_restart_counts_backwards(monkeypatch):
    monkeypatch.setattr(sm.Counters, "went_down_from", lambda self, before: False)
    history = sm.History()
    history.add(reading(0.0, 100, 300, 150))
    history.add(reading(10.0, 5, 15, 9))
    assert history.window().counters.drafts == -95  # what the check prevents


def test_one_reading_gives_no_window_and_another_series_starts_again():
    history = sm.History()
    history.add(reading(0.0, 10, 30, 15))
    assert history.window() is None and history.lifetime().drafts == 10
    history.add(sm.read_exposition(LLAMA_CPP, 5.0))
    assert len(history.scrapes) == 1 and history.latest.engine == "llama.cpp"


# --- the advisor --------------------------------------------------------------------------------------------------


def test_expected_tokens_by_position_is_leviathans_for_equal_rates():
    for a in (0.0, 0.3, 0.8, 1.0):
        for g in (1, 3, 6):
            assert expected_tokens_by_position([a] * g, g) == pytest.approx(expected_tokens(a, g))
    assert expected_tokens_by_position([0.9, None, 0.9], 3) == pytest.approx(1.9)  # nothing reached position 2


def test_advisor_on_a_hand_computed_case():
    # kept shares 1, .9, .72, .36, .0504, .007056; tokens 1.9, 2.62, 2.98, 3.0304, 3.037456; cost 1 + 0.1 k
    advice = advise((0.9, 0.8, 0.5, 0.14, 0.14), 0.1)
    assert [round(r.speedup, 4) for r in advice.rows] == [1.7273, 2.1833, 2.2923, 2.1646, 2.025]
    assert advice.best == 3 and advice.current == 5
    assert advice.tail_rate == pytest.approx(0.057456 / 0.4104)  # 0.14: positions 4 and 5 together
    assert advice.gain == pytest.approx(2.98 / 1.3 / (3.037456 / 1.5) - 1)
    assert advice.sentence == (
        "Positions after 3 accept 14% of what reaches them (36% of drafts get there): a draft length of 3 would be "
        "about 13% faster than your 5."
    )


def test_advisor_keeps_a_length_whose_last_position_pays():
    advice = advise((0.9, 0.85, 0.8), 0.05)
    assert advice.best == 3 and advice.tail_rate is None
    assert "your draft length of 3 is the best of 1 to 3" in advice.sentence
    assert "position 3 still accepts 80%" in advice.sentence


def test_advisor_negative_control_a_costlier_draft_moves_the_best_down():
    rates = (0.9, 0.8, 0.5, 0.14, 0.14)
    assert advise(rates, 0.0).best == 5  # free drafts: every position is worth its (zero) cost
    assert advise(rates, 1.0).best == 1  # a draft step as dear as a target step: 1.9 / 2 beats 2.62 / 3
    equal = advise([0.8] * 6, 0.1)
    assert equal.best == max(range(1, 7), key=lambda g: speedup(0.8, g, 0.1))  # Theory's optimum for one a
    assert tail_rate((0.5, 0.5), 2) is None and advise((), 0.1) is None


def test_advisor_with_a_measured_curve_uses_its_times():
    curve = {"target_seconds": [1.0, 1.2, 1.4, 1.6], "target_step_seconds": 1.0, "draft_step_seconds": 0.1}
    advice = advise((0.9, 0.8, 0.7), 0.5, curve)
    assert advice.measured and advice.c == pytest.approx(0.1)
    assert advice.row(2).steps == pytest.approx(2 * 0.1 + 1.4)  # t_verify(2) from the curve, not 1


# --- fetching -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with metrics_server() as url:
        yield url


@pytest.mark.parametrize(
    "path, engine, drafts",
    [("/vllm", "vLLM", 10), ("/llamacpp", "llama.cpp", 87), ("/openmetrics", "vLLM", 10), ("/same-host", "vLLM", 10)],
)
def test_each_engine_is_read_from_a_local_server(server, path, engine, drafts):
    found = scrape.scrape(server + path)
    assert found.engine == engine and found.counters.drafts == drafts


def test_sglang_from_a_local_server(server):
    assert scrape.scrape(server + "/sglang").gauges["acceptance rate"] == 0.6


def test_a_restart_seen_through_the_endpoint(server):
    history = sm.History()
    history.add(scrape.scrape(server + "/restart"))
    history.add(scrape.scrape(server + "/restart"))
    assert history.window().restarts == 1 and history.window().counters.drafts == 5


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed on leaving: nothing listens there


@pytest.mark.parametrize(
    "path, words",
    [
        ("/html", "answered with text/html, not Prometheus text"),
        ("/json", "answered with application/json"),
        ("/other", "not one of the engines"),
        ("/endless", "more than 1 MB"),
        ("/stalled", "longer than 0.5 s"),
        ("/stalled-body", "longer than 0.5 s"),
        ("/elsewhere", "redirects to another host"),
        ("/missing", "HTTP 404"),
    ],
)
def test_each_failure_is_one_line(server, path, words):
    started = time.monotonic()
    with pytest.raises(sm.ServerMetricsError, match=words) as caught:
        scrape.scrape(server + path, timeout=0.5, limit=1024 * 1024)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
    assert time.monotonic() - started < 2.5  # the time cap holds: the stalled routes wait 3 s


@pytest.mark.parametrize(
    "url, words",
    [
        (None, "connection refused"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("ftp://localhost/metrics", "only http:// and https://"),
        ("localhost:8000/metrics", "only http:// and https://"),
        ("http:///metrics", "names no host"),
        ("http://localhost:99999/metrics", "not an address"),
    ],
)
def test_addresses_it_does_not_fetch(url, words):
    url = url or f"http://127.0.0.1:{refused_port()}/metrics"
    with pytest.raises(scrape.ScrapeError, match=words):
        scrape.scrape(url, timeout=1.0)


def test_bench_metrics_out_text_reads_back_as_the_bench_counted():
    from specviz.decoding.exposition import exposition
    from specviz.decoding.metrics import SpecMetrics

    counted = SpecMetrics.from_rounds([(2, 3), (0, 3), (3, 3), (1, 3), (0, 0)])
    other = SpecMetrics.from_rounds([(1, 2)])
    found = sm.read_exposition(exposition("target", {"model": counted, "ngram": other}), 0.0)
    assert found.series == 'method="model", model_name="target"'
    assert found.others == ('method="ngram", model_name="target"',)
    m = found.counters.metrics()
    assert (m.drafts, m.draft_tokens) == (counted.drafts, counted.draft_tokens)
    assert m.accepted_tokens == counted.accepted_tokens
    assert m.acceptance_rate == counted.acceptance_rate and m.mean_acceptance_length == counted.mean_acceptance_length
    assert m.conditional_acceptance_rate == pytest.approx(counted.conditional_acceptance_rate)  # drafts all 3 long


def test_the_bench_s_times_read_back_beside_its_counters_and_an_engine_s_text_has_none():
    from specviz.decoding.exposition import exposition
    from specviz.decoding.metrics import SpecMetrics

    counted = SpecMetrics.from_rounds([(2, 3), (0, 3), (3, 3)])
    curve = {"target_seconds": [0.2, 0.21, 0.23, 0.26], "draft_step_seconds": 0.05, "device_name": "A CPU",
             "dtype": "bfloat16", "measured_at": "2026-12-07T12:00:00"}  # fmt: skip
    found = sm.read_exposition(exposition("target", {"model": counted}, curve), 0.0)
    assert found.timing["target_seconds"] == curve["target_seconds"] and found.timing["target_step_seconds"] == 0.2
    assert found.timing["draft_step_seconds"] == 0.05 and found.timing["device_name"] == "A CPU"
    advice = advise(found.counters.metrics().conditional_acceptance_rate, 0.0, found.timing)
    assert advice.measured and advice.c == pytest.approx(0.25)
    assert sm.read_exposition(exposition("target", {"model": counted}), 0.0).timing is None  # the counters alone
    assert sm.read_exposition(vllm_text(10, 30, 15, (8, 5, 2)), 0.0).timing is None  # a serving engine's
    broken = exposition("target", {"model": counted}, {**curve, "target_seconds": [0.2, -1.0]})
    found = sm.read_exposition(broken, 0.0)  # a time that is not positive: no times, the counters still read
    assert found.timing is None and found.counters.drafts == 3
    gap = exposition("target", {"model": counted}, curve).replace('specviz_verify_seconds{drafted="1"}', "x_1")
    assert sm.read_exposition(gap, 0.0).timing is None  # a verify length missing
