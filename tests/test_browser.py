"""The real app in a real browser: `streamlit run app.py` on a free localhost port, driven by headless
Chromium through Playwright. Runs a prompt, waits for the rounds, checks the chips and the speed-up,
and saves a screenshot under the test's tmp_path.

The main test uses the built-in pair (skipped with a reason when its cache is not prepared, failed
instead under SPECVIZ_REQUIRE_BUILTIN=1). A second, fast variant runs the same flow on the tiny pair.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.browser import CHROMIUM_ARGS, AppStartError, chromium_path, free_port, start_app, stop_app

PROSE = "Describe a quiet morning in a small coastal town in three sentences."

pytestmark = pytest.mark.browser


def drive(url: str, shot: Path, max_new_tokens: int, run_timeout_s: float) -> dict:
    """Type a prompt, run it, step through the rounds; returns what was seen on the page."""
    from playwright.sync_api import expect, sync_playwright

    seen = {"accepted": False, "rejected": False, "speedup": None}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            page.goto(url, wait_until="domcontentloaded")
            expect(page.get_by_role("heading", name="A small model writes ahead, a big model checks")).to_be_visible(
                timeout=60_000)
            tokens = page.get_by_label("Max new tokens")
            tokens.fill(str(max_new_tokens))
            tokens.press("Enter")
            prompt = page.get_by_label("Prompt", exact=True)
            prompt.fill(PROSE)
            prompt.press("Control+Enter")                        # commits the text area
            page.wait_for_timeout(500)
            page.get_by_role("button", name="Run", exact=True).click()
            expect(page.get_by_role("heading", name="Showing your run")).to_be_visible(timeout=run_timeout_s * 1000)
            speedup = page.locator('[data-testid="stMetric"]').filter(has_text="Speed-up")
            expect(speedup).to_be_visible()
            seen["speedup"] = speedup.locator('[data-testid="stMetricValue"]').inner_text()
            for _ in range(40):                                   # step through the rounds
                seen["accepted"] |= page.locator(".sv-chip.sv-accepted").count() > 0
                seen["rejected"] |= page.locator(".sv-chip.sv-rejected").count() > 0
                if seen["accepted"] and seen["rejected"]:
                    break
                forward = page.get_by_role("button", name="Next")
                if forward.count() == 0 or not forward.first.is_enabled():
                    break
                head = page.locator(".sv-round-head").first.inner_text()
                forward.first.click()
                try:
                    expect(page.locator(".sv-round-head").first).not_to_have_text(head, timeout=10_000)
                except AssertionError:
                    break                                         # the last round
            page.wait_for_timeout(1500)                           # let the charts draw
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return seen


def run_in_browser(tmp_path: Path, env_extra: dict[str, str], max_new_tokens: int, run_timeout_s: float) -> dict:
    if chromium_path() is None:
        pytest.skip("no chromium executable (apt-get install chromium)")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env_extra}
    if "SPECVIZ_PAIR" not in env_extra:
        env.pop("SPECVIZ_PAIR", None)
    try:
        process = start_app(port, env, tmp_path / "streamlit.log")
    except AppStartError as exc:
        pytest.fail(str(exc))
    try:
        return drive(f"http://localhost:{port}/", tmp_path / "step_through.png", max_new_tokens, run_timeout_s)
    finally:
        stop_app(process)


def check(seen: dict, tmp_path: Path) -> None:
    assert (tmp_path / "step_through.png").stat().st_size > 10_000
    assert seen["accepted"], "no accepted draft chip on any round"
    assert seen["rejected"], "no rejected draft chip on any round"
    assert seen["speedup"] and seen["speedup"].endswith("×"), seen["speedup"]


def test_step_through_in_a_real_browser_on_the_builtin_pair(tmp_path):
    try:
        from specviz.builtin import builtin_ready
    except ImportError:
        pytest.skip("specviz.builtin is not available yet")
    if not builtin_ready():
        if os.environ.get("SPECVIZ_REQUIRE_BUILTIN") == "1":
            pytest.fail("the built-in pair is not prepared: run python -m specviz prepare")
        pytest.skip("the built-in pair is not prepared (python -m specviz prepare)")
    seen = run_in_browser(tmp_path, {}, max_new_tokens=24, run_timeout_s=600)
    check(seen, tmp_path)


def test_step_through_in_a_real_browser_on_the_tiny_pair(tmp_path):
    seen = run_in_browser(tmp_path, {"SPECVIZ_PAIR": "tiny", "OMP_NUM_THREADS": "1"}, max_new_tokens=32,
                          run_timeout_s=120)
    check(seen, tmp_path)
