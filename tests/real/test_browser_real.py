"""The real app in a real browser on the built-in pair: a prompt run to its end, its rounds stepped through, the
chips and the speed-up checked (tests/browser/test_browser.py runs the same flow on the tiny pair). Skipped with a
reason when the pair's cache is not prepared, failed instead under SPECVIZ_REQUIRE_BUILTIN=1."""

from __future__ import annotations

import os

import pytest
import torch
from helpers.browser import check, drive, served

# Its server loads its own copy of the pair: conftest.py runs it before this process loads one (fixture builtin_pair).
pytestmark = [pytest.mark.browser, pytest.mark.real]


def test_step_through_in_a_real_browser_on_the_builtin_pair(tmp_path):
    try:
        from specviz.models.builtin import builtin_ready
    except ImportError:
        pytest.skip("specviz.models.builtin is not available yet")
    if not builtin_ready():
        if os.environ.get("SPECVIZ_REQUIRE_BUILTIN") == "1":
            pytest.fail("the built-in pair is not prepared: run python -m specviz prepare")
        pytest.skip("the built-in pair is not prepared (python -m specviz prepare)")
    # The server's threads: this test's own (conftest's _threads: every core, or this xdist worker's share).
    with served(tmp_path, {"OMP_NUM_THREADS": str(torch.get_num_threads())}) as url:
        seen = drive(url, tmp_path / "step_through.png", max_new_tokens=24, run_timeout_s=600)
    check(seen, tmp_path)
