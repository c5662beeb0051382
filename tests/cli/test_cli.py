"""The command line: bad input gives one clear line on stderr and exit status 2, never a traceback.

Most checks call the CLI's main() in this process (a fresh interpreter per case costs seconds for importing torch);
stdout and stderr are read at the file-descriptor level and warnings are shown as a fresh interpreter shows them, so
a stray line still fails. The process contract itself (the exit status of `python -m specviz`, undecodable bytes in
argv, errors that reach model loading) is checked through real subprocesses."""

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from specviz.__main__ import main
from specviz.decoding.config import SEED_LIMIT, ConfigError, SpecConfig
from specviz.errors import ModelLoadError, OutputError


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specviz", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )


# A fresh interpreter's warning filters (Python's defaults): what would reach a user's terminal.
FRESH_FILTERS = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


def show_on_stderr(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@pytest.fixture
def cli(capfd):
    """Run main() here as `python -m specviz` would (sys.exit(main()), argparse's SystemExit included), with a fresh
    interpreter's warnings on stderr; returns what a subprocess run returns."""

    def run(*args: str) -> subprocess.CompletedProcess:
        capfd.readouterr()
        with warnings.catch_warnings():
            warnings.filters[:] = FRESH_FILTERS
            warnings.showwarning = show_on_stderr  # not into pytest's record
            try:
                code = main(list(args))
            except SystemExit as exc:
                code = exc.code
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["specviz", *args], code, out, err)

    return run


# Cases that reach model loading run as a real process: their libraries may print on their own.
LOADING = {"no-such-org/no-such-model-xyz", "/nonexistent/dir"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompt", ""], "prompt is empty"),
        (["--prompt", "   "], "prompt is empty"),
        (["--prompt", "hi", "--gamma", "0"], "--gamma: must be between 1 and 32, got 0"),
        (["--prompt", "hi", "--max-new-tokens", "0"], "--max-new-tokens: must be between 1 and 1024"),
        (["--prompt", "hi", "--max-new-tokens", "100000"], "--max-new-tokens: must be between 1 and 1024"),
        (["--prompt", "hi", "--temperature", "-0.5"], "--temperature: must be in [0, 100], got -0.5"),
        (["--prompt", "hi", "--top-p", "0"], "--top-p: must be in (0, 1], got 0"),
        (["--prompt", "hi", "--top-p", "1.2"], "--top-p: must be in (0, 1], got 1.2"),
        (["--prompt", "hi", "--gamma", "two"], "--gamma: must be a whole number between 1 and 32, got 'two'"),
        (["--prompt", "hi", "--alternatives", "9"], "--alternatives: must be between 0 and 8, got 9"),
        (
            ["--prompt", "hi", "--target", "no-such-org/no-such-model-xyz", "--draft", "no-such-org/tiny"],
            "no-such-org/no-such-model-xyz",
        ),
        (["--prompt", "hi", "--target", "/nonexistent/dir", "--drafter", "ngram"], "/nonexistent/dir"),
        (["--prompt", "hi", "--target", "some/model"], "needs --draft"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, cli):
    result = run_cli("generate", *args) if message in LOADING else cli("generate", *args)
    assert result.returncode == 2, result.stderr
    # Progress lines (one per loading stage, no carriage returns) may come first; the error is one line, last.
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("specviz: error:")]
    assert errors == lines[-1:], result.stderr
    assert all(line.startswith("[") for line in lines[:-1]) and "\r" not in result.stderr, result.stderr
    assert message in lines[-1] and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_in_process_runs_see_a_stray_warning(cli, monkeypatch):
    """The in-process runner is no blinder than a subprocess: a warning on the way to the error is on its stderr."""
    import specviz.cli.args as cli_args

    real = cli_args.config_from

    def warns(args):
        warnings.warn("a stray warning", UserWarning, stacklevel=1)
        return real(args)

    monkeypatch.setattr(cli_args, "config_from", warns)
    monkeypatch.setattr(sys.modules["specviz.__main__"], "config_from", warns)
    result = cli("generate", "--prompt", "hi", "--gamma", "8", "--gamma-max", "4", "--schedule", "adaptive")
    assert result.returncode == 2 and "a stray warning" in result.stderr, result.stderr


def test_missing_subcommand():
    result = run_cli()
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_in_process_main_returns_2(capsys):
    assert main(["generate", "--prompt", "x", "--top-k", "-3"]) == 2
    assert "--top-k: must be between 0 and" in capsys.readouterr().err


def test_console_progress_writes_one_line_per_stage_in_a_log():
    import io

    from specviz.progress import ConsoleProgress

    log = io.StringIO()
    progress = ConsoleProgress(log, every=3600)
    for mib in range(0, 1000, 10):
        progress(f"assembling the parts ({mib} of 1000 MiB)", mib / 4000)
    progress("converting", 0.5)
    progress("done", 1.0)
    lines = log.getvalue().splitlines()
    assert lines == ["[  0.0%] assembling the parts (0 of 1000 MiB)", "[ 50.0%] converting", "[100.0%] done"]
    assert "\r" not in log.getvalue()


# ---------------------------------------------------------------- checks before loading, errors after running


# A target that fails in a second once loading starts: an error about anything else proves its check came first.
NOT_LOADED = ["--target", "/nonexistent/model-dir", "--drafter", "ngram"]


def assert_one_line(result: subprocess.CompletedProcess, message: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert lines and lines[-1].startswith("specviz: error:") and message in lines[-1], result.stderr
    assert "Traceback" not in result.stderr and "/nonexistent/model-dir" not in result.stderr, result.stderr


@pytest.mark.parametrize("seed", [str(2**64), "-1", str(10**30)])
def test_seed_outside_what_torch_takes_is_one_line(seed, cli):
    assert_one_line(
        cli("generate", "--prompt", "hi", "--seed", seed, *NOT_LOADED),
        "--seed: must be between 0 and 18446744073709551615",
    )


def test_the_seed_limit_is_what_torch_accepts():
    assert SpecConfig(seed=SEED_LIMIT).validate().seed == SEED_LIMIT
    torch.Generator().manual_seed(SEED_LIMIT)
    with pytest.raises((ValueError, RuntimeError, OverflowError)):
        torch.Generator().manual_seed(SEED_LIMIT + 1)
    with pytest.raises(ConfigError, match="seed must be between 0"):
        SpecConfig(seed=-1).validate()


def test_prompt_with_bytes_that_are_not_utf8_is_refused_before_loading():
    args = [sys.executable, "-m", "specviz", "generate", "--prompt", b"ab\xffc", *NOT_LOADED]
    result = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    )
    assert_one_line(result, "the prompt is not valid UTF-8 text: byte 0xff at character 3")


def test_prompt_over_the_character_limit_is_refused_before_loading(cli):
    from specviz.runs import MAX_PROMPT_CHARS

    result = cli("generate", "--prompt", "a" * (MAX_PROMPT_CHARS + 1), *NOT_LOADED)
    assert_one_line(result, f"the prompt is {MAX_PROMPT_CHARS + 1} characters long; the limit is {MAX_PROMPT_CHARS}")


def test_save_trace_to_a_directory_or_a_missing_folder_is_refused_before_loading(tmp_path, cli):
    assert_one_line(
        cli("generate", "--prompt", "hi", "--save-trace", str(tmp_path), *NOT_LOADED),
        f"--save-trace {tmp_path} is a directory",
    )
    missing = tmp_path / "no-such-folder" / "trace.json"
    assert_one_line(
        cli("generate", "--prompt", "hi", "--save-trace", str(missing), *NOT_LOADED),
        "cannot be written: No such file or directory",
    )
    assert not missing.parent.exists()


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux's /proc")
def test_save_trace_to_an_unwritable_file_is_refused_before_loading(cli):
    # /proc/version refuses writing even to root (chmod would not stop root)
    assert_one_line(
        cli("generate", "--prompt", "hi", "--save-trace", "/proc/version", *NOT_LOADED),
        "--save-trace /proc/version cannot be written",
    )


def test_output_path_leaves_no_file_behind_and_refuses_a_read_only_one(tmp_path):
    from specviz.cli.args import output_path

    fresh = tmp_path / "new.json"
    assert output_path(fresh, "--save-trace") == fresh and not fresh.exists()
    kept = tmp_path / "old.json"
    kept.write_text("old")
    assert output_path(kept, "--json") == kept and kept.read_text() == "old"
    assert output_path(tmp_path / "a" / "b.json", "--json", make_parents=True).parent.is_dir()
    kept.chmod(0o444)
    if os.access(kept, os.W_OK):
        pytest.skip("running as root: a read-only mode does not stop writing")
    with pytest.raises(OutputError, match="cannot be written: Permission denied"):
        output_path(kept, "--json")


def test_damaged_safetensors_in_a_local_model_is_one_line(tmp_path, local_pair):
    target = Path(local_pair[1])
    damaged = tmp_path / "damaged"
    shutil.copytree(target, damaged)
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # cut short, as by a full disk
    result = run_cli("generate", "--prompt", "abc", "--target", str(damaged), "--drafter", "ngram", "--device", "cpu")
    assert_one_line(result, f"The target model {damaged} has a damaged safetensors file")


def test_damaged_builtin_cache_says_to_prepare_again(tmp_path):
    from specviz.models.sources import Source, call_pretrained, damaged_weights_error

    builtin_source = Source("draft", "builtin", "builtin", str(tmp_path), "the draft")
    assert "delete that folder and run python -m specviz prepare" in str(
        damaged_weights_error(builtin_source, ValueError("x"))
    )
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not weights")

    def load(**_):
        from safetensors.torch import load_file

        return load_file(weights)

    with pytest.raises(ModelLoadError, match="converted weights in .* are damaged"):
        call_pretrained(builtin_source, load)


def test_writing_the_trace_fails_in_one_line(local_pair, tmp_path, monkeypatch, capsys):
    import errno

    from specviz.traces import trace

    def full_disk(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trace, "save_trace", full_disk)
    path = tmp_path / "trace.json"
    code = main(
        ["generate", "--prompt", "abc", "--raw", "--max-new-tokens", "3", "--save-trace", str(path), *local_pair]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"specviz: error: --save-trace {path} could not be written: No space left on device"


# ---------------------------------------------------------------- the success paths


def test_generate_json_with_baseline_and_saved_trace(local_pair, tmp_path, capsys):
    from specviz.traces.trace import load_trace

    path = tmp_path / "trace.json"
    code = main(
        [
            "generate",
            "--prompt",
            "abc ab",
            "--raw",
            "--max-new-tokens",
            "6",
            "--gamma",
            "3",
            "--json",
            "--baseline",
            "--save-trace",
            str(path),
            *local_pair,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    document = json.loads(out)
    new = document["summary"]["new_tokens"]
    assert len(document["token_ids"]) == new and 1 <= new <= 6
    assert document["summary"]["finish_reason"] == ("length" if new == 6 else "eos")  # the tiny models have an EOS
    assert document["config"]["gamma"] == 3 and document["pair"]["target"] == local_pair[1]
    assert document["baseline"]["token_ids"] == document["token_ids"]  # greedy: the same text
    assert document["speedup"] == pytest.approx(
        document["summary"]["tokens_per_second"] / document["baseline"]["tokens_per_second"]
    )
    assert sum(len(r["drafted"]) > 0 for r in document["rounds"]) == len(document["rounds"]) > 0
    saved = load_trace(path)
    assert list(saved.summary.token_ids) == document["token_ids"] and saved.baseline_summary is not None


def test_generate_prints_the_run_and_the_baseline(local_pair, capsys):
    code = main(
        [
            "generate",
            "--prompt",
            "abc ab",
            "--raw",
            "--max-new-tokens",
            "5",
            "--baseline",
            "--alternatives",
            "1",
            *local_pair,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^\d tokens in \d+ rounds, acceptance [\d.]+", out, re.MULTILINE), out
    assert re.search(r"^alternatives: \d+ of \d+ rounds kept one", out, re.MULTILINE), out
    assert re.search(
        r"^baseline \(target alone\): [\d.]+ tok/s; speed-up [\d.]+x; texts identical$", out, re.MULTILINE
    ), out


def test_bench_through_the_cli_on_a_local_pair(local_pair, tmp_path, capsys, frozen_heap):
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"code": ["abc abc", "a b c"], "prose": ["the cat"]}))
    out, curve = tmp_path / "out" / "bench.json", tmp_path / "curve.json"
    code = main(
        [
            "bench",
            *local_pair,
            "--prompts",
            str(prompts),
            "--categories",
            "code,prose",
            "--per-category",
            "1",
            "--max-new-tokens",
            "4",
            "--curve-gammas",
            "1",
            "--no-warmup",
            "--raw",
            "--aggregate",
            "mean",
            "--methods",
            "baseline,speculative,hf_matched",
            "--json",
            str(out),
            "--curve-out",
            str(curve),
            "--metrics-out",
            str(tmp_path / "metrics.prom"),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out.read_text())
    assert_metrics_file(tmp_path / "metrics.prom", doc, [r for r in doc["runs"] if r["method"] == "speculative"])
    assert_page_numbers_printed(tmp_path / "metrics.prom", doc, printed)
    assert doc["settings"]["methods"] == ["baseline", "speculative", "hf_matched"]
    assert doc["settings"]["aggregate"] == "mean" and doc["settings"]["config"]["schedule"] == "auto"
    assert doc["settings"]["hf_matched"]["num_assistant_tokens"] == doc["settings"]["config"]["gamma_max"] == 16
    assert len(doc["runs"]) == 2 * 3 and doc["load_seconds"] > 0
    assert json.loads(curve.read_text())["gamma"] == [0, 1]
    assert "Verify-cost curve" in printed and f"JSON: {out}" in printed and f"verify-cost curve: {curve}" in printed


def vllm_family(path, name: str):
    """One of vLLM's spec_decode counters in a --metrics-out file, read by prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    (family,) = [f for f in text_string_to_metric_families(path.read_text()) if f.name == f"vllm:spec_decode_{name}"]
    return family


def assert_page_numbers_printed(path, doc, printed: str) -> None:
    """The file read as the Your server page reads a scrape: its counters, the bench's times beside them, and so the
    page's rates and advice, are the ones the bench printed under "Prometheus metrics"."""
    from specviz.lessons.advisor import advise
    from specviz.lessons.server_metrics import read_exposition

    found = read_exposition(path.read_text(), 0.0)
    curve = doc["verify_curve"]
    assert found.timing["target_seconds"] == pytest.approx(curve["target_seconds"], rel=1e-12)
    assert found.timing["draft_step_seconds"] == pytest.approx(curve["draft_step_seconds"], rel=1e-12)
    assert found.timing["device_name"] == curve["device_name"] and found.timing["dtype"] == curve["dtype"]
    m = found.counters.metrics()
    rate = f"acceptance rate {m.acceptance_rate:.1%}" if m.drafts else "acceptance rate —"
    assert f"{m.drafts} drafts, {m.draft_tokens} drafted tokens, {m.accepted_tokens} accepted: {rate}" in printed
    advice = advise(m.conditional_acceptance_rate, 0.0, found.timing) if m.accepted_per_position else None
    if advice is not None:
        assert advice.sentence in printed and f"c = {advice.c:.3f}, verify as this bench timed it" in printed


def assert_metrics_file(path, doc, runs) -> None:
    """--metrics-out: vLLM's counters, read back by prometheus-client's parser, add up to the runs' own rounds."""
    families = {
        f"vllm:spec_decode_{n}": vllm_family(path, n)
        for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
    }
    drafted = sum(n for r in runs for n in r["stats"]["drafted_per_round"])
    drafts = sum(n > 0 for r in runs for n in r["stats"]["drafted_per_round"])
    accepted = sum(n for r in runs for n in r["stats"]["accepted_per_round"])
    method = doc["settings"]["config"]["drafter"]
    for name, want in (("num_drafts", drafts), ("num_draft_tokens", drafted), ("num_accepted_tokens", accepted)):
        (sample,) = families[f"vllm:spec_decode_{name}"].samples
        assert sample.labels == {"model_name": doc["pair"]["target"], "method": method} and sample.value == want
    first = sum(n > 0 for r in runs for n in r["stats"]["accepted_per_round"])
    per_position = {
        s.labels["position"]: s.value for s in families["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
    }
    assert per_position.get("0", 0) == first and sum(per_position.values()) == accepted


def test_bench_refuses_metrics_out_with_batch_before_loading(tmp_path, cli):
    result = cli("bench", "--batch", "1,2", "--metrics-out", str(tmp_path / "m.prom"), *NOT_LOADED)
    assert_one_line(result, "--metrics-out is not written by --batch")
    result = cli("bench", "--metrics-out", str(tmp_path), "--methods", "baseline,speculative", *NOT_LOADED)
    assert_one_line(result, f"--metrics-out {tmp_path} is a directory")


def test_bench_refuses_an_unwritable_json_before_loading(tmp_path, cli):
    result = cli("bench", "--json", str(tmp_path), "--methods", "baseline,speculative", *NOT_LOADED)
    assert_one_line(result, f"--json {tmp_path} is a directory")


def test_bench_stream_through_the_cli_with_repeats(local_pair, tmp_path, capsys, frozen_heap):
    stream = tmp_path / "stream.json"
    requests = [{"prompt": "abc abc", "phase": "a"}, {"prompt": "abc abc", "phase": "a"}] + [
        {"prompt": "x y", "phase": "b"}
    ] * 3
    stream.write_text(json.dumps({"name": "s", "requests": requests}))
    out = tmp_path / "stream-out.json"
    args = ["bench", *local_pair, "--stream", str(stream), "--raw", "--max-new-tokens", "4", "--no-warmup"]
    assert main([*args, "--repeats", "2", "--json", str(out), "--metrics-out", str(tmp_path / "m.prom")]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    drafts = {s.labels["method"]: s.value for s in vllm_family(tmp_path / "m.prom", "num_drafts").samples}
    assert drafts == {d: sum(row[d]["drafts"] for row in doc["requests"]) for d in ("model", "traffic", "controller")}
    assert doc["repeats"] == 2 and doc["aggregate"] == "min" and len(doc["requests"]) == 5
    assert all(len(row["controller"]["repeat_speedups"]) == 2 for row in doc["requests"])
    assert "drift at request 3" in printed and re.search(
        r"^back within 10%: (first after 3 request|never)", printed, re.M
    )


def test_bench_stream_refuses_bad_repeats_before_loading(tmp_path, cli):
    stream = tmp_path / "stream.json"
    stream.write_text(json.dumps({"requests": [{"prompt": "abc", "phase": "a"}]}))
    result = cli("bench", "--stream", str(stream), "--repeats", "0", *NOT_LOADED)
    assert_one_line(result, "--repeats: must be between 1 and 20, got 0")


# --- issue 44: every case a hostile user found, one line and exit 2 before loading ------------------------------


def nested(depth: int) -> str:
    return '{"requests": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(
    "body, message",
    [
        (nested(100_000), "nested too deeply"),
        ('{"requests": [{"x": 1}]}', "requests[0]"),
        ('{"requests": [{"prompt": 5}]}', "requests[0].prompt"),
        ('{"requests": []}', "requests"),
        ('{"requests": [{"prompt": "' + "a" * 8001 + '"}]}', "requests[0].prompt"),
        ('{"code": ["' + "a" * 8001 + '"]}', "request 1 of 1: the prompt is 8001 characters long"),
        ('{"code": [5]}', "list of prompts"),
        ('{"requests": [{"prompt": "   "}]}', "request 1 of 1: the prompt is empty"),
        ("[1, 2]", "expected {'requests'"),
    ],
)
def test_bench_stream_refuses_a_bad_stream_file_before_loading(body, message, tmp_path, cli):
    stream = tmp_path / "stream.json"
    stream.write_text(body)
    assert_one_line(cli("bench", "--stream", str(stream), *NOT_LOADED), message)


def test_bench_stream_reads_at_most_a_few_megabytes(cli):
    assert_one_line(cli("bench", "--stream", "/dev/zero", *NOT_LOADED), "over 4 MB, the most a stream file may hold")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--stream", ""], "--stream needs a value"),
        (["--batch", ""], "--batch needs a value"),
        (["--batch", " "], "--batch needs a value"),
        (["--compare-drafters", ""], "--compare-drafters needs a value"),
        (["--batch", "1", "--batch-repeats", "0"], "--batch-repeats: must be between 1 and 20, got 0"),
        (["--threads", "-1"], "--threads: must be between 1 and 1024, got -1"),
        (["--threads", "0"], "--threads: must be between 1 and 1024, got 0"),
        (["--threads", "-1", "--batch", "1"], "--threads: must be between"),
        (["--threads", "-1", "--compare-drafters", "ngram"], "--threads: must be between"),
        (["--threads", "0", "--stream", "assets/streams/inventory_drift.json"], "--threads: must be between"),
    ],
)
def test_bench_modes_refuse_a_bad_argument_before_loading(args, message, cli):
    assert_one_line(cli("bench", *args, *NOT_LOADED), message)


def test_train_heads_refuses_a_seed_torch_cannot_take_before_loading(cli):
    result = cli("train-heads", "--seed", "99999999999999999999999", "--target", "/nonexistent/model-dir")
    assert_one_line(result, "--seed: must be between 0 and 18446744073709551615")
    assert_one_line(cli("train-heads", "--seed", "-1", "--target", "/nonexistent/model-dir"), "--seed: must be")


def test_a_long_trainings_report_keeps_a_curve_the_loader_reads():
    from specviz.drafters.heads_report import MAX_CURVE, check_report
    from specviz.training.train import TrainReport, TrainStep, loss_curve

    steps = [TrainStep(i + 1, 1 + i // 10_000, 1.0 / (i + 1), (0.5,)) for i in range(50_001)]
    curve = loss_curve(steps)
    assert len(curve) <= MAX_CURVE and curve[-1]["step"] == 50_001 and curve[0]["step"] <= 3
    assert [p["step"] for p in loss_curve(steps[:5])] == [1, 2, 3, 4, 5]  # a short training keeps every step
    report = TrainReport(1, 100, 20, 50, 1.0, 1.0, [0.5], [0.7], curve=curve, data="text")
    assert len(check_report(report.to_dict())["curve"]) == len(curve)


@pytest.mark.parametrize("drafter", ["traffic", "controller"])
def test_generate_with_the_traffic_drafters_runs_to_the_end(drafter, local_pair, cli):
    result = cli("generate", "--prompt", "abc abc abc", "--drafter", drafter, "--max-new-tokens", "8", *local_pair)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "--- speculative" in result.stdout
