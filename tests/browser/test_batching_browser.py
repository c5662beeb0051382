"""Issue 44: the Batching page's live run on a shared server (the tiny pair on 0.0.0.0, two browser sessions) is a
background job: its Stop button ends it within a few seconds and another session's run, waiting for the device,
then starts; closing its tab does the same; a batch beyond the visitor's budget is refused before it starts."""

from __future__ import annotations

import time

import pytest
from helpers.browser import HOME_TITLE, TINY, commit_text, served

pytestmark = pytest.mark.browser

# within the budgets (64 rows x (3 prompt tokens + 64) x 14 runs = 60,032 rows x tokens, each speculative run after
# a plain one; 2,560 passes + 448 for the prompt alone), many seconds on the tiny pair
LONG = "64"
WAITING = "Another run (from another tab or user) is using the models"
SOON_S = 5  # "within a few seconds"


def open_batching(context, url: str):
    from playwright.sync_api import expect

    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name=HOME_TITLE)).to_be_visible(timeout=60_000)
    page.get_by_role("link", name="Batching").first.click()
    expect(page.get_by_role("heading", name="Batching: when speculation stops paying")).to_be_visible(timeout=30_000)
    return page


def start_run(page, sizes: str, tokens: int, prompts: str = "abc") -> None:
    """Fill in the form (on the first screen) and press Run the batches."""
    from playwright.sync_api import expect

    commit_text(page, page.get_by_label("Batch sizes", exact=True), sizes, key="Enter")
    commit_text(page, page.get_by_label("Prompts, one per line (cycled to fill the largest batch)"), prompts)
    slider = page.get_by_role("slider", name="New tokens per row")
    slider.focus()
    for _ in range(64):  # to the end of its range (ArrowRight steps one; End is not always honoured)
        page.keyboard.press("ArrowRight" if tokens == 64 else "ArrowLeft")
    page.wait_for_timeout(700)
    run = page.get_by_role("button", name="Run the batches")
    expect(run).to_be_enabled(timeout=10_000)
    run.click()


def hold_and_wait(a, b, b_sizes: str) -> None:
    """A starts the long run and holds the device; B's small run (4 new tokens) is shown waiting for it."""
    from playwright.sync_api import expect

    start_run(a, LONG, 64)
    expect(stop_button(a)).to_be_visible(timeout=30_000)
    a.wait_for_timeout(1500)
    start_run(b, b_sizes, 4)
    expect(b.get_by_text(WAITING)).to_be_visible(timeout=30_000)


def stop_button(page):
    return page.get_by_role("button", name="Stop", exact=True)


def test_a_batching_run_stops_on_stop_and_on_a_closed_tab_and_the_budget_refuses_before_the_run(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from scripts.browser import CHROMIUM_ARGS, chromium_path

    with served(tmp_path, TINY, address="0.0.0.0") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            ctx_a, ctx_b = (browser.new_context(viewport={"width": 1440, "height": 2400}) for _ in range(2))
            a, b = open_batching(ctx_a, url), open_batching(ctx_b, url)
            # a batch beyond the budget, stated beside the button: one line, no run (no Stop button, no waiting)
            start_run(b, "64", 64, prompts=" ".join(["word"] * 200))
            expect(b.get_by_text("its largest batch takes at most 8,192 rows x tokens").first).to_be_visible()
            expect(b.get_by_text("this shared server allows 8,192 per run")).to_be_visible(timeout=30_000)
            assert stop_button(b).count() == 0

            # A's long run holds the device; B's small run waits for it
            hold_and_wait(a, b, "1")

            pressed = time.monotonic()
            stop_button(a).click()
            expect(a.get_by_text("Your run was stopped before it finished")).to_be_visible(timeout=SOON_S * 1000)
            print(f"stopped after {time.monotonic() - pressed:.1f} s")
            expect(b.get_by_text("your run", exact=True).first).to_be_visible(timeout=30_000)  # B's run started, ran

            # the same through a closed tab: B's next run waits for A's, then runs once A's tab is gone
            hold_and_wait(a, b, "1,2")
            closed = time.monotonic()
            ctx_a.close()
            expect(b.get_by_text(WAITING)).to_be_hidden(timeout=(SOON_S + 5) * 1000)  # 2 s grace, then a round
            print(f"B's run started {time.monotonic() - closed:.1f} s after A's tab closed")
            expect(stop_button(b)).to_be_hidden(timeout=30_000)  # B's run has finished
        finally:
            browser.close()
