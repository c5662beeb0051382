"""The Your server page in a real browser on an exposed server (streamlit run app.py --server.address 0.0.0.0): it
offers the owner's endpoint (SPECVIZ_METRICS_URL, served by a local HTTP server the test starts) and no box to type
an address, since on an exposed server a visitor could make it fetch addresses only the server can reach."""

from __future__ import annotations

import pytest
from helpers.browser import HOME_TITLE, TINY, served
from helpers.metrics_server import metrics_server

from specviz.serving.scrape import METRICS_URL_ENV
from specviz.ui import your_server

pytestmark = pytest.mark.browser


def test_an_exposed_server_offers_no_url_box(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from scripts.browser import CHROMIUM_ARGS, chromium_path

    with metrics_server() as metrics:
        env = {**TINY, METRICS_URL_ENV: metrics + "/vllm"}
        with served(tmp_path, env, address="0.0.0.0") as url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1024, "height": 768})
                page.goto(url, wait_until="domcontentloaded")
                expect(page.get_by_role("heading", name=HOME_TITLE)).to_be_visible(timeout=60_000)
                page.get_by_role("link", name="Your server").first.click()
                expect(page.get_by_role("heading", name="Your server")).to_be_visible(timeout=60_000)
                expect(page.get_by_text(your_server.RECORDING, exact=True)).to_be_visible()
                expect(page.get_by_text(your_server.CONFIGURED, exact=True)).to_be_visible()
                assert page.get_by_text(your_server.TYPED, exact=True).count() == 0
                assert page.get_by_label("Metrics endpoint").count() == 0
                assert page.get_by_placeholder("http://localhost:8000/metrics").count() == 0
                page.get_by_text(your_server.CONFIGURED, exact=True).click()
                expect(page.get_by_text("measured now from a vLLM server")).to_be_visible(timeout=30_000)
                page.screenshot(path=str(tmp_path / "your_server_exposed.png"), full_page=True)
            finally:
                browser.close()
