"""The app served by `streamlit run app.py` on a free localhost port and driven by headless Chromium through
Playwright (scripts/browser.py starts and stops it). Shared servers are fixtures in tests/conftest.py."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from scripts.browser import CHROMIUM_ARGS, AppStartError, chromium_path, free_port, start_app, stop_app

TINY = {"SPECVIZ_PAIR": "tiny", "OMP_NUM_THREADS": "1"}  # the app on the tiny random pair, one thread
HOME_TITLE = "A small model writes ahead, a big model checks"
PROSE = "Describe a quiet morning in a small coastal town in three sentences."
T = TypeVar("T")

# The page has settled: its web fonts have loaded (text measured in a fallback font is wider), the script is not
# running and nothing on the page changed for 300 ms (at most 10 s: a race's replay keeps drawing).
SETTLED_JS = """() => document.fonts.ready.then(() => new Promise(resolve => {
  const app = document.querySelector('.stApp');
  let quiet, last = Date.now() + 10000;
  const done = () => {
    if (app.dataset.testScriptState === 'running' && Date.now() < last) { quiet = setTimeout(done, 100); return; }
    observer.disconnect(); resolve(true); };
  const observer = new MutationObserver(() => { clearTimeout(quiet); quiet = setTimeout(done, 300);
      if (Date.now() > last) { observer.disconnect(); resolve(false); } });
  observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
  quiet = setTimeout(done, 300);
}))"""


@contextmanager
def home_page(url: str) -> Iterator:
    """A headless Chromium page on the app's first page, once its title shows."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 2400})
            page.goto(url, wait_until="domcontentloaded")
            expect(page.get_by_role("heading", name=HOME_TITLE)).to_be_visible(timeout=60_000)
            yield page
        finally:
            browser.close()


@contextmanager
def served_process(folder: Path, env_extra: dict[str, str], address: str = "localhost") -> Iterator[tuple[str, Any]]:
    """`streamlit run app.py` on a free port (its log in `folder`), listening on `address` (0.0.0.0: as an
    exposed server); yields its localhost URL and its process."""
    if chromium_path() is None:
        pytest.skip("no chromium executable (apt-get install chromium)")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env_extra}
    if "SPECVIZ_PAIR" not in env_extra:
        env.pop("SPECVIZ_PAIR", None)
    try:
        process = start_app(port, env, folder / "streamlit.log", address=address)
    except AppStartError as exc:
        pytest.fail(str(exc))
    try:
        yield f"http://localhost:{port}/", process
    finally:
        stop_app(process)


@contextmanager
def served(folder: Path, env_extra: dict[str, str], address: str = "localhost") -> Iterator[str]:
    """served_process's URL alone."""
    with served_process(folder, env_extra, address) as (url, _):
        yield url


def set_max_new_tokens(page, count: int) -> None:
    from playwright.sync_api import expect

    tokens = page.get_by_label("Max new tokens")
    # while a rerun draws (a second visitor's first load, under load) the stale input and its replacement can both be
    # on the page for a moment: wait for the one that stays (seen once in CI: "resolved to 2 elements")
    expect(tokens).to_have_count(1, timeout=30_000)
    tokens.fill(str(count))
    tokens.press("Enter")


def lasting(page, look: Callable[[], T], seconds: float) -> T:
    """What look() finds and still finds `seconds` later, looking again every 250 ms; an empty finding ends it. A
    settled page can still be drawing what SETTLED_JS cannot see: a table's canvas after a resize, text measured
    before its fonts loaded."""
    for _ in range(round(seconds / 0.25)):
        found = look()
        if not found:
            return found
        page.wait_for_timeout(250)
    return look()


def commit_text(page, box, text: str, key: str = "Control+Enter") -> None:
    """Type text into a box and commit it (a text area: Control+Enter; an input: Enter), once the page has settled,
    then wait until the rerun the commit starts has settled too. Typed into while a rerun draws, a box can be
    replaced by its redrawn copy and the text lost: the run would then use the default prompt (seen under load)."""
    from playwright.sync_api import expect

    for _ in range(3):
        page.evaluate(SETTLED_JS)
        box.fill(text)
        box.press(key)
        page.evaluate(SETTLED_JS)
        if box.input_value() == text:
            break
    expect(box).to_have_value(text)


def drive(url: str, shot: Path, max_new_tokens: int, run_timeout_s: float) -> dict:
    """Type a prompt, run it, step through the rounds; returns what was seen on the page."""
    from playwright.sync_api import expect

    seen = {"accepted": False, "rejected": False, "speedup": None}
    with home_page(url) as page:
        set_max_new_tokens(page, max_new_tokens)
        commit_text(page, page.get_by_label("Prompt", exact=True), PROSE)
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.get_by_role("heading", name="Showing your run")).to_be_visible(timeout=run_timeout_s * 1000)
        speedup = page.locator('[data-testid="stMetric"]').filter(has_text="Speed-up")
        expect(speedup).to_be_visible()
        seen["speedup"] = speedup.locator('[data-testid="stMetricValue"]').inner_text()
        for _ in range(40):  # step through the rounds
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
                break  # the last round
        page.wait_for_timeout(1500)  # let the charts draw
        page.screenshot(path=str(shot), full_page=True)
    return seen


def check(seen: dict, tmp_path: Path) -> None:
    assert (tmp_path / "step_through.png").stat().st_size > 10_000
    assert seen["accepted"], "no accepted draft chip on any round"
    assert seen["rejected"], "no rejected draft chip on any round"
    # a finite, positive number then ×: "nan×", "inf×" or "0.00×" would mean the rates were not measured
    match = re.fullmatch(r"(\d+\.\d+)×", (seen["speedup"] or "").strip())
    assert match and 0 < float(match.group(1)) < 100, seen["speedup"]
