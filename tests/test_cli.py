"""The command line: bad input gives one clear line on stderr and exit status 2, never a traceback."""
import subprocess
import sys

import pytest

from specviz.__main__ import main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specviz", *args], capture_output=True, text=True,
                          timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("args, message", [
    (["--prompt", ""], "prompt is empty"),
    (["--prompt", "   "], "prompt is empty"),
    (["--prompt", "hi", "--gamma", "0"], "gamma must be between 1"),
    (["--prompt", "hi", "--max-new-tokens", "0"], "max new tokens must be between 1"),
    (["--prompt", "hi", "--max-new-tokens", "100000"], "max new tokens must be between 1"),
    (["--prompt", "hi", "--temperature", "-0.5"], "temperature must be >= 0"),
    (["--prompt", "hi", "--top-p", "0"], "top-p must be in (0, 1]"),
    (["--prompt", "hi", "--top-p", "1.2"], "top-p must be in (0, 1]"),
    (["--prompt", "hi", "--gamma", "two"], "invalid int value"),
    (["--prompt", "hi", "--alternatives", "9"], "alternatives must be between 0 (off) and 8"),
    (["--prompt", "hi", "--target", "no-such-org/no-such-model-xyz", "--draft", "no-such-org/tiny"], "no-such-org/no-such-model-xyz"),
    (["--prompt", "hi", "--target", "/nonexistent/dir", "--drafter", "ngram"], "/nonexistent/dir"),
    (["--prompt", "hi", "--target", "some/model"], "needs --draft"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = run_cli("generate", *args)
    assert result.returncode == 2, result.stderr
    # Progress lines (one per loading stage, no carriage returns) may come first; the error is one line, last.
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("specviz: error:")]
    assert errors == lines[-1:], result.stderr
    assert all(line.startswith("[") for line in lines[:-1]) and "\r" not in result.stderr, result.stderr
    assert message in lines[-1] and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_missing_subcommand():
    result = run_cli()
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_in_process_main_returns_2(capsys):
    assert main(["generate", "--prompt", "x", "--top-k", "-3"]) == 2
    assert "top-k must be >= 0" in capsys.readouterr().err


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
