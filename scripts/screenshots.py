"""Screenshots of the real app on the built-in pair for the README (assets/screenshots/*.png).

Usage: .venv/bin/python -m scripts.screenshots [race lab alternatives]   (after python -m specviz prepare)
Starts `streamlit run app.py` on a free localhost port and drives headless Debian Chromium:
- race: the Race page replaying the first recorded trace that includes plain decoding;
- lab:  the Acceptance lab running one prompt per category with both drafters (greedy, 24 tokens);
- alternatives: Step through on the recorded prose run with alternatives, at a round that kept one;
- experiment: the Lossless page's first guided experiment (Break the algorithm) on the recorded p and q. It
  needs no model: `SPECVIZ_PAIR=tiny ... scripts.screenshots experiment` keeps the built-in pair unloaded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from scripts.browser import CHROMIUM_ARGS, ROOT, chromium_path, free_port, start_app, stop_app

OUT = ROOT / "assets" / "screenshots"
VIEWPORT = {"width": 1440, "height": 1800}


def race(page, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/race", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Race: plain decoding against speculative decoding")).to_be_visible(
        timeout=60_000
    )
    expect(page.get_by_text("identical", exact=False).first).to_be_visible(timeout=120_000)
    page.wait_for_timeout(20_000)  # let the shared-clock replay reach its end
    page.screenshot(path=str(OUT / "race.png"), full_page=True)


def lab(page, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/acceptance_lab", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Acceptance lab: when does the draft guess right?")).to_be_visible(
        timeout=60_000
    )
    tokens = page.get_by_label("Max new tokens")
    tokens.fill("24")
    tokens.press("Enter")
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Run the batch").click()
    expect(page.get_by_role("heading", name="runs", exact=False).first).to_be_visible(timeout=900_000)
    page.wait_for_timeout(3000)  # let the charts draw
    page.screenshot(path=str(OUT / "acceptance_lab.png"), full_page=True)


def alternatives(page, base: str) -> None:
    from playwright.sync_api import expect

    from specviz.traces.trace import load_trace

    name = "5_prose_auto_alternatives"
    trace = load_trace(ROOT / "assets" / "traces" / f"{name}.json")
    kept = next(r.index for r in trace.rounds if r.kept_alternative is not None)
    page.goto(base, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="A small model writes ahead, a big model checks")).to_be_visible(
        timeout=60_000
    )
    page.get_by_role("button", name="Replay a file").click()
    page.get_by_label("…or a recorded run").click()
    page.get_by_role("option", name=name.replace("_", " ")).click()
    page.keyboard.press("Escape")
    expect(page.get_by_text("Round 1", exact=False).first).to_be_visible(timeout=60_000)
    for _ in range(kept):
        page.get_by_role("button", name="Next").click()
        page.wait_for_timeout(1500)
    expect(page.get_by_text("alternative kept", exact=False).first).to_be_visible(timeout=30_000)
    page.wait_for_timeout(3000)  # let the chart draw
    round_head = page.locator(".sv-round-head").first
    round_head.evaluate("element => element.scrollIntoView()")  # the app scrolls inside its main section
    page.wait_for_timeout(1000)
    head = round_head.bounding_box()
    page.screenshot(
        path=str(OUT / "alternatives.png"),
        clip={
            "x": 300,
            "y": head["y"] - 20,
            "width": VIEWPORT["width"] - 300,
            "height": min(1150, VIEWPORT["height"] - head["y"] + 20),
        },
    )


def experiment(page, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/lossless", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Lossless: exactly the target's distribution")).to_be_visible(
        timeout=60_000
    )
    expect(page.get_by_text("Recorded result", exact=False).first).to_be_visible(timeout=60_000)
    page.get_by_text("Guided experiments", exact=False).first.click()
    page.get_by_role("button", name="Set it").first.click()
    expect(page.get_by_text("What you should see", exact=False).first).to_be_visible(timeout=60_000)
    page.wait_for_timeout(3000)  # let the chart redraw
    metrics = page.get_by_text("TV(speculative, p)", exact=False).first
    metrics.evaluate("element => element.scrollIntoView()")  # the app scrolls inside its main section
    page.wait_for_timeout(1000)
    top = metrics.bounding_box()["y"] - 150
    page.screenshot(
        path=str(OUT / "experiment.png"),
        clip={
            "x": 300,
            "y": max(0, top),
            "width": VIEWPORT["width"] - 300,
            "height": min(1250, VIEWPORT["height"] - max(0, top)),
        },
    )


SHOTS = {"race": race, "lab": lab, "alternatives": alternatives, "experiment": experiment}
NO_MODEL = {"experiment"}  # shots of recorded results only: they run on the pair SPECVIZ_PAIR names


def main(names: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    if chromium_path() is None:
        sys.exit("no chromium executable: apt-get install chromium")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if not names or not set(names) <= NO_MODEL:
        env.pop("SPECVIZ_PAIR", None)
    port = free_port()
    log = Path("/tmp") / f"specviz-screenshots-{port}.log"
    process = start_app(port, env, log)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            try:
                for name in names or list(SHOTS):
                    page = browser.new_page(viewport=VIEWPORT)
                    SHOTS[name](page, f"http://localhost:{port}")
                    print(f"saved {name}")
                    page.close()
            finally:
                browser.close()
    finally:
        stop_app(process)


if __name__ == "__main__":
    main(sys.argv[1:])
