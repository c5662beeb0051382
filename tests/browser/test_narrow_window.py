"""Every page in a window 1024 px wide with the sidebar open, in headless Chromium on the tiny pair (each page opens
on a recorded result): no metric, button or widget label ends in an ellipsis because it does not fit, and no formula
is wider than its column. A browser review found numbers cut to "3…" and half equations at this width."""

from __future__ import annotations

import pytest
from helpers.browser import SETTLED_JS, lasting

from scripts.browser import CHROMIUM_ARGS, chromium_path

pytestmark = pytest.mark.browser

PAGES = {  # path: the page's title, as it shows once the page has drawn
    "": "A small model writes ahead, a big model checks",
    "race": "Race: plain decoding against speculative decoding",
    "theory": "Theory: how much faster can it be?",
    "acceptance_lab": "Acceptance lab: when does the draft guess right?",
    "lossless": "Lossless",
    "heads": "Heads: speculation from the target's own hidden state",
    "learning": "A speculator that learns from the requests it serves",
    "batching": "Batching",
}
# text Streamlit cuts with an ellipsis when it overflows, and formulas wider than their box
CLIPPED = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const cut = [...main.querySelectorAll(
      '[data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *, button *, [data-testid="stWidgetLabel"] *')]
    .filter(el => getComputedStyle(el).textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1)
    .map(el => el.innerText.trim()).filter(Boolean);
  const formulas = [...main.querySelectorAll('.katex-display')]
    .filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.innerText.slice(0, 40));
  return {cut, formulas};
}"""


def lasting_clips(page) -> dict:
    """What CLIPPED finds once the page has settled and still finds 4 s later (empty: nothing cut): the recorded
    result's metrics, charts and formulas draw after the title, and text measured before the page's fonts (KaTeX's
    load late) is wider."""
    page.evaluate(SETTLED_JS)
    return lasting(page, lambda: {part: found for part, found in page.evaluate(CLIPPED).items() if found}, 4)


def test_every_page_fits_a_window_1024_px_wide(tiny_app, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    seen, url = {}, tiny_app
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1024, "height": 2700})
            for path, title in PAGES.items():
                page.goto(url + path, wait_until="domcontentloaded")
                expect(page.get_by_role("heading", name=title).first).to_be_visible(timeout=60_000)
                seen[path or "step_through"] = lasting_clips(page)
            page.screenshot(path=str(tmp_path / "batching_1024.png"))
        finally:
            browser.close()
    clipped = {name: found for name, found in seen.items() if found}
    assert not clipped, clipped
    assert len(seen) == len(PAGES)
